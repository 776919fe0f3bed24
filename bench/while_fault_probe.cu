// Does the driver fault when WHILE conditional nodes run at the same time? Plain CUDA, no orch.
//
// On an H200 with driver 580.159.04 (CUDA 13.0, 2026-11-28) it does: with two or more WHILE
// nodes free of each other in one graph, or one in each of two graphs launched on two streams,
// and bodies that run more than once, some launches in every few hundred end in
// cudaErrorLaunchFailure, and a few thousand launches in a row crash cuGraphLaunch on the host.
// Loops ordered one after another, bodies that run once, and IF nodes never fault. orch keeps
// its loops apart because of it (lowering/one_loop_at_a_time.cpp, runtime/src/loop_order.h);
// scripts/gpu-check runs this probe to show whether the driver it runs on still needs that.
//
//   while_fault_probe [LAUNCHES]     # each case in a child process; prints one line per case
#include <cuda_runtime.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

#define CHECK_OR_EXIT(x)                                                            \
  do {                                                                              \
    cudaError_t e_ = (x);                                                           \
    if (e_ != cudaSuccess) {                                                        \
      std::printf("%s: %s", #x, cudaGetErrorName(e_));                              \
      std::exit(e_ == cudaErrorLaunchFailure ? 3 : 4);                              \
    }                                                                               \
  } while (0)

__global__ void start(int* c, int k, cudaGraphConditionalHandle h) {
  *c = k;
  cudaGraphSetConditional(h, k > 0);
}
__global__ void step(int* c, int* total, cudaGraphConditionalHandle h) {
  const int left = --*c;
  *total += 1;
  cudaGraphSetConditional(h, left > 0);
}

// `start` then `while` (body: `step`) into `g`, after `after` (may be null); returns the WHILE node.
cudaGraphNode_t add_loop(cudaGraph_t g, cudaGraphNode_t after, int* c, int* total, int iterations) {
  cudaGraphConditionalHandle h;
  CHECK_OR_EXIT(cudaGraphConditionalHandleCreate(&h, g, 0, 0));
  void* start_args[] = {&c, &iterations, &h};
  cudaKernelNodeParams kp = {};
  kp.func = reinterpret_cast<void*>(start);
  kp.gridDim = kp.blockDim = dim3(1);
  kp.kernelParams = start_args;
  cudaGraphNode_t s;
  CHECK_OR_EXIT(cudaGraphAddKernelNode(&s, g, &after, after ? 1 : 0, &kp));
  cudaGraphNodeParams cp = {};
  cp.type = cudaGraphNodeTypeConditional;
  cp.conditional.handle = h;
  cp.conditional.type = cudaGraphCondTypeWhile;
  cp.conditional.size = 1;
  cudaGraphNode_t w;
  CHECK_OR_EXIT(cudaGraphAddNode(&w, g, &s, nullptr, 1, &cp));
  void* step_args[] = {&c, &total, &h};
  kp.func = reinterpret_cast<void*>(step);
  kp.kernelParams = step_args;
  cudaGraphNode_t b;
  CHECK_OR_EXIT(cudaGraphAddKernelNode(&b, cp.conditional.phGraph_out[0], nullptr, 0, &kp));
  return w;
}

enum class Case { Ordered, Free, TwoStreams, OnceEach };
const char* describe(Case c) {
  switch (c) {
    case Case::Ordered: return "4 WHILE loops one after another in one graph, 3 iterations each";
    case Case::Free: return "4 WHILE loops free of each other in one graph, 3 iterations each";
    case Case::TwoStreams: return "2 graphs of one WHILE loop each on 2 streams, 3 iterations each";
    case Case::OnceEach: return "4 WHILE loops free of each other in one graph, 1 iteration each";
  }
  return "?";
}

// One case, in this (child) process: 0 when every count came out right.
int run_case(Case c, int launches) {
  const int loops = 4, iterations = c == Case::OnceEach ? 1 : 3;
  int* d = nullptr;
  CHECK_OR_EXIT(cudaMalloc(&d, sizeof(int) * 2 * loops));
  CHECK_OR_EXIT(cudaMemset(d, 0, sizeof(int) * 2 * loops));
  const int graphs = c == Case::TwoStreams ? 2 : 1;
  std::vector<cudaGraphExec_t> exec(graphs);
  std::vector<cudaStream_t> streams(graphs);
  int made = 0;
  for (int i = 0; i < graphs; ++i) {
    cudaGraph_t g;
    CHECK_OR_EXIT(cudaGraphCreate(&g, 0));
    cudaGraphNode_t last = nullptr;
    for (int k = 0; k < (c == Case::TwoStreams ? 1 : loops); ++k, ++made) {
      cudaGraphNode_t w = add_loop(g, c == Case::Ordered ? last : nullptr, d + 2 * made, d + 2 * made + 1, iterations);
      last = w;
    }
    CHECK_OR_EXIT(cudaGraphInstantiate(&exec[i], g, 0));
    CHECK_OR_EXIT(cudaStreamCreateWithFlags(&streams[i], cudaStreamNonBlocking));
  }
  for (int n = 0; n < launches; ++n)
    for (int i = 0; i < graphs; ++i) CHECK_OR_EXIT(cudaGraphLaunch(exec[i], streams[i]));
  CHECK_OR_EXIT(cudaDeviceSynchronize());
  std::vector<int> h(2 * made);
  CHECK_OR_EXIT(cudaMemcpy(h.data(), d, sizeof(int) * h.size(), cudaMemcpyDeviceToHost));
  for (int k = 0; k < made; ++k)
    if (h[2 * k] != 0 || h[2 * k + 1] != launches * iterations) {
      std::printf("loop %d ran %d iterations, want %d", k, h[2 * k + 1], launches * iterations);
      return 5;
    }
  std::printf("ok");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const int launches = argc > 1 ? std::atoi(argv[1]) : 3000;
  if (launches <= 0) {
    std::fprintf(stderr, "usage: %s [LAUNCHES > 0]\n", argv[0]);
    return 2;
  }
  int faults = 0;
  for (Case c : {Case::Ordered, Case::OnceEach, Case::Free, Case::TwoStreams}) {
    std::printf("%-68s %d launches: ", describe(c), launches);
    std::fflush(stdout);
    const pid_t child = fork();  // before any CUDA call in this process
    if (child == 0) {
      const int rc = run_case(c, launches);
      std::fflush(stdout);
      _exit(rc);
    }
    int status = 0;
    waitpid(child, &status, 0);
    if (WIFSIGNALED(status)) std::printf("crashed (signal %d)", WTERMSIG(status));
    const bool fault = WIFSIGNALED(status) || WEXITSTATUS(status) == 3 || WEXITSTATUS(status) == 5;
    faults += fault && (c == Case::Free || c == Case::TwoStreams);
    std::printf("\n");
  }
  std::printf("concurrent WHILE loops %s on this driver\n", faults ? "FAULT" : "ran correctly");
  return 0;
}
