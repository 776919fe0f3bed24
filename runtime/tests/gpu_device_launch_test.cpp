// GPU tests (test suite "gpu") of device launches and conditional nodes (issue 8): the forms
// the checker accepts, run against CPU references, and the runtime's report of errors that
// only happen on the GPU. Apart from gpu_test.cpp (the examples end to end) to keep each file
// under 1,000 lines; main() skips this suite, visibly, where there is no CUDA device.
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "artifact/artifact.h"
#include "artifact/sample_pipeline.h"
#include "orch/runtime.h"
#include "runtime/tests/gpu_edit_util.h"
#include "runtime/tests/gpu_util.h"
#include "runtime/tests/test_util.h"

using namespace orch::test;

TEST_SUITE("gpu") {

// ---- device launches and conditional nodes (issue 8): the forms the checker accepts, run
// against CPU references, and the runtime's report of errors that only happen on the GPU.

const char* const kNestedWhile = R"orch(pipeline nested_while
target sm_90
param rounds: i32 = 6
buffer outer: i32
buffer inner: i32
buffer budget: i32[8]
buffer counts: i32[8]
buffer total: i32
kernel start_inner(outer: in i32, budget: in i32[], inner: out i32) source """
extern "C" __global__ void start_inner(const int* outer, const int* budget, int* inner) {
  if (threadIdx.x == 0) *inner = budget[*outer - 1];
}
"""
kernel step(outer: in i32, inner: inout i32, counts: inout i32[], c: cond) source """
extern "C" __global__ void step(const int* outer, int* inner, int* counts, cudaGraphConditionalHandle c) {
  if (threadIdx.x == 0) {
    counts[*outer - 1] += 1;
    int left = --(*inner);
    cudaGraphSetConditional(c, left > 0 ? 1u : 0u);
  }
}
"""
kernel tick(total: inout i32, c: cond) source """
extern "C" __global__ void tick(int* total, cudaGraphConditionalHandle c) {
  if (threadIdx.x == 0) { *total += 1; cudaGraphSetConditional(c, *total < 3 ? 1u : 0u); }
}
"""
graph main {
  fill counts = 0
  fill total = 0
  fill outer = rounds
  while outer > 0 {
    start_inner<<<1, 32>>>(outer, budget, inner)
    while kernel {
      step<<<1, 32>>>(outer, inner, counts, cond)
    }
    outer -= 1
  }
  while kernel {
    tick<<<1, 32>>>(total, cond)
  }
}
)orch";

TEST_CASE("a `while kernel` inside a `while` runs its body every time the outer loop reaches it") {
  // Each outer round o (rounds..1) runs the inner do-while budget[o - 1] times (at least once).
  // Before the fix the inner handle kept the 0 that ended the first round's loop, so every later
  // round ran its body not at all.
  auto p = load_source("nested_while", kNestedWhile);
  Stream s;
  auto x = instantiate(*p, orch::Bindings(), s);
  for (int32_t rounds : {6, 8, 6}) {
    CAPTURE(rounds);
    ORCH_REQUIRE_OK(x->set_param("rounds", rounds));
    std::uniform_int_distribution<int32_t> d(1, 12);
    std::vector<int32_t> budget(8);
    for (auto& v : budget) v = d(rng());
    budget[2] = 0;  // nothing to do: a do-while still runs once
    write(*x, "budget", budget);
    run(*x, s);
    ORCH_CHECK_OK(x->device_status());
    auto counts = read<int32_t>(*x, "counts", 8);
    for (int o = 0; o < 8; ++o) {
      CAPTURE(o);
      CHECK(counts[o] == (o < rounds ? std::max(budget[o], 1) : 0));
    }
    CHECK(read<int32_t>(*x, "outer", 1)[0] == 0);
    CHECK(read<int32_t>(*x, "total", 1)[0] == 3);  // the top-level `while kernel`, 3 times
  }
}

