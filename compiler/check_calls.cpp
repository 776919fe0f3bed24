// `call` (a graph inlined, with its size and depth bounded before expanding) and `launch`
// (a device graph launched from the device).
#include <algorithm>
#include <map>

#include "compiler/check_stmt_helpers.h"
#include "support/overloaded.h"

namespace orch::detail {

// ---- calls and launches ------------------------------------------------------------------

namespace {

// Statements of a block and the graphs it calls (once per `call`, with the depth of
// conditionals the call is nested in), without expanding them; `depth` is the block's own.
struct Callee {
  int graph;
  uint64_t depth;
};
void count_block(const ast::Block& b, const std::map<std::string, Symbol>& symbols,
                 uint64_t depth, uint64_t& statements, uint64_t& max_depth,
                 std::vector<Callee>& callees) {
  auto nested = [&](const ast::Block& body) {
    count_block(body, symbols, depth + 1, statements, max_depth, callees);
  };
  for (const ast::Stmt& s : b) {
    ++statements;
    max_depth = std::max(max_depth, depth);
    std::visit(overloaded{
                   [&](const ast::Call& n) {
                     auto it = symbols.find(n.graph.name);
                     if (it != symbols.end() && it->second.kind == SymbolKind::Graph)
                       callees.push_back({it->second.index, depth});
                   },
                   [&](const ast::If& n) {
                     nested(n.then_body);
                     nested(n.else_body);
                   },
                   [&](const ast::While& n) { nested(n.body); },
                   [&](const ast::Switch& n) {
                     for (const ast::SwitchCase& c : n.cases) nested(c.body);
                     if (n.default_body) nested(*n.default_body);
                   },
                   // No body and no call: counted above, nothing inside.
                   [](const ast::KernelLaunch&) {},
                   [](const ast::Copy&) {},
                   [](const ast::Fill&) {},
                   [](const ast::Assign&) {},
                   [](const ast::LaunchGraph&) {},
                   [](const ast::Collective&) {},
                   [](const ast::Shmem&) {},
               },
               s.node);
  }
}

// "a -> b -> c", eliding the middle of a long chain.
std::string call_path(const ir::Program& p, const std::vector<int>& graphs, int last) {
  std::vector<std::string> names;
  for (int g : graphs) names.push_back(p.graphs[g].name);
  names.push_back(p.graphs[last].name);
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (names.size() > 8 && i == 3) {
      out += " -> ... (" + std::to_string(names.size() - 6) + " more)";
      i = names.size() - 4;
      continue;
    }
    out += (i ? " -> " : "") + names[i];
  }
  return out;
}

}  // namespace

bool Checker::compute_inline_sizes() {
  // Saturating: the budget is far below this, and sums of saturated sizes must not wrap.
  constexpr uint64_t kHuge = uint64_t{1} << 62;
  const size_t n = graph_asts_.size();
  std::vector<uint64_t> direct(n), direct_depth(n);
  std::vector<std::vector<Callee>> callees(n);
  for (size_t g = 0; g < n; ++g)
    count_block(graph_asts_[g]->body, symbols_, 1, direct[g], direct_depth[g], callees[g]);
  // Post-order over the call graph without recursion (a chain may be 100,000 graphs long); a
  // call back onto the stack is a cycle, reported as E0801 while building, and counts 0 here.
  // Every statement costs the checker a few kilobytes (its node, accesses, edges), so the
  // statements of the file are bounded before any is built.
  uint64_t statements = 0;
  for (size_t g = 0; g < n; ++g) {
    statements += direct[g];
    if (statements > kMaxStatements) {
      diags_.error(DiagCode::E0806, graph_asts_[g]->name.loc,
                   "the pipeline has more than " + std::to_string(kMaxStatements) +
                       " statements (counted up to graph `" + graph_asts_[g]->name.name +
                       "`); orch checks at most " + std::to_string(kMaxStatements) +
                       " in one pipeline");
      return false;
    }
  }
  inline_size_.assign(n, 0);
  inline_depth_.assign(n, 0);
  std::vector<int> state(n, 0);  // 0 new, 1 on the stack, 2 done
  for (size_t root = 0; root < n; ++root) {
    if (state[root]) continue;
    std::vector<std::pair<int, size_t>> stack{{static_cast<int>(root), 0}};
    state[root] = 1;
    while (!stack.empty()) {
      auto& [g, next] = stack.back();
      if (next < callees[g].size()) {
        int c = callees[g][next++].graph;
        if (state[c] == 0) {
          state[c] = 1;
          stack.push_back({c, 0});
        }
        continue;
      }
      uint64_t total = direct[g], depth = direct_depth[g];
      for (const Callee& c : callees[g]) {
        if (state[c.graph] != 2) continue;
        total = std::min(kHuge, total + inline_size_[c.graph]);
        depth = std::max(depth, std::min(kHuge, c.depth + inline_depth_[c.graph]));
      }
      inline_size_[g] = total;
      inline_depth_[g] = depth;
      state[g] = 2;
      stack.pop_back();
    }
  }
  return true;
}

