// Launch overhead and start-up cost, in one process on one GPU, against the alternatives a user
// has (issue 11). Prints one table, µs per kernel node or loop iteration with ratios:
//   chain of N dependent one-thread kernels: stream launches, stream capture, a graph built by
//     hand (plain edges; programmatic edges into kernels that wait at entry, with and without a
//     trigger at kernel start), orch compiled with each option string, orch with its artifact
//     edited to programmatic edges (the runtime's half of PDL), torch eager and
//     torch.cuda.graph replay of the same chain of tiny ops (bench/torch_bench.py);
//   loop `while c > 0 { step }` of N iterations (step decrements c): a host loop, a hand-built
//     WHILE node (step + condition kernel; and a body that sets the condition itself), the
//     hand-built guarded unroll (the step repeated U = 8 and 16 times in the body, each copy a
//     no-op once c is 0, the condition kernel once per U copies), orch `while kernel`, and orch
//     `while c > 0` with each option string;
//   start-up of the N-kernel chain: orch Pipeline::load + instantiate with each option string
//     against building, instantiating and uploading the same graph by hand (programmatic edges,
//     or plain with --no-pdl), and by hand from orchc's CUBIN with one change each
//     (cudaGraphAddNode; cudaGraphInstantiateFlagUpload; the driver's cuGraphAddKernelNode),
//     which say what the runtime would gain by making the same change, and (s5) the graph orch
//     builds, by hand from the same CUBIN the way the runtime builds it: orch's own cost on top.
// Every time is the median of repeated runs after a warm-up, timed with CUDA events (launches)
// or the host clock around synchronized work (start-up); every result is checked.
//
//   launch_bench ORCHC [N] [--orch-options STRING]... [--torch SCRIPT]
//
// --orch-options (repeatable; default "" and "--no-pdl --unroll 1"): orchc options, one
// compilation each; an option string orchc refuses prints n/a (options that do not exist yet).
// --torch: bench/torch_bench.py (default: the source tree's), run with $PYTHON (else python3).
#include <cuda.h>
#include <cuda_runtime.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench/check_calls.h"
#include "bench/launch_bench_artifact.h"
#include "orch/runtime.h"

#ifndef ORCH_TORCH_BENCH
#define ORCH_TORCH_BENCH "bench/torch_bench.py"
#endif

// The same code orch compiles with NVRTC for the pipeline versions.
#define TICK_SOURCE "extern \"C\" __global__ void tick(int* c) { if (threadIdx.x == 0) c[0] += 1; }"
#define TICK_WAIT_SOURCE                                                  \
  "extern \"C\" __global__ void tick(int* c) {\n"                         \
  "  asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");\n"            \
  "  if (threadIdx.x == 0) c[0] += 1;\n}\n"

extern "C" __global__ void tick(int* c) {
  if (threadIdx.x == 0) c[0] += 1;
}
// Where a kernel that waits at entry (griddepcontrol.wait: programmatic edges let it start early)
// lets the kernels after it launch (griddepcontrol.launch_dependents, i.e.
// cudaTriggerProgrammaticLaunchCompletion): not at all (they launch as it exits), before or after
// its wait, or after its guard.
enum Trigger { kNoTrigger, kTriggerBeforeWait, kTriggerAfterWait, kTriggerAfterGuard };
template <int T>
__device__ __forceinline__ void pdl_wait() {
  if (T == kTriggerBeforeWait) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
  if (T == kTriggerAfterWait) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}
