// The checker's rules, one diagnostic code at a time. For every code from E0101 on there is a
// small pipeline that breaks the rule, next to the full text `orchc --check` prints for it
// (file:line:col, code, message, the source line, the caret line and every note), and the
// closest pipeline that obeys the rule, written as edits of the failing one, which must check
// clean. After the per-code cases: several independent errors are all reported, one mistake is
// reported once (no cascades), param-dependent checks are recorded for bind time, and
// docs/diagnostics.md has an entry for every code.
//
// The cases are spread by code over files: this one (E01xx), rules_shapes_test.cpp (E02xx-E05xx),
// rules_budgets_test.cpp (E06xx), rules_structure_test.cpp (E07xx, E08xx, `call`),
// rules_loops_test.cpp (issue 8) and rules_recovery_test.cpp (recovery, regressions, bind checks,
// docs); rules_test_support.h has what they share. Most codes are rows of a table (RuleCase: the
// failing pipeline, the text, the closest fix); cases that check more are test cases of their own.
//
// E0001-E0005 (syntax, input) have their own tests (grammar/parse_test.cpp,
// support/diagnostics_test.cpp and tests/stress_test.cpp, which also has E0806: it needs 150,000 statements); E0899 (the lowering's ordering verifier, an
// internal error no checked program should reach) and E09xx/W09xx (kernel compilation) belong
// to lowering/.
//
// Cases marked `may_fail` describe behaviour the checker should have and does not yet; each
// says what is wrong. They run, and report, without failing the suite.
#include "compiler/rules_test_support.h"

namespace orch {

// ---- E01xx: names and types ------------------------------------------------------------------
TEST_SUITE("rules") {
// Each row: a pipeline that breaks the rule, exactly what `orchc --check` prints for it, and
// the closest pipeline that obeys it (in words, and as edits of the failing one), which must
// check clean.
const RuleCase kNamesAndTypes[] = {
    {"E0101: a buffer that is never declared",
     R"orch(pipeline p
param n: u32 = 1024
buffer x: f32[n]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scale<<<ceil_div(n, 256), 256>>>(n, 2.0, x)
  copy x -> x_host
}
)orch",
     R"txt(t.orch:11:13: error[E0101]: buffer `x_host` is not declared
  copy x -> x_host
            ^~~~~~
1 error generated.
)txt",
     "Closest valid: declare `x_host`.",
     {{"buffer x: f32[n]\n", "buffer x: f32[n]\nbuffer x_host: f32[n] host\n"}}},
    {"E0101: a misspelled param in an expression",
     R"orch(pipeline p
param n: u32 = 1024
buffer x: f32[n]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scale<<<ceil_div(m, 256), 256>>>(n, 2.0, x)
}
)orch",
     R"txt(t.orch:10:20: error[E0101]: `m` is not declared
  scale<<<ceil_div(m, 256), 256>>>(n, 2.0, x)
                   ^
1 error generated.
)txt",
     "Closest valid: use the declared param `n`.",
     {{"ceil_div(m,", "ceil_div(n,"}}},
    {"E0101: a misspelled kernel",
     R"orch(pipeline p
param n: u32 = 1024
buffer x: f32[n]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scael<<<ceil_div(n, 256), 256>>>(n, 2.0, x)
}
)orch",
     R"txt(t.orch:10:3: error[E0101]: kernel `scael` is not declared
  scael<<<ceil_div(n, 256), 256>>>(n, 2.0, x)
  ^~~~~
1 error generated.
)txt",
     "Closest valid: spell the kernel's name as declared.",
     {{"scael<<<", "scale<<<"}}},
    {"E0101: a called graph that is never declared",
     R"orch(pipeline p
buffer x: f32[16]
graph prologue { fill x = 0 }
graph main {
  call prolog
}
)orch",
     R"txt(t.orch:5:8: error[E0101]: graph `prolog` is not declared
  call prolog
       ^~~~~~
1 error generated.
)txt",
     "Closest valid: call the declared graph.",
     {{"call prolog\n", "call prologue\n"}}},
    {"E0101: a comm that is never declared",
     R"orch(pipeline p
comm world
buffer g: f32[1024]
graph main {
  allreduce sum g on wrld
}
)orch",
     R"txt(t.orch:5:22: error[E0101]: comm `wrld` is not declared
  allreduce sum g on wrld
                     ^~~~
1 error generated.
)txt",
     "Closest valid: name the declared comm.",
     {{"on wrld", "on world"}}},
    {"E0102: a buffer with the name of a param",
     R"orch(pipeline p
param n: u32 = 16
buffer n: f32[16]
graph main { }
)orch",
     R"txt(t.orch:3:8: error[E0102]: `n` is already declared as a param
buffer n: f32[16]
       ^