void Checker::call(const ast::Stmt& s, const ast::Call& n, BodyContext& ctx, ir::Region& out) {
  const Symbol* sym = lookup(n.graph.name);
  if (!sym) {
    diags_.error(DiagCode::E0101, n.graph.loc, "graph `" + n.graph.name + "` is not declared");
    return;
  }
  if (sym->kind != SymbolKind::Graph) {
    diags_.error(DiagCode::E0109, n.graph.loc, "`" + n.graph.name + "` is not a graph");
    return;
  }
  const ir::Graph& callee = program_->graphs[sym->index];
  if (!callee.family_index.empty()) {
    diags_.error(DiagCode::E0504, n.graph.loc,
                 "cannot call the graph family `" + callee.name + "`; families are launched");
    return;
  }
  auto cycle = std::find(ctx.inlining.begin(), ctx.inlining.end(), sym->index);
  if (cycle != ctx.inlining.end()) {
    // The same cycle is met again from every graph on it and every graph calling into it.
    std::vector<int> members(cycle, ctx.inlining.end());
    std::sort(members.begin(), members.end());
    if (std::find(reported_cycles_.begin(), reported_cycles_.end(), members) != reported_cycles_.end())
      return;
    reported_cycles_.push_back(members);
    std::string path;
    for (auto it = cycle; it != ctx.inlining.end(); ++it) path += program_->graphs[*it].name + " -> ";
    path += callee.name;
    diags_.error(DiagCode::E0801, s.loc, "`call " + callee.name + "` makes a cycle: " + path);
    return;
  }
  if (inlining_stopped_) return;
  if (ctx.call_stack.size() >= kMaxCallDepth) {
    inlining_stopped_ = true;
    diags_.error(DiagCode::E0804, s.loc,
                 "`call " + callee.name + "` nests calls " + std::to_string(ctx.call_stack.size() + 1) +
                     " deep (" + call_path(*program_, ctx.inlining, sym->index) +
                     "); orch inlines at most " + std::to_string(kMaxCallDepth) + " levels of `call`");
    return;
  }
  // The checker and the passes after it recurse once per level of nesting, conditionals and
  // calls alike. Conditionals past 64 levels are E0412, but that does not stop the walk: bound
  // the depth a call reaches (each graph alone stays within the parser's 200) so that no pass
  // can run out of stack.
  const uint64_t depth = ctx.conditional_depth + ctx.call_stack.size() + inline_depth_[sym->index];
  if (depth > kMaxInlinedDepth) {
    inlining_stopped_ = true;
    diags_.error(DiagCode::E0804, s.loc,
                 "`call " + callee.name + "` nests statements " + std::to_string(depth) +
                     " levels deep (conditionals and calls, through every graph it calls); orch "
                     "allows at most " + std::to_string(kMaxInlinedDepth));
    return;
  }
  // The outermost call of a chain brings in everything below it: account for it all there.
  if (ctx.call_stack.empty()) {
    const uint64_t size = inline_size_[sym->index];
    if (inlined_statements_ + size > kMaxInlinedStatements) {
      inlining_stopped_ = true;
      const bool huge = size >= (uint64_t{1} << 62);
      diags_.error(DiagCode::E0805, s.loc,
                   "`call " + callee.name + "` would inline " +
                       (huge ? std::string("more than 2^62") : std::to_string(size)) +
                       " statements (`" + callee.name +
                       "` with every graph it calls, once per `call`) on top of the " +
                       std::to_string(inlined_statements_) +
                       " already inlined; orch inlines at most " +
                       std::to_string(kMaxInlinedStatements) +
                       " statements in one pipeline (each graph is also checked on its own)");
      return;
    }
    inlined_statements_ += size;
  }
  BodyContext inner = ctx;
  inner.inlining.push_back(sym->index);
  inner.call_stack.push_back(s.loc);
  DiagnosticEngine::ScopedContext where(diags_, s.loc, "called from here");
  block(graph_asts_[sym->index]->body, inner, out);
}