const char* const kTwoSetters = R"orch(pipeline two_setters
target sm_90
param loops: i32 = 7
buffer left: i32
buffer seen: i32
kernel keep(seen: inout i32, c: cond) source """
extern "C" __global__ void keep(int* seen, cudaGraphConditionalHandle c) {
  if (threadIdx.x == 0) { *seen += 1; cudaGraphSetConditional(c, 1u); }
}
"""
kernel decide(left: inout i32, c: cond) source """
extern "C" __global__ void decide(int* left, cudaGraphConditionalHandle c) {
  if (threadIdx.x == 0) { int l = --(*left); cudaGraphSetConditional(c, l > 0 ? 1u : 0u); }
}
"""
graph main {
  fill left = loops
  fill seen = 0
  while kernel {
    keep<<<1, 32>>>(seen, cond)
    decide<<<1, 32>>>(left, cond)
  }
}
)orch";

TEST_CASE("two kernels that set one condition run in program order: the last one decides") {
  // `keep` always sets 1 and `decide` counts down; unordered, `keep` could run last and the
  // loop would never end.
  auto p = load_source("two_setters", kTwoSetters);
  Stream s;
  auto x = instantiate(*p, orch::Bindings(), s);
  std::uniform_int_distribution<int32_t> d(2, 40);
  for (int32_t loops : {1, d(rng()), d(rng())}) {
    CAPTURE(loops);
    ORCH_REQUIRE_OK(x->set_param("loops", loops));
    run(*x, s);
    CHECK(read<int32_t>(*x, "seen", 1)[0] == loops);
    CHECK(read<int32_t>(*x, "left", 1)[0] == 0);
  }
}

const char* const kFanOut = R"orch(pipeline fan_out
target sm_90
param n: u32 = 4096
param k: u32 = 3
buffer x: u32[n]
buffer out: u32[n]
buffer errors: u32
kernel fan(parts: graph[4], errors: inout u32) launches parts fire_and_forget <= 4 source """
extern "C" __global__ void fan(const cudaGraphExec_t* parts, unsigned* errors) {
  if (threadIdx.x == 0)
    for (int i = 0; i < 4; ++i)
      if (cudaGraphLaunch(parts[i], cudaStreamGraphFireAndForget) != cudaSuccess) atomicAdd(errors, 1u);
}
"""
kernel scale(i: u32, n: u32, k: u32, x: in u32[], out: inout u32[]) source """
extern "C" __global__ void scale(unsigned i, unsigned n, unsigned k, const unsigned* x, unsigned* out) {
  unsigned begin = i * (n / 4), end = i == 3 ? n : begin + n / 4;
  for (unsigned j = begin + blockIdx.x * blockDim.x + threadIdx.x; j < end; j += gridDim.x * blockDim.x)
    out[j] = x[j] * (i + k) + i;
}
"""
graph part[i: 4] device {
  scale<<<ceil_div(n / 4 + 3, 256), 256>>>(i, n, k, x, out)
}
graph main {
  fill errors = 0
  fan<<<1, 32>>>(part, errors)
}
)orch";

TEST_CASE("a family launched member by member from one kernel: each member once, exact results") {
  auto p = load_source("fan_out", kFanOut);
  Stream s;
  const uint32_t n = 4099;  // the last member takes the remainder
  orch::Bindings b;
  b.param("n", n);
  auto x = instantiate(*p, b, s);
  std::uniform_int_distribution<uint32_t> value(0, 1u << 20), factor(1, 50);
  for (int launch = 0; launch < 2; ++launch) {
    const uint32_t k = factor(rng());
    ORCH_REQUIRE_OK(x->set_param("k", k));
    std::vector<uint32_t> xs(n);
    for (auto& v : xs) v = value(rng());
    write(*x, "x", xs);
    run(*x, s);
    ORCH_CHECK_OK(x->device_status());
    CHECK(read<uint32_t>(*x, "errors", 1)[0] == 0);
    auto out = read<uint32_t>(*x, "out", n);
    size_t bad = 0;
    for (uint32_t j = 0; j < n; ++j) {
      const uint32_t i = std::min(j / (n / 4), 3u);
      bad += out[j] != xs[j] * (i + k) + i;
    }
    CHECK(bad == 0);
  }
}

