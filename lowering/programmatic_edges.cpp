// Programmatic edges (programmatic dependent launch, PDL) wherever they are safe.
//
// A full edge A -> B starts B when A has finished. A programmatic edge (CUDA's
// cudaGraphDependencyTypeProgrammatic from cudaGraphKernelNodePortProgrammatic) lets B start
// as soon as every block of A has triggered or exited; B's blocks then run whatever comes before
// their griddepcontrol.wait (cudaGridDependencySynchronize), which returns only when A has
// finished and its memory operations are visible (CUDA C++ Programming Guide, "Programmatic
// Dependent Launch and Synchronization"). Every kernel that waits at entry triggers right after
// its wait (after its guard, in an unrolled copy), so B launches while A runs and its launch
// latency hides behind A; where the trigger goes, and why not before the wait, is kPdlTrigger's
// comment (lowering/codegen.h). The trigger changes nothing below: it only lets B start early,
// and B's wait is what orders its accesses.

//
// Why it orders memory exactly like a full edge, so that verify_ordering's proof over the
// dependencies (every conflicting pair of accesses joined by a path) holds unchanged:
// - Locally: only kernels that wait at entry (Kernel::waits_at_entry) get one. Their first
//   instruction is griddepcontrol.wait: orchc's kernels have it first in their source, user
//   kernels get it as the first instruction of their PTX entry (lowering/ptx_entry.cpp), after
//   nothing but declarations. So no access of B happens before A has finished and its writes
//   are visible: for B's accesses, A -> B is a full edge.
// - Along paths: a path A -> B -> C orders A before C if each edge does. If B -> C is
//   programmatic, C's accesses wait for B to finish; B finishes only after its own wait returned,
//   i.e. after A finished with its memory visible (A -> B full or programmatic alike). If B -> C
//   is full, C starts after B finished, hence after A. By induction every path orders its ends:
//   the reachability verify_ordering checks is exactly the ordering the GPU gives.
// - What a programmatic edge cannot join: anything but two kernel nodes (CUDA's rule: the port
//   belongs to kernel nodes), and kernels that launch work from the device (a graph launch or a
//   kernel launch from the device is work the wait does not cover: the launched work belongs to
//   the launching kernel's completion only as CUDA defines it for full edges), so those keep full
//   edges, as do copies, memsets, conditionals, collectives (child graphs) and empty nodes.
// - Where: every graph, conditional bodies and graphs launched from the device included. CUDA's
//   documentation says nothing of the last two; runtime/tests/pdl_gpu_test.cpp asked the GPU
//   (H200, driver 580.159.04: accepted, exact), and PassOptions::pdl_in_bodies and
//   pdl_in_device_graphs can still turn each off.
#include <algorithm>

#include "lowering/passes.h"

namespace orch::lowering {

namespace {

// A kernel that launches graphs or kernels from the device: its graph and graph-family
// arguments, its `graph` parameters, or kernel launches its source shows (or its PTX, once
// compiled).
bool launches_from_device(const lir::Kernel& k, const lir::KernelNode& n) {
  if (k.launches_kernels || k.may_launch_kernels || !k.budgets.empty()) return true;
  for (const lir::KernelArg& a : n.args)
    if (a.kind == lir::ArgKind::GraphExec || a.kind == lir::ArgKind::GraphTable) return true;
  return false;
}

class Pass {
 public:
  Pass(lir::Program& p, const PassOptions& o, bool compiled) : p_(p), o_(o), compiled_(compiled) {}

  std::vector<std::string> run() {
    p_.pdl = o_.pdl;
    p_.pdl_in_bodies = o_.pdl && o_.pdl_in_bodies;
    p_.pdl_in_device_graphs = o_.pdl && o_.pdl_in_device_graphs;
    if (!compiled_) {
      // Which user kernels must wait is decided below, from the edges they get.
      for (lir::Kernel& k : p_.kernels)
        if (!k.generated) k.waits_at_entry = false;
    }
    for (lir::Graph& g : p_.graphs) {
      const bool allowed = p_.pdl && (!g.device || p_.pdl_in_device_graphs);
      body(g.body, allowed);
    }
    if (!compiled_) {
      for (size_t k = 0; k < p_.kernels.size(); ++k)
        if (!p_.kernels[k].generated && wait_[k]) p_.kernels[k].waits_at_entry = true;
    }
    if (!p_.pdl) {
      notes_.push_back(o_.pdl ? "programmatic edges: none (off)" : "programmatic edges: none");
    } else {
      notes_.push_back("programmatic edges: " + std::to_string(made_) + " of " + std::to_string(kernel_edges_) +
                       " kernel -> kernel edges" +
                       (too_big_ ? "; " + std::to_string(too_big_) + " kept full: a launch of more than one wave" : "") +
                       (from_profile_ ? "; " + std::to_string(from_profile_) + " programmatic from the profile's measured launches" : "") +
                       (p_.pdl_in_bodies ? "" : "; none inside conditional bodies (not yet known to work)") +
                       (p_.pdl_in_device_graphs ? "" : "; none in device graphs (not yet known to work)"));
    }
    return notes_;
  }

