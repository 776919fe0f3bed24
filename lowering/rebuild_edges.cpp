#include <algorithm>

#include "compiler/dag.h"
#include "lowering/passes.h"

namespace orch::lowering {

namespace {

// Conditional handles a node sets with cudaGraphSetConditional (compiler/dag.cpp's rule, with
// the handles lower_conditions named): its handle arguments and its `cond` arguments (-1, the
// innermost `while kernel`'s), and for a conditional node what its bodies set (a nested
// `while kernel`'s `cond` is its own).
void handles_set(const mir::Node& n, bool in_own_loop, std::vector<int>& out) {
  const mir::KernelNode* launch = std::get_if<mir::KernelNode>(&n.op);
  for (const mir::KernelArg& a : launch ? launch->args : std::vector<mir::KernelArg>{}) {
    int key = a.kind == mir::ArgKind::CondHandle         ? a.ref
              : a.kind == mir::ArgKind::Cond && !in_own_loop ? -1
                                                               : -2;
    if (key != -2 && std::find(out.begin(), out.end(), key) == out.end()) out.push_back(key);
  }
  const bool own = n.is<mir::WhileNode>() && !n.as<mir::WhileNode>().cond;
  for (const mir::Region& body : mir::bodies(n))
    for (const mir::Node& child : body.nodes) handles_set(child, in_own_loop || own, out);
}

void derive_edges(mir::Region& region) {
  std::vector<EdgeSource> nodes(region.nodes.size());
  for (size_t i = 0; i < region.nodes.size(); ++i) {
    mir::Node& n = region.nodes[i];
    for (mir::Region& body : mir::bodies(n)) derive_edges(body);
    nodes[i].accesses = &n.accesses;
    handles_set(n, false, nodes[i].handles);
  }
  region.edges = reduced_edges(nodes);
}

// A condition kernel sets its conditional node's handle: an ordering no buffer shows (the
// node may read nothing the kernel writes), so it is added by hand.
void order_condition_kernels(mir::Region& r) {
  for (size_t j = 0; j < r.nodes.size(); ++j) {
    mir::ConditionalParts* c = mir::conditional(r.nodes[j]);
    if (!c) continue;
    for (mir::Region& body : c->bodies) order_condition_kernels(body);
    int handle = c->handle;
    if (handle < 0 || c->bodies.empty()) continue;
    for (size_t i = 0; i < j; ++i) {
      const mir::KernelNode* k = std::get_if<mir::KernelNode>(&r.nodes[i].op);
      if (!k) continue;  // after generate_kernels only a kernel sets a handle
      bool sets = false;
      for (const mir::KernelArg& a : k->args) sets |= a.kind == mir::ArgKind::CondHandle && a.ref == handle;
      if (!sets || is_ordered(r, static_cast<int>(i), static_cast<int>(j))) continue;
      r.edges.push_back({static_cast<int>(i), static_cast<int>(j), -1, mir::DepKind::Condition});
    }
  }
}

}  // namespace

void rebuild_edges(mir::Program& p) {
  for (mir::Graph& g : p.graphs) {
    derive_edges(g.body);
    order_condition_kernels(g.body);
  }
}

}  // namespace orch::lowering
