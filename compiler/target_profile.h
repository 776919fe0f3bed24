// Per-architecture limits and supported node kinds, read from targets/<name>.yaml, so that
// `orchc --check` needs no GPU to know what a launch or a graph may do on the target.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "support/diagnostics.h"

namespace orch {

// CUDA's device graph launch limits per graph execution (CUDA C++ Programming Guide, "Device
// Graph Launch"), the same on every architecture. A profile may ask for less, never more:
// pipeline.bin's loader enforces these (artifact/artifact.h; lowering/serialize.cpp asserts
// the two agree).
constexpr uint32_t kCudaMaxFireAndForgetLaunches = 120;
constexpr uint32_t kCudaMaxTailLaunches = 255;
constexpr uint32_t kCudaMaxSelfTailLaunches = 1;

// The roofline peaks of one device of an architecture (orch-run --roofline), from its vendor's
// datasheet or whitepaper: matched against the CUDA device's name (cudaDeviceProp::name contains
// `match`; the longest match wins, so "H200 NVL" beats "H200").
struct DevicePeaks {
  std::string match;                // "H100 80GB HBM3" (an H100 SXM5 calls itself "NVIDIA H100 80GB HBM3")
  uint64_t dram_bytes_per_s = 0;    // peak DRAM bandwidth
  uint64_t f16_flops_per_s = 0;     // peak FLOP/s of the CUDA cores (not the tensor cores), FMA = 2
  uint64_t f32_flops_per_s = 0;
  uint64_t f64_flops_per_s = 0;
  std::string source;               // where the numbers come from
};

struct TargetProfile {
  std::string name;        // "sm_90"
  std::string arch;        // NVRTC arch, "sm_90" (CUBIN) / "compute_90" (PTX) derive from it
  uint32_t compute_capability = 0;  // 90
  // Launch limits (cudaDeviceProp names in comments).
  uint32_t max_threads_per_block = 1024;         // maxThreadsPerBlock
  uint32_t max_block_dim[3] = {1024, 1024, 64};  // maxThreadsDim
  uint64_t max_grid_dim[3] = {2147483647, 65535, 65535};  // maxGridSize
  uint64_t max_shared_bytes_per_block = 49152;   // sharedMemPerBlock (without opt-in)
  uint64_t max_shared_bytes_per_block_optin = 232448;  // sharedMemPerBlockOptin
  // What is resident at once, for the compiler's launch-shape decisions (lowering/launch_shape.h):
  // the most SMs of any device of this architecture (an upper bound, so that "more blocks than
  // ever fit at once" holds on every one), and per SM the threads, blocks and shared memory.
  uint32_t max_sm_count = 132;                   // multiProcessorCount, the largest of the arch
  uint32_t max_threads_per_sm = 2048;            // maxThreadsPerMultiProcessor
  uint32_t max_blocks_per_sm = 32;               // maxBlocksPerMultiProcessor
  uint64_t max_shared_bytes_per_sm = 233472;     // sharedMemPerMultiprocessor
  // What a block takes of the SM's shared memory besides its own: the driver's reserve, and
  // the unit the total is rounded up to (cuda_occupancy.h).
  uint32_t reserved_shared_bytes_per_block = 1024;  // reservedSharedMemPerBlock
  uint32_t shared_allocation_unit = 128;
  // What a compiled kernel may ask of one block (lowering/cubin_resources.h): registers are
  // given to warps in units of `register_allocation_unit`, and a block's warps are spread over
  // the SM's `register_file_partitions`, each with its share of `max_registers_per_block`; a
  // cluster (__cluster_dims__) may hold `max_cluster_size` blocks without the non-portable
  // opt-in, which orch does not take.
  uint32_t max_registers_per_block = 65536;      // regsPerBlock
  uint32_t max_registers_per_sm = 65536;         // regsPerMultiprocessor
  uint32_t register_allocation_unit = 256;       // registers, per warp
  uint32_t register_file_partitions = 4;
  uint32_t max_cluster_size = 8;                 // the portable cluster size
  // Device graph launch limits (CUDA programming guide, "Device Graph Launch").
  uint32_t max_fire_and_forget_launches = 120;
  uint32_t max_tail_launches = 255;
  uint32_t max_self_tail_launches = 1;
  // Largest dense SWITCH body table the compiler will build from sparse case values.
  uint32_t max_switch_cases = 1024;
  // Node kinds the target's driver must support.
  bool supports_if = true;
  bool supports_if_else = true;
  bool supports_while = true;
  bool supports_switch = true;
  bool supports_device_launch = true;
  // Programmatic dependent launch (programmatic graph edges, griddepcontrol.wait): compute
  // capability 9.0 and newer. orchc makes kernel -> kernel edges programmatic only when every
  // target has it (lowering/programmatic_edges.cpp).
  bool programmatic_dependent_launch = false;
  // Optional (a profile used only to check pipelines need not know its devices): the peaks of
  // the devices of this architecture.
  std::vector<DevicePeaks> peaks;
};

// The entry of `profile.peaks` for a device called `device_name`, or nullptr.
const DevicePeaks* find_device_peaks(const TargetProfile& profile, const std::string& device_name);
// The result points into the profile: a temporary profile would leave it dangling.
const DevicePeaks* find_device_peaks(TargetProfile&& profile, const std::string& device_name) = delete;

// Where profiles live: the directory given, else $ORCH_TARGETS_DIR, else the install's
// share/orch/targets, else the source tree's targets/ (compiled in).
std::vector<std::string> target_search_dirs(const std::string& explicit_dir = "");

// Loads a profile by name ("sm_90") from the search dirs, or by path if `name_or_path` ends in
// .yaml. Problems (missing file, bad YAML, missing or mistyped keys) are E0111 diagnostics at
// `where` (the `target` line or no location for --target) and return nullopt.
std::optional<TargetProfile> load_target_profile(const std::string& name_or_path,
                                                 const std::vector<std::string>& search_dirs,
                                                 SourceRange where, DiagnosticEngine& diags);

// Parses profile YAML text; `origin` names it in messages.
std::optional<TargetProfile> parse_target_profile(const std::string& yaml_text,
                                                  const std::string& origin, SourceRange where,
                                                  DiagnosticEngine& diags);

}  // namespace orch
