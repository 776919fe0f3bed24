// `if`, `while` and `switch`: their conditions, bodies and the target's support for them.
#include <algorithm>
#include <map>

#include "compiler/check_stmt_helpers.h"

namespace orch::detail {

// ---- control flow ------------------------------------------------------------------------

std::optional<ir::Expr> Checker::condition(const ast::Expr& e, BodyContext& ctx) {
  in_condition_ = true;
  auto out = expr(e, ExprContext::Device, &ctx);
  in_condition_ = false;
  if (out && finish(*out, std::nullopt, DiagCode::E0109).failed()) return std::nullopt;
  return out;
}

namespace {

void refresh_container_accesses(ir::Node& node) {
  std::vector<ir::BufferAccess> accesses;
  const ir::ConditionalParts& c = *ir::conditional(node);
  if (c.cond) collect_device_reads(*c.cond, accesses);
  for (const ir::Region& r : c.bodies)
    for (const ir::Node& n : r.nodes)
      for (const ir::BufferAccess& a : n.accesses) add_access(accesses, a.buffer, a.read, a.write);
  node.accesses = std::move(accesses);
}

// A device graph may hold no conditional node at all.
void forbid_in_device_graph(DiagnosticEngine& diags, const ir::Program& p, const BodyContext& ctx,
                            const SourceRange& where, const std::string& what) {
  if (!ctx.device) return;
  Diagnostic& d = diags.error(DiagCode::E0501, where,
                              "a device graph cannot hold " + what +
                                  "; graphs launched from the device hold only kernels, copies, "
                                  "fills and child graphs");
  diags.add_note(d, p.graphs[ctx.graph].loc,
                 "`" + p.graphs[ctx.graph].name + "` is a device graph");
}

}  // namespace

void Checker::enter_conditional(const ast::Stmt& s, BodyContext& inner) {
  inner.conditional_depth++;
  if (inner.conditional_depth == 1) inner.outermost_conditional_loc = s.loc;
  inner.conditional_loc = s.loc;
  if (inner.conditional_depth <= static_cast<int>(ir::kMaxConditionalNesting) ||
      inner.nesting_reported)
    return;
  inner.nesting_reported = true;
  Diagnostic& d =
      diags_.error(DiagCode::E0412, s.loc,
                   "this conditional is nested " + std::to_string(inner.conditional_depth) +
                       " deep; a pipeline holds conditional bodies at most " +
                       std::to_string(ir::kMaxConditionalNesting) + " deep");
  diags_.add_note(d, inner.outermost_conditional_loc, "the outermost one is here");
}

void Checker::if_stmt(const ast::Stmt& s, const ast::If& n, BodyContext& ctx, ir::Region& out) {
  forbid_in_device_graph(diags_, *program_, ctx, s.loc, "an `if`");
  const TargetProfile& prof = program_->profile;
  if (!prof.supports_if || (n.has_else && !prof.supports_if_else))
    diags_.error(DiagCode::E0407, s.loc,
                 std::string("target ") + prof.name + " does not support " +
                     (n.has_else ? "IF/ELSE" : "IF") + " conditional nodes");
  ir::Node node = make_node(ir::IfNode{}, s, ctx);
  auto& cond_node = node.as<ir::IfNode>();
  cond_node.cond = condition(*n.cond, ctx);
  BodyContext inner = ctx;
  enter_conditional(s, inner);
  cond_node.bodies.emplace_back();
  block(n.then_body, inner, cond_node.bodies.back());
  if (n.has_else) {
    cond_node.bodies.emplace_back();
    block(n.else_body, inner, cond_node.bodies.back());
  }
  if (!cond_node.cond) return;
  refresh_container_accesses(node);
  out.nodes.push_back(std::move(node));
}

void Checker::while_stmt(const ast::Stmt& s, const ast::While& n, BodyContext& ctx,
                         ir::Region& out) {
  forbid_in_device_graph(diags_, *program_, ctx, s.loc, "a `while` loop");
  if (!program_->profile.supports_while)
    diags_.error(DiagCode::E0407, s.loc,
                 "target " + program_->profile.name + " does not support WHILE conditional nodes");
  ir::Node node = make_node(ir::WhileNode{}, s, ctx);
  auto& loop = node.as<ir::WhileNode>();
  bool cond_ok = true;
  if (n.cond) {
    loop.cond = condition(*n.cond, ctx);
    cond_ok = loop.cond.has_value();
  }
  bool cond_used = false;
  BodyContext inner = ctx;
  enter_conditional(s, inner);
  inner.loop_depth++;
  inner.loop_loc = s.loc;
  if (!n.cond) {
    inner.while_kernel_depth++;
    inner.cond_used = &cond_used;
  }
  loop.bodies.emplace_back();
  const size_t errors_before = diags_.error_count();
  block(n.body, inner, loop.bodies.back());
  if (diags_.error_count() != errors_before) loops_with_errors_.push_back(s.loc);
  if (!n.cond && !cond_used)
    diags_.error(DiagCode::E0405, s.loc,
                 "no kernel in this `while kernel` body takes `cond`, so nothing sets the loop's "
                 "condition");
  if (!cond_ok) return;
  refresh_container_accesses(node);
  out.nodes.push_back(std::move(node));
}

void Checker::switch_stmt(const ast::Stmt& s, const ast::Switch& n, BodyContext& ctx,
                          ir::Region& out) {
  forbid_in_device_graph(diags_, *program_, ctx, s.loc, "a `switch`");
  const TargetProfile& prof = program_->profile;
  if (!prof.supports_switch)
    diags_.error(DiagCode::E0407, s.loc,
                 "target " + prof.name + " does not support SWITCH conditional nodes");
  ir::Node node = make_node(ir::SwitchNode{}, s, ctx);
  auto& sw = node.as<ir::SwitchNode>();
  sw.cond = condition(*n.subject, ctx);
  if (sw.cond && ir::is_float(sw.cond->type)) {
    diags_.error(DiagCode::E0406, n.subject->loc, "a switch subject must be an integer");
    sw.cond.reset();
  }
  if (n.cases.empty() && !n.default_body)
    diags_.error(DiagCode::E0411, s.loc,
                 "this `switch` has no `case` and no `default`; a CUDA SWITCH node needs at least "
                 "one body");
  BodyContext inner = ctx;
  enter_conditional(s, inner);
  std::map<int64_t, SourceRange> seen;
  for (const ast::SwitchCase& c : n.cases) {
    const Symbol* named = c.value->kind == ast::ExprKind::Name ? lookup(c.value->text) : nullptr;
    if (named && named->kind != SymbolKind::Builtin) {
      diags_.error(DiagCode::E0403, c.value->loc,
                   "a case value must be an integer constant, but `" + c.value->text + "` is not one");
      sw.case_values.push_back(0);
      sw.bodies.emplace_back();
      block(c.body, inner, sw.bodies.back());
      continue;
    }
    auto x = expr(*c.value, ExprContext::Constant, &ctx);
    // Case values take the subject's type and must be exactly its values.
    const ir::ScalarType subject = sw.cond ? sw.cond->type : ir::ScalarType::I64;
    std::optional<ir::Value> v;
    if (x && ir::is_float(x->type)) {
      diags_.error(DiagCode::E0403, c.value->loc, "a case value must be an integer constant");
    } else if (x) {
      expr::Evaluation e = finish(*x, subject, DiagCode::E0403);
      if (e.known()) {
        expr::Outcome o = expr::convert(e.value, subject);
        if (!o.ok()) diags_.error(DiagCode::E0403, c.value->loc, "case " + e.value.to_string() + " is not a value of the subject: " + o.message);
        else v = o.value;
      } else if (!e.failed()) {
        diags_.error(DiagCode::E0403, c.value->loc, "a case value must be an integer constant");
      }
    }
    if (v) {
      if (auto [it, inserted] = seen.emplace(v->i64(), c.loc); !inserted) {
        Diagnostic& d = diags_.error(DiagCode::E0403, c.value->loc,
                                     "case " + v->to_string() + " appears twice");
        diags_.add_note(d, it->second, "first case " + v->to_string() + " is here");
      }
    }
    sw.case_values.push_back(v ? v->i64() : 0);
    sw.bodies.emplace_back();
    block(c.body, inner, sw.bodies.back());
  }
  if (n.default_body) {
    sw.has_default = true;
    sw.bodies.emplace_back();
    block(*n.default_body, inner, sw.bodies.back());
  }
  if (profile_ok_ && sw.bodies.size() > prof.max_switch_cases)
    diags_.error(DiagCode::E0404, s.loc,
                 "switch has " + std::to_string(sw.bodies.size()) + " bodies; " + prof.name +
                     " profile allows at most " + std::to_string(prof.max_switch_cases));
  if (!sw.cond) return;
  refresh_container_accesses(node);
  out.nodes.push_back(std::move(node));
}

}  // namespace orch::detail
