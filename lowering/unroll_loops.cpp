// Guarded unrolling of `while` loops.
//
// A WHILE node runs its body, then its condition kernel, then decides again: one iteration
// costs the body's kernels, a condition kernel and the node's own turn-around (measured on an
// H100: 5.26 µs per iteration of a one-kernel body, against 0.93 µs per node of a plain chain).
// unroll_loops repeats the body U times inside the one WHILE node (copies 1..U), and the
// condition kernel at the end runs once per U copies. Copy 1 needs no guard: the WHILE node runs
// the body only when its handle is true. Copy k >= 2 must do exactly what a new iteration would:
// run iff the condition, evaluated on the state copy k-1 left, is true. Its kernels decide that
// themselves, at entry (after the PDL wait), so an iteration costs one kernel per body kernel.
//
// The guard protocol. Every node of copy k >= 2 is a kernel (copies and fills become generated
// kernels) holding a guard; the loop owns a buffer of u32 slots, one per copy from 2 on: 0
// undecided, 1 being decided, 2 run, 3 do not run. Every guarded node records a read of the
// condition's device scalars and of the slots, so its edges order it after copy k-1's writes of
// those scalars; the condition kernels before the loop and at the end of each iteration record a
// write of the slots (they reset them to 0), so they come after every guard of the iteration.
// Roles, chosen per copy from its edges (assign_guards, on the lowered program):
// - Race (the general case): for each source of the copy (a node no other node of the copy
//   precedes), thread 0 of each block does v = atomicCAS(&slot, 0, 1). The one that gets 0
//   evaluates the condition (expr/'s printed code, as the condition kernels do: an error makes it
//   false and is reported to the device status record at the loop's site), then publishes 2 or 3
//   (__threadfence, atomicExch: release). The others spin on volatile loads while the slot is 1,
//   then fence (acquire). The warp reconverges (__syncwarp) and the block learns the decision through __syncthreads_or and returns
//   whole when it is 3.
// - Follow: a node that another node of its copy precedes reads the slot (a plain load) and returns
//   unless it is 2: its predecessor passed its own guard before doing anything, so the slot was
//   decided before the predecessor finished, i.e. before this node started (a programmatic edge
//   waits first, the same). The value is stable while it runs (the reset comes after it), so
//   every thread reads the same and no barrier is needed.
// - Decide: when the copy has exactly one source and it runs one block, that block's thread 0
//   evaluates and stores the decision with a plain store (no atomics: nobody else decides).
// - Alone: when that source is the copy's only node, it evaluates and keeps the decision to itself.
// Why it is exact. (1) The decision of copy k is a snapshot of the state after copy k-1: the
// decider evaluates after its PDL wait, and its node is ordered after copy k-1's writes of the
// condition's scalars (it reads them); no write of copy k happens before the decision, because
// every node of copy k passes its guard first: a race or decide block returns from its guard only
// once the slot holds the decision (the winner published it after reading the scalars; fence and
// barrier order those reads before any later write), and a follower starts only after a
// predecessor of its copy passed its guard. (2) Every node of copy k gets the same decision (one
// slot, written once per iteration). (3) A copy that does nothing leaves the state as it was, so
// every later copy of the iteration decides false too, and the condition kernel at the end of
// the iteration finds it false: the loop ends where the plain loop would have. (4) The spin
// terminates: a block spins only while the slot is 1, which only a block that won the atomicCAS,
// past its own PDL wait and running, has set, and that block publishes without waiting on anyone.
// With the roles above, the nodes that run, and the order their memory effects are seen in, are
// the plain loop's.
//
// What is not unrolled, and why (one line each in --print-passes): `while kernel` loops (the body
// kernel's cudaGraphSetConditional sets a value no other kernel can read back), bodies that hold
// conditionals (each copy would need a conditional node and handle of its own; a nested loop is
// unrolled itself instead), device launches, collectives, copies and fills of host memory (the
// guard would make a generated kernel touch mapped host memory, which the memcpy did through the
// copy engine), and user kernels where they cannot be patched (--emit=cuda compiles them with nvcc
// from their source).
#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <tuple>

#include "lowering/codegen.h"
#include "lowering/lower.h"
#include "lowering/passes.h"

