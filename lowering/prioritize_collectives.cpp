// NCCL's kernels at the greatest priority where other kernels may run beside a collective.
//
// A kernel the DAG leaves free of a collective (kernel k+1 of a data-parallel step beside
// allreduce k) runs on the SMs at the same time as NCCL's kernel. When it is large it fills every
// SM, and as its blocks finish the block scheduler hands the freed places to its own remaining
// blocks before NCCL's, so the collective starts late and the step waits on it. With NCCL's
// kernels at the greatest priority the scheduler places them first. On four H200s
// (bench/collective_bench and bench/scaling_bench, NCCL 2.28.3, 2026-11-28) steps with a 4 M
// element kernel beside each allreduce ran 1.08x (2 GPUs) to 1.24x (4 GPUs) faster, and the
// data-parallel step 1.03-1.04x, with results bit for bit the same; a chain with nothing beside
// its collectives gained nothing, and instantiating with node priorities cost such chains up to
// 2%, so those keep the stream's priority.
//
// So, per host graph: a collective with a kernel or conditional node (which runs kernels)
// neither before nor after it in the DAG (which holds the collectives' own chain) gets
// high_priority; the runtime sets the priority on
// the kernel nodes NCCL's capture makes for it and instantiates that segment with node
// priorities. Priority orders no memory: verify_ordering's proof is unchanged.
#include <algorithm>

#include "lowering/passes.h"

namespace orch::lowering {

namespace {

bool runs_kernels(const lir::NodeOp& op) {
  return std::visit(overloaded{
                        [](const lir::KernelNode&) { return true; },
                        [](const lir::ConditionalNode&) { return true; },
                        [](const lir::MemcpyNode&) { return false; },
                        [](const lir::MemsetNode&) { return false; },
                        [](const lir::EmptyNode&) { return false; },
                        [](const lir::CollectiveNode&) { return false; },
                    },
                    op);
}

// The chain the runtime keeps the collectives in is in the deps already (collectives_in_order
// runs first), so the DAG alone says what is ordered.
void body(lir::Body& b, std::vector<std::string>& notes, size_t& prioritized) {
  const size_t count = b.nodes.size();
  for (size_t c = 0; c < count; ++c) {
    auto* coll = std::get_if<lir::CollectiveNode>(&b.nodes[c].op);
    if (!coll) continue;
    for (size_t k = 0; k < count; ++k) {
      if (k == c || !runs_kernels(b.nodes[k].op)) continue;
      const uint32_t lo = static_cast<uint32_t>(std::min(k, c)), hi = static_cast<uint32_t>(std::max(k, c));
      const bool ordered = lir::reaches(b, lo, hi);
      if (ordered) continue;
      coll->high_priority = true;
      ++prioritized;
      if (notes.size() < 8)
        notes.push_back("collective at " + lir::where(b.nodes[c]) + ": NCCL's kernels at high priority, since the " +
                        lir::kind_name(b.nodes[k].op) + " at " + lir::where(b.nodes[k]) + " may run beside it");
      break;
    }
  }
}

}  // namespace

std::vector<std::string> prioritize_collectives(lir::Program& program, const PassOptions& options) {
  std::vector<std::string> notes;
  if (!options.prioritize_collectives) return notes;
  size_t prioritized = 0;
  // Collectives are nodes of host graphs' top level only (the checker refuses them elsewhere).
  for (lir::Graph& g : program.graphs)
    if (!g.device) body(g.body, notes, prioritized);
  if (prioritized)
    notes.push_back("collectives at high priority: " + std::to_string(prioritized) + " (kernels may run beside them)");
  return notes;
}

}  // namespace orch::lowering
