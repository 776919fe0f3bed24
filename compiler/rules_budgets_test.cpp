// The rules of launch budgets and of ordering launches from the device (E06xx), one code at a time
// (compiler/rules_test.cpp says how).
#include "compiler/rules_test_support.h"

namespace orch {

// ---- E06xx: launch budgets and ordering ------------------------------------------------------
TEST_SUITE("rules") {
// Each row: a pipeline that breaks the rule, exactly what `orchc --check` prints for it, and
// the closest pipeline that obeys it (in words, and as edits of the failing one), which must
// check clean.
const RuleCase kBudgetsAndOrdering[] = {
    {"E0601: one kernel's budget over 120",
     R"orch(pipeline p
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
kernel fan(g: graph[200]) launches g fire_and_forget <= 200 source """extern "C" __global__ void fan(const cudaGraphExec_t* g) {}"""
graph child[i: 200] device { work<<<1, 1024>>>(x) }
graph main { fan<<<1, 256>>>(child) }
)orch",
     R"txt(t.orch:4:36: error[E0601]: kernel `fan` may make 200 fire-and-forget launches, but one graph execution allows at most 120
kernel fan(g: graph[200]) launches g fire_and_forget <= 200 source """extern "C" __global__ void fan(const cudaGraphExec_t* g) {}"""
                                   ^~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt",
     "Closest valid: launch at most 120 graphs fire-and-forget per execution.",
     {{"<= 200", "<= 120"}}},
    {"E0601: budgets that add up to more than 120",
     R"orch(pipeline p
buffer x: f32[1024]
buffer y: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
kernel fan(g: graph[100]) launches g fire_and_forget <= 100 source """extern "C" __global__ void fan(const cudaGraphExec_t* g) {}"""
graph cx[i: 100] device { work<<<1, 1024>>>(x) }
graph cy[i: 100] device { work<<<1, 1024>>>(y) }
graph main {
  fan<<<1, 256>>>(cx)
  fan<<<1, 256>>>(cy)
}
)orch",
     R"txt(t.orch:10:3: error[E0601]: one execution of `main` may make 200 fire-and-forget launches; sm_90 allows at most 120
  fan<<<1, 256>>>(cy)
  ^~~~~~~~~~~~~~~~~~~
t.orch:9:3: note: fire-and-forget launches are also made here
  fan<<<1, 256>>>(cx)
  ^~~~~~~~~~~~~~~~~~~
1 error generated.
)txt",
     "Closest valid: keep the sum within 120.",
     {{"<= 100", "<= 60"}}},
    {"E0602: one kernel's tail budget over 255",
     R"orch(pipeline p
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
kernel fan(g: graph[300]) launches g tail <= 300 source """extern "C" __global__ void fan(const cudaGraphExec_t* g) {}"""
graph child[i: 300] device { work<<<1, 1024>>>(x) }
graph main { fan<<<1, 256>>>(child) }
)orch",
     R"txt(t.orch:4:36: error[E0602]: kernel `fan` may leave 300 tail launches pending, but one graph execution allows at most 255
kernel fan(g: graph[300]) launches g tail <= 300 source """extern "C" __global__ void fan(const cudaGraphExec_t* g) {}"""
                                   ^~~~~~~~~~~~~
1 error generated.
)txt",
     "Closest valid: leave at most 255 tail launches pending.",
     {{"<= 300", "<= 255"}}},
    {"E0602: tail budgets that add up to more than 255",
     R"orch(pipeline p
buffer x: f32[1024]
buffer y: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
kernel fan(g: graph[200]) launches g tail <= 200 source """extern "C" __global__ void fan(const cudaGraphExec_t* g) {}"""
graph cx[i: 200] device { work<<<1, 1024>>>(x) }
graph cy[i: 200] device { work<<<1, 1024>>>(y) }
graph main {
  fan<<<1, 256>>>(cx)
  fan<<<1, 256>>>(cy)
}
)orch",
     R"txt(t.orch:10:3: error[E0602]: one execution of `main` may leave 400 tail launches pending; sm_90 allows at most 255
  fan<<<1, 256>>>(cy)
  ^~~~~~~~~~~~~~~~~~~
