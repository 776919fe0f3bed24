// Kernels of bench/real_workloads.py that use shared memory, as there, for the kernel compiler's
// tests (kernel_compiler_test.cpp, shared_memory_code_test.cpp). kExpertFfn, the MoE expert
// kernel: a k loop over 16 rows of x in shared memory, the kernel whose code nvcc and NVRTC make
// differently.
#pragma once

namespace orch::lowering::test {

inline const char* const kExpertFfn = R"(extern "C" __global__ void expert_ffn(unsigned e, unsigned hidden, const float* x, const float* w,
                                      const int* counts, const int* offsets, const int* order, float* y) {
  extern __shared__ float xs[];  // [16][hidden]
  const int count = counts[e];
  const int* mine = order + offsets[e];
  const float* we = w + (size_t)e * hidden * hidden;
  for (int first = (int)blockIdx.x * 16; first < count; first += (int)gridDim.x * 16) {
    const int rows = min(16, count - first);
    __syncthreads();
    for (unsigned q = threadIdx.x; q < 16 * hidden; q += blockDim.x) {
      const int t = (int)(q / hidden);
      xs[q] = t < rows ? x[(size_t)mine[first + t] * hidden + q % hidden] : 0.0f;
    }
    __syncthreads();
    for (unsigned h = threadIdx.x; h < hidden; h += blockDim.x) {
      float acc[16] = {};
      for (unsigned k = 0; k < hidden; ++k) {
        const float wk = we[(size_t)k * hidden + h];
        #pragma unroll
        for (int t = 0; t < 16; ++t) acc[t] = fmaf(xs[t * hidden + k], wk, acc[t]);
      }
      for (int t = 0; t < rows; ++t) y[(size_t)mine[first + t] * hidden + h] = fmaxf(acc[t], 0.0f);
    }
  }
}
)";


// The SGEMM: shared tiles, everything unrolled, a loop of 256 multiply-adds on 128 shared loads in
// nvcc's PTX. Compiled whole (not -c), it takes 48 registers from NVRTC's PTX and from nvcc's; as
// relocatable code (nvJitLink) 72-74.
inline const char* const kSgemm = R"(extern "C" __global__ void __launch_bounds__(256) sgemm(unsigned n, const float* a, const float* b, float* c) {
  __shared__ float sa[16][68];
  __shared__ float sb[16][64];
  const unsigned tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
  const unsigned row0 = blockIdx.y * 64, col0 = blockIdx.x * 64;
  float acc[4][4] = {};
  for (unsigned k0 = 0; k0 < n; k0 += 16) {
    for (unsigned q = threadIdx.x; q < 1024; q += 256) {
      sa[q & 15][q >> 4] = a[(size_t)(row0 + (q >> 4)) * n + k0 + (q & 15)];
      sb[q >> 6][q & 63] = b[(size_t)(k0 + (q >> 6)) * n + col0 + (q & 63)];
    }
    __syncthreads();
    #pragma unroll
    for (int k = 0; k < 16; ++k) {
      float av[4], bv[4];
      #pragma unroll
      for (int i = 0; i < 4; ++i) av[i] = sa[k][ty + 16 * i];
      #pragma unroll
      for (int j = 0; j < 4; ++j) bv[j] = sb[k][tx + 16 * j];
      #pragma unroll
      for (int i = 0; i < 4; ++i)
        #pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    __syncthreads();
  }
  #pragma unroll
  for (int i = 0; i < 4; ++i)
    #pragma unroll
    for (int j = 0; j < 4; ++j) c[(size_t)(row0 + ty + 16 * i) * n + col0 + tx + 16 * j] = acc[i][j];
}
)";

// The heat solver's max_change: a grid-stride loop of global loads, then a block maximum through
// shared memory outside any loop.
inline const char* const kMaxChange = R"(extern "C" __global__ void max_change(unsigned n, const float* a, const float* b, float* residual) {
  const unsigned step = 4 * blockDim.x;
  float m = 0.0f;
  for (unsigned base = blockIdx.x * step + threadIdx.x; base < n; base += gridDim.x * step) {
    float d[4];
    #pragma unroll
    for (int k = 0; k < 4; ++k) {
      const unsigned i = base + k * blockDim.x;
      d[k] = i < n ? a[i] - b[i] : 0.0f;
    }
    #pragma unroll
    for (int k = 0; k < 4; ++k) m = fmaxf(m, fabsf(d[k]));
  }
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_down_sync(0xffffffffu, m, o));
  __shared__ float warp_max[32];
  if ((threadIdx.x & 31) == 0) warp_max[threadIdx.x >> 5] = m;
  __syncthreads();
  if (threadIdx.x < 32) {
    m = threadIdx.x < (blockDim.x >> 5) ? warp_max[threadIdx.x] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_down_sync(0xffffffffu, m, o));
    if (threadIdx.x == 0) atomicMax(reinterpret_cast<int*>(residual), __float_as_int(m));
  }
}
)";

}  // namespace orch::lowering::test
