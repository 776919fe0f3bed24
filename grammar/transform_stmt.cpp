#include "grammar/transformer.h"

namespace orch::grammar {

namespace {
// After a syntax error a rule may hold fewer children than its grammar says.
OrchParser::IdentContext* at(const std::vector<OrchParser::IdentContext*>& ids, size_t i) {
  return i < ids.size() ? ids[i] : nullptr;
}
OrchParser::IdentContext* last(const std::vector<OrchParser::IdentContext*>& ids) {
  return ids.empty() ? nullptr : ids.back();
}
}  // namespace

ast::Block Transformer::block(OrchParser::BlockContext* ctx) {
  ast::Block out;
  if (!ctx) return out;
  for (auto* s : ctx->stmt())
    if (auto st = stmt(s)) out.push_back(std::move(*st));
  return out;
}

ast::Stmt Transformer::if_stmt(OrchParser::IfStmtContext* ctx) {
  ast::If node;
  node.cond = expr(ctx->expr());
  node.then_body = block(ctx->block(0));
  if (ctx->ELSE()) {
    node.has_else = true;
    node.else_loc = range(ctx->ELSE()->getSymbol());
    if (ctx->ifStmt())
      node.else_body.push_back(if_stmt(ctx->ifStmt()));
    else
      node.else_body = block(ctx->block(1));
  }
  return ast::Stmt{range(ctx), std::move(node)};
}

std::optional<ast::Stmt> Transformer::stmt(OrchParser::StmtContext* ctx) {
  SourceRange loc = range(ctx);
  if (auto* c = dynamic_cast<OrchParser::KernelLaunchStmtContext*>(ctx)) {
    ast::KernelLaunch node;
    node.kernel = ident(c->ident());
    auto exprs = c->expr();
    // The launch configuration comes first: grid, block and optionally shared bytes. The
    // arguments follow the `>>>` token, so split the expression list at it.
    size_t close = c->LAUNCH_CLOSE() ? c->LAUNCH_CLOSE()->getSymbol()->getTokenIndex() : 0;
    std::vector<ast::ExprPtr> config;
    for (auto* e : exprs) {
      if (e->getStart()->getTokenIndex() < close)
        config.push_back(expr(e));
      else
        node.args.push_back(expr(e));
    }
    if (config.size() > 0) node.grid = std::move(config[0]);
    if (config.size() > 1) node.block = std::move(config[1]);
    if (config.size() > 2) node.shared_bytes = std::move(config[2]);
    return ast::Stmt{loc, std::move(node)};
  }
  if (auto* c = dynamic_cast<OrchParser::CopyStmtContext*>(ctx))
    return ast::Stmt{loc, ast::Copy{ident(c->ident(0)), ident(c->ident(1))}};
  if (auto* c = dynamic_cast<OrchParser::FillStmtContext*>(ctx))
    return ast::Stmt{loc, ast::Fill{ident(c->ident()), expr(c->expr())}};
  if (auto* c = dynamic_cast<OrchParser::AssignStmtContext*>(ctx))
    return ast::Stmt{loc, ast::Assign{ident(c->ident()), (c->op ? c->op->getText() : std::string("?")), expr(c->expr())}};
  if (auto* c = dynamic_cast<OrchParser::IfStmtAltContext*>(ctx)) {
    if (!c->ifStmt()) return std::nullopt;
    return if_stmt(c->ifStmt());
  }
  if (auto* c = dynamic_cast<OrchParser::WhileKernelStmtContext*>(ctx))
    return ast::Stmt{loc, ast::While{nullptr, block(c->block())}};
  if (auto* c = dynamic_cast<OrchParser::WhileStmtContext*>(ctx))
    return ast::Stmt{loc, ast::While{expr(c->expr()), block(c->block())}};
  if (auto* c = dynamic_cast<OrchParser::SwitchStmtContext*>(ctx)) {
    ast::Switch node;
    node.subject = expr(c->expr());
    for (auto* sc : c->switchCase())
      node.cases.push_back(ast::SwitchCase{expr(sc->expr()), block(sc->block()), range(sc)});
    if (c->DEFAULT()) {
      node.default_body = block(c->block());
      node.default_loc = range(c->DEFAULT()->getSymbol());
    }
    return ast::Stmt{loc, std::move(node)};
  }
  if (auto* c = dynamic_cast<OrchParser::CallStmtContext*>(ctx))
    return ast::Stmt{loc, ast::Call{ident(c->ident())}};
  if (auto* c = dynamic_cast<OrchParser::LaunchStmtContext*>(ctx)) {
    ast::LaunchGraph node;
    node.graph = ident(c->ident());
    if (c->expr()) node.index = expr(c->expr());
    node.mode = launch_mode(c->launchMode());
    return ast::Stmt{loc, std::move(node)};
  }
  if (auto* c = dynamic_cast<OrchParser::AllreduceStmtContext*>(ctx)) {
    ast::Collective node;
    node.kind = ast::CollectiveKind::AllReduce;
    auto ids = c->ident();
    node.op = ident(at(ids, 0));
    node.src = ident(at(ids, 1));
    if (c->ARROW()) node.dst = ident(at(ids, 2));
    node.comm = ident(last(ids));
    return ast::Stmt{loc, std::move(node)};
  }
  if (auto* c = dynamic_cast<OrchParser::BroadcastStmtContext*>(ctx)) {
    ast::Collective node;
    node.kind = ast::CollectiveKind::Broadcast;
    auto ids = c->ident();
    node.src = ident(at(ids, 0));
    if (c->ARROW()) node.dst = ident(at(ids, 1));
    if (c->expr()) node.root = expr(c->expr());
    node.comm = ident(last(ids));
    return ast::Stmt{loc, std::move(node)};
  }
  if (auto* c = dynamic_cast<OrchParser::AllgatherStmtContext*>(ctx)) {
    ast::Collective node;
    node.kind = ast::CollectiveKind::AllGather;
    node.src = ident(c->ident(0));
    node.dst = ident(c->ident(1));
    node.comm = ident(c->ident(2));
    return ast::Stmt{loc, std::move(node)};
  }
  if (auto* c = dynamic_cast<OrchParser::ReduceScatterStmtContext*>(ctx)) {
    ast::Collective node;
    node.kind = ast::CollectiveKind::ReduceScatter;
    node.op = ident(c->ident(0));
    node.src = ident(c->ident(1));
    node.dst = ident(c->ident(2));
    node.comm = ident(c->ident(3));
    return ast::Stmt{loc, std::move(node)};
  }
  if (auto* c = dynamic_cast<OrchParser::PutStmtContext*>(ctx)) {
    ast::Shmem node;
    node.kind = ast::ShmemKind::Put;
    auto ids = c->ident();
    node.src = ident(at(ids, 0));
    node.dst = ident(at(ids, 1));
    auto exprs = c->expr();
    if (!exprs.empty()) node.peer = expr(exprs[0]);
    if (c->SIGNAL()) {
      node.signal = ident(at(ids, 2));
      if (c->sigop) {
        node.op = c->sigop->getText();
        node.op_loc = range(c->sigop);
      }
      if (exprs.size() > 1) node.value = expr(exprs[1]);
    }
    return ast::Stmt{loc, std::move(node)};
  }
  if (auto* c = dynamic_cast<OrchParser::GetStmtContext*>(ctx)) {
    ast::Shmem node;
    node.kind = ast::ShmemKind::Get;
    auto ids = c->ident();
    node.src = ident(at(ids, 0));
    node.dst = ident(at(ids, 1));
    node.peer = expr(c->expr());
    return ast::Stmt{loc, std::move(node)};
  }
  if (auto* c = dynamic_cast<OrchParser::SignalStmtContext*>(ctx)) {
    ast::Shmem node;
    node.kind = ast::ShmemKind::Signal;
    node.signal = ident(c->ident());
    if (c->sigop) {
      node.op = c->sigop->getText();
      node.op_loc = range(c->sigop);
    }
    auto exprs = c->expr();
    if (exprs.size() > 0) node.value = expr(exprs[0]);
    if (exprs.size() > 1) node.peer = expr(exprs[1]);
    return ast::Stmt{loc, std::move(node)};
  }
  if (auto* c = dynamic_cast<OrchParser::WaitStmtContext*>(ctx)) {
    ast::Shmem node;
    node.kind = ast::ShmemKind::Wait;
    node.signal = ident(c->ident());
    if (c->cmp) {
      node.op = c->cmp->getText();
      node.op_loc = range(c->cmp);
    }
    node.value = expr(c->expr());
    return ast::Stmt{loc, std::move(node)};
  }
  if (dynamic_cast<OrchParser::QuietStmtContext*>(ctx)) {
    ast::Shmem node;
    node.kind = ast::ShmemKind::Quiet;
    return ast::Stmt{loc, std::move(node)};
  }
  if (dynamic_cast<OrchParser::BarrierStmtContext*>(ctx)) {
    ast::Shmem node;
    node.kind = ast::ShmemKind::Barrier;
    return ast::Stmt{loc, std::move(node)};
  }
  return std::nullopt;  // `;` or a statement lost to a syntax error
}

}  // namespace orch::grammar
