// The rules of collectives (E07xx), of structure (E08xx: sizes, `call`), and the cases that need
// files on disk, one code at a time (compiler/rules_test.cpp says how).
#include "compiler/rules_test_support.h"

namespace orch {

// ---- E07xx: collectives ----------------------------------------------------------------------
TEST_SUITE("rules") {
// Each row: a pipeline that breaks the rule, exactly what `orchc --check` prints for it, and
// the closest pipeline that obeys it (in words, and as edits of the failing one), which must
// check clean.
const RuleCase kCollectives[] = {
    {"E0701: an allreduce between element types",
     R"orch(pipeline p
comm world
buffer g: f32[1024]
buffer total: f64[1024]
graph main {
  allreduce sum g -> total on world
}
)orch",
     R"txt(t.orch:6:3: error[E0701]: `allreduce` from `g` (f32) to `total` (f64): element types differ
  allreduce sum g -> total on world
  ^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt",
     "Closest valid: reduce into a buffer of the same element type.",
     {{"total: f64[1024]", "total: f32[1024]"}}},
    {"E0701: an element type NCCL does not have",
     R"orch(pipeline p
comm world
buffer g: i16[1024]
graph main {
  allreduce sum g on world
}
)orch",
     R"txt(t.orch:5:3: error[E0701]: NCCL has no i16 type for `allreduce`
  allreduce sum g on world
  ^~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt",
     "Closest valid: use a type NCCL reduces.",
     {{"g: i16[1024]", "g: i32[1024]"}}},
    {"E0702: an allreduce between buffer sizes",
     R"orch(pipeline p
comm world
buffer g: f32[1024]
buffer total: f32[512]
graph main {
  allreduce sum g -> total on world
}
)orch",
     R"txt(t.orch:6:3: error[E0702]: `allreduce` from `g` (1024 elements) to `total` (512 elements): sizes differ
  allreduce sum g -> total on world
  ^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt",
     "Closest valid: give both buffers the same count.",
     {{"total: f32[512]", "total: f32[1024]"}}},
    {"E0702: collective arguments no world size allows are refused when checked",
     R"orch(pipeline p
comm world
buffer g: f32[1024]
buffer all: f32[1000]
buffer b: f32[64]
graph main {
  allgather g -> all on world
  broadcast b from world_size on world
}
)orch",
     R"txt(t.orch:7:3: error[E0702]: this needs `allgather` destination `all` holds world_size times `g`, which holds for no world size from 1 to 65536 (`1000 == 1024 * world_size`)
  allgather g -> all on world
  ^~~~~~~~~~~~~~~~~~~~~~~~~~~
t.orch:8:20: error[E0702]: this needs `broadcast` root is a rank of the communicator, which holds for no world size from 1 to 65536 (`world_size >= 0 && world_size < world_size`)
  broadcast b from world_size on world
                   ^~~~~~~~~~
2 errors generated.
)txt",
     "Closest valid: sizes and a root some world size allows (checked again at bind time).",
     {{"all: f32[1000]", "all: f32[4096]"}, {"from world_size", "from 0"}}},
    {"E0704: an unknown reduction",
     R"orch(pipeline p
comm world
buffer g: f32[1024]
graph main {
  allreduce mean g on world
}
)orch",
     R"txt(t.orch:5:13: error[E0704]: unknown reduction `mean`; use sum, prod, min, max or avg
  allreduce mean g on world
            ^~~~
1 error generated.
)txt",
     "Closest valid: use sum, prod, min, max or avg.",
     {{"allreduce mean", "allreduce avg"}}},
    {"E0705: a collective on host memory",
     R"orch(pipeline p
comm world
buffer g: f32[1024] host
graph main {
  allreduce sum g on world
}
)orch",
     R"txt(t.orch:5:3: error[E0705]: `allreduce` on `g`, a host buffer; collectives work on device memory
  allreduce sum g on world
  ^~~~~~~~~~~~~~~~~~~~~~~~
t.orch:3:1: note: `g` is declared here
buffer g: f32[1024] host
^~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt",
     "Closest valid: use device memory.",
     {{"g: f32[1024] host", "g: f32[1024]"}}},
};

TEST_CASE("E07xx: each rule's failing pipeline and its closest fix (6 cases)") { check_rule_cases(kCollectives); }