t.orch:2:7: note: previous declaration of `n` is here
param n: u32 = 16
      ^
1 error generated.
)txt",
     "Closest valid: give the buffer a name of its own.",
     {{"buffer n: f32[16]", "buffer x: f32[n]"}}},
    {"E0102: redeclaring the built-in `rank`",
     R"orch(pipeline p
comm world
param rank: u32 = 0
graph main { }
)orch",
     R"txt(t.orch:3:7: error[E0102]: `rank` is a built-in name and cannot be redeclared
param rank: u32 = 0
      ^~~~
1 error generated.
)txt",
     "Closest valid: pick another name; `rank` comes from the comm.",
     {{"param rank: u32 = 0\n", "param root: u32 = 0\n"}}},
    {"E0102: two kernel parameters with one name",
     R"orch(pipeline p
kernel add(x: in f32[], x: inout f32[]) source """extern "C" __global__ void add(const float* a, float* b) {}"""
graph main { }
)orch",
     R"txt(t.orch:2:25: error[E0102]: kernel `add` has two parameters named `x`
kernel add(x: in f32[], x: inout f32[]) source """extern "C" __global__ void add(const float* a, float* b) {}"""
                        ^
t.orch:2:12: note: first one is here
kernel add(x: in f32[], x: inout f32[]) source """extern "C" __global__ void add(const float* a, float* b) {}"""
           ^
1 error generated.
)txt",
     "Closest valid: name the parameters apart.",
     {{"add(x: in f32[], x: inout f32[])", "add(a: in f32[], b: inout f32[])"}}},
    {"E0102: a family index that hides a param",
     R"orch(pipeline p
param e: u32 = 0
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph experts[e: 8] device { work<<<1, 128>>>(x) }
graph main { launch experts[e] tail }
)orch",
     R"txt(t.orch:5:15: error[E0102]: family index `e` hides a declaration of the same name
graph experts[e: 8] device { work<<<1, 128>>>(x) }
              ^
1 error generated.
)txt",
     "Closest valid: index the family with a fresh name.",
     {{"experts[e: 8]", "experts[i: 8]"}}},
    {"E0103: too few arguments",
     R"orch(pipeline p
param n: u32 = 1024
buffer x: f32[n]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scale<<<ceil_div(n, 256), 256>>>(n, x)
}
)orch",
     R"txt(t.orch:10:3: error[E0103]: kernel `scale` takes 3 arguments, but 2 were given
  scale<<<ceil_div(n, 256), 256>>>(n, x)
  ^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
t.orch:4:1: note: `scale` is declared here
kernel scale(n: u32, a: f32, x: inout f32[]) source """
^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt",
     "Closest valid: pass one argument per parameter.",
     {{"(n, x)\n", "(n, 2.0, x)\n"}}},
    {"E0104: a buffer of the wrong element type",
     R"orch(pipeline p
param n: u32 = 1024
buffer x: i32[n]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scale<<<ceil_div(n, 256), 256>>>(n, 2.0, x)
}
)orch",
     R"txt(t.orch:10:44: error[E0104]: `x` holds i32, but parameter `x` of `scale` takes f32
  scale<<<ceil_div(n, 256), 256>>>(n, 2.0, x)
                                           ^
t.orch:4:30: note: `x` is declared here
kernel scale(n: u32, a: f32, x: inout f32[]) source """
                             ^~~~~~~~~~~~~~
1 error generated.
)txt",
     "Closest valid: pass a buffer of the parameter's element type.",
     {{"buffer x: i32[n]", "buffer x: f32[n]"}}},
    {"E0104: a device scalar where an array is expected",
     R"orch(pipeline p
param n: u32 = 1024
buffer x: f32
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scale<<<ceil_div(n, 256), 256>>>(n, 2.0, x)
}
)orch",
     R"txt(t.orch:10:44: error[E0104]: `x` is a device scalar, but parameter `x` of `scale` takes an array (inout f32[])
  scale<<<ceil_div(n, 256), 256>>>(n, 2.0, x)
                                           ^
t.orch:4:30: note: `x` is declared here
kernel scale(n: u32, a: f32, x: inout f32[]) source """
                             ^~~~~~~~~~~~~~
1 error generated.
)txt",
     "Closest valid: pass an array buffer.",
     {{"buffer x: f32\n", "buffer x: f32[n]\n"}}},
    {"E0104: a floating-point value for an integer parameter",
     R"orch(pipeline p
param n: u32 = 1024
buffer x: f32[n]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scale<<<4, 256>>>(1024.0, 2.0, x)
}
)orch",
     R"txt(t.orch:10:21: error[E0104]: parameter `n` of `scale` is u32, but the argument is a floating-point value
  scale<<<4, 256>>>(1024.0, 2.0, x)
                    ^~~~~~
t.orch:4:14: note: `n` is declared here
kernel scale(n: u32, a: f32, x: inout f32[]) source """
             ^~~~~~
