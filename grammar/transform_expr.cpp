#include <cerrno>
#include <cstdlib>

#include "grammar/transformer.h"

namespace orch::grammar {

// End position of a token, which may span lines (triple-quoted strings). getText() is UTF-8,
// so counting its bytes gives byte columns.
SourcePos Transformer::token_end(antlr4::Token* t) const {
  SourcePos p{static_cast<uint32_t>(t->getLine()),
              sources_.byte_column(file_, static_cast<uint32_t>(t->getLine()),
                                   t->getCharPositionInLine())};
  for (char c : t->getText()) {
    if (c == '\n') {
      ++p.line;
      p.col = 1;
    } else {
      ++p.col;
    }
  }
  return p;
}

SourceRange Transformer::range(antlr4::Token* token) const {
  SourceRange r;
  r.file = file_;
  r.begin = {static_cast<uint32_t>(token->getLine()),
             sources_.byte_column(file_, static_cast<uint32_t>(token->getLine()),
                                  token->getCharPositionInLine())};
  r.end = token_end(token);
  return r;
}

SourceRange Transformer::range(antlr4::ParserRuleContext* ctx) const {
  SourceRange r = range(ctx->getStart());
  antlr4::Token* stop = ctx->getStop();
  // An empty rule (error recovery) has its stop before its start.
  if (stop && stop->getTokenIndex() >= ctx->getStart()->getTokenIndex() &&
      stop->getType() != antlr4::Token::EOF)
    r.end = token_end(stop);
  return r;
}

ast::Ident Transformer::ident(OrchParser::IdentContext* ctx) {
  if (!ctx) return {};
  return {ctx->getText(), range(ctx)};
}

ast::Ident Transformer::string_literal(antlr4::tree::TerminalNode* node) {
  if (!node) return {};  // lost to a syntax error, already reported
  const std::string& raw = node->getText();
  std::string value;
  for (size_t i = 1; i + 1 < raw.size(); ++i) {
    if (raw[i] == '\\' && i + 2 < raw.size()) ++i;
    value += raw[i];
  }
  return {value, range(node->getSymbol())};
}

ast::LaunchMode Transformer::launch_mode(OrchParser::LaunchModeContext* ctx) {
  if (ctx && ctx->FIRE_AND_FORGET()) return ast::LaunchMode::FireAndForget;
  if (ctx && ctx->SIBLING()) return ast::LaunchMode::Sibling;
  return ast::LaunchMode::Tail;
}

ast::ExprPtr Transformer::expr(OrchParser::ExprContext* ctx) {
  auto e = std::make_unique<ast::Expr>();
  if (!ctx) return e;
  e->loc = range(ctx);
  if (auto* c = dynamic_cast<OrchParser::ParenExprContext*>(ctx)) {
    auto inner = expr(c->expr());
    inner->loc = e->loc;  // point at the parentheses too
    return inner;
  }
  if (auto* c = dynamic_cast<OrchParser::CallExprContext*>(ctx)) {
    e->kind = ast::ExprKind::Call;
    ast::Ident callee = ident(c->ident());
    e->text = callee.name;
    e->name_loc = callee.loc;
    for (auto* a : c->expr()) e->operands.push_back(expr(a));
    return e;
  }
  if (auto* c = dynamic_cast<OrchParser::UnaryExprContext*>(ctx)) {
    e->kind = ast::ExprKind::Unary;
    e->text = (c->op ? c->op->getText() : std::string("?"));
    if (c->op) e->name_loc = range(c->op);
    e->operands.push_back(expr(c->expr()));
    return e;
  }
  if (auto* c = dynamic_cast<OrchParser::BinaryExprContext*>(ctx)) {
    e->kind = ast::ExprKind::Binary;
    e->text = (c->op ? c->op->getText() : std::string("?"));
    if (c->op) e->name_loc = range(c->op);
    e->operands.push_back(expr(c->expr(0)));
    e->operands.push_back(expr(c->expr(1)));
    return e;
  }
  if (auto* c = dynamic_cast<OrchParser::IntExprContext*>(ctx)) {
    e->kind = ast::ExprKind::Int;
    const std::string text = c->INT() ? c->INT()->getText() : "0";
    errno = 0;
    bool hex = text.size() > 2 && (text[1] == 'x' || text[1] == 'X');
    e->int_value = std::strtoull(hex ? text.c_str() + 2 : text.c_str(), nullptr, hex ? 16 : 10);
    if (errno == ERANGE)
      diags_.error(DiagCode::E0002, e->loc, "integer literal `" + text + "` does not fit in 64 bits");
    return e;
  }
  if (auto* c = dynamic_cast<OrchParser::FloatExprContext*>(ctx)) {
    e->kind = ast::ExprKind::Float;
    const std::string text = c->FLOAT() ? c->FLOAT()->getText() : "0";
    errno = 0;
    e->float_value = std::strtod(text.c_str(), nullptr);
    if (errno == ERANGE && (e->float_value > 1 || e->float_value < -1))
      diags_.error(DiagCode::E0002, e->loc, "floating-point literal `" + text + "` is out of range");
    return e;
  }
  if (auto* c = dynamic_cast<OrchParser::BoolExprContext*>(ctx)) {
    e->kind = ast::ExprKind::Bool;
    e->int_value = c->TRUE() ? 1 : 0;
    return e;
  }
  if (auto* c = dynamic_cast<OrchParser::NameExprContext*>(ctx)) {
    e->kind = ast::ExprKind::Name;
    e->text = c->ident() ? c->ident()->getText() : "";
    return e;
  }
  return e;  // only reachable after a syntax error, which is already reported
}

}  // namespace orch::grammar