namespace orch::lowering {

const char* const kGuardPlaceholder = "/* orch: the guard of an unrolled copy goes here */";

std::string guard_statement(const std::string& truth, const std::string& slots, const std::string& index,
                            int site, mir::GuardRole role, bool function) {
  const std::string skip = function ? "return 0u;" : "return;";
  const std::string slot = "(" + slots + " + " + index + ")";
  const std::string thread0 = "threadIdx.x == 0u && threadIdx.y == 0u && threadIdx.z == 0u";
  const std::string eval = "orch_v<orch_bool> orch_c = " + truth +
                           "; if (orch_c.e) orch_report_error(orch_status, 3u, " + std::to_string(site) +
                           "u, (unsigned)orch_c.e); ";
  // In a kernel: thread 0's warp reconverges (__syncwarp over the warp's lanes, a partial last
  // warp included), then the block learns whether thread 0 said go. As a device function (a
  // user kernel's guard): it returns thread 0's decision, and the patched entry does the same
  // two steps in the kernel itself (lowering/ptx_entry.cpp), not in the callee, where synccheck
  // reported every warp divergent at the barrier. Thread 0 comes out of its own
  // branch (an atomic, a spin) after the rest of its warp; __syncthreads_or is bar.red, i.e.
  // barrier.red.aligned, which needs the warp converged: without the __syncwarp, synccheck on an
  // H200 reported "Divergent thread(s) in warp" there.
  const std::string any =
      "{ const unsigned orch_t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z); "
      "const unsigned orch_n = blockDim.x * blockDim.y * blockDim.z - (orch_t & ~31u); "
      "__syncwarp(orch_n >= 32u ? 0xffffffffu : (1u << orch_n) - 1u); } "
      "if (!__syncthreads_or(orch_go)) " + skip + " }";
  switch (role) {
    case mir::GuardRole::Follow:
      // A plain load: the decision was written before this node started (see Follow above) and
      // nothing writes the slot while it runs, so every warp after an SM's first hits in L1. A
      // volatile load sent every warp to the one L2 line: a guarded copy of a 65,536-block kernel
      // ran 3.05x the kernel (174 against 57 us, H200, 2026-11-29).
      if (function) return "return *(const unsigned*)" + slot + " == 2u ? 1u : 0u;";
      return "if (*(const unsigned*)" + slot + " != 2u) " + skip;
    case mir::GuardRole::Each: {
      // Every thread evaluates the condition (a warp loads each scalar once, later warps hit L1)
      // and leaves on its own: nothing the kernel runs beside writes the condition, so all decide
      // the same, and no barrier makes every warp wait for thread 0's load (a guarded copy of a
      // 65,536-block kernel ran 1.25x the kernel with the barrier). Thread 0 of each block reports
      // an error in it; block 0 stores the decision for the copy's followers.
      const std::string report = "orch_v<orch_bool> orch_c = " + truth + "; if (orch_c.e && " + thread0 +
                                 ") orch_report_error(orch_status, 3u, " + std::to_string(site) +
                                 "u, (unsigned)orch_c.e); ";
      const std::string store = "if (blockIdx.x == 0u && blockIdx.y == 0u && blockIdx.z == 0u && " + thread0 +
                                ") *(volatile unsigned*)" + slot + " = orch_go ? 2u : 3u; ";
      return "{ " + report + "const unsigned orch_go = (!orch_c.e && orch_c.v) ? 1u : 0u; " + store +
             (function ? std::string("return orch_go; }") : "if (!orch_go) " + skip + " }");
    }
    case mir::GuardRole::Alone:
    case mir::GuardRole::Decide:
      // A one-block source that writes the condition: thread 0 decides before any thread of the
      // block can write, and the block learns it at the barrier.
      return "{ unsigned orch_go = 0u; if (" + thread0 + ") { " + eval +
             "orch_go = (!orch_c.e && orch_c.v) ? 1u : 0u; " +
             (role == mir::GuardRole::Decide ? "*(volatile unsigned*)" + slot + " = orch_go ? 2u : 3u; " : "") +
             "} " + (function ? std::string("return orch_go; }") : any);
    case mir::GuardRole::Race:
      // A plain read first: once the first block has decided, every later block takes the
      // decision without an atomic. (Thousands of blocks each doing atomicCAS on the one slot
      // serialized: a guarded copy of a 4096-block kernel ran 9.2 us where the kernel ran 3.5.)
      return "{ unsigned orch_go = 0u; if (" + thread0 + ") { unsigned* const orch_slot = " + slot +
             "; unsigned orch_s = *(volatile unsigned*)orch_slot; if (orch_s == 0u) orch_s = atomicCAS(orch_slot, 0u, 1u); "
             "if (orch_s == 0u) { " + eval +
             "orch_s = (!orch_c.e && orch_c.v) ? 2u : 3u; __threadfence(); atomicExch(orch_slot, orch_s); } "
             "else { while (orch_s == 1u) orch_s = *(volatile unsigned*)orch_slot; __threadfence(); } "
             "orch_go = orch_s == 2u ? 1u : 0u; } " + (function ? std::string("return orch_go; }") : any);
  }
  return "";
}

namespace {

constexpr mir::GuardRole kRoles[] = {mir::GuardRole::Alone, mir::GuardRole::Decide, mir::GuardRole::Race,
                                    mir::GuardRole::Follow, mir::GuardRole::Each};

// The most nodes an unrolled body holds (all copies): more copies of a long body gain little
// and cost instantiation time and code.
constexpr size_t kMaxUnrolledNodes = 256;

// The compiler unrolls a loop whose body's launches run at most this many waves past their
// first, summed over the body (a launch in one wave adds none). A guarded copy costs each of
// its launches a little per wave (the follower's load at every block's entry: 0.3-1.4 us on a
// 4-wave kernel) and saves a part of the WHILE node's turn-around (4-5 us). Forced 16 copies
// against the plain loop, H200, driver 580.159.04, 2026-11-29 (x = 0.5 x + 1, 256 threads per
// block): 1 M elements (3 waves past the first) 1.51x faster, 2 M (7) 1.33x, 4 M (15) 1.20x,
// 16 M (63) 1.03x slower; the 1024^2 stencil (3 + 3, its guarded steps 1.3x the plain ones)
// no faster, the 4096^2 one (126) 1.12x slower. So: at most 3, where every measured body gained.
constexpr uint64_t kMaxExtraWaves = 3;

void collect_reads(const mir::Expr& e, std::vector<mir::BufferAccess>& out) {
  if (e.kind == mir::ExprKind::DeviceScalar) {
    bool seen = false;
    for (mir::BufferAccess& a : out)
      if (a.buffer == e.ref) {
        a.read = true;
        seen = true;
      }
    if (!seen) out.push_back({e.ref, true, false});
  }
  for (const mir::Expr& o : e.operands) collect_reads(o, out);
}

void add_access(std::vector<mir::BufferAccess>& out, int buffer, bool read, bool write) {
  for (mir::BufferAccess& a : out)
    if (a.buffer == buffer) {
      a.read |= read;
      a.write |= write;
      return;
    }
  out.push_back({buffer, read, write});
}

class Unroller {
 public:
  Unroller(mir::Program& p, const PassOptions& o) : p_(p), o_(o) {}