TEST_CASE("E0702: an allgather in place") {
  const std::string program = R"orch(pipeline p
comm world
buffer g: f32[1024]
graph main {
  allgather g -> g on world
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:5:3: error[E0702]: `allgather` needs separate source and destination buffers
  allgather g -> g on world
  ^~~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: gather into a separate buffer (its size is checked against world_size at bind time).
  CHECK(diagnostics_of(fix(program, {{"buffer g: f32[1024]\n", "buffer g: f32[1024]\nbuffer all: f32[4096]\n"},
                                     {"allgather g -> g", "allgather g -> all"}})) == "");
}

TEST_CASE("E0703: an allreduce in a device graph") {
  const std::string program = R"orch(pipeline p
comm world
buffer g: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph child device {
  work<<<1, 1024>>>(g)
  allreduce sum g on world
}
graph main { launch child tail }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:7:3: error[E0703]: `allreduce` cannot run in a device graph: NCCL work is launched from the host's graph
  allreduce sum g on world
  ^~~~~~~~~~~~~~~~~~~~~~~~
t.orch:5:1: note: `child` is a device graph
graph child device {
^~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: run the work and the collective in the host-launched graph.
  CHECK(diagnostics_of(fix(program, {{"graph child device {", "graph child {"},
                                     {"  allreduce sum g on world\n}\ngraph main { launch child tail }", "}\ngraph main {\n  call child\n  allreduce sum g on world\n}"}})) == "");
}

}  // TEST_SUITE("rules")

// ---- E08xx: structure ------------------------------------------------------------------------
TEST_SUITE("rules") {
// Each row: a pipeline that breaks the rule, exactly what `orchc --check` prints for it, and
// the closest pipeline that obeys it (in words, and as edits of the failing one), which must
// check clean.
const RuleCase kStructure[] = {
    {"E0801: a graph that calls itself",
     R"orch(pipeline p
buffer x: f32[16]
graph main {
  fill x = 0
  call main
}
)orch",
     R"txt(t.orch:5:3: error[E0801]: `call main` makes a cycle: main -> main
  call main
  ^~~~~~~~~
1 error generated.
)txt",
     "Closest valid: use `while` (or a device graph's `self` relaunch) to repeat.",
     {{"  call main\n", ""}}},
};

TEST_CASE("E08xx: each rule's failing pipeline and its closest fix (1 cases)") { check_rule_cases(kStructure); }

// main -> g1 -> ... -> g`last`, the last graph filling x.
std::string call_chain(int last) {
  std::string program = "pipeline p\nbuffer x: f32[16]\ngraph main { call g1 }\n";
  for (int i = 1; i < last; ++i)
    program += "graph g" + std::to_string(i) + " { call g" + std::to_string(i + 1) + " }\n";
  return program + "graph g" + std::to_string(last) + " { fill x = 0 }\n";
}

TEST_CASE("E0804: calls nested more than 64 deep") {
  // main -> g1 -> ... -> g65 is 65 levels of `call`; g1's own chain, built first, is 64.
  const std::string program = call_chain(65);
  CHECK(diagnostics_of(program) == R"txt(t.orch:67:13: error[E0804]: `call g65` nests calls 65 deep (main -> g1 -> g2 -> ... (60 more) -> g63 -> g64 -> g65); orch inlines at most 64 levels of `call`
graph g64 { call g65 }
            ^~~~~~~~
t.orch:66:13: note: called from here
graph g63 { call g64 }
            ^~~~~~~~
t.orch:65:13: note: called from here
graph g62 { call g63 }
            ^~~~~~~~
t.orch:64:13: note: called from here
graph g61 { call g62 }
            ^~~~~~~~
t.orch:63:13: note: called from here
graph g60 { call g61 }
            ^~~~~~~~
t.orch:62:13: note: called from here
graph g59 { call g60 }
            ^~~~~~~~
t.orch:61:13: note: called from here
graph g58 { call g59 }
            ^~~~~~~~
t.orch:60:13: note: called from here
graph g57 { call g58 }
            ^~~~~~~~
t.orch:3:14: note: called from here (56 more in between are not shown)
graph main { call g1 }
             ^~~~~~~
1 error generated.
)txt");
  // Closest valid: 64 levels.
  CHECK(diagnostics_of(fix(program, {{"graph main { call g1 }", "graph main { call g2 }"}})) == "");
}

// `graphs` graphs, each nesting the next `call` (or, in the last, a fill) in `depth` `if`s.
std::string nested_calls(int graphs, int depth) {
  std::string program = "pipeline p\nbuffer x: f32[16]\nbuffer flag: u32\n";
  for (int g = 0; g < graphs; ++g) {
    program += g == 0 ? "graph main {\n" : "graph g" + std::to_string(g) + " {\n";
    for (int i = 0; i < depth; ++i) program += "if flag == " + std::to_string(i) + " {\n";
    program += g + 1 < graphs ? "call g" + std::to_string(g + 1) + "\n" : "fill x = 0\n";
    for (int i = 0; i <= depth; ++i) program += "}\n";
  }
  return program;
}

