// GPU tests (suite "gpu") for what the checker's soundness rules allow (issue 8): each runs the
// accepted form of a rule on the GPU and compares with a CPU reference on fresh random inputs.
//   - E0506/E0507: a kernel that launches kernels (CUDA dynamic parallelism) in a host-launched
//     graph, beside a conditional node (the lowering puts them in separate segments);
//   - E0120: a kernel whose declaration matches its source, over every kind of value parameter;
//     a mismatched one is refused by orchc;
//   - E0410: a `while` loop whose body changes its condition runs exactly the expected number of
//     iterations (through a scalar update inside a nested `if`), zero included;
//   - E0503 (retired): a device graph copies between two mapped host buffers.
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "orch/runtime.h"
#include "runtime/tests/gpu_util.h"
#include "runtime/tests/test_util.h"

using namespace orch::test;

namespace {

const char* kCdpSource = R"(pipeline cdp
target sm_90
param n: u32 = 4096
buffer x: f32[n]
buffer x_host: f32[n] host
buffer flag: u32
kernel parent(n: u32, x: inout f32[]) source """
extern "C" __global__ void cdp_child(unsigned n, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = 2.0f * x[i] + 1.0f;
}
extern "C" __global__ void parent(unsigned n, float* x) {
  if (blockIdx.x == 0 && threadIdx.x == 0) cdp_child<<<(n + 255) / 256, 256>>>(n, x);
}
"""
graph main {
  copy x_host -> x
  parent<<<1, 32>>>(n, x)
  copy x -> x_host
  if flag != 0 { fill x = 0 }
}
)";

const char* kMatchSource = R"(pipeline match
target sm_90
param n: u32 = 1000
param a: f64 = 1.5
param b: i64 = -7
param c: u8 = 200
param d: bool = true
param e: f32 = 0.25
buffer x: f32[n]
buffer y: f64[n]
kernel mix(n: u32, a: f64, b: i64, c: u8, d: bool, e: f32, x: in f32[], y: out f64[]) source """
extern "C" __global__ void mix(unsigned n, double a, long long b, unsigned char c, bool d, float e,
                               const float* x, double* y) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * (double)x[i] + (double)b + (double)c + (d ? (double)e : -(double)e);
}
"""
graph main {
  mix<<<ceil_div(n, 256), 256>>>(n, a, b, c, d, e, x, y)
}
)";

const char* kLoopSource = R"(pipeline loop
target sm_90
param n: u32 = 1000
param rounds: i32 = 10
buffer x: f32[n]
buffer y: f32[n]
buffer left: i32
buffer odd: u32
buffer iters: u32
kernel acc(n: u32, left: in i32, x: in f32[], y: inout f32[]) source """
extern "C" __global__ void acc(unsigned n, const int* left, const float* x, float* y) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += x[i] * (float)(*left);
}
"""
kernel count(iters: inout u32) source """
extern "C" __global__ void count(unsigned* iters) { if (threadIdx.x == 0) *iters += 1; }
"""
graph main {
  fill odd = 0
  fill iters = 0
  left = rounds
  while left > 0 {
    acc<<<ceil_div(n, 256), 256>>>(n, left, x, y)
    count<<<1, 32>>>(iters)
    if left % 2 == 1 {
      odd += 1
      left -= 1
    } else {
      left -= 1
    }
  }
}
)";

const char* kHostCopySource = R"(pipeline hostcopy
target sm_90
param n: u32 = 4096
buffer a_host: f32[n] host
buffer b_host: f32[n] host
graph child device {
  copy a_host -> b_host
}
graph main { launch child tail }
)";

}  // namespace