  std::vector<std::string> run() {
    if (o_.unroll == 1) {
      notes_.push_back("unrolling off (--unroll 1)");
      return notes_;
    }
    for (mir::Graph& g : p_.graphs) region(g.body);
    if (notes_.empty()) notes_.push_back("no `while` loops");
    return notes_;
  }

 private:
  std::string where(const mir::Node& n) const {
    return "`while " + mir::to_string(*n.as<mir::WhileNode>().cond, p_) + "` at line " + std::to_string(n.loc.begin.line) + ":" +
           std::to_string(n.loc.begin.col);
  }

  void region(mir::Region& r) {
    for (size_t i = 0; i < r.nodes.size(); ++i) {
      for (mir::Region& b : mir::bodies(r.nodes[i])) region(b);
      if (r.nodes[i].is<mir::WhileNode>()) loop(r, i);
    }
  }

  // Why `n`, a node of a loop body, keeps the loop from being unrolled; "" if it does not.
  std::string blocker(const mir::Node& n) const {
    switch (n.kind()) {
      case mir::NodeKind::If:
      case mir::NodeKind::While:
      case mir::NodeKind::Switch:
      case mir::NodeKind::SetCondition:  // a nested conditional's
        return "its body holds a conditional (each copy would need a conditional node and handle of its own)";
      case mir::NodeKind::LaunchGraph:
        return "its body launches a graph from the device";
      case mir::NodeKind::Collective:
        return "its body holds a collective";
      case mir::NodeKind::Copy:
        if (p_.buffers[n.as<mir::CopyNode>().src].host || p_.buffers[n.as<mir::CopyNode>().dst].host)
          return "its body copies host memory (a guarded copy would be a kernel touching mapped host memory)";
        return "";
      case mir::NodeKind::Fill:
        if (p_.buffers[n.as<mir::FillNode>().dst].host)
          return "its body fills host memory (a guarded fill would be a kernel touching mapped host memory)";
        return "";
      case mir::NodeKind::ScalarUpdate:
      case mir::NodeKind::Shmem:  // a generated kernel, guarded like the others
        return "";
      case mir::NodeKind::Kernel: {
        const mir::KernelNode& launch = n.as<mir::KernelNode>();
        const mir::Kernel& k = p_.kernels[launch.kernel];
        if (!k.budgets.empty() || k.may_launch_kernels)
          return "kernel `" + k.name + "` in its body launches work from the device";
        for (const mir::KernelArg& a : launch.args)
          if (a.kind == mir::ArgKind::Cond || a.kind == mir::ArgKind::CondHandle)
            return "kernel `" + k.name + "` in its body sets a conditional handle";
        if (!o_.patch_user_kernels)  // every kernel is the user's here: orchc's come later
          return "user kernel `" + k.name + "` cannot be guarded here (--emit=cuda: nvcc compiles it from its source)";
        return "";
      }
    }
    return "";
  }