1 error generated.
)txt",
     "Closest valid: pass an integer.",
     {{"(1024.0,", "(1024,"}}},
    {"E0104: a constant that does not fit the parameter",
     R"orch(pipeline p
param n: u32 = 1024
buffer x: f32[n]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scale<<<4, 256>>>(-1, 2.0, x)
}
)orch",
     R"txt(t.orch:10:21: error[E0104]: argument does not fit parameter `n` of `scale`: -1 does not fit u32
  scale<<<4, 256>>>(-1, 2.0, x)
                    ^~
t.orch:4:14: note: `n` is declared here
kernel scale(n: u32, a: f32, x: inout f32[]) source """
             ^~~~~~
1 error generated.
)txt",
     "Closest valid: pass a value in the parameter's range.",
     {{"(-1,", "(1024,"}}},
    {"E0104: a param as the source of a copy",
     R"orch(pipeline p
param n: u32 = 16
buffer x: u32[16]
graph main {
  copy n -> x
}
)orch",
     R"txt(t.orch:5:8: error[E0104]: the copy's source must be a buffer, but `n` is not one
  copy n -> x
       ^
t.orch:2:7: note: `n` is declared here
param n: u32 = 16
      ^
1 error generated.
)txt",
     "Closest valid: fill the buffer with the param's value.",
     {{"  copy n -> x\n", "  fill x = n\n"}}},
    {"E0104: a floating-point value assigned to an integer scalar",
     R"orch(pipeline p
buffer iters: u32
graph main {
  iters = 1.5
}
)orch",
     R"txt(t.orch:4:11: error[E0104]: cannot assign a floating-point value to `iters` (u32)
  iters = 1.5
          ^~~
1 error generated.
)txt",
     "Closest valid: assign an integer.",
     {{"iters = 1.5", "iters = 1"}}},
    {"E0105: a param for an `inout` array",
     R"orch(pipeline p
param n: u32 = 1024
buffer x: f32[n]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scale<<<ceil_div(n, 256), 256>>>(n, 2.0, n)
}
)orch",
     R"txt(t.orch:10:44: error[E0105]: `n` is a param, passed by value; parameter `x` of `scale` is `inout f32[]`, so it needs a buffer
  scale<<<ceil_div(n, 256), 256>>>(n, 2.0, n)
                                           ^
t.orch:4:30: note: `x` is declared here
kernel scale(n: u32, a: f32, x: inout f32[]) source """
                             ^~~~~~~~~~~~~~
1 error generated.
)txt",
     "Closest valid: pass a buffer.",
     {{"(n, 2.0, n)", "(n, 2.0, x)"}}},
    {"E0105: an expression for an `in` scalar",
     R"orch(pipeline p
param n: u32 = 16
buffer limit: u32
kernel clamp(limit: in u32) source """extern "C" __global__ void clamp(const unsigned* limit) {}"""
graph main {
  clamp<<<1, 32>>>(n + 1)
}
)orch",
     R"txt(t.orch:6:20: error[E0105]: parameter `limit` of `clamp` is `in u32`, so its argument must be a buffer
  clamp<<<1, 32>>>(n + 1)
                   ^~~~~
t.orch:4:14: note: `limit` is declared here
kernel clamp(limit: in u32) source """extern "C" __global__ void clamp(const unsigned* limit) {}"""
             ^~~~~~~~~~~~~
1 error generated.
)txt",
     "Closest valid: compute the value into a device scalar and pass that.",
     {{"  clamp<<<1, 32>>>(n + 1)\n", "  limit = n + 1\n  clamp<<<1, 32>>>(limit)\n"}}},
    {"E0106: an unknown buffer element type",
     R"orch(pipeline p
buffer x: float[16]
graph main { }
)orch",
     R"txt(t.orch:2:11: error[E0106]: unknown type `float`
buffer x: float[16]
          ^~~~~
1 error generated.
)txt",
     "Closest valid: use one of the element types.",
     {{"float[16]", "f32[16]"}}},
    {"E0106: an unknown param type",
     R"orch(pipeline p
param n: uint = 16
graph main { }
)orch",
     R"txt(t.orch:2:10: error[E0106]: unknown type `uint`
param n: uint = 16
         ^~~~
1 error generated.
)txt",
     "Closest valid: use one of the scalar types.",
     {{"uint", "u32"}}},
    {"E0107: assigning to a param",
     R"orch(pipeline p
param n: u32 = 16
graph main {
  n += 1
}
)orch",
     R"txt(t.orch:4:3: error[E0107]: cannot assign to `n`: it is a param, set by the host; a graph assigns only device scalars (buffers without a size)
  n += 1
  ^
