// The rules of launch shapes (E02xx), copies and fills (E03xx), conditionals (E04xx) and graphs
// launched from the device (E05xx), one code at a time (compiler/rules_test.cpp says how).
#include "compiler/rules_test_support.h"

namespace orch {

// ---- E02xx: launch shapes --------------------------------------------------------------------
TEST_SUITE("rules") {
// Each row: a pipeline that breaks the rule, exactly what `orchc --check` prints for it, and
// the closest pipeline that obeys it (in words, and as edits of the failing one), which must
// check clean.
const RuleCase kLaunchShapes[] = {
    {"E0201: a block of 2048 threads",
     R"orch(pipeline p
param n: u32 = 1024
buffer x: f32[n]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scale<<<4, 2048>>>(n, 2.0, x)
}
)orch",
     R"txt(t.orch:10:14: error[E0201]: block of `scale` has 2048 threads; sm_90 allows at most 1024 per block
  scale<<<4, 2048>>>(n, 2.0, x)
             ^~~~
1 error generated.
)txt",
     "Closest valid: use at most 1024 threads per block.",
     {{"<<<4, 2048>>>", "<<<8, 1024>>>"}}},
    {"E0201: a block of 2048 threads under the param's default",
     R"orch(pipeline p
param n: u32 = 1 << 20
param threads: u32 = 2048
buffer x: f32[n]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scale<<<ceil_div(n, threads), threads>>>(n, 2.0, x)
}
)orch",
     R"txt(t.orch:11:33: error[E0201]: block of `scale` has 2048 threads; sm_90 allows at most 1024 per block (with the default values threads = 2048)
  scale<<<ceil_div(n, threads), threads>>>(n, 2.0, x)
                                ^~~~~~~
1 error generated.
)txt",
     "Closest valid: give the param a default that fits; the bound is checked again when the application binds it.",
     {{"threads: u32 = 2048", "threads: u32 = 256"}}},
    {"E0202: a block dimension over its own limit",
     R"orch(pipeline p
param n: u32 = 1024
buffer x: f32[n]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scale<<<1, dim3(1, 1, 65)>>>(n, 2.0, x)
}
)orch",
     R"txt(t.orch:10:25: error[E0202]: block of `scale` has 65 threads in z; sm_90 allows at most 64
  scale<<<1, dim3(1, 1, 65)>>>(n, 2.0, x)
                        ^~
1 error generated.
)txt",
     "Closest valid: keep z at most 64.",
     {{"dim3(1, 1, 65)", "dim3(1, 1, 64)"}}},
    {"E0203: a grid dimension over its limit",
     R"orch(pipeline p
param n: u32 = 1024
buffer x: f32[n]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scale<<<dim3(1, 65536), 32>>>(n, 2.0, x)
}
)orch",
     R"txt(t.orch:10:19: error[E0203]: grid of `scale` has 65536 blocks in y; sm_90 allows at most 65535
  scale<<<dim3(1, 65536), 32>>>(n, 2.0, x)
                  ^~~~~
1 error generated.
)txt",
     "Closest valid: put the large dimension in x.",
     {{"dim3(1, 65536)", "dim3(65536, 1)"}}},
    {"E0203: a grid that overflows its type with the defaults, at the operator",
     R"orch(pipeline p
param n: u32 = 65536
param d: u32 = 0
buffer x: f32[1024]
kernel scale(n: u32, a: f32, x: inout f32[]) source """extern "C" __global__ void scale(unsigned n, float a, float* x) {}"""
graph main {
  scale<<<n * n, 256>>>(n, 2.0, x)
  scale<<<1024 / d, 256>>>(d, 2.0, x)
}
)orch",
     R"txt(t.orch:7:13: error[E0203]: overflow: 65536 * 65536 does not fit u32 (with the default values n = 65536)
  scale<<<n * n, 256>>>(n, 2.0, x)
            ^
t.orch:8:16: error[E0203]: division by zero: 1024 / 0 (with the default values d = 0)
  scale<<<1024 / d, 256>>>(d, 2.0, x)
               ^
