// Launch overhead, in one process on one GPU, against the alternatives a user has:
//   chain: N tiny dependent kernels as (a) stream launches, (b) stream capture, (c) a graph
//          built by hand with the CUDA runtime API, (d) the orch pipeline;
//   loop:  N iterations as (e) a host loop copying a flag back each time, (f) a hand-built
//          WHILE conditional node, (g) orch's `while kernel`, (h) orch's `while <expr>`.
// Prints µs per kernel / iteration (median of repeats, timed with events) and the ratios
// (d)/(c), (g)/(f). The orch pipelines are written here and compiled with orchc at start.
//   launch_bench ORCHC [N]
#include <cuda_runtime.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "orch/runtime.h"

#define CHECK_CUDA(call)                                                                    \
  do {                                                                                      \
    cudaError_t e_ = (call);                                                                \
    if (e_ != cudaSuccess) {                                                                \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                         \
    }                                                                                       \
  } while (0)

// The same code orch compiles with NVRTC for the pipeline versions.
#define TICK_SOURCE \
  "extern \"C\" __global__ void tick(int* c) { if (threadIdx.x == 0) c[0] += 1; }"
extern "C" __global__ void tick(int* c) {
  if (threadIdx.x == 0) c[0] += 1;
}

extern "C" __global__ void count_down(int* counter, cudaGraphConditionalHandle h) {
  if (threadIdx.x == 0) {
    int left = --(*counter);
    cudaGraphSetConditional(h, left > 0);
  }
}

extern "C" __global__ void count_down_flag(int* counter, int* flag) {
  if (threadIdx.x == 0) *flag = --(*counter) > 0;
}

namespace {

int reps = 20;

template <class F>
double median_us(cudaStream_t s, F&& run) {
  cudaEvent_t a, b;
  CHECK_CUDA(cudaEventCreate(&a));
  CHECK_CUDA(cudaEventCreate(&b));
  run();  // warm-up
  CHECK_CUDA(cudaStreamSynchronize(s));
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    CHECK_CUDA(cudaEventRecord(a, s));
    run();
    CHECK_CUDA(cudaEventRecord(b, s));
    CHECK_CUDA(cudaEventSynchronize(b));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1000.0);
  }
  std::sort(t.begin(), t.end());
  CHECK_CUDA(cudaEventDestroy(a));
  CHECK_CUDA(cudaEventDestroy(b));
  return t[t.size() / 2];
}

std::unique_ptr<orch::Executable> compile_and_instantiate(const std::string& orchc,
                                                           const std::string& name,
                                                           const std::string& text,
                                                           int* buffer, cudaStream_t s,
                                                           const char* buffer_name) {
  std::string dir = "/tmp/orch_launch_bench_" + std::to_string(getpid());
  std::system(("mkdir -p " + dir).c_str());
  std::string src = dir + "/" + name + ".orch", bin = dir + "/" + name + ".bin";
  std::ofstream(src) << text;
  std::string cmd = orchc + " " + src + " -o " + bin;
  if (std::system(cmd.c_str()) != 0) {
    std::fprintf(stderr, "launch_bench: %s failed\n", cmd.c_str());
    std::exit(1);
  }
  auto pipeline = orch::Pipeline::load(bin);
  if (!pipeline) {
    std::fprintf(stderr, "launch_bench: %s\n", pipeline.error().to_string().c_str());
    std::exit(1);
  }
  orch::Bindings b;
  b.buffer(buffer_name, buffer, sizeof(int));
  auto exec = pipeline.value()->instantiate(b, s);
  if (!exec) {
    std::fprintf(stderr, "launch_bench: %s\n", exec.error().to_string().c_str());
    std::exit(1);
  }
  return std::move(exec.value());
}

void launch(orch::Executable& e, cudaStream_t s) {
  orch::Status st = e.launch(s);
  if (!st) {
    std::fprintf(stderr, "launch_bench: %s\n", st.error().to_string().c_str());
    std::exit(1);
  }
}

