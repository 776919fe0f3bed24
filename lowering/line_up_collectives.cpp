// Small kernels wait for the collective before them instead of running beside it.
//
// A kernel that the DAG leaves free of the collective before it (kernel k+1 of a data-parallel
// step does not read what allreduce k wrote) may run while that collective does. When the kernel
// is long that overlap is the point. When it is short (its grid fits in one wave, so its launch
// latency, not its run time, dominates) there is nothing to overlap, and the join costs: the
// next collective then waits on two branches (the kernel and the collective chain the runtime
// keeps in node order), and CUDA runs the branches on separate internal streams, so the step
// pays a cross-stream wait per collective. On two H200s (bench/collective_bench, NCCL 2.28.3)
// the free step of 8 to 32 one-block kernels and small allreduces was 7-21% slower than the same
// step with each kernel after the collective before it (docs/multi-gpu.md, "Performance").
//
// So a kernel whose launch is known to fit in one wave (launch_shape) gets a full edge from the
// last collective before it in node order, unless the DAG already orders it after that
// collective. An edge only adds order: verify_ordering's proof is unchanged, and a collective
// never depends on a later node, so no cycle can form. Launches of several waves, or of a size
// known only when they run, stay free to overlap.
#include <algorithm>

#include "lowering/passes.h"

namespace orch::lowering {

namespace {

std::string where(const lir::Node& n) {
  return "line " + std::to_string(n.loc.begin.line) + ":" + std::to_string(n.loc.begin.col);
}

void body(lir::Program& p, lir::Body& b, const PassOptions& o, std::vector<std::string>& notes, size_t& lined,
          size_t& free) {
  const size_t count = b.nodes.size();
  // Forward edges, to know what a collective already orders.
  std::vector<std::vector<uint32_t>> next(count);
  for (size_t i = 0; i < count; ++i)
    for (const lir::Dep& d : b.nodes[i].deps) next[d.from].push_back(static_cast<uint32_t>(i));
  int last = -1;                 // the last collective so far, in node order
  std::vector<bool> after_last;  // nodes the DAG orders after it
  for (size_t i = 0; i < count; ++i) {
    lir::Node& n = b.nodes[i];
    if (std::holds_alternative<lir::CollectiveNode>(n.op)) {
      last = static_cast<int>(i);
      after_last.assign(count, false);
      std::vector<uint32_t> stack{static_cast<uint32_t>(i)};
      while (!stack.empty()) {
        const uint32_t at = stack.back();
        stack.pop_back();
        for (uint32_t m : next[at])
          if (!after_last[m]) after_last[m] = true, stack.push_back(m);
      }
      continue;
    }
    const auto* k = std::get_if<lir::KernelNode>(&n.op);
    if (!k || last < 0 || after_last[i]) continue;
    const LaunchShape shape = launch_shape(p, *k, o.residency);
    if (!shape.one_wave()) {
      ++free;
      continue;
    }
    n.deps.push_back({static_cast<uint32_t>(last), lir::DepKind::Full});
    next[static_cast<size_t>(last)].push_back(static_cast<uint32_t>(i));
    after_last[i] = true;
    // What comes after this kernel now comes after the collective too.
    std::vector<uint32_t> stack{static_cast<uint32_t>(i)};
    while (!stack.empty()) {
      const uint32_t at = stack.back();
      stack.pop_back();
      for (uint32_t m : next[at])
        if (!after_last[m]) after_last[m] = true, stack.push_back(m);
    }
    ++lined;
    n.order_note = "after the collective at " + where(b.nodes[static_cast<size_t>(last)]) + ": this launch has " +
                   shape.describe(o.residency) + ", too short to gain from running beside it";
  }
  (void)notes;
}

}  // namespace

std::vector<std::string> line_up_collectives(lir::Program& program, const PassOptions& options) {
  std::vector<std::string> notes;
  if (!options.line_up_collectives) return notes;
  size_t lined = 0, free = 0;
  // Collectives are nodes of host graphs' top level only (the checker refuses them elsewhere).
  for (lir::Graph& g : program.graphs)
    if (!g.device) body(program, g.body, options, notes, lined, free);
  if (lined || free)
    notes.push_back("kernels after a collective: " + std::to_string(lined) + " lined up after it (one wave), " +
                    std::to_string(free) + " left free to overlap it");
  return notes;
}

}  // namespace orch::lowering