  void loop(mir::Region& r, size_t at) {
    mir::Node& w = r.nodes[at];
    mir::WhileNode& loop_node = w.as<mir::WhileNode>();
    if (!loop_node.cond) {
      notes_.push_back("`while kernel` at line " + std::to_string(w.loc.begin.line) + ":" +
                       std::to_string(w.loc.begin.col) +
                       ": not unrolled: its body kernel sets the condition through cudaGraphSetConditional, whose "
                       "value no other kernel can read");
      return;
    }
    mir::Region& body = loop_node.bodies[0];
    // lower_conditions: the body ends with the kernel that evaluates the condition again, and the
    // node before the loop evaluates it the first time.
    auto sets_handle = [&](const mir::Node& n) {
      const auto* s = std::get_if<mir::SetConditionNode>(&n.op);
      return s && s->handle == loop_node.handle;
    };
    const bool shaped = !body.nodes.empty() && sets_handle(body.nodes.back());
    int before = -1;
    for (size_t j = 0; j < at; ++j)
      if (sets_handle(r.nodes[j])) before = static_cast<int>(j);
    if (!shaped || before < 0) {
      notes_.push_back(where(w) + ": not unrolled: its condition kernels are not where lowering puts them");
      return;
    }
    const size_t m = body.nodes.size() - 1;
    if (m == 0) {
      notes_.push_back(where(w) + ": not unrolled: its body is empty");
      return;
    }
    for (size_t j = 0; j < m; ++j) {
      std::string why = blocker(body.nodes[j]);
      if (!why.empty()) {
        notes_.push_back(where(w) + ": not unrolled: " + why);
        return;
      }
    }
    std::string profiled;  // what the profile decided, for the note
    if (!o_.unroll) {
      // The compiler's choice: copies hide the WHILE node's turn-around, which matters only while
      // the body's launches are short (kMaxExtraWaves). One whose size is not known before it
      // runs may be any size: not unrolled.
      for (const auto& [at, why] : o_.keep_rolled) {
        if (at.file == w.loc.file && at.begin.line == w.loc.begin.line && at.begin.col == w.loc.begin.col) {
          notes_.push_back(where(w) + ": not unrolled: " + why + " (--unroll N unrolls it anyway)");
          return;
        }
      }
      // With a profile (orchc --profile): each launch as it ran. Its measured time does not
      // decide: a rule that unrolled only bodies within a WHILE iteration's turn-around (4.3 us)
      // kept two loops whose launches fit in one wave from unrolling, and they ran 1.09x and
      // 1.62x slower than the static rule's choice (bench/real_bench.py on an H200, 2026-11-28
      // 12:30 UTC: the 256^2 stencil and the 64 K sum-while) and faster nowhere: with guards
      // that cost one-wave launches nothing (role each), the copies pay off whatever the body's
      // time. It is reported in the note.
      uint64_t body_ns = 0, extra = 0;
      bool timed = false, shaped = false;
      std::optional<Launch> widest;
      for (size_t j = 0; j < m; ++j) {
        const Launch l = launch_of(p_, body.nodes[j], o_.residency, o_.profile);
        const std::optional<uint64_t> e = l.shape.extra_waves();
        if (!e) {
          notes_.push_back(where(w) + ": not unrolled: " + l.says("a launch of its body") +
                           ", so its run time, not the loop's turn-around, may dominate (--unroll N unrolls it anyway)");
          return;
        }
        extra += *e;
        if (*e && (!widest || *e > *widest->shape.extra_waves())) widest = l;
        shaped |= l.measured_shape;
        if (l.measured) {
          body_ns += l.measured->median_ns;
          timed = true;
        }
      }
      if (extra > kMaxExtraWaves) {
        notes_.push_back(where(w) + ": not unrolled: " + widest->says("a launch of its body") + "; its launches run " +
                         std::to_string(extra) + " waves past their first, more than " + std::to_string(kMaxExtraWaves) +
                         ", so its run time, not the loop's turn-around, dominates (--unroll N unrolls it anyway)");
        return;
      }
      if (timed)
        profiled = "; from the profile: its body ran " + format_ns(body_ns) + " per iteration (its nodes' medians, summed)" +
                   (shaped ? ", its measured launches " + std::string(extra ? "in at most " + std::to_string(kMaxExtraWaves + 1) + " waves" : "in one wave") : "");
    }
    const uint32_t wanted = o_.unroll ? o_.unroll : auto_unroll(m);
    const uint32_t copies = static_cast<uint32_t>(std::min<size_t>(wanted, kMaxUnrolledNodes / m));
    if (copies < 2) {
      notes_.push_back(where(w) + ": not unrolled: its " + std::to_string(m) + " nodes leave no room for a second copy under " +
                       std::to_string(kMaxUnrolledNodes) + " nodes per body");
      return;
    }

    const int index = static_cast<int>(p_.unrolled_loops.size());
    mir::UnrolledLoop L;
    L.cond = *loop_node.cond;
    L.handle = loop_node.handle;
    L.copies = copies;
    L.loc = w.loc;
    // The slots: one u32 per copy from 2 on, owned by the executable like any buffer. The name is
    // no identifier a pipeline can declare.
    mir::Buffer slots;
    slots.name = "orch.guard." + std::to_string(index);
    slots.elem = mir::ScalarType::U32;
    slots.count = int_constant(copies - 1, mir::ScalarType::U64);
    slots.loc = w.loc;
    L.slots = static_cast<int>(p_.buffers.size());
    p_.buffers.push_back(slots);
    L.status_site = static_cast<int>(p_.status_sites.size());
    p_.status_sites.push_back({w.loc, w.call_stack, "the condition of `while " + mir::to_string(*loop_node.cond, p_) +
                                                        "`, evaluated by an unrolled copy's guard"});
    for (mir::GuardRole role : kRoles) L.functions.push_back(guard_function(L, role));
    p_.unrolled_loops.push_back(std::move(L));
    const mir::UnrolledLoop& loop = p_.unrolled_loops.back();

    std::vector<mir::BufferAccess> guard_reads;
    collect_reads(loop.cond, guard_reads);
    add_access(guard_reads, loop.slots, true, false);

    mir::Node end = std::move(body.nodes.back());
    body.nodes.pop_back();
    const std::vector<mir::Node> original = body.nodes;
    const std::vector<size_t> order = deciders_first(original, guard_reads);
    for (uint32_t k = 2; k <= copies; ++k) {
      for (size_t j : order) {
        mir::Node c = original[j];
        c.guard = mir::Guard{index, k, mir::GuardRole::Race};
        for (const mir::BufferAccess& a : guard_reads) add_access(c.accesses, a.buffer, a.read, a.write);
        body.nodes.push_back(std::move(c));
      }
    }
    for (mir::Node* reset : {&end, &r.nodes[before]}) {
      reset->as<mir::SetConditionNode>().reset_guards.push_back(index);
      add_access(reset->accesses, loop.slots, false, true);
    }
    body.nodes.push_back(std::move(end));
    // The loop node's accesses cover its body's.
    add_access(w.accesses, loop.slots, true, true);
    notes_.push_back(where(w) + ": " + std::to_string(copies) + " copies of its body per WHILE iteration" +
                     (o_.unroll ? "" : " (the compiler's choice for " + std::to_string(m) + (m == 1 ? " node" : " nodes") +
                                           profiled + ")"));
  }

