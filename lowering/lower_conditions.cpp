#include "lowering/passes.h"

namespace orch::lowering {

namespace {

void collect_reads(const ir::Expr& e, std::vector<ir::BufferAccess>& out) {
  if (e.kind == ir::ExprKind::DeviceScalar) {
    for (const ir::BufferAccess& a : out)
      if (a.buffer == e.ref) return;
    out.push_back({e.ref, true, false});
  }
  for (const ir::Expr& o : e.operands) collect_reads(o, out);
}

// `cond`: the conditional's condition; `of`: its kind; `sw`: the switch, for a Switch.
ir::Node set_condition(const ir::Node& conditional, const ir::Expr& cond, int handle,
                       const ir::SwitchNode* sw = nullptr) {
  ir::SetConditionNode s;
  s.cond = cond;
  s.handle = handle;
  s.condition_of = conditional.kind();
  if (sw) {
    s.case_values = sw->case_values;
    s.has_default = sw->has_default;
  }
  ir::Node n;
  n.loc = conditional.loc;
  n.call_stack = conditional.call_stack;
  collect_reads(s.cond, n.accesses);
  n.op = std::move(s);
  return n;
}

// `cond` arguments in a `while kernel` body name its handle; nested `while kernel` loops
// bind their own, so stop there.
void bind_cond_args(ir::Region& body, int handle) {
  for (ir::Node& n : body.nodes) {
    if (ir::KernelNode* k = std::get_if<ir::KernelNode>(&n.op))
      for (ir::KernelArg& a : k->args)
        if (a.kind == ir::ArgKind::Cond) {
          a.kind = ir::ArgKind::CondHandle;
          a.ref = handle;
        }
    bool own_cond = n.is<ir::WhileNode>() && !n.as<ir::WhileNode>().cond;
    if (!own_cond)
      for (ir::Region& b : ir::bodies(n)) bind_cond_args(b, handle);
  }
}

// `loops`: how many loop bodies enclose this region; inside one, a region runs more than once
// per launch of the graph.
void lower_region(ir::Program& p, ir::Region& region, int graph, int loops) {
  std::vector<ir::Node> out;
  out.reserve(region.nodes.size());
  for (ir::Node& n : region.nodes) {
    ir::ConditionalParts* c = ir::conditional(n);
    if (!c) {
      out.push_back(std::move(n));
      continue;
    }
    const bool is_while = n.is<ir::WhileNode>();
    ir::ConditionalHandle h;
    h.graph = graph;
    c->handle = static_cast<int>(p.handles.size());
    if (is_while && !c->cond) {
      // `while kernel` is a do-while: the body runs once, then its kernel sets the handle.
      // The default is reapplied at every launch of the graph.
      h.default_value = 1;
      h.set_default = true;
      p.handles.push_back(h);
      bind_cond_args(c->bodies[0], c->handle);
      // Inside another loop the default is not enough: from the second time the loop is
      // reached, the handle still holds the 0 that ended it. A kernel before the node sets it
      // to 1 each time (the handle belongs to the top-level graph, so a kernel in any of its
      // bodies may set it).
      if (loops > 0) out.push_back(set_condition(n, ir::constant(ir::Value::of_bool(true), n.loc), c->handle));
    } else {
      p.handles.push_back(h);
      const ir::SwitchNode* sw = std::get_if<ir::SwitchNode>(&n.op);
      out.push_back(set_condition(n, *c->cond, c->handle, sw));
      // A while loop evaluates its condition again as the last step of every iteration.
      if (is_while) c->bodies[0].nodes.push_back(set_condition(n, *c->cond, c->handle));
    }
    for (ir::Region& body : c->bodies) lower_region(p, body, graph, loops + (is_while ? 1 : 0));
    out.push_back(std::move(n));
  }
  region.nodes = std::move(out);
}

}  // namespace

void lower_conditions(ir::Program& p) {
  for (size_t g = 0; g < p.graphs.size(); ++g)
    lower_region(p, p.graphs[g].body, static_cast<int>(g), 0);
}

}  // namespace orch::lowering
