// Small kernels wait for the collective before them instead of running beside it, in a graph
// where nothing large could run beside the collectives.
//
// A kernel that the DAG leaves free of the collective before it (kernel k+1 of a data-parallel
// step does not read what allreduce k wrote) may run while that collective does. When nothing
// but short kernels (grids that fit in one wave: launch latency, not run time, dominates) would
// run beside the collectives, there is nothing to overlap and the joins cost: each collective
// then waits on two branches (its kernel and the collective chain the runtime keeps in node
// order), which CUDA runs on separate internal streams. On two H200s (bench/collective_bench,
// NCCL 2.28.3, 2026-11-28) steps of 8 to 32 one-block kernels and small allreduces ran
// 1.05-1.23x faster with each kernel after the collective before it. But where a graph also has
// multi-wave kernels free to run beside the collectives, they fill the SMs, every short kernel on
// the collective chain then waits for a place to run, and leaving the short kernels free (run
// early, off the chain) was 1.12-1.15x faster than lining them up (the same benchmark's rows with
// an independent kernel of 4 M elements per allreduce).
//
// So, per host graph: where every kernel the DAG leaves free of the last collective before it is
// known to fit in one wave (launch_shape, or as orchc --profile measured it), each gets a full
// edge from that collective; where any is larger (or of a size known only when it runs), none
// does. An edge only adds order: verify_ordering's proof is unchanged, and a collective never
// depends on a later node, so no cycle can form.
#include <algorithm>

#include "lowering/passes.h"

namespace orch::lowering {

namespace {

// Each kernel the DAG leaves free of the last collective before it, with that collective.
struct Candidate {
  uint32_t kernel, collective;
  Launch launch;  // as measured where a profile has it (orchc --profile)
};

void body(lir::Program& p, lir::Body& b, const PassOptions& o, std::vector<std::string>& notes,
          size_t& lined) {
  const size_t count = b.nodes.size();
  // Forward edges, to know what a collective already orders.
  std::vector<std::vector<uint32_t>> next(count);
  for (size_t i = 0; i < count; ++i)
    for (const lir::Dep& d : b.nodes[i].deps) next[d.from].push_back(static_cast<uint32_t>(i));
  std::vector<bool> after_last;  // nodes the DAG orders after the last collective so far
  auto reach = [&](uint32_t from) {
    std::vector<uint32_t> stack{from};
    while (!stack.empty()) {
      const uint32_t at = stack.back();
      stack.pop_back();
      for (uint32_t m : next[at])
        if (!after_last[m]) after_last[m] = true, stack.push_back(m);
    }
  };
  int last = -1;
  std::vector<Candidate> candidates;
  const Candidate* large = nullptr;
  for (size_t i = 0; i < count; ++i) {
    lir::Node& n = b.nodes[i];
    if (std::holds_alternative<lir::CollectiveNode>(n.op)) {
      last = static_cast<int>(i);
      after_last.assign(count, false);
      reach(static_cast<uint32_t>(i));
      continue;
    }
    const auto* k = std::get_if<lir::KernelNode>(&n.op);
    if (!k || last < 0 || after_last[i]) continue;
    candidates.push_back({static_cast<uint32_t>(i), static_cast<uint32_t>(last), launch_of(p, n, o.residency, o.profile)});
  }
  for (const Candidate& c : candidates)
    if (!c.launch.shape.one_wave() && !large) large = &c;
  if (large) {
    const lir::Node& n = b.nodes[large->kernel];
    notes.push_back("kernels beside collectives: " + std::to_string(candidates.size()) + " left free, since " +
                    large->launch.says("the one at " + lir::where(n)) +
                    " and would fill the SMs the collective chain's short kernels need");
    return;
  }
  // Lined up in node order: each edge also orders what follows the kernel after the collective.
  for (const Candidate& c : candidates) {
    lir::Node& n = b.nodes[c.kernel];
    n.deps.push_back({c.collective, lir::DepKind::Full});
    ++lined;
    n.order_note = "after the collective at " + lir::where(b.nodes[c.collective]) + ": " + c.launch.says("this launch") +
                   ", too short to gain from running beside it";
  }
}

}  // namespace

std::vector<std::string> line_up_collectives(lir::Program& program, const PassOptions& options) {
  std::vector<std::string> notes;
  if (!options.line_up_collectives) return notes;
  size_t lined = 0;
  // Collectives are nodes of host graphs' top level only (the checker refuses them elsewhere).
  for (lir::Graph& g : program.graphs)
    if (!g.device) body(program, g.body, options, notes, lined);
  if (lined) notes.push_back("kernels beside collectives: " + std::to_string(lined) + " lined up after them (one wave)");
  return notes;
}

}  // namespace orch::lowering
