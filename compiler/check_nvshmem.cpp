// NVSHMEM between kernels (docs/multi-gpu.md, "NVSHMEM"): the statements put, get, signal, wait,
// quiet and barrier, and the rules that need the whole pipeline: a wait needs a signal somewhere
// (E0711), the statements a peer waits on need conditions every PE computes alike (E0712), and a
// wait may not hold a collective back while its signal waits behind that collective (E0713).
#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "compiler/check_stmt_helpers.h"

namespace orch::detail {

namespace {

std::string quoted(const std::string& s) { return "`" + s + "`"; }

bool same_place(const SourceRange& a, const SourceRange& b) {
  return a.file == b.file && a.begin.line == b.begin.line && a.begin.col == b.begin.col;
}

// The statements a peer may be left waiting on when a PE skips them: a put or signal (a peer's
// `wait`), a wait (the PE itself), a barrier (every PE). `get` and `quiet` involve no peer's
// progress: a PE may skip them alone.
bool needs_uniform_condition(ir::ShmemOp op) {
  return op == ir::ShmemOp::Put || op == ir::ShmemOp::Signal || op == ir::ShmemOp::Wait ||
         op == ir::ShmemOp::Barrier;
}

}  // namespace

void Checker::shmem(const ast::Stmt& s, const ast::Shmem& n, BodyContext& ctx, ir::Region& out) {
  const std::string what = quoted(ast::to_string(n.kind));
  bool any_symmetric = false;
  for (const ir::Buffer& b : program_->buffers) any_symmetric |= b.symmetric;
  if (!any_symmetric) {
    bool declared = false;  // a symmetric declaration that failed was reported there
    for (const ast::Buffer& b : module_.buffers) declared |= b.symmetric;
    if (!declared)
      diags_.error(DiagCode::E0714, s.loc,
                   what + " is NVSHMEM's, but this pipeline declares no `symmetric` buffer: NVSHMEM "
                          "works between the copies of symmetric buffers that every PE has "
                          "(`buffer x: f32[n] symmetric`, with a `comm`)");
    return;
  }
  // A put or signal names its signal word even when it has errors of its own: a wait on that word
  // is then not also reported as waiting for nothing (one mistake, one error).
  if ((n.kind == ast::ShmemKind::Put || n.kind == ast::ShmemKind::Signal) && !n.signal.name.empty())
    if (const Symbol* sym = lookup(n.signal.name); sym && sym->kind == SymbolKind::Buffer)
      signal_words_named_.insert(sym->index);
  ir::Node node = make_node(ir::ShmemNode{}, s, ctx);
  auto& sh = node.as<ir::ShmemNode>();
  sh.op = static_cast<ir::ShmemOp>(n.kind);  // the same order
  bool ok = true;
  auto note_decl = [&](Diagnostic& d, const ir::Buffer& b) {
    diags_.add_note(d, b.loc, quoted(b.name) + " is declared here");
  };
  auto symmetric = [&](int buf, const ast::Ident& id, const std::string& role) {
    if (buf < 0) return false;
    const ir::Buffer& b = program_->buffers[buf];
    if (b.symmetric) return true;
    Diagnostic& d = diags_.error(DiagCode::E0710, id.loc,
                                 role + " of " + what + " is a peer's copy of a symmetric buffer, but " +
                                     quoted(b.name) + " is not symmetric");
    note_decl(d, b);
    return false;
  };
  auto device = [&](int buf, const ast::Ident& id, const std::string& role) {
    if (buf < 0) return false;
    const ir::Buffer& b = program_->buffers[buf];
    if (!b.host) return true;
    Diagnostic& d = diags_.error(DiagCode::E0710, id.loc,
                                 role + " of " + what + " is " + quoted(b.name) +
                                     ", a host buffer; NVSHMEM moves device memory");
    note_decl(d, b);
    return false;
  };
  if (n.kind == ast::ShmemKind::Put || n.kind == ast::ShmemKind::Get) {
    const bool put = n.kind == ast::ShmemKind::Put;
    sh.src = buffer_ref(n.src, (what + " source").c_str());
    sh.dst = buffer_ref(n.dst, (what + " destination").c_str());
    if (sh.src < 0 || sh.dst < 0) return;
    // put: local source, the peer's symmetric destination; get: the reverse.
    ok &= put ? device(sh.src, n.src, "the source") && symmetric(sh.dst, n.dst, "the destination")
              : symmetric(sh.src, n.src, "the source") && device(sh.dst, n.dst, "the destination");
    if (ok && sh.src == sh.dst && !put) {
      // get x -> x would read the peer's x into the x a peer may be reading: not a copy.
      diags_.error(DiagCode::E0710, s.loc, what + " from " + quoted(n.src.name) + " into itself");
      ok = false;
    }
    if (ok) {
      const ir::Buffer& a = program_->buffers[sh.src];
      const ir::Buffer& b = program_->buffers[sh.dst];
      if (a.elem != b.elem) {
        Diagnostic& d = diags_.error(DiagCode::E0710, s.loc,
                                     what + " from " + quoted(a.name) + " (" + ir::to_string(a.elem) + ") to " +
                                         quoted(b.name) + " (" + ir::to_string(b.elem) +
                                         "): element types differ");
        note_decl(d, a);
        note_decl(d, b);
        ok = false;
      } else {
        ir::Expr src_count = a.count ? *a.count : constant(1);
        ir::Expr dst_count = b.count ? *b.count : constant(1);
        auto x = evaluate(src_count), y = evaluate(dst_count);
        if (x && y && elements(*x) > elements(*y)) {
          Diagnostic& d = diags_.error(
              DiagCode::E0710, s.loc,
              what + " from " + quoted(a.name) + " (" + x->to_string() + " elements) to " + quoted(b.name) +
                  " (" + y->to_string() + " elements): the destination is smaller" +
                  default_values_note(binary(expr::Op::Add, src_count, dst_count)));
          note_decl(d, b);
          ok = false;
        } else if ((ir::depends_on_host_values(src_count) || ir::depends_on_host_values(dst_count)) &&
                   !ir::same_expr(src_count, dst_count)) {
          program_->bind_checks.push_back({DiagCode::E0710,
                                           ast::to_string(n.kind) + std::string(" from `") + a.name + "` to `" +
                                               b.name + "`: the destination is smaller",
                                           binary(expr::Op::Le, src_count, dst_count), s.loc});
        }
      }
    }
  }
  if (!n.signal.name.empty()) {
    sh.signal = buffer_ref(n.signal, "signal word");
    if (sh.signal < 0) return;
    const ir::Buffer& b = program_->buffers[sh.signal];
    if (!b.symmetric || !b.is_scalar() || b.elem != ir::ScalarType::U64) {
      const std::string elem = ir::to_string(b.elem);
      const std::string is = (b.is_scalar() ? "a " + elem + " scalar" : "an " + elem + " array") +
                             (b.symmetric ? "" : ", not symmetric");
      Diagnostic& d = diags_.error(DiagCode::E0710, n.signal.loc,
                                   "the signal word of " + what + " must be a symmetric `u64` device scalar (`buffer " +
                                       b.name + ": u64 symmetric`); " + quoted(b.name) + " is " + is);
      note_decl(d, b);
      ok = false;
    }
  }
  if (n.peer) {
    sh.peer = expr(*n.peer, ExprContext::Host, &ctx);
    if (sh.peer && finish(*sh.peer, ir::ScalarType::I32, DiagCode::E0710).failed()) sh.peer.reset();
    if (!sh.peer) {
      ok = false;
    } else if (ir::is_float(sh.peer->type)) {
      diags_.error(DiagCode::E0710, n.peer->loc, "the peer of " + what + " is a PE number, not a floating-point value");
      ok = false;
    } else {
      // A PE of the communicator: checked at bind time, when n_pes is known (and with it rank).
      ir::Expr pes;
      pes.kind = ir::ExprKind::WorldSize;
      pes.type = ir::ScalarType::U32;
      program_->bind_checks.push_back({DiagCode::E0710, "the peer of `" + std::string(ast::to_string(n.kind)) +
                                                            "` is a PE (0 <= peer < n_pes)",
                                       binary(expr::Op::And, binary(expr::Op::Ge, *sh.peer, constant(0)),
                                              binary(expr::Op::Lt, *sh.peer, pes)),
                                       n.peer->loc, has_family_index(*sh.peer) ? ctx.family_size : 0});
    }
  }
  if (n.value) {
    sh.value = expr(*n.value, ExprContext::Device, &ctx);
    if (sh.value && ir::is_float(sh.value->type)) {
      diags_.error(DiagCode::E0710, n.value->loc,
                   "a signal value is a `u64`, not a floating-point value");
      sh.value.reset();
    }
    if (sh.value && finish(*sh.value, ir::ScalarType::U64, DiagCode::E0710).failed()) sh.value.reset();
    if (!sh.value) ok = false;
  }
  if (n.kind == ast::ShmemKind::Put || n.kind == ast::ShmemKind::Signal)
    sh.signal_op = n.op == "+=" ? ir::SignalOp::Add : ir::SignalOp::Set;
  if (n.kind == ast::ShmemKind::Wait) {
    static const std::map<std::string, ir::WaitCmp> cmps = {{"==", ir::WaitCmp::Eq}, {"!=", ir::WaitCmp::Ne},
                                                            {">", ir::WaitCmp::Gt},  {"<=", ir::WaitCmp::Le},
                                                            {"<", ir::WaitCmp::Lt},  {">=", ir::WaitCmp::Ge}};
    auto it = cmps.find(n.op);
    if (it != cmps.end()) sh.cmp = it->second;
  }
  if (!ok) return;
  // Ordering (docs/multi-gpu.md): a peer may read or write any symmetric buffer at any of these
  // statements, so each is ordered against every statement that touches one; put also reads its
  // source, get writes its destination, and values read their device scalars.
  for (size_t b = 0; b < program_->buffers.size(); ++b)
    if (program_->buffers[b].symmetric) add_access(node.accesses, static_cast<int>(b), true, true);
  if (sh.op == ir::ShmemOp::Put) add_access(node.accesses, sh.src, true, false);
  if (sh.op == ir::ShmemOp::Get) add_access(node.accesses, sh.dst, false, true);
  if (sh.value) collect_device_reads(*sh.value, node.accesses);
  // A wait after a collective in program order waits for it (E0713's proof needs it: lowering
  // may otherwise put an unordered wait in a segment before the collective's).
  if (sh.op == ir::ShmemOp::Wait)
    for (int b : collective_writes_[ctx.graph]) add_access(node.accesses, b, true, false);
  out.nodes.push_back(std::move(node));
}

// ---- the rules on the whole pipeline ---------------------------------------------------------

namespace {

// Why PEs may see different values; empty: every PE computes the same.
struct Divergence {
  std::string why;
  SourceRange loc;
  bool uniform() const { return why.empty(); }
};

class NvshmemRules {
 public:
  NvshmemRules(ir::Program& p, DiagnosticEngine& diags, const std::set<int>& named)
      : p_(p), diags_(diags), named_(named) {}

