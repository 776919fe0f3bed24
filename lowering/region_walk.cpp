#include "lowering/passes.h"

namespace orch::lowering {

namespace {
void walk(mir::Region& r, int graph, const std::function<void(mir::Region&, int)>& f) {
  f(r, graph);
  for (mir::Node& n : r.nodes)
    for (mir::Region& body : mir::bodies(n)) walk(body, graph, f);
}
}  // namespace

void for_each_region(mir::Program& program,
                     const std::function<void(mir::Region& region, int graph)>& f) {
  for (size_t g = 0; g < program.graphs.size(); ++g)
    walk(program.graphs[g].body, static_cast<int>(g), f);
}

}  // namespace orch::lowering
