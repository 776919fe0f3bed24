#include "grammar/transformer.h"

namespace orch::grammar {

std::unique_ptr<ast::Module> Transformer::module(OrchParser::FileContext* ctx) {
  auto m = std::make_unique<ast::Module>();
  m->file = file_;
  if (!ctx) return m;
  m->pipeline = ident(ctx->ident());
  for (auto* d : ctx->decl()) decl(d, *m);
  return m;
}

void Transformer::decl(OrchParser::DeclContext* ctx, ast::Module& m) {
  if (!ctx) return;
  if (auto* t = ctx->targetDecl()) {
    for (auto* i : t->ident()) m.targets.push_back(ident(i));
  } else if (auto* p = ctx->paramDecl()) {
    ast::Param param;
    param.name = ident(p->ident(0));
    param.type = ident(p->ident(1));
    if (p->expr()) param.default_value = expr(p->expr());
    param.loc = range(p);
    m.params.push_back(std::move(param));
  } else if (auto* b = ctx->bufferDecl()) {
    ast::Buffer buffer;
    buffer.name = ident(b->ident(0));
    buffer.elem_type = ident(b->ident(1));
    if (b->expr()) buffer.size = expr(b->expr());
    for (auto* a : b->bufferAttr()) {
      bool& flag = a->HOST() ? buffer.host : a->KEEP() ? buffer.keep : buffer.symmetric;
      if (flag) buffer.repeated_attributes.push_back(range(a));
      flag = true;
      if (a->KEEP() && !buffer.keep_loc.valid()) buffer.keep_loc = range(a);
      if (a->SYMMETRIC() && !buffer.symmetric_loc.valid()) buffer.symmetric_loc = range(a);
    }
    buffer.loc = range(b);
    m.buffers.push_back(std::move(buffer));
  } else if (auto* c = ctx->commDecl()) {
    m.comms.push_back({ident(c->ident()), range(c)});
  } else if (auto* k = ctx->kernelDecl()) {
    m.kernels.push_back(kernel(k));
  } else if (auto* g = ctx->graphDecl()) {
    m.graphs.push_back(graph(g));
  }
}

ast::KernelParam Transformer::kernel_param(OrchParser::KernelParamContext* ctx) {
  ast::KernelParam p;
  p.name = ident(ctx->ident());
  p.loc = range(ctx);
  if (ctx->access) {
    switch (ctx->access->getType()) {
      case OrchParser::IN: p.access = ast::Access::In; break;
      case OrchParser::OUT: p.access = ast::Access::Out; break;
      default: p.access = ast::Access::InOut; break;
    }
  }
  auto* type = ctx->kernelType();
  if (dynamic_cast<OrchParser::CondTypeContext*>(type)) {
    p.kind = ast::KernelParamKind::Cond;
  } else if (auto* g = dynamic_cast<OrchParser::GraphTypeContext*>(type)) {
    p.kind = g->expr() ? ast::KernelParamKind::GraphFamily : ast::KernelParamKind::Graph;
    if (g->expr()) p.family_size = expr(g->expr());
  } else if (auto* d = dynamic_cast<OrchParser::DataTypeContext*>(type)) {
    p.elem_type = ident(d->ident());
    p.is_array = d->LBRACK() != nullptr;
  }
  return p;
}

ast::Kernel Transformer::kernel(OrchParser::KernelDeclContext* ctx) {
  ast::Kernel k;
  k.name = ident(ctx->ident());
  k.loc = range(ctx);
  for (auto* p : ctx->kernelParam()) k.params.push_back(kernel_param(p));
  for (auto* clause : ctx->kernelClause()) {
    if (auto* l = dynamic_cast<OrchParser::LaunchesClauseContext*>(clause)) {
      for (auto* b : l->launchBudget()) {
        ast::LaunchBudget budget;
        budget.param = ident(b->ident());
        budget.mode = launch_mode(b->launchMode());
        budget.limit = expr(b->expr());
        budget.loc = range(b);
        k.budgets.push_back(std::move(budget));
      }
    } else if (auto* c = dynamic_cast<OrchParser::CostClauseContext*>(clause)) {
      for (auto* item : c->costItem()) {
        auto names = item->ident();
        if (names.empty() || !item->expr()) continue;  // lost to a syntax error, already reported
        ast::CostItem cost;
        cost.what = ident(names[0]);
        if (names.size() > 1) cost.precision = ident(names[1]);
        cost.value = expr(item->expr());
        cost.loc = range(item);
        k.costs.push_back(std::move(cost));
      }
    } else if (auto* e = dynamic_cast<OrchParser::EntryClauseContext*>(clause)) {
      if (k.entry) k.duplicate_clauses.push_back(range(e));
      k.entry = string_literal(e->STRING());
    } else if (auto* f = dynamic_cast<OrchParser::FromClauseContext*>(clause)) {
      if (k.from_file || k.inline_source) k.duplicate_clauses.push_back(range(f));
      k.from_file = string_literal(f->STRING());
    } else if (auto* s = dynamic_cast<OrchParser::SourceClauseContext*>(clause)) {
      if (!s->TRIPLE_STRING()) continue;  // lost to a syntax error, already reported
      if (k.from_file || k.inline_source) k.duplicate_clauses.push_back(range(s));
      antlr4::Token* tok = s->TRIPLE_STRING()->getSymbol();
      const std::string& raw = tok->getText();
      k.inline_source = ast::Ident{raw.size() >= 6 ? raw.substr(3, raw.size() - 6) : "", range(tok)};
      k.inline_first_line = static_cast<uint32_t>(tok->getLine());
      k.inline_first_col = range(tok).begin.col + 3;
    }
  }
  return k;
}

ast::Graph Transformer::graph(OrchParser::GraphDeclContext* ctx) {
  ast::Graph g;
  auto idents = ctx->ident();
  g.name = ident(idents.empty() ? nullptr : idents[0]);
  if (idents.size() > 1) {
    g.family_index = ident(idents[1]);
    g.family_size = expr(ctx->expr());
  }
  g.device = ctx->DEVICE() != nullptr;
  g.loc = range(ctx);
  if (ctx->block()) {
    g.body = block(ctx->block());
    g.body_loc = range(ctx->block());
  }
  return g;
}

}  // namespace orch::grammar