  // The order of a guarded copy's nodes: the one-block nodes orchc generates (scalar updates,
  // fills) that write what the condition reads come first where nothing before them in the body
  // touches what they touch, so that they order the rest of the copy after them. The copy's
  // decision is then taken by one of them (role decide, or race between one-block nodes) and
  // every larger kernel follows (a plain load of the slot) instead of evaluating the condition
  // in every thread (role each): at 4 M elements a guarded copy of a one-element-per-thread
  // kernel ran 1.05x the kernel as a follower against 1.36x with role each (H200, 2026-11-29).
  // Reordering nodes that touch nothing in common changes no result: their edges come from
  // what they touch. User kernels stay where they are (they may share `__device__` state that
  // no access shows), and so does everything after an NVSHMEM statement.
  std::vector<size_t> deciders_first(const std::vector<mir::Node>& nodes,
                                     const std::vector<mir::BufferAccess>& cond) const {
    auto writes_cond = [&](const mir::Node& n) {
      for (const mir::BufferAccess& a : n.accesses)
        for (const mir::BufferAccess& c : cond)
          if (a.write && a.buffer == c.buffer) return true;
      return false;
    };
    auto conflict = [](const mir::Node& a, const mir::Node& b) {
      for (const mir::BufferAccess& x : a.accesses)
        for (const mir::BufferAccess& y : b.accesses)
          if (x.buffer == y.buffer && (x.write || y.write)) return true;
      return false;
    };
    std::vector<size_t> first, rest;
    bool shmem_seen = false;
    for (size_t j = 0; j < nodes.size(); ++j) {
      const mir::Node& n = nodes[j];
      shmem_seen |= n.is<mir::ShmemNode>();
      bool hoist = !shmem_seen && (n.is<mir::ScalarUpdateNode>() || n.is<mir::FillNode>()) && writes_cond(n) &&
                   launch_shape(p_, n, o_.residency).blocks == std::optional<uint64_t>(1);
      for (size_t r : rest) hoist = hoist && !conflict(n, nodes[r]);
      (hoist ? first : rest).push_back(j);
    }
    first.insert(first.end(), rest.begin(), rest.end());
    return first;
  }

