// A data-parallel step on every GPU of this host: N small allreduces, each after a kernel that
// writes its buffer, and, in some rows, an independent multi-wave kernel after each (compute the
// allreduces could overlap), run per rank as
//   (a) stream:    kernel launches and ncclAllReduce calls on one stream (what most code does),
//   (b) captured:  the same calls stream-captured once into a CUDA graph by hand,
//   (c) orch:      the same step as an orch pipeline with orchc's defaults (each allreduce
//                  captured into the graph at instantiation; a kernel that fits in one wave waits
//                  for the allreduce before it, a larger one may run beside it),
//   (e) orch-free: the pipeline compiled with --no-line-up (every kernel free to overlap),
//   (d) orch-line: the pipeline with each kernel reading what the allreduce before it wrote,
//                  which orders the step in one line as (a) and (b) do.
// Prints, per rank and for the slowest rank, µs per step (median of timed batches, CUDA events)
// and the ratios. One process per GPU: the program starts itself once per rank
// (orch::ranks::spawn), or takes its rank from an MPI launcher's environment.
//   collective_bench ORCHC [STEPS]
// NCCL_NVLS_ENABLE=0 unless set. Needs two GPUs or more; with fewer it says so and exits 77.
#include <cuda_runtime.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "bench/check_calls.h"
#include "orch/ranks.h"
#include "orch/runtime.h"
#include "runtime/src/nccl.h"

// The same code orch compiles with NVRTC for the pipeline version.
#define SCALE_SOURCE                                                                        \
  "extern \"C\" __global__ void scale(unsigned n, float s, float* x) {\n"                   \
  "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= s;\n}\n"
extern "C" __global__ void scale(unsigned n, float s, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= s;
}
#define SCALE_AFTER_SOURCE                                                                        \
  "extern \"C\" __global__ void scale_after(unsigned n, float s, const float* prev, float* x) {\n" \
  "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= s;\n}\n"
// The independent compute: 64 dependent FMAs per element, converging to 1. `prev` orders it
// (orch-line: after the allreduce before it); otherwise it is not read.
#define BURN_SOURCE                                                                 \
  "extern \"C\" __global__ void burn(unsigned n, const float* prev, float* y) {\n"  \
  "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i >= n) return;\n"    \
  "  float v = y[i];\n  for (int j = 0; j < 64; ++j) v = v * 0.999f + 0.001f;\n"   \
  "  y[i] = v;\n}\n"
extern "C" __global__ void burn(unsigned n, const float* prev, float* y) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = y[i];
  for (int j = 0; j < 64; ++j) v = v * 0.999f + 0.001f;
  y[i] = v;
}

namespace {

const orch::rt::nccl::Api* nccl = nullptr;

struct Config {
  int allreduces;    // per step
  unsigned count;    // f32 elements each
  unsigned compute;  // f32 elements of the independent kernel after each allreduce; 0: none
};
const Config kConfigs[] = {{8, 256, 0},    {32, 256, 0},       {32, 16384, 0},
                           {8, 262144, 0}, {8, 256, 1u << 22}, {8, 16384, 1u << 22}};

std::string config_name(const Config& c) {
  return std::to_string(c.allreduces) + "_" + std::to_string(c.count) + "_" + std::to_string(c.compute);
}

// The step as an orch pipeline. `chained`: each kernel also reads the buffer the previous
// allreduce wrote, which orders the whole step in one line, as a stream (or its capture) does;
// otherwise kernel k+1 may run while allreduce k does.
std::string pipeline_source(const Config& c, bool chained) {
  std::string s = "pipeline coll_bench_" + config_name(c) + (chained ? "_chained" : "") +
                  "\ntarget sm_90\nparam n: u32 = 256\nparam m: u32 = " + std::to_string(std::max(c.compute, 1u)) +
                  "\nparam s: f32 = 0.5\ncomm world\nbuffer z: f32[n]\nbuffer y: f32[m]\n";
  for (int k = 0; k < c.allreduces; ++k) s += "buffer g" + std::to_string(k) + ": f32[n]\n";
  s += "kernel scale(n: u32, s: f32, x: inout f32[]) source \"\"\"\n" SCALE_SOURCE "\"\"\"\n";
  s += "kernel scale_after(n: u32, s: f32, prev: in f32[], x: inout f32[]) source \"\"\"\n" SCALE_AFTER_SOURCE
       "\"\"\"\n";
  s += "kernel burn(n: u32, prev: in f32[], y: inout f32[]) source \"\"\"\n" BURN_SOURCE "\"\"\"\ngraph main {\n";
  for (int k = 0; k < c.allreduces; ++k) {
    const std::string g = "g" + std::to_string(k);
    const std::string prev = k == 0 ? "z" : "g" + std::to_string(k - 1);
    s += chained ? "  scale_after<<<ceil_div(n, 256), 256>>>(n, s, " + prev + ", " + g + ")\n"
                 : "  scale<<<ceil_div(n, 256), 256>>>(n, s, " + g + ")\n";
    s += "  allreduce sum " + g + " on world\n";
    if (c.compute) s += "  burn<<<ceil_div(m, 256), 256>>>(m, " + (chained ? g : std::string("z")) + ", y)\n";
  }
  return s + "}\n";
}

// µs per step: the median over batches of `steps` steps, each batch timed with events.
template <class F>
double us_per_step(cudaStream_t s, int steps, F&& step) {
  cudaEvent_t a, b;
  CHECK_CUDA(cudaEventCreate(&a));
  CHECK_CUDA(cudaEventCreate(&b));
  for (int i = 0; i < 10; ++i) step();  // warm-up
  CHECK_CUDA(cudaStreamSynchronize(s));
  std::vector<double> t;
  for (int batch = 0; batch < 7; ++batch) {
    CHECK_CUDA(cudaEventRecord(a, s));
    for (int i = 0; i < steps; ++i) step();
    CHECK_CUDA(cudaEventRecord(b, s));
    CHECK_CUDA(cudaEventSynchronize(b));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1000.0 / steps);
  }
  std::sort(t.begin(), t.end());
  CHECK_CUDA(cudaEventDestroy(a));
  CHECK_CUDA(cudaEventDestroy(b));
  return t[t.size() / 2];
}

