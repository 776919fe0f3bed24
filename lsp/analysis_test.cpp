#include "lsp/analysis.h"

#include <doctest/doctest.h>

#include "lsp/test_util.h"

namespace orch::lsp {

namespace {

// Three independent mistakes the checker reports in one run.
const char* kThreeErrors =
    "pipeline three\n"
    "param n: u32 = 1024\n"
    "buffer a: f32[n]\n"
    "buffer b: i32[n]\n"
    "kernel k(n: u32, a: inout f32[]) source \"\"\"\n"
    "extern \"C\" __global__ void k(unsigned n, float* a) {}\n"
    "\"\"\"\n"
    "graph main {\n"
    "  k<<<1, 2048>>>(n, a)\n"
    "  copy a -> b\n"
    "  fill c = 0\n"
    "}\n";

Analysis analyse(const std::string& name) {
  return Analysis(test::example(name), test::read(test::example(name)), {});
}

}  // namespace

TEST_CASE("the checker's diagnostics, with orchc's codes and places") {
  Analysis a("/tmp/three.orch", kThreeErrors, {});
  REQUIRE(a.diagnostics().size() == 3);
  CHECK(a.diagnostics()[0].code == "E0201");
  CHECK(a.diagnostics()[0].range.begin.line == 9);
  CHECK(a.diagnostics()[1].code == "E0301");
  CHECK(a.diagnostics()[1].range.begin.line == 10);
  CHECK(a.diagnostics()[2].code == "E0101");
  CHECK(a.diagnostics()[2].range.begin.line == 11);
  CHECK(a.diagnostics()[2].range.begin.col == 8);
  CHECK(a.program());  // rule violations still give a program
}

TEST_CASE("hover on saxpy: a param, a buffer, a kernel and a statement's DAG") {
  Analysis a = analyse("saxpy.orch");
  const std::string& text = a.sources().file(a.file()).text;
  CHECK(a.diagnostics().empty());
  auto h = hover(a, test::pos_of(text, "param n", 0, 6));
  REQUIRE(h);
  CHECK(h->markdown.find("param n: u32 = 1048576") != std::string::npos);
  CHECK(h->markdown.find("Default: `1048576`") != std::string::npos);
  h = hover(a, test::pos_of(text, "copy x_host -> x", 0, 16));  // the `x` at the end
  REQUIRE(h);
  CHECK(h->markdown.find("buffer x: f32[n]") != std::string::npos);
  CHECK(h->markdown.find("in device memory") != std::string::npos);
  CHECK(h->markdown.find("1048576 elements, 4 MiB") != std::string::npos);
  h = hover(a, test::pos_of(text, "x_host -> x"));
  REQUIRE(h);
  CHECK(h->markdown.find("pinned, device-mapped host memory") != std::string::npos);
  // The kernel at its launch: its signature, and the launch's accesses and predecessors.
  h = hover(a, test::pos_of(text, "saxpy<<<"));
  REQUIRE(h);
  CHECK(h->markdown.find("kernel saxpy(n: u32, a: f32, x: in f32[], y: inout f32[])") != std::string::npos);
  CHECK(h->markdown.find("reads `x`, `y`; writes `y`") != std::string::npos);
  CHECK(h->markdown.find("- line 21 `copy x_host -> x`: reads `x` it writes") != std::string::npos);
  CHECK(h->markdown.find("- line 22 `copy y_host -> y`: reads `y` it writes") != std::string::npos);
  // A statement keyword: the statement alone.
  h = hover(a, test::pos_of(text, "copy y -> y_host"));
  REQUIRE(h);
  CHECK(h->markdown.find("**copy** in graph `main`") != std::string::npos);
  CHECK(h->markdown.find("- line 23 `saxpy<<<ceil_div(n, 256), 256>>>(n, a, x, y)`: reads `y` it writes") !=
        std::string::npos);
  CHECK_FALSE(hover(a, {1, 1}));  // a comment
}

TEST_CASE("hover on jacobi: a device scalar, the loop and the kernel from a file") {
  Analysis a = analyse("jacobi.orch");
  const std::string& text = a.sources().file(a.file()).text;
  auto h = hover(a, test::pos_of(text, "buffer residual", 0, 7));
  REQUIRE(h);
  CHECK(h->markdown.find("Device scalar: one `f32` in device memory") != std::string::npos);
  h = hover(a, test::pos_of(text, "kernel sweep", 0, 7));
  REQUIRE(h);
  CHECK(h->markdown.find("from \"jacobi.cu\"") != std::string::npos);
  CHECK(h->markdown.find("Used 2 times") != std::string::npos);
  h = hover(a, test::pos_of(text, "while iters"));
  REQUIRE(h);
  CHECK(h->markdown.find("**`while` loop**") != std::string::npos);
  CHECK(h->markdown.find("writes `iters`, `residual`, `u`, `v`") != std::string::npos);
  CHECK(h->markdown.find("- line 24 `fill residual = 0`: reads `residual` it writes") != std::string::npos);
}

TEST_CASE("hover on moe: a graph family and its index, a graph parameter") {
  Analysis a = analyse("moe.orch");
  const std::string& text = a.sources().file(a.file()).text;
  auto h = hover(a, test::pos_of(text, "graph experts", 0, 6));
  REQUIRE(h);
  CHECK(h->markdown.find("graph experts[e: 8] device") != std::string::npos);
  h = hover(a, SourcePos{test::pos_of(text, "(e, hidden").line, test::pos_of(text, "(e, hidden").col + 1});
  REQUIRE(h);
  CHECK(h->markdown.find("Index of the graph family `experts`: 0 to 8 - 1") != std::string::npos);
  h = hover(a, test::pos_of(text, "experts: graph[8]"));
  REQUIRE(h);
  CHECK(h->markdown.find("a family of device graphs the kernel may launch") != std::string::npos);
}

TEST_CASE("definition and references") {
  Analysis a = analyse("jacobi.orch");
  const std::string& text = a.sources().file(a.file()).text;
  // `residual` in the loop condition -> `buffer residual`.
  std::vector<SourceRange> d = definition(a, test::pos_of(text, "residual > tol"));
  REQUIRE(d.size() == 1);
  CHECK(d[0].begin.line == test::pos_of(text, "buffer residual").line);
  CHECK(d[0].begin.col == 8);
  // buffer, two fills, the condition, two launch arguments.
  CHECK(references(a, test::pos_of(text, "residual > tol"), true).size() == 6);
  CHECK(references(a, test::pos_of(text, "residual > tol"), false).size() == 5);
  // `from "jacobi.cu"`: the kernel's __global__ function in that file.
  d = definition(a, test::pos_of(text, "\"jacobi.cu\"", 0, 2));
  REQUIRE(d.size() == 1);
  CHECK(a.sources().path(d[0].file).find("jacobi.cu") != std::string::npos);
  CHECK(std::string(a.sources().line_text(d[0].file, d[0].begin.line)).find("sweep") != std::string::npos);
  // Graphs and comms too.
  Analysis dp = analyse("dp_step.orch");
  const std::string& dp_text = dp.sources().file(dp.file()).text;
  d = definition(dp, test::pos_of(dp_text, "on world", 0, 3));
  REQUIRE(d.size() == 1);
  CHECK(d[0].begin.line == test::pos_of(dp_text, "comm world").line);
  Analysis moe = analyse("moe.orch");
  const std::string& moe_text = moe.sources().file(moe.file()).text;
  // The graph `finish`: declared, passed to `route` (the kernel's parameter `finish` is another).
  CHECK(references(moe, test::pos_of(moe_text, "finish)"), true).size() == 2);
}

TEST_CASE("the outline") {
  Analysis a = analyse("jacobi.orch");
  std::vector<OutlineSymbol> symbols = outline(a);
  // pipeline, 3 params, 7 buffers, 1 kernel, 1 graph
  REQUIRE(symbols.size() == 13);
  CHECK(symbols[0].name == "jacobi");
  CHECK(symbols[1].name == "n");
  CHECK(symbols[1].detail == "u32 = 1 << 20");
  const OutlineSymbol& kernel = symbols[11];
  CHECK(kernel.name == "sweep");
  CHECK(kernel.kind == LspSymbolKind::Function);
  REQUIRE(kernel.children.size() == 5);
  CHECK(kernel.children[4].detail == "inout f32");
  const OutlineSymbol& main = symbols[12];
  CHECK(main.name == "main");
  REQUIRE(main.children.size() == 6);
  CHECK(main.children[4].name == "while iters == 0 || (residual > tol && iters < max_iters)");
  CHECK(main.children[4].children.size() == 4);
}

TEST_CASE("a file with syntax errors still answers from what parsed") {
  Analysis a("/tmp/broken.orch", "pipeline p\nparam n: u32 = 4\nbuffer x: f32[n]\ngraph main {\n  copy x ->\n}\n", {});
  REQUIRE(a.has_errors());
  CHECK(a.diagnostics()[0].code == "E0001");
  CHECK_FALSE(a.program());
  auto h = hover(a, {3, 8});
  REQUIRE(h);
  CHECK(h->markdown.find("buffer x: f32[n]") != std::string::npos);
  CHECK(references(a, {2, 7}, true).size() == 2);
}

}  // namespace orch::lsp
