// The checker's program as lowering's passes take it: the one place that knows both
// representations. Declarations and leaf nodes are copied as they are; kernel launches get
// lowering's argument kinds, conditionals their bodies converted and no handle yet, nodes no
// guard, scalar updates nothing fused.
#include "lowering/mir.h"
#include "support/overloaded.h"

namespace orch::mir {

namespace {

Region convert(const ir::Region& r);

template <class To, class From>
To conditional_parts(const From& c) {
  To out;
  out.cond = c.cond;
  out.bodies.reserve(c.bodies.size());
  for (const ir::Region& b : c.bodies) out.bodies.push_back(convert(b));
  return out;
}

ArgKind convert(ir::ArgKind k) {
  switch (k) {
    case ir::ArgKind::Value:
      return ArgKind::Value;
    case ir::ArgKind::Buffer:
      return ArgKind::Buffer;
    case ir::ArgKind::Cond:
      return ArgKind::Cond;
    case ir::ArgKind::Graph:
      return ArgKind::Graph;
    case ir::ArgKind::GraphFamily:
      return ArgKind::GraphFamily;
  }
  return ArgKind::Value;
}

KernelNode convert(const ir::KernelNode& k) {
  KernelNode out;
  out.kernel = k.kernel;
  for (int d = 0; d < 3; ++d) {
    out.grid[d] = k.grid[d];
    out.block[d] = k.block[d];
  }
  out.cost_bytes = k.cost_bytes;
  out.cost_flops = k.cost_flops;
  out.grid_loc = k.grid_loc;
  out.block_loc = k.block_loc;
  out.shared_bytes = k.shared_bytes;
  out.args.reserve(k.args.size());
  for (const ir::KernelArg& a : k.args)
    out.args.push_back({convert(a.kind), a.value, a.ref, a.self, a.loc});
  return out;
}

NodeOp convert(const ir::NodeOp& op) {
  return std::visit(
      overloaded{[](const ir::KernelNode& k) -> NodeOp { return convert(k); },
                 [](const ir::CopyNode& c) -> NodeOp { return c; },
                 [](const ir::FillNode& f) -> NodeOp { return f; },
                 [](const ir::ScalarUpdateNode& u) -> NodeOp {
                   return ScalarUpdateNode{u.dst, u.value, {}};
                 },
                 [](const ir::IfNode& c) -> NodeOp { return conditional_parts<IfNode>(c); },
                 [](const ir::WhileNode& c) -> NodeOp { return conditional_parts<WhileNode>(c); },
                 [](const ir::SwitchNode& c) -> NodeOp {
                   SwitchNode s = conditional_parts<SwitchNode>(c);
                   s.case_values = c.case_values;
                   s.has_default = c.has_default;
                   return s;
                 },
                 [](const ir::LaunchGraphNode& l) -> NodeOp { return l; },
                 [](const ir::CollectiveNode& c) -> NodeOp { return c; },
                 [](const ir::ShmemNode& s) -> NodeOp { return s; }},
      op);
}

Region convert(const ir::Region& r) {
  Region out;
  out.nodes.reserve(r.nodes.size());
  for (const ir::Node& n : r.nodes) {
    Node m;
    m.op = convert(n.op);
    m.loc = n.loc;
    m.call_stack = n.call_stack;
    m.accesses = n.accesses;
    out.nodes.push_back(std::move(m));
  }
  out.edges = r.edges;
  return out;
}

}  // namespace

Program to_mir(const ir::Program& checked) {
  Program p;
  static_cast<Declarations&>(p) = checked;
  p.graphs.reserve(checked.graphs.size());
  for (const ir::Graph& g : checked.graphs) {
    Graph m;
    m.name = g.name;
    m.device = g.device;
    m.family_size = g.family_size;
    m.family_index = g.family_index;
    m.body = convert(g.body);
    m.loc = g.loc;
    m.fire_and_forget_launches = g.fire_and_forget_launches;
    m.tail_launches = g.tail_launches;
    m.self_tail_launches = g.self_tail_launches;
    p.graphs.push_back(std::move(m));
  }
  return p;
}

}  // namespace orch::mir
