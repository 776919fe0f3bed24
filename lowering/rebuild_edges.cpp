#include "compiler/dag.h"
#include "lowering/passes.h"

namespace orch::lowering {

void rebuild_edges(ir::Program& p) {
  for (ir::Graph& g : p.graphs) derive_edges(g.body);
}

}  // namespace orch::lowering