  // The device function a user kernel of a copy calls at entry for `role`; its first parameter is
  // the copy's slot index (each copy passes its own).
  mir::UnrolledLoop::Function guard_function(const mir::UnrolledLoop& L, mir::GuardRole role) {
    GeneratedKernel f(p_, "orch_guard");
    const std::string index = f.value(int_constant(0), mir::ScalarType::U32);
    const std::string slots = role == mir::GuardRole::Alone ? "" : f.guard_slots(L.slots, false);
    std::string truth;
    if (role != mir::GuardRole::Follow) {
      truth = "orch_truth<" + std::string(expr::type_code(L.cond.type)) + ">(" + f.expr(L.cond) + ")";
      f.status_param();
    }
    f.add_statement(guard_statement(truth, slots, index, L.status_site, role, true));
    mir::UnrolledLoop::Function fn;
    fn.code = f.finish_function("orch_guard");
    fn.params = f.params();
    fn.args = f.args();
    return fn;
  }

  mir::Program& p_;
  const PassOptions& o_;
  std::vector<std::string> notes_;
};

}  // namespace

// A WHILE iteration pays the node's turn-around and the condition kernel once (4.3-5.2 µs on an
// H200 and an H100) and each guarded copy about 0.5-0.75 µs per node, so more copies amortize
// the turn-around further, while a loop that ends early runs up to U - 1 copies that do nothing.
// A one-node body with 16 copies measured 1.02 µs per iteration by hand against 1.27 with 8
// (H200, driver 580.159.04, 2026-11-23, bench/launch_bench rows n and m); on real kernels
// (bench/real_bench.py, 2026-11-28) 16 copies beat 8 on every loop the compiler unrolls: 2-node
// bodies 10% (the 1 K and 64 K loops), the 3-node sum-while 7%, the 5-node 256^2 stencil 2%.
// So: enough copies for 32 nodes per WHILE iteration (a quarter or less of the turn-around left
// per iteration), at least 8, at most 16 (more was never measured).
uint32_t auto_unroll(size_t nodes) {
  constexpr size_t kNodesPerIteration = 32;
  constexpr size_t kAtLeast = 8, kAtMost = 16;
  return static_cast<uint32_t>(
      std::clamp((kNodesPerIteration + nodes - 1) / std::max<size_t>(nodes, 1), kAtLeast, kAtMost));
}

std::vector<std::string> unroll_loops(mir::Program& program, const PassOptions& options) {
  return Unroller(program, options).run();
}

std::vector<std::pair<SourceRange, std::string>> unrolled_past_wave_budget(const lir::Program& p,
                                                                          const PassOptions& o) {
  std::vector<std::pair<SourceRange, std::string>> found;
  if (o.unroll) return found;  // the user's word
  std::vector<bool> seen(p.unrolled_loops.size(), false);
  // A body holding guarded nodes of loop L is L's WHILE body: the launches of each copy (the
  // first copy's kernels as written, the guarded variants) keep within kMaxExtraWaves.
  std::function<void(const lir::Body&)> walk = [&](const lir::Body& b) {
    for (const lir::Node& n : b.nodes) {
      const auto* c = std::get_if<lir::ConditionalNode>(&n.op);
      if (!c) continue;
      for (const lir::Body& body : c->bodies) {
        walk(body);
        int loop = -1;
        for (const lir::Node& m : body.nodes)
          if (m.guard) loop = m.guard->loop;
        if (loop < 0 || static_cast<size_t>(loop) >= seen.size() || seen[static_cast<size_t>(loop)]) continue;
        std::map<uint32_t, uint64_t> extra;  // copy -> waves past the first, summed
        std::optional<std::string> why;
        for (const lir::Node& m : body.nodes) {
          const auto* k = std::get_if<lir::KernelNode>(&m.op);
          if (!k) continue;
          // As measured where a profile has the launch (its registers are the compiled code's).
          const Launch l = launch_of(p, m, o.residency, o.profile);
          // A grid known only when it runs was unrolled because the profile sized its statement
          // (a fill or copy by its bytes): the compiled code adds nothing to that.
          if (!l.shape.blocks && l.measured) continue;
          const std::optional<uint64_t> e = l.shape.extra_waves();
          const lir::Kernel& kernel = p.kernels.at(static_cast<size_t>(k->kernel));
          const std::string said = "once compiled, " + l.says("its launch of `" + kernel.name + "`");
          uint64_t& sum = extra[m.guard ? m.guard->copy : 1u];
          if (e) sum += *e;
          if (!e || sum > kMaxExtraWaves) {
            why = said + (e ? "; a copy's launches run " + std::to_string(sum) + " waves past their first, more than " +
                                  std::to_string(kMaxExtraWaves)
                            : std::string()) +
                  ", so its run time, not the loop's turn-around, dominates";
            break;
          }
        }
        if (!why) continue;
        seen[static_cast<size_t>(loop)] = true;
        found.emplace_back(p.unrolled_loops[static_cast<size_t>(loop)].loc, *why);
      }
    }
  };
  for (const lir::Graph& g : p.graphs) walk(g.body);
  return found;
}

namespace {


uint32_t param_size(const lir::KernelParam& q) {
  return q.kind == lir::KernelParamKind::Value ? expr::size_of(q.elem) : 8u;
}

class GuardAssigner {
 public:
  explicit GuardAssigner(lir::Program& p) : p_(p) {}

