// CUDA C++ for the kernels orchc writes itself: condition evaluation, scalar updates, fills a
// memset node cannot do, and device graph launchers. Each becomes a mir::Kernel (generated)
// compiled by NVRTC like a user's kernel.
#pragma once

#include <string>
#include <vector>

#include "lowering/mir.h"

namespace orch::lowering {

// Builds one generated kernel: expressions are split into a device part (reads of device
// scalars, compiled into the kernel) and host parts (params, rank, family index: passed as
// value arguments the runtime evaluates and set_param patches). Device expressions are printed
// by expr/ and call its preamble, so the GPU computes exactly what the evaluator computes, or
// the same error.
class GeneratedKernel {
 public:
  GeneratedKernel(mir::Program& program, std::string name)
      : program_(program), name_(std::move(name)) {}

  // C++ of `e`: an `orch_v<K>` expression (K: e's type) holding the value or an error code;
  // registers the parameters it needs.
  std::string expr(const mir::Expr& e);
  // A pointer parameter for a buffer (to its storage type); returns its name in the code.
  std::string buffer(int buffer, bool write);
  // A conditional handle parameter.
  std::string handle(int handle);
  // A graph exec parameter (one graph) or a table of execs (a family).
  std::string graph(int graph, bool family, bool self);
  // A value parameter computed on the host, converted there to `type` (exactly, or the runtime
  // refuses it); returns its name, which holds the storage of `type`.
  std::string value(const mir::Expr& e, mir::ScalarType type);
  // The executable's device status record (a KernelParamKind::Status parameter, named
  // `orch_status` in the code), and `orch_site`, a constant naming a new status site for `loc`
  // (program.status_sites): with them the kernel reports device-side errors through
  //   orch_report_error(orch_status, code, orch_site, detail);
  // (codes: fb::DeviceError in artifact/pipeline.fbs; the first report wins) or, for an
  // expression, orch_expr_error(code). A kernel whose code calls orch_expr_error gets both at
  // finish() without asking.
  void status(const SourceRange& loc, const std::vector<SourceRange>& call_stack,
              const std::string& what);
  // The status record parameter alone (`orch_status`), for code that reports at sites of its
  // own (a guard reports at its loop's site).
  void status_param();
  // An unrolled loop's guard slots (u32 buffer `buffer`) as a writable pointer parameter; the
  // node records a read (the guards of one copy share their slot through atomics, which order
  // nothing else), or a write for `reset` (a condition kernel setting them back to undecided).
  std::string guard_slots(int buffer, bool reset);

  void add_statement(const std::string& code) { body_ += "  " + code + "\n"; }
  // The kernel executes griddepcontrol.wait first, before anything else (Kernel::waits_at_entry),
  // so programmatic edges may enter it.
  void wait_at_entry() { wait_ = true; }
  // Every statement the kernel runs so far, to fuse it with another.
  const std::string& body() const { return body_; }
  const std::vector<mir::BufferAccess>& accesses() const { return accesses_; }

  // Appends the kernel to program.kernels and returns a node that launches it with one
  // thread (or `grid` x `block` when given). The node's accesses are the kernel's.
  mir::Node finish(const SourceRange& loc, const std::vector<SourceRange>& call_stack);
  mir::Node finish_with_shape(const SourceRange& loc, const std::vector<SourceRange>& call_stack,
                             mir::Expr grid, mir::Expr block);
  // Not a kernel but a device function, for a user kernel's entry to call (lowering/ptx_entry.h):
  // a translation unit defining `extern "C" __device__ unsigned NAME(unsigned long long...)`,
  // one 8-byte argument per parameter registered so far (the parameter's bits, zero-extended),
  // whose statements return 0u to skip the kernel and fall through to `return 1u`.
  std::string finish_function(const std::string& name) const;
  const std::vector<mir::KernelParam>& params() const { return params_; }
  const std::vector<mir::KernelArg>& args() const { return args_; }

 private:
  void postfix(const mir::Expr& e, std::vector<expr::Instr>& code, std::vector<std::string>& leaves);

  mir::Program& program_;
  std::string name_;
  std::string body_;
  std::vector<mir::KernelParam> params_;
  std::vector<mir::KernelArg> args_;
  std::vector<std::string> param_code_;
  std::vector<mir::BufferAccess> accesses_;
  int site_ = -1;  // the status site, once status() registered one
  bool wait_ = false;
};

// The first statement of a generated kernel that waits at entry: griddepcontrol.wait
// (cudaGridDependencySynchronize), which needs sm_90; older archs (an ejected file built for one)
// never get programmatic edges and skip it.
extern const char* const kPdlWait;
// What comes right after it, or after the guard in a guarded copy of an unrolled loop:
// griddepcontrol.launch_dependents (cudaTriggerProgrammaticLaunchCompletion), which lets the
// kernel after this one launch once every block of this one has executed it (or exited), instead
// of as they exit: the next launch hides behind this kernel's whole run. It orders nothing: the
// next kernel's own wait still returns only when this one has finished with its writes visible.
// User kernels get the same at their PTX entry (lowering/ptx_entry.cpp). Where, measured
// (bench/launch_bench, driver 580.159.04, 2026-11-23, µs per node or iteration):
// - not before the wait: each kernel of a chain would trigger at once, so every one could launch
//   ahead of the one running; a 1,000-kernel chain, without a trigger / after the wait / before
//   it: H100 80GB HBM3 0.671 / 0.636 / 0.817, H200 0.619 / 0.476 / 0.472 (rows d, e2, e);
// - in a guarded copy, after the guard's barrier, not before it: a one-kernel loop body 16 times
//   on an H100, guard with a barrier and no trigger / trigger before the guard / after it: 1.05 /
//   1.27 / 0.99 (rows n7, n6, n8).
extern const char* const kPdlTrigger;

// What a generated kernel writes into the executable's device status record (16 bytes, four
// u32: code, site, detail, count), as defined in every generated kernel that takes it; the
// runtime allocates one per Executable (runtime/src/executable_instantiate.cpp) and reads it back.
extern const char* const kDeviceStatusPreamble;

// What every generated kernel's source holds before its `extern "C" __global__ void NAME(`:
// orchc's header line, kDeviceStatusPreamble for a kernel that takes the status record (first:
// expr/'s no-op orch_expr_error steps aside for its macro), then expr::preamble(). The module of
// generated kernels (compile_all_kernels.cpp) holds it once, for all of them.
std::string generated_preamble(bool with_status);

// The C++ spelling of a scalar type as user kernels see it: "unsigned", "float", "__half", ...
const char* cuda_type(mir::ScalarType t);

// A constant of a type.
mir::Expr int_constant(int64_t v, mir::ScalarType type = mir::ScalarType::U32);

}  // namespace orch::lowering