2 errors generated.
)txt",
     "Closest valid: defaults that give a grid.",
     {{"n: u32 = 65536", "n: u32 = 1024"}, {"d: u32 = 0", "d: u32 = 4"}}},
    {"E0204: too much dynamic shared memory",
     R"orch(pipeline p
param n: u32 = 1024
buffer x: f32[n]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scale<<<4, 256, 262144>>>(n, 2.0, x)
}
)orch",
     R"txt(t.orch:10:19: error[E0204]: launch of `scale` asks for 262144 bytes of dynamic shared memory; sm_90 allows at most 232448 per block
  scale<<<4, 256, 262144>>>(n, 2.0, x)
                  ^~~~~~
1 error generated.
)txt",
     "Closest valid: ask for at most the target's opt-in limit.",
     {{"262144", "232448"}}},
    {"E0205: an empty grid",
     R"orch(pipeline p
param n: u32 = 1024
buffer x: f32[n]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scale<<<n / 2048, 256>>>(n, 2.0, x)
}
)orch",
     R"txt(t.orch:10:11: error[E0205]: grid of `scale` is empty (0) (with the default values n = 1024)
  scale<<<n / 2048, 256>>>(n, 2.0, x)
          ^~~~~~~~
1 error generated.
)txt",
     "Closest valid: round the grid up.",
     {{"n / 2048", "ceil_div(n, 2048)"}}},
    {"E0205: an empty block dimension",
     R"orch(pipeline p
param n: u32 = 1024
buffer x: f32[n]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scale<<<4, dim3(0, 256)>>>(n, 2.0, x)
}
)orch",
     R"txt(t.orch:10:19: error[E0205]: block of `scale` is empty (0)
  scale<<<4, dim3(0, 256)>>>(n, 2.0, x)
                  ^
1 error generated.
)txt",
     "Closest valid: give every dimension at least 1.",
     {{"dim3(0, 256)", "dim3(1, 256)"}}},
};

TEST_CASE("E02xx: each rule's failing pipeline and its closest fix (8 cases)") { check_rule_cases(kLaunchShapes); }

}  // TEST_SUITE("rules")

// ---- E03xx: copies and fills -----------------------------------------------------------------
TEST_SUITE("rules") {
// Each row: a pipeline that breaks the rule, exactly what `orchc --check` prints for it, and
// the closest pipeline that obeys it (in words, and as edits of the failing one), which must
// check clean.
const RuleCase kCopiesAndFills[] = {
    {"E0301: a copy between element types",
     R"orch(pipeline p
param n: u32 = 1024
buffer x: f32[n]
buffer x_host: f16[n] host
graph main {
  copy x -> x_host
}
)orch",
     R"txt(t.orch:6:3: error[E0301]: copy from `x` (f32) to `x_host` (f16): element types differ
  copy x -> x_host
  ^~~~~~~~~~~~~~~~
t.orch:3:1: note: `x` is declared here
buffer x: f32[n]
^~~~~~~~~~~~~~~~
t.orch:4:1: note: `x_host` is declared here
buffer x_host: f16[n] host
^~~~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt",
     "Closest valid: copy between buffers of one element type.",
     {{"x_host: f16[n]", "x_host: f32[n]"}}},
    {"E0302: a copy into a smaller buffer",
     R"orch(pipeline p
buffer x: f32[1024]
buffer head: f32[256]
graph main {
  copy x -> head
}
)orch",
     R"txt(t.orch:5:3: error[E0302]: copy from `x` (1024 elements) to `head` (256 elements): the destination is smaller
  copy x -> head
  ^~~~~~~~~~~~~~
t.orch:3:1: note: `head` is declared here
buffer head: f32[256]
^~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt",
     "Closest valid: make the destination at least as large.",
     {{"head: f32[256]", "head: f32[1024]"}}},
    {"E0302: a copy into a smaller buffer under the default values",
     R"orch(pipeline p
param n: u32 = 1024
param m: u32 = 256
buffer x: f32[n]
buffer y: f32[m]
graph main {
  copy x -> y
}
)orch",
     R"txt(t.orch:7:3: error[E0302]: copy from `x` (1024 elements) to `y` (256 elements): the destination is smaller (with the default values n = 1024, m = 256)
  copy x -> y
  ^~~~~~~~~~~
