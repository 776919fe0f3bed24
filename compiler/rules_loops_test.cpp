// Issue 8's rules: loops, switches, nesting, dynamic parallelism in kernel sources, retired E0503
// (compiler/rules_test.cpp says how the rules tests go).
#include "compiler/rules_test_support.h"

namespace orch {

// ---- issue 8: loops, switches, nesting, dynamic parallelism, retired E0503 --------------------
// Each rule with a case on both sides of its boundary (a mutation of the rule must fail one).
TEST_SUITE("rules") {

// Each row: a pipeline that breaks the rule, exactly what `orchc --check` prints for it, and
// the closest pipeline that obeys it (in words, and as edits of the failing one), which must
// check clean.
const RuleCase kIssue8[] = {
    {"E0410: a `while` loop whose body never writes the scalar its condition reads",
     R"orch(pipeline p
param max_iters: u32 = 100
buffer x: f32[1024]
buffer iters: u32
kernel step(x: inout f32[]) source """extern "C" __global__ void step(float* x) { x[threadIdx.x] *= 0.5f; }"""
graph main {
  fill iters = 0
  while iters < max_iters {
    step<<<1, 1024>>>(x)
  }
}
)orch",
     R"txt(t.orch:8:3: error[E0410]: this `while` loop never ends once it starts: nothing in its body writes `iters`, which its condition reads
  while iters < max_iters {
  ^~~~~~~~~~~~~~~~~~~~~~~~~
t.orch:8:9: note: the condition `iters < max_iters` can change only if the body writes `iters`: with a scalar update, a `fill`, a `copy`, or a kernel that takes it as `out` or `inout`
  while iters < max_iters {
        ^~~~~~~~~~~~~~~~~
1 error generated.
)txt",
     "Closest valid: count the iterations in the body.",
     {{"step<<<1, 1024>>>(x)\n", "step<<<1, 1024>>>(x)\n    iters += 1\n"}}},
    {"E0410: a `while` loop whose condition reads only params",
     R"orch(pipeline p
param n: u32 = 4
buffer x: f32[1024]
kernel step(x: inout f32[]) source """extern "C" __global__ void step(float* x) { x[threadIdx.x] *= 0.5f; }"""
graph main {
  while n > 0 {
    step<<<1, 1024>>>(x)
  }
}
)orch",
     R"txt(t.orch:6:3: error[E0410]: this `while` loop never ends once it starts: its condition reads no device scalar, so nothing the loop does can change it
  while n > 0 {
  ^~~~~~~~~~~~~
t.orch:6:9: note: `n > 0` reads only params and constants, which stay fixed while the graph runs; loop on a device scalar the body updates, or use `if`
  while n > 0 {
        ^~~~~
1 error generated.
)txt",
     "Closest valid: run the body once when n > 0.",
     {{"while n > 0", "if n > 0"}}},
    {"E0506: a kernel that launches kernels in a device graph",
     R"orch(pipeline p
buffer x: f32[1024]
kernel parent(x: inout f32[]) source """
extern "C" __global__ void child(float* x) { x[threadIdx.x] *= 2.0f; }
extern "C" __global__ void parent(float* x) {
  if (threadIdx.x == 0) child<<<1, 1024>>>(x);
}
"""
graph helper device { parent<<<1, 32>>>(x) }
graph main { launch helper tail }
)orch",
     R"txt(t.orch:9:23: error[E0506]: kernel `parent` launches kernels from the device (CUDA dynamic parallelism), which a graph launched from the device cannot hold
graph helper device { parent<<<1, 32>>>(x) }
                      ^~~~~~~~~~~~~~~~~~~~
t.orch:6:30: note: `parent` launches a kernel here
  if (threadIdx.x == 0) child<<<1, 1024>>>(x);
                             ^~~
t.orch:9:1: note: `helper` is a device graph
graph helper device { parent<<<1, 32>>>(x) }
^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt",
     "Closest valid: run it in the host-launched graph.",
     {{"graph helper device { parent<<<1, 32>>>(x) }\ngraph main { launch helper tail }", "graph main { parent<<<1, 32>>>(x) }"}}},
    {"E0507: a kernel that launches kernels in a conditional body",
     R"orch(pipeline p
buffer x: f32[1024]
buffer ready: u32
kernel parent(x: inout f32[]) source """
extern "C" __global__ void child(float* x) { x[threadIdx.x] *= 2.0f; }
extern "C" __global__ void parent(float* x) {
  if (threadIdx.x == 0) child<<<1, 1024>>>(x);
}
"""
graph main {
  if ready != 0 {
    parent<<<1, 32>>>(x)
  }
}
)orch",
     R"txt(t.orch:12:5: error[E0507]: kernel `parent` launches kernels from the device (CUDA dynamic parallelism), which a conditional body cannot hold
    parent<<<1, 32>>>(x)
    ^~~~~~~~~~~~~~~~~~~~
t.orch:7:30: note: `parent` launches a kernel here
  if (threadIdx.x == 0) child<<<1, 1024>>>(x);
                             ^~~
t.orch:11:3: note: the conditional is here
  if ready != 0 {
  ^~~~~~~~~~~~~~~
1 error generated.
)txt",
     "Closest valid: launch unconditionally and let the kernel test `ready`.",
     {{"  if ready != 0 {\n    parent<<<1, 32>>>(x)\n  }\n", "  parent<<<1, 32>>>(x)\n"}}},
    {"E0606: a statement that writes what fire-and-forget work reads (write after read)",
     R"orch(pipeline p
buffer y: f32[1024]
buffer out: f32[1024]
kernel use(y: in f32[], out: out f32[]) source """extern "C" __global__ void use(const float* y, float* out) { }"""
kernel spawn(g: graph) launches g fire_and_forget <= 1 source """extern "C" __global__ void spawn(cudaGraphExec_t g) {}"""
kernel produce(y: out f32[]) source """extern "C" __global__ void produce(float* y) { }"""
graph child device { use<<<1, 1024>>>(y, out) }
graph main {
  spawn<<<1, 32>>>(child)
  produce<<<1, 1024>>>(y)
}
)orch",
     R"txt(t.orch:10:3: error[E0606]: this statement writes `y`, which `child` reads; `child` is launched fire_and_forget, so nothing orders its work before this statement
  produce<<<1, 1024>>>(y)
  ^~~~~~~~~~~~~~~~~~~~~~~
t.orch:9:3: note: `child` is launched fire_and_forget here; work that needs its results belongs in a graph it tail-launches, which runs after it
  spawn<<<1, 32>>>(child)
  ^~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt",
     "Closest valid: write it before the launch.",
     {{"  spawn<<<1, 32>>>(child)\n  produce<<<1, 1024>>>(y)\n", "  produce<<<1, 1024>>>(y)\n  spawn<<<1, 32>>>(child)\n"}}},
};

