// No two `while` loops run at the same time: in every body, the nodes that hold a WHILE
// conditional node (the node itself, or an IF/SWITCH with one in a body) are put in program
// order by full edges where the DAG leaves them unordered.
//
// Why: on an H200 with driver 580.159.04 (CUDA 13.0, 2026-11-28), two WHILE nodes whose bodies
// run again while the other's do fault the GPU (cudaErrorLaunchFailure), some launches out of
// every few hundred, and a few thousand launches in a row crash cuGraphLaunch on the host.
// bench/while_fault_probe.cu does it with plain CUDA calls (docs/performance.md, "Loops run one
// at a time"): WHILE nodes free of each other in one graph, or two graphs with one WHILE each on
// two streams; bodies that run once, IF nodes, and loops one after another never fault. So orch
// keeps the loops of each graph in order here, and verify_ordering checks it; device-launched
// graphs hold no loops (E0501), and the runtime orders launches of pipelines with loops across
// streams (runtime/src/loop_order.h).
//
// An edge only adds order: node indices are a topological order, so an edge from an earlier
// node to a later one never closes a cycle, and what the verifier proved still holds.
#include "lowering/passes.h"

namespace orch::lowering {

namespace {

void order_body(lir::Body& b, size_t& added) {
  const size_t count = b.nodes.size();
  int last = -1;  // the last node so far that holds a loop
  for (size_t i = 0; i < count; ++i) {
    lir::Node& n = b.nodes[i];
    if (auto* c = std::get_if<lir::ConditionalNode>(&n.op))
      for (lir::Body& inner : c->bodies) order_body(inner, added);
    if (!lir::holds_while(n)) continue;
    if (last >= 0 && !lir::reaches(b, static_cast<uint32_t>(last), static_cast<uint32_t>(i))) {
      n.deps.push_back({static_cast<uint32_t>(last), lir::DepKind::Full});
      n.order_note = "after the loop at " + lir::where(b.nodes[last]) +
                     ": two while loops running at once fault the GPU (driver 580)";
      ++added;
    }
    last = static_cast<int>(i);
  }
}

}  // namespace

std::vector<std::string> one_loop_at_a_time(lir::Program& program) {
  std::vector<std::string> notes;
  size_t added = 0;
  for (lir::Graph& g : program.graphs) order_body(g.body, added);
  if (added)
    notes.push_back("while loops: " + std::to_string(added) +
                    " put after the loop before them (two running at once fault the GPU)");
  return notes;
}

}  // namespace orch::lowering