t.orch:9:3: note: tail launches are also made here
  fan<<<1, 256>>>(cx)
  ^~~~~~~~~~~~~~~~~~~
1 error generated.
)txt",
     "Closest valid: keep the sum within 255.",
     {{"tail <= 200", "tail <= 100"}}},
    {"E0603: two pending self tail launches",
     R"orch(pipeline p
buffer work: f32[1024]
kernel again(work: inout f32[], self: graph) launches self tail <= 2 source """extern "C" __global__ void again(float* w, cudaGraphExec_t self) {}"""
graph rounds device {
  again<<<132, 256>>>(work, self)
}
graph main { launch rounds tail }
)orch",
     R"txt(t.orch:5:3: error[E0603]: one execution of `rounds` may leave 2 self tail launches pending; at most 1 is allowed
  again<<<132, 256>>>(work, self)
  ^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt",
     "Closest valid: relaunch yourself at most once per execution.",
     {{"self tail <= 2", "self tail <= 1"}}},
    {"E0604: a launch inside a `while` loop",
     R"orch(pipeline p
buffer x: f32[1024]
buffer iters: u32
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph child device { work<<<1, 1024>>>(x) }
graph main {
  fill iters = 0
  while iters < 4 {
    launch child tail
    iters += 1
  }
}
)orch",
     R"txt(t.orch:9:5: error[E0604]: `launch child` inside a `while` loop: the loop has no trip bound, so neither have the launches one graph execution makes
    launch child tail
    ^~~~~~~~~~~~~~~~~
t.orch:8:3: note: the loop is here
  while iters < 4 {
  ^~~~~~~~~~~~~~~~~
1 error generated.
)txt",
     "Closest valid: launch outside the loop (a device graph can relaunch itself with `self`).",
     {{"  while iters < 4 {\n    launch child tail\n    iters += 1\n  }\n", "  launch child tail\n"}}},
    {"E0605: a graph parameter without a budget",
     R"orch(pipeline p
kernel spawn(g: graph) source """extern "C" __global__ void spawn(cudaGraphExec_t g) {}"""
graph main { }
)orch",
     R"txt(t.orch:2:14: error[E0605]: graph parameter `g` of kernel `spawn` has no launch budget; declare one, e.g. `launches g tail <= 1`
kernel spawn(g: graph) source """extern "C" __global__ void spawn(cudaGraphExec_t g) {}"""
             ^~~~~~~~
1 error generated.
)txt",
     "Closest valid: declare how many launches it makes.",
     {{"spawn(g: graph)", "spawn(g: graph) launches g tail <= 1"}}},
    {"E0605: a budget for a parameter that is not a graph",
     R"orch(pipeline p
kernel spawn(g: graph, n: u32) launches g tail <= 1, n fire_and_forget <= 4 source """extern "C" __global__ void spawn(cudaGraphExec_t g, unsigned n) {}"""
graph main { }
)orch",
     R"txt(t.orch:2:54: error[E0605]: launch budget names `n`, which is not a `graph` parameter
kernel spawn(g: graph, n: u32) launches g tail <= 1, n fire_and_forget <= 4 source """extern "C" __global__ void spawn(cudaGraphExec_t g, unsigned n) {}"""
                                                     ^
t.orch:2:24: note: `n` is declared here
kernel spawn(g: graph, n: u32) launches g tail <= 1, n fire_and_forget <= 4 source """extern "C" __global__ void spawn(cudaGraphExec_t g, unsigned n) {}"""
                       ^~~~~~
1 error generated.
)txt",
     "Closest valid: budget only `graph` parameters.",
     {{", n fire_and_forget <= 4", ""}}},
    {"E0606: a statement writes what fire-and-forget work reads",
     R"orch(pipeline p
buffer x: f32[1024]
buffer y: f32[1024]
buffer x_host: f32[1024] host
kernel look(x: in f32[], y: out f32[]) source """extern "C" __global__ void look(const float* x, float* y) { y[threadIdx.x] = x[threadIdx.x]; }"""
kernel spawn(g: graph) launches g fire_and_forget <= 1 source """extern "C" __global__ void spawn(cudaGraphExec_t g) {}"""
graph child device { look<<<1, 1024>>>(x, y) }
graph main {
  spawn<<<1, 32>>>(child)
  fill x = 0
}
)orch",
     R"txt(t.orch:10:3: error[E0606]: this statement writes `x`, which `child` reads; `child` is launched fire_and_forget, so nothing orders its work before this statement
  fill x = 0
  ^~~~~~~~~~
