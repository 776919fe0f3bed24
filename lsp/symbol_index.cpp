#include "lsp/symbol_index.h"

#include <algorithm>
#include <tuple>

#include "support/overloaded.h"

namespace orch::lsp {

namespace {

bool before(SourcePos a, SourcePos b) { return std::tie(a.line, a.col) < std::tie(b.line, b.col); }

}  // namespace

const char* to_string(SymbolKind k) {
  switch (k) {
    case SymbolKind::Pipeline: return "pipeline";
    case SymbolKind::Param: return "param";
    case SymbolKind::Buffer: return "buffer";
    case SymbolKind::Comm: return "comm";
    case SymbolKind::Kernel: return "kernel";
    case SymbolKind::KernelParam: return "kernel parameter";
    case SymbolKind::Graph: return "graph";
    case SymbolKind::FamilyIndex: return "family index";
  }
  return "name";
}

bool contains(const SourceRange& r, SourcePos p) {
  if (!r.valid()) return false;
  return !before(p, r.begin) && !before(r.end, p);
}

SymbolIndex::SymbolIndex(const ast::Module& m) {
  if (!m.pipeline.name.empty()) declare(SymbolKind::Pipeline, m.pipeline, m.pipeline.loc, 0, -1);
  for (size_t i = 0; i < m.params.size(); ++i)
    declare(SymbolKind::Param, m.params[i].name, m.params[i].loc, static_cast<int>(i), -1);
  for (size_t i = 0; i < m.buffers.size(); ++i)
    declare(SymbolKind::Buffer, m.buffers[i].name, m.buffers[i].loc, static_cast<int>(i), -1);
  for (size_t i = 0; i < m.comms.size(); ++i)
    declare(SymbolKind::Comm, m.comms[i].name, m.comms[i].loc, static_cast<int>(i), -1);
  for (size_t i = 0; i < m.kernels.size(); ++i)
    declare(SymbolKind::Kernel, m.kernels[i].name, m.kernels[i].loc, static_cast<int>(i), -1);
  for (size_t i = 0; i < m.graphs.size(); ++i)
    declare(SymbolKind::Graph, m.graphs[i].name, m.graphs[i].loc, static_cast<int>(i), -1);
  std::stable_sort(globals_.begin(), globals_.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  // Later declarations of a name are duplicates (E0102): uses resolve to the first.
  globals_.erase(std::unique(globals_.begin(), globals_.end(),
                             [](const auto& a, const auto& b) { return a.first == b.first; }),
                 globals_.end());

  const std::vector<int> none;
  for (const ast::Param& p : m.params) expr(p.default_value.get(), none);
  for (const ast::Buffer& b : m.buffers) expr(b.size.get(), none);
  for (size_t k = 0; k < m.kernels.size(); ++k) {
    const ast::Kernel& kernel = m.kernels[k];
    std::vector<int> locals;
    for (size_t i = 0; i < kernel.params.size(); ++i) {
      const ast::KernelParam& p = kernel.params[i];
      locals.push_back(declare(SymbolKind::KernelParam, p.name, p.loc, static_cast<int>(i), static_cast<int>(k)));
      expr(p.family_size.get(), none);
    }
    for (const ast::LaunchBudget& b : kernel.budgets) {
      use(b.param, locals);
      expr(b.limit.get(), none);
    }
    for (const ast::CostItem& c : kernel.costs) expr(c.value.get(), locals);
  }
  for (size_t g = 0; g < m.graphs.size(); ++g) {
    const ast::Graph& graph = m.graphs[g];
    std::vector<int> locals;
    if (graph.family_index)
      locals.push_back(declare(SymbolKind::FamilyIndex, *graph.family_index, graph.family_index->loc, 0,
                               static_cast<int>(g)));
    expr(graph.family_size.get(), none);
    block(graph.body, static_cast<int>(g), locals);
  }
  std::stable_sort(occurrences_.begin(), occurrences_.end(), [](const Occurrence& a, const Occurrence& b) {
    return before(a.range.begin, b.range.begin);
  });
}

int SymbolIndex::declare(SymbolKind kind, const ast::Ident& name, SourceRange loc, int index, int parent) {
  Declaration d{kind, name.name, name.loc, loc, index, parent};
  decls_.push_back(d);
  const int id = static_cast<int>(decls_.size() - 1);
  if (name.loc.valid()) occurrences_.push_back({name.loc, id, true});
  if (kind != SymbolKind::KernelParam && kind != SymbolKind::FamilyIndex && kind != SymbolKind::Pipeline)
    globals_.emplace_back(name.name, id);
  return id;
}

int SymbolIndex::lookup(const std::string& name) const {
  auto it = std::lower_bound(globals_.begin(), globals_.end(), name,
                             [](const auto& a, const std::string& n) { return a.first < n; });
  return it != globals_.end() && it->first == name ? it->second : -1;
}

void SymbolIndex::use_name(const std::string& name, SourceRange loc, const std::vector<int>& locals) {
  if (!loc.valid() || name.empty()) return;
  for (int l : locals)
    if (decls_[l].name == name) {
      occurrences_.push_back({loc, l, false});
      return;
    }
  int g = lookup(name);
  if (g >= 0) occurrences_.push_back({loc, g, false});
}

void SymbolIndex::use(const ast::Ident& name, const std::vector<int>& locals) { use_name(name.name, name.loc, locals); }

void SymbolIndex::expr(const ast::Expr* e, const std::vector<int>& locals) {
  if (!e) return;
  // Deep expressions are bounded by the parser (E0003); walk with an explicit stack anyway.
  std::vector<const ast::Expr*> todo{e};
  while (!todo.empty()) {
    const ast::Expr* x = todo.back();
    todo.pop_back();
    if (!x) continue;
    if (x->kind == ast::ExprKind::Name) use_name(x->text, x->loc, locals);
    for (const ast::ExprPtr& o : x->operands) todo.push_back(o.get());
  }
}

void SymbolIndex::block(const ast::Block& b, int graph, const std::vector<int>& locals) {
  for (const ast::Stmt& s : b) stmt(s, graph, locals);
}

void SymbolIndex::stmt(const ast::Stmt& s, int graph, const std::vector<int>& locals) {
  statements_.push_back({&s, graph});
  std::visit(overloaded{
                 [&](const ast::KernelLaunch& n) {
                   use(n.kernel, locals);
                   expr(n.grid.get(), locals);
                   expr(n.block.get(), locals);
                   expr(n.shared_bytes.get(), locals);
                   for (const ast::ExprPtr& a : n.args) expr(a.get(), locals);
                 },
                 [&](const ast::Copy& n) {
                   use(n.src, locals);
                   use(n.dst, locals);
                 },
                 [&](const ast::Fill& n) {
                   use(n.dst, locals);
                   expr(n.value.get(), locals);
                 },
                 [&](const ast::Assign& n) {
                   use(n.target, locals);
                   expr(n.value.get(), locals);
                 },
                 [&](const ast::If& n) {
                   expr(n.cond.get(), locals);
                   block(n.then_body, graph, locals);
                   block(n.else_body, graph, locals);
                 },
                 [&](const ast::While& n) {
                   expr(n.cond.get(), locals);
                   block(n.body, graph, locals);
                 },
                 [&](const ast::Switch& n) {
                   expr(n.subject.get(), locals);
                   for (const ast::SwitchCase& c : n.cases) {
                     expr(c.value.get(), locals);
                     block(c.body, graph, locals);
                   }
                   if (n.default_body) block(*n.default_body, graph, locals);
                 },
                 [&](const ast::Call& n) { use(n.graph, locals); },
                 [&](const ast::LaunchGraph& n) {
                   use(n.graph, locals);
                   expr(n.index.get(), locals);
                 },
                 [&](const ast::Collective& n) {
                   use(n.src, locals);
                   if (n.dst) use(*n.dst, locals);
                   expr(n.root.get(), locals);
                   use(n.comm, locals);
                 },
                 [&](const ast::Shmem& n) {
                   if (!n.src.name.empty()) use(n.src, locals);
                   if (!n.dst.name.empty()) use(n.dst, locals);
                   if (!n.signal.name.empty()) use(n.signal, locals);
                   expr(n.peer.get(), locals);
                   expr(n.value.get(), locals);
                 },
             },
             s.node);
}

const Occurrence* SymbolIndex::occurrence_at(SourcePos p) const {
  const Occurrence* touching = nullptr;
  for (const Occurrence& o : occurrences_) {
    if (before(p, o.range.begin)) break;  // sorted by start
    if (!contains(o.range, p)) continue;
    if (before(p, o.range.end)) return &o;
    touching = &o;
  }
  return touching;
}

std::vector<const Occurrence*> SymbolIndex::occurrences_of(int decl) const {
  std::vector<const Occurrence*> out;
  for (const Occurrence& o : occurrences_)
    if (o.decl == decl) out.push_back(&o);
  return out;
}

const StatementRef* SymbolIndex::statement_at(SourcePos p) const {
  const StatementRef* best = nullptr;
  for (const StatementRef& s : statements_) {
    if (!contains(s.stmt->loc, p)) continue;
    // Nested statements come after the one holding them: the last match is the innermost.
    best = &s;
  }
  return best;
}

}  // namespace orch::lsp
