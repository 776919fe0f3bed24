// The memory plan on the GPU (issue 24): the same pipeline compiled with the plan (37 buffers in
// one arena) and with --no-memory-plan, run on fresh random inputs, gives exactly the CPU
// reference both ways: at the params' defaults (the artifact's layout), at another size (the
// runtime's own layout), over several launches with new inputs, after set_param (fewer rounds,
// a smaller n) and after a buffer of the arena is rebound to the application's memory. And the
// arena takes the device memory the plan promised.
//
// Suite "gpu": skipped, with the reason printed, where there is no GPU.
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "orch/runtime.h"
#include "runtime/tests/gpu_util.h"
#include "runtime/tests/planned_pipeline.h"
#include "runtime/tests/test_util.h"

using namespace orch::test;

namespace {

std::vector<uint32_t> random_u32(size_t n) {
  std::vector<uint32_t> v(n);
  for (uint32_t& x : v) x = static_cast<uint32_t>(rng()());
  return v;
}

// Launches `x` once on fresh random input and checks y and out against the CPU (the input
// decides which side of the branch runs: over several launches both do).
void launch_and_check(orch::Executable& x, cudaStream_t s, uint32_t n, uint32_t rounds, const char* label) {
  CAPTURE(label);
  CAPTURE(n);
  CAPTURE(rounds);
  const std::vector<uint32_t> in = random_u32(n);
  write(x, "x", in);
  run(x, s);
  const PlannedResult want = planned_reference(in, rounds);
  const std::vector<uint32_t> y = read<uint32_t>(x, "y", n);
  const std::vector<uint32_t> out = read<uint32_t>(x, "out", n);
  size_t wrong_y = 0, wrong_out = 0;
  for (uint32_t i = 0; i < n; ++i) {
    wrong_y += y[i] != want.y[i];
    wrong_out += out[i] != want.out[i];
  }
  CHECK(wrong_y == 0);
  CHECK(wrong_out == 0);
}

}  // namespace

TEST_SUITE("gpu") {

TEST_CASE("memory plan: planned and unplanned give the CPU's results, in less memory with the plan") {
  auto planned = load_source("planned_gpu", planned_pipeline(), "");
  auto alone = load_source("planned_gpu_off", planned_pipeline(), "--no-memory-plan");
  Stream s;
  for (uint32_t n : {1048576u, 100003u}) {
    orch::Bindings b;
    b.param("n", n);
    auto with = instantiate(*planned, b, s);
    auto without = instantiate(*alone, b, s);
    const orch::Executable::MemoryUse m = with->memory_use(), m0 = without->memory_use();
    MESSAGE("n = " << n << ": device memory " << m.device_bytes << " bytes with the plan (an arena of "
                   << m.arena_bytes << " bytes for " << m.arena_buffers << " buffers of " << m.arena_buffer_bytes
                   << " bytes), " << m0.device_bytes << " without");
    CHECK(m.arena_buffers == 37);
    CHECK(m0.arena_buffers == 0);
    CHECK(m.device_bytes * 2 <= m0.device_bytes);
    for (int launch = 0; launch < 4; ++launch) {
      launch_and_check(*with, s, n, 3, "planned");
      launch_and_check(*without, s, n, 3, "alone");
    }
    // Fewer rounds, then a smaller n: patched in place; the arena's buffers only shrink.
    ORCH_REQUIRE_OK(with->set_param("rounds", 5u));
    ORCH_REQUIRE_OK(without->set_param("rounds", 5u));
    launch_and_check(*with, s, n, 5, "planned, 5 rounds");
    launch_and_check(*without, s, n, 5, "alone, 5 rounds");
    ORCH_REQUIRE_OK(with->set_param("n", n / 2));
    ORCH_REQUIRE_OK(without->set_param("n", n / 2));
    launch_and_check(*with, s, n / 2, 5, "planned, half n");
    launch_and_check(*without, s, n / 2, 5, "alone, half n");
    // Growing a buffer of the arena is refused, as for any buffer the runtime allocated.
    orch::Status grow = with->set_param("n", n + 1);
    CHECK(grow.error().code() == orch::ErrorCode::Unsupported);
    // A buffer of the arena rebound to the application's memory leaves the arena.
    DeviceBuffer own(size_t{n} * 4);
    ORCH_REQUIRE_OK(with->rebind("t5", own.p, own.bytes));
    CHECK(with->memory_use().arena_buffers == 36);
    launch_and_check(*with, s, n / 2, 5, "planned, t5 rebound");
  }
}

TEST_CASE("memory plan: a buffer bound by the application stays out of the arena from the start") {
  auto planned = load_source("planned_gpu", planned_pipeline(), "");
  Stream s;
  const uint32_t n = 65536;
  DeviceBuffer t7(size_t{n} * 4), out(size_t{n} * 4);
  orch::Bindings b;
  b.param("n", n).buffer("t7", t7.p, t7.bytes).buffer("out", out.p, out.bytes);
  auto x = instantiate(*planned, b, s);
  CHECK(x->memory_use().arena_buffers == 35);
  CHECK(x->buffer("out") == out.p);
  for (int launch = 0; launch < 3; ++launch) launch_and_check(*x, s, n, 3, "t7 and out bound");
}

TEST_CASE("memory plan: time per launch with and without the plan (printed, for docs/performance.md)") {
  auto planned = load_source("planned_gpu", planned_pipeline(), "");
  auto alone = load_source("planned_gpu_off", planned_pipeline(), "--no-memory-plan");
  Stream s;
  orch::Bindings b;
  auto with = instantiate(*planned, b, s);
  auto without = instantiate(*alone, b, s);
  cudaEvent_t start, stop;
  CUDA_REQUIRE(cudaEventCreate(&start));
  CUDA_REQUIRE(cudaEventCreate(&stop));
  // Alternating rounds of 50 launches each, the median round per variant.
  std::vector<float> on, off;
  for (int round = 0; round < 11; ++round) {
    for (int variant = 0; variant < 2; ++variant) {
      orch::Executable& x = variant == 0 ? *with : *without;
      run(x, s);  // warm
      CUDA_REQUIRE(cudaEventRecord(start, s));
      for (int i = 0; i < 50; ++i) ORCH_REQUIRE_OK(x.launch(s));
      CUDA_REQUIRE(cudaEventRecord(stop, s));
      CUDA_REQUIRE(cudaEventSynchronize(stop));
      float ms = 0;
      CUDA_REQUIRE(cudaEventElapsedTime(&ms, start, stop));
      (variant == 0 ? on : off).push_back(ms * 1000 / 50);
    }
  }
  std::sort(on.begin(), on.end());
  std::sort(off.begin(), off.end());
  MESSAGE("time per launch of the planned pipeline at the defaults (n = 2^20): " << on[on.size() / 2] << " us with the plan, "
                                                                     << off[off.size() / 2] << " us without");
  CUDA_REQUIRE(cudaEventDestroy(start));
  CUDA_REQUIRE(cudaEventDestroy(stop));
}

}  // TEST_SUITE("gpu")