t.orch:9:3: note: `child` is launched fire_and_forget here; work that needs its results belongs in a graph it tail-launches, which runs after it
  spawn<<<1, 32>>>(child)
  ^~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt",
     "Closest valid: a later statement may read what the launched graph only reads.",
     {{"  fill x = 0\n", "  copy x -> x_host\n"}}},
    {"E0606: what a launched graph launches counts as its work",
     R"orch(pipeline p
buffer x: f32[1024]
buffer z: f32[1024]
buffer x_host: f32[1024] host
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph inner device { work<<<1, 1024>>>(x) }
graph outer device { launch inner fire_and_forget }
graph main {
  launch outer fire_and_forget
  copy x -> x_host
}
)orch",
     R"txt(t.orch:10:3: error[E0606]: this statement reads `x`, which `outer` writes; `outer` is launched fire_and_forget, so nothing orders its work before this statement
  copy x -> x_host
  ^~~~~~~~~~~~~~~~
t.orch:9:3: note: `outer` is launched fire_and_forget here; work that needs its results belongs in a graph it tail-launches, which runs after it
  launch outer fire_and_forget
  ^~~~~~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt",
     "Closest valid: the nested launch works on another buffer.",
     {{"graph inner device { work<<<1, 1024>>>(x) }", "graph inner device { work<<<1, 1024>>>(z) }"}}},
    {"E0606: two fire-and-forget launches of one kernel that write one buffer",
     R"orch(pipeline p
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
kernel two(a: graph, b: graph) launches a fire_and_forget <= 1, b fire_and_forget <= 1 source """extern "C" __global__ void two(cudaGraphExec_t a, cudaGraphExec_t b) {}"""
graph first device { work<<<1, 1024>>>(x) }
graph second device { work<<<1, 1024>>>(x) }
graph main { two<<<1, 32>>>(first, second) }
)orch",
     R"txt(t.orch:7:14: error[E0606]: `two` launches `first` fire_and_forget and `second` fire_and_forget: `second` writes `x`, which `first` writes, and nothing orders one before the other
graph main { two<<<1, 32>>>(first, second) }
             ^~~~~~~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt",
     "Closest valid: tail-launch the second; it runs after the first has finished.",
     {{"b fire_and_forget <= 1", "b tail <= 1"}}},
    {"E0606: two fire-and-forget launch statements that write one buffer",
     R"orch(pipeline p
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph first device { work<<<1, 1024>>>(x) }
graph second device { work<<<1, 1024>>>(x) }
graph main {
  launch first fire_and_forget
  launch second fire_and_forget
}
)orch",
     R"txt(t.orch:8:3: error[E0606]: `second`, launched fire_and_forget here, writes `x`, which `first` writes; `first` is launched fire_and_forget, so nothing orders its work before `second`'s
  launch second fire_and_forget
  ^~~~~~~~~~~~~~~~~~~~~~~~~~~~~
t.orch:7:3: note: `first` is launched fire_and_forget here
  launch first fire_and_forget
  ^~~~~~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt",
     "Closest valid: tail-launch the second, as with one kernel.",
     {{"launch second fire_and_forget", "launch second tail"}}},
    {"E0607: a fire-and-forget launch after a tail launch that writes what it reads",
     R"orch(pipeline p
buffer x: f32[1024]
buffer y: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
kernel look(x: in f32[], y: out f32[]) source """extern "C" __global__ void look(const float* x, float* y) { y[threadIdx.x] = x[threadIdx.x]; }"""
graph produce device { work<<<1, 1024>>>(x) }
graph consume device { look<<<1, 1024>>>(x, y) }
graph main {
  launch produce tail
  launch consume fire_and_forget
}
)orch",
     R"txt(t.orch:10:3: error[E0607]: `consume`, launched fire_and_forget here, reads `x`, which `produce` writes, but `produce` is tail-launched: it runs after this whole graph, not before `consume`
  launch consume fire_and_forget
  ^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