t.orch:5:1: note: `y` is declared here
buffer y: f32[m]
^~~~~~~~~~~~~~~~
1 error generated.
)txt",
     "Closest valid: pick defaults that fit; `n <= m` is checked again at bind time.",
     {{"m: u32 = 256", "m: u32 = 1024"}}},
    {"E0303: a fill value out of the element type's range",
     R"orch(pipeline p
buffer mask: u8[256]
graph main {
  fill mask = 256
}
)orch",
     R"txt(t.orch:4:15: error[E0303]: cannot fill `mask` (u8) with 256: 256 does not fit u8
  fill mask = 256
              ^~~
1 error generated.
)txt",
     "Closest valid: fill with a value the type holds.",
     {{"fill mask = 256", "fill mask = 255"}}},
    {"E0303: a floating-point fill of an integer buffer",
     R"orch(pipeline p
buffer counts: i32[64]
graph main {
  fill counts = 0.5
}
)orch",
     R"txt(t.orch:4:17: error[E0303]: cannot fill `counts` (i32) with 0.5: 0.5 is not an integer, and i32 holds integers
  fill counts = 0.5
                ^~~
1 error generated.
)txt",
     "Closest valid: fill with an integer.",
     {{"0.5", "0"}}},
    {"E0304: a copy from a buffer to itself",
     R"orch(pipeline p
buffer x: f32[1024]
buffer y: f32[1024]
graph main {
  copy x -> x
}
)orch",
     R"txt(t.orch:5:3: error[E0304]: copy from `x` to itself
  copy x -> x
  ^~~~~~~~~~~
1 error generated.
)txt",
     "Closest valid: name the destination.",
     {{"copy x -> x", "copy x -> y"}}},
};

TEST_CASE("E03xx: each rule's failing pipeline and its closest fix (6 cases)") { check_rule_cases(kCopiesAndFills); }

}  // TEST_SUITE("rules")

// ---- E04xx: conditionals ---------------------------------------------------------------------
TEST_SUITE("rules") {
// Each row: a pipeline that breaks the rule, exactly what `orchc --check` prints for it, and
// the closest pipeline that obeys it (in words, and as edits of the failing one), which must
// check clean.
const RuleCase kConditionals[] = {
    {"E0401: an allreduce inside an `if`",
     R"orch(pipeline p
param n: u32 = 4096
comm world
buffer g: f32[n]
buffer bad: u32
graph main {
  if bad == 0 {
    allreduce sum g on world
  }
}
)orch",
     R"txt(t.orch:8:5: error[E0401]: `allreduce` inside a conditional body: ranks could take different branches and hang, and NCCL cannot run in a graph with conditional nodes
    allreduce sum g on world
    ^~~~~~~~~~~~~~~~~~~~~~~~
t.orch:7:3: note: the conditional is here
  if bad == 0 {
  ^~~~~~~~~~~~~
1 error generated.
)txt",
     "Closest valid: run the collective unconditionally on every rank; decide afterwards.",
     {{"  if bad == 0 {\n    allreduce sum g on world\n  }\n", "  allreduce sum g on world\n  if bad != 0 {\n    fill g = 0\n  }\n"}}},
    {"E0402: a device graph launch inside an `if`",
     R"orch(pipeline p
buffer x: f32[1024]
buffer ready: u32
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph child device { work<<<1, 1024>>>(x) }
graph main {
  if ready != 0 {
    launch child tail
  }
}
)orch",
     R"txt(t.orch:8:5: error[E0402]: `launch child` inside a conditional body: an executable graph that holds both conditional nodes and device graph launches hangs, and a conditional body cannot be split into separate graphs
    launch child tail
    ^~~~~~~~~~~~~~~~~
t.orch:7:3: note: the conditional is here
  if ready != 0 {
  ^~~~~~~~~~~~~~~
1 error generated.
)txt",
     "Closest valid: launch unconditionally, and let the launched graph's kernels test `ready`.",
     {{"  if ready != 0 {\n    launch child tail\n  }\n", "  launch child tail\n"}}},
    {"E0403: a case value that appears twice",
     R"orch(pipeline p
buffer mode: u32
buffer w: f32[1024]
graph main {
  switch mode {
    case 0 { fill w = 0 }
    case 0 { fill w = 1 }
  }
}
)orch",
     R"txt(t.orch:7:10: error[E0403]: case 0 appears twice
    case 0 { fill w = 1 }
         ^