TEST_CASE("E0804: statements nested too deeply through calls") {
  // Each graph nests 100 `if`s, within the parser's 200 but past a pipeline's 64 (E0412, once
  // per chain); through two calls, main's `call g1` would reach 302 levels, which neither the
  // checker nor any pass after it recurses into.
  const auto c = check(nested_calls(3, 100));
  CHECK(c->codes() == "E0412 E0804 E0412 E0412");
  CHECK(c->text().find(R"txt(t.orch:105:1: error[E0804]: `call g1` nests statements 302 levels deep (conditionals and calls, through every graph it calls); orch allows at most 256
call g1
^~~~~~~
)txt") != std::string::npos);
  // One call fewer (201 levels) is inlined, and is only E0412 (g1 on its own and inside main
  // are one chain each).
  CHECK(check(nested_calls(2, 100))->codes() == "E0412 E0412");
  // Valid: 3 x 21 conditionals and 2 calls.
  CHECK(diagnostics_of(nested_calls(3, 21)) == "");
}

// g1 calls g2 twice, ..., g`levels - 1` calls g`levels` twice: 2^levels statements inlined.
std::string call_fan(int levels) {
  std::string program = "pipeline p\nbuffer x: f32[16]\n";
  for (int i = 1; i < levels; ++i) {
    std::string next = "g" + std::to_string(i + 1);
    program += "graph g" + std::to_string(i) + " {\n  call " + next + "\n  call " + next + "\n}\n";
  }
  return program + "graph g" + std::to_string(levels) + " { fill x = 0 }\ngraph main { call g1 }\n";
}

TEST_CASE("E0804: the nesting limit through calls is exactly 256") {
  // main calls g1 at depth 0; g1 nests its call of g2 in 127 `if`s, g2 nests its fill in
  // `depth` `if`s: the fill is at 127 + 1 + depth + 1 levels, counting the call. Conditionals
  // past 64 are E0412 already (one report per chain: g1's, g2's), so only a pipeline with that
  // error gets this deep: the limit keeps the checker's recursion bounded, not the pipeline.
  auto program = [](int depth) {
    std::string text = "pipeline p\nbuffer x: f32[16]\nbuffer flag: u32\ngraph main { call g1 }\ngraph g1 {\n";
    for (int i = 0; i < 127; ++i) text += "if flag == 1 {\n";
    text += "call g2\n" + std::string(127, '}') + "\n}\ngraph g2 {\n";
    for (int i = 0; i < depth; ++i) text += "if flag == 2 {\n";
    return text + "fill x = 0\n" + std::string(depth, '}') + "\n}\n";
  };
  CHECK(check(program(127))->codes() == "E0412 E0412");
  const auto c = check(program(128));
  CHECK(c->codes() == "E0804 E0412 E0412");
  CHECK(c->text().find(R"txt(t.orch:4:14: error[E0804]: `call g1` nests statements 257 levels deep (conditionals and calls, through every graph it calls); orch allows at most 256
graph main { call g1 }
             ^~~~~~~
)txt") == 0);
}

TEST_CASE("E0805: the inlining budget is exactly 50,000 statements") {
  // A 1,000-statement helper called 50 times is 50,000; one statement more through another
  // call is over.
  const std::string helper = "graph helper {\n" + [] {
    std::string body;
    for (int i = 0; i < 1000; ++i) body += "  fill x = 0\n";
    return body;
  }() + "}\n";
  std::string calls;
  for (int i = 0; i < 50; ++i) calls += "  call helper\n";
  const std::string program =
      "pipeline p\nbuffer x: f32[16]\ngraph tiny { fill x = 1 }\n" + helper + "graph main {\n" + calls + "}\n";
  CHECK(diagnostics_of(program) == "");
  CHECK(check(program + "graph more { call tiny }\n")->codes() == "E0805");
}

TEST_CASE("E0805: calls that inline too many statements") {
  // Each graph is checked on its own as well as where it is called, so g1, checked first,
  // meets the limit: its first `call g2` inlines 3 * 2^14 - 2 = 49150 statements, the second
  // would pass 50000.
  const std::string program = call_fan(16);
  CHECK(diagnostics_of(program) == R"txt(t.orch:5:3: error[E0805]: `call g2` would inline 49150 statements (`g2` with every graph it calls, once per `call`) on top of the 49150 already inlined; orch inlines at most 50000 statements in one pipeline (each graph is also checked on its own)
  call g2
  ^~~~~~~
1 error generated.
)txt");
  // Closest valid: three levels fewer, about 37,000 statements inlined in all.
  CHECK(diagnostics_of(call_fan(13)) == "");
}

}  // TEST_SUITE("rules")

TEST_SUITE("rules: call") {

TEST_CASE("an error in a called graph is reported once, with the calls that lead to it") {
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph main {
  call outer
  call inner
}
graph outer {
  fill x = 0
  call inner
}
graph inner {
  work<<<1, 2048>>>(x)
}
)orch";
  // Found first inside main -> outer -> inner; the same statement met again (main's own
  // `call inner`, outer and inner checked on their own) is not reported again.
  CHECK(diagnostics_of(program) == R"txt(t.orch:13:13: error[E0201]: block of `work` has 2048 threads; sm_90 allows at most 1024 per block
  work<<<1, 2048>>>(x)
            ^~~~
t.orch:10:3: note: called from here
  call inner
  ^~~~~~~~~~
t.orch:5:3: note: called from here
  call outer
  ^~~~~~~~~~
1 error generated.
)txt");
  CHECK(diagnostics_of(fix(program, {{"2048", "1024"}})) == "");
}

TEST_CASE("a rule broken only by inlined statements names the call sites") {
  // The race is between two statements of `helper`, visible once `helper` is inlined after a
  // fire-and-forget launch in main.
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
kernel spawn(g: graph) launches g fire_and_forget <= 1 source """extern "C" __global__ void spawn(cudaGraphExec_t g) {}"""
graph child device { work<<<1, 1024>>>(x) }
graph helper {
  work<<<1, 1024>>>(x)
}
graph main {
  spawn<<<1, 32>>>(child)
  call helper
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:7:3: error[E0606]: this statement writes `x`, which `child` writes; `child` is launched fire_and_forget, so nothing orders its work before this statement
  work<<<1, 1024>>>(x)
  ^~~~~~~~~~~~~~~~~~~~
t.orch:10:3: note: `child` is launched fire_and_forget here; work that needs its results belongs in a graph it tail-launches, which runs after it
  spawn<<<1, 32>>>(child)
  ^~~~~~~~~~~~~~~~~~~~~~~
t.orch:11:3: note: called from here
  call helper
  ^~~~~~~~~~~
1 error generated.
)txt");
}

TEST_CASE("an ordering error ten calls deep shows 8 of the calls") {
  // check_launches.cpp reports about inlined statements with their call sites, capped like
  // every context: the 7 innermost and the outermost, which counts the rest.
  std::string program = R"orch(pipeline p
buffer x: f32[1024]
kernel look(x: in f32[]) source """extern "C" __global__ void look(const float* x) {}"""
graph child device { look<<<1, 32>>>(x) }
graph main { call h1 }
)orch";
  for (int i = 1; i < 10; ++i)
    program += "graph h" + std::to_string(i) + " { call h" + std::to_string(i + 1) + " }\n";
  program += "graph h10 {\n  launch child tail\n  fill x = 0\n}\n";
  std::string expected = R"txt(t.orch:17:3: error[E0607]: this statement writes `x`, which `child` reads, but `child` is tail-launched: it runs after this whole graph, not before this statement
  fill x = 0
  ^~~~~~~~~~
t.orch:16:3: note: `child` is tail-launched here
  launch child tail
  ^~~~~~~~~~~~~~~~~
)txt";
  for (int i = 9; i >= 3; --i) {
    const std::string call = "graph h" + std::to_string(i) + " { call h" + std::to_string(i + 1) + " }";
    expected += "t.orch:" + std::to_string(i + 5) + ":12: note: called from here\n" + call + "\n" +
                std::string(11, ' ') + "^" + std::string(call.size() - 14, '~') + "\n";
  }
  expected += R"txt(t.orch:5:14: note: called from here (2 more in between are not shown)