const char* const kOrders = R"orch(pipeline orders
target sm_90
param n: u32 = 1024
param k: u32 = 3
buffer x1: u32[n]
buffer y1: u32[n]
buffer x2: u32[n]
buffer y2: u32[n]
buffer x3: u32[n]
buffer y3: u32[n]
buffer q: u32[n]
buffer s1: u64
buffer s2: u64
buffer s3: u64
buffer errors: u32
kernel produce(n: u32, k: u32, x: out u32[]) source """
extern "C" __global__ void produce(unsigned n, unsigned k, unsigned* x) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] = i * k + 1u;
}
"""
kernel consume(n: u32, x: in u32[], y: out u32[], s: inout u64) source """
extern "C" __global__ void consume(unsigned n, const unsigned* x, unsigned* y, unsigned long long* s) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    y[i] = 2u * x[i];
    atomicAdd(s, (unsigned long long)y[i]);
  }
}
"""
// Tail-launches b first, then launches a fire-and-forget: the tail launch still waits for a.
kernel both(a: graph, b: graph, errors: inout u32) launches a fire_and_forget <= 1, b tail <= 1 source """
extern "C" __global__ void both(cudaGraphExec_t a, cudaGraphExec_t b, unsigned* errors) {
  if (threadIdx.x == 0) {
    if (cudaGraphLaunch(b, cudaStreamGraphTailLaunch) != cudaSuccess) atomicAdd(errors, 1u);
    if (cudaGraphLaunch(a, cudaStreamGraphFireAndForget) != cudaSuccess) atomicAdd(errors, 1u);
  }
}
"""
kernel mark(n: u32, q: out u32[]) source """
extern "C" __global__ void mark(unsigned n, unsigned* q) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) q[i] = i ^ 0x5a5au;
}
"""
graph p1 device { produce<<<4, 256>>>(n, k, x1) }
graph c1 device { consume<<<4, 256>>>(n, x1, y1, s1) }
graph p2 device { produce<<<4, 256>>>(n, k, x2) }
graph c2 device { consume<<<4, 256>>>(n, x2, y2, s2) }
graph p3 device { produce<<<4, 256>>>(n, k, x3) }
graph c3 device { consume<<<4, 256>>>(n, x3, y3, s3) }
graph side device { mark<<<4, 256>>>(n, q) }
graph main {
  fill s1 = 0
  fill s2 = 0
  fill s3 = 0
  fill errors = 0
  launch p1 fire_and_forget
  launch c1 tail
  both<<<1, 32>>>(p2, c2, errors)
  launch p3 tail
  launch c3 tail
  launch side sibling
}
)orch";

TEST_CASE("a tail launch sees fire-and-forget work (two statements or one kernel), and tail launches run in order") {
  auto p = load_source("orders", kOrders);
  Stream s;
  const uint32_t n = 1000 + std::uniform_int_distribution<uint32_t>(0, 999)(rng());
  orch::Bindings b;
  b.param("n", n);
  auto x = instantiate(*p, b, s);
  std::uniform_int_distribution<uint32_t> factor(1, 1000);
  for (int launch = 0; launch < 3; ++launch) {
    const uint32_t k = factor(rng());
    CAPTURE(k);
    ORCH_REQUIRE_OK(x->set_param("k", k));
    run(*x, s);
    ORCH_CHECK_OK(x->device_status());
    CHECK(read<uint32_t>(*x, "errors", 1)[0] == 0);
    uint64_t want = 0;
    std::vector<uint32_t> y(n);
    for (uint32_t i = 0; i < n; ++i) {
      y[i] = 2u * (i * k + 1u);
      want += y[i];
    }
    CHECK(read<uint64_t>(*x, "s1", 1)[0] == want);  // launch p1 fire_and_forget; launch c1 tail
    CHECK(read<uint64_t>(*x, "s2", 1)[0] == want);  // one kernel: tail first, then fire-and-forget
    CHECK(read<uint64_t>(*x, "s3", 1)[0] == want);  // launch p3 tail; launch c3 tail
    CHECK(read<uint32_t>(*x, "y1", n) == y);
    CHECK(read<uint32_t>(*x, "y2", n) == y);
    CHECK(read<uint32_t>(*x, "y3", n) == y);
    auto q = read<uint32_t>(*x, "q", n);  // a sibling launch that shares nothing
    size_t bad = 0;
    for (uint32_t i = 0; i < n; ++i) bad += q[i] != (i ^ 0x5a5au);
    CHECK(bad == 0);
  }
}

