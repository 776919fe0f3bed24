// What orchc knows of a launch before it runs, for the speed passes' choices: how many blocks of
// how many threads it has at the params' defaults, and how many of them can be resident at once
// on the target (an upper bound: the most SMs of any device of the architecture times the blocks
// an SM holds by its threads, blocks, shared memory and, once the kernel is compiled, registers,
// counted as cudaOccupancyMaxActiveBlocksPerMultiprocessor counts them). A launch with more
// blocks than that runs in several waves: its own run time, not the launch latency the speed
// passes hide, dominates, and there programmatic edges and guarded unrolling measured slower
// than a plain graph (bench/real_bench.py, docs/performance.md "On real kernels").
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "lowering/mir.h"
#include "lowering/cubin_resources.h"
#include "lowering/lir.h"

namespace orch::lowering {

// One SM's capacity and how many SMs: from the target profile.
struct Residency {
  std::string arch;  // "sm_90", for messages
  uint32_t sms = 0;  // 0: unknown (no decision can rely on it)
  uint32_t threads_per_sm = 0, blocks_per_sm = 0;
  uint64_t shared_per_sm = 0;
  uint32_t reserved_shared_per_block = 0, shared_allocation_unit = 1;
  uint32_t registers_per_sm = 0;  // 0: registers are not counted
  RegisterFile registers;
};

Residency residency_of(const TargetProfile& profile);

// The most blocks of `threads` threads, `shared` bytes of dynamic shared memory and `demand`
// resident at once on `r` (all its SMs); `*limit` names the bound that decided.
uint64_t resident_blocks(const Residency& r, std::optional<uint64_t> threads, uint64_t shared,
                         const BlockDemand& demand, const char** limit);

struct LaunchShape {
  std::optional<uint64_t> blocks;   // unknown: it depends on the GPU's data, the rank, or a param without a default
  std::optional<uint64_t> threads;  // per block
  uint64_t resident = 0;            // the most blocks of this launch resident at once (0: unknown)
  const char* limit = "";           // what bounds the blocks per SM: "threads", "registers", ...
  BlockDemand demand;               // its compiled kernel's, where known
  uint64_t shared = 0;              // dynamic shared memory per block at the defaults
  // Known to fit in one wave (every block resident at once) on every device of the target.
  bool one_wave() const { return blocks && resident && *blocks <= resident; }
  // The waves it runs after its first (0 where it fits in one); nullopt where not known.
  std::optional<uint64_t> extra_waves() const {
    if (!blocks || !resident) return std::nullopt;
    return (*blocks + resident - 1) / resident - 1;
  }
  // "4096 blocks of 256 threads, more than the 1056 an sm_90 holds at once (132 SMs x 8)".
  std::string describe(const Residency& r) const;
};

// The value of `e` with the params at their defaults and a family's index at `member` (where
// given); nullopt where a leaf is not known before the launch or it does not fit in u64.
std::optional<uint64_t> value_at_defaults(const lir::Program& p, const lir::Expr& e,
                                          std::optional<uint32_t> member = std::nullopt);

// A kernel node's launch, its grid and block evaluated at the params' defaults, and its
// kernel's compiled registers and static shared memory where it is compiled (Kernel::demand).
LaunchShape launch_shape(const lir::Program& p, const lir::KernelNode& k, const Residency& r);
// A node of lowering's IR (lowering/mir.h): a kernel's launch; a fill or copy as the kernel of
// 256-thread blocks, one element per thread, that a guarded copy runs; anything else one block of
// one thread.
LaunchShape launch_shape(const mir::Program& p, const mir::Node& n, const Residency& r);

}  // namespace orch::lowering