 private:
  // The kernel of a kernel node that may be an end of a programmatic edge, or nullptr.
  const lir::Kernel* end(const lir::Node& n) const {
    const auto* k = std::get_if<lir::KernelNode>(&n.op);
    if (!k || k->kernel < 0 || static_cast<size_t>(k->kernel) >= p_.kernels.size()) return nullptr;
    const lir::Kernel& kernel = p_.kernels[k->kernel];
    return launches_from_device(kernel, *k) ? nullptr : &kernel;
  }

  // Whether the kernel of node `n` waits at entry, or will (a user kernel not compiled yet that
  // can be patched).
  bool can_wait(const lir::Kernel& k) const {
    if (k.generated || compiled_) return k.waits_at_entry;
    return o_.patch_user_kernels;
  }

  void body(lir::Body& b, bool allowed) {
    wait_.resize(p_.kernels.size(), false);
    for (lir::Node& n : b.nodes) {
      n.edge_note.clear();
      if (auto* c = std::get_if<lir::ConditionalNode>(&n.op))
        for (lir::Body& inner : c->bodies) body(inner, allowed && p_.pdl_in_bodies);
      for (lir::Dep& d : n.deps) {
        const bool both_kernels = std::holds_alternative<lir::KernelNode>(n.op) &&
                                  std::holds_alternative<lir::KernelNode>(b.nodes[d.from].op);
        kernel_edges_ += both_kernels;
        const lir::Kernel* to = allowed ? end(n) : nullptr;
        const lir::Kernel* from = to ? end(b.nodes[d.from]) : nullptr;
        bool programmatic = to && from && can_wait(*to);
        if (programmatic) {
          // Only between launches that fit in one wave: where a grid runs in several, its run
          // time dominates and a programmatic edge measured slower than a full one (H200,
          // bench/real_bench.py: 1.6x on chains of 1 M to 64 M elements, 1.2x compute-bound).
          // Where a profile measured a launch (orchc --profile), as it ran (profile_use.h).
          const Launch a = launch_of(p_, b.nodes[d.from], o_.residency, o_.profile);
          const Launch z = launch_of(p_, n, o_.residency, o_.profile);
          if (!a.shape.one_wave() || !z.shape.one_wave()) {
            programmatic = false;
            ++too_big_;
            const Launch& big = !z.shape.one_wave() ? z : a;
            n.edge_note = std::string("full edge") + (n.deps.size() > 1 ? "s" : "") + " from kernels: " +
                          big.says(!z.shape.one_wave() ? "this launch" : "%" + std::to_string(d.from)) +
                          " (programmatic edges join one-wave launches only)";
          } else if (a.measured_shape || z.measured_shape) {
            ++from_profile_;
            n.edge_note = "programmatic edge from kernels: " +
                          (z.measured_shape ? z.says("this launch") : a.says("%" + std::to_string(d.from))) +
                          " (programmatic edges join one-wave launches only)";
          }
        }
        d.kind = programmatic ? lir::DepKind::Programmatic : lir::DepKind::Full;
        if (!programmatic) continue;
        ++made_;
        wait_[std::get<lir::KernelNode>(n.op).kernel] = true;
      }
    }
  }

  lir::Program& p_;
  const PassOptions& o_;
  bool compiled_;
  std::vector<bool> wait_;
  std::vector<std::string> notes_;
  size_t made_ = 0, kernel_edges_ = 0, too_big_ = 0, from_profile_ = 0;
};

}  // namespace

std::vector<std::string> programmatic_edges(lir::Program& program, const PassOptions& options, bool compiled) {
  return Pass(program, options, compiled).run();
}

}  // namespace orch::lowering
