#include "lowering/passes.h"

namespace orch::lowering {

namespace {

void collect_reads(const mir::Expr& e, std::vector<mir::BufferAccess>& out) {
  if (e.kind == mir::ExprKind::DeviceScalar) {
    for (const mir::BufferAccess& a : out)
      if (a.buffer == e.ref) return;
    out.push_back({e.ref, true, false});
  }
  for (const mir::Expr& o : e.operands) collect_reads(o, out);
}

// `cond`: the conditional's condition; `of`: its kind; `sw`: the switch, for a Switch.
mir::Node set_condition(const mir::Node& conditional, const mir::Expr& cond, int handle,
                       const mir::SwitchNode* sw = nullptr) {
  mir::SetConditionNode s;
  s.cond = cond;
  s.handle = handle;
  s.condition_of = conditional.kind();
  if (sw) {
    s.case_values = sw->case_values;
    s.has_default = sw->has_default;
  }
  mir::Node n;
  n.loc = conditional.loc;
  n.call_stack = conditional.call_stack;
  collect_reads(s.cond, n.accesses);
  n.op = std::move(s);
  return n;
}

// `cond` arguments in a `while kernel` body name its handle; nested `while kernel` loops
// bind their own, so stop there.
void bind_cond_args(mir::Region& body, int handle) {
  for (mir::Node& n : body.nodes) {
    if (mir::KernelNode* k = std::get_if<mir::KernelNode>(&n.op))
      for (mir::KernelArg& a : k->args)
        if (a.kind == mir::ArgKind::Cond) {
          a.kind = mir::ArgKind::CondHandle;
          a.ref = handle;
        }
    bool own_cond = n.is<mir::WhileNode>() && !n.as<mir::WhileNode>().cond;
    if (!own_cond)
      for (mir::Region& b : mir::bodies(n)) bind_cond_args(b, handle);
  }
}

// `loops`: how many loop bodies enclose this region; inside one, a region runs more than once
// per launch of the graph.
void lower_region(mir::Program& p, mir::Region& region, int graph, int loops) {
  std::vector<mir::Node> out;
  out.reserve(region.nodes.size());
  for (mir::Node& n : region.nodes) {
    mir::ConditionalParts* c = mir::conditional(n);
    if (!c) {
      out.push_back(std::move(n));
      continue;
    }
    const bool is_while = n.is<mir::WhileNode>();
    mir::ConditionalHandle h;
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
      if (loops > 0) out.push_back(set_condition(n, mir::constant(mir::Value::of_bool(true), n.loc), c->handle));
    } else {
      p.handles.push_back(h);
      const mir::SwitchNode* sw = std::get_if<mir::SwitchNode>(&n.op);
      out.push_back(set_condition(n, *c->cond, c->handle, sw));
      // A while loop evaluates its condition again as the last step of every iteration.
      if (is_while) c->bodies[0].nodes.push_back(set_condition(n, *c->cond, c->handle));
    }
    for (mir::Region& body : c->bodies) lower_region(p, body, graph, loops + (is_while ? 1 : 0));
    out.push_back(std::move(n));
  }
  region.nodes = std::move(out);
}

}  // namespace

void lower_conditions(mir::Program& p) {
  for (size_t g = 0; g < p.graphs.size(); ++g)
    lower_region(p, p.graphs[g].body, static_cast<int>(g), 0);
}

}  // namespace orch::lowering