const char* const kFamilyIndex = R"orch(pipeline family_index
target sm_90
param which: u32 = 0
param n: u32 = 256
buffer marks: u32[4]
buffer a: u32[n]
buffer b: u32[n]
buffer errors: u32
kernel mark(i: u32, marks: inout u32[]) source """
extern "C" __global__ void mark(unsigned i, unsigned* marks) { if (threadIdx.x == 0) marks[i] += i + 1u; }
"""
kernel fill_slice(i: u32, n: u32, a: inout u32[]) source """
extern "C" __global__ void fill_slice(unsigned i, unsigned n, unsigned* a) {
  unsigned per = n / 4;
  for (unsigned k = threadIdx.x; k < per; k += blockDim.x) a[i * per + k] = i * 1000u + k;
}
"""
kernel double_slice(i: u32, n: u32, a: in u32[], b: inout u32[]) source """
extern "C" __global__ void double_slice(unsigned i, unsigned n, const unsigned* a, unsigned* b) {
  unsigned per = n / 4;
  for (unsigned k = threadIdx.x; k < per; k += blockDim.x) b[i * per + k] = 2u * a[i * per + k] + 1u;
}
"""
kernel fan(parts: graph[4], errors: inout u32) launches parts fire_and_forget <= 4 source """
extern "C" __global__ void fan(const cudaGraphExec_t* parts, unsigned* errors) {
  if (threadIdx.x == 0)
    for (int i = 0; i < 4; ++i)
      if (cudaGraphLaunch(parts[i], cudaStreamGraphFireAndForget) != cudaSuccess) atomicAdd(errors, 1u);
}
"""
graph pick[i: 4] device { mark<<<1, 32>>>(i, marks) }
graph stage[j: 4] device {
  fill_slice<<<1, 64>>>(j, n, a)
  launch after[j] tail
}
graph after[j: 4] device { double_slice<<<1, 64>>>(j, n, a, b) }
graph main {
  fill errors = 0
  launch pick[which] tail
  fan<<<1, 32>>>(stage, errors)
}
)orch";

TEST_CASE("family members by index: a param picks one (checked at bind), each member launches its own") {
  auto p = load_source("family_index", kFamilyIndex);
  Stream s;
  auto x = instantiate(*p, orch::Bindings(), s);
  std::vector<uint32_t> marks(4, 0);
  std::vector<uint32_t> order = {0, 1, 2, 3};
  std::shuffle(order.begin(), order.end(), rng());
  for (uint32_t which : order) {
    CAPTURE(which);
    ORCH_REQUIRE_OK(x->set_param("which", which));
    run(*x, s);
    ORCH_CHECK_OK(x->device_status());
    marks[which] += which + 1;
    CHECK(read<uint32_t>(*x, "marks", 4) == marks);
    CHECK(read<uint32_t>(*x, "errors", 1)[0] == 0);
    // stage[j] fills its slice of a and tail-launches after[j], which doubles it into b.
    auto bs = read<uint32_t>(*x, "b", 256);
    size_t bad = 0;
    for (uint32_t i = 0; i < 4; ++i)
      for (uint32_t k = 0; k < 64; ++k) bad += bs[i * 64 + k] != 2u * (i * 1000u + k) + 1u;
    CHECK(bad == 0);
  }
  // A member that does not exist is refused when it is bound, naming the launch.
  auto r = x->set_param("which", 4u);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == orch::ErrorCode::BindCheckFailed);
  CHECK(r.error().message().find("E0504") != std::string::npos);
  CHECK(r.error().where().find("family_index.orch:") != std::string::npos);
  run(*x, s);  // still the last good binding
  ORCH_CHECK_OK(x->device_status());
}

const char* const kMemberShapes = R"orch(pipeline member_shapes
target sm_90
param base: u32 = 32
buffer threads: u32[4]
buffer errors: u32
kernel count(i: u32, threads: inout u32[]) source """
extern "C" __global__ void count(unsigned i, unsigned* threads) { atomicAdd(&threads[i], 1u); }
"""
kernel fan(parts: graph[4], errors: inout u32) launches parts fire_and_forget <= 4 source """
extern "C" __global__ void fan(const cudaGraphExec_t* parts, unsigned* errors) {
  if (threadIdx.x == 0)
    for (int i = 0; i < 4; ++i)
      if (cudaGraphLaunch(parts[i], cudaStreamGraphFireAndForget) != cudaSuccess) atomicAdd(errors, 1u);
}
"""
graph part[i: 4] device { count<<<i + 1, base * (i + 1)>>>(i, threads) }
graph main {
  fill threads = 0
  fill errors = 0
  fan<<<1, 32>>>(part, errors)
}
)orch";

