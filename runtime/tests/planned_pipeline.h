// The pipeline the memory plan's runtime tests run (arena_test.cpp without a GPU, and
// memory_plan_gpu_test.cpp on one), with its CPU reference: 32 stages of integer kernels with a
// residual read every 4 stages, an if/else whose two sides each have a temporary, a `while`
// loop with a temporary of its own, and a result. With the plan, the 32 temporaries, the two
// branch temporaries, the loop's and the final result share an arena; `x` (the input) and `y`
// (written on either side of the branch only) are allocated alone. Exact arithmetic (u32,
// wrapping), so any byte another buffer left behind shows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace orch::test {

constexpr int kPlannedStages = 32;

inline std::string planned_pipeline() {
  std::string s = R"(pipeline planned
param n: u32 = 1048576
param rounds: u32 = 3
buffer x: u32[n]
buffer y: u32[n]
buffer e1: u32[n]
buffer e2: u32[n]
buffer acc: u32[n]
buffer w: u32[n]
buffer out: u32[n]
buffer flag: u32
buffer iters: u32
kernel stage(n: u32, k: u32, a: in u32[], b: out u32[]) source """
extern "C" __global__ void stage(unsigned n, unsigned k, const unsigned* a, unsigned* b) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) b[i] = a[i] * 2654435761u + k + i;
}
"""
kernel mix(n: u32, k: u32, a: in u32[], c: in u32[], b: out u32[]) source """
extern "C" __global__ void mix(unsigned n, unsigned k, const unsigned* a, const unsigned* c, unsigned* b) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) b[i] = (a[i] ^ (c[(unsigned)(((unsigned long long)i * 7919ull + k) % n)] >> 3)) + k;
}
"""
kernel decide(a: in u32[], f: out u32) source """
extern "C" __global__ void decide(const unsigned* a, unsigned* f) {
  if (blockIdx.x == 0 && threadIdx.x == 0) *f = a[0] & 1u;
}
"""
kernel fold(n: u32, k: u32, v: in u32[], acc: inout u32[]) source """
extern "C" __global__ void fold(unsigned n, unsigned k, const unsigned* v, unsigned* acc) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) acc[i] = acc[i] * 31u + v[i] + k;
}
"""
)";
  for (int i = 1; i <= kPlannedStages; ++i) s += "buffer t" + std::to_string(i) + ": u32[n]\n";
  s += "graph main {\n";
  for (int i = 1; i <= kPlannedStages; ++i) {
    const std::string in = i == 1 ? "x" : "t" + std::to_string(i - 1), k = std::to_string(i);
    if (i % 4 == 0 && i > 4)
      s += "  mix<<<ceil_div(n, 256), 256>>>(n, " + k + ", " + in + ", t" + std::to_string(i - 4) + ", t" +
           std::to_string(i) + ")\n";
    else
      s += "  stage<<<ceil_div(n, 256), 256>>>(n, " + k + ", " + in + ", t" + std::to_string(i) + ")\n";
  }
  s += R"(  decide<<<1, 32>>>(t32, flag)
  if flag != 0 {
    stage<<<ceil_div(n, 256), 256>>>(n, 101, t32, e1)
    mix<<<ceil_div(n, 256), 256>>>(n, 102, e1, t32, y)
  } else {
    stage<<<ceil_div(n, 256), 256>>>(n, 201, t32, e2)
    mix<<<ceil_div(n, 256), 256>>>(n, 202, e2, t31, y)
  }
  stage<<<ceil_div(n, 256), 256>>>(n, 301, y, acc)
  fill iters = 0
  while iters < rounds {
    stage<<<ceil_div(n, 256), 256>>>(n, 401, acc, w)
    fold<<<ceil_div(n, 256), 256>>>(n, 402, w, acc)
    iters += 1
  }
  stage<<<ceil_div(n, 256), 256>>>(n, 501, acc, out)
}
)";
  return s;
}

// y and out for input x, as the pipeline computes them.
struct PlannedResult {
  std::vector<uint32_t> y, out;
};

inline PlannedResult planned_reference(const std::vector<uint32_t>& x, uint32_t rounds) {
  const uint32_t n = static_cast<uint32_t>(x.size());
  auto stage = [n](uint32_t k, const std::vector<uint32_t>& a) {
    std::vector<uint32_t> b(n);
    for (uint32_t i = 0; i < n; ++i) b[i] = a[i] * 2654435761u + k + i;
    return b;
  };
  auto mix = [n](uint32_t k, const std::vector<uint32_t>& a, const std::vector<uint32_t>& c) {
    std::vector<uint32_t> b(n);
    for (uint32_t i = 0; i < n; ++i)
      b[i] = (a[i] ^ (c[static_cast<uint32_t>((uint64_t{i} * 7919u + k) % n)] >> 3)) + k;
    return b;
  };
  std::vector<std::vector<uint32_t>> t(kPlannedStages + 1);
  t[0] = x;
  for (int i = 1; i <= kPlannedStages; ++i)
    t[i] = i % 4 == 0 && i > 4 ? mix(static_cast<uint32_t>(i), t[i - 1], t[i - 4]) : stage(static_cast<uint32_t>(i), t[i - 1]);
  PlannedResult r;
  const std::vector<uint32_t>& last = t[kPlannedStages];
  if (last[0] & 1u) r.y = mix(102, stage(101, last), last);
  else r.y = mix(202, stage(201, last), t[kPlannedStages - 1]);
  std::vector<uint32_t> acc = stage(301, r.y);
  for (uint32_t round = 0; round < rounds; ++round) {
    const std::vector<uint32_t> w = stage(401, acc);
    for (uint32_t i = 0; i < n; ++i) acc[i] = acc[i] * 31u + w[i] + 402u;
  }
  r.out = stage(501, acc);
  return r;
}

}  // namespace orch::test