t.orch:9:3: note: `produce` is tail-launched here
  launch produce tail
  ^~~~~~~~~~~~~~~~~~~
1 error generated.
)txt",
     "Closest valid: launch the producer fire-and-forget and the consumer as a tail launch: a tail launch waits for all fire-and-forget work.",
     {{"  launch produce tail\n  launch consume fire_and_forget\n", "  launch produce fire_and_forget\n  launch consume tail\n"}}},
    {"E0608: one graph launched twice fire-and-forget",
     R"orch(pipeline p
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph child device { work<<<1, 256>>>(x) }
graph main {
  launch child fire_and_forget
  launch child fire_and_forget
}
)orch",
     R"txt(t.orch:7:3: error[E0608]: `child` may be launched 2 times in one execution of `main`; an executable graph runs one launch at a time, and CUDA refuses to launch it while a launch is pending or running (cudaErrorInvalidValue)
  launch child fire_and_forget
  ^~~~~~~~~~~~~~~~~~~~~~~~~~~~
t.orch:6:3: note: `child` is also launched here
  launch child fire_and_forget
  ^~~~~~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt",
     "Closest valid: a family has one executable graph per member.",
     {{"graph child device", "graph child[i: 2] device"}, {"  launch child fire_and_forget\n  launch child fire_and_forget\n", "  launch child[0] fire_and_forget\n  launch child[1] fire_and_forget\n"}}},
    {"E0608: a budget of two launches of one graph",
     R"orch(pipeline p
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
kernel fan(g: graph) launches g tail <= 2 source """extern "C" __global__ void fan(cudaGraphExec_t g) {}"""
graph child device { work<<<1, 256>>>(x) }
graph main { fan<<<1, 32>>>(child) }
)orch",
     R"txt(t.orch:6:14: error[E0608]: `child` may be launched 2 times in one execution of `main`; an executable graph runs one launch at a time, and CUDA refuses to launch it while a launch is pending or running (cudaErrorInvalidValue)
graph main { fan<<<1, 32>>>(child) }
             ^~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt",
     "Closest valid: launch it once per execution.",
     {{"tail <= 2", "tail <= 1"}}},
    {"E0608: a graph that launches itself fire-and-forget",
     R"orch(pipeline p
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph again device {
  work<<<1, 256>>>(x)
  launch again fire_and_forget
}
graph main { launch again tail }
)orch",
     R"txt(t.orch:6:3: error[E0608]: `again` launches itself fire_and_forget while it is running; an executable graph runs one launch at a time, and CUDA refuses to launch it while a launch is running (cudaErrorInvalidValue)
  launch again fire_and_forget
  ^~~~~~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt",
     "Closest valid: relaunch itself as a tail launch (a loop; see E0603).",
     {{"launch again fire_and_forget", "launch again tail"}}},
    {"E0608: two members of a family that launch the same graph",
     R"orch(pipeline p
buffer x: f32[1024]
buffer y: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph child device { work<<<1, 256>>>(y) }
graph part[i: 2] device {
  work<<<1, 256>>>(x)
  launch child fire_and_forget
}
graph main {
  launch part[0] tail
  launch part[1] tail
}
)orch",
     R"txt(t.orch:8:3: error[E0608]: `child` may be launched 2 times in one execution of `main`; an executable graph runs one launch at a time, and CUDA refuses to launch it while a launch is pending or running (cudaErrorInvalidValue)
  launch child fire_and_forget
  ^~~~~~~~~~~~~~~~~~~~~~~~~~~~
t.orch:8:3: note: launched here by each of the 2 members of `part` that run
  launch child fire_and_forget
  ^~~~~~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt",
     "Closest valid: each member launches its own member of a family.",
     {{"graph child device", "graph child[c: 2] device"}, {"launch child fire_and_forget", "launch child[i] fire_and_forget"}}},
    {"E0608: a family budget larger than the family",
     R"orch(pipeline p
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
kernel fan(g: graph[4]) launches g fire_and_forget <= 8 source """extern "C" __global__ void fan(const cudaGraphExec_t* g) {}"""
graph part[i: 4] device { work<<<1, 256>>>(x) }
graph main { fan<<<1, 32>>>(part) }
)orch",
     R"txt(t.orch:4:34: error[E0608]: kernel `fan` may make 8 launches from `g`, a family of 4 graphs, so it would launch some member twice; an executable graph runs one launch at a time