TEST_CASE("launch shapes from the family index are checked per member at bind time") {
  // Was: instantiate failed ("family index used outside a graph family").
  auto p = load_source("member_shapes", kMemberShapes);
  Stream s;
  auto x = instantiate(*p, orch::Bindings(), s);
  for (uint32_t base : {32u, 64u, 250u}) {
    CAPTURE(base);
    ORCH_REQUIRE_OK(x->set_param("base", base));
    run(*x, s);
    ORCH_CHECK_OK(x->device_status());
    CHECK(read<uint32_t>(*x, "errors", 1)[0] == 0);
    std::vector<uint32_t> want(4);
    for (uint32_t i = 0; i < 4; ++i) want[i] = (i + 1) * base * (i + 1);  // grid i + 1, block base (i + 1)
    CHECK(read<uint32_t>(*x, "threads", 4) == want);
  }
  // base 300: member 3 would have a block of 1200 threads.
  auto r = x->set_param("base", 300u);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == orch::ErrorCode::BindCheckFailed);
  CHECK(r.error().message().find("(family member 3)") != std::string::npos);
}

const char* const kTwice = R"orch(pipeline twice
target sm_90
param limit: u64 = 5000000000
buffer gate1: u32
buffer gate2: u32
buffer gate3: u32
buffer done1: u32
buffer done2: u32
kernel hold(gate: in u32, limit: u64, done: inout u32) source """
extern "C" __global__ void hold(const unsigned* gate, unsigned long long limit, unsigned* done) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (*(volatile const unsigned*)gate == 0u && t - t0 < limit);
  if (threadIdx.x == 0) atomicAdd(done, 1u);
}
"""
kernel release(gate: out u32) source """
extern "C" __global__ void release(unsigned* gate) { *(volatile unsigned*)gate = 1u; __threadfence(); }
"""
graph c1 device { hold<<<1, 32>>>(gate1, limit, done1) }
graph c2 device { hold<<<1, 32>>>(gate2, limit, done2) }
graph main {
  fill gate1 = 0
  fill gate2 = 0
  fill done1 = 0
  fill done2 = 0
  launch c1 fire_and_forget
  launch c2 fire_and_forget
  release<<<1, 1>>>(gate3)
}
)orch";

TEST_CASE("a device graph launch that fails on the GPU is a DeviceError naming the statement") {
  // The checker refuses two launches of one graph (E0608), so the artifact is edited: the second
  // launcher is pointed at c1, and `release` (which opens c1's gate) runs after both launchers.
  // c1 holds until its gate opens, so whichever launch comes second finds it running, which
  // CUDA refuses on the device. (The hold gives up after `limit` ns, so nothing can hang.)
  auto p = load_edited("twice", kTwice, [](orch::fb::PipelineT& t) {
    const int c1 = graph_index(t, "c1"), c2 = graph_index(t, "c2");
    int gate1 = -1, gate3 = -1;
    for (size_t b = 0; b < t.buffers.size(); ++b) {
      if (t.buffers[b]->name == "gate1") gate1 = static_cast<int>(b);
      if (t.buffers[b]->name == "gate3") gate3 = static_cast<int>(b);
    }
    REQUIRE(gate1 >= 0);
    REQUIRE(gate3 >= 0);
    orch::fb::GraphT& main = *t.graphs[t.main_graph];
    std::vector<uint32_t> launchers;
    int release = -1;
    for (uint32_t i = 0; i < main.nodes.size(); ++i) {
      orch::fb::KernelOpT* kernel = orch::artifact::own_op(t, main, i).body.AsKernelOp();
      if (!kernel) continue;
      for (auto& a : kernel->args) {
        if (a->kind == orch::fb::ArgKind::GraphExec && (a->ref == c1 || a->ref == c2)) {
          a->ref = c1;
          launchers.push_back(static_cast<uint32_t>(i));
        }
        if (a->kind == orch::fb::ArgKind::Buffer && a->ref == gate3) {
          a->ref = gate1;
          release = static_cast<int>(i);
        }
      }
    }
    REQUIRE(launchers.size() == 2);
    REQUIRE(release > static_cast<int>(std::max(launchers[0], launchers[1])));
    std::vector<uint32_t> deps = orch::artifact::deps_of(main, static_cast<uint32_t>(release));
    for (uint32_t l : launchers)
      if (std::find(deps.begin(), deps.end(), l) == deps.end()) deps.push_back(l);
    orch::artifact::set_deps(main, static_cast<uint32_t>(release), deps);
  });
  Stream s;
  auto x = instantiate(*p, orch::Bindings(), s);
  ORCH_CHECK_OK(x->device_status());
  run(*x, s);  // the host sees nothing wrong
  auto st = x->device_status();
  INFO(st.error().to_string());
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code() == orch::ErrorCode::DeviceError);
  CHECK(st.error().message().find("the device graph launch failed on the GPU") != std::string::npos);
  CHECK(st.error().where().find("twice.orch:") != std::string::npos);
  CHECK(read<uint32_t>(*x, "done1", 1)[0] == 1);  // one launch of c1 ran, the other did not
  CHECK(read<uint32_t>(*x, "done2", 1)[0] == 0);
  // The record keeps the first error until cleared.
  CHECK_FALSE(x->device_status().ok());
  ORCH_REQUIRE_OK(x->clear_device_status());
  ORCH_CHECK_OK(x->device_status());
}