t.orch:6:5: note: first case 0 is here
    case 0 { fill w = 0 }
    ^~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt",
     "Closest valid: give each case its own value.",
     {{"case 0 { fill w = 1 }", "case 1 { fill w = 1 }"}}},
    {"E0403: a case value that is not an integer",
     R"orch(pipeline p
buffer mode: u32
buffer w: f32[1024]
graph main {
  switch mode {
    case 0.5 { fill w = 0 }
  }
}
)orch",
     R"txt(t.orch:6:10: error[E0403]: a case value must be an integer constant
    case 0.5 { fill w = 0 }
         ^~~
1 error generated.
)txt",
     "Closest valid: use integer constants.",
     {{"case 0.5", "case 0"}}},
    {"E0405: a `while kernel` body that never sets the condition",
     R"orch(pipeline p
buffer counter: i32
kernel step(counter: inout i32, c: cond) source """extern "C" __global__ void step(int* counter, cudaGraphConditionalHandle c) {}"""
kernel tick(counter: inout i32) source """extern "C" __global__ void tick(int* counter) {}"""
graph main {
  fill counter = 100
  while kernel {
    tick<<<1, 32>>>(counter)
  }
}
)orch",
     R"txt(t.orch:7:3: error[E0405]: no kernel in this `while kernel` body takes `cond`, so nothing sets the loop's condition
  while kernel {
  ^~~~~~~~~~~~~~
1 error generated.
)txt",
     "Closest valid: launch a kernel that takes `cond` and sets it.",
     {{"tick<<<1, 32>>>(counter)", "step<<<1, 32>>>(counter, cond)"}}},
    {"E0406: an array buffer as a condition",
     R"orch(pipeline p
buffer flags: u32[4]
buffer w: f32[1024]
graph main {
  if flags != 0 { fill w = 0 }
}
)orch",
     R"txt(t.orch:5:6: error[E0406]: `flags` is an array buffer; expressions read params and device scalars (buffers without a size)
  if flags != 0 { fill w = 0 }
     ^~~~~
1 error generated.
)txt",
     "Closest valid: test a device scalar.",
     {{"buffer flags: u32[4]", "buffer flags: u32"}}},
    {"E0406: a floating-point switch subject",
     R"orch(pipeline p
buffer mode: f32
buffer w: f32[1024]
graph main {
  switch mode {
    case 0 { fill w = 0 }
  }
}
)orch",
     R"txt(t.orch:5:10: error[E0406]: a switch subject must be an integer
  switch mode {
         ^~~~
1 error generated.
)txt",
     "Closest valid: switch on an integer scalar.",
     {{"buffer mode: f32", "buffer mode: u32"}}},
};

TEST_CASE("E04xx: each rule's failing pipeline and its closest fix (7 cases)") { check_rule_cases(kConditionals); }