void Checker::launch_graph(const ast::Stmt& s, const ast::LaunchGraph& n, BodyContext& ctx,
                           ir::Region& out) {
  const Symbol* sym = lookup(n.graph.name);
  if (!sym) {
    diags_.error(DiagCode::E0101, n.graph.loc, "graph `" + n.graph.name + "` is not declared");
    return;
  }
  if (sym->kind != SymbolKind::Graph || !program_->graphs[sym->index].device) {
    Diagnostic& d = diags_.error(DiagCode::E0504, n.graph.loc,
                                 "`" + n.graph.name + "` is not a device graph; only graphs "
                                                      "declared `device` can be launched");
    if (sym->loc.valid()) diags_.add_note(d, sym->loc, "`" + n.graph.name + "` is declared here");
    return;
  }
  const ir::Graph& g = program_->graphs[sym->index];
  ir::Node node = make_node(ir::LaunchGraphNode{}, s, ctx);
  auto& launch = node.as<ir::LaunchGraphNode>();
  launch.graph = sym->index;
  launch.mode = static_cast<ir::LaunchMode>(n.mode);
  if (!g.family_index.empty()) {
    if (!n.index) {
      diags_.error(DiagCode::E0504, n.graph.loc,
                   "`" + g.name + "` is a family of " + std::to_string(g.family_size) +
                       " graphs; launch one member, e.g. `launch " + g.name + "[0] " +
                       ir::to_string(launch.mode) + "`");
      return;
    }
    auto x = expr(*n.index, ExprContext::Host, &ctx);
    if (!x) return;
    // An index from the family index is checked for every member of the launching family
    // (`launch stage[j + 1]` from the last one is past the end); one from params with their
    // defaults, and again at bind time. The launcher also refuses an index out of range
    // rather than read past the launch table.
    expr::Evaluation ev = finish(*x, ir::ScalarType::U32, DiagCode::E0504);
    if (ev.failed()) return;
    const bool by_member = has_family_index(*x) && ctx.family_size > 0;
    const std::string last = std::to_string(g.family_size - 1);
    for (uint32_t m = 0; m < (by_member ? ctx.family_size : 1); ++m) {
      auto v = evaluate(*x, by_member ? std::optional<uint32_t>(m) : std::nullopt);
      if (!ir::is_float(x->type) && (!v || !(v->negative() || v->magnitude() >= g.family_size))) continue;
      const std::string text = ir::to_string(*x, *program_);
      std::string message = "`" + g.name + "` has members 0 to " + last + "; ";
      if (x->kind == ir::ExprKind::Const || !v)
        message += text + " is not one";
      else
        message += "`" + text + "` is " + v->to_string() +
                   (by_member ? " in member " + std::to_string(m) + " of `" +
                                    program_->graphs[ctx.graph].name + "`"
                              : "") +
                   default_values_note(*x);
      diags_.error(DiagCode::E0504, n.index->loc, message);
      return;
    }
    bool from_params = false;
    std::vector<const ir::Expr*> stack{&*x};
    while (!stack.empty()) {
      const ir::Expr* e = stack.back();
      stack.pop_back();
      from_params |= e->kind == ir::ExprKind::Param || e->kind == ir::ExprKind::Rank ||
                     e->kind == ir::ExprKind::WorldSize;
      for (const ir::Expr& o : e->operands) stack.push_back(&o);
    }
    if (from_params) {
      ir::BindCheck check{DiagCode::E0504,
                          "`" + g.name + "` has members 0 to " + last + "; the index of `launch " +
                              g.name + "[...]` is one of them",
                          binary(expr::Op::And, binary(expr::Op::Ge, *x, constant(0)),
                                 binary(expr::Op::Lt, *x, constant(g.family_size))),
                          n.index->loc};
      if (by_member) check.family_size = ctx.family_size;
      program_->bind_checks.push_back(std::move(check));
    }
    launch.family_member = std::move(*x);
  } else if (n.index) {
    diags_.error(DiagCode::E0504, n.index->loc, "`" + g.name + "` is one graph, not a family");
    return;
  }
  device_launch_placement(s.loc, "`launch " + g.name + "`", ctx);
  out.nodes.push_back(std::move(node));
}

}  // namespace orch::detail