  void run() {
    graphs_ = live_graphs();
    scalars();
    launched_graphs();
    conditions();
    signals();
    collectives();
  }

 private:
  // main and the device graphs: a helper's statements are in the graphs that call it.
  std::vector<int> live_graphs() const {
    std::vector<int> out;
    for (size_t g = 0; g < p_.graphs.size(); ++g)
      if (p_.graphs[g].device || static_cast<int>(g) == p_.main_graph) out.push_back(static_cast<int>(g));
    return out;
  }

  // Calls f(node, enclosing conditionals (outermost first)) on every node of graph g.
  void walk(int g, const std::function<void(const ir::Node&, const std::vector<const ir::Node*>&)>& f) const {
    std::vector<const ir::Node*> stack;
    std::function<void(const ir::Region&)> region = [&](const ir::Region& r) {
      for (const ir::Node& n : r.nodes) {
        f(n, stack);
        stack.push_back(&n);
        for (const ir::Region& b : ir::bodies(n)) region(b);
        stack.pop_back();
      }
    };
    region(p_.graphs[g].body);
  }

  // Whether an expression is the same on every PE: params and n_pes are (the runtime binds one
  // pipeline, and compares params across ranks as it does the collective hash); my_pe is not; a
  // device scalar is when every write to it is (scalars()).
  Divergence expr_divergence(const ir::Expr& e) const {
    if (e.kind == ir::ExprKind::Rank) return {"it reads the PE number (`my_pe`, `rank`), which differs between PEs", e.loc};
    if (e.kind == ir::ExprKind::DeviceScalar) {
      auto it = scalar_.find(e.ref);
      if (it != scalar_.end() && !it->second.uniform())
        return {"it reads `" + p_.buffers[e.ref].name + "`, which PEs may hold different values of: " + it->second.why,
                it->second.loc.valid() ? it->second.loc : p_.buffers[e.ref].loc};
    }
    for (const ir::Expr& o : e.operands)
      if (Divergence d = expr_divergence(o); !d.uniform()) return d;
    return {};
  }

