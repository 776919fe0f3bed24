// The order the device graphs are instantiated in, and which graph arguments are set late:
// decided once here, for both back ends (the artifact records it, the runtime and --emit=cuda
// follow it). A kernel's `graph` argument holds the callee's executable graph, which exists only
// once the callee is instantiated; so callees come first, and an argument naming a graph not
// instantiated yet (itself: a self tail launch, or a graph of a cycle) is patched on the
// executable graph after every device graph is instantiated. Family tables are allocated before
// any graph is built (their contents filled before upload), so a table argument is never late.
#include <functional>

#include "lowering/passes.h"

namespace orch::lowering {

namespace {

template <class F>
void for_each_kernel_arg(lir::Body& body, F&& f) {
  for (lir::Node& n : body.nodes) {
    if (auto* k = std::get_if<lir::KernelNode>(&n.op))
      for (lir::KernelArg& a : k->args) f(a);
    if (auto* c = std::get_if<lir::ConditionalNode>(&n.op))
      for (lir::Body& b : c->bodies) for_each_kernel_arg(b, f);
  }
}

}  // namespace

std::vector<std::string> order_device_graphs(lir::Program& p) {
  const size_t n = p.graphs.size();
  // Depth first over graph arguments, callees before their callers; a callee already on the
  // path (a cycle) is skipped, so the caller that closes the cycle comes first.
  std::vector<int> state(n, 0);  // 0 unseen, 1 on the path, 2 placed
  p.device_order.clear();
  std::function<void(int)> visit = [&](int g) {
    state[g] = 1;
    for_each_kernel_arg(p.graphs[g].body, [&](const lir::KernelArg& a) {
      if (a.kind != lir::ArgKind::GraphExec || a.ref < 0 || static_cast<size_t>(a.ref) >= n) return;
      if (a.ref != g && p.graphs[a.ref].device && state[a.ref] == 0) visit(a.ref);
    });
    state[g] = 2;
    p.device_order.push_back(g);
  };
  for (size_t g = 0; g < n; ++g)
    if (p.graphs[g].device && state[g] == 0) visit(static_cast<int>(g));

  std::vector<std::string> notes;
  std::vector<bool> ready(n, false);
  for (int g : p.device_order) {
    size_t late = 0;
    for_each_kernel_arg(p.graphs[g].body, [&](lir::KernelArg& a) {
      a.late = a.kind == lir::ArgKind::GraphExec &&
               (a.ref < 0 || a.ref == g || static_cast<size_t>(a.ref) >= n || !ready[a.ref]);
      late += a.late;
    });
    ready[g] = true;
    if (late)
      notes.push_back("graph " + p.graphs[g].name + ": " + std::to_string(late) +
                      " graph argument(s) set after instantiation (itself, or a graph instantiated after it)");
  }
  // Host graphs are built after every device graph: nothing of theirs is late.
  for (size_t g = 0; g < n; ++g)
    if (!p.graphs[g].device)
      for_each_kernel_arg(p.graphs[g].body, [](lir::KernelArg& a) { a.late = false; });
  return notes;
}

}  // namespace orch::lowering
