// Every name of a .orch file, declared or used, from orch's AST: what go-to-definition, find
// references, hover and the outline need. Built from the parse alone, so it works on a file
// with errors (a partial tree gives a partial index). Scopes are orch's: one global namespace
// for params, buffers, comms, kernels and graphs; a kernel's parameters inside its declaration
// (budgets, cost expressions); a family's index inside its graph.
#pragma once

#include <string>
#include <vector>

#include "grammar/ast.h"

namespace orch::lsp {

enum class SymbolKind { Pipeline, Param, Buffer, Comm, Kernel, KernelParam, Graph, FamilyIndex };
const char* to_string(SymbolKind k);

struct Declaration {
  SymbolKind kind = SymbolKind::Param;
  std::string name;
  SourceRange name_loc;
  SourceRange loc;  // the whole declaration
  int index = -1;   // into the module's list of its kind; KernelParam: into the kernel's params
  int parent = -1;  // KernelParam: the kernel; FamilyIndex: the graph
};

struct Occurrence {
  SourceRange range;
  int decl = -1;  // index into declarations()
  bool definition = false;
};

// A statement with the graph it is in; nested bodies are listed after their statement.
struct StatementRef {
  const ast::Stmt* stmt = nullptr;
  int graph = -1;
};

// Whether `p` is in `r` (its end counts: a cursor right after a name is on it).
bool contains(const SourceRange& r, SourcePos p);

class SymbolIndex {
 public:
  SymbolIndex() = default;
  explicit SymbolIndex(const ast::Module& module);

  const std::vector<Declaration>& declarations() const { return decls_; }
  const std::vector<Occurrence>& occurrences() const { return occurrences_; }
  const std::vector<StatementRef>& statements() const { return statements_; }

  // The name at `p`, preferring one `p` is strictly inside over one it ends; null if none.
  const Occurrence* occurrence_at(SourcePos p) const;
  // Every occurrence of a declaration, in file order.
  std::vector<const Occurrence*> occurrences_of(int decl) const;
  // A global name (the first declaration of it, as the checker keeps); -1 if none.
  int lookup(const std::string& name) const;
  // The innermost statement containing `p`; null outside graph bodies.
  const StatementRef* statement_at(SourcePos p) const;

 private:
  int declare(SymbolKind kind, const ast::Ident& name, SourceRange loc, int index, int parent);
  void use(const ast::Ident& name, const std::vector<int>& locals);
  void use_name(const std::string& name, SourceRange loc, const std::vector<int>& locals);
  void expr(const ast::Expr* e, const std::vector<int>& locals);
  void block(const ast::Block& b, int graph, const std::vector<int>& locals);
  void stmt(const ast::Stmt& s, int graph, const std::vector<int>& locals);

  std::vector<Declaration> decls_;
  std::vector<Occurrence> occurrences_;
  std::vector<StatementRef> statements_;
  std::vector<std::pair<std::string, int>> globals_;  // sorted by name, first declaration
};

}  // namespace orch::lsp