  Divergence condition_divergence(const ir::Node& c) const {
    const ir::ConditionalParts* parts = ir::conditional(c);
    if (!parts->cond) return {"a kernel of the loop sets its condition (`while kernel`) from what it computes", c.loc};
    return expr_divergence(*parts->cond);
  }

  // The first enclosing conditional whose condition PEs may compute differently, or the graph's
  // launch when a kernel decides it.
  std::pair<const ir::Node*, Divergence> divergent(int g, const std::vector<const ir::Node*>& stack) const {
    for (const ir::Node* c : stack)
      if (Divergence d = condition_divergence(*c); !d.uniform()) return {c, d};
    if (!graph_launch_[g].uniform()) return {nullptr, graph_launch_[g]};
    return {nullptr, {}};
  }

  // Device scalars PEs may see different values of, with why: symmetric (peers write them), host
  // (the application does), written by a kernel or from `my_pe`, under a condition that differs,
  // or never written at all (the application's value). A fixpoint: a write is uniform when its
  // value and conditions are, given what is known of the others.
  void scalars() {
    for (size_t b = 0; b < p_.buffers.size(); ++b) {
      const ir::Buffer& buf = p_.buffers[b];
      if (!buf.is_scalar()) continue;
      if (buf.symmetric) scalar_[static_cast<int>(b)] = {"it is symmetric, so peers write it", buf.loc};
      else if (buf.host) scalar_[static_cast<int>(b)] = {"it is host memory, which the application writes", buf.loc};
      else scalar_[static_cast<int>(b)] = {"nothing in the pipeline sets it, so it holds what the application gave each PE", buf.loc};
    }
    // First every written scalar counts as uniform, then writes that are not take it back.
    std::set<int> written;
    for (int g : graphs_)
      walk(g, [&](const ir::Node& n, const std::vector<const ir::Node*>&) {
        for (const ir::BufferAccess& a : n.accesses)
          if (a.write && !ir::conditional(n)) written.insert(a.buffer);
      });
    for (int b : written)
      if (!p_.buffers[b].symmetric && !p_.buffers[b].host && p_.buffers[b].is_scalar()) scalar_[b] = {};
    graph_launch_.assign(p_.graphs.size(), {});
    for (bool changed = true; changed;) {
      changed = false;
      for (int g : graphs_)
        walk(g, [&](const ir::Node& n, const std::vector<const ir::Node*>& stack) {
          for (const auto& [b, why] : scalar_writes(n)) {
            Divergence d = why;
            if (d.uniform()) d = divergent(g, stack).second;
            if (d.uniform() || !scalar_.count(b) || !scalar_[b].uniform()) continue;
            scalar_[b] = d;
            changed = true;
          }
        });
    }
  }

