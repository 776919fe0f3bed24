// Internal to grammar/: turns ANTLR's parse tree into ast::Module. One file per grammar area
// (transform_decl.cpp, transform_stmt.cpp, transform_expr.cpp), as kuzu does.
#pragma once

#include "OrchParser.h"
#include "grammar/ast.h"
#include "support/diagnostics.h"

namespace orch::grammar {

class Transformer {
 public:
  Transformer(const SourceManager& sources, uint32_t file, DiagnosticEngine& diags)
      : sources_(sources), file_(file), diags_(diags) {}

  std::unique_ptr<ast::Module> module(OrchParser::FileContext* ctx);

  // transform_decl.cpp
  void decl(OrchParser::DeclContext* ctx, ast::Module& m);
  ast::Kernel kernel(OrchParser::KernelDeclContext* ctx);
  ast::KernelParam kernel_param(OrchParser::KernelParamContext* ctx);
  ast::Graph graph(OrchParser::GraphDeclContext* ctx);

  // transform_stmt.cpp
  ast::Block block(OrchParser::BlockContext* ctx);
  std::optional<ast::Stmt> stmt(OrchParser::StmtContext* ctx);
  ast::Stmt if_stmt(OrchParser::IfStmtContext* ctx);

  // transform_expr.cpp
  ast::ExprPtr expr(OrchParser::ExprContext* ctx);
  ast::Ident ident(OrchParser::IdentContext* ctx);
  ast::Ident string_literal(antlr4::tree::TerminalNode* node);
  ast::LaunchMode launch_mode(OrchParser::LaunchModeContext* ctx);

  SourceRange range(antlr4::ParserRuleContext* ctx) const;
  SourceRange range(antlr4::Token* token) const;

 private:
  SourcePos token_end(antlr4::Token* t) const;
  const SourceManager& sources_;
  uint32_t file_;
  DiagnosticEngine& diags_;
};

}  // namespace orch::grammar
