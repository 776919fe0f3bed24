// The lowering passes, each in a file of its own. lower.cpp calls them in order: first passes
// from IR to IR (mir::Program, lowering/mir.h: to_mir of the checker's output, rewritten in
// place), then build_lir makes
// the lowered program (lowering/lir.h) that the last passes and both back ends read.
// ORCH_PRINT_PASSES=1 prints the program after each pass and how long each took.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <optional>
#include <string>
#include <vector>

#include "lowering/mir.h"
#include "lowering/cubin_resources.h"
#include "lowering/kernel_compiler.h"
#include "lowering/launch_shape.h"
#include "lowering/lir.h"
#include "lowering/profile_use.h"
#include "support/diagnostics.h"

namespace orch::lowering {

// What the speed passes may do, settled once from the options and the targets (lower.cpp).
struct PassOptions {
  // Programmatic edges and kernels that wait at entry (griddepcontrol.wait): the option is on,
  // every target profile has programmatic_dependent_launch and every arch compiled for is
  // sm_90 or newer.
  bool pdl = false;
  // User kernels can be patched at their PTX entry (the artifact; not --emit=cuda, whose kernels
  // nvcc compiles from their source): they may then wait at entry and be guarded.
  bool patch_user_kernels = true;
  // Programmatic edges inside conditional bodies and in graphs launched from the device. CUDA's
  // documentation says nothing about either; runtime/tests/pdl_gpu_test.cpp asked the GPU (H200,
  // driver 580.159.04, 2026-11-23): CUDA builds and runs both, inside IF and WHILE bodies and in
  // graphs instantiated for device launch, with exact results.
  bool pdl_in_bodies = true;
  bool pdl_in_device_graphs = true;
  // Copies of a `while` body per WHILE iteration (lowering/unroll_loops.cpp); 1: none; 0: the
  // compiler's choice per loop (auto_unroll, and none where a launch of the body runs in several
  // waves).
  uint32_t unroll = 0;
  // What the target holds at once (lowering/launch_shape.h): programmatic edges only join
  // launches that fit in one wave, and the compiler unrolls only loops whose launches do.
  Residency residency;
  // Kernels that fit in one wave wait for the collective before them (line_up_collectives).
  bool line_up_collectives = true;
  // NCCL's kernels at high priority where kernels may run beside them (prioritize_collectives).
  bool prioritize_collectives = true;
  // Loops (by their `while` statement's place) the compiler's choice must not unroll, and why:
  // their body's launches turned out, once compiled, to run more waves than the compiler
  // unrolls (unrolled_past_wave_budget; lower.cpp lowers again without them).
  std::vector<std::pair<SourceRange, std::string>> keep_rolled;
  // Buffers never in use at the same time share one arena (plan_memory; orchc
  // --no-memory-plan turns it off).
  bool memory_plan = true;
  // A profile of an earlier run (orchc --profile; lowering/profile_use.h): where it measured a
  // launch, both decisions take it as it ran, and unrolling also needs the body's measured time.
  ProfileUse profile;
};

// Calls `f` on every region of every graph, outer regions before the bodies they hold.
// `graph` is the top-level graph the region belongs to.
void for_each_region(mir::Program& program,
                     const std::function<void(mir::Region& region, int graph)>& f);

// drop_helper_graphs.cpp: a graph that is neither main nor `device` is only ever inlined by
// `call` (the checker checked it where it is inlined); alone it is not a graph anything
// launches, and its `self` means whoever calls it, so its own body is dropped.
void drop_helper_graphs(mir::Program& program);

// split_segments.cpp: a host graph that holds conditional nodes and also device launches or
// collectives becomes several graphs launched in order (program.segments), since one
// executable graph cannot hold both (device launch + conditional hangs on driver 580;
// NCCL in a graph with conditionals fails, NVIDIA/nccl#1986).
void split_segments(mir::Program& program);

// lower_conditions.cpp: a CUDA conditional handle for every If/While/Switch, a SetCondition
// node that evaluates the condition before it (and at the end of a while body), `cond`
// arguments bound to their loop's handle; sparse switch cases map onto dense bodies.
void lower_conditions(mir::Program& program);

// unroll_loops.cpp: a `while` body repeated options.unroll times per WHILE iteration; the nodes
// of copies 2 and up get a guard (Node::guard) and read the condition's scalars and the loop's
// guard slots, the condition kernels before the loop and at the end of the body reset the slots.
// Returns one line per loop: how many copies, or why it is not unrolled (--print-passes).
std::vector<std::string> unroll_loops(mir::Program& program, const PassOptions& options);
// The compiler's choice of copies for a body of `nodes` nodes (PassOptions::unroll 0).
uint32_t auto_unroll(size_t nodes);
// After the kernels are compiled: the loops the compiler's choice unrolled (options.unroll 0)
// whose copies' launches, with their kernels' registers and static shared memory, run more waves
// past their first than the compiler unrolls (unroll_loops.cpp, kMaxExtraWaves), with why
// (PassOptions::keep_rolled).
std::vector<std::pair<SourceRange, std::string>> unrolled_past_wave_budget(const lir::Program& program,
                                                                          const PassOptions& options);

// fuse_generated_kernels.cpp: adjacent scalar updates, and a scalar update followed by a
// condition evaluation, become one generated kernel (not across unrolled copies).
void fuse_generated_kernels(mir::Program& program);

// What the IR-to-IR passes computed that mir::Program does not hold, for build_lir: which kernels
// orchc wrote (lir::Kernel::generated), and by kernel index the guard code of each generated kernel of an unrolled copy, per GuardRole
// (lir::Kernel::guard_variants), and the generated kernels that wait at entry
// (lir::Kernel::waits_at_entry).
struct IrLowering {
  // The checked program's kernels, all the user's: the passes append the kernels orchc writes
  // after them (build_lir marks those lir::Kernel::generated).
  size_t user_kernels = 0;
  std::map<int, std::vector<std::string>> guard_variants;
  std::set<int> waits_at_entry;
};

// generate_kernels.cpp: scalar updates, condition evaluations, kernel fills and `launch`
// statements become kernel nodes running kernels orchc writes; with options.pdl each one waits
// at entry (griddepcontrol.wait, Kernel::waits_at_entry). The guard variants go to `out`.
void generate_kernels(mir::Program& program, const PassOptions& options, IrLowering& out);

// assign_guards (unroll_loops.cpp), on the lowered program: each guarded node's role from the
// edges within its copy; a generated kernel gets that role's guard code, a user kernel a variant
// that calls that role's guard function at entry. Returns a line per loop for --print-passes.
std::vector<std::string> assign_guards(lir::Program& program);

// generate_nvshmem_kernels.cpp: put, get, signal, wait, quiet and barrier become kernel nodes
// running one-block kernels orchc writes, which call NVSHMEM's device API (so they may stand in
// conditional bodies and device graphs); guarded and waiting at entry like generate_kernels'.
void generate_nvshmem_kernels(mir::Program& program, const PassOptions& options, IrLowering& out);

// rebuild_edges.cpp: dependency edges from the final nodes' accesses (transitively reduced).
void rebuild_edges(mir::Program& program);

// build_lir.cpp: the lowered program, from the IR after the passes above: every node a
// kernel, memcpy, memset, conditional or collective node, with its dependencies.
lir::Program build_lir(const mir::Program& program, const IrLowering& lowering);

// order_device_graphs.cpp: Program::device_order, every device graph after the graphs its
// kernels take as `graph` arguments where no cycle prevents it, and KernelArg::late on each
// graph argument naming a graph not instantiated before its own (itself, or later in the order),
// which is set on the executable graph after instantiation. Returns a line per graph with late
// arguments for --print-passes.
std::vector<std::string> order_device_graphs(lir::Program& program);

// hash_collectives.cpp: a hash of the collective sequence, which ranks compare at bind time.
void hash_collectives(lir::Program& program);

// line_up_collectives.cpp: a kernel the DAG leaves free of the last collective before it, and
// whose launch fits in one wave, gets a full edge from that collective (too short to gain from
// running beside it; the join would cost more). Returns a line for --print-passes.
std::vector<std::string> line_up_collectives(lir::Program& program, const PassOptions& options);

// collectives_in_order.cpp: each collective of a host graph after the one before it in node
// order, by a full edge where the DAG leaves them unordered (every rank issues a communicator's
// collectives in one order). Returns a line for --print-passes.
std::vector<std::string> collectives_in_order(lir::Program& program);

// prioritize_collectives.cpp: a collective with a kernel (or a conditional) neither before nor
// after it gets high_priority: the runtime runs NCCL's kernels for it at the greatest priority.
// Returns lines for --print-passes.
std::vector<std::string> prioritize_collectives(lir::Program& program, const PassOptions& options);

// one_loop_at_a_time.cpp: in every body, the nodes that hold a `while` loop are put in program
// order by full edges (two WHILE nodes running at once fault the GPU on driver 580). Returns a
// line for --print-passes.
std::vector<std::string> one_loop_at_a_time(lir::Program& program);

// programmatic_edges.cpp: kernel -> kernel dependencies become programmatic where the dependent
// kernel waits at entry and neither launches work from the device, in host-launched top-level
// graphs (and in conditional bodies and device graphs where options allow). Before the kernels
// are compiled (`compiled` false) user kernels are taken to wait when they can be patched, and
// those that get a programmatic edge are marked to wait; after (`compiled` true) it runs again
// with what the PTX showed (kernels that launch kernels) and only takes edges away. Returns one
// line per decision that is not obvious, for --print-passes.
std::vector<std::string> programmatic_edges(lir::Program& program, const PassOptions& options, bool compiled);

// verify_ordering.cpp: every pair of conflicting accesses is ordered by the final dependencies
// (a compiler-bug catcher), and every programmatic edge joins two kernel nodes that launch
// nothing from the device into a kernel that waits at entry, on targets with PDL. False, with an
// internal-error diagnostic, if not.
bool verify_ordering(const lir::Program& program, DiagnosticEngine& diags);

// plan_memory.cpp: the memory plan (lir::Program::memory_plan): which buffers orch allocates
// may share bytes, because every use of one is ordered before every use of the other and
// neither's contents need to outlive its uses, and their layout in one arena at the params'
// defaults. `enabled` false (--no-memory-plan): every buffer alone. Returns a line per decision
// for --print-passes.
std::vector<std::string> plan_memory(lir::Program& program, bool enabled);

// verify_memory_plan.cpp: the plan checked by separate code (ordering of every pair allowed to
// share, writes before reads, results last, the layout); false with E0899 if a rule fails.
bool verify_memory_plan(const lir::Program& program, DiagnosticEngine& diags);

// compile_all_kernels.cpp: NVRTC for every kernel and target arch. False on errors.
bool compile_all_kernels(lir::Program& program, const CompileOptions& options,
                         SourceManager& sources, DiagnosticEngine& diags);

// What the target lets one block of a compiled kernel have (from its profile): the limits the
// driver checks against the kernel's registers, static shared memory, __launch_bounds__ and
// __cluster_dims__ when a graph is instantiated or launched.
struct CompiledLimits {
  std::string target;  // "sm_90", for messages
  uint32_t max_threads_per_block = 1024;
  RegisterFile registers;
  uint64_t max_shared_bytes_per_block_optin = 232448;
  uint32_t max_cluster_size = 8;
};
CompiledLimits compiled_limits_of(const TargetProfile& profile);

// check_compiled_kernels.cpp: the rules that need the compiled code: declared vs compiled
// parameters and device-side launches the source text hid (the PTX), and each launch against
// what its kernel's CUBINs ask of a block (registers, static shared memory, __launch_bounds__,
// __cluster_dims__), proven at the params' defaults and checked again at bind time where the
// shape depends on them. False, with diagnostics, on a violation. Records on every launched
// kernel what a block of it takes of an SM (Kernel::demand), for programmatic_edges (compiled).
bool check_compiled_kernels(lir::Program& program, const CompiledLimits& limits, DiagnosticEngine& diags);

// serialize.cpp: the artifact bytes (envelope and FlatBuffers payload).
std::string serialize(const lir::Program& program, const SourceManager& sources);

// ---- helpers of several passes -------------------------------------------------------------

class GeneratedKernel;
// unroll_loops.cpp: the guard of an unrolled copy, for a kernel orchc writes: what it reads
// registered with `k`, a placeholder (kGuardPlaceholder) as its first statement, and the code
// that replaces it for each GuardRole in `variants` (assign_guards picks one).
void add_guard(GeneratedKernel& k, const mir::Program& program, const mir::Guard& guard,
               std::vector<std::string>* variants);
extern const char* const kGuardPlaceholder;
// One guard as C++: `truth` the condition as orch_v<orch_bool> (unused by Follow), `slots` the
// slot array and `index` the copy's slot in it (unused by Alone), `site` the status site of
// errors; in a kernel (returns to skip it) or a device function (returns the decision: thread
// 0's for the roles that decide, every thread's for Follow; the caller ORs it over the block).
std::string guard_statement(const std::string& truth, const std::string& slots, const std::string& index,
                            int site, mir::GuardRole role, bool function);

// unroll_loops.cpp: whether a kernel node runs exactly one block whatever the params (its grid
// is constant 1, 1, 1): assign_guards' decide role and the verifier's check of it.
bool one_block(const lir::Node& n);
// unroll_loops.cpp: whether node `n` writes a buffer the condition of `loop` reads: its blocks
// could then see the condition change, so it cannot let each decide (assign_guards' Race role).
bool writes_condition(const lir::Node& n, const lir::UnrolledLoop& loop);

// memset_pattern.cpp: the memset a fill becomes, where one does it: a 1, 2 or 4 byte pattern,
// or an 8-byte one whose halves agree, of a value known at compile time, into device memory.
// generate_kernels makes a kernel of every other fill; build_lir makes these memset nodes.
struct MemsetPattern {
  uint32_t value = 0;
  uint8_t element_size = 0;  // 1, 2 or 4
};
std::optional<MemsetPattern> memset_pattern(const mir::Program& program, const mir::Node& fill);

}  // namespace orch::lowering