  // The device scalars node n writes, each with why its value may differ between PEs.
  std::vector<std::pair<int, Divergence>> scalar_writes(const ir::Node& n) const {
    std::vector<std::pair<int, Divergence>> out;
    auto scalar = [&](int b) { return b >= 0 && p_.buffers[b].is_scalar(); };
    switch (n.kind()) {
      case ir::NodeKind::Kernel: {
        const ir::KernelNode& k = n.as<ir::KernelNode>();
        const ir::Kernel& decl = p_.kernels[k.kernel];
        for (size_t i = 0; i < k.args.size() && i < decl.params.size(); ++i)
          if (k.args[i].kind == ir::ArgKind::Buffer && scalar(k.args[i].ref) &&
              (decl.params[i].access == ir::Access::Out || decl.params[i].access == ir::Access::InOut))
            out.push_back({k.args[i].ref, {"kernel `" + decl.name + "` writes it", n.loc}});
        break;
      }
      case ir::NodeKind::Fill: {
        const ir::FillNode& f = n.as<ir::FillNode>();
        if (scalar(f.dst)) {
          Divergence d = expr_divergence(f.value);
          if (!d.uniform()) d = {"it is filled with a value that differs between PEs", n.loc};
          out.push_back({f.dst, d});
        }
        break;
      }
      case ir::NodeKind::ScalarUpdate: {
        const ir::ScalarUpdateNode& u = n.as<ir::ScalarUpdateNode>();
        Divergence d = expr_divergence(u.value);
        if (!d.uniform()) d = {"it is assigned a value that differs between PEs", n.loc};
        out.push_back({u.dst, d});
        break;
      }
      case ir::NodeKind::Copy: {
        const ir::CopyNode& c = n.as<ir::CopyNode>();
        if (scalar(c.dst)) {
          Divergence d;
          if (!scalar(c.src)) d = {"it is copied from `" + p_.buffers[c.src].name + "`, an array", n.loc};
          else if (scalar_.count(c.src) && !scalar_.at(c.src).uniform())
            d = {"it is copied from `" + p_.buffers[c.src].name + "`, which differs between PEs", n.loc};
          out.push_back({c.dst, d});
        }
        break;
      }
      case ir::NodeKind::Collective: {
        // allreduce, broadcast and allgather leave the same values on every rank.
        const ir::CollectiveNode& c = n.as<ir::CollectiveNode>();
        if (scalar(c.dst))
          out.push_back({c.dst, c.collective == ir::CollectiveKind::ReduceScatter
                                    ? Divergence{"`reduce_scatter` gives each rank its own part", n.loc}
                                    : Divergence{}});
        break;
      }
      case ir::NodeKind::Shmem: {
        const ir::ShmemNode& s = n.as<ir::ShmemNode>();
        if (s.op == ir::ShmemOp::Get && scalar(s.dst))
          out.push_back({s.dst, {"`get` writes it from a peer", n.loc}});
        break;
      }
      case ir::NodeKind::If:
      case ir::NodeKind::While:
      case ir::NodeKind::Switch:
      case ir::NodeKind::LaunchGraph:
        break;  // bodies are walked on their own; a launched graph's nodes too
    }
    return out;
  }