int read_int(const int* d) {
  int v = 0;
  CHECK_CUDA(cudaMemcpy(&v, d, sizeof v, cudaMemcpyDeviceToHost));
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: launch_bench ORCHC [N]\n");
    return 2;
  }
  std::string orchc = argv[1];
  const int n = argc > 2 ? std::atoi(argv[2]) : 1000;
  int device = 0;
  cudaDeviceProp prop;
  if (cudaGetDevice(&device) != cudaSuccess || cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
    std::printf("launch_bench: no CUDA device; skipped\n");
    return 0;
  }
  int driver = 0;
  CHECK_CUDA(cudaDriverGetVersion(&driver));
  cudaStream_t s;
  CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  int* c = nullptr;
  int* flag = nullptr;
  CHECK_CUDA(cudaMalloc(&c, sizeof(int)));
  CHECK_CUDA(cudaMalloc(&flag, sizeof(int)));

  // ---- chain of n dependent kernels ----
  double stream_us = median_us(s, [&] {
    for (int i = 0; i < n; ++i) tick<<<1, 32, 0, s>>>(c);
  });
  cudaGraph_t captured;
  CHECK_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < n; ++i) tick<<<1, 32, 0, s>>>(c);
  CHECK_CUDA(cudaStreamEndCapture(s, &captured));
  cudaGraphExec_t captured_exec;
  CHECK_CUDA(cudaGraphInstantiate(&captured_exec, captured, 0));
  CHECK_CUDA(cudaGraphUpload(captured_exec, s));
  double capture_us = median_us(s, [&] { CHECK_CUDA(cudaGraphLaunch(captured_exec, s)); });

  cudaGraph_t hand;
  CHECK_CUDA(cudaGraphCreate(&hand, 0));
  cudaGraphNode_t prev = nullptr;
  for (int i = 0; i < n; ++i) {
    void* args[] = {&c};
    cudaKernelNodeParams p = {};
    p.func = reinterpret_cast<void*>(tick);
    p.gridDim = dim3(1);
    p.blockDim = dim3(32);
    p.kernelParams = args;
    cudaGraphNode_t node;
    CHECK_CUDA(cudaGraphAddKernelNode(&node, hand, prev ? &prev : nullptr, prev ? 1 : 0, &p));
    prev = node;
  }
  cudaGraphExec_t hand_exec;
  CHECK_CUDA(cudaGraphInstantiate(&hand_exec, hand, 0));
  CHECK_CUDA(cudaGraphUpload(hand_exec, s));
  double hand_us = median_us(s, [&] { CHECK_CUDA(cudaGraphLaunch(hand_exec, s)); });

  std::string chain = "pipeline chain\nbuffer c: i32\nkernel tick(c: inout i32) source \"\"\"" +
                      std::string(TICK_SOURCE) + "\"\"\"\ngraph main {\n";
  for (int i = 0; i < n; ++i) chain += "  tick<<<1, 32>>>(c)\n";
  chain += "}\n";
  auto chain_exec = compile_and_instantiate(orchc, "chain", chain, c, s, "c");
  CHECK_CUDA(cudaMemset(c, 0, sizeof(int)));
  launch(*chain_exec, s);
  CHECK_CUDA(cudaStreamSynchronize(s));
  if (read_int(c) != n) {
    std::fprintf(stderr, "launch_bench: orch chain ran %d kernels, expected %d\n", read_int(c), n);
    return 1;
  }
  double orch_us = median_us(s, [&] { launch(*chain_exec, s); });

  // ---- loop of n iterations ----
  double host_loop_us = median_us(s, [&] {
    int one = n;
    CHECK_CUDA(cudaMemcpyAsync(c, &one, sizeof one, cudaMemcpyHostToDevice, s));
    int h = 1;
    while (h) {
      count_down_flag<<<1, 32, 0, s>>>(c, flag);
      CHECK_CUDA(cudaMemcpyAsync(&h, flag, sizeof h, cudaMemcpyDeviceToHost, s));
      CHECK_CUDA(cudaStreamSynchronize(s));
    }
  });

  cudaGraph_t loop;
  CHECK_CUDA(cudaGraphCreate(&loop, 0));
  cudaGraphConditionalHandle handle;
  CHECK_CUDA(cudaGraphConditionalHandleCreate(&handle, loop, 1, cudaGraphCondAssignDefault));
  cudaMemsetParams reset = {};
  reset.dst = c;
  reset.value = static_cast<unsigned>(n);
  reset.elementSize = 4;
  reset.width = 1;
  reset.height = 1;
  cudaGraphNode_t set_node;
  CHECK_CUDA(cudaGraphAddMemsetNode(&set_node, loop, nullptr, 0, &reset));
  cudaGraphNodeParams cond = {};
  cond.type = cudaGraphNodeTypeConditional;
  cond.conditional.handle = handle;
  cond.conditional.type = cudaGraphCondTypeWhile;
  cond.conditional.size = 1;
  cudaGraphNode_t while_node;
  CHECK_CUDA(cudaGraphAddNode(&while_node, loop, &set_node, nullptr, 1, &cond));
  {
    void* args[] = {&c, &handle};
    cudaKernelNodeParams p = {};
    p.func = reinterpret_cast<void*>(count_down);
    p.gridDim = dim3(1);
    p.blockDim = dim3(32);
    p.kernelParams = args;
    cudaGraphNode_t body_node;
    CHECK_CUDA(cudaGraphAddKernelNode(&body_node, cond.conditional.phGraph_out[0], nullptr, 0, &p));
  }
  cudaGraphExec_t loop_exec;
  CHECK_CUDA(cudaGraphInstantiate(&loop_exec, loop, 0));
  CHECK_CUDA(cudaGraphUpload(loop_exec, s));
  double while_us = median_us(s, [&] { CHECK_CUDA(cudaGraphLaunch(loop_exec, s)); });

  std::string loop_kernel =
      "pipeline loop_kernel\nparam n: i32 = " + std::to_string(n) +
      "\nbuffer c: i32\n"
      "kernel count_down(c: inout i32, h: cond) source \"\"\"\n"
      "extern \"C\" __global__ void count_down(int* counter, cudaGraphConditionalHandle h) {\n"
      "  if (threadIdx.x == 0) { int left = --(*counter); cudaGraphSetConditional(h, left > 0); }\n"
      "}\n\"\"\"\n"
      "graph main {\n  fill c = n\n  while kernel {\n    count_down<<<1, 32>>>(c, cond)\n  }\n}\n";
  auto loop_kernel_exec = compile_and_instantiate(orchc, "loop_kernel", loop_kernel, c, s, "c");
  double orch_while_kernel_us = median_us(s, [&] { launch(*loop_kernel_exec, s); });

  std::string loop_expr =
      "pipeline loop_expr\nparam n: i32 = " + std::to_string(n) +
      "\nbuffer c: i32\n"
      "kernel dec(c: inout i32) source \"\"\"\n"
      "extern \"C\" __global__ void dec(int* c) { if (threadIdx.x == 0) --(*c); }\n\"\"\"\n"
      "graph main {\n  fill c = n\n  while c > 0 {\n    dec<<<1, 32>>>(c)\n  }\n}\n";
  auto loop_expr_exec = compile_and_instantiate(orchc, "loop_expr", loop_expr, c, s, "c");
  launch(*loop_expr_exec, s);
  CHECK_CUDA(cudaStreamSynchronize(s));
  if (read_int(c) != 0) {
    std::fprintf(stderr, "launch_bench: orch while left c = %d, expected 0\n", read_int(c));
    return 1;
  }
  double orch_while_expr_us = median_us(s, [&] { launch(*loop_expr_exec, s); });

  std::printf("\nlaunch_bench: %s, driver %d.%d, N = %d, median of %d\n", prop.name,
              driver / 1000, (driver % 1000) / 10, n, reps);
  std::printf("%-44s %10s\n", "chain of N dependent kernels", "us/kernel");
  std::printf("%-44s %10.3f\n", "(a) stream launches", stream_us / n);
  std::printf("%-44s %10.3f\n", "(b) stream capture, graph launch", capture_us / n);
  std::printf("%-44s %10.3f\n", "(c) hand-built graph", hand_us / n);
  std::printf("%-44s %10.3f\n", "(d) orch pipeline", orch_us / n);
  std::printf("%-44s %10.3f  (target <= 1.02)\n", "ratio (d)/(c)", orch_us / hand_us);
  std::printf("%-44s %10s\n", "loop of N iterations", "us/iter");
  std::printf("%-44s %10.3f\n", "(e) host loop, flag copied back", host_loop_us / n);
  std::printf("%-44s %10.3f\n", "(f) hand-built WHILE node", while_us / n);
  std::printf("%-44s %10.3f\n", "(g) orch `while kernel`", orch_while_kernel_us / n);
  std::printf("%-44s %10.3f\n", "(h) orch `while c > 0` (condition kernel)", orch_while_expr_us / n);
  std::printf("%-44s %10.3f\n", "ratio (g)/(f)", orch_while_kernel_us / while_us);
  std::printf("%-44s %10.3f\n", "ratio (e)/(g)", host_loop_us / orch_while_kernel_us);

  chain_exec.reset();
  loop_kernel_exec.reset();
  loop_expr_exec.reset();
  CHECK_CUDA(cudaGraphExecDestroy(captured_exec));
  CHECK_CUDA(cudaGraphExecDestroy(hand_exec));
  CHECK_CUDA(cudaGraphExecDestroy(loop_exec));
  CHECK_CUDA(cudaGraphDestroy(captured));
  CHECK_CUDA(cudaGraphDestroy(hand));
  CHECK_CUDA(cudaGraphDestroy(loop));
  CHECK_CUDA(cudaFree(c));
  CHECK_CUDA(cudaFree(flag));
  CHECK_CUDA(cudaStreamDestroy(s));
  return 0;
}