const char* const kOutOfRange = R"orch(pipeline out_of_range
target sm_90
param which: u32 = 1
buffer marks: u32[4]
kernel mark(i: u32, marks: inout u32[]) source """
extern "C" __global__ void mark(unsigned i, unsigned* marks) { if (threadIdx.x == 0) marks[i] += 1u; }
"""
graph pick[i: 4] device { mark<<<1, 32>>>(i, marks) }
graph main {
  fill marks = 0
  launch pick[which] tail
}
)orch";

TEST_CASE("a family index out of range on the GPU is reported, and nothing past the table is launched") {
  // The bind check keeps `which` in range; the edit puts 7 in the launcher's argument itself.
  auto p = load_edited("out_of_range", kOutOfRange, [](orch::fb::PipelineT& t) {
    int edited = 0;
    for (orch::fb::KernelOpT* node : main_kernels(t)) {
      bool launcher = false;
      for (auto& a : node->args) launcher |= a->kind == orch::fb::ArgKind::GraphTable;
      if (!launcher) continue;
      for (auto& a : node->args)
        if (a->kind == orch::fb::ArgKind::Value) {
          a->value->code = {orch::fb::ExprInstr(orch::fb::ExprOp::ConstInt, orch::fb::ScalarType::U32, 0, 7, 0)};
          ++edited;
        }
    }
    REQUIRE(edited == 1);
  });
  Stream s;
  auto x = instantiate(*p, orch::Bindings(), s);
  run(*x, s);
  auto st = x->device_status();
  INFO(st.error().to_string());
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code() == orch::ErrorCode::DeviceError);
  CHECK(st.error().message().find("family index 7 is outside the family") != std::string::npos);
  CHECK(st.error().message().find("launch pick[which] tail") != std::string::npos);
  CHECK(st.error().where().find("out_of_range.orch:11:3") != std::string::npos);
  CHECK(read<uint32_t>(*x, "marks", 4) == std::vector<uint32_t>{0, 0, 0, 0});
}

// Format 3: a launch of constants is one LaunchShape struct in the artifact. The runtime must
// build from it exactly the node the seven expressions gave, and check its values as it checks
// an expression's (same errors).
const char* kConstantLaunch = R"(pipeline constant_launch
target sm_90
param n: u32 = 1000
param a: f32 = 1.5
buffer x: f32[n]
buffer y: f32[n]
kernel axpy(n: u32, a: f32, x: in f32[], y: inout f32[]) source """
extern "C" __global__ void axpy(unsigned n, float a, const float* x, float* y) {
  extern __shared__ float stage[];
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  stage[threadIdx.x] = i < n ? x[i] : 0.0f;
  __syncthreads();
  if (i < n) y[i] = a * stage[threadIdx.x] + y[i];
}
"""
graph main {
  axpy<<<8, 128, 512>>>(n, a, x, y)
}
)";