  // A device graph that a kernel launches runs when and as often as that kernel's code decides,
  // which the checker cannot see; one that `launch` statements start runs as often on every PE
  // as the graphs launching it (a `launch` never stands in a conditional body: E0402).
  void launched_graphs() {
    for (bool changed = true; changed;) {
      changed = false;
      for (int g : graphs_)
        walk(g, [&](const ir::Node& n, const std::vector<const ir::Node*>&) {
          auto mark = [&](int target, Divergence d) {
            if (target < 0 || !graph_launch_[target].uniform() || d.uniform()) return;
            graph_launch_[target] = d;
            changed = true;
          };
          if (const ir::KernelNode* k = std::get_if<ir::KernelNode>(&n.op)) {
            for (const ir::KernelArg& a : k->args)
              if (a.kind == ir::ArgKind::Graph || a.kind == ir::ArgKind::GraphFamily)
                mark(a.self ? g : a.ref, {"kernel `" + p_.kernels[k->kernel].name +
                                              "` launches this graph when and as often as its code decides",
                                          n.loc});
          } else if (const ir::LaunchGraphNode* l = std::get_if<ir::LaunchGraphNode>(&n.op)) {
            Divergence d = graph_launch_[g];
            if (d.uniform() && l->family_member) {
              d = expr_divergence(*l->family_member);
              if (!d.uniform()) d = {"the member it launches differs between PEs", n.loc};
            }
            mark(l->graph, d);
          }
        });
    }
  }