t.orch:2:7: note: `n` is declared here
param n: u32 = 16
      ^
1 error generated.
)txt",
     "Closest valid: make it a device scalar.",
     {{"param n: u32 = 16", "buffer n: u32"}}},
    {"E0107: assigning to an array buffer",
     R"orch(pipeline p
buffer count: u32[4]
graph main {
  count = 0
}
)orch",
     R"txt(t.orch:4:3: error[E0107]: cannot assign to `count`: it is an array buffer; a graph assigns only device scalars (buffers without a size); write arrays with a kernel or `fill`
  count = 0
  ^~~~~
t.orch:2:8: note: `count` is declared here
buffer count: u32[4]
       ^~~~~
1 error generated.
)txt",
     "Closest valid: `fill` the array.",
     {{"  count = 0\n", "  fill count = 0\n"}}},
    {"E0108: a device scalar in a launch shape",
     R"orch(pipeline p
param n: u32 = 1024
buffer blocks: u32
buffer x: f32[n]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scale<<<blocks, 256>>>(n, 2.0, x)
}
)orch",
     R"txt(t.orch:11:11: error[E0108]: `blocks` is a device scalar, read on the GPU, but this value is computed on the host
  scale<<<blocks, 256>>>(n, 2.0, x)
          ^~~~~~
1 error generated.
)txt",
     "Closest valid: compute the shape from params.",
     {{"<<<blocks, 256>>>", "<<<ceil_div(n, 256), 256>>>"}}},
    {"E0109: an unknown function",
     R"orch(pipeline p
param n: u32 = 1024
buffer x: f32[n]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scale<<<ceil(n / 256), 256>>>(n, 2.0, x)
}
)orch",
     R"txt(t.orch:10:11: error[E0109]: unknown function `ceil`; expressions may call min, max and ceil_div
  scale<<<ceil(n / 256), 256>>>(n, 2.0, x)
          ^~~~
1 error generated.
)txt",
     "Closest valid: use `ceil_div`.",
     {{"ceil(n / 256)", "ceil_div(n, 256)"}}},
    {"E0109: a constant division by zero",
     R"orch(pipeline p
param n: u32 = 1024
buffer x: f32[n]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scale<<<n / 0, 256>>>(n, 2.0, x)
}
)orch",
     R"txt(t.orch:10:13: error[E0109]: division by zero: the divisor of `/` is 0
  scale<<<n / 0, 256>>>(n, 2.0, x)
            ^
1 error generated.
)txt",
     "Closest valid: divide by something else.",
     {{"n / 0", "n / 256"}}},
    {"E0109: a literal that its operand's type cannot hold",
     R"orch(pipeline p
param n: u8 = 200
buffer x: f32[n * 300]
graph main { fill x = 0 }
)orch",
     R"txt(t.orch:3:19: error[E0109]: overflow: 300 does not fit u8
buffer x: f32[n * 300]
                  ^~~
1 error generated.
)txt",
     "Closest valid: a wider param.",
     {{"n: u8", "n: u16"}}},
    {"E0109: a floating-point launch shape",
     R"orch(pipeline p
param n: u32 = 1024
buffer x: f32[n]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scale<<<n / 256.0, 256>>>(n, 2.0, x)
}
)orch",
     R"txt(t.orch:10:11: error[E0109]: the grid must be an integer, not a floating-point value
  scale<<<n / 256.0, 256>>>(n, 2.0, x)
          ^~~~~~~~~
1 error generated.
)txt",
     "Closest valid: use integer arithmetic.",
     {{"n / 256.0", "n / 256"}}},
    {"E0109: `call` of something that is not a graph",
     R"orch(pipeline p
param n: u32 = 1024
buffer x: f32[n]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  call scale
}
)orch",
     R"txt(t.orch:10:8: error[E0109]: `scale` is not a graph
  call scale
       ^~~~~
1 error generated.
)txt",
     "Closest valid: launch the kernel.",
     {{"  call scale\n", "  scale<<<ceil_div(n, 256), 256>>>(n, 2.0, x)\n"}}},
    {"E0109: an array buffer in a fill value",
     R"orch(pipeline p
buffer a: u32[4]
buffer b: u32[4]
graph main {
  fill a = b
}
)orch",
     R"txt(t.orch:5:12: error[E0109]: `b` is an array buffer; expressions read params and device scalars (buffers without a size)
  fill a = b
           ^