graph main { call h1 }
             ^~~~~~~
1 error generated.
)txt";
  CHECK(diagnostics_of(program) == expected);
  CHECK(diagnostics_of(fix(program, {{"  fill x = 0\n", ""}})) == "");
}

TEST_CASE("121 fire-and-forget launches: one error, 8 notes") {
  // Of 121 different device graphs, so that each is launched once (E0608 counts launches of
  // one graph).
  std::string program = R"orch(pipeline p
buffer x: f32[1024]
kernel look(x: in f32[]) source """extern "C" __global__ void look(const float* x) {}"""
kernel spawn(g: graph) launches g fire_and_forget <= 1 source """extern "C" __global__ void spawn(cudaGraphExec_t g) {}"""
)orch";
  for (int i = 0; i < 121; ++i) program += "graph c" + std::to_string(i) + " device { look<<<1, 32>>>(x) }\n";
  program += "graph main {\n";
  for (int i = 0; i < 121; ++i) program += "  spawn<<<1, 32>>>(c" + std::to_string(i) + ")\n";
  program += "}\n";
  // "  spawn<<<1, 32>>>(cN)" and its underline.
  auto statement = [](int i) {
    const std::string text = "  spawn<<<1, 32>>>(c" + std::to_string(i) + ")";
    return text + "\n  ^" + std::string(text.size() - 3, '~') + "\n";
  };
  std::string expected =
      "t.orch:247:3: error[E0601]: one execution of `main` may make 121 fire-and-forget launches; "
      "sm_90 allows at most 120\n" + statement(120);
  for (int line = 127; line < 135; ++line)
    expected += "t.orch:" + std::to_string(line) + ":3: note: fire-and-forget launches are also made here" +
                (line == 134 ? ", and at 112 more places" : "") + "\n" + statement(line - 127);
  expected += "1 error generated.\n";
  CHECK(diagnostics_of(program) == expected);
  // 120 are allowed.
  CHECK(diagnostics_of(fix(program, {{"graph main {\n  spawn<<<1, 32>>>(c0)\n", "graph main {\n"}})) == "");
}

