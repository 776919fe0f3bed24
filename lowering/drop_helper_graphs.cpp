#include "lowering/passes.h"

namespace orch::lowering {

void drop_helper_graphs(mir::Program& p) {
  for (size_t g = 0; g < p.graphs.size(); ++g) {
    mir::Graph& graph = p.graphs[g];
    if (graph.device || static_cast<int>(g) == p.main_graph) continue;
    graph.body = mir::Region();
    graph.fire_and_forget_launches = graph.tail_launches = graph.self_tail_launches = 0;
  }
}

}  // namespace orch::lowering