TEST_CASE("E0401: a broadcast inside a `while`") {
  const std::string program = R"orch(pipeline p
comm world
buffer w: f32[1024]
buffer iters: u32
graph main {
  fill iters = 0
  while iters < 10 {
    broadcast w on world
    iters += 1
  }
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:8:5: error[E0401]: `broadcast` inside a conditional body: ranks could take different branches and hang, and NCCL cannot run in a graph with conditional nodes
    broadcast w on world
    ^~~~~~~~~~~~~~~~~~~~
t.orch:7:3: note: the conditional is here
  while iters < 10 {
  ^~~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: move the collective out of the loop.
  CHECK(diagnostics_of(fix(program, {{"    broadcast w on world\n", ""},
                                     {"  fill iters = 0\n", "  broadcast w on world\n  fill iters = 0\n"}})) == "");
}

TEST_CASE("E0404: more switch bodies than the target allows") {
  const TestProfile profile({{"max_switch_cases", "2"}});
  const std::string program = R"orch(pipeline p
buffer mode: u32
buffer w: f32[1024]
graph main {
  switch mode {
    case 0 { fill w = 0 }
    case 1 { fill w = 1 }
    default { fill w = 2 }
  }
}
)orch";
  CHECK(diagnostics_of(program, profile.path()) == R"txt(t.orch:5:3: error[E0404]: switch has 3 bodies; test_profile profile allows at most 2
  switch mode {
  ^~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: use fewer bodies (here the target profile allows 2).
  CHECK(diagnostics_of(fix(program, {{"    default { fill w = 2 }\n", ""}}), profile.path()) == "");
}

TEST_CASE("E0407: a switch on a target without SWITCH nodes") {
  const TestProfile profile({{"supports_switch", "false"}});
  const std::string program = R"orch(pipeline p
buffer mode: u32
buffer w: f32[1024]
graph main {
  switch mode {
    case 0 { fill w = 0 }
    case 1 { fill w = 1 }
  }
}
)orch";
  CHECK(diagnostics_of(program, profile.path()) == R"txt(t.orch:5:3: error[E0407]: target test_profile does not support SWITCH conditional nodes
  switch mode {
  ^~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: write the cases as `if`/`else` (here the profile has no SWITCH).
  CHECK(diagnostics_of(fix(program, {{"  switch mode {\n    case 0 { fill w = 0 }\n    case 1 { fill w = 1 }\n  }\n", "  if mode == 0 { fill w = 0 } else { if mode == 1 { fill w = 1 } }\n"}}), profile.path()) == "");
}

TEST_CASE("E0407: IF/ELSE on a target without IF/ELSE nodes") {
  const TestProfile profile({{"supports_if_else", "false"}});
  const std::string program = R"orch(pipeline p
buffer flag: u32
buffer w: f32[1024]
graph main {
  if flag != 0 { fill w = 0 } else { fill w = 1 }
}
)orch";
  CHECK(diagnostics_of(program, profile.path()) == R"txt(t.orch:5:3: error[E0407]: target test_profile does not support IF/ELSE conditional nodes
  if flag != 0 { fill w = 0 } else { fill w = 1 }
  ^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: use two `if`s (here the profile has IF but not IF/ELSE).
  CHECK(diagnostics_of(fix(program, {{"if flag != 0 { fill w = 0 } else { fill w = 1 }", "if flag != 0 { fill w = 0 }\n  if flag == 0 { fill w = 1 }"}}), profile.path()) == "");
}

}  // TEST_SUITE("rules")

// ---- E05xx: device-launch graphs -------------------------------------------------------------
TEST_SUITE("rules") {
// Each row: a pipeline that breaks the rule, exactly what `orchc --check` prints for it, and
// the closest pipeline that obeys it (in words, and as edits of the failing one), which must
// check clean.
const RuleCase kDeviceLaunchGraphs[] = {
    {"E0501: an `if` in a device graph",
     R"orch(pipeline p
buffer x: f32[1024]
buffer ready: u32
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph child device {
  if ready != 0 { work<<<1, 1024>>>(x) }
}
graph main { launch child tail }
)orch",
     R"txt(t.orch:6:3: error[E0501]: a device graph cannot hold an `if`; graphs launched from the device hold only kernels, copies, fills and child graphs
  if ready != 0 { work<<<1, 1024>>>(x) }
  ^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
t.orch:5:1: note: `child` is a device graph
graph child device {
^~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt",
     "Closest valid: test the condition inside the kernel.",
     {{"if ready != 0 { work<<<1, 1024>>>(x) }", "work<<<1, 1024>>>(x)"}}},
    {"E0502: an empty device graph",
     R"orch(pipeline p
buffer x: f32[1024]
graph child device { }
graph main { launch child tail }
)orch",
     R"txt(t.orch:3:1: error[E0502]: device graph `child` is empty; a graph launched from the device needs at least one kernel, copy or fill
graph child device { }
^~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt",
     "Closest valid: give it work.",
     {{"graph child device { }", "graph child device { fill x = 0 }"}}},
    {"E0504: launching a graph not declared `device`",
     R"orch(pipeline p
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph child { work<<<1, 1024>>>(x) }
graph main { launch child tail }
)orch",
     R"txt(t.orch:5:21: error[E0504]: `child` is not a device graph; only graphs declared `device` can be launched
graph main { launch child tail }
                    ^~~~~
t.orch:4:7: note: `child` is declared here
graph child { work<<<1, 1024>>>(x) }
      ^~~~~
1 error generated.
)txt",
     "Closest valid: declare it `device`.",
     {{"graph child {", "graph child device {"}}},
    {"E0504: a family where one graph is expected",
     R"orch(pipeline p
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
kernel spawn(g: graph) launches g tail <= 1 source """extern "C" __global__ void spawn(cudaGraphExec_t g) {}"""
graph experts[e: 4] device { work<<<1, 256>>>(x) }
graph main {
  spawn<<<1, 32>>>(experts)
}
)orch",
     R"txt(t.orch:7:20: error[E0504]: parameter `g` of `spawn` takes one graph, but `experts` is a family of 4 graphs
  spawn<<<1, 32>>>(experts)
                   ^~~~~~~
t.orch:4:14: note: `g` is declared here
kernel spawn(g: graph) launches g tail <= 1 source """extern "C" __global__ void spawn(cudaGraphExec_t g) {}"""
             ^~~~~~~~
1 error generated.
)txt",
     "Closest valid: declare the parameter as a family of the same size.",
     {{"spawn(g: graph)", "spawn(g: graph[4])"}}},
    {"E0504: a family member out of range",
     R"orch(pipeline p
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph experts[e: 4] device { work<<<1, 256>>>(x) }
graph main {
  launch experts[4] tail
}
)orch",
     R"txt(t.orch:6:18: error[E0504]: `experts` has members 0 to 3; 4 is not one
  launch experts[4] tail
                 ^