TEST_CASE("121 launches of one graph: E0608 with 8 notes") {
  // One device graph launched 121 times is also over the budget (E0601); each error lists at
  // most 8 other places.
  std::string program = R"orch(pipeline p
buffer x: f32[1024]
kernel look(x: in f32[]) source """extern "C" __global__ void look(const float* x) {}"""
kernel spawn(g: graph) launches g fire_and_forget <= 1 source """extern "C" __global__ void spawn(cudaGraphExec_t g) {}"""
graph child device { look<<<1, 32>>>(x) }
graph main {
)orch";
  for (int i = 0; i < 121; ++i) program += "  spawn<<<1, 32>>>(child)\n";
  program += "}\n";
  const std::string statement = "\n  spawn<<<1, 32>>>(child)\n  ^~~~~~~~~~~~~~~~~~~~~~~\n";
  std::string e0608 =
      "t.orch:127:3: error[E0608]: `child` may be launched 121 times in one execution of `main`; an "
      "executable graph runs one launch at a time, and CUDA refuses to launch it while a launch is "
      "pending or running (cudaErrorInvalidValue)" + statement;
  for (int line = 7; line < 15; ++line)
    e0608 += "t.orch:" + std::to_string(line) + ":3: note: `child` is also launched here" +
             (line == 14 ? ", and at 112 more places" : "") + statement;
  const auto c = check(program);
  CHECK(c->codes() == "E0601 E0608");
  CHECK(c->text().find(e0608) != std::string::npos);
  // Twice is already once too many.
  const std::string twice = program.substr(0, program.find("graph main {\n")) +
                            "graph main {\n  spawn<<<1, 32>>>(child)\n  spawn<<<1, 32>>>(child)\n}\n";
  CHECK(check(twice)->codes() == "E0608");
}

}  // TEST_SUITE("rules: call")

// ---- cases that need files on disk ----------------------------------------------------------

TEST_SUITE("rules") {

TEST_CASE("E0110: a `from` file that cannot be read") {
  test::TempDir dir("rules_from");
  const std::string path = dir.file("t.orch");
  const std::string program = R"orch(pipeline p
kernel sweep(x: inout f32[]) from "sweep.cu"
graph main { }
)orch";
  CHECK(check(program, "", path)->text() ==
        path + ":2:35: error[E0110]: cannot read kernel source `sweep.cu` (looked for " +
            dir.path() + "/sweep.cu): No such file or directory\n"
            "kernel sweep(x: inout f32[]) from \"sweep.cu\"\n"
            "                                  ^~~~~~~~~~\n"
            "1 error generated.\n");
  // Closest valid: the file exists beside the pipeline.
  test::write_file(dir.file("sweep.cu"),
                   "extern \"C\" __global__ void sweep(float* x) { x[threadIdx.x] = 0; }\n");
  CHECK(check(program, "", path)->text() == "");
}

TEST_CASE("E0111: a --target profile that does not exist") {
  test::TempDir dir("rules_target");
  const std::string missing = dir.file("missing.yaml");
  const std::string program = "pipeline p\ngraph main { }\n";
  CHECK(diagnostics_of(program, missing) ==
        "<unknown>: error[E0111]: target profile " + missing + ": no such file\n"
        "1 error generated.\n");
  // Closest valid: a profile that exists.
  TestProfile profile({});
  CHECK(diagnostics_of(program, profile.path()) == "");
}

}  // TEST_SUITE("rules")

}  // namespace orch
