// Code orchc puts at the entry of a kernel it did not write, in the kernel's PTX (NVRTC's
// output, before ptxas or nvJitLink make it a CUBIN), so that user kernels need no edits:
// - `griddepcontrol.wait` (cudaGridDependencySynchronize) as the first instruction, so that a
//   programmatic edge may enter the kernel: nothing before it touches memory; then
//   `griddepcontrol.launch_dependents` (after the guard, below, where there is one), so the
//   kernel after it may launch (why and where: kPdlTrigger in lowering/codegen.h);
// - a call to a guard function (an unrolled loop's copy: lowering/unroll_loops.cpp) whose
//   arguments are parameters appended to the entry; when it returns 0 every thread exits.
// The instructions go after the entry's declarations (.reg, .local, .shared, ...) and before its
// first instruction; nothing else of the kernel changes. merge_ptx_modules joins the guard
// function's own module (NVRTC output for the same target) to the kernel's, so the result is
// one self-contained module: ptxas, nvJitLink and the driver's JIT all take it as it is.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace orch::lowering {

struct PtxEntryPatch {
  bool wait = false;  // griddepcontrol.wait first, griddepcontrol.launch_dependents after it or the guard
  // The guard: a function `.func (.param .b32 r) NAME(.param .b64 a0, ...)` defined in the module
  // (merge_ptx_modules), called with every appended parameter zero-extended to 64 bits, in order.
  // Returns non-zero where the kernel runs. Empty: no guard.
  std::string guard;
  // Whether every thread's return value is its own decision, the same in every thread of the
  // grid (each evaluates it, or reads a settled slot): then each thread leaves on its own, with
  // no barrier. Otherwise only thread 0's value holds, and the block learns it by a barrier.
  bool guard_per_thread = false;
  // Sizes (1, 2, 4 or 8 bytes) of the parameters appended to the entry, after its own; a
  // launch passes them after the kernel's own arguments.
  std::vector<uint32_t> extra_params;

  bool empty() const { return !wait && guard.empty(); }
  bool operator==(const PtxEntryPatch& o) const {
    return wait == o.wait && guard == o.guard && guard_per_thread == o.guard_per_thread &&
           extra_params == o.extra_params;
  }
  // One line naming everything above, for cache keys and messages: "wait launch_dependents",
  // "wait guard orch_guard(8, 4) launch_dependents", "guard orch_guard(8) per thread".
  std::string describe() const;
};

// `ptx` with `patch` applied to the kernel whose entry is named `entry` (the lowered name); nullopt
// with *error when there is no such entry or it cannot be patched. Other entries are left alone.
std::optional<std::string> patch_ptx_entry(const std::string& ptx, const std::string& entry,
                                           const PtxEntryPatch& patch, std::string* error);

// One module: `ptx` with the functions and variables of `extra` (a module from the same compiler
// for the same .target) placed before its own code, so a call in `ptx` finds them defined.
// `.extern` declarations `ptx` already makes are dropped from `extra`. A symbol `extra` defines
// that `ptx` defines with the same text (a helper two guards share) is not repeated; one `ptx`
// declares or defines otherwise (a user's function of the same name) is renamed in `extra`
// first, to a name no token of either module has: *renamed (when given) maps each renamed
// symbol of `extra` to its name in the result. Another .target is an error (nullopt, *error).
std::optional<std::string> merge_ptx_modules(const std::string& ptx, const std::string& extra,
                                             std::string* error,
                                             std::map<std::string, std::string>* renamed = nullptr);

// `base`, or `base` with "_1", "_2", ... appended: the first that no token of `ptx` is.
std::string fresh_ptx_name(const std::string& ptx, const std::string& base);

// `ptx` with a copy of the entry `entry` defined after it under the name `clone` (which must
// be fresh: fresh_ptx_name): the same code, its parameters and labels renamed with it. Both
// are kernels of one module, so they share its variables (`__device__`, `__constant__`,
// `__managed__`): what lets a patched variant of a kernel run beside the kernel itself and see
// the same state. nullopt with *error when there is no such entry.
std::optional<std::string> clone_ptx_entry(const std::string& ptx, const std::string& entry,
                                           const std::string& clone, std::string* error);

}  // namespace orch::lowering
