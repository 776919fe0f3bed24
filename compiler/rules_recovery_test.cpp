// The checker as a whole: many errors in one file are all reported and one mistake once (no
// cascades), problems found in review kept as regressions, param-dependent checks recorded for
// bind time, and docs/diagnostics.md has an entry for every code.
#include "compiler/rules_test_support.h"

namespace orch {

// ---- many errors in one file, and no cascades -------------------------------------------------

TEST_SUITE("rules: recovery") {

TEST_CASE("independent errors in one file are all reported") {
  const std::string program = R"orch(pipeline p
param n: u32 = 1024
buffer x: f32[n]
buffer mask: u8[n]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scale<<<4, 2048>>>(n, 2.0, x)
  fill mask = 256
  copy x -> x_host
  scale<<<ceil_div(n, 256), 256>>>(n, x)
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:11:14: error[E0201]: block of `scale` has 2048 threads; sm_90 allows at most 1024 per block
  scale<<<4, 2048>>>(n, 2.0, x)
             ^~~~
t.orch:12:15: error[E0303]: cannot fill `mask` (u8) with 256: 256 does not fit u8
  fill mask = 256
              ^~~
t.orch:13:13: error[E0101]: buffer `x_host` is not declared
  copy x -> x_host
            ^~~~~~
t.orch:14:3: error[E0103]: kernel `scale` takes 3 arguments, but 2 were given
  scale<<<ceil_div(n, 256), 256>>>(n, x)
  ^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
t.orch:5:1: note: `scale` is declared here
kernel scale(n: u32, a: f32, x: inout f32[]) source """
^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
4 errors generated.
)txt");
  // All four fixed, it checks clean.
  CHECK(diagnostics_of(fix(program, {{"<<<4, 2048>>>", "<<<4, 256>>>"},
                                     {"fill mask = 256", "fill mask = 255"},
                                     {"buffer mask: u8[n]\n", "buffer mask: u8[n]\nbuffer x_host: f32[n] host\n"},
                                     {"(n, x)\n", "(n, 2.0, x)\n"}})) == "");
}

TEST_CASE("an undeclared buffer used three times gives three E0101 and nothing else") {
  const std::string program = R"orch(pipeline p
param n: u32 = 1024
buffer x: f32[n]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  fill z = 0
  scale<<<ceil_div(n, 256), 256>>>(n, 2.0, z)
  copy x -> z
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:10:8: error[E0101]: buffer `z` is not declared
  fill z = 0
       ^
t.orch:11:44: error[E0101]: buffer `z` is not declared
  scale<<<ceil_div(n, 256), 256>>>(n, 2.0, z)
                                           ^
t.orch:12:13: error[E0101]: buffer `z` is not declared
  copy x -> z
            ^
3 errors generated.
)txt");
  CHECK(diagnostics_of(fix(program, {{"buffer x: f32[n]\n", "buffer x: f32[n]\nbuffer z: f32[n]\n"}})) == "");
}

TEST_CASE("a misspelled kernel gives one error, not errors about its arguments or shape") {
  // The arguments and the block would be wrong for `scale` too; nothing is said about them
  // while the kernel is unknown.
  const std::string program = R"orch(pipeline p
param n: u32 = 1024
buffer x: f32[n]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scael<<<ceil_div(n, 256), 256>>>(x, 1.5)
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:10:3: error[E0101]: kernel `scael` is not declared
  scael<<<ceil_div(n, 256), 256>>>(x, 1.5)
  ^~~~~
1 error generated.
)txt");
}

TEST_CASE("an unknown buffer element type is reported once, not at every use") {
  // Was: the buffer's type falls back to u8, so each use reports a type mismatch (E0104,
  // E0301, E0303) that the user did not make.
  const std::string program = R"orch(pipeline p
buffer x: float[1024]
buffer y: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph main {
  work<<<1, 1024>>>(x)
  copy x -> y
  fill x = 1.5
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:2:11: error[E0106]: unknown type `float`
buffer x: float[1024]
          ^~~~~
1 error generated.
)txt");
}

TEST_CASE("an unknown kernel parameter type is reported once, not at every launch") {
  // Was: the parameter's type falls back to u8, so every launch gets an E0104.
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
kernel work(x: inout float[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph main {
  work<<<1, 1024>>>(x)
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:3:22: error[E0106]: unknown type `float`
kernel work(x: inout float[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
                     ^~~~~
1 error generated.
)txt");
}

TEST_CASE("a buffer whose size names an undeclared param does not cause size errors") {
  // Was: the size falls back to 1 element, so a copy into the buffer reports E0302.
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
buffer y: f32[nn]
graph main {
  copy x -> y
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:3:15: error[E0101]: `nn` is not declared
buffer y: f32[nn]
              ^~
1 error generated.
)txt");
}

TEST_CASE("a graph family parameter of size 0 does not cause E0504 at its launches") {
  // Was: after E0115 the parameter counts as a family of 0 graphs, so every argument is
  // reported as the wrong family size.
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
kernel route(experts: graph[0]) launches experts fire_and_forget <= 4 source """extern "C" __global__ void route(cudaGraphExec_t* experts) {}"""
graph experts[e: 4] device { work<<<1, 256>>>(x) }
graph main { route<<<1, 32>>>(experts) }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:4:29: error[E0115]: a graph family has at least one member
kernel route(experts: graph[0]) launches experts fire_and_forget <= 4 source """extern "C" __global__ void route(cudaGraphExec_t* experts) {}"""
                            ^
1 error generated.
)txt");
}

TEST_CASE("an unknown target is reported once, not with limits of an unnamed profile") {
  // Was: after E0111 the checks run against a default profile with an empty name:
  // "block of `work` has 2048 threads;  allows at most 1024 per block".
  const std::string program = R"orch(pipeline p
target sm_42
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph main { work<<<4, 2048>>>(x) }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:2:8: error[E0111]: unknown target 'sm_42'; known targets: sm_100, sm_80, sm_90
target sm_42
       ^~~~~
1 error generated.
)txt");
}

TEST_CASE("a cycle of calls is reported once") {
  // Was: the cycle is found again while building each graph on it and each graph that
  // calls into it: three E0801 for one cycle.
  const std::string program = R"orch(pipeline p
buffer x: f32[16]
graph ping { call pong }
graph pong {
  fill x = 0
  call ping
}
graph main { call ping }
)orch";
  CHECK(check(program)->codes() == "E0801");
  CHECK(diagnostics_of(fix(program, {{"  call ping\n", ""}})) == "");
}

TEST_CASE("a wrong argument for a `cond` parameter does not also report E0405") {
  // Was: the kernel in the `while kernel` body does take a `cond`; only its argument is
  // wrong, yet the loop is also reported as setting no condition.
  const std::string program = R"orch(pipeline p
buffer c: i32
kernel step(c: inout i32, k: cond) source """extern "C" __global__ void step(int* c, cudaGraphConditionalHandle k) {}"""
graph main {
  fill c = 10
  while kernel {
    step<<<1, 32>>>(c, c)
  }
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:7:24: error[E0104]: parameter `k` of `step` is a `cond`; pass `cond`, the condition of the enclosing `while kernel`
    step<<<1, 32>>>(c, c)
                       ^
t.orch:3:27: note: `k` is declared here
kernel step(c: inout i32, k: cond) source """extern "C" __global__ void step(int* c, cudaGraphConditionalHandle k) {}"""
                          ^~~~~~~
1 error generated.
)txt");
  CHECK(diagnostics_of(fix(program, {{"(c, c)", "(c, cond)"}})) == "");
}

}  // TEST_SUITE("rules: recovery")

// ---- problems found in review, fixed: kept as regression tests ---------------------------------

TEST_SUITE("rules: regressions") {

TEST_CASE("world_size may size a buffer in a pipeline with a comm") {
  // Was: buffers are checked before comms are declared, so `world_size` in a size is
  // E0114 "declares no `comm`" although the pipeline has one. An allgather destination
  // cannot be sized for the communicator.
  const std::string program = R"orch(pipeline p
param n: u32 = 1024
comm world
buffer shard: f32[n]
buffer all: f32[n * world_size]
graph main {
  allgather shard -> all on world
}
)orch";
  CHECK(diagnostics_of(program) == "");
}

TEST_CASE("rank in a buffer size is E0115, not E0114, when there is a comm") {
  // Was: as above, E0114 claims there is no comm; the real problem is that buffers are
  // sized once for every rank.
  const std::string program = R"orch(pipeline p
comm world
buffer x: f32[rank + 1]
graph main { fill x = 0 }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:3:15: error[E0115]: `rank` is not known when buffers are sized
buffer x: f32[rank + 1]
              ^~~~
1 error generated.
)txt");
}

TEST_CASE("rank in a param default is E0115, not E0114, when there is a comm") {
  const std::string program = R"orch(pipeline p
comm world
param first: u32 = rank
graph main { }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:3:20: error[E0115]: `rank` is not known at compile time
param first: u32 = rank
                   ^~~~
1 error generated.
)txt");
}

TEST_CASE("an array buffer in a scalar update is E0109, as in a fill, not E0406") {
  // Was: the value of `total = counts` is reported as "condition is not a scalar" (E0406),
  // but it is not a condition.
  const std::string program = R"orch(pipeline p
buffer total: u32
buffer counts: u32[4]
graph main {
  total = counts
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:5:11: error[E0109]: `counts` is an array buffer; expressions read params and device scalars (buffers without a size)
  total = counts
          ^~~~~~
1 error generated.
)txt");
}

TEST_CASE("a block given as dim3 is underlined whole in E0201") {
  // Was: the caret marks only the first dimension (`32`), as if x alone were too large.
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph main { work<<<1, dim3(32, 32, 2)>>>(x) }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:4:24: error[E0201]: block of `work` has 2048 threads; sm_90 allows at most 1024 per block
graph main { work<<<1, dim3(32, 32, 2)>>>(x) }
                       ^~~~~~~~~~~~~~~
1 error generated.
)txt");
}

TEST_CASE("a case value that is a param is an invalid case (E0403)") {
  // Was: reported as E0115, whose summary is about sizes, defaults and families; E0403
  // is the code for an invalid switch case.
  const std::string program = R"orch(pipeline p
param fast: u32 = 1
buffer mode: u32
buffer w: f32[1024]
graph main {
  switch mode {
    case fast { fill w = 0 }
  }
}
)orch";
  CHECK(check(program)->codes() == "E0403");
}

TEST_CASE("E0108 gives no kernel-parameter hint where there is no kernel parameter") {
  // Was: a device scalar in a launch shape or a fill value gets the hint "pass it to an
  // `in` parameter", which only applies to kernel arguments.
  const std::string program = R"orch(pipeline p
buffer blocks: u32
buffer level: f32
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph main {
  work<<<blocks, 256>>>(x)
  fill x = level
}
)orch";
  const std::string text = diagnostics_of(program);
  CHECK(check(program)->codes() == "E0108 E0108");
  CHECK(text.find("`in` parameter") == std::string::npos);
}

TEST_CASE("the E0606 note does not suggest the change that E0607 rejects") {
  // Was: the note says "a tail launch would run after this graph instead", but making the
  // launch a tail launch only turns E0606 into E0607 for the same statement: the reader has to
  // move into a graph that runs after the work (see the E0606 case above).
  const std::string program = R"orch(pipeline p
buffer y: f32[1024]
buffer y_host: f32[1024] host
kernel work(y: out f32[]) source """extern "C" __global__ void work(float* y) { y[threadIdx.x] = 1.0f; }"""
kernel spawn(g: graph) launches g fire_and_forget <= 1 source """extern "C" __global__ void spawn(cudaGraphExec_t g) {}"""
graph child device { work<<<1, 1024>>>(y) }
graph main {
  spawn<<<1, 32>>>(child)
  copy y -> y_host
}
)orch";
  REQUIRE(check(program)->codes() == "E0606");
  // Doing what the note says gives E0607 for the same statement...
  REQUIRE(check(fix(program, {{"fire_and_forget <= 1", "tail <= 1"}}))->codes() == "E0607");
  // ...so the note should not say it.
  CHECK(diagnostics_of(program).find("a tail launch would run after this graph instead") ==
        std::string::npos);
}

TEST_CASE("a param-dependent fill value is checked again at bind time") {
  // Was: `fill mask = level` is checked with level's default (16 fits u8) but records no
  // bind check, so binding level = 300 truncates the fill silently. Launch shapes, copy sizes
  // and collective sizes all record one.
  const std::string program = R"orch(pipeline p
param level: u32 = 16
buffer mask: u8[256]
graph main {
  fill mask = level
}
)orch";
  auto c = check(program);
  REQUIRE(c->text() == "");
  REQUIRE(c->result.program);
  std::string codes;
  for (const ir::BindCheck& b : c->result.program->bind_checks) codes += to_string(b.code);
  CHECK(codes == "E0303");
}

}  // TEST_SUITE("rules: regressions")

// ---- param-dependent checks ------------------------------------------------------------------

TEST_SUITE("rules: bind checks") {

TEST_CASE("param-dependent shapes and sizes pass with their defaults and are recorded for bind time") {
  const std::string program = R"orch(pipeline p
param n: u32 = 1 << 20
param threads: u32 = 256
param m: u32 = 1 << 20
comm world
buffer x: f32[n]
buffer y: f32[m]
buffer z: f32[n]
buffer all: f32[n * 4]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scale<<<ceil_div(n, threads), threads>>>(n, 2.0, x)
  copy x -> y
  copy x -> z
  allgather x -> all on world
}
)orch";
  auto c = check(program);
  REQUIRE(c->text() == "");
  REQUIRE(c->result.program);
  const ir::Program& p = *c->result.program;
  std::string checks;
  for (const ir::BindCheck& b : p.bind_checks)
    checks += to_string(b.code) + std::string(" ") + std::to_string(b.loc.begin.line) + ":" +
              std::to_string(b.loc.begin.col) + " " + ir::to_string(b.condition, p) + "\n";
  // The block (threads, and the x dimension), the grid, the copy between buffers sized by
  // different params, the allgather against world_size. An empty dimension has a check of its
  // own (E0205), so a binding that empties the grid is not reported as too many blocks. `copy x -> z` has equal sizes by
  // construction and needs no check.
  CHECK(checks ==
        "E0201 16:33 threads * 1 * 1 <= 1024\n"
        "E0202 16:33 threads <= 1024\n"
        "E0205 16:33 threads >= 1\n"
        "E0203 16:11 ceil_div(n, threads) <= 2147483647\n"
        "E0205 16:11 ceil_div(n, threads) >= 1\n"
        "E0302 17:3 n <= m\n"
        "E0702 19:3 n * 4 == n * world_size\n");
}

TEST_CASE("constant shapes record no bind check") {
  auto c = check(R"orch(pipeline p
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph main { work<<<4, 256>>>(x) }
)orch");
  REQUIRE(c->text() == "");
  REQUIRE(c->result.program);
  CHECK(c->result.program->bind_checks.empty());
}

TEST_CASE("the bind checks of an empty shape and a shape too large have their own codes and messages") {
  auto c = check(R"orch(pipeline p
param n: u32 = 1024
param smem: i32 = 0
buffer x: f32[n]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph main { work<<<ceil_div(n, 256), 256, smem>>>(x) }
)orch");
  REQUIRE(c->text() == "");
  REQUIRE(c->result.program);
  std::string checks;
  for (const ir::BindCheck& b : c->result.program->bind_checks) checks += to_string(b.code) + std::string(": ") + b.message + "\n";
  CHECK(checks ==
        "E0203: grid of `work` has too many blocks in x; sm_90 allows at most 2147483647\n"
        "E0205: grid of `work` is empty in x (no blocks)\n"
        "E0204: launch of `work` asks for too many bytes of dynamic shared memory; sm_90 allows at most 232448 "
        "per block\n"
        "E0204: launch of `work` asks for a negative number of bytes of dynamic shared memory\n");
}

}  // TEST_SUITE("rules: bind checks")

// ---- docs ------------------------------------------------------------------------------------

TEST_SUITE("rules: docs") {

TEST_CASE("docs/diagnostics.md has a `## CODE` entry for every diagnostic code") {
  const std::string docs = test::read_file(std::string(ORCH_DOCS_DIR) + "/diagnostics.md");
  std::set<std::string> headings;
  std::istringstream lines(docs);
  std::string line;
  const std::regex heading(R"(^## ([EW][0-9]{4})\b.*)");
  std::smatch m;
  while (std::getline(lines, line))
    if (std::regex_match(line, m, heading)) headings.insert(m[1]);
  const std::vector<std::string> codes = all_diagnostic_codes();
  REQUIRE(!codes.empty());
  for (const std::string& code : codes) {
    CAPTURE(code);
    CHECK(headings.count(code) == 1);
  }
  // And no entry for a code that does not exist (a typo, or a retired code kept by mistake).
  const std::set<std::string> known(codes.begin(), codes.end());
  for (const std::string& h : headings) {
    CAPTURE(h);
    CHECK(known.count(h) == 1);
  }
}

}  // TEST_SUITE("rules: docs")

}  // namespace orch