kernel fan(g: graph[4]) launches g fire_and_forget <= 8 source """extern "C" __global__ void fan(const cudaGraphExec_t* g) {}"""
                                 ^~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt",
     "Closest valid: launch each member at most once.",
     {{"fire_and_forget <= 8", "fire_and_forget <= 4"}}},
    {"E0609: a graph that relaunches itself and tail-launches another",
     R"orch(pipeline p
buffer x: f32[1024]
buffer y: f32[1024]
kernel look(x: in f32[], y: out f32[]) source """extern "C" __global__ void look(const float* x, float* y) { y[threadIdx.x] = x[threadIdx.x]; }"""
kernel step(x: inout f32[], again: graph, done: graph) launches again tail <= 1, done tail <= 1 source """extern "C" __global__ void step(float* x, cudaGraphExec_t again, cudaGraphExec_t done) {}"""
graph finish device { look<<<1, 1024>>>(x, y) }
graph rounds device { step<<<1, 256>>>(x, self, finish) }
graph main { launch rounds tail }
)orch",
     R"txt(t.orch:7:23: error[E0609]: `rounds` relaunches itself and also tail-launches `finish`: each round runs before the tail launches of the rounds before it, so several launches of `finish` could be pending at once
graph rounds device { step<<<1, 256>>>(x, self, finish) }
                      ^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt",
     "Closest valid: tail-launch `finish` after `rounds` from the graph that launches the loop: it runs when the last round has finished.",
     {{"kernel step(x: inout f32[], again: graph, done: graph) launches again tail <= 1, done tail <= 1 source \"\"\"extern \"C\" __global__ void step(float* x, cudaGraphExec_t again, cudaGraphExec_t done) {}\"\"\"", "kernel step(x: inout f32[], again: graph) launches again tail <= 1 source \"\"\"extern \"C\" __global__ void step(float* x, cudaGraphExec_t again) {}\"\"\""}, {"step<<<1, 256>>>(x, self, finish)", "step<<<1, 256>>>(x, self)"}, {"graph main { launch rounds tail }", "graph main {\n  launch rounds tail\n  launch finish tail\n}"}}},
    {"E0610: a tail launch after a sibling launch",
     R"orch(pipeline p
buffer x: f32[1024]
buffer y: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
kernel look(x: in f32[], y: out f32[]) source """extern "C" __global__ void look(const float* x, float* y) { y[threadIdx.x] = x[threadIdx.x]; }"""
graph produce device { work<<<1, 1024>>>(x) }
graph consume device { look<<<1, 1024>>>(x, y) }
graph main {
  launch produce sibling
  launch consume tail
}
)orch",
     R"txt(t.orch:10:3: error[E0610]: `consume` is tail-launched here and reads `x`, which `produce` writes; `produce` is launched as a sibling, which runs in the parent graph's execution, so the tail launch does not wait for it
  launch consume tail
  ^~~~~~~~~~~~~~~~~~~
t.orch:9:3: note: `produce` is launched as a sibling here; launched fire_and_forget, it would finish before the tail launch starts
  launch produce sibling
  ^~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt",
     "Closest valid: launch it fire-and-forget: the tail launch waits for that.",
     {{"launch produce sibling", "launch produce fire_and_forget"}}},
    {"E0610: a tail launch after one whose sibling launch writes what it reads",
     R"orch(pipeline p
buffer x: f32[1024]
buffer y: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
kernel look(x: in f32[], y: out f32[]) source """extern "C" __global__ void look(const float* x, float* y) { y[threadIdx.x] = x[threadIdx.x]; }"""
graph produce device { work<<<1, 1024>>>(x) }
graph first device { launch produce sibling }
graph consume device { look<<<1, 1024>>>(x, y) }
graph main {
  launch first tail
  launch consume tail
}
)orch",
     R"txt(t.orch:11:3: error[E0610]: `consume` is tail-launched here and reads `x`, which work that `first` launches as a sibling writes; tail launches wait for `first` but not for its sibling launches
  launch consume tail
  ^~~~~~~~~~~~~~~~~~~