TEST_CASE("issue 8: each rule's failing pipeline and its closest fix (5 cases)") { check_rule_cases(kIssue8); }

// What can change a loop's condition, one way each, and what cannot.
TEST_CASE("E0410: every way a body can write the condition's scalar, and reads that do not count") {
  const std::string head = R"orch(pipeline p
buffer x: f32[1024]
buffer left: i32
buffer other: i32
buffer flag: i32
buffer left_host: i32 host
buffer src: i32
kernel dec(left: inout i32) source """extern "C" __global__ void dec(int* left) { --*left; }"""
kernel set(left: out i32) source """extern "C" __global__ void set(int* left) { *left = 0; }"""
kernel peek(left: in i32, x: inout f32[]) source """extern "C" __global__ void peek(const int* left, float* x) { x[0] = *left; }"""
graph main {
  fill left = 3
)orch";
  auto loop = [&](const std::string& cond, const std::string& body) {
    return diagnostics_of(head + "  while " + cond + " {\n" + body + "\n  }\n}\n");
  };
  CHECK(loop("left > 0", "    left -= 1") == "");
  CHECK(loop("left > 0", "    fill left = 0") == "");
  CHECK(loop("left > 0", "    copy src -> left") == "");
  CHECK(loop("left > 0", "    dec<<<1, 1>>>(left)") == "");
  CHECK(loop("left > 0", "    set<<<1, 1>>>(left)") == "");
  CHECK(loop("left > 0", "    if flag != 0 { left -= 1 }") == "");            // a nested body
  CHECK(loop("left > 0 && other == 0", "    other += 1") == "");            // one of several
  CHECK(loop("left_host > 0", "    peek<<<1, 1>>>(left, x)") == "");        // the host may write it
  // Reading the scalar, writing another one or an array changes nothing.
  CHECK(loop("left > 0", "    peek<<<1, 1>>>(left, x)").find("error[E0410]") != std::string::npos);
  CHECK(loop("left > 0", "    other += left").find("error[E0410]") != std::string::npos);
  CHECK(loop("left > 0", "    copy left -> src").find("error[E0410]") != std::string::npos);
  CHECK(loop("left > 0 && other == 0", "    flag += 1").find("nothing in its body writes `left` or `other`") != std::string::npos);
  // An inner loop must itself change its condition: the outer body's update comes too late.
  CHECK(loop("left > 0", "    while other < 2 { flag += 1 }\n    left -= 1").find("t.orch:14:5: error[E0410]") != std::string::npos);
  // A loop in a graph `call`ed twice is reported once.
  const std::string twice = R"orch(pipeline p
buffer left: i32
buffer x: f32[4]
graph spin { while left > 0 { fill x = 0 } }
graph main {
  call spin
  call spin
}
)orch";
  auto c = check(twice);
  CHECK(c->codes() == "E0410");
}

