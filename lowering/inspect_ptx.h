// What a kernel's compiled PTX says about it, for rules the source text cannot settle: the
// parameters its entry really takes (sizes, alignments, integer or floating point), and
// whether it launches kernels (CUDA dynamic parallelism) or graphs from the device, directly or
// through the device functions it calls. A small reader of the PTX that NVRTC writes, not a
// PTX parser: it knows `.entry`/`.func` headers, their bodies and their `call` instructions.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace orch::lowering {

struct PtxParam {
  char kind = 'b';     // 'u', 's', 'f' or 'b' (untyped bytes, e.g. a struct as .b8 x[16])
  uint32_t size = 0;   // bytes
  uint32_t align = 0;  // the .align given, else the size
  std::string text;    // as written, e.g. ".param .align 8 .b8 k_param_0[16]"
};

struct PtxFunction {
  bool entry = false;    // .entry (a kernel), not .func
  bool defined = false;  // has a body here (not .extern or a prototype)
  std::vector<PtxParam> params;
  std::set<std::string> calls;  // direct call targets in the body
};

struct PtxModule {
  std::map<std::string, PtxFunction> functions;
};

PtxModule parse_ptx(const std::string& ptx);

// Whether `function` reaches one of `targets` through direct calls (itself included).
bool ptx_reaches(const PtxModule& m, const std::string& function,
                 const std::set<std::string>& targets);

// The device runtime's kernel launch (what device-side `<<<` and cudaLaunchDevice compile to).
const std::set<std::string>& ptx_kernel_launch_calls();
// Device-side graph launch (cudaGraphLaunch).
const std::set<std::string>& ptx_graph_launch_calls();

// A loop of a kernel's PTX (a label and a later branch back to it; its inner loops are part of
// its body) that does arithmetic on shared memory: how many floating-point multiply-adds
// (`fma.*`, `mad.*.f*`) and shared-memory loads (`ld.shared`, `ld.volatile.shared`, `ldmatrix`)
// its body holds, as written (a trip of an inner loop counts once).
struct PtxSharedLoop {
  std::string function;  // the .entry or .func it is in
  std::string label;     // "$L__BB0_12"
  uint32_t fmas = 0;
  uint32_t shared_loads = 0;
};
// The loop with the most multiply-adds among those that also load shared memory; nullopt where no
// loop does both.
std::optional<PtxSharedLoop> ptx_shared_memory_loop(const std::string& ptx);

}  // namespace orch::lowering
