// Does compute-sanitizer synccheck check barriers in the body of a CUDA graph WHILE node?
// Plain CUDA, no orch: one kernel with a __syncthreads() between uniform code, launched as a
// graph's only kernel node ("top"), as the body of an IF node ("if") and as the body of a WHILE
// node that runs it `iterations` times ("while"). Every thread reaches the barrier; the result
// is checked. scripts/gpu-check runs each mode plainly and under synccheck: with CUDA 13.0 and
// driver 580.159.04 on an H200 (2026-11-23), "top" is clean and "while" is reported as "Barrier
// error detected. Divergent thread(s) in warp" at the barrier, from the first iteration on, so
// synccheck cannot check the kernels of orch's unrolled loops (which only exist in WHILE
// bodies); gpu-check notices when that changes. "if" was clean under synccheck in one run and
// ended in an illegal address in another (it is exact without the tool).
//   nvcc -arch=sm_90 scripts/synccheck_while_body.cu -o synccheck_while_body
//   ./synccheck_while_body top|if|while
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>

#define CHECK(x)                                                                    \
  do {                                                                              \
    cudaError_t e_ = (x);                                                           \
    if (e_ != cudaSuccess) {                                                        \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                 \
      return 1;                                                                     \
    }                                                                               \
  } while (0)

// a[t] = a[t] * K + c; every thread passes the barrier; then thread 0 decrements c.
__global__ void stir(int* c, unsigned* a) {
  const unsigned k = static_cast<unsigned>(*c);
  a[threadIdx.x] = a[threadIdx.x] * 2654435761u + k;
  __syncthreads();
  if (threadIdx.x == 0) *c = static_cast<int>(k) - 1;
}

__global__ void set_condition(const int* c, cudaGraphConditionalHandle h) {
  if (threadIdx.x == 0) cudaGraphSetConditional(h, *c > 0);
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  const bool top = !std::strcmp(mode, "top"), is_if = !std::strcmp(mode, "if"), is_while = !std::strcmp(mode, "while");
  if (!top && !is_if && !is_while) {
    std::fprintf(stderr, "usage: synccheck_while_body top|if|while\n");
    return 2;
  }
  const int iterations = 3, threads = 256;
  int* c = nullptr;
  unsigned* a = nullptr;
  CHECK(cudaMalloc(&c, sizeof(int)));
  CHECK(cudaMalloc(&a, threads * sizeof(unsigned)));
  unsigned host[threads];
  for (int i = 0; i < threads; ++i) host[i] = 2654435761u * static_cast<unsigned>(i + 1) + 12345u;
  CHECK(cudaMemcpy(a, host, sizeof host, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(c, &iterations, sizeof(int), cudaMemcpyHostToDevice));

  cudaGraph_t g;
  CHECK(cudaGraphCreate(&g, 0));
  cudaGraph_t body = g;
  cudaGraphConditionalHandle h = 0;
  if (!top) {
    CHECK(cudaGraphConditionalHandleCreate(&h, g, 1, cudaGraphCondAssignDefault));
    cudaGraphNodeParams cond = {};
    cond.type = cudaGraphNodeTypeConditional;
    cond.conditional.handle = h;
    cond.conditional.type = is_while ? cudaGraphCondTypeWhile : cudaGraphCondTypeIf;
    cond.conditional.size = 1;
    cudaGraphNode_t node;
    CHECK(cudaGraphAddNode(&node, g, nullptr, nullptr, 0, &cond));
    body = cond.conditional.phGraph_out[0];
  }
  void* stir_args[] = {&c, &a};
  cudaKernelNodeParams k = {};
  k.func = reinterpret_cast<void*>(stir);
  k.gridDim = dim3(1);
  k.blockDim = dim3(threads);
  k.kernelParams = stir_args;
  cudaGraphNode_t stir_node;
  CHECK(cudaGraphAddKernelNode(&stir_node, body, nullptr, 0, &k));
  if (is_while) {
    void* cond_args[] = {&c, &h};
    cudaKernelNodeParams s = {};
    s.func = reinterpret_cast<void*>(set_condition);
    s.gridDim = dim3(1);
    s.blockDim = dim3(32);
    s.kernelParams = cond_args;
    cudaGraphNode_t cond_node;
    CHECK(cudaGraphAddKernelNode(&cond_node, body, &stir_node, 1, &s));
  }
  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiate(&exec, g, 0));
  CHECK(cudaGraphLaunch(exec, 0));
  CHECK(cudaDeviceSynchronize());

  // The CPU's answer: one run at top level or in the IF body, `iterations` in the WHILE body.
  const int runs = is_while ? iterations : 1;
  for (int r = 0; r < runs; ++r)
    for (int i = 0; i < threads; ++i) host[i] = host[i] * 2654435761u + static_cast<unsigned>(iterations - r);
  unsigned got[threads];
  int left = 0;
  CHECK(cudaMemcpy(got, a, sizeof got, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(&left, c, sizeof left, cudaMemcpyDeviceToHost));
  if (std::memcmp(got, host, sizeof got) != 0 || left != iterations - runs) {
    std::fprintf(stderr, "synccheck_while_body %s: wrong result\n", mode);
    return 1;
  }
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(g));
  std::printf("synccheck_while_body %s: %d run(s) of the kernel, exact\n", mode, runs);
  return 0;
}