template <int T>
__global__ void tick_pdl(int* c) {
  pdl_wait<T>();
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

// `while c > 0 { step }`: the step, the step that does nothing once the loop is over, and the
// condition.
extern "C" __global__ void step(int* c) {
  if (threadIdx.x == 0) --(*c);
}
extern "C" __global__ void guarded_step(int* c) {
  if (threadIdx.x == 0) {
    const int v = *c;
    if (v > 0) *c = v - 1;
  }
}
template <int T>
__global__ void guarded_step_pdl(int* c) {
  pdl_wait<T>();
  if (threadIdx.x == 0) {
    const int v = *c;
    if (v > 0) *c = v - 1;
  }
}
// orch's guard for a one-block copy: thread 0 decides, the block learns it through a barrier.
template <int T>
__global__ void guarded_step_barrier(int* c) {
  pdl_wait<T>();
  int go = 0;
  if (threadIdx.x == 0) go = *c > 0;
  __syncwarp();
  if (!__syncthreads_or(go)) return;
  if (T == kTriggerAfterGuard) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  if (threadIdx.x == 0) --(*c);
}
extern "C" __global__ void set_condition_wait(const int* c, cudaGraphConditionalHandle h) {
  pdl_wait<kTriggerAfterWait>();
  if (threadIdx.x == 0) cudaGraphSetConditional(h, *c > 0);
}
extern "C" __global__ void set_condition(const int* c, cudaGraphConditionalHandle h) {
  if (threadIdx.x == 0) cudaGraphSetConditional(h, *c > 0);
}

namespace {

int reps = 20;
std::string work_dir;

using Clock = std::chrono::steady_clock;
double us_since(Clock::time_point t) { return std::chrono::duration<double, std::micro>(Clock::now() - t).count(); }
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

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
  CHECK_CUDA(cudaEventDestroy(a));
  CHECK_CUDA(cudaEventDestroy(b));
  return median(t);
}

int read_int(const int* d) {
  int v = 0;
  CHECK_CUDA(cudaMemcpy(&v, d, sizeof v, cudaMemcpyDeviceToHost));
  return v;
}

void expect(bool ok, const std::string& what) {
  if (ok) return;
  std::fprintf(stderr, "launch_bench: wrong result: %s\n", what.c_str());
  std::exit(1);
}

// Compiles `text` with orchc and `options` into work_dir; "" when orchc refuses (with
// `required`, that ends the benchmark).
std::string compile(const std::string& orchc, const std::string& name, const std::string& text,
                    const std::string& options, bool required) {
  const std::string src = work_dir + "/" + name + ".orch", bin = work_dir + "/" + name + ".bin";
  std::ofstream(src) << text;
  const std::string log = work_dir + "/" + name + ".log";
  const std::string cmd = orchc + " " + options + " " + src + " -o " + bin + " >" + log + " 2>&1";
  if (std::system(cmd.c_str()) == 0) return bin;
  std::ifstream in(log);
  std::stringstream s;
  s << in.rdbuf();
  std::fprintf(stderr, "launch_bench: %s failed:\n%s", cmd.c_str(), s.str().c_str());
  if (required) std::exit(1);
  return {};
}

std::unique_ptr<orch::Executable> instantiate(const std::string& bin, int* buffer, cudaStream_t s,
                                              const char* buffer_name) {
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

// The edge between two kernels: full (port 0), or programmatic from `port`
// (cudaGraphKernelNodePortProgrammatic: the upstream kernel's blocks triggered or exited;
// cudaGraphKernelNodePortLaunchCompletion: all its blocks began).
cudaGraphEdgeData kernel_edge(int port) {
  cudaGraphEdgeData edge = {};
  if (port != 0) {
    edge.from_port = static_cast<unsigned char>(port);
    edge.type = cudaGraphDependencyTypeProgrammatic;
  }
  return edge;
}

// A one-block, 32-thread kernel node `fn(args)` after `prev` (none: nullptr), the edge from
// `port` (kernel_edge); cudaGraphAddNode, the call that takes edge data.
cudaGraphNode_t add_node(cudaGraph_t g, cudaGraphNode_t prev, void* fn, void** args, int port = 0) {
  cudaGraphNodeParams p = {};
  p.type = cudaGraphNodeTypeKernel;
  p.kernel.func = fn;
  p.kernel.gridDim = dim3(1);
  p.kernel.blockDim = dim3(32);
  p.kernel.kernelParams = args;
  const cudaGraphEdgeData edge = kernel_edge(port);
  cudaGraphNode_t node;
  CHECK_CUDA(cudaGraphAddNode(&node, g, prev ? &prev : nullptr, prev ? &edge : nullptr, prev ? 1 : 0, &p));
  return node;
}

// A chain of n kernel nodes running `fn(c)`, each edge from `port` (kernel_edge).
cudaGraph_t chain_graph(void* fn, int n, int* c, int port) {
  cudaGraph_t g;
  CHECK_CUDA(cudaGraphCreate(&g, 0));
  cudaGraphNode_t prev = nullptr;
  void* args[] = {&c};
  for (int i = 0; i < n; ++i) prev = add_node(g, prev, fn, args, port);
  return g;
}

// Start-up by hand from orchc's CUBIN, as (s) and with one change each.
enum class LibraryVariant { AddKernelNode, AddNode, InstantiateUploads, DriverAddNode, DriverProgrammatic };
constexpr int kLibraryVariants = 5;
const char* const kLibraryVariantNames[kLibraryVariants] = {
    "(s) by hand from orchc's CUBIN: library load + (r)",
    "(s2) (s), nodes added with cudaGraphAddNode",
    "(s3) (s), instantiate with cudaGraphInstantiateFlagUpload",
    "(s4) (s), nodes added with the driver's cuGraphAddKernelNode",
    "(s5) (s4) with programmatic edges (cuGraphAddNode)",
};

cudaGraphNode_t add_kernel(cudaGraph_t g, cudaGraphNode_t after, void* fn, void** args) {
  cudaKernelNodeParams p = {};
  p.func = fn;
  p.gridDim = dim3(1);
  p.blockDim = dim3(32);
  p.kernelParams = args;
  cudaGraphNode_t node;
  CHECK_CUDA(cudaGraphAddKernelNode(&node, g, after ? &after : nullptr, after ? 1 : 0, &p));
  return node;
}

// `fill c = n; while ... { body }` as a WHILE node whose handle starts at 1 every launch. The
// body: `copies` kernels `body_fn(c)` in a chain, then, with `condition`, the condition kernel;
// without, the body kernel is count_down, which sets the condition itself.
// Edges between body kernels from `port` (kernel_edge); the condition kernel's stays full.
// `condition_fn` and `condition_port`: the condition kernel and its edge.
cudaGraph_t while_graph(int n, int* c, void* body_fn, int copies, bool condition, int port = 0,
                        void* condition_fn = reinterpret_cast<void*>(set_condition), int condition_port = 0) {
  cudaGraph_t g;
  CHECK_CUDA(cudaGraphCreate(&g, 0));
  cudaGraphConditionalHandle h;
  CHECK_CUDA(cudaGraphConditionalHandleCreate(&h, g, 1, cudaGraphCondAssignDefault));
  cudaMemsetParams reset = {};
  reset.dst = c;
  reset.value = static_cast<unsigned>(n);
  reset.elementSize = 4;
  reset.width = 1;
  reset.height = 1;
  cudaGraphNode_t set_node;
  CHECK_CUDA(cudaGraphAddMemsetNode(&set_node, g, nullptr, 0, &reset));
  cudaGraphNodeParams cond = {};
  cond.type = cudaGraphNodeTypeConditional;
  cond.conditional.handle = h;
  cond.conditional.type = cudaGraphCondTypeWhile;
  cond.conditional.size = 1;
  cudaGraphNode_t while_node;
  CHECK_CUDA(cudaGraphAddNode(&while_node, g, &set_node, nullptr, 1, &cond));
  cudaGraph_t body = cond.conditional.phGraph_out[0];
  void* c_args[] = {&c};
  void* ch_args[] = {&c, &h};
  cudaGraphNode_t prev = nullptr;
  for (int i = 0; i < copies; ++i) prev = add_node(body, prev, body_fn, condition ? c_args : ch_args, port);
  if (condition) add_node(body, prev, condition_fn, ch_args, condition_port);
  return g;
}

// Instantiates and uploads `g`, times its launches (µs per launch), checks c afterwards.
double time_graph(cudaGraph_t g, cudaStream_t s, int* c, int reset, int expected, const std::string& what) {
  cudaGraphExec_t exec;
  CHECK_CUDA(cudaGraphInstantiate(&exec, g, 0));
  CHECK_CUDA(cudaGraphUpload(exec, s));
  CHECK_CUDA(cudaMemset(c, reset, sizeof(int)));
  CHECK_CUDA(cudaDeviceSynchronize());
  CHECK_CUDA(cudaGraphLaunch(exec, s));
  CHECK_CUDA(cudaStreamSynchronize(s));
  const int got = read_int(c);
  expect(got == expected, what + ": c = " + std::to_string(got) + ", expected " + std::to_string(expected));
  const double us = median_us(s, [&] { CHECK_CUDA(cudaGraphLaunch(exec, s)); });
  CHECK_CUDA(cudaGraphExecDestroy(exec));
  CHECK_CUDA(cudaGraphDestroy(g));
  return us;
}

// Start-up by hand: host-clock µs from the start to the graph built, instantiated, uploaded,
// and to the end of its first launch (the chain adds `n` to c, checked).
struct StartupSteps {
  std::vector<double> built, instantiated, uploaded, first;
};
template <class Build>
void time_startup(cudaStream_t s, bool keep, StartupSteps* out, int* c, int n, const char* what, Build&& build) {
  CHECK_CUDA(cudaMemset(c, 0, sizeof(int)));
  CHECK_CUDA(cudaDeviceSynchronize());
  const Clock::time_point t = Clock::now();
  cudaGraph_t g = build();
  const double built = us_since(t);
  cudaGraphExec_t exec;
  CHECK_CUDA(cudaGraphInstantiate(&exec, g, 0));
  const double instantiated = us_since(t);
  CHECK_CUDA(cudaGraphUpload(exec, s));
  CHECK_CUDA(cudaStreamSynchronize(s));
  const double uploaded = us_since(t);
  CHECK_CUDA(cudaGraphLaunch(exec, s));
  CHECK_CUDA(cudaStreamSynchronize(s));
  const double first = us_since(t);
  expect(read_int(c) == n, std::string(what) + " start-up, first launch: c = " + std::to_string(read_int(c)));
  CHECK_CUDA(cudaGraphExecDestroy(exec));
  CHECK_CUDA(cudaGraphDestroy(g));
  if (!keep) return;
  out->built.push_back(built);
  out->instantiated.push_back(instantiated);
  out->uploaded.push_back(uploaded);
  out->first.push_back(first);
}

// The driver's version as nvidia-smi prints it, else CUDA's number for it.
std::string driver_version() {
  std::ifstream in("/proc/driver/nvidia/version");
  std::string line;
  if (std::getline(in, line)) {
    std::istringstream words(line);
    std::string w;
    while (words >> w)
      if (!w.empty() && w[0] >= '0' && w[0] <= '9' && w.find('.') != std::string::npos) return w;
  }
  int v = 0;
  CHECK_CUDA(cudaDriverGetVersion(&v));
  return "CUDA " + std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

struct Torch {
  bool ok = false;
  std::string why, version;
  double eager_us = 0, graph_us = 0;
};

// Runs bench/torch_bench.py; its lines are "KEY VALUE".
Torch run_torch(const std::string& script, int n) {
  Torch t;
  if (script.empty() || access(script.c_str(), R_OK) != 0) {
    t.why = "no script " + script;
    return t;
  }
  const char* py = std::getenv("PYTHON");
  const std::string cmd = std::string(py && *py ? py : "python3") + " '" + script + "' " + std::to_string(n) + " 2>&1";
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) {
    t.why = "cannot run " + cmd;
    return t;
  }
  std::map<std::string, std::string> kv;
  char buf[1024];
  std::string all;
  while (std::fgets(buf, sizeof buf, f)) {
    std::string line(buf);
    all += line;
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    const size_t sp = line.find(' ');
    if (sp != std::string::npos) kv[line.substr(0, sp)] = line.substr(sp + 1);
  }
  const int rc = pclose(f);
  if (kv.count("n/a")) {
    t.why = kv["n/a"];
  } else if (rc != 0 || !kv.count("eager_us_per_op") || !kv.count("graph_us_per_op")) {
    t.why = "torch_bench.py failed (exit " + std::to_string(rc) + "): " + all;
  } else {
    t.ok = true;
    t.version = kv["torch"];
    t.eager_us = std::atof(kv["eager_us_per_op"].c_str());
    t.graph_us = std::atof(kv["graph_us_per_op"].c_str());
  }
  return t;
}

// Table rows: a value per node or iteration (negative: n/a) and an optional note.
void row(const std::string& name, double value, double base = 0, const std::string& note = "") {
  if (value < 0) {
    std::printf("  %-58s %9s %9s  %s\n", name.c_str(), "n/a", "", note.c_str());
    return;
  }
  char ratio[32] = "";
  if (base > 0) std::snprintf(ratio, sizeof ratio, "%.3f", value / base);
  std::printf("  %-58s %9.3f %9s  %s\n", name.c_str(), value, ratio, note.c_str());
}

void target(const std::string& what, double value, double limit, bool at_most) {
  if (value < 0) {
    std::printf("  %-68s n/a\n", what.c_str());
    return;
  }
  const bool met = at_most ? value <= limit : value >= limit;
  std::printf("  %-68s %8.3f %s %-6.3g %s\n", what.c_str(), value, at_most ? "<=" : ">=", limit, met ? "met" : "NOT MET");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: launch_bench ORCHC [N] [--orch-options STRING]... [--torch SCRIPT]\n");
    return 2;
  }
  const std::string orchc = argv[1];
  int n = 1000;
  std::vector<std::string> option_sets;
  std::string torch_script = ORCH_TORCH_BENCH;
  for (int a = 2; a < argc; ++a) {
    const std::string arg = argv[a];
    if (arg == "--orch-options" && a + 1 < argc) option_sets.push_back(argv[++a]);
    else if (arg == "--torch" && a + 1 < argc) torch_script = argv[++a];
    else if (!arg.empty() && arg[0] >= '0' && arg[0] <= '9') n = std::atoi(arg.c_str());
    else {
      std::fprintf(stderr, "launch_bench: unknown argument '%s'\n", arg.c_str());
      return 2;
    }
  }
  if (option_sets.empty()) option_sets = {"", "--no-pdl --unroll 1"};
  if (n < 16) {
    std::fprintf(stderr, "launch_bench: N must be at least 16\n");
    return 2;
  }
  int device = 0;
  cudaDeviceProp prop;
  if (cudaGetDevice(&device) != cudaSuccess || cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
    std::printf("launch_bench: no CUDA device; skipped\n");
    return 0;
  }
  int runtime = 0;
  CHECK_CUDA(cudaRuntimeGetVersion(&runtime));
  const std::string arch = "sm_" + std::to_string(prop.major * 10 + prop.minor);
  work_dir = "/tmp/orch_launch_bench_" + std::to_string(getpid());
  if (std::system(("mkdir -p " + work_dir).c_str()) != 0) {
    std::fprintf(stderr, "launch_bench: cannot create %s\n", work_dir.c_str());
    return 1;
  }
  cudaStream_t s;
  CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  int* c = nullptr;
  int* flag = nullptr;
  CHECK_CUDA(cudaMalloc(&c, sizeof(int)));
  CHECK_CUDA(cudaMalloc(&flag, sizeof(int)));
  auto label = [](const std::string& options) { return options.empty() ? std::string("[default]") : "[" + options + "]"; };

  // ---- chain of n dependent kernels ----------------------------------------------------------
  CHECK_CUDA(cudaMemset(c, 0, sizeof(int)));
  const double stream_us = median_us(s, [&] {
    for (int i = 0; i < n; ++i) tick<<<1, 32, 0, s>>>(c);
    CHECK_CUDA(cudaGetLastError());
  });
  cudaGraph_t captured;
  CHECK_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < n; ++i) tick<<<1, 32, 0, s>>>(c);
  CHECK_CUDA(cudaStreamEndCapture(s, &captured));
  const double capture_us = time_graph(captured, s, c, 0, n, "stream capture");
  const int kProgrammatic = cudaGraphKernelNodePortProgrammatic, kLaunched = cudaGraphKernelNodePortLaunchCompletion;
  const double hand_us = time_graph(chain_graph(reinterpret_cast<void*>(tick), n, c, 0), s, c, 0, n, "hand chain");
  // The hand-built chain of `fn`, edges from `port`.
  auto chain_us = [&](void (*fn)(int*), int port, const char* what) {
    return time_graph(chain_graph(reinterpret_cast<void*>(fn), n, c, port), s, c, 0, n, what);
  };
  const double pdl_us = chain_us(tick_pdl<kNoTrigger>, kProgrammatic, "hand PDL chain");
  const double pdl_trigger_us = chain_us(tick_pdl<kTriggerBeforeWait>, kProgrammatic, "hand PDL chain with trigger");
  const double pdl_trigger_after_us =
      chain_us(tick_pdl<kTriggerAfterWait>, kProgrammatic, "hand PDL chain with trigger after the wait");
  const double pdl_launched_us =
      chain_us(tick_pdl<kNoTrigger>, kLaunched, "hand PDL chain from the launch-completion port");

  std::string chain_text = "pipeline chain\nbuffer c: i32\nkernel tick(c: inout i32) source \"\"\"" +
                           std::string(TICK_SOURCE) + "\"\"\"\ngraph main {\n";
  std::string wait_text = "pipeline chain_wait\nbuffer c: i32\nkernel tick(c: inout i32) source \"\"\"\n" +
                          std::string(TICK_WAIT_SOURCE) + "\"\"\"\ngraph main {\n";
  for (int i = 0; i < n; ++i) {
    chain_text += "  tick<<<1, 32>>>(c)\n";
    wait_text += "  tick<<<1, 32>>>(c)\n";
  }
  chain_text += "}\n";
  wait_text += "}\n";
  std::vector<double> orch_chain_us;
  std::vector<std::string> chain_bins(option_sets.size());  // for the start-up measurements ("": refused)
  for (size_t o = 0; o < option_sets.size(); ++o) {
    const std::string bin = compile(orchc, "chain" + std::to_string(o), chain_text, option_sets[o], o == 0);
    if (bin.empty()) {
      orch_chain_us.push_back(-1);
      continue;
    }
    chain_bins[o] = bin;
    auto x = instantiate(bin, c, s, "c");
    CHECK_CUDA(cudaMemset(c, 0, sizeof(int)));
    CHECK_CUDA(cudaDeviceSynchronize());
    launch(*x, s);
    CHECK_CUDA(cudaStreamSynchronize(s));
    expect(read_int(c) == n, "orch chain " + label(option_sets[o]) + ": c = " + std::to_string(read_int(c)));
    orch_chain_us.push_back(median_us(s, [&] { launch(*x, s); }));
  }
  double orch_pdl_us = -1;
  {
    const std::string bin = compile(orchc, "chain_wait", wait_text, option_sets[0], true);
    const std::string edited = work_dir + "/chain_wait_programmatic.bin";
    std::string error;
    if (!orch::bench::make_programmatic(bin, edited, &error)) {
      std::fprintf(stderr, "launch_bench: %s\n", error.c_str());
      return 1;
    }
    auto x = instantiate(edited, c, s, "c");
    CHECK_CUDA(cudaMemset(c, 0, sizeof(int)));
    CHECK_CUDA(cudaDeviceSynchronize());
    launch(*x, s);
    CHECK_CUDA(cudaStreamSynchronize(s));
    expect(read_int(c) == n, "orch chain with programmatic edges: c = " + std::to_string(read_int(c)));
    orch_pdl_us = median_us(s, [&] { launch(*x, s); });
  }
  const Torch torch = run_torch(torch_script, n);

  // ---- loop of n iterations: while c > 0 { step } ---------------------------------------------
  const double host_loop_us = median_us(s, [&] {
    int start = n;
    CHECK_CUDA(cudaMemcpyAsync(c, &start, sizeof start, cudaMemcpyHostToDevice, s));
    int h = 1;
    while (h) {
      count_down_flag<<<1, 32, 0, s>>>(c, flag);
      CHECK_CUDA(cudaGetLastError());
      CHECK_CUDA(cudaMemcpyAsync(&h, flag, sizeof h, cudaMemcpyDeviceToHost, s));
      CHECK_CUDA(cudaStreamSynchronize(s));
    }
  });
  const double while_us =
      time_graph(while_graph(n, c, reinterpret_cast<void*>(step), 1, true), s, c, 0, 0, "hand WHILE");
  const double while_self_us =
      time_graph(while_graph(n, c, reinterpret_cast<void*>(count_down), 1, false), s, c, 0, 0, "hand WHILE (kernel)");
  const double unroll8_us =
      time_graph(while_graph(n, c, reinterpret_cast<void*>(guarded_step), 8, true), s, c, 0, 0, "hand unroll x8");
  const double unroll16_us =
      time_graph(while_graph(n, c, reinterpret_cast<void*>(guarded_step), 16, true), s, c, 0, 0, "hand unroll x16");
  // The hand-built x16 unroll of `fn`, edges between copies from `port`; the condition kernel
  // and its edge as given.
  auto unroll16_of = [&](void (*fn)(int*), int port, const char* what,
                         void* condition = reinterpret_cast<void*>(set_condition), int condition_port = 0) {
    void* body = reinterpret_cast<void*>(fn);
    return time_graph(while_graph(n, c, body, 16, true, port, condition, condition_port), s, c, 0, 0, what);
  };
  const double unroll16_pdl_us =
      unroll16_of(guarded_step_pdl<kNoTrigger>, kProgrammatic, "hand unroll x16, programmatic edges");
  const double unroll16_launched_us =
      unroll16_of(guarded_step_pdl<kNoTrigger>, kLaunched, "hand unroll x16, launch-completion edges");
  const double unroll16_trigger_us = unroll16_of(guarded_step_pdl<kTriggerAfterWait>, kProgrammatic,
                                                 "hand unroll x16, programmatic edges, trigger after the wait");
  const double unroll16_cond_us =
      unroll16_of(guarded_step_pdl<kTriggerAfterWait>, kProgrammatic,
                  "hand unroll x16, programmatic edge into the condition", reinterpret_cast<void*>(set_condition_wait),
                  kProgrammatic);
  const double unroll16_barrier_us =
      unroll16_of(guarded_step_barrier<kTriggerAfterWait>, kProgrammatic, "hand unroll x16, guard with a barrier");
  const double unroll16_barrier_nt_us =
      unroll16_of(guarded_step_barrier<kNoTrigger>, kProgrammatic, "hand unroll x16, guard with a barrier, no trigger");
  const double unroll16_barrier_ta_us = unroll16_of(guarded_step_barrier<kTriggerAfterGuard>, kProgrammatic,
                                                    "hand unroll x16, guard with a barrier, trigger after it");

  const std::string loop_kernel =
      "pipeline loop_kernel\nparam n: i32 = " + std::to_string(n) +
      "\nbuffer c: i32\n"
      "kernel count_down(c: inout i32, h: cond) source \"\"\"\n"
      "extern \"C\" __global__ void count_down(int* counter, cudaGraphConditionalHandle h) {\n"
      "  if (threadIdx.x == 0) { int left = --(*counter); cudaGraphSetConditional(h, left > 0); }\n"
      "}\n\"\"\"\n"
      "graph main {\n  fill c = n\n  while kernel {\n    count_down<<<1, 32>>>(c, cond)\n  }\n}\n";
  double orch_while_kernel_us = -1;
  {
    auto x = instantiate(compile(orchc, "loop_kernel", loop_kernel, option_sets[0], true), c, s, "c");
    launch(*x, s);
    CHECK_CUDA(cudaStreamSynchronize(s));
    expect(read_int(c) == 0, "orch while kernel: c = " + std::to_string(read_int(c)));
    orch_while_kernel_us = median_us(s, [&] { launch(*x, s); });
  }
  const std::string loop_expr =
      "pipeline loop_expr\nparam n: i32 = " + std::to_string(n) +
      "\nbuffer c: i32\n"
      "kernel step(c: inout i32) source \"\"\"\n"
      "extern \"C\" __global__ void step(int* c) { if (threadIdx.x == 0) --(*c); }\n\"\"\"\n"
      "graph main {\n  fill c = n\n  while c > 0 {\n    step<<<1, 32>>>(c)\n  }\n}\n";
  std::vector<double> orch_while_us;
  for (size_t o = 0; o < option_sets.size(); ++o) {
    const std::string bin = compile(orchc, "loop_expr" + std::to_string(o), loop_expr, option_sets[o], o == 0);
    if (bin.empty()) {
      orch_while_us.push_back(-1);
      continue;
    }
    auto x = instantiate(bin, c, s, "c");
    launch(*x, s);
    CHECK_CUDA(cudaStreamSynchronize(s));
    expect(read_int(c) == 0, "orch while c > 0 " + label(option_sets[o]) + ": c = " + std::to_string(read_int(c)));
    orch_while_us.push_back(median_us(s, [&] { launch(*x, s); }));
  }

  // ---- start-up of the n-kernel chain -------------------------------------------------------
  // Host clock around synchronized work; each run builds everything from nothing and the
  // teardown is not timed.
  const int startup_reps = 31;
  StartupSteps hand, pdl;
  // Per option set: orch's start-up, and the parts instantiate_times() reports (µs).
  struct OrchStartup {
    std::vector<double> load, total, build, ginst, upload, open, first;
  };
  std::vector<OrchStartup> orch_startup(option_sets.size());
  std::vector<double> lib_totals[kLibraryVariants];
  // The driver's own node call, for variant (s4): the runtime links no libcuda.
  using AddKernelNode = CUresult (*)(CUgraphNode*, CUgraph, const CUgraphNode*, size_t, const CUDA_KERNEL_NODE_PARAMS*);
  AddKernelNode driver_add_kernel_node = nullptr;
  // And the one with edge data, for (s5): what the runtime calls (12.3's ABI).
  using AddNode = CUresult (*)(CUgraphNode*, CUgraph, const CUgraphNode*, const CUgraphEdgeData*, size_t,
                               CUgraphNodeParams*);
  AddNode driver_add_node = nullptr;
  {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuGraphAddKernelNode", &fn, 12000, cudaEnableDefault, &q) == cudaSuccess &&
        q == cudaDriverEntryPointSuccess)
      driver_add_kernel_node = reinterpret_cast<AddKernelNode>(fn);
    else
      (void)cudaGetLastError();
    fn = nullptr;
    q = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuGraphAddNode", &fn, 12030, cudaEnableDefault, &q) == cudaSuccess &&
        q == cudaDriverEntryPointSuccess)
      driver_add_node = reinterpret_cast<AddNode>(fn);
    else
      (void)cudaGetLastError();
  }
  std::string cubin, symbol, error;
  const bool have_cubin = orch::bench::first_kernel_cubin(chain_bins[0], arch, &cubin, &symbol, &error);
  if (!have_cubin) std::fprintf(stderr, "launch_bench: %s; row (s) is n/a\n", error.c_str());
  void* args[] = {&c};
  for (int r = 0; r < startup_reps + 1; ++r) {  // the first run is a warm-up
    const bool keep = r > 0;
    // The measurements in turn (by hand, with programmatic edges, from orchc's CUBIN, then orch
    // with each option set), each repetition starting from the next one: what runs just before
    // a measurement (the driver's caches, the CPU's clock) moved the results by more than the
    // differences measured, so no measurement always follows the same one.
    const int turns = 3 + static_cast<int>(option_sets.size());
    for (int turn = 0; turn < turns; ++turn) {
      Clock::time_point t;
      cudaGraph_t g;
      cudaGraphExec_t exec;
      cudaGraphNode_t prev = nullptr;
      const int measurement = (r + turn) % turns;
      switch (measurement < 3 ? measurement : 3) {
        case 0:
          // By hand: build, instantiate, upload (the kernel is linked into this program).
          time_startup(s, keep, &hand, c, n, "by hand", [&] {
            cudaGraph_t graph;
            CHECK_CUDA(cudaGraphCreate(&graph, 0));
            cudaGraphNode_t last = nullptr;
            for (int i = 0; i < n; ++i) last = add_kernel(graph, last, reinterpret_cast<void*>(tick), args);
            return graph;
          });
          break;
        case 1:
          // By hand, the graph orch builds: programmatic edges into kernels that wait at entry.
          // (The kernel triggers after its wait, as orchc's do.)
          time_startup(s, keep, &pdl, c, n, "by hand, programmatic", [&] {
            return chain_graph(reinterpret_cast<void*>(tick_pdl<kTriggerAfterWait>), n, c, kProgrammatic);
          });
          break;
        case 2:
          // By hand from the CUBIN orchc made: load it as a library, then the same; and three
          // variants of that, each one change, to show what the runtime could do differently.
          for (int v = 0; v < kLibraryVariants && have_cubin; ++v) {
            const LibraryVariant variant = static_cast<LibraryVariant>(v);
            if ((variant == LibraryVariant::DriverAddNode && !driver_add_kernel_node) ||
                (variant == LibraryVariant::DriverProgrammatic && !driver_add_node)) {
              if (keep) lib_totals[v].push_back(-1);
              continue;
            }
            CHECK_CUDA(cudaDeviceSynchronize());
            t = Clock::now();
            cudaLibrary_t lib;
            CHECK_CUDA(
                cudaLibraryLoadData(&lib, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
            cudaKernel_t kernel;
            CHECK_CUDA(cudaLibraryGetKernel(&kernel, lib, symbol.c_str()));
            CHECK_CUDA(cudaGraphCreate(&g, 0));
            prev = nullptr;
            for (int i = 0; i < n; ++i) {
              switch (variant) {
                case LibraryVariant::AddKernelNode:
                case LibraryVariant::InstantiateUploads:
                  prev = add_kernel(g, prev, reinterpret_cast<void*>(kernel), args);
                  break;
                case LibraryVariant::AddNode:
                  prev = add_node(g, prev, reinterpret_cast<void*>(kernel), args);
                  break;
                case LibraryVariant::DriverAddNode: {
                  CUDA_KERNEL_NODE_PARAMS p = {};
                  p.kern = reinterpret_cast<CUkernel>(
                      kernel);  // func null: the library's kernel, current context
                  p.gridDimX = p.gridDimY = p.gridDimZ = 1;
                  p.blockDimX = 32;
                  p.blockDimY = p.blockDimZ = 1;
                  p.kernelParams = args;
                  CUgraphNode node;
                  const CUresult r = driver_add_kernel_node(
                      &node, reinterpret_cast<CUgraph>(g),
                      prev ? reinterpret_cast<CUgraphNode*>(&prev) : nullptr, prev ? 1 : 0, &p);
                  if (r != CUDA_SUCCESS) {
                    std::fprintf(stderr, "launch_bench: cuGraphAddKernelNode failed (%d)\n",
                                 static_cast<int>(r));
                    return 1;
                  }
                  prev = reinterpret_cast<cudaGraphNode_t>(node);
                  break;
                }
                case LibraryVariant::DriverProgrammatic: {
                  // The graph orch builds, the way the runtime adds its nodes.
                  CUgraphNodeParams p = {};
                  p.type = CU_GRAPH_NODE_TYPE_KERNEL;
                  p.kernel.kern = reinterpret_cast<CUkernel>(kernel);
                  p.kernel.gridDimX = p.kernel.gridDimY = p.kernel.gridDimZ = 1;
                  p.kernel.blockDimX = 32;
                  p.kernel.blockDimY = p.kernel.blockDimZ = 1;
                  p.kernel.kernelParams = args;
                  CUgraphEdgeData edge = {};
                  edge.from_port = CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC;
                  edge.type = CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC;
                  CUgraphNode node;
                  const CUresult r =
                      driver_add_node(&node, reinterpret_cast<CUgraph>(g), prev ? reinterpret_cast<CUgraphNode*>(&prev) : nullptr,
                                      prev ? &edge : nullptr, prev ? 1 : 0, &p);
                  if (r != CUDA_SUCCESS) {
                    std::fprintf(stderr, "launch_bench: cuGraphAddNode failed (%d)\n", static_cast<int>(r));
                    return 1;
                  }
                  prev = reinterpret_cast<cudaGraphNode_t>(node);
                  break;
                }
              }
            }
            if (variant == LibraryVariant::InstantiateUploads) {
              cudaGraphInstantiateParams ip = {};
              ip.flags = cudaGraphInstantiateFlagUpload;
              ip.uploadStream = s;
              CHECK_CUDA(cudaGraphInstantiateWithParams(&exec, g, &ip));
              expect(ip.result_out == cudaGraphInstantiateSuccess, "instantiate with upload");
            } else {
              CHECK_CUDA(cudaGraphInstantiate(&exec, g, 0));
              CHECK_CUDA(cudaGraphUpload(exec, s));
            }
            CHECK_CUDA(cudaStreamSynchronize(s));
            const double total = us_since(t);
            if (keep) lib_totals[v].push_back(total);
            CHECK_CUDA(cudaMemset(c, 0, sizeof(int)));
            CHECK_CUDA(cudaDeviceSynchronize());
            CHECK_CUDA(cudaGraphLaunch(exec, s));
            CHECK_CUDA(cudaStreamSynchronize(s));
            expect(read_int(c) == n,
                   std::string(kLibraryVariantNames[v]) + ": c = " + std::to_string(read_int(c)));
            CHECK_CUDA(cudaGraphExecDestroy(exec));
            CHECK_CUDA(cudaGraphDestroy(g));
            CHECK_CUDA(cudaLibraryUnload(lib));
          }
          break;
        case 3: {
          // orch with option set `o`: load the file, instantiate (which builds, instantiates
          // and uploads).
          const size_t o = static_cast<size_t>(measurement - 3);
          if (chain_bins[o].empty()) break;
          CHECK_CUDA(cudaMemset(c, 0, sizeof(int)));
          CHECK_CUDA(cudaDeviceSynchronize());
          t = Clock::now();
          auto pipeline = orch::Pipeline::load(chain_bins[o]);
          const double loaded = us_since(t);
          if (!pipeline) {
            std::fprintf(stderr, "launch_bench: %s\n", pipeline.error().to_string().c_str());
            return 1;
          }
          orch::Bindings b;
          b.buffer("c", c, sizeof(int));
          auto x = pipeline.value()->instantiate(b, s);
          const double orch_total = us_since(t);
          if (!x) {
            std::fprintf(stderr, "launch_bench: %s\n", x.error().to_string().c_str());
            return 1;
          }
          launch(**x, s);
          CHECK_CUDA(cudaStreamSynchronize(s));
          const double orch_first = us_since(t);
          expect(read_int(c) == n, "orch " + label(option_sets[o]) + " start-up, first launch: c = " +
                                       std::to_string(read_int(c)));
          const orch::Executable::InstantiateTimes times = (*x)->instantiate_times();
          x->reset();
          pipeline->reset();
          if (!keep) break;
          OrchStartup& st = orch_startup[o];
          st.open.push_back(orch::bench::open_us(chain_bins[o], &error));
          st.load.push_back(loaded);
          st.total.push_back(orch_total);
          st.first.push_back(orch_first);
          st.build.push_back(times.build_s * 1e6);
          st.ginst.push_back(times.instantiate_s * 1e6);
          st.upload.push_back(times.upload_s * 1e6);
          break;
        }
      }
    }
  }

  // ---- the table ----------------------------------------------------------------------------
  char date[64];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  std::printf("\nlaunch_bench: %s (%s), driver %s, CUDA runtime %d.%d, %s; N = %d, median of %d\n", prop.name,
              arch.c_str(), driver_version().c_str(), runtime / 1000, (runtime % 1000) / 10, date, n, reps);
  const double per = n;
  std::printf("%-60s %9s %9s\n", "chain of N dependent kernels", "us/kernel", "vs (c)");
  row("(a) stream launches", stream_us / per, hand_us);
  row("(b) stream capture, graph launch", capture_us / per, hand_us);
  row("(c) hand-built graph", hand_us / per, hand_us);
  row("(d) hand-built PDL chain (wait at entry)", pdl_us / per, hand_us);
  row("(e) hand-built PDL chain (trigger at start, wait)", pdl_trigger_us / per, hand_us);
  row("(e2) hand-built PDL chain (wait, then trigger)", pdl_trigger_after_us / per, hand_us);
  row("(e3) hand-built PDL chain (launch-completion port, wait)", pdl_launched_us / per, hand_us);
  for (size_t o = 0; o < option_sets.size(); ++o)
    row("(f" + std::to_string(o + 1) + ") orch " + label(option_sets[o]), orch_chain_us[o] < 0 ? -1 : orch_chain_us[o] / per,
        hand_us, orch_chain_us[o] < 0 ? "orchc refused these options" : "");
  row("(g) orch, artifact edited: programmatic edges, wait at entry", orch_pdl_us / per, hand_us,
      "the runtime's half of PDL; vs (d): " + std::to_string(orch_pdl_us / pdl_us).substr(0, 5));
  row("(h) torch eager, x.add_(1)", torch.ok ? torch.eager_us : -1, hand_us / per,
      torch.ok ? "torch " + torch.version : torch.why);
  row("(i) torch.cuda.graph replay", torch.ok ? torch.graph_us : -1, hand_us / per, torch.ok ? "" : torch.why);

  std::printf("%-60s %9s %9s\n", "loop while c > 0 { step }, N iterations", "us/iter", "vs (k)");
  row("(j) host loop: kernel, copy the flag back, synchronize", host_loop_us / per, while_us);
  row("(k) hand-built WHILE: step, condition kernel", while_us / per, while_us);
  row("(l) hand-built WHILE: the step sets the condition", while_self_us / per, while_us);
  row("(m) hand-built guarded unroll x8", unroll8_us / per, while_us);
  row("(n) hand-built guarded unroll x16", unroll16_us / per, while_us);
  row("(n2) (n) with programmatic edges, wait at entry", unroll16_pdl_us / per, while_us);
  row("(n3) (n) with launch-completion edges, wait at entry", unroll16_launched_us / per, while_us);
  row("(n4) (n2), trigger after the wait", unroll16_trigger_us / per, while_us);
  row("(n5) (n4), programmatic edge into the condition kernel", unroll16_cond_us / per, while_us);
  row("(n6) (n4), the block learns the decision through a barrier", unroll16_barrier_us / per, while_us);
  row("(n7) (n6) without the trigger", unroll16_barrier_nt_us / per, while_us);
  row("(n8) (n6), the trigger after the barrier", unroll16_barrier_ta_us / per, while_us);
  row("(o) orch `while kernel`", orch_while_kernel_us / per, while_us);
  for (size_t o = 0; o < option_sets.size(); ++o)
    row("(p" + std::to_string(o + 1) + ") orch `while c > 0` " + label(option_sets[o]),
        orch_while_us[o] < 0 ? -1 : orch_while_us[o] / per, while_us,
        orch_while_us[o] < 0 ? "orchc refused these options" : "");

  const double hand_total = median(hand.uploaded);
  std::printf("%-60s %9s %9s\n", "start-up of the N-kernel chain (host clock)", "ms", "vs (r)");
  row("(q) by hand: build + instantiate", median(hand.instantiated) / 1e3, hand_total / 1e3,
      "build " + std::to_string(median(hand.built) / 1e3).substr(0, 5) + " ms");
  row("(r) by hand: build + instantiate + upload", hand_total / 1e3, hand_total / 1e3);
  const double pdl_total = median(pdl.uploaded);
  {
    char note[160];
    std::snprintf(note, sizeof note, "build %.3f, instantiate %.3f, upload %.3f ms", median(pdl.built) / 1e3,
                  (median(pdl.instantiated) - median(pdl.built)) / 1e3, (pdl_total - median(pdl.instantiated)) / 1e3);
    row("(r2) (r) with programmatic edges (the graph orch builds)", pdl_total / 1e3, hand_total / 1e3, note);
  }
  for (int v = 0; v < kLibraryVariants; ++v) {
    const double ms = have_cubin && !lib_totals[v].empty() && lib_totals[v][0] >= 0 ? median(lib_totals[v]) / 1e3 : -1;
    row(kLibraryVariantNames[v], ms, hand_total / 1e3,
        v == 0 || ms < 0 || lib_totals[0].empty() ? std::string()
                                                  : "vs (s): " + std::to_string(ms / (median(lib_totals[0]) / 1e3)).substr(0, 5));
  }
  // orch's start-up with each option set; its graph by hand is (r2) with programmatic edges,
  // (r) without (--no-pdl).
  // Median total of a row (s) variant, ms; -1 when not measured.
  auto lib_ms = [&](LibraryVariant v) {
    const std::vector<double>& t = lib_totals[static_cast<int>(v)];
    return have_cubin && !t.empty() && t[0] >= 0 ? median(t) : -1.0;
  };
  std::vector<double> orch_total(option_sets.size(), -1), same_by_hand(option_sets.size(), -1);
  for (size_t o = 0; o < option_sets.size(); ++o) {
    const OrchStartup& st = orch_startup[o];
    const bool plain = option_sets[o].find("--no-pdl") != std::string::npos;
    same_by_hand[o] = plain ? hand_total : pdl_total;
    if (!st.total.empty()) orch_total[o] = median(st.total);
    const double lib = lib_ms(plain ? LibraryVariant::DriverAddNode : LibraryVariant::DriverProgrammatic);
    char note[260];
    std::snprintf(note, sizeof note,
                  "vs %s: %.3f, %s: %.3f; load %.3f (read + open %.3f), building %.3f, instantiate %.3f, upload %.3f ms",
                  plain ? "(s4)" : "(s5)", orch_total[o] / lib, plain ? "(r)" : "(r2)", orch_total[o] / same_by_hand[o],
                  median(st.load) / 1e3, median(st.open) / 1e3, median(st.build) / 1e3, median(st.ginst) / 1e3,
                  median(st.upload) / 1e3);
    row("(t" + std::to_string(o + 1) + ") orch " + label(option_sets[o]) + ": load + instantiate",
        orch_total[o] < 0 ? -1 : orch_total[o] / 1e3, hand_total / 1e3,
        orch_total[o] < 0 ? "orchc refused these options" : note);
  }

  // The same, to the end of the first launch: what a user waits for before the first result.
  std::printf("%-60s %9s %9s\n", "start-up and the first launch (host clock)", "ms", "vs (r)");
  const double hand_first = median(hand.first);
  row("(r) by hand, then its first launch", hand_first / 1e3, hand_first / 1e3);
  row("(r2) by hand with programmatic edges, then its first launch", median(pdl.first) / 1e3, hand_first / 1e3);
  for (size_t o = 0; o < option_sets.size(); ++o) {
    const std::vector<double>& first = orch_startup[o].first;
    row("(t" + std::to_string(o + 1) + ") orch " + label(option_sets[o]) + ", then its first launch",
        first.empty() ? -1 : median(first) / 1e3, hand_first / 1e3);
  }

  std::printf("targets (issue 11)\n");
  const double orch_node = orch_chain_us[0] / per;
  target("orch chain, us per node", orch_node, 0.55, true);
  target("plain hand-built graph / orch chain", hand_us / orch_chain_us[0], 1.3, false);
  target("orch chain / hand-built PDL chain (d)", orch_chain_us[0] / pdl_us, 1.02, true);
  target("orch `while c > 0`, us per iteration", orch_while_us[0] / per, 1.2, true);
  target("hand-built WHILE (k) / orch `while c > 0`", while_us / orch_while_us[0], 3.5, false);
  target("torch.cuda.graph replay / orch chain, per op", torch.ok ? torch.graph_us / orch_node : -1, 1.9, false);
  // Against the same graph by hand: from orchc's CUBIN loaded as a library, as orch loads it
  // ((s5) with programmatic edges, (s4) without: every start-up loads the code), and with the
  // kernel linked into this program and loaded before the first measurement ((r2), (r)).
  for (size_t o = 0; o < option_sets.size(); ++o) {
    const bool plain = same_by_hand[o] == hand_total;
    const double lib = lib_ms(plain ? LibraryVariant::DriverAddNode : LibraryVariant::DriverProgrammatic);
    const std::string t = "(t" + std::to_string(o + 1) + ") orch load + instantiate / ";
    target(t + "same graph, same CUBIN by hand " + (plain ? "(s4)" : "(s5)"),
           orch_total[o] < 0 || lib < 0 ? -1 : orch_total[o] / lib, 1.1, true);
    target(t + "same graph by hand, linked " + (plain ? "(r)" : "(r2)"),
           orch_total[o] < 0 ? -1 : orch_total[o] / same_by_hand[o], 1.1, true);
  }
  target("(t1) orch load + instantiate / the plain graph by hand (r)", orch_total[0] < 0 ? -1 : orch_total[0] / hand_total,
         1.1, true);

  CHECK_CUDA(cudaFree(c));
  CHECK_CUDA(cudaFree(flag));
  CHECK_CUDA(cudaStreamDestroy(s));
  if (std::system(("rm -rf " + work_dir).c_str()) != 0) std::fprintf(stderr, "launch_bench: cannot remove %s\n", work_dir.c_str());
  return 0;
}
