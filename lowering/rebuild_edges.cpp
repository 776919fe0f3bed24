#include "compiler/dag.h"
#include "lowering/passes.h"

namespace orch::lowering {

namespace {

// A condition kernel sets its conditional node's handle: an ordering no buffer shows (the
// node may read nothing the kernel writes), so it is added by hand.
void order_condition_kernels(ir::Region& r) {
  for (size_t j = 0; j < r.nodes.size(); ++j) {
    ir::ConditionalParts* c = ir::conditional(r.nodes[j]);
    if (!c) continue;
    for (ir::Region& body : c->bodies) order_condition_kernels(body);
    int handle = c->handle;
    if (handle < 0 || c->bodies.empty()) continue;
    for (size_t i = 0; i < j; ++i) {
      const ir::KernelNode* k = std::get_if<ir::KernelNode>(&r.nodes[i].op);
      if (!k) continue;  // after generate_kernels only a kernel sets a handle
      bool sets = false;
      for (const ir::KernelArg& a : k->args) sets |= a.kind == ir::ArgKind::CondHandle && a.ref == handle;
      if (!sets || is_ordered(r, static_cast<int>(i), static_cast<int>(j))) continue;
      r.edges.push_back({static_cast<int>(i), static_cast<int>(j), -1, ir::DepKind::Condition});
    }
  }
}

}  // namespace

void rebuild_edges(ir::Program& p) {
  for (ir::Graph& g : p.graphs) {
    derive_edges(g.body);
    order_condition_kernels(g.body);
  }
}

}  // namespace orch::lowering
