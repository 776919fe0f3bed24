// The last graph pass: the lowered IR as the lowered program (lowering/lir.h). After the ir
// passes every node is a Kernel (user or generated), a Copy, a Fill a memset does, an
// If/While/Switch with its handle, or a Collective; each becomes its node kind here, with its
// edges as per-node dependencies and its expressions as postfix code with their text.
#include "lowering/passes.h"

namespace orch::lowering {

namespace {

class Builder {
 public:
  Builder(const mir::Program& p, const IrLowering& lowering) : p_(p), lowering_(lowering) {}

  lir::Program run() {
    lir::Program out;
    out.name = p_.name;
    out.file = p_.file;
    out.targets = p_.targets;
    out.uses_rank = p_.uses_rank;
    for (const mir::Param& x : p_.params) {
      lir::Param q;
      q.name = x.name;
      q.type = x.type;
      q.default_value = x.default_evaluated;
      if (x.default_value) q.default_text = mir::to_string(*x.default_value, p_);
      q.loc = x.loc;
      out.params.push_back(std::move(q));
    }
    for (const mir::Buffer& x : p_.buffers) {
      lir::Buffer b;
      b.name = x.name;
      b.elem = x.elem;
      if (x.count) b.count = expr(*x.count);
      b.host = x.host;
      // Symmetric buffers come from NVSHMEM's heap, one allocation each on every PE: the memory
      // plan leaves them alone, as it does `keep` ones.
      b.keep = x.keep || x.symmetric;
      b.symmetric = x.symmetric;
      b.loc = x.loc;
      out.buffers.push_back(std::move(b));
    }
    for (const mir::Comm& c : p_.comms) out.comms.push_back({c.name, c.loc});
    for (size_t i = 0; i < p_.kernels.size(); ++i) {
      out.kernels.push_back(kernel(p_.kernels[i]));
      if (auto it = lowering_.guard_variants.find(static_cast<int>(i)); it != lowering_.guard_variants.end())
        out.kernels.back().guard_variants = it->second;
      out.kernels.back().waits_at_entry = lowering_.waits_at_entry.count(static_cast<int>(i)) > 0;
      out.kernels.back().generated = i >= lowering_.user_kernels;
    }
    for (const mir::Graph& g : p_.graphs) {
      lir::Graph x;
      x.name = g.name;
      x.device = g.device;
      x.family_size = g.family_size;
      x.family_index = g.family_index;
      x.body = body(g.body);
      x.loc = g.loc;
      x.fire_and_forget_launches = g.fire_and_forget_launches;
      x.tail_launches = g.tail_launches;
      out.graphs.push_back(std::move(x));
    }
    out.main_graph = p_.main_graph;
    out.segments = p_.segments;
    for (const mir::ConditionalHandle& h : p_.handles)
      out.handles.push_back({h.graph, h.default_value, h.set_default});
    for (const mir::BindCheck& c : p_.bind_checks) {
      lir::BindCheck b;
      b.code = to_string(c.code);
      b.message = c.message;
      b.condition = expr(c.condition);
      b.loc = c.loc;
      b.family_size = c.family_size;
      const mir::Expr& e = c.condition;
      b.always_holds = e.kind == mir::ExprKind::Binary && e.op == expr::Op::Eq &&
                       mir::same_expr(e.operands[0], e.operands[1]);
      out.bind_checks.push_back(std::move(b));
    }
    for (const mir::StatusSite& s : p_.status_sites)
      out.status_sites.push_back({s.loc, s.call_stack, s.what});
    for (const mir::UnrolledLoop& u : p_.unrolled_loops) {
      lir::UnrolledLoop x;
      std::function<void(const mir::Expr&)> reads = [&](const mir::Expr& e) {
        if (e.kind == mir::ExprKind::DeviceScalar &&
            std::find(x.cond_buffers.begin(), x.cond_buffers.end(), e.ref) == x.cond_buffers.end())
          x.cond_buffers.push_back(e.ref);
        for (const mir::Expr& o : e.operands) reads(o);
      };
      reads(u.cond);
      x.handle = u.handle;
      x.copies = u.copies;
      x.slots = u.slots;
      x.status_site = u.status_site;
      x.loc = u.loc;
      for (const mir::UnrolledLoop::Function& f : u.functions) {
        lir::UnrolledLoop::Function g;
        g.code = f.code;
        g.params = f.params;
        for (const mir::KernelArg& a : f.args) g.args.push_back(arg(a));
        x.functions.push_back(std::move(g));
      }
      out.unrolled_loops.push_back(std::move(x));
    }
    return out;
  }

 private:
  lir::Expr expr(const mir::Expr& e) const { return {mir::to_postfix(e), mir::to_string(e, p_)}; }

  static lir::Kernel kernel(const mir::Kernel& k) {
    lir::Kernel x;
    static_cast<mir::Kernel&>(x) = k;
    return x;
  }