  // E0712: a put, signal, wait or barrier inside a conditional whose condition PEs may compute
  // differently: one PE may skip what a peer waits for.
  void conditions() {
    std::vector<SourceRange> reported;
    for (int g : graphs_)
      walk(g, [&](const ir::Node& n, const std::vector<const ir::Node*>& stack) {
        const ir::ShmemNode* s = std::get_if<ir::ShmemNode>(&n.op);
        if (!s || !needs_uniform_condition(s->op)) return;
        auto [c, d] = divergent(g, stack);
        if (d.uniform()) return;
        for (const SourceRange& r : reported)
          if (same_place(r, n.loc)) return;
        reported.push_back(n.loc);
        const std::string op = quoted(ir::to_string(s->op));
        const std::string whom = s->op == ir::ShmemOp::Wait      ? "it could wait for a signal its peer never sends"
                                 : s->op == ir::ShmemOp::Barrier ? "the PEs that reach it would wait for those that never do"
                                                                 : "a peer could wait for what it never sends";
        const std::string where = c ? (c->is<ir::WhileNode>() ? "a loop that" : "a conditional body that")
                                    : "device graph `" + p_.graphs[g].name + "`, which";
        Diagnostic& diag = diags_.error(DiagCode::E0712, n.loc,
                                        op + " inside " + where + " PEs may run differently: " + whom);
        if (c) {
          const ir::ConditionalParts* parts = ir::conditional(*c);
          diags_.add_note(diag, parts->cond ? parts->cond->loc : c->loc, "the condition is here; " + d.why);
          if (d.loc.valid() && !same_place(d.loc, parts->cond ? parts->cond->loc : c->loc))
            diags_.add_note(diag, d.loc, "it is set here");
        } else {
          diags_.add_note(diag, d.loc, "`" + p_.graphs[g].name + "` is launched here; " + d.why);
        }
      });
  }

  // What sends a signal into buffer b: put-with-signal and signal statements, and kernels that
  // take it as `out` or `inout` (they may call nvshmemx_signal_op on it).
  std::vector<std::pair<int, const ir::Node*>> signallers(int b) const {
    std::vector<std::pair<int, const ir::Node*>> out;
    for (int g : graphs_)
      walk(g, [&](const ir::Node& n, const std::vector<const ir::Node*>&) {
        if (const ir::ShmemNode* s = std::get_if<ir::ShmemNode>(&n.op)) {
          if ((s->op == ir::ShmemOp::Put || s->op == ir::ShmemOp::Signal) && s->signal == b) out.push_back({g, &n});
        } else if (const ir::KernelNode* k = std::get_if<ir::KernelNode>(&n.op)) {
          const ir::Kernel& decl = p_.kernels[k->kernel];
          for (size_t i = 0; i < k->args.size() && i < decl.params.size(); ++i)
            if (k->args[i].kind == ir::ArgKind::Buffer && k->args[i].ref == b &&
                (decl.params[i].access == ir::Access::Out || decl.params[i].access == ir::Access::InOut)) {
              out.push_back({g, &n});
              break;
            }
        }
      });
    return out;
  }

  // E0711: a wait on a signal word nothing in the pipeline signals would wait forever.
  void signals() {
    std::vector<SourceRange> reported;
    for (int g : graphs_)
      walk(g, [&](const ir::Node& n, const std::vector<const ir::Node*>&) {
        const ir::ShmemNode* s = std::get_if<ir::ShmemNode>(&n.op);
        if (!s || s->op != ir::ShmemOp::Wait || s->signal < 0 || named_.count(s->signal) ||
            !signallers(s->signal).empty())
          return;
        for (const SourceRange& r : reported)
          if (same_place(r, n.loc)) return;
        reported.push_back(n.loc);
        const ir::Buffer& b = p_.buffers[s->signal];
        Diagnostic& d = diags_.error(DiagCode::E0711, n.loc,
                                     "`wait` on `" + b.name + "`, which nothing in the pipeline signals: it "
                                     "would wait forever");
        diags_.add_note(d, b.loc,
                        "`" + b.name + "` is declared here; a `signal " + b.name + " = ... on PEER`, a `put ... signal " +
                            b.name + " = ...`, or a kernel that takes it as `out` or `inout` signals it");
      });
  }

