// A data-parallel step on every GPU of this host: N small allreduces, each after a kernel that
// writes its buffer, run per rank as
//   (a) stream:    kernel launches and ncclAllReduce calls on one stream (what most code does),
//   (b) captured:  the same calls stream-captured once into a CUDA graph by hand,
//   (c) orch:      the same step as an orch pipeline (kernels as nodes, each allreduce captured
//                  into the graph at instantiation; kernel k+1 does not wait for allreduce k),
//   (d) orch-line: the pipeline with kernel k+1 reading what allreduce k wrote, which orders
//                  the step in one line as (a) and (b) do.
// Prints, per rank and for the slowest rank, µs per step (median of timed batches, CUDA events)
// and the ratios (a)/(c), (b)/(c) and (b)/(d). One process per GPU: the program starts itself once per
// rank (orch::ranks::spawn), or takes its rank from an MPI launcher's environment.
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

#include "orch/ranks.h"
#include "orch/runtime.h"
#include "runtime/src/nccl.h"

#define CHECK_CUDA(call)                                                                          \
  do {                                                                                            \
    cudaError_t e_ = (call);                                                                      \
    if (e_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)
#define CHECK_NCCL(call)                                                                          \
  do {                                                                                            \
    int r_ = (call);                                                                              \
    if (r_ != 0) {                                                                                \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, nccl->describe(r_).c_str()); \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)
#define CHECK_ORCH(x)                                                                             \
  do {                                                                                            \
    const auto& r_ = (x);                                                                         \
    if (!r_.ok()) {                                                                               \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, r_.error().to_string().c_str());    \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

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

namespace {

const orch::rt::nccl::Api* nccl = nullptr;

struct Config {
  int allreduces;  // per step
  unsigned count;  // f32 elements each
};
const Config kConfigs[] = {{8, 256}, {32, 256}, {32, 16384}, {8, 262144}};

// The step as an orch pipeline. `chained`: each kernel also reads the buffer the previous
// allreduce wrote, which orders the whole step in one line, as a stream (or its capture) does;
// otherwise kernel k+1 may run while allreduce k does.
std::string pipeline_source(int n_allreduces, bool chained) {
  std::string s = "pipeline coll_bench_" + std::to_string(n_allreduces) + (chained ? "_chained" : "") +
                  "\ntarget sm_90\nparam n: u32 = 256\nparam s: f32 = 0.5\ncomm world\nbuffer z: f32[n]\n";
  for (int k = 0; k < n_allreduces; ++k) s += "buffer g" + std::to_string(k) + ": f32[n]\n";
  s += "kernel scale(n: u32, s: f32, x: inout f32[]) source \"\"\"\n" SCALE_SOURCE "\"\"\"\n";
  s += "kernel scale_after(n: u32, s: f32, prev: in f32[], x: inout f32[]) source \"\"\"\n" SCALE_AFTER_SOURCE
       "\"\"\"\ngraph main {\n";
  for (int k = 0; k < n_allreduces; ++k) {
    const std::string g = "g" + std::to_string(k);
    const std::string prev = k == 0 ? "z" : "g" + std::to_string(k - 1);
    s += chained ? "  scale_after<<<ceil_div(n, 256), 256>>>(n, s, " + prev + ", " + g + ")\n"
                 : "  scale<<<ceil_div(n, 256), 256>>>(n, s, " + g + ")\n";
    s += "  allreduce sum " + g + " on world\n";
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

// "N:FREE.bin:CHAINED.bin" arguments, by N.
struct Bins {
  std::string free, chained;
};

int rank_main(const std::vector<std::string>& args, int steps) {
  std::map<int, Bins> bins;
  for (const std::string& a : args) {
    const size_t c1 = a.find(':'), c2 = a.find(':', c1 + 1);
    bins[std::atoi(a.substr(0, c1).c_str())] = {a.substr(c1 + 1, c2 - c1 - 1), a.substr(c2 + 1)};
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
    std::printf("a step: N x (scale kernel on a buffer, then allreduce sum of it); us per step, median of 7 "
                "batches of %d steps\n",
                steps);
    std::printf("stream: launches and NCCL calls on a stream; captured: the same captured into one graph;\n"
                "orch: the pipeline (kernel k+1 free to overlap allreduce k); orch-line: kernel k+1 after "
                "allreduce k\n\n");
    std::printf("%-4s %-8s %-5s %10s %10s %10s %10s %12s %10s %15s\n", "N", "elements", "rank", "stream",
                "captured", "orch", "orch-line", "stream/orch", "capt/orch", "capt/orch-line");
  }

  for (const Config& c : kConfigs) {
    std::vector<float*> bufs(c.allreduces);
    std::vector<float> init(c.count, 1.0f);
    for (float*& b : bufs) {
      CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&b), c.count * sizeof(float)));
      CHECK_CUDA(cudaMemcpy(b, init.data(), c.count * sizeof(float), cudaMemcpyHostToDevice));
    }
    const unsigned blocks = (c.count + 255) / 256;
    auto issue = [&](cudaStream_t st) {
      for (float* b : bufs) {
        scale<<<blocks, 256, 0, st>>>(c.count, factor, b);
        CHECK_NCCL(nccl->AllReduce(b, b, c.count, orch::rt::nccl::kFloat32, orch::rt::nccl::kSum, comm, st));
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

    auto orch_time = [&](const std::string& bin) {
      auto p = orch::Pipeline::load(bin);
      CHECK_ORCH(p);
      orch::Bindings b;
      b.param("n", c.count).param("s", factor).comm("world", comm);
      for (int k = 0; k < c.allreduces; ++k) b.buffer("g" + std::to_string(k), bufs[k], c.count * sizeof(float));
      auto x = (*p)->instantiate(b, s);
      CHECK_ORCH(x);
      const double us = us_per_step(s, steps, [&] { CHECK_ORCH((*x)->launch(s)); });
      CHECK_CUDA(cudaStreamSynchronize(s));
      return us;
    };
    const double orch_us = orch_time(bins.at(c.allreduces).free);
    const double line_us = orch_time(bins.at(c.allreduces).chained);

    // The values stay 1 (scaled by 1/world, summed over the world): a cheap correctness check.
    std::vector<float> back(c.count);
    CHECK_CUDA(cudaMemcpy(back.data(), bufs.back(), c.count * sizeof(float), cudaMemcpyDeviceToHost));
    const bool ok = std::all_of(back.begin(), back.end(), [](float v) { return std::fabs(v - 1.0f) < 1e-3f; });

    auto all = orch::ranks::allgather(comm, {stream_us, captured_us, orch_us, line_us, ok ? 1.0 : 0.0}, s);
    CHECK_ORCH(all);
    if (me->rank == 0) {
      double worst[4] = {0, 0, 0, 0};
      bool all_ok = true;
      auto row = [&](const char* rank, const double* v, const char* note) {
        std::printf("%-4d %-8u %-5s %10.2f %10.2f %10.2f %10.2f %12.3f %10.3f %15.3f%s\n", c.allreduces, c.count, rank,
                    v[0], v[1], v[2], v[3], v[0] / v[2], v[1] / v[2], v[1] / v[3], note);
      };
      for (size_t r = 0; r < all->size(); ++r) {
        const std::vector<double>& v = (*all)[r];
        row(std::to_string(r).c_str(), v.data(), "");
        for (int k = 0; k < 4; ++k) worst[k] = std::max(worst[k], v[k]);
        all_ok &= v[4] == 1.0;
      }
      row("max", worst, all_ok ? "" : "   RESULTS WRONG on some rank");
      std::fflush(stdout);
    }
    CHECK_CUDA(cudaGraphExecDestroy(ge));
    CHECK_CUDA(cudaGraphDestroy(g));
    for (float* bp : bufs) CHECK_CUDA(cudaFree(bp));
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
  std::map<int, bool> done;
  for (const Config& c : kConfigs) {
    if (done[c.allreduces]) continue;
    done[c.allreduces] = true;
    std::string arg = std::to_string(c.allreduces);
    for (bool chained : {false, true}) {
      const std::string stem = dir + "/coll_bench_" + std::to_string(c.allreduces) + (chained ? "_chained" : "");
      std::ofstream(stem + ".orch") << pipeline_source(c.allreduces, chained);
      const std::string cmd = "'" + std::string(argv[1]) + "' '" + stem + ".orch' -o '" + stem + ".bin'";
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