1 error generated.
)txt",
     "Closest valid: copy the buffer.",
     {{"fill a = b", "copy b -> a"}}},
    {"E0110: a kernel with no code",
     R"orch(pipeline p
kernel scale(n: u32, a: f32, x: inout f32[])
graph main { }
)orch",
     R"txt(t.orch:2:8: error[E0110]: kernel `scale` has no code; add `from "file.cu"` or `source """..."""`
kernel scale(n: u32, a: f32, x: inout f32[])
       ^~~~~
1 error generated.
)txt",
     "Closest valid: give it code: `source` or `from` a file.",
     {{"x: inout f32[])\n", "x: inout f32[]) source \"\"\"extern \"C\" __global__ void scale(unsigned n, float a, float* x) {}\"\"\"\n"}}},
    {"E0110: an array parameter with no access mode",
     R"orch(pipeline p
kernel scale(n: u32, a: f32, x: f32[]) source """extern "C" __global__ void scale(unsigned n, float a, float* x) {}"""
graph main { }
)orch",
     R"txt(t.orch:2:30: error[E0110]: array parameter `x` needs an access mode (`in`, `out` or `inout`): the compiler orders statements by what they read and write
kernel scale(n: u32, a: f32, x: f32[]) source """extern "C" __global__ void scale(unsigned n, float a, float* x) {}"""
                             ^~~~~~~~
1 error generated.
)txt",
     "Closest valid: say how the kernel uses the array.",
     {{"x: f32[])", "x: inout f32[])"}}},
    {"E0110: an access mode on a `cond` parameter",
     R"orch(pipeline p
kernel step(k: inout cond) source """extern "C" __global__ void step(cudaGraphConditionalHandle k) {}"""
graph main { }
)orch",
     R"txt(t.orch:2:13: error[E0110]: parameter `k` is a `cond` and takes no access mode
kernel step(k: inout cond) source """extern "C" __global__ void step(cudaGraphConditionalHandle k) {}"""
            ^~~~~~~~~~~~~
1 error generated.
)txt",
     "Closest valid: drop the access mode.",
     {{"k: inout cond", "k: cond"}}},
    {"E0110: two sources",
     R"orch(pipeline p
kernel zero(x: out f32[]) source """extern "C" __global__ void zero(float* x) {}""" source """extern "C" __global__ void zero(float* x) { x[0] = 0; }"""
graph main { }
)orch",
     R"txt(t.orch:2:85: error[E0110]: kernel `zero` has more than one source or entry
kernel zero(x: out f32[]) source """extern "C" __global__ void zero(float* x) {}""" source """extern "C" __global__ void zero(float* x) { x[0] = 0; }"""
                                                                                    ^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt",
     "Closest valid: keep one source.",
     {{" source \"\"\"extern \"C\" __global__ void zero(float* x) {}\"\"\"", ""}}},
    {"E0111: an unknown target",
     R"orch(pipeline p
target sm_42
graph main { }
)orch",
     R"txt(t.orch:2:8: error[E0111]: unknown target 'sm_42'; known targets: sm_100, sm_80, sm_90
target sm_42
       ^~~~~
1 error generated.
)txt",
     "Closest valid: name a target profile that exists.",
     {{"sm_42", "sm_90"}}},
    {"E0112: no `graph main`",
     R"orch(pipeline p
buffer x: f32[16]
graph mian { fill x = 0 }
)orch",
     R"txt(t.orch:1:10: error[E0112]: pipeline `p` has no `graph main`, the graph the application launches
pipeline p
         ^
1 error generated.
)txt",
     "Closest valid: name the host-launched graph `main`.",
     {{"graph mian", "graph main"}}},
    {"E0112: `graph main` declared `device`",
     R"orch(pipeline p
buffer x: f32[16]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph main device { work<<<1, 16>>>(x) }
)orch",
     R"txt(t.orch:4:1: error[E0112]: `graph main` is launched from the host; it cannot be a device graph or a family
graph main device { work<<<1, 16>>>(x) }
^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt",
     "Closest valid: drop `device`.",
     {{"graph main device", "graph main"}}},
    {"E0113: `cond` outside `while kernel`",
     R"orch(pipeline p
buffer c: i32
kernel step(c: inout i32, k: cond) source """extern "C" __global__ void step(int* c, cudaGraphConditionalHandle k) {}"""
graph main {
  fill c = 10
  step<<<1, 32>>>(c, cond)
}
)orch",
     R"txt(t.orch:6:22: error[E0113]: `cond` is the condition of an enclosing `while kernel`, and there is none here
  step<<<1, 32>>>(c, cond)
                     ^~~~
1 error generated.
)txt",
     "Closest valid: put the kernel in a `while kernel` body.",
     {{"  step<<<1, 32>>>(c, cond)\n", "  while kernel {\n    step<<<1, 32>>>(c, cond)\n  }\n"}}},
    {"E0113: `self` in a host-launched graph",
     R"orch(pipeline p
buffer x: f32[16]
kernel again(x: inout f32[], self: graph) launches self tail <= 1 source """extern "C" __global__ void again(float* x, cudaGraphExec_t self) {}"""
graph main {
  again<<<1, 32>>>(x, self)
}
)orch",
     R"txt(t.orch:5:23: error[E0113]: `self` is the device graph being executed, but `main` is launched from the host
  again<<<1, 32>>>(x, self)
                      ^~~~
1 error generated.
)txt",
     "Closest valid: relaunch a device graph instead.",
     {{"graph main {\n  again<<<1, 32>>>(x, self)\n}", "graph loop device {\n  again<<<1, 32>>>(x, self)\n}\ngraph main {\n  launch loop tail\n}"}}},
    {"E0114: `rank` without a comm",
     R"orch(pipeline p
param n: u32 = 1024
buffer x: f32[n]
kernel shard(n: u32, rank: u32, x: out f32[]) source """extern "C" __global__ void shard(unsigned n, unsigned rank, float* x) {}"""
graph main {
  shard<<<4, 256>>>(n, rank, x)
}
)orch",
     R"txt(t.orch:6:24: error[E0114]: `rank` comes from the bound communicator, but this pipeline declares no `comm`
  shard<<<4, 256>>>(n, rank, x)
                       ^~~~
1 error generated.
)txt",
     "Closest valid: declare the comm the ranks belong to.",
     {{"param n: u32 = 1024\n", "param n: u32 = 1024\ncomm world\n"}}},
    {"E0115: a buffer sized by a device scalar",
     R"orch(pipeline p
buffer n: u32
buffer x: f32[n]
graph main { fill x = 0 }
)orch",
     R"txt(t.orch:3:15: error[E0115]: `n` is a device scalar; this must be known on the host
buffer x: f32[n]
              ^
1 error generated.
)txt",
     "Closest valid: size it by a param.",
     {{"buffer n: u32", "param n: u32 = 1024"}}},
    {"E0115: a buffer with no elements under the default values",
     R"orch(pipeline p
param n: u32 = 4
buffer x: f32[n - 4]
graph main { fill x = 0 }
)orch",
     R"txt(t.orch:3:15: error[E0115]: buffer `x` has 0 elements (with the default values n = 4); a buffer needs at least one
buffer x: f32[n - 4]
              ^~~~~
1 error generated.
)txt",
     "Closest valid: pick defaults that give every buffer an element.",
     {{"param n: u32 = 4", "param n: u32 = 8"}}},
    {"E0115: a param default that does not fit its type",
     R"orch(pipeline p
param mode: u8 = 300
graph main { }
)orch",
     R"txt(t.orch:2:18: error[E0115]: default of param `mode` does not fit its type: 300 does not fit u8
param mode: u8 = 300
                 ^~~
1 error generated.
)txt",
     "Closest valid: widen the type or shrink the default.",
     {{"u8 = 300", "u16 = 300"}}},
    {"E0115: a launch budget that is a param",
     R"orch(pipeline p
param fanout: u32 = 8
kernel route(g: graph) launches g fire_and_forget <= fanout source """extern "C" __global__ void route(cudaGraphExec_t g) {}"""
graph main { }
)orch",
     R"txt(t.orch:3:54: error[E0115]: this must be a constant, but `fanout` is a param
kernel route(g: graph) launches g fire_and_forget <= fanout source """extern "C" __global__ void route(cudaGraphExec_t g) {}"""
                                                     ^~~~~~
1 error generated.
)txt",
     "Closest valid: write the bound as a constant.",
     {{"<= fanout", "<= 8"}}},
    {"E0115: an empty graph family",
     R"orch(pipeline p
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph experts[e: 0] device { work<<<1, 128>>>(x) }
graph main { launch experts[0] tail }
)orch",
     R"txt(t.orch:4:18: error[E0115]: graph family `experts` must have 1 to 65536 members, not 0
graph experts[e: 0] device { work<<<1, 128>>>(x) }
                 ^
1 error generated.
)txt",
     "Closest valid: give the family at least one member.",
     {{"[e: 0]", "[e: 4]"}}},
};

TEST_CASE("E01xx: each rule's failing pipeline and its closest fix (44 cases)") { check_rule_cases(kNamesAndTypes); }

TEST_CASE("E0108: a device scalar as a value argument") {
  const std::string program = R"orch(pipeline p
buffer count: u32
buffer x: f32[1024]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scale<<<4, 256>>>(count, 2.0, x)
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:10:21: error[E0108]: `count` is a device scalar, read on the GPU, but this value is computed on the host; pass it to an `in` parameter
  scale<<<4, 256>>>(count, 2.0, x)
                    ^~~~~
1 error generated.
)txt");
  // Closest valid: take the scalar through an `in` parameter, so the kernel reads it on the GPU.
  CHECK(diagnostics_of(fix(program, {{"scale(n: u32,", "scale(n: in u32,"},
                                     {"void scale(unsigned n,", "void scale(const unsigned* n,"}})) == "");
}

TEST_CASE("E0109: an overflow in a constant expression, at its operator") {
  // Literals take the type their use expects (u32 here) and are evaluated in it: no wrap.
  const std::string program = R"orch(pipeline p
param m: u32 = 65536 << 16
param s: u32 = 1 << 40
graph main { }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:2:22: error[E0109]: overflow: 65536 << 16 does not fit u32
param m: u32 = 65536 << 16
                     ^~
t.orch:3:18: error[E0109]: shift count: 1 << 40 (the count must be 0 to 31 for u32)
param s: u32 = 1 << 40
                 ^~
2 errors generated.
)txt");
  // Closest valid: a type that holds the value.
  CHECK(diagnostics_of(fix(program, {{"m: u32", "m: u64"}, {"s: u32", "s: u64"}})) == "");
}

TEST_CASE("E0115: a literal default is evaluated in its param's type") {
  // ~0 is u32's largest value, and u64 takes literals up to 2^64 - 1; i64 does not.
  const std::string program = R"orch(pipeline p
param mask: u32 = ~0
param all: u64 = 18446744073709551615
param low: i64 = -9223372036854775808
param bad: i64 = 18446744073709551615
graph main { }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:5:18: error[E0115]: default of param `bad` does not fit its type: 18446744073709551615 does not fit i64
param bad: i64 = 18446744073709551615
                 ^~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: the unsigned type holds it.
  auto c = check(fix(program, {{"bad: i64", "bad: u64"}}));
  CHECK(c->text() == "");
  REQUIRE(c->result.program);
  const ir::Program& p = *c->result.program;
  CHECK(p.params[0].default_evaluated == ir::Value::of_uint(ir::ScalarType::U32, 4294967295u));
  CHECK(p.params[1].default_evaluated == ir::Value::of_uint(ir::ScalarType::U64, ~uint64_t(0)));
  CHECK(p.params[2].default_evaluated == ir::Value::of_int(ir::ScalarType::I64, INT64_MIN));
}

TEST_CASE("E0116: a buffer whose size in bytes does not fit u64") {
  const std::string program = R"orch(pipeline p
buffer big: f64[1 << 62]
param n: u64 = 1 << 62
buffer dyn: f64[n]
graph main { }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:2:17: error[E0116]: buffer `big` has 4611686018427387904 f64 elements: its size in bytes does not fit u64 (at most 2305843009213693951 elements)
buffer big: f64[1 << 62]
                ^~~~~~~
t.orch:4:17: error[E0116]: buffer `dyn` has 4611686018427387904 f64 elements (with the default values n = 4611686018427387904): its size in bytes does not fit u64 (at most 2305843009213693951 elements)
buffer dyn: f64[n]
                ^
2 errors generated.
)txt");
  // Closest valid: sizes whose bytes fit; a u64 count is checked again when bound.
  auto c = check(fix(program, {{"f64[1 << 62]", "f64[1 << 20]"}, {"= 1 << 62", "= 1 << 20"}}));
  CHECK(c->text() == "");
  REQUIRE(c->result.program);
  std::string checks;
  for (const ir::BindCheck& b : c->result.program->bind_checks)
    checks += to_string(b.code) + std::string(" ") + ir::to_string(b.condition, *c->result.program) + "\n";
  CHECK(checks == "E0116 n <= 2305843009213693951\n");
  // A u32 count cannot exceed it: no check is recorded.
  c = check(fix(program, {{"f64[1 << 62]", "f64[1 << 20]"}, {"n: u64 = 1 << 62", "n: u32 = 1 << 20"}}));
  CHECK(c->text() == "");
  CHECK(c->result.program->bind_checks.empty());
}

TEST_CASE("W0118: `keep` on a buffer the memory plan never moves, and an attribute given twice") {
  const std::string program = R"orch(pipeline p
param n: u32 = 1024
buffer h: f32[n] host keep
buffer flag: u32 keep
buffer x: f32[n] keep keep
graph main { fill x = 0 }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:3:23: warning[W0118]: `keep` has no effect on a `host` buffer: the memory plan never lets host buffers share memory
buffer h: f32[n] host keep
                      ^~~~
t.orch:4:18: warning[W0118]: `keep` has no effect on a device scalar: the memory plan never lets device scalars share memory
buffer flag: u32 keep
                 ^~~~
t.orch:5:23: warning[W0118]: this attribute of buffer `x` is given twice; once is enough
buffer x: f32[n] keep keep
                      ^~~~
3 warnings generated.
)txt");
  // Closest clean: `keep` once, where it means something; the flag reaches the program.
  auto c = check(fix(program, {{"host keep", "host"}, {"u32 keep", "u32"}, {"keep keep", "keep"}}));
  CHECK(c->text() == "");
  REQUIRE(c->result.program);
  CHECK(c->result.program->buffers[2].keep);
  CHECK_FALSE(c->result.program->buffers[0].keep);
}

TEST_CASE("E0117: a kernel's cost clause names what it counts, over its value parameters") {
  const std::string program = R"orch(pipeline p
param n: u32 = 1024
buffer x: f32[n]
kernel scale(n: u32, a: f32, x: inout f32[])
    cost bytes[f64] 8 * len, speed 3, flops[u32] x < 2
    source """extern "C" __global__ void scale(unsigned n, float a, float* x) { x[threadIdx.x] *= a; }"""
graph main {
  scale<<<ceil_div(n, 256), 256>>>(n, 2.0, x)
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:5:16: error[E0117]: `bytes` counts bytes and takes no precision; the precision goes on `flops`, e.g. `flops[f64] 2 * n`
    cost bytes[f64] 8 * len, speed 3, flops[u32] x < 2
               ^~~
t.orch:5:25: error[E0117]: `len` is not a parameter of kernel `scale`; a cost is written over the kernel's value parameters
    cost bytes[f64] 8 * len, speed 3, flops[u32] x < 2
                        ^~~
t.orch:5:30: error[E0117]: `speed` is not a cost; a kernel's cost is `bytes` and `flops` (e.g. `cost bytes 12 * n, flops 2 * n`)
    cost bytes[f64] 8 * len, speed 3, flops[u32] x < 2
                             ^~~~~
t.orch:5:45: error[E0117]: `flops[u32]`: the precision of FLOPs is f16, f32 or f64
    cost bytes[f64] 8 * len, speed 3, flops[u32] x < 2
                                            ^~~
t.orch:5:50: error[E0117]: `x` is not a value parameter; a cost is written over the values a launch passes, such as `n: u32`
    cost bytes[f64] 8 * len, speed 3, flops[u32] x < 2
                                                 ^
t.orch:4:30: note: `x` is declared here
kernel scale(n: u32, a: f32, x: inout f32[])
                             ^~~~~~~~~~~~~~
t.orch:5:52: error[E0117]: `<` in a cost: a cost is arithmetic (+ - * / % << >> min max ceil_div)
    cost bytes[f64] 8 * len, speed 3, flops[u32] x < 2
                                                   ^
6 errors generated.
)txt");
  // Each item once.
  CHECK(check(fix(program, {{"bytes[f64] 8 * len, speed 3, flops[u32] x < 2", "bytes 8 * n, bytes 4 * n"}}))->text() ==
        R"txt(t.orch:5:23: error[E0117]: kernel `scale` declares its `bytes` cost twice
    cost bytes 8 * n, bytes 4 * n
                      ^~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: bytes and FLOPs over the value parameters; each launch gets its own, with its
  // arguments in place of the parameters.
  const std::string good = fix(program, {{"bytes[f64] 8 * len, speed 3, flops[u32] x < 2", "bytes 8 * n, flops[f64] n"},
                                         {"  scale<<<ceil_div(n, 256), 256>>>(n, 2.0, x)\n",
                                          "  scale<<<ceil_div(n, 256), 256>>>(n, 2.0, x)\n  scale<<<1, 256>>>(n / 4, 2.0, x)\n"}});
  auto c = check(good);
  REQUIRE(c->text() == "");
  REQUIRE(c->result.program);
  const ir::Program& p = *c->result.program;
  CHECK(p.kernels[0].has_cost);
  CHECK(p.kernels[0].cost_precision == ir::ScalarType::F64);
  const auto& nodes = p.graphs[p.main_graph].body.nodes;
  REQUIRE(nodes.size() == 2);
  const ir::KernelNode& first = nodes[0].as<ir::KernelNode>();
  const ir::KernelNode& second = nodes[1].as<ir::KernelNode>();
  REQUIRE(first.cost_bytes);
  REQUIRE(second.cost_flops);
  CHECK(ir::to_string(*first.cost_bytes, p) == "8 * n");
  CHECK(ir::to_string(*second.cost_bytes, p) == "8 * (n / 4)");
  CHECK(ir::to_string(*second.cost_flops, p) == "n / 4");
  // No cost: nothing on the launches.
  auto none = check(fix(program, {{"    cost bytes[f64] 8 * len, speed 3, flops[u32] x < 2\n", ""}}));
  REQUIRE(none->text() == "");
  CHECK_FALSE(none->result.program->graphs[none->result.program->main_graph].body.nodes[0].as<ir::KernelNode>().cost_bytes);
}

}  // TEST_SUITE("rules")

}  // namespace orch