  std::vector<std::string> run() {
    for (lir::Graph& g : p_.graphs) body(g.body);
    for (size_t l = 0; l < p_.unrolled_loops.size(); ++l) {
      const Count& c = counts_[static_cast<int>(l)];
      notes_.push_back("loop " + std::to_string(l) + " at line " + std::to_string(p_.unrolled_loops[l].loc.begin.line) +
                       ": " + std::to_string(p_.unrolled_loops[l].copies) + " copies; guards: " +
                       std::to_string(c.roles[0]) + " alone, " + std::to_string(c.roles[1]) + " decide, " +
                       std::to_string(c.roles[2]) + " race, " + std::to_string(c.roles[3]) + " follow, " +
                       std::to_string(c.roles[4]) + " each; " +
                       std::to_string(c.variants) + " guarded user kernel variants");
    }
    return notes_;
  }

 private:
  struct Count {
    size_t roles[5] = {0, 0, 0, 0, 0};
    size_t variants = 0;
  };

  void body(lir::Body& b) {
    for (lir::Node& n : b.nodes)
      if (auto* c = std::get_if<lir::ConditionalNode>(&n.op))
        for (lir::Body& inner : c->bodies) body(inner);
    // The copies: nodes of one (loop, copy), in order.
    std::map<std::pair<int, uint32_t>, std::vector<size_t>> copies;
    for (size_t i = 0; i < b.nodes.size(); ++i)
      if (b.nodes[i].guard) copies[{b.nodes[i].guard->loop, b.nodes[i].guard->copy}].push_back(i);
    for (const auto& [key, members] : copies) {
      std::set<size_t> in(members.begin(), members.end());
      std::vector<size_t> sources;
      for (size_t i : members) {
        bool preceded = false;
        for (const lir::Dep& d : b.nodes[i].deps) preceded |= in.count(d.from) > 0;
        if (!preceded) sources.push_back(i);
      }
      // Every block of a source that writes none of the condition's buffers sees the condition
      // as the copy found it (a node of the copy that writes one reads it too, through the guard,
      // so the DAG orders it after every such source): each block decides for itself, with no
      // atomic. (A 4096-block copy whose first wave raced for the slot ran 1.35x the plain
      // kernel's time: bench/real_bench.py, `--unroll 16` at 1 M elements.)
      const bool single = sources.size() == 1 && one_block(b.nodes[sources[0]]);
      for (size_t i : members) {
        const bool source = std::find(sources.begin(), sources.end(), i) != sources.end();
        const bool writes = writes_condition(b.nodes[i], p_.unrolled_loops[key.first]);
        const bool decides = single || !writes;
        mir::GuardRole role = !source   ? mir::GuardRole::Follow
                             : !decides ? mir::GuardRole::Race
                             : !writes ? mir::GuardRole::Each
                             : members.size() == 1 ? mir::GuardRole::Alone
                                                   : mir::GuardRole::Decide;
        apply(b.nodes[i], role);
      }
    }
  }

