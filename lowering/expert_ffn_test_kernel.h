// The MoE expert kernel of bench/real_workloads.py, for the kernel compiler's tests
// (kernel_compiler_test.cpp, shared_memory_code_test.cpp): a k loop over 16 rows of x in shared
// memory, the kernel whose code nvcc and NVRTC make differently.
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

}  // namespace orch::lowering::test