TEST_CASE("E0411: a `switch` with no bodies") {
  const std::string program = R"orch(pipeline p
buffer mode: u32
buffer w: f32[1024]
graph main {
  switch mode { }
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:5:3: error[E0411]: this `switch` has no `case` and no `default`; a CUDA SWITCH node needs at least one body
  switch mode { }
  ^~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: one body, a case or a default.
  CHECK(diagnostics_of(fix(program, {{"switch mode { }", "switch mode { case 0 { fill w = 0 } }"}})) == "");
  CHECK(diagnostics_of(fix(program, {{"switch mode { }", "switch mode { default { fill w = 0 } }"}})) == "");
}

namespace {
// `depth` nested `if`s around a fill.
std::string nested_ifs(int depth) {
  std::string s = "pipeline p\nbuffer c: u32\nbuffer w: f32[16]\ngraph main {\n";
  for (int i = 0; i < depth; ++i) s += "if c != " + std::to_string(i) + " {\n";
  s += "fill w = 0\n";
  for (int i = 0; i < depth; ++i) s += "}\n";
  return s + "}\n";
}
}  // namespace

TEST_CASE("E0412: conditionals nested deeper than a pipeline holds") {
  CHECK(diagnostics_of(nested_ifs(65)) == R"txt(t.orch:69:1: error[E0412]: this conditional is nested 65 deep; a pipeline holds conditional bodies at most 64 deep
if c != 64 {
^~~~~~~~~~~~
t.orch:5:1: note: the outermost one is here
if c != 0 {
^~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: 64 levels, the most pipeline.bin holds (artifact::kMaxGraphDepth).
  CHECK(diagnostics_of(nested_ifs(64)) == "");
  // Deeper still: one report for the chain.
  CHECK(check(nested_ifs(80))->codes() == "E0412");
  // Nesting through `call` counts: 40 levels around a call of a graph with 30 more.
  std::string inner = nested_ifs(30);
  std::string through_call = "pipeline p\nbuffer c: u32\nbuffer w: f32[16]\ngraph inner {\n" +
                             inner.substr(inner.find("graph main {\n") + 13) + "graph main {\n";
  for (int i = 0; i < 40; ++i) through_call += "if c != " + std::to_string(i) + " {\n";
  through_call += "call inner\n";
  for (int i = 0; i < 40; ++i) through_call += "}\n";
  through_call += "}\n";
  CHECK(check(through_call)->codes() == "E0412");
}

TEST_CASE("E0503 is retired: a device graph copies between two host buffers") {
  // Pinned device-mapped host memory on both sides is what CUDA allows in a device graph's
  // memcpy node (doc comment of cudaGraphInstantiate).
  CHECK(diagnostics_of(R"orch(pipeline p
buffer a_host: f32[1024] host
buffer b_host: f32[1024] host
graph child device {
  copy a_host -> b_host
}
graph main { launch child tail }
)orch") == "");
}

TEST_CASE("E0506/E0507 see launches in the kernel's own body only, never in comments, strings or other kernels") {
  auto in_device_graph = [](const std::string& code) {
    return check("pipeline p\nbuffer x: f32[4]\nkernel k(x: inout f32[]) source \"\"\"\n" + code +
                 "\n\"\"\"\ngraph g device { k<<<1, 1>>>(x) }\ngraph main { launch g tail }\n")
        ->codes();
  };
  CHECK(in_device_graph(R"cu(extern "C" __global__ void k(float* x) { /* k<<<1, 1>>>(x); */ x[0] = 1; })cu") == "");
  CHECK(in_device_graph("extern \"C\" __global__ void k(float* x) {\n  // k<<<1, 1>>>(x);\n  x[0] = 1;\n}") == "");
  CHECK(in_device_graph(R"cu(extern "C" __global__ void k(float* x) { const char* s = "k<<<1,1>>>"; x[0] = s[0]; })cu") == "");
  CHECK(in_device_graph(R"cu(extern "C" __global__ void k(float* x) { x[0] = 1; }
void host_side(float* x) { k<<<1, 1>>>(x); })cu") == "");
  CHECK(in_device_graph(R"cu(__global__ void other(float* x) { }
extern "C" __global__ void k(float* x);
extern "C" __global__ void k(float* x) { x[0] = 1; }
__global__ void more(float* x) { other<<<1, 1>>>(x); })cu") == "");
  CHECK(in_device_graph(R"cu(extern "C" __global__ void k(float* x) { x[0] = 1'000; })cu") == "");
  // And certain launches: `<<<` and the device runtime's launch call, in the body.
  CHECK(in_device_graph(R"cu(extern "C" __global__ void c(float* x) { }
extern "C" __global__ void k(float* x) { c<<<1, 1>>>(x); })cu") == "E0506");
  CHECK(in_device_graph(R"cu(extern "C" __global__ void k(float* x) {
  void* b = cudaGetParameterBuffer(8, 8); cudaLaunchDevice((void*)k, b, dim3(1), dim3(1), 0, 0); })cu") == "E0506");
}

TEST_CASE("E0606: what a launched graph touches includes the graphs it launches, transitively") {
  const std::string program = R"orch(pipeline p
buffer y: f32[1024]
buffer y_host: f32[1024] host
kernel work(y: out f32[]) source """extern "C" __global__ void work(float* y) { }"""
kernel spawn(g: graph) launches g fire_and_forget <= 1 source """extern "C" __global__ void spawn(cudaGraphExec_t g) {}"""
kernel chain(g: graph) launches g tail <= 1 source """extern "C" __global__ void chain(cudaGraphExec_t g) {}"""
graph leaf device { work<<<1, 1024>>>(y) }
graph middle device { chain<<<1, 1>>>(leaf) }
graph top device { chain<<<1, 1>>>(middle) }
graph main {
  spawn<<<1, 32>>>(top)
  copy y -> y_host
}
)orch";
  CHECK(check(program)->text().find("t.orch:12:3: error[E0606]: this statement reads `y`, which `top` writes;") == 0);
  // One level less deep, and the same: the footprint is not one level only.
  CHECK(check(fix(program, {{"spawn<<<1, 32>>>(top)", "spawn<<<1, 32>>>(middle)"}}))->codes() == "E0606");
  // A graph that reaches no writer of `y` is no race.
  CHECK(diagnostics_of(fix(program, {{"graph leaf device { work<<<1, 1024>>>(y) }", "graph leaf device { work<<<1, 1024>>>(y_host) }"},
                                     {"  copy y -> y_host\n", "  fill y = 0\n"}})) == "");
}

// Limits hit exactly and by one: the boundary of each comparison.
TEST_CASE("boundaries: one kernel's budget at and past the limit, a copy into one element less") {
  const std::string budget = R"orch(pipeline p
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
kernel fan(g: graph[TABLE]) launches g MODE <= LIMIT source """extern "C" __global__ void fan(const cudaGraphExec_t* g) {}"""
graph child[i: MEMBERS] device { work<<<1, 1024>>>(x) }
graph main { fan<<<1, 256>>>(child) }
)orch";
  // A family, so that each executable graph is launched once (E0608) and only the budget counts.
  auto with = [&](const char* mode, const char* limit) {
    return check(fix(budget, {{"MODE", mode}, {"LIMIT", limit}, {"TABLE", limit}, {"MEMBERS", limit}}))->codes();
  };
  CHECK(with("fire_and_forget", "120") == "");
  CHECK(with("fire_and_forget", "121") == "E0601");
  CHECK(with("sibling", "121") == "E0601");
  CHECK(with("tail", "255") == "");
  CHECK(with("tail", "256") == "E0602");
  const std::string copy = "pipeline p\nbuffer x: f32[1024]\nbuffer y: f32[SIZE]\ngraph main { copy x -> y }\n";
  CHECK(check(fix(copy, {{"SIZE", "1024"}}))->codes() == "");
  CHECK(check(fix(copy, {{"SIZE", "1023"}}))->codes() == "E0302");
  CHECK(check(fix(copy, {{"SIZE", "1025"}}))->codes() == "");
}

TEST_CASE("target profiles may not raise CUDA's device launch limits") {
  const std::string program = "pipeline p\ngraph main { }\n";
  for (const auto& [key, at_limit, over] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"max_fire_and_forget_launches", "120", "121"},
           {"max_tail_launches", "255", "256"},
           {"max_self_tail_launches", "1", "2"}}) {
    CAPTURE(key);
    CHECK(diagnostics_of(program, TestProfile({{key, at_limit}}).path()) == "");
    const TestProfile over_profile({{key, over}});
    CHECK(diagnostics_of(program, over_profile.path()) ==
          "<unknown>: error[E0111]: target profile " + over_profile.path() + ": key '" + key +
              "' is " + over + ", above CUDA's limit of " + at_limit + " per graph execution\n"
              "1 error generated.\n");
  }
}

TEST_CASE("E0115: a graph family at and past 65536 members, the most pipeline.bin holds") {
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph experts[e: 65537] device { work<<<1, 128>>>(x) }
graph main { launch experts[0] tail }
)orch";
  CHECK(check(program)->codes() == "E0115");
  CHECK(diagnostics_of(fix(program, {{"65537", "65536"}})) == "");
}

}  // TEST_SUITE("rules")

}  // namespace orch