  void apply(lir::Node& n, mir::GuardRole role) {
    n.guard->role = role;
    ++counts_[n.guard->loop].roles[static_cast<int>(role)];
    auto& kn = std::get<lir::KernelNode>(n.op);  // unroll_loops made every guarded node a kernel
    lir::Kernel& k = p_.kernels[kn.kernel];
    if (k.generated) {
      // One generated kernel per node: its placeholder becomes this role's guard.
      const size_t at = k.source.find(kGuardPlaceholder);
      if (at != std::string::npos && static_cast<size_t>(role) < k.guard_variants.size())
        k.source.replace(at, std::string(kGuardPlaceholder).size(), k.guard_variants[static_cast<int>(role)]);
      k.guard = n.guard;
      return;
    }
    kn.kernel = variant(kn.kernel, *n.guard);
    const lir::UnrolledLoop::Function& f = p_.unrolled_loops[n.guard->loop].functions[static_cast<int>(role)];
    for (size_t i = 0; i < f.args.size(); ++i) {
      lir::KernelArg a = f.args[i];
      if (i == 0) {  // the copy's slot index
        a.value.code = {expr::Instr{}};
        a.value.code[0].kind = expr::InstrKind::Const;
        a.value.code[0].type = expr::ScalarType::U32;
        a.value.code[0].value = expr::Value{expr::ScalarType::U32, n.guard->copy - 2};
        a.value.text = std::to_string(n.guard->copy - 2);
      }
      kn.args.push_back(std::move(a));
    }
  }

  // The guarded variant of user kernel `kernel` for `g`: one per kernel, loop and role (each copy
  // passes its slot index as an argument).
  int variant(int kernel, const mir::Guard& g) {
    auto key = std::make_tuple(kernel, g.loop, static_cast<int>(g.role));
    auto it = variants_.find(key);
    if (it != variants_.end()) return it->second;
    const lir::UnrolledLoop::Function& f = p_.unrolled_loops[g.loop].functions[static_cast<int>(g.role)];
    lir::Kernel v = p_.kernels[kernel];
    v.guard = mir::Guard{g.loop, 0, g.role};
    v.guard_of = kernel;
    v.guard_code = f.code;
    for (lir::KernelParam q : f.params) {
      q.name = "orch_guard_" + q.name;
      v.guard_param_sizes.push_back(param_size(q));
      v.params.push_back(std::move(q));
    }
    p_.kernels.push_back(std::move(v));
    ++counts_[g.loop].variants;
    const int index = static_cast<int>(p_.kernels.size() - 1);
    variants_.emplace(key, index);
    return index;
  }

  lir::Program& p_;
  std::map<std::tuple<int, int, int>, int> variants_;
  std::map<int, Count> counts_;
  std::vector<std::string> notes_;
};

}  // namespace

std::vector<std::string> assign_guards(lir::Program& program) { return GuardAssigner(program).run(); }

void add_guard(GeneratedKernel& k, const mir::Program& p, const mir::Guard& g, std::vector<std::string>* variants) {
  const mir::UnrolledLoop& L = p.unrolled_loops[g.loop];
  const std::string slots = k.guard_slots(L.slots, false);
  const std::string index = std::to_string(g.copy - 2) + "u";
  const std::string truth = "orch_truth<" + std::string(expr::type_code(L.cond.type)) + ">(" + k.expr(L.cond) + ")";
  k.status_param();
  variants->clear();
  for (mir::GuardRole role : kRoles) variants->push_back(guard_statement(truth, slots, index, L.status_site, role, false));
  k.add_statement(kGuardPlaceholder);
}

bool writes_condition(const lir::Node& n, const lir::UnrolledLoop& loop) {
  for (const lir::BufferAccess& a : n.accesses)
    if (a.write && std::find(loop.cond_buffers.begin(), loop.cond_buffers.end(), a.buffer) != loop.cond_buffers.end())
      return true;
  return false;
}

bool one_block(const lir::Node& n) {
  const auto* k = std::get_if<lir::KernelNode>(&n.op);
  if (!k) return false;
  for (const lir::Expr& d : k->grid) {
    const expr::Instr* leaf = d.leaf();
    if (!leaf || leaf->kind != expr::InstrKind::Const || leaf->value.bits != 1) return false;
  }
  return true;
}

}  // namespace orch::lowering