t.orch:10:3: note: `first` is tail-launched here
  launch first tail
  ^~~~~~~~~~~~~~~~~
1 error generated.
)txt",
     "Closest valid: the nested launch is fire-and-forget, part of `first`'s execution.",
     {{"launch produce sibling", "launch produce fire_and_forget"}}},
    {"E0611: one kernel tail-launches two graphs that use one buffer",
     R"orch(pipeline p
buffer x: f32[1024]
buffer y: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
kernel look(x: in f32[], y: out f32[]) source """extern "C" __global__ void look(const float* x, float* y) { y[threadIdx.x] = x[threadIdx.x]; }"""
kernel both(a: graph, b: graph) launches a tail <= 1, b tail <= 1 source """extern "C" __global__ void both(cudaGraphExec_t a, cudaGraphExec_t b) {}"""
graph produce device { work<<<1, 1024>>>(x) }
graph consume device { look<<<1, 1024>>>(x, y) }
graph main { both<<<1, 32>>>(produce, consume) }
)orch",
     R"txt(t.orch:9:14: error[E0611]: `both` tail-launches `produce` and `consume`, and `consume` reads `x`, which `produce` writes: they run in the order the kernel launches them, which orch cannot see
graph main { both<<<1, 32>>>(produce, consume) }
             ^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt",
     "Closest valid: two `launch` statements, which run in program order.",
     {{"graph main { both<<<1, 32>>>(produce, consume) }", "graph main {\n  launch produce tail\n  launch consume tail\n}"}}},
    {"E0504: a family member index past the end for one member",
     R"orch(pipeline p
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph stage[j: 4] device {
  work<<<1, 256>>>(x)
  launch stage[j + 1] tail
}
graph main { launch stage[0] tail }
)orch",
     R"txt(t.orch:6:16: error[E0504]: `stage` has members 0 to 3; `j + 1` is 4 in member 3 of `stage`
  launch stage[j + 1] tail
               ^~~~~
1 error generated.
)txt",
     "Closest valid: an index that names a member for every member.",
     {{"launch stage[j + 1] tail", "launch last[j] tail"}, {"graph main", "graph last[k: 4] device { work<<<1, 256>>>(x) }\ngraph main"}}},
    {"E0504: a family member index from a param",
     R"orch(pipeline p
param which: u32 = 4
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph part[i: 4] device { work<<<1, 256>>>(x) }
graph main { launch part[which] tail }
)orch",
     R"txt(t.orch:6:26: error[E0504]: `part` has members 0 to 3; `which` is 4 (with the default values which = 4)
graph main { launch part[which] tail }
                         ^~~~~
1 error generated.
)txt",
     "Closest valid: a default that names a member (checked again at bind time).",
     {{"param which: u32 = 4", "param which: u32 = 3"}}},
};

TEST_CASE("E06xx: each rule's failing pipeline and its closest fix (24 cases)") { check_rule_cases(kBudgetsAndOrdering); }

