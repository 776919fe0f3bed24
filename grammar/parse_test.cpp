// The parser: every construct of Orch.g4 reaches the AST with the right source positions, the
// example pipelines (examples/) parse cleanly, and syntax errors read exactly as orchc prints them.
#include <doctest/doctest.h>

#include <filesystem>
#include <sstream>

#include "tests/test_support.h"

namespace orch {
namespace {

using test::parse_string;

// Parses `text`, requires no diagnostics and returns the AST dump.
std::string clean_ast(const std::string& text) {
  auto p = parse_string(text);
  INFO(p->diagnostics());
  CHECK_FALSE(p->diags.has_errors());
  CHECK(p->diags.all().empty());
  return p->ast();
}

// Parses `text` and returns its diagnostics as text; there must be at least one.
std::string errors_of(const std::string& text, const std::string& path = "test.orch") {
  auto p = parse_string(text, path);
  CHECK(p->diags.has_errors());
  return p->diagnostics();
}

// The lines named by an error example's first line, `// error-line: N [M]`.
std::vector<uint32_t> error_lines(const std::string& text) {
  const std::string tag = "// error-line:";
  REQUIRE(text.rfind(tag, 0) == 0);
  std::istringstream in(text.substr(tag.size(), text.find('\n') - tag.size()));
  std::vector<uint32_t> lines;
  for (uint32_t n; in >> n;) lines.push_back(n);
  REQUIRE_FALSE(lines.empty());
  return lines;
}

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

}  // namespace

TEST_SUITE("parse") {
  // ---- every construct of the grammar -------------------------------------------------------

  TEST_CASE("parse declarations") {
    CHECK(clean_ast("// comment\n"
                    "pipeline decls /* block\n"
                    "comment */ target sm_90, sm_80 ;\r\n"
                    "param n: u32 = 4\n"
                    "param lr: f32\n"
                    "buffer x: f32[n * 2] host\n"
                    "buffer s: i32\n"
                    "comm world\n") ==
          "Module decls <2:10>\n"
          "  Target sm_90 <3:19>\n"
          "  Target sm_80 <3:26>\n"
          "  Param n: u32 <4:1>\n"
          "    Int 4 <4:16>\n"
          "  Param lr: f32 <5:1>\n"
          "  Buffer x: f32[] host <6:1>\n"
          "    Binary * <6:15>\n"
          "      Name n <6:15>\n"
          "      Int 2 <6:19>\n"
          "  Buffer s: i32 <7:1>\n"
          "  Comm world <8:1>\n");
  }

  TEST_CASE("parse kernel declarations") {
    const std::string text =
        "pipeline k\n"
        "kernel a(n: u32, x: in f32[], y: out f32[], z: inout i32, w: i32[], c: cond, g: graph, "
        "gs: graph[n + 1])\n"
        "    launches g tail <= 1, gs fire_and_forget <= 4, g sibling <= 2\n"
        "    entry \"a<float, 2>\"\n"
        "    from \"dir/a.cu\"\n"
        "kernel b() source \"\"\"\n"
        "extern \"C\" __global__ void b() {}\n"
        "\"\"\"\n"
        "kernel c(s: in f32) from \"c\\\".cu\"\n";
    CHECK(clean_ast(text) ==
          "Module k <1:10>\n"
          "  Kernel a from \"dir/a.cu\" entry \"a<float, 2>\" <2:1>\n"
          "    KernelParam n: value u32 <2:10>\n"
          "    KernelParam x: in f32[] <2:18>\n"
          "    KernelParam y: out f32[] <2:31>\n"
          "    KernelParam z: inout i32 <2:45>\n"
          "    KernelParam w: value i32[] <2:59>\n"
          "    KernelParam c: cond <2:69>\n"
          "    KernelParam g: graph <2:78>\n"
          "    KernelParam gs: graph[] <2:88>\n"
          "      Binary + <2:98>\n"
          "        Name n <2:98>\n"
          "        Int 1 <2:102>\n"
          "    Launches g tail <3:14>\n"
          "      Int 1 <3:24>\n"
          "    Launches gs fire_and_forget <3:27>\n"
          "      Int 4 <3:49>\n"
          "    Launches g sibling <3:52>\n"
          "      Int 2 <3:65>\n"
          "  Kernel b source <6:1>\n"
          "  Kernel c from \"c\".cu\" <9:1>\n"
          "    KernelParam s: in f32 <9:10>\n");

    auto p = parse_string(text);
    REQUIRE(p->module->kernels.size() == 3);
    const ast::Kernel& a = p->module->kernels[0];
    CHECK(a.params[1].access == ast::Access::In);
    CHECK(a.params[1].is_array);
    CHECK(a.params[3].access == ast::Access::InOut);
    CHECK_FALSE(a.params[3].is_array);
    CHECK(a.params[4].access == ast::Access::None);
    CHECK(a.params[5].kind == ast::KernelParamKind::Cond);
    CHECK(a.params[6].kind == ast::KernelParamKind::Graph);
    CHECK(a.params[7].kind == ast::KernelParamKind::GraphFamily);
    CHECK(a.budgets[1].mode == ast::LaunchMode::FireAndForget);
    CHECK(a.budgets[2].mode == ast::LaunchMode::Sibling);
    REQUIRE(a.entry);
    CHECK(a.entry->loc.begin.line == 4);
    CHECK(a.entry->loc.begin.col == 11);
    REQUIRE(a.from_file);
    CHECK(a.from_file->name == "dir/a.cu");
    CHECK_FALSE(a.inline_source);
    CHECK(a.duplicate_clauses.empty());
    // The whole declaration, clauses included, is the kernel's range.
    CHECK(a.loc.end.line == 5);
    CHECK(a.loc.end.col == 20);

    // Inline source keeps the text between the quotes and where it starts, so NVRTC errors can
    // be mapped back to .orch lines.
    const ast::Kernel& b = p->module->kernels[1];
    REQUIRE(b.inline_source);
    CHECK(b.inline_source->name == "\nextern \"C\" __global__ void b() {}\n");
    CHECK(b.inline_first_line == 6);
    CHECK(b.inline_first_col == 22);
    CHECK(b.inline_source->loc.begin.line == 6);
    CHECK(b.inline_source->loc.begin.col == 19);
    CHECK(b.inline_source->loc.end.line == 8);
    CHECK(b.inline_source->loc.end.col == 4);

    // Escapes in strings are resolved.
    CHECK(p->module->kernels[2].from_file->name == "c\".cu");
  }

  TEST_CASE("parse repeated kernel clauses are kept for the checker") {
    auto p = parse_string(
        "pipeline k\n"
        "kernel a() from \"a.cu\" source \"\"\"x\"\"\" entry \"a\" entry \"b\" from \"b.cu\"\n");
    CHECK(p->diags.all().empty());
    REQUIRE(p->module->kernels.size() == 1);
    const ast::Kernel& k = p->module->kernels[0];
    REQUIRE(k.duplicate_clauses.size() == 3);
    CHECK(k.duplicate_clauses[0].begin.col == 24);  // source
    CHECK(k.duplicate_clauses[1].begin.col == 49);  // the second entry
    CHECK(k.duplicate_clauses[2].begin.col == 59);  // the second from
  }

  TEST_CASE("parse graph declarations") {
    CHECK(clean_ast("pipeline g\n"
                    "graph empty { }\n"
                    "graph child device { call empty }\n"
                    "graph experts[e: 4] device {\n"
                    "  fill s = e\n"
                    "}\n") ==
          "Module g <1:10>\n"
          "  Graph empty <2:1>\n"
          "  Graph child device <3:1>\n"
          "    Call empty <3:22>\n"
          "  Graph experts[e] device <4:1>\n"
          "    Int 4 <4:18>\n"
          "    Fill s <5:3>\n"
          "      Name e <5:12>\n");
    auto p = parse_string("pipeline g\ngraph main {\n  call a\n}\n");
    REQUIRE(p->module->graphs.size() == 1);
    const ast::Graph& g = p->module->graphs[0];
    CHECK_FALSE(g.device);
    CHECK_FALSE(g.family_index);
    CHECK(g.body_loc.begin.line == 2);
    CHECK(g.body_loc.begin.col == 12);
    CHECK(g.body_loc.end.line == 4);
    CHECK(g.body_loc.end.col == 2);
  }

  TEST_CASE("parse launches copies fills and assignments") {
    CHECK(clean_ast("pipeline s\n"
                    "graph main {\n"
                    "  k<<<ceil_div(n, 256), 256>>>(n, x, cond, child)\n"
                    "  k<<<1, 32, 1024>>>()\n"
                    "  copy x -> y\n"
                    "  fill x = -1.5e3\n"
                    "  s = 1\n"
                    "  s += 2\n"
                    "  s -= 3\n"
                    "  s *= 4\n"
                    "  s /= 5\n"
                    "  ;\n"
                    "}\n") ==
          "Module s <1:10>\n"
          "  Graph main <2:1>\n"
          "    KernelLaunch k <3:3>\n"
          "      grid: Call ceil_div <3:7>\n"
          "        Name n <3:16>\n"
          "        Int 256 <3:19>\n"
          "      block: Int 256 <3:25>\n"
          "      arg: Name n <3:32>\n"
          "      arg: Name x <3:35>\n"
          "      arg: Name cond <3:38>\n"
          "      arg: Name child <3:44>\n"
          "    KernelLaunch k <4:3>\n"
          "      grid: Int 1 <4:7>\n"
          "      block: Int 32 <4:10>\n"
          "      shared: Int 1024 <4:14>\n"
          "    Copy x -> y <5:3>\n"
          "    Fill x <6:3>\n"
          "      Unary - <6:12>\n"
          "        Float 1500 <6:13>\n"
          "    Assign s = <7:3>\n"
          "      Int 1 <7:7>\n"
          "    Assign s += <8:3>\n"
          "      Int 2 <8:8>\n"
          "    Assign s -= <9:3>\n"
          "      Int 3 <9:8>\n"
          "    Assign s *= <10:3>\n"
          "      Int 4 <10:8>\n"
          "    Assign s /= <11:3>\n"
          "      Int 5 <11:8>\n");
  }

  TEST_CASE("parse control flow") {
    CHECK(clean_ast("pipeline c\n"
                    "graph main {\n"
                    "  if s == 0 { call child } else if s != 1 { fill s = 0 } else { ; }\n"
                    "  if ok { }\n"
                    "  while kernel { k<<<1, 1>>>(cond) }\n"
                    "  while s < 10 { s += 1 }\n"
                    "  switch s {\n"
                    "    case 0 { fill s = 1 }\n"
                    "    case 1 { }\n"
                    "    default { fill s = 2 }\n"
                    "  }\n"
                    "  switch mode { }\n"
                    "  call child\n"
                    "  launch child tail\n"
                    "  launch fam[2] fire_and_forget\n"
                    "  launch child sibling\n"
                    "}\n") ==
          "Module c <1:10>\n"
          "  Graph main <2:1>\n"
          "    If <3:3>\n"
          "      cond: Binary == <3:6>\n"
          "        Name s <3:6>\n"
          "        Int 0 <3:11>\n"
          "      Then <3:3>\n"
          "        Call child <3:15>\n"
          "      Else <3:28>\n"
          "        If <3:33>\n"
          "          cond: Binary != <3:36>\n"
          "            Name s <3:36>\n"
          "            Int 1 <3:41>\n"
          "          Then <3:33>\n"
          "            Fill s <3:45>\n"
          "              Int 0 <3:54>\n"
          "          Else <3:58>\n"
          "    If <4:3>\n"
          "      cond: Name ok <4:6>\n"
          "      Then <4:3>\n"
          "    WhileKernel <5:3>\n"
          "      KernelLaunch k <5:18>\n"
          "        grid: Int 1 <5:22>\n"
          "        block: Int 1 <5:25>\n"
          "        arg: Name cond <5:30>\n"
          "    While <6:3>\n"
          "      cond: Binary < <6:9>\n"
          "        Name s <6:9>\n"
          "        Int 10 <6:13>\n"
          "      Assign s += <6:18>\n"
          "        Int 1 <6:23>\n"
          "    Switch <7:3>\n"
          "      subject: Name s <7:10>\n"
          "      Case <8:5>\n"
          "        value: Int 0 <8:10>\n"
          "        Fill s <8:14>\n"
          "          Int 1 <8:23>\n"
          "      Case <9:5>\n"
          "        value: Int 1 <9:10>\n"
          "      Default <10:5>\n"
          "        Fill s <10:15>\n"
          "          Int 2 <10:24>\n"
          "    Switch <12:3>\n"
          "      subject: Name mode <12:10>\n"
          "    Call child <13:3>\n"
          "    Launch child tail <14:3>\n"
          "    Launch fam fire_and_forget <15:3>\n"
          "      index: Int 2 <15:14>\n"
          "    Launch child sibling <16:3>\n");

    auto p = parse_string("pipeline c\ngraph main {\n  if a { } else { }\n  if b { }\n}\n");
    const ast::Block& body = p->module->graphs.at(0).body;
    REQUIRE(body.size() == 2);
    CHECK(std::get<ast::If>(body[0].node).has_else);
    CHECK_FALSE(std::get<ast::If>(body[1].node).has_else);
  }

  TEST_CASE("parse collectives") {
    CHECK(clean_ast("pipeline n\n"
                    "graph main {\n"
                    "  allreduce sum x on world\n"
                    "  allreduce max x -> y on world\n"
                    "  broadcast x on world\n"
                    "  broadcast x -> y from rank + 1 on world\n"
                    "  allgather x -> y on world\n"
                    "  reduce_scatter avg x -> y on world\n"
                    "}\n") ==
          "Module n <1:10>\n"
          "  Graph main <2:1>\n"
          "    Collective allreduce sum x on world <3:3>\n"
          "    Collective allreduce max x -> y on world <4:3>\n"
          "    Collective broadcast x on world <5:3>\n"
          "    Collective broadcast x -> y on world <6:3>\n"
          "      root: Binary + <6:25>\n"
          "        Name rank <6:25>\n"
          "        Int 1 <6:32>\n"
          "    Collective allgather x -> y on world <7:3>\n"
          "    Collective reduce_scatter avg x -> y on world <8:3>\n");
    auto p = parse_string("pipeline n\ngraph main {\n  broadcast x on world\n}\n");
    const auto& c = std::get<ast::Collective>(p->module->graphs.at(0).body.at(0).node);
    CHECK(c.kind == ast::CollectiveKind::Broadcast);
    CHECK_FALSE(c.dst);
    CHECK_FALSE(c.root);
    CHECK(c.comm.name == "world");
    CHECK(c.comm.loc.begin.col == 18);
  }

  TEST_CASE("parse expressions precedence and literals") {
    CHECK(clean_ast("pipeline e\n"
                    "param a: u32 = 0x1F % 3 - +2 * ~1 / 4 >> 1 & 2 ^ 3 | 4 <= 5 > 6 == false\n"
                    "param b: f32 = 1. + .5 + 2e3 + 2.5E-3 + 0XfF\n"
                    "param c: u32 = !(x || y && z) != true\n"
                    "param d: u32 = max(min(a, 1), f())\n") ==
          "Module e <1:10>\n"
          "  Param a: u32 <2:1>\n"
          "    Binary | <2:16>\n"
          "      Binary ^ <2:16>\n"
          "        Binary & <2:16>\n"
          "          Binary >> <2:16>\n"
          "            Binary - <2:16>\n"
          "              Binary % <2:16>\n"
          "                Int 31 <2:16>\n"
          "                Int 3 <2:23>\n"
          "              Binary / <2:27>\n"
          "                Binary * <2:27>\n"
          "                  Unary + <2:27>\n"
          "                    Int 2 <2:28>\n"
          "                  Unary ~ <2:32>\n"
          "                    Int 1 <2:33>\n"
          "                Int 4 <2:37>\n"
          "            Int 1 <2:42>\n"
          "          Int 2 <2:46>\n"
          "        Int 3 <2:50>\n"
          "      Binary == <2:54>\n"
          "        Binary > <2:54>\n"
          "          Binary <= <2:54>\n"
          "            Int 4 <2:54>\n"
          "            Int 5 <2:59>\n"
          "          Int 6 <2:63>\n"
          "        Bool false <2:68>\n"
          "  Param b: f32 <3:1>\n"
          "    Binary + <3:16>\n"
          "      Binary + <3:16>\n"
          "        Binary + <3:16>\n"
          "          Binary + <3:16>\n"
          "            Float 1 <3:16>\n"
          "            Float 0.5 <3:21>\n"
          "          Float 2000 <3:26>\n"
          "        Float 0.0025 <3:32>\n"
          "      Int 255 <3:41>\n"
          "  Param c: u32 <4:1>\n"
          "    Binary != <4:16>\n"
          "      Unary ! <4:16>\n"
          "        Binary || <4:17>\n"
          "          Name x <4:18>\n"
          "          Binary && <4:23>\n"
          "            Name y <4:23>\n"
          "            Name z <4:28>\n"
          "      Bool true <4:34>\n"
          "  Param d: u32 <5:1>\n"
          "    Call max <5:16>\n"
          "      Call min <5:20>\n"
          "        Name a <5:24>\n"
          "        Int 1 <5:27>\n"
          "      Call f <5:31>\n");

    // Ranges cover the whole expression, parentheses included.
    auto p = parse_string("pipeline e\nparam a: u32 = (1 + 22) * 3\n");
    const ast::Expr& mul = *p->module->params.at(0).default_value;
    CHECK(mul.loc.begin.col == 16);
    CHECK(mul.loc.end.col == 28);
    const ast::Expr& paren = *mul.operands.at(0);
    CHECK(paren.text == "+");
    CHECK(paren.loc.begin.col == 16);
    CHECK(paren.loc.end.col == 24);
    CHECK(paren.operands.at(1)->loc.begin.col == 21);
    CHECK(paren.operands.at(1)->loc.end.col == 23);
    CHECK(p->module->params.at(0).default_value->operands.at(1)->int_value == 3);

    auto calls = parse_string("pipeline e\nparam a: u32 = ceil_div(n, 4)\n");
    const ast::Expr& call = *calls->module->params.at(0).default_value;
    CHECK(call.kind == ast::ExprKind::Call);
    CHECK(call.name_loc.begin.col == 16);
    CHECK(call.name_loc.end.col == 24);
    CHECK(call.operands.size() == 2);
  }

  TEST_CASE("parse largest literals") {
    auto p = parse_string(
        "pipeline l\nparam a: u64 = 18446744073709551615\nparam b: u64 = 0xFFFFFFFFFFFFFFFF\n"
        "param c: f64 = 1e308\n");
    CHECK(p->diags.all().empty());
    CHECK(p->module->params.at(0).default_value->int_value == 18446744073709551615ull);
    CHECK(p->module->params.at(1).default_value->int_value == 18446744073709551615ull);
    CHECK(p->module->params.at(2).default_value->float_value == 1e308);
  }

  TEST_CASE("parse words that are keywords only in one place stay usable as names") {
    const char* words[] = {
        "in",     "out",   "inout",    "host", "device",          "cond",    "self", "from",
        "source", "entry", "launches", "tail", "fire_and_forget", "sibling", "on", "keep",
        "symmetric", "put", "get", "signal", "wait", "quiet", "barrier"};
    for (const char* w : words) {
      CAPTURE(w);
      std::string name(w);
      auto p = parse_string("pipeline " + name + "\nbuffer " + name + ": f32[" + name +
                            "]\nkernel " + name + "(" + name + ": in f32[]) from \"k.cu\"\n" +
                            "graph main {\n  " + name + "<<<1, 1>>>(" + name + ")\n  fill " + name +
                            " = " + name + "\n  copy " + name + " -> " + name + "\n}\n");
      INFO(p->diagnostics());
      CHECK(p->diags.all().empty());
      CHECK(p->module->pipeline.name == name);
      REQUIRE(p->module->buffers.size() == 1);
      CHECK(p->module->buffers[0].name.name == name);
      REQUIRE(p->module->kernels.size() == 1);
      CHECK(p->module->kernels[0].params.at(0).name.name == name);
      CHECK(p->module->graphs.at(0).body.size() == 3);
    }
  }

  TEST_CASE("parse the NVSHMEM statements: put (with and without a signal), get, signal, wait, quiet, barrier") {
    auto p = parse_string(R"(pipeline p
graph main {
  put a -> b on (my_pe + 1) % n_pes
  put a -> b on 1 signal s += 2
  get b -> a from 0
  signal s = t + 1 on 1 - my_pe
  wait s >= 2 * t
  wait s != 0
  quiet
  barrier
  put a -> b on 1
  signal s = 1 on 0
}
)");
    INFO(p->diagnostics());
    REQUIRE(p->diags.all().empty());
    const auto& body = p->module->graphs.at(0).body;
    REQUIRE(body.size() == 10);
    auto shmem = [&](size_t i) -> const ast::Shmem& { return std::get<ast::Shmem>(body.at(i).node); };
    const ast::Shmem& put = std::get<ast::Shmem>(body[0].node);
    CHECK(put.kind == ast::ShmemKind::Put);
    CHECK(put.src.name == "a");
    CHECK(put.dst.name == "b");
    CHECK(put.peer->text == "%");
    CHECK(put.signal.name.empty());
    CHECK_FALSE(put.value);
    const ast::Shmem& signalled = std::get<ast::Shmem>(body[1].node);
    CHECK(signalled.signal.name == "s");
    CHECK(signalled.op == "+=");
    CHECK(signalled.value->int_value == 2);
    CHECK(shmem(2).kind == ast::ShmemKind::Get);
    CHECK(shmem(2).src.name == "b");
    CHECK(shmem(2).peer->int_value == 0);
    CHECK(shmem(3).kind == ast::ShmemKind::Signal);
    CHECK(shmem(3).op == "=");
    CHECK(shmem(3).value->text == "+");
    CHECK(shmem(3).peer->text == "-");
    CHECK(shmem(4).kind == ast::ShmemKind::Wait);
    CHECK(shmem(4).op == ">=");
    CHECK(shmem(4).value->text == "*");
    CHECK(shmem(5).op == "!=");
    CHECK(shmem(6).kind == ast::ShmemKind::Quiet);
    CHECK(shmem(7).kind == ast::ShmemKind::Barrier);
    // A put and then a signal of its own: the `signal` statement names its peer, so it is not the
    // put's signal clause.
    CHECK(shmem(8).kind == ast::ShmemKind::Put);
    CHECK(shmem(8).signal.name.empty());
    CHECK(shmem(9).kind == ast::ShmemKind::Signal);
    CHECK(shmem(9).peer->int_value == 0);
  }

  TEST_CASE("parse NVSHMEM words as names: a kernel `put`, a scalar `wait` assigned, `quiet` as an operand") {
    auto p = parse_string("pipeline p\ngraph main {\n  put<<<1, 1>>>(quiet)\n  wait = barrier + 1\n  quiet\n}\n");
    INFO(p->diagnostics());
    REQUIRE(p->diags.all().empty());
    const auto& body = p->module->graphs.at(0).body;
    REQUIRE(body.size() == 3);
    CHECK(std::get<ast::KernelLaunch>(body[0].node).kernel.name == "put");
    CHECK(std::get<ast::Assign>(body[1].node).target.name == "wait");
    CHECK(std::get<ast::Shmem>(body[2].node).kind == ast::ShmemKind::Quiet);
  }

  TEST_CASE("parse buffer attributes: `host` and `keep` in either order, repeats recorded") {
    auto p = parse_string("pipeline p\nbuffer a: f32[4] keep\nbuffer b: f32[4] host keep\n"
                          "buffer c: f32[4] keep host\nbuffer d: u32 keep keep\n");
    INFO(p->diagnostics());
    CHECK(p->diags.all().empty());
    const auto& b = p->module->buffers;
    REQUIRE(b.size() == 4);
    CHECK((b[0].keep && !b[0].host));
    CHECK((b[1].keep && b[1].host && b[2].keep && b[2].host));
    CHECK(b[0].keep_loc.begin.col == 18);
    CHECK(b[2].keep_loc.begin.col == 18);
    CHECK(b[1].repeated_attributes.empty());
    REQUIRE(b[3].repeated_attributes.size() == 1);
    CHECK(b[3].repeated_attributes[0].begin.col == 20);
    CHECK(clean_ast("pipeline p\nbuffer a: f32[4] host keep") ==
          "Module p <1:10>\n  Buffer a: f32[] host keep <2:1>\n    Int 4 <2:15>\n");
  }

  TEST_CASE("parse an empty pipeline") {
    CHECK(clean_ast("pipeline nothing") == "Module nothing <1:10>\n");
    CHECK(clean_ast("\n\n  pipeline   p  \n\n") == "Module p <3:14>\n");
  }

  // ---- the example pipelines -----------------------------------------------------------------

  TEST_CASE("parse every example with no diagnostics") {
    std::vector<std::string> files = test::files_in(test::examples_dir(), ".orch");
    CHECK(files.size() >= 7);
    for (const std::string& path : files) {
      CAPTURE(path);
      auto p = test::parse_file(path);
      INFO(p->diagnostics());
      CHECK(p->diags.all().empty());
      CHECK(p->module->pipeline.name == std::filesystem::path(path).stem().string());
      bool has_main = false;
      for (const ast::Graph& g : p->module->graphs) has_main |= g.name.name == "main";
      CHECK(has_main);
      // The dump names every node with a position: no node lost its location.
      CHECK(p->ast().find("<0:0>") == std::string::npos);
    }
  }

  TEST_CASE("parse example errors that are not syntax errors parse cleanly") {
    for (const std::string& path : test::files_in(test::examples_dir() + "/errors", ".orch")) {
      if (std::filesystem::path(path).filename() == "syntax_error.orch") continue;
      CAPTURE(path);
      auto p = test::parse_file(path);
      INFO(p->diagnostics());
      CHECK(p->diags.all().empty());
      CHECK(p->ast().find("<0:0>") == std::string::npos);
    }
  }

  TEST_CASE("parse examples/errors/syntax_error.orch") {
    std::string path = test::examples_dir() + "/errors/syntax_error.orch";
    std::string text = test::read_file(path);
    auto p = parse_string(text, "errors/syntax_error.orch");
    REQUIRE_FALSE(p->diags.all().empty());
    const std::vector<Diagnostic> sorted = p->diags.sorted();
    const Diagnostic& primary = sorted.front();
    std::vector<uint32_t> lines = error_lines(text);
    CHECK(std::find(lines.begin(), lines.end(), primary.range.begin.line) != lines.end());
    CHECK(p->diagnostics() ==
          "errors/syntax_error.orch:7:12: error[E0001]: unexpected `*`; expected an expression\n"
          "  fill h = * 3\n"
          "           ^\n"
          "1 error generated.\n");
  }

  // ---- syntax errors, in full text ----------------------------------------------------------

  TEST_CASE("parse error stray character") {
    CHECK(errors_of("pipeline p\nbuffer x: f32 @\n") ==
          "test.orch:2:15: error[E0001]: unexpected character `@`\n"
          "buffer x: f32 @\n"
          "              ^\n"
          "1 error generated.\n");
    CHECK(errors_of("pipeline p\ngraph main {\n  fill x = 1 $ 2\n}\n") ==
          "test.orch:3:14: error[E0001]: unexpected character `$`\n"
          "  fill x = 1 $ 2\n"
          "             ^\n"
          "1 error generated.\n");
  }

  TEST_CASE("parse error unexpected end of file") {
    CHECK(errors_of("pipeline p\ngraph main {\n  fill x = 1\n") ==
          "test.orch:4:1: error[E0001]: unexpected end of file\n"
          "\n"
          "^\n"
          "1 error generated.\n");
    CHECK(errors_of("") ==
          "test.orch:1:1: error[E0001]: unexpected end of file; expected `pipeline`\n"
          "\n"
          "^\n"
          "1 error generated.\n");
    // A name may be any of 16 tokens (words like `in` are names too), too many to list.
    CHECK(errors_of("pipeline") ==
          "test.orch:1:9: error[E0001]: unexpected end of file\n"
          "pipeline\n"
          "        ^\n"
          "1 error generated.\n");
  }

  TEST_CASE("thousands of launch statements in a row are not one long expression") {
    std::string text = "pipeline p\nbuffer c: i32\ngraph main {\n";
    for (int i = 0; i < 3000; ++i) text += "  k<<<1, 32>>>(c)\n";
    text += "}\n";
    auto p = parse_string(text);
    CHECK(p->diagnostics() == "");
  }

  TEST_CASE("parse error unterminated source block") {
    // The lexer cannot match `"""` without its closing quotes, so it reads `""` as an empty
    // string, and the parser reports the string where the source block should be.
    CHECK(
        errors_of("pipeline p\nkernel k() source \"\"\"\nextern \"C\" __global__ void k() {}\n") ==
        "test.orch:2:19: error[E0001]: unexpected string; expected a \"\"\" source block\n"
        "kernel k() source \"\"\"\n"
        "                  ^~\n"
        "1 error generated.\n");
  }

  TEST_CASE("parse error clause without its string") {
    CHECK(errors_of("pipeline p\nkernel k() from 1\n") ==
          "test.orch:2:17: error[E0001]: unexpected number `1`; expected a string\n"
          "kernel k() from 1\n"
          "                ^\n"
          "1 error generated.\n");
  }

  TEST_CASE("parse error missing expression") {
    CHECK(errors_of("pipeline p\ngraph main {\n  k<<<1, 2>>>(x,)\n}\n") ==
          "test.orch:3:17: error[E0001]: unexpected `)`; expected an expression\n"
          "  k<<<1, 2>>>(x,)\n"
          "                ^\n"
          "1 error generated.\n");
    CHECK(errors_of("pipeline p\nbuffer x: f32[\"abc\"]\n") ==
          "test.orch:2:15: error[E0001]: unexpected string; expected an expression\n"
          "buffer x: f32[\"abc\"]\n"
          "              ^~~~~\n"
          "1 error generated.\n");
  }

  TEST_CASE("parse error one per line and recovery") {
    // Each bad line is reported once, and the declarations after it still reach the AST.
    auto p = parse_string(
        "pipeline p\n"
        "param n u32\n"
        "buffer x: f32[n]\n"
        "graph main {\n"
        "  fill x = 1 +\n"
        "}\n"
        "graph other { call main }\n");
    CHECK(p->diagnostics() ==
          "test.orch:2:9: error[E0001]: unexpected name `u32`; expected `:`\n"
          "param n u32\n"
          "        ^~~\n"
          "test.orch:6:1: error[E0001]: unexpected `}`; expected an expression\n"
          "}\n"
          "^\n"
          "2 errors generated.\n");
    REQUIRE(p->module->buffers.size() == 1);
    CHECK(p->module->buffers[0].name.name == "x");
    REQUIRE(p->module->graphs.size() == 2);
    CHECK(p->module->graphs[1].name.name == "other");
  }

  TEST_CASE("parse error literal out of range") {
    CHECK(errors_of("pipeline p\nparam n: u64 = 18446744073709551616\n") ==
          "test.orch:2:16: error[E0002]: integer literal `18446744073709551616` does not fit in "
          "64 bits\n"
          "param n: u64 = 18446744073709551616\n"
          "               ^~~~~~~~~~~~~~~~~~~~\n"
          "1 error generated.\n");
    CHECK(errors_of("pipeline p\nparam f: f64 = 1e999\n") ==
          "test.orch:2:16: error[E0002]: floating-point literal `1e999` is out of range\n"
          "param f: f64 = 1e999\n"
          "               ^~~~~\n"
          "1 error generated.\n");
  }

  TEST_CASE("parse error nesting limit") {
    // 200 levels parse; the 201st opening parenthesis is refused before ANTLR recurses into it.
    std::string ok =
        "pipeline p\nparam a: u32 = " + repeat("(", 200) + "1" + repeat(")", 200) + "\n";
    auto fine = parse_string(ok);
    CHECK(fine->diags.all().empty());

    std::string line = "param a: u32 = " + repeat("(", 201) + "1" + repeat(")", 201);
    // The line is longer than 256 bytes, so the snippet is the 256 around the caret.
    CHECK(errors_of("pipeline p\n" + line + "\n") ==
          "test.orch:2:216: error[E0003]: nesting is deeper than 200 levels\n..." +
              line.substr(215 - 128, 256) + "...\n" + repeat(" ", 3 + 128) + "^\n" +
              "1 error generated.\n");

    // Braces count too: statements nested in 201 conditionals.
    std::string deep =
        "pipeline p\ngraph main {\n" + repeat("if a {\n", 200) + repeat("}\n", 200) + "}\n";
    auto braces = parse_string(deep);
    CHECK(braces->diagnostics() ==
          "test.orch:202:6: error[E0003]: nesting is deeper than 200 levels\n"
          "if a {\n"
          "     ^\n"
          "1 error generated.\n");
  }

  TEST_CASE("parse error prefix operator chain limit") {
    // 200 prefix operators in a row parse (binary minus between them does not count); the 201st
    // is refused: each one nests the expression a level, as a parenthesis does.
    auto fine = parse_string("pipeline p\nparam a: i32 = " + repeat("- ", 200) + "1\nparam b: i32 = 1" +
                             repeat(" - 1", 300) + "\n");
    CHECK(fine->diags.all().empty());
    std::string line = "param a: i32 = " + repeat("- ", 201) + "1";
    const std::string text = errors_of("pipeline p\n" + line + "\n");
    CHECK(text.rfind("test.orch:2:416: error[E0003]: more than 200 prefix operators in a row nest as "
                     "deeply as parentheses\n",
                     0) == 0);
    CHECK(text.size() - text.rfind("1 error generated.\n") == 19);
    // `!`, `~` and `+` count alike.
    CHECK(parse_string("pipeline p\nparam c: i32 = " + repeat("! ~ + ", 67) + "1\n")->diags.all().size() == 1);
  }

  TEST_CASE("parse error token limit (E0005)") {
    // `pipeline p`, then `buffer x: f32[16]`: 2 + 7 tokens (EOF is not counted).
    const std::string text = "pipeline p\nbuffer x: f32[16]\n";
    auto parse = [&](size_t max_tokens) {
      auto p = std::make_unique<test::Parsed>();
      p->file = p->sources.add("test.orch", text);
      p->module = parse_module(p->sources, p->file, p->diags, max_tokens);
      return p;
    };
    CHECK(parse(9)->diags.all().empty());
    CHECK(parse(9)->module->buffers.size() == 1);
    // One fewer: refused at the 9th token, `]`, before anything is parsed.
    auto over = parse(8);
    CHECK(over->diagnostics() ==
          "test.orch:2:17: error[E0005]: the file has more than 8 tokens, more than orchc parses "
          "in one file\nbuffer x: f32[16]\n                ^\n1 error generated.\n");
    CHECK(over->module->buffers.empty());
    CHECK(kMaxTokens == 1'500'000);
  }

  TEST_CASE("parse error expression length limit") {
    // 500 terms are fine.
    auto fine = parse_string("pipeline p\nparam a: u32 = 1" + repeat(" + 1", 500) + "\n");
    CHECK(fine->diags.all().empty());

    // `=` ends the run, which then counts the expression's tokens. Token 2001 is the `+` of the
    // 1000th ` + 1`, at column 16 + 4 * 1000 = 4016.
    std::string line = "param a: u32 = 1" + repeat(" + 1", 1100);
    CHECK(errors_of("pipeline p\n" + line + "\n") ==
          "test.orch:2:4016: error[E0003]: expression is longer than 2000 tokens\n..." +
              line.substr(4015 - 128, 256) + "...\n" + repeat(" ", 3 + 128) + "^\n" +
              "1 error generated.\n");
  }

  TEST_CASE("parse error NUL byte is a stray character") {
    auto p = parse_string(std::string("pipeline p\nparam a: u32 = 1\n\0x\n", 30));
    REQUIRE(p->diags.all().size() == 1);
    const Diagnostic& d = p->diags.all()[0];
    CHECK(d.code == "E0001");
    CHECK(d.range.begin.line == 3);
    CHECK(d.range.begin.col == 1);
    CHECK(d.message.rfind("unexpected character `", 0) == 0);
  }

  TEST_CASE("parse error invalid UTF-8 is a diagnostic not an exception") {
    // orchc reads whatever file it is given; bytes that are not UTF-8 must not escape as an
    // exception from parse_module (ANTLR's input stream throws std::range_error on them).
    std::unique_ptr<test::Parsed> p;
    CHECK_NOTHROW(p = parse_string("pipeline p\nparam a: u32 = 1\xff\nbuffer x: f32\n"));
    REQUIRE(p);
    REQUIRE_FALSE(p->diags.all().empty());
    const std::vector<Diagnostic> sorted = p->diags.sorted();
    const Diagnostic& d = sorted.front();
    CHECK(d.code == "E0001");
    CHECK(d.range.begin.line == 2);
    CHECK(d.range.begin.col == 17);
    CHECK_NOTHROW(parse_string("pipeline p\n// caf\xe9\nparam a: u32 = 1\n"));
  }

  TEST_CASE("parse error columns count bytes after non-ASCII text") {
    // SourcePos columns are bytes (support/source.h) and carets are drawn by bytes, so a column
    // must count the two bytes of `é` as two.
    CHECK(errors_of("pipeline p\nkernel k() from \"\xc3\xa9.cu\" @\n") ==
          "test.orch:2:25: error[E0001]: unexpected character `@`\n"
          "kernel k() from \"\xc3\xa9.cu\" @\n"
          "                        ^\n"
          "1 error generated.\n");
  }

  // ---- locations ----------------------------------------------------------------------------

  TEST_CASE("parse ast locations of a small file") {
    // Tabs count as one column, like every other byte; CRLF line ends do not shift columns.
    const std::string text =
        "pipeline loc\r\n"
        "\tparam n: u32 = 8\r\n"
        "buffer x: f32[n]\r\n"
        "\r\n"
        "graph main {\r\n"
        "\tfill x = 0\r\n"
        "    while n > 0 {\r\n"
        "      n -= 1 }\r\n"
        "}\r\n";
    CHECK(clean_ast(text) ==
          "Module loc <1:10>\n"
          "  Param n: u32 <2:2>\n"
          "    Int 8 <2:17>\n"
          "  Buffer x: f32[] <3:1>\n"
          "    Name n <3:15>\n"
          "  Graph main <5:1>\n"
          "    Fill x <6:2>\n"
          "      Int 0 <6:11>\n"
          "    While <7:5>\n"
          "      cond: Binary > <7:11>\n"
          "        Name n <7:11>\n"
          "        Int 0 <7:15>\n"
          "      Assign n -= <8:7>\n"
          "        Int 1 <8:12>\n");
    auto p = parse_string(text);
    const ast::Graph& g = p->module->graphs.at(0);
    CHECK(g.loc.begin.line == 5);
    CHECK(g.loc.end.line == 9);
    CHECK(g.loc.end.col == 2);
    const ast::Stmt& loop = g.body.at(1);
    CHECK(loop.loc.begin.line == 7);
    CHECK(loop.loc.end.line == 8);
    CHECK(loop.loc.end.col == 15);
    CHECK(loop.loc.file == p->file);
    const ast::Param& n = p->module->params.at(0);
    CHECK(n.name.loc.begin.col == 8);
    CHECK(n.name.loc.end.col == 9);
    CHECK(n.type.loc.begin.col == 11);
    CHECK(n.type.loc.end.col == 14);
  }

}  // TEST_SUITE

}  // namespace orch