TEST_SUITE("gpu") {

TEST_CASE("a kernel that launches kernels (dynamic parallelism) runs in the host-launched graph, beside an if") {
  auto p = load_source("cdp", kCdpSource);
  Stream s;
  const uint32_t n = 3001;  // not a multiple of the child's block
  orch::Bindings b;
  b.param("n", n);
  auto x = instantiate(*p, b, s);
  float* host = static_cast<float*>(x->buffer("x_host"));
  REQUIRE(host != nullptr);
  auto x0 = random_floats(n, -4, 4);
  std::copy(x0.begin(), x0.end(), host);
  write(*x, "flag", std::vector<uint32_t>{0});
  run(*x, s);
  // The child grid's writes are complete when the parent's node is (a parent grid finishes
  // only after its children), so the copy after it sees them.
  std::vector<float> want(n);
  for (uint32_t i = 0; i < n; ++i) want[i] = 2.0f * x0[i] + 1.0f;
  check_close(std::vector<float>(host, host + n), want, 0, "x_host = 2 x0 + 1");
  check_close(read<float>(*x, "x", n), want, 0, "x = 2 x0 + 1 (the if did not run)");

  // Again, with the if taken: x_host doubles once more, x is zeroed after the copy.
  write(*x, "flag", std::vector<uint32_t>{1});
  run(*x, s);
  for (uint32_t i = 0; i < n; ++i) want[i] = 2.0f * want[i] + 1.0f;
  check_close(std::vector<float>(host, host + n), want, 0, "x_host after the second launch");
  check_close(read<float>(*x, "x", n), std::vector<float>(n, 0.0f), 0, "x zeroed by the if");
}

TEST_CASE("a kernel whose declaration matches its source gets every value parameter right") {
  auto p = load_source("match", kMatchSource);
  Stream s;
  const uint32_t n = 1000;
  orch::Bindings b;
  b.param("n", n);
  auto x = instantiate(*p, b, s);
  struct Values {
    double a;
    int64_t b;
    uint8_t c;
    bool d;
    float e;
  };
  for (const Values& v : {Values{1.5, -7, 200, true, 0.25f},
                          Values{-2.25, 1234567890123ll, 7, false, 0.5f},  // b needs all 8 bytes
                          Values{0.125, -(int64_t(1) << 40), 255, true, -3.75f}}) {
    CAPTURE(v.a);
    CAPTURE(v.b);
    ORCH_REQUIRE_OK(x->set_param("a", v.a));
    ORCH_REQUIRE_OK(x->set_param("b", v.b));
    ORCH_REQUIRE_OK(x->set_param("c", v.c));
    ORCH_REQUIRE_OK(x->set_param("d", v.d));
    ORCH_REQUIRE_OK(x->set_param("e", v.e));
    auto xs = random_floats(n, -100, 100);
    write(*x, "x", xs);
    run(*x, s);
    std::vector<double> want(n);
    for (uint32_t i = 0; i < n; ++i)
      want[i] = v.a * double(xs[i]) + double(v.b) + double(v.c) + (v.d ? double(v.e) : -double(v.e));
    check_close(read<double>(*x, "y", n), want, 1e-12, "y = a x + b + c +/- e");
  }

  // The same kernel declared with `a: f32` where the source takes a double is refused by orchc
  // (E0120), instead of reading its parameters at the wrong offsets.
  std::string bad = kMatchSource;
  bad.replace(bad.find("kernel mix(n: u32, a: f64"), std::strlen("kernel mix(n: u32, a: f64"),
              "kernel mix(n: u32, a: f32");
  bad.replace(bad.find("param a: f64"), std::strlen("param a: f64"), "param a: f32");
  std::string log;
  CHECK(orch::test::compile_source("match_bad", bad, &log).empty());
  CHECK(log.find("error[E0120]: parameter `a` of kernel `mix` is declared f32") != std::string::npos);
}

TEST_CASE("a while loop whose body changes its condition runs exactly `rounds` iterations") {
  auto p = load_source("loop", kLoopSource);
  Stream s;
  const uint32_t n = 1000;
  orch::Bindings b;
  b.param("n", n).param("rounds", int32_t(1));
  auto x = instantiate(*p, b, s);
  std::uniform_int_distribution<int32_t> pick(1, 60);
  for (int32_t rounds : {pick(rng()), pick(rng()), int32_t(0), int32_t(1), pick(rng())}) {
    CAPTURE(rounds);
    ORCH_REQUIRE_OK(x->set_param("rounds", rounds));
    auto xs = random_floats(n, -1, 1), ys = random_floats(n, -1, 1);
    write(*x, "x", xs);
    write(*x, "y", ys);
    run(*x, s);
    CHECK(read<uint32_t>(*x, "iters", 1)[0] == uint32_t(rounds));
    CHECK(read<uint32_t>(*x, "odd", 1)[0] == uint32_t((rounds + 1) / 2));
    CHECK(read<int32_t>(*x, "left", 1)[0] == 0);
    // The body adds x * left for left = rounds down to 1, in that order.
    std::vector<float> want = ys;
    for (int32_t k = rounds; k >= 1; --k)
      for (uint32_t i = 0; i < n; ++i) want[i] += xs[i] * float(k);
    check_close(read<float>(*x, "y", n), want, 1e-5, "y = y0 + x * rounds (rounds + 1) / 2");
  }
}

TEST_CASE("a device graph copies between two mapped host buffers (E0503 retired)") {
  auto p = load_source("hostcopy", kHostCopySource);
  Stream s;
  const uint32_t n = 4096;
  auto x = instantiate(*p, orch::Bindings(), s);
  float* a = static_cast<float*>(x->buffer("a_host"));
  float* b = static_cast<float*>(x->buffer("b_host"));
  REQUIRE(a != nullptr);
  REQUIRE(b != nullptr);
  for (int launch = 0; launch < 2; ++launch) {
    CAPTURE(launch);
    auto v = random_floats(n, -10, 10);
    std::copy(v.begin(), v.end(), a);
    std::fill(b, b + n, 0.0f);
    run(*x, s);  // once the stream is synchronized, the tail-launched copy has run
    check_close(std::vector<float>(b, b + n), v, 0, "b_host = a_host");
  }
}

}  // TEST_SUITE("gpu")