// The launch of the one kernel node, as expressions (what format 2 wrote).
void launch_as_expressions(orch::fb::PipelineT& t) {
  int edited = 0;
  for (orch::fb::KernelOpT* node : main_kernels(t)) {
    if (!node->launch) continue;
    const orch::fb::LaunchShape l = *node->launch;
    auto constant = [](uint32_t v) {
      auto e = std::make_unique<orch::fb::ExprT>();
      e->code = {orch::fb::ExprInstr(orch::fb::ExprOp::ConstInt, orch::fb::ScalarType::U32, 0, v, 0)};
      return e;
    };
    for (uint32_t v : {l.grid_x(), l.grid_y(), l.grid_z()}) node->grid.push_back(constant(v));
    for (uint32_t v : {l.block_x(), l.block_y(), l.block_z()}) node->block.push_back(constant(v));
    node->shared_bytes = constant(l.shared_bytes());
    node->launch.reset();
    ++edited;
  }
  REQUIRE(edited == 1);
}

TEST_CASE("a launch shape of constants runs as its expressions did, and is checked as they are") {
  const uint32_t n = 1000;  // 8 blocks of 128 threads cover 1,024
  auto xs = random_floats(n, -1, 1), ys = random_floats(n, -1, 1);
  std::vector<float> want(n);
  for (uint32_t i = 0; i < n; ++i) want[i] = 1.5f * xs[i] + ys[i];
  auto run_once = [&](const orch::Pipeline& p) {
    Stream s;
    auto x = instantiate(p, orch::Bindings(), s);
    write(*x, "x", xs);
    write(*x, "y", ys);
    run(*x, s);
    return read<float>(*x, "y", n);
  };
  bool compiled_as_struct = false;
  auto as_compiled = load_edited("constant_launch", kConstantLaunch, [&](orch::fb::PipelineT& t) {
    for (orch::fb::KernelOpT* node : main_kernels(t)) {
      compiled_as_struct = node->launch && node->grid.empty() && node->block.empty() && !node->shared_bytes;
      if (node->launch) {
        CHECK(node->launch->grid_x() == 8);
        CHECK(node->launch->block_x() == 128);
        CHECK(node->launch->shared_bytes() == 512);
      }
    }
  });
  CHECK(compiled_as_struct);
  const std::vector<float> from_struct = run_once(*as_compiled);
  check_close(from_struct, want, 1e-6, "y = a x + y from the launch shape");
  auto as_expressions = load_edited("constant_launch", kConstantLaunch, launch_as_expressions);
  CHECK(run_once(*as_expressions) == from_struct);

  // Out-of-range values: refused at instantiate with the expressions' messages, either way.
  struct Bad {
    orch::fb::LaunchShape shape;
    const char* error;
  };
  const Bad bad[] = {
      {orch::fb::LaunchShape(0, 1, 1, 128, 1, 1, 512), "grid x: 0 is outside 1..2147483647"},
      {orch::fb::LaunchShape(8, 1, 1, 128, 2048, 1, 512), "block y: 2048 is outside 1..1024"},
      {orch::fb::LaunchShape(8, 1, 1, 128, 1, 1, 0x80000000u), "dynamic shared memory: 2147483648 is outside 0..2147483647"},
  };
  for (const Bad& b : bad) {
    CAPTURE(b.error);
    for (bool expressions : {false, true}) {
      CAPTURE(expressions);
      auto p = load_edited("constant_launch", kConstantLaunch, [&](orch::fb::PipelineT& t) {
        for (orch::fb::KernelOpT* node : main_kernels(t))
          if (node->launch) node->launch = std::make_unique<orch::fb::LaunchShape>(b.shape);
        if (expressions) launch_as_expressions(t);
      });
      Stream s;
      auto r = p->instantiate(orch::Bindings(), s);
      REQUIRE_FALSE(r.ok());
      CHECK(r.error().code() == orch::ErrorCode::InvalidValue);
      CHECK(r.error().message().find(b.error) != std::string::npos);
      CHECK(r.error().where().find("constant_launch.orch:17:3") != std::string::npos);
    }
  }
}

}  // TEST_SUITE("gpu")