// "NAME:DEFAULT.bin:FREE.bin:CHAINED.bin" arguments, by config_name.
struct Bins {
  std::string orch, free, chained;
};

int rank_main(const std::vector<std::string>& args, int steps) {
  std::map<std::string, Bins> bins;
  for (const std::string& a : args) {
    const size_t c1 = a.find(':'), c2 = a.find(':', c1 + 1), c3 = a.find(':', c2 + 1);
    bins[a.substr(0, c1)] = {a.substr(c1 + 1, c2 - c1 - 1), a.substr(c2 + 1, c3 - c2 - 1), a.substr(c3 + 1)};
  }
  auto me = orch::ranks::from_environment();
  CHECK_ORCH(me);
  CHECK_ORCH(orch::ranks::use_device(*me));
  auto api = orch::rt::nccl::api();
  CHECK_ORCH(api);
  nccl = *api;
  const char* id_file = std::getenv("ORCH_NCCL_ID_FILE");
  if (!id_file) {
    std::fprintf(stderr, "collective_bench: ORCH_NCCL_ID_FILE is not set\n");
    return 1;
  }
  auto id = orch::ranks::share_unique_id(id_file, me->rank, std::chrono::seconds(120));
  CHECK_ORCH(id);
  orch::rt::nccl::UniqueId raw;
  std::memcpy(raw.internal, id->data(), sizeof raw.internal);
  void* comm = nullptr;
  CHECK_NCCL(nccl->CommInitRank(&comm, me->world_size, raw, me->rank));
  cudaStream_t s;
  CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const float factor = 1.0f / static_cast<float>(me->world_size);  // keeps the values steady

  if (me->rank == 0) {
    cudaDeviceProp prop;
    CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
    int driver = 0;
    CHECK_CUDA(cudaDriverGetVersion(&driver));
    std::printf("collective_bench: %d ranks, one per GPU (%s), driver %d, NCCL %s, NCCL_NVLS_ENABLE=%s\n",
                me->world_size, prop.name, driver, nccl->version_string().c_str(),
                std::getenv("NCCL_NVLS_ENABLE") ? std::getenv("NCCL_NVLS_ENABLE") : "unset");
    std::printf("a step: N x (scale kernel on a buffer, allreduce sum of it, then with compute > 0 an "
                "independent kernel of 64 FMAs per element over `compute` floats); us per step, median of 7 "
                "batches of %d steps\n",
                steps);
    std::printf("stream: launches and NCCL calls on a stream; captured: the same captured into one graph;\n"
                "orch: the pipeline, orchc's defaults; orch-free: --no-line-up (every kernel free to overlap "
                "allreduce k); orch-line: each kernel after allreduce k; children: orch-line's graph built by hand "
                "(kernel nodes, each allreduce captured alone as a child graph node)\n\n");
    std::printf("%-4s %-8s %-8s %-5s %9s %9s %9s %9s %9s %9s %11s %9s %9s %10s %10s\n", "N", "elements", "compute",
                "rank", "stream", "captured", "orch", "orch-free", "orch-line", "children", "stream/orch", "capt/orch",
                "free/orch", "line/orch", "child/line");
  }

  for (const Config& c : kConfigs) {
    std::vector<float*> bufs(c.allreduces);
    std::vector<float> init(c.count, 1.0f);
    for (float*& b : bufs) {
      CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&b), c.count * sizeof(float)));
      CHECK_CUDA(cudaMemcpy(b, init.data(), c.count * sizeof(float), cudaMemcpyHostToDevice));
    }
    const unsigned blocks = (c.count + 255) / 256;
    float* y = nullptr;
    const unsigned m = std::max(c.compute, 1u);
    std::vector<float> ones(m, 1.0f);
    CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&y), m * sizeof(float)));
    CHECK_CUDA(cudaMemcpy(y, ones.data(), m * sizeof(float), cudaMemcpyHostToDevice));
    auto issue = [&](cudaStream_t st) {
      for (float* b : bufs) {
        scale<<<blocks, 256, 0, st>>>(c.count, factor, b);
        CHECK_NCCL(nccl->AllReduce(b, b, c.count, orch::rt::nccl::kFloat32, orch::rt::nccl::kSum, comm, st));
        if (c.compute) burn<<<(c.compute + 255) / 256, 256, 0, st>>>(c.compute, b, y);
      }
    };
    const double stream_us = us_per_step(s, steps, [&] { issue(s); });

    cudaGraph_t g;
    CHECK_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
    issue(s);
    CHECK_CUDA(cudaStreamEndCapture(s, &g));
    cudaGraphExec_t ge;
    CHECK_CUDA(cudaGraphInstantiate(&ge, g, 0));
    CHECK_CUDA(cudaGraphUpload(ge, s));
    const double captured_us = us_per_step(s, steps, [&] { CHECK_CUDA(cudaGraphLaunch(ge, s)); });

    // (f) children: the graph orch builds, by hand: kernel nodes added explicitly, each
    // allreduce captured alone on a side stream and added as a child graph node, in line.
    cudaGraph_t gc;
    CHECK_CUDA(cudaGraphCreate(&gc, 0));
    cudaStream_t side;
    CHECK_CUDA(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    std::vector<cudaGraph_t> children;
    {
      cudaGraphNode_t last = nullptr, last_burn = nullptr;
      unsigned n_count = c.count, n_compute = c.compute;
      float f = factor;
      for (float*& b : bufs) {
        cudaKernelNodeParams kp = {};
        void* sargs[] = {&n_count, &f, &b};
        kp.func = reinterpret_cast<void*>(scale);
        kp.gridDim = dim3(blocks);
        kp.blockDim = dim3(256);
        kp.kernelParams = sargs;
        cudaGraphNode_t k;
        CHECK_CUDA(cudaGraphAddKernelNode(&k, gc, last ? &last : nullptr, last ? 1 : 0, &kp));
        cudaGraph_t child;
        CHECK_CUDA(cudaStreamBeginCapture(side, cudaStreamCaptureModeRelaxed));
        CHECK_NCCL(nccl->AllReduce(b, b, c.count, orch::rt::nccl::kFloat32, orch::rt::nccl::kSum, comm, side));
        CHECK_CUDA(cudaStreamEndCapture(side, &child));
        children.push_back(child);
        CHECK_CUDA(cudaGraphAddChildGraphNode(&last, gc, &k, 1, child));
        if (c.compute) {
          void* bargs[] = {&n_compute, &b, &y};
          kp.func = reinterpret_cast<void*>(burn);
          kp.gridDim = dim3((c.compute + 255) / 256);
          kp.kernelParams = bargs;
          cudaGraphNode_t deps[2] = {last, last_burn};
          CHECK_CUDA(cudaGraphAddKernelNode(&last_burn, gc, deps, last_burn ? 2 : 1, &kp));
        }
      }
    }
    cudaGraphExec_t gce;
    CHECK_CUDA(cudaGraphInstantiate(&gce, gc, 0));
    CHECK_CUDA(cudaGraphUpload(gce, s));
    const double children_us = us_per_step(s, steps, [&] { CHECK_CUDA(cudaGraphLaunch(gce, s)); });

    auto orch_time = [&](const std::string& bin) {
      auto p = orch::Pipeline::load(bin);
      CHECK_ORCH(p);
      orch::Bindings b;
      b.param("n", c.count).param("s", factor).comm("world", comm);
      for (int k = 0; k < c.allreduces; ++k) b.buffer("g" + std::to_string(k), bufs[k], c.count * sizeof(float));
      b.buffer("y", y, m * sizeof(float));
      auto x = (*p)->instantiate(b, s);
      CHECK_ORCH(x);
      const double us = us_per_step(s, steps, [&] { CHECK_ORCH((*x)->launch(s)); });
      CHECK_CUDA(cudaStreamSynchronize(s));
      return us;
    };
    const Bins& bin = bins.at(config_name(c));
    const double orch_us = orch_time(bin.orch);
    const double free_us = orch_time(bin.free);
    const double line_us = orch_time(bin.chained);

    // The values stay 1 (scaled by 1/world, summed over the world): a cheap correctness check.
    std::vector<float> back(c.count);
    CHECK_CUDA(cudaMemcpy(back.data(), bufs.back(), c.count * sizeof(float), cudaMemcpyDeviceToHost));
    const bool ok = std::all_of(back.begin(), back.end(), [](float v) { return std::fabs(v - 1.0f) < 1e-3f; });

    auto all = orch::ranks::allgather(
        comm, {stream_us, captured_us, orch_us, free_us, line_us, children_us, ok ? 1.0 : 0.0}, s);
    CHECK_ORCH(all);
    if (me->rank == 0) {
      double worst[6] = {0, 0, 0, 0, 0, 0};
      bool all_ok = true;
      auto row = [&](const char* rank, const double* v, const char* note) {
        std::printf("%-4d %-8u %-8u %-5s %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %11.3f %9.3f %9.3f %10.3f %10.3f%s\n",
                    c.allreduces, c.count, c.compute, rank, v[0], v[1], v[2], v[3], v[4], v[5], v[0] / v[2],
                    v[1] / v[2], v[3] / v[2], v[4] / v[2], v[5] / v[4], note);
      };
      for (size_t r = 0; r < all->size(); ++r) {
        const std::vector<double>& v = (*all)[r];
        row(std::to_string(r).c_str(), v.data(), "");
        for (int k = 0; k < 6; ++k) worst[k] = std::max(worst[k], v[k]);
        all_ok &= v[6] == 1.0;
      }
      row("max", worst, all_ok ? "" : "   RESULTS WRONG on some rank");
      std::fflush(stdout);
    }
    CHECK_CUDA(cudaGraphExecDestroy(ge));
    CHECK_CUDA(cudaGraphDestroy(g));
    CHECK_CUDA(cudaGraphExecDestroy(gce));
    CHECK_CUDA(cudaGraphDestroy(gc));
    for (cudaGraph_t child : children) CHECK_CUDA(cudaGraphDestroy(child));
    CHECK_CUDA(cudaStreamDestroy(side));
    for (float* bp : bufs) CHECK_CUDA(cudaFree(bp));
    CHECK_CUDA(cudaFree(y));
    if (!ok) return 1;
  }
  CHECK_CUDA(cudaStreamDestroy(s));
  CHECK_NCCL(nccl->CommDestroy(comm));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: collective_bench ORCHC [STEPS]\n");
    return 2;
  }
  orch::ranks::default_nccl_environment();
  const int steps = argc > 2 ? std::max(1, std::atoi(argv[2])) : 100;
  if (std::getenv("ORCH_RANK")) {  // a rank process: the pipelines follow STEPS
    return rank_main(std::vector<std::string>(argv + 3, argv + argc), steps);
  }
  // The parent: count GPUs, compile the pipelines, start one process per GPU.
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count < 2) {
    std::printf("collective_bench: needs 2 CUDA devices or more, found %d; skipped\n", count);
    return 77;
  }
  const std::string dir = "/tmp/orch_collective_bench_" + std::to_string(getpid());
  if (std::system(("mkdir -p " + dir).c_str()) != 0) return 1;
  std::vector<std::string> args = {"/proc/self/exe", argv[1], std::to_string(steps)};
  for (const Config& c : kConfigs) {
    std::string arg = config_name(c);
    for (int variant = 0; variant < 3; ++variant) {  // default, --no-line-up, chained
      const bool chained = variant == 2;
      const std::string stem = dir + "/coll_bench_" + config_name(c) + (variant == 1 ? "_free" : chained ? "_chained" : "");
      std::ofstream(stem + ".orch") << pipeline_source(c, chained);
      const std::string cmd = "'" + std::string(argv[1]) + "' " + (variant == 1 ? "--no-line-up " : "") + "'" + stem +
                              ".orch' -o '" + stem + ".bin'";
      if (std::system(cmd.c_str()) != 0) {
        std::fprintf(stderr, "collective_bench: %s failed\n", cmd.c_str());
        return 1;
      }
      arg += ":" + stem + ".bin";
    }
    args.push_back(arg);
  }
  orch::ranks::SpawnOptions o;
  o.timeout = std::chrono::seconds(540);
  auto exits = orch::ranks::spawn(std::min(count, 8), args, o);
  std::system(("rm -rf '" + dir + "'").c_str());
  if (!exits.ok()) {
    std::fprintf(stderr, "collective_bench: %s\n", exits.error().to_string().c_str());
    return 1;
  }
  int rc = 0;
  for (const auto& x : *exits)
    if (!x.ok()) {
      std::fprintf(stderr, "collective_bench: %s\n", x.describe().c_str());
      rc = 1;
    }
  return rc;
}
