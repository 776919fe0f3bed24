#include "lowering/passes.h"

namespace orch::lowering {

namespace {
void walk(ir::Region& r, int graph, const std::function<void(ir::Region&, int)>& f) {
  f(r, graph);
  for (ir::Node& n : r.nodes)
    for (ir::Region& body : ir::bodies(n)) walk(body, graph, f);
}
}  // namespace

void for_each_region(ir::Program& program,
                     const std::function<void(ir::Region& region, int graph)>& f) {
  for (size_t g = 0; g < program.graphs.size(); ++g)
    walk(program.graphs[g].body, static_cast<int>(g), f);
}

}  // namespace orch::lowering
