#include "lsp/symbol_index.h"

#include <doctest/doctest.h>

#include "grammar/parse.h"
#include "lsp/test_util.h"

namespace orch::lsp {

namespace {

struct Parsed {
  SourceManager sources;
  DiagnosticEngine diags;
  std::unique_ptr<ast::Module> module;
  explicit Parsed(const std::string& text) {
    uint32_t f = sources.add("t.orch", text);
    module = parse_module(sources, f, diags);
  }
};

}  // namespace

TEST_CASE("every declaration and use of saxpy's names") {
  const std::string text = test::read(test::example("saxpy.orch"));
  Parsed p(text);
  SymbolIndex index(*p.module);
  const int x = index.lookup("x");
  REQUIRE(x >= 0);
  CHECK(index.declarations()[x].kind == SymbolKind::Buffer);
  // `buffer x`, `copy x_host -> x`, the launch's argument.
  CHECK(index.occurrences_of(x).size() == 3);
  const int n = index.lookup("n");
  // `param n`, two buffer sizes... four of them, `ceil_div(n, 256)` and the argument.
  CHECK(index.occurrences_of(n).size() == 7);
  // The kernel's own parameter `n` is another name than the param.
  const Occurrence* at = index.occurrence_at(test::pos_of(text, "kernel saxpy(n", 0, 13));
  REQUIRE(at);
  CHECK(index.declarations()[at->decl].kind == SymbolKind::KernelParam);
  CHECK(index.lookup("nothing") == -1);
}

TEST_CASE("scopes: a family's index, a kernel's budgets and cost") {
  const std::string text =
      "pipeline p\nparam n: u32 = 4\nbuffer b: f32[n]\n"
      "kernel k(n: u32, g: graph[2], b: inout f32[]) launches g fire_and_forget <= 2 cost bytes 4 * n from \"k.cu\"\n"
      "graph fam[e: 2] device { k<<<e + 1, 32>>>(n, fam, b) }\n"
      "graph main { launch fam[1] fire_and_forget }\n";
  Parsed p(text);
  SymbolIndex index(*p.module);
  // `g` in the budget is the kernel's parameter.
  const Occurrence* g = index.occurrence_at(test::pos_of(text, "launches g", 0, 9));
  REQUIRE(g);
  CHECK(index.declarations()[g->decl].kind == SymbolKind::KernelParam);
  // `n` in the cost is the kernel's `n`, not the param.
  const Occurrence* cost_n = index.occurrence_at(test::pos_of(text, "4 * n", 0, 4));
  REQUIRE(cost_n);
  CHECK(index.declarations()[cost_n->decl].kind == SymbolKind::KernelParam);
  // `e` in the launch shape is the family's index.
  const Occurrence* e = index.occurrence_at(test::pos_of(text, "e + 1"));
  REQUIRE(e);
  CHECK(index.declarations()[e->decl].kind == SymbolKind::FamilyIndex);
  // The graph: declared, an argument, launched.
  CHECK(index.occurrences_of(index.lookup("fam")).size() == 3);
  // A cursor right after a name is on it.
  const Occurrence* after = index.occurrence_at(test::pos_of(text, "fam, b", 0, 3));
  REQUIRE(after);
  CHECK(index.declarations()[after->decl].name == "fam");
  // The innermost statement.
  const StatementRef* s = index.statement_at(test::pos_of(text, "launch fam"));
  REQUIRE(s);
  CHECK(std::holds_alternative<ast::LaunchGraph>(s->stmt->node));
}

TEST_CASE("a partial tree gives a partial index") {
  const std::string text = "pipeline p\nbuffer a: f32[4]\ngraph main {\n  fill a = 1\n  copy a ->\n}\n";
  Parsed p(text);
  CHECK(p.diags.has_errors());
  SymbolIndex index(*p.module);
  CHECK(index.lookup("a") >= 0);
}

}  // namespace orch::lsp