1 error generated.
)txt",
     "Closest valid: launch a member that exists.",
     {{"experts[4] tail", "experts[3] tail"}}},
};

TEST_CASE("E05xx: each rule's failing pipeline and its closest fix (5 cases)") { check_rule_cases(kDeviceLaunchGraphs); }

TEST_CASE("E0501: a `while` loop in a device graph") {
  const std::string program = R"orch(pipeline p
buffer c: i32
kernel step(c: inout i32, k: cond) source """extern "C" __global__ void step(int* c, cudaGraphConditionalHandle k) {}"""
graph worker device {
  fill c = 10
  while kernel {
    step<<<1, 32>>>(c, cond)
  }
}
graph main {
  launch worker tail
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:6:3: error[E0501]: a device graph cannot hold a `while` loop; graphs launched from the device hold only kernels, copies, fills and child graphs
  while kernel {
  ^~~~~~~~~~~~~~
t.orch:4:1: note: `worker` is a device graph
graph worker device {
^~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: run the loop in a host-launched graph.
  CHECK(diagnostics_of(fix(program, {{"graph worker device {", "graph worker {"},
                                     {"  launch worker tail\n", "  call worker\n"}})) == "");
}

TEST_CASE("E0505: a device graph on a target without device graph launch") {
  const TestProfile profile({{"supports_device_launch", "false"}});
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph child device { work<<<1, 1024>>>(x) }
graph main { launch child tail }
)orch";
  CHECK(diagnostics_of(program, profile.path()) == R"txt(t.orch:4:7: error[E0505]: target test_profile does not support graphs launched from the device
graph child device { work<<<1, 1024>>>(x) }
      ^~~~~
1 error generated.
)txt");
  // Closest valid: run the work in the host graph (here the profile has no device launch).
  CHECK(diagnostics_of(fix(program, {{"graph child device { work<<<1, 1024>>>(x) }\ngraph main { launch child tail }", "graph main { work<<<1, 1024>>>(x) }"}}), profile.path()) == "");
}

}  // TEST_SUITE("rules")

}  // namespace orch