  lir::Body body(const mir::Region& r) const {
    lir::Body b;
    b.nodes.reserve(r.nodes.size());
    for (const mir::Node& n : r.nodes) b.nodes.push_back(node(n));
    // Edges become dependencies of their target, in edge order (the artifact's deps order).
    for (const mir::Edge& e : r.edges)
      b.nodes[e.to].deps.push_back({static_cast<uint32_t>(e.from), lir::DepKind::Full});
    return b;
  }

  lir::Node node(const mir::Node& n) const {
    lir::Node x;
    x.loc = n.loc;
    x.call_stack = n.call_stack;
    x.what = mir::describe_node(p_, n);
    x.guard = n.guard;  // an unrolled copy is its statement's, and named as it (--emit=ir shows the copy)
    for (const mir::BufferAccess& a : n.accesses) x.accesses.push_back({a.buffer, a.read, a.write});
    x.op = op(n);
    return x;
  }

  lir::NodeOp op(const mir::Node& n) const {
    switch (n.kind()) {
      case mir::NodeKind::Kernel: {
        const mir::KernelNode& x = n.as<mir::KernelNode>();
        lir::KernelNode k;
        k.kernel = x.kernel;
        for (int i = 0; i < 3; ++i) {
          k.grid[i] = expr(x.grid[i]);
          k.block[i] = expr(x.block[i]);
        }
        k.shared_bytes = expr(x.shared_bytes);
        for (const mir::KernelArg& a : x.args) k.args.push_back(arg(a));
        if (x.cost_bytes) k.cost_bytes = expr(*x.cost_bytes);
        if (x.cost_flops) k.cost_flops = expr(*x.cost_flops);
        return k;
      }
      case mir::NodeKind::Copy:
        return lir::MemcpyNode{n.as<mir::CopyNode>().src, n.as<mir::CopyNode>().dst};
      case mir::NodeKind::Fill:
        if (std::optional<MemsetPattern> m = memset_pattern(p_, n))
          return lir::MemsetNode{n.as<mir::FillNode>().dst, m->value, m->element_size};
        return lir::EmptyNode{};  // generate_kernels made a kernel of every other fill
      case mir::NodeKind::If: return conditional(n, lir::ConditionalType::If);
      case mir::NodeKind::While: return conditional(n, lir::ConditionalType::While);
      case mir::NodeKind::Switch: return conditional(n, lir::ConditionalType::Switch);
      case mir::NodeKind::Collective: {
        const mir::CollectiveNode& x = n.as<mir::CollectiveNode>();
        lir::CollectiveNode c;
        c.kind = x.collective;
        c.op = x.reduce_op;
        c.src = x.src;
        c.dst = x.dst;
        c.comm = x.comm;
        if (x.root) c.root = expr(*x.root);
        return c;
      }
      case mir::NodeKind::ScalarUpdate:
      case mir::NodeKind::LaunchGraph:
      case mir::NodeKind::SetCondition:
      case mir::NodeKind::Shmem:
        break;  // generate_kernels and generate_nvshmem_kernels made kernels of these
    }
    return lir::EmptyNode{};
  }

  lir::ConditionalNode conditional(const mir::Node& n, lir::ConditionalType type) const {
    const mir::ConditionalParts& x = *mir::conditional(n);
    lir::ConditionalNode c;
    c.type = type;
    c.handle = x.handle;
    for (const mir::Region& r : x.bodies) c.bodies.push_back(body(r));
    if (const auto* sw = std::get_if<mir::SwitchNode>(&n.op)) {
      const mir::ScalarType subject = x.cond ? x.cond->type : mir::ScalarType::I64;
      for (int64_t v : sw->case_values) c.cases.push_back(expr::Value{subject, static_cast<uint64_t>(v)});
      c.has_default = sw->has_default;
    }
    c.set_by_kernel = type == lir::ConditionalType::While && !x.cond;
    return c;
  }

  lir::KernelArg arg(const mir::KernelArg& a) const {
    lir::KernelArg x;
    x.ref = a.ref;
    switch (a.kind) {
      case mir::ArgKind::Value:
        x.kind = lir::ArgKind::Value;
        x.value = expr(a.value);
        x.ref = -1;
        break;
      case mir::ArgKind::Buffer: x.kind = lir::ArgKind::Buffer; break;
      case mir::ArgKind::Cond:
      case mir::ArgKind::CondHandle: x.kind = lir::ArgKind::CondHandle; break;
      case mir::ArgKind::Graph:
        x.kind = lir::ArgKind::GraphExec;
        x.self = a.self;
        break;
      case mir::ArgKind::GraphFamily: x.kind = lir::ArgKind::GraphTable; break;
      case mir::ArgKind::Status:
        x.kind = lir::ArgKind::Status;
        x.ref = -1;
        break;
    }
    return x;
  }

  const mir::Program& p_;
  const IrLowering& lowering_;
};

}  // namespace

lir::Program build_lir(const mir::Program& program, const IrLowering& lowering) {
  return Builder(program, lowering).run();
}

}  // namespace orch::lowering