TEST_CASE("E0606: reading what fire-and-forget work writes") {
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
  CHECK(diagnostics_of(program) == R"txt(t.orch:9:3: error[E0606]: this statement reads `y`, which `child` writes; `child` is launched fire_and_forget, so nothing orders its work before this statement
  copy y -> y_host
  ^~~~~~~~~~~~~~~~
t.orch:8:3: note: `child` is launched fire_and_forget here; work that needs its results belongs in a graph it tail-launches, which runs after it
  spawn<<<1, 32>>>(child)
  ^~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: move the reader into the launched graph, after the work it needs.
  CHECK(diagnostics_of(fix(program, {{"spawn<<<1, 32>>>(child)\n  copy y -> y_host\n", "spawn<<<1, 32>>>(child)\n"},
                                     {"graph child device { work<<<1, 1024>>>(y) }", "graph child device {\n  work<<<1, 1024>>>(y)\n  copy y -> y_host\n}"}})) == "");
}

TEST_CASE("E0607: using what a tail-launched graph writes") {
  const std::string program = R"orch(pipeline p
buffer y: f32[1024]
buffer y_host: f32[1024] host
kernel work(y: out f32[]) source """extern "C" __global__ void work(float* y) { y[threadIdx.x] = 1.0f; }"""
graph child device { work<<<1, 1024>>>(y) }
graph main {
  launch child tail
  copy y -> y_host
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:8:3: error[E0607]: this statement reads `y`, which `child` writes, but `child` is tail-launched: it runs after this whole graph, not before this statement
  copy y -> y_host
  ^~~~~~~~~~~~~~~~
t.orch:7:3: note: `child` is tail-launched here
  launch child tail
  ^~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: do the work that needs the result in the tail-launched graph.
  CHECK(diagnostics_of(fix(program, {{"launch child tail\n  copy y -> y_host\n", "launch child tail\n"},
                                     {"graph child device { work<<<1, 1024>>>(y) }", "graph child device {\n  work<<<1, 1024>>>(y)\n  copy y -> y_host\n}"}})) == "");
}

// The device-launch model (check_launches.cpp): environments, tail order, sibling launches, and
// one pending launch per executable graph.

TEST_CASE("a launch is ordered after what the graphs it launches use, at any depth") {
  // main writes x, then launches `outer`, which launches `inner`, which reads x. The launching
  // statement carries what everything it launches touches (compute_footprints, to a fixpoint),
  // so the DAG orders it after the write; one level deep would miss `inner`.
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
buffer y: f32[1024]
kernel look(x: in f32[]) source """extern "C" __global__ void look(const float* x) {}"""
graph inner device { look<<<1, 32>>>(x) }
graph outer device { launch inner tail }
graph main {
  fill x = 1
  fill y = 2
  launch outer tail
}
)orch";
  auto c = check(program);
  REQUIRE(c->text() == "");
  const ir::Program& p = *c->result.program;
  const ir::Region& body = p.graphs[p.main_graph].body;
  REQUIRE(body.nodes.size() == 3);
  std::vector<std::pair<int, int>> edges;
  for (const ir::Edge& e : body.edges) edges.push_back({e.from, e.to});
  CHECK(edges == std::vector<std::pair<int, int>>{{0, 2}});
}

TEST_CASE("members of one family may share buffers when launched together") {
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
kernel fan(g: graph[4]) launches g fire_and_forget <= 4 source """extern "C" __global__ void fan(const cudaGraphExec_t* g) {}"""
graph part[i: 4] device { work<<<1, 256>>>(x) }
graph main {
  fan<<<1, 32>>>(part)
}
)orch";
  CHECK(diagnostics_of(program) == "");
}

TEST_CASE("a tail launch after fire-and-forget launches of one kernel, and tail launches in order, are ordered") {
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
buffer y: f32[1024]
buffer z: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
kernel look(x: in f32[], y: out f32[]) source """extern "C" __global__ void look(const float* x, float* y) { y[threadIdx.x] = x[threadIdx.x]; }"""
kernel both(a: graph, b: graph) launches a fire_and_forget <= 1, b tail <= 1 source """extern "C" __global__ void both(cudaGraphExec_t a, cudaGraphExec_t b) {}"""
graph produce device { work<<<1, 1024>>>(x) }
graph consume device { look<<<1, 1024>>>(x, y) }
graph again device { look<<<1, 1024>>>(y, z) }
graph main {
  both<<<1, 32>>>(produce, consume)
  launch again tail
}
)orch";
  CHECK(diagnostics_of(program) == "");
}

TEST_CASE("`self` in a graph that is only called means the graph it is called from") {
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
kernel again(x: inout f32[], g: graph) launches g tail <= 1 source """extern "C" __global__ void again(float* x, cudaGraphExec_t g) {}"""
graph step { again<<<1, 256>>>(x, self) }
graph rounds device { call step }
graph main { launch rounds tail }
)orch";
  CHECK(diagnostics_of(program) == "");
}

}  // TEST_SUITE("rules")

}  // namespace orch
