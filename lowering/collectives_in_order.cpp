// Each collective after the one before it in node order, by a full edge where the DAG leaves
// the two unordered.
//
// Why: NCCL needs every rank to issue a communicator's collectives in one order, and two
// branches of a CUDA graph that nothing orders may run in either order, or at once. Node order
// is the same on every rank (the same artifact), so it is the order. The runtime has always
// kept it when it builds a segment (runtime/src/executable_build.cpp); deciding it here puts it
// in the artifact, so the ejected CUDA (--emit=cuda) keeps it too, and the runtime finds the
// edge already there (rt::depends_on) instead of adding one. Where a kernel lined up between
// two collectives already orders them (line_up_collectives), no edge is added: a second
// dependency would cost the step (docs/multi-gpu.md, "Performance").
//
// An edge only adds order: node indices are a topological order, so an edge from an earlier
// node to a later one never closes a cycle, and what the verifier proved still holds.
#include "lowering/passes.h"

namespace orch::lowering {

std::vector<std::string> collectives_in_order(lir::Program& program) {
  std::vector<std::string> notes;
  size_t added = 0;
  // Collectives are nodes of host graphs' top level only (the checker refuses them elsewhere).
  for (lir::Graph& g : program.graphs) {
    if (g.device) continue;
    lir::Body& b = g.body;
    int last = -1;
    for (size_t i = 0; i < b.nodes.size(); ++i) {
      lir::Node& n = b.nodes[i];
      if (!std::holds_alternative<lir::CollectiveNode>(n.op)) continue;
      if (last >= 0 && !lir::reaches(b, static_cast<uint32_t>(last), static_cast<uint32_t>(i))) {
        n.deps.push_back({static_cast<uint32_t>(last), lir::DepKind::Full});
        n.order_note = "after the collective at " + lir::where(b.nodes[last]) +
                       ": every rank issues a communicator's collectives in one order";
        ++added;
      }
      last = static_cast<int>(i);
    }
  }
  if (added) notes.push_back("collectives in node order: " + std::to_string(added) + " edges added");
  return notes;
}

}  // namespace orch::lowering
