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

ir::Node set_condition(const ir::Node& conditional, int handle) {
  ir::Node n;
  n.kind = ir::NodeKind::SetCondition;
  n.loc = conditional.loc;
  n.call_stack = conditional.call_stack;
  n.cond = conditional.cond;
  n.handle = handle;
  n.condition_of = conditional.kind;
  n.case_values = conditional.case_values;
  n.has_default = conditional.has_default;
  collect_reads(*n.cond, n.accesses);
  return n;
}

// `cond` arguments in a `while kernel` body name its handle; nested `while kernel` loops
// bind their own, so stop there.
void bind_cond_args(ir::Region& body, int handle) {
  for (ir::Node& n : body.nodes) {
    if (n.kind == ir::NodeKind::Kernel)
      for (ir::KernelArg& a : n.args)
        if (a.kind == ir::ArgKind::Cond) {
          a.kind = ir::ArgKind::CondHandle;
          a.ref = handle;
        }
    bool own_cond = n.kind == ir::NodeKind::While && !n.cond;
    if (!own_cond)
      for (ir::Region& b : n.bodies) bind_cond_args(b, handle);
  }
}

// `loops`: how many loop bodies enclose this region; inside one, a region runs more than once
// per launch of the graph.
void lower_region(ir::Program& p, ir::Region& region, int graph, int loops) {
  std::vector<ir::Node> out;
  out.reserve(region.nodes.size());
  for (ir::Node& n : region.nodes) {
    bool conditional = n.kind == ir::NodeKind::If || n.kind == ir::NodeKind::While ||
                       n.kind == ir::NodeKind::Switch;
    if (!conditional) {
      out.push_back(std::move(n));
      continue;
    }
    ir::ConditionalHandle h;
    h.graph = graph;
    n.handle = static_cast<int>(p.handles.size());
    if (n.kind == ir::NodeKind::While && !n.cond) {
      // `while kernel` is a do-while: the body runs once, then its kernel sets the handle.
      // The default is reapplied at every launch of the graph.
      h.default_value = 1;
      h.set_default = true;
      p.handles.push_back(h);
      bind_cond_args(n.bodies[0], n.handle);
      // Inside another loop the default is not enough: from the second time the loop is
      // reached, the handle still holds the 0 that ended it. A kernel before the node sets it
      // to 1 each time (the handle belongs to the top-level graph, so a kernel in any of its
      // bodies may set it).
      if (loops > 0) {
        ir::Node reset;
        reset.kind = ir::NodeKind::While;
        reset.loc = n.loc;
        reset.call_stack = n.call_stack;
        reset.cond = ir::constant(ir::Value::of_bool(true), n.loc);
        out.push_back(set_condition(reset, n.handle));
      }
    } else {
      p.handles.push_back(h);
      out.push_back(set_condition(n, n.handle));
      // A while loop evaluates its condition again as the last step of every iteration.
      if (n.kind == ir::NodeKind::While) n.bodies[0].nodes.push_back(set_condition(n, n.handle));
    }
    for (ir::Region& body : n.bodies)
      lower_region(p, body, graph, loops + (n.kind == ir::NodeKind::While ? 1 : 0));
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