  // E0713: in main, a wait before a collective in program order whose signal may only be sent
  // after that collective (in program order, or from a device graph, which may run after it):
  // the PE waiting holds its collective back, and the peer that would signal waits inside the
  // same collective. A wait after the collective in program order is ordered after it (it reads
  // what the collective writes: Checker::shmem), so it never holds it back.
  void collectives() {
    if (p_.main_graph < 0) return;
    const ir::Region& top = p_.graphs[p_.main_graph].body;
    // Each node of main, nested ones included, by the top-level node that holds it.
    std::map<const ir::Node*, size_t> anchor;
    for (size_t i = 0; i < top.nodes.size(); ++i) {
      std::function<void(const ir::Node&)> visit = [&](const ir::Node& n) {
        anchor[&n] = i;
        for (const ir::Region& b : ir::bodies(n))
          for (const ir::Node& m : b.nodes) visit(m);
      };
      visit(top.nodes[i]);
    }
    std::vector<SourceRange> reported;
    for (const auto& [node, a] : anchor) {
      const ir::ShmemNode* s = std::get_if<ir::ShmemNode>(&node->op);
      if (!s || s->op != ir::ShmemOp::Wait || s->signal < 0) continue;
      const auto senders = signallers(s->signal);
      for (size_t c = a + 1; c < top.nodes.size(); ++c) {
        if (!top.nodes[c].is<ir::CollectiveNode>()) continue;
        const ir::Node* late = nullptr;
        int late_graph = -1;
        for (const auto& [g, sender] : senders)
          if (g != p_.main_graph || anchor.at(sender) > c) {
            late = sender;
            late_graph = g;
            break;
          }
        if (!late) continue;
        bool seen = false;
        for (const SourceRange& r : reported) seen |= same_place(r, node->loc);
        if (seen) break;
        reported.push_back(node->loc);
        const std::string coll = ir::to_string(top.nodes[c].as<ir::CollectiveNode>().collective);
        const std::string sig = p_.buffers[s->signal].name;
        Diagnostic& d = diags_.error(
            DiagCode::E0713, node->loc,
            "`wait` on `" + sig + "` before `" + coll + "`, while `" + sig +
                "` may be signalled only after it: a PE waiting here holds its `" + coll +
                "` back, and the peer that would signal waits inside the same `" + coll + "`");
        diags_.add_note(d, top.nodes[c].loc, "the `" + coll + "` is here");
        diags_.add_note(d, late->loc,
                        late_graph == p_.main_graph
                            ? "`" + sig + "` is signalled here, after the `" + coll + "`"
                            : "`" + sig + "` is signalled here, in device graph `" + p_.graphs[late_graph].name +
                                  "`, which may run after the `" + coll + "`");
        break;
      }
    }
  }

  ir::Program& p_;
  DiagnosticEngine& diags_;
  const std::set<int>& named_;  // signal words some put or signal names (Checker::shmem)
  std::vector<int> graphs_;
  std::map<int, Divergence> scalar_;
  std::vector<Divergence> graph_launch_;
};

}  // namespace

void Checker::check_nvshmem_rules() {
  bool any = false;
  for (const ir::Graph& g : program_->graphs) {
    std::function<void(const ir::Region&)> find = [&](const ir::Region& r) {
      for (const ir::Node& n : r.nodes) {
        any |= n.is<ir::ShmemNode>();
        for (const ir::Region& b : ir::bodies(n)) find(b);
      }
    };
    find(g.body);
  }
  if (any) NvshmemRules(*program_, diags_, signal_words_named_).run();
}

}  // namespace orch::detail
