// NVSHMEM against NCCL and peer copies (issue 23; docs/multi-gpu.md, "NVSHMEM: numbers"), one
// process per GPU on the first two GPUs visible:
//   pingpong: n floats (4 B and 64 KiB) back and forth between two GPUs, µs per round trip
//     (one way is half of it), as
//       orch:        nvshmem_pingpong.orch, the loop a `while` decided on the GPU, each message a
//                    `put ... signal` statement and a `wait` (orchc's defaults; and
//                    --no-pdl --unroll 1),
//       kernel:      nvshmem_pingpong_kernel.orch, the whole loop inside one kernel (NVSHMEM's
//                    put + signal with no graph node between messages),
//       kernel, NVLink stores: nvshmem_pingpong_ptr.orch, the same loop with plain stores to
//                    the peer's memory (nvshmem_ptr) and a release store of the counter, no
//                    fence or atomic a message: the floor between two GPUs,
//       nccl graph:  ncclSend/ncclRecv of the same messages, captured by hand into one CUDA
//                    graph of 100 round trips (NCCL calls cannot stand in a WHILE body),
//       memcpy peer: a copy to the other GPU and back (cudaMemcpyAsync between the two GPUs'
//                    memory: cudaMemcpyPeerAsync cannot be captured) in one graph of 100 round
//                    trips, from rank 0's process (which sees both GPUs; rank 1 waits meanwhile);
//   halo: examples/nvshmem_halo.orch (the whole iteration loop, exchange included, one `while`)
//     against nvshmem_halo_nccl.orch (the same solver, the exchange an allgather, the loop
//     unrolled into segments around each), µs per sweep at three grid sizes, 20 sweeps a launch.
// Every variant is checked before it is timed: the pingpong inboxes hold the peer's random
// floats and the counters the round trips; the two solvers' grids equal each other bit for bit
// and a CPU reference of the whole periodic grid (the sweep's f32 arithmetic in its order).
// Times: the median of 7 batches (CUDA events), the slower rank's.
//
//   nvshmem_bench ORCHC NVSHMEM_HOME ROOT
//
// ROOT is the repository (bench/ and examples/ are read from it). NVSHMEM_HOME is the
// nvidia-nvshmem-cu13 3.4.5 wheel's nvidia/nvshmem (include/, lib/). Multicast stays off
// (NCCL_NVLS_ENABLE=0, NVSHMEM_DISABLE_NVLS=1, TORCH_SYMM_MEM_DISABLE_MULTICAST=1).
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench/check_calls.h"
#include "bench/gpu_timing.h"
#include "orch/ranks.h"
#include "orch/runtime.h"
#include "runtime/src/nccl.h"

namespace {

constexpr int kBatches = 7;
constexpr int kRoundTripsPerGraph = 100;  // the hand-built graphs' round trips
constexpr unsigned kIters = 1000;         // the orch loops' round trips a launch
constexpr unsigned kHaloPairs = 10;       // nvshmem_halo's trips: 20 sweeps, as nvshmem_halo_nccl's

using orch::bench::driver_version;

// µs per launch of `launch`: the median of kBatches batches of `per_batch` launches.
template <class F>
double us_per_launch(cudaStream_t s, int per_batch, F&& launch) {
  return orch::bench::median_us_per_launch(s, 3, kBatches, per_batch, launch);
}

const orch::rt::nccl::Api* nccl = nullptr;
using SendRecv = int (*)(void*, size_t, int, int, void*, cudaStream_t);  // ncclSend / ncclRecv, the buffer cast
SendRecv nccl_send = nullptr, nccl_recv = nullptr;
bool any_wrong = false;

struct Context {
  int rank = 0, world = 2;
  void* comm = nullptr;
  cudaStream_t stream = nullptr;
  std::string dir;  // the compiled pipelines
};

// The slower rank's time, and whether both ranks' checks passed; rank 0 prints the row, and
// where `orch_us` is given, how many times faster orch's variant of the row's size was.
void report(const Context& cx, const std::string& bench, const std::string& config, const std::string& variant,
            double us, bool ok, const std::string& check, const char* unit, double orch_us = 0) {
  auto all = orch::ranks::allgather(cx.comm, {us, ok ? 1.0 : 0.0}, cx.stream);
  CHECK_ORCH(all);
  double worst = 0;
  bool every = true;
  for (const auto& v : *all) {
    worst = std::max(worst, v[0]);
    every &= v[1] == 1.0;
  }
  any_wrong |= !every;
  if (cx.rank != 0) return;
  char ratio[48] = "";
  if (orch_us > 0) std::snprintf(ratio, sizeof ratio, "  orch %.2fx faster", worst / orch_us);
  std::printf("%-9s %-22s %-28s %10.2f %s%s  %s: %s\n", bench.c_str(), config.c_str(), variant.c_str(), worst, unit,
              ratio, every ? "ok" : "WRONG", check.c_str());
  std::fflush(stdout);
}

std::vector<float> random_floats(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& f : v) f = d(rng);
  return v;
}

template <class T>
std::vector<T> fetch(const void* p, size_t n) {
  std::vector<T> v(n);
  CHECK_CUDA(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
  return v;
}

std::unique_ptr<orch::Executable> instantiate(const Context& cx, const std::string& bin,
                                              const std::vector<std::pair<std::string, uint32_t>>& params) {
  auto p = orch::Pipeline::load(bin);
  CHECK_ORCH(p);
  orch::Bindings b;
  for (const auto& [name, value] : params) b.param(name, value);
  b.comm("world", cx.comm);
  auto x = (*p)->instantiate(b, cx.stream);
  CHECK_ORCH(x);
  return std::move(*x);
}

// ---------------------------------------------------------------------------------- pingpong
// One orch pingpong pipeline: x random (a seed per rank), one launch checked, then timed.
double orch_pingpong(const Context& cx, const std::string& bin, unsigned n, bool* ok, std::string* check) {
  auto x = instantiate(cx, bin, {{"iters", kIters}, {"n", n}});
  const std::vector<float> mine = random_floats(n, 100 + cx.rank), theirs = random_floats(n, 100 + (1 - cx.rank));
  CHECK_CUDA(cudaMemcpy(x->buffer("x"), mine.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK_ORCH(x->launch(cx.stream));
  CHECK_CUDA(cudaStreamSynchronize(cx.stream));
  const auto inbox = fetch<float>(x->buffer("inbox"), n);
  const auto got = fetch<uint64_t>(x->buffer("got"), 1);
  *ok = inbox == theirs && got[0] == kIters;
  *check = "inbox = the peer's " + std::to_string(n) + " random floats, " + std::to_string(got[0]) + " of " +
           std::to_string(kIters) + " messages counted";
  const double us = us_per_launch(cx.stream, 3, [&] { CHECK_ORCH(x->launch(cx.stream)); }) / kIters;
  CHECK_CUDA(cudaStreamSynchronize(cx.stream));
  return us;
}

void run_pingpong(const Context& cx, unsigned n) {
  char config[64];
  std::snprintf(config, sizeof config, "%u B messages", n * 4);
  const char* unit = "us/round trip";
  bool ok = false;
  std::string check;
  const double orch_us = orch_pingpong(cx, cx.dir + "/nvshmem_pingpong.bin", n, &ok, &check);
  report(cx, "pingpong", config, "orch (while, put+wait)", orch_us, ok, check, unit);
  const double plain_us = orch_pingpong(cx, cx.dir + "/nvshmem_pingpong-plain.bin", n, &ok, &check);
  report(cx, "pingpong", config, "orch --no-pdl --unroll 1", plain_us, ok, check, unit, orch_us);
  const double kernel_us = orch_pingpong(cx, cx.dir + "/nvshmem_pingpong_kernel.bin", n, &ok, &check);
  report(cx, "pingpong", config, "kernel (one kernel)", kernel_us, ok, check, unit);
  const double ptr_us = orch_pingpong(cx, cx.dir + "/nvshmem_pingpong_ptr.bin", n, &ok, &check);
  report(cx, "pingpong", config, "kernel, NVLink stores", ptr_us, ok, check, unit);

  // NCCL send/recv captured by hand: rank 0 sends then receives, rank 1 receives then sends.
  float *x, *inbox;
  CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&x), n * sizeof(float)));
  CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&inbox), n * sizeof(float)));
  const std::vector<float> mine = random_floats(n, 200 + cx.rank), theirs = random_floats(n, 200 + (1 - cx.rank));
  CHECK_CUDA(cudaMemcpy(x, mine.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(inbox, 0, n * sizeof(float)));
  const int peer = 1 - cx.rank;
  cudaGraph_t graph;
  CHECK_CUDA(cudaStreamBeginCapture(cx.stream, cudaStreamCaptureModeRelaxed));
  for (int k = 0; k < kRoundTripsPerGraph; ++k) {
    if (cx.rank == 0) {
      CHECK_NCCL(nccl_send(x, n, orch::rt::nccl::kFloat32, peer, cx.comm, cx.stream));
      CHECK_NCCL(nccl_recv(inbox, n, orch::rt::nccl::kFloat32, peer, cx.comm, cx.stream));
    } else {
      CHECK_NCCL(nccl_recv(inbox, n, orch::rt::nccl::kFloat32, peer, cx.comm, cx.stream));
      CHECK_NCCL(nccl_send(x, n, orch::rt::nccl::kFloat32, peer, cx.comm, cx.stream));
    }
  }
  CHECK_CUDA(cudaStreamEndCapture(cx.stream, &graph));
  cudaGraphExec_t exec;
  CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  CHECK_CUDA(cudaGraphLaunch(exec, cx.stream));
  CHECK_CUDA(cudaStreamSynchronize(cx.stream));
  ok = fetch<float>(inbox, n) == theirs;
  const double nccl_us =
      us_per_launch(cx.stream, 5, [&] { CHECK_CUDA(cudaGraphLaunch(exec, cx.stream)); }) / kRoundTripsPerGraph;
  report(cx, "pingpong", config, "nccl send/recv graph", nccl_us, ok,
         "inbox = the peer's " + std::to_string(n) + " random floats", unit, orch_us);
  CHECK_CUDA(cudaGraphExecDestroy(exec));
  CHECK_CUDA(cudaGraphDestroy(graph));

  // A copy to GPU 1 and back, from rank 0's process (both GPUs are visible to it).
  double peer_us = 0;
  ok = true;
  check = "rank 0 only";
  if (cx.rank == 0) {
    int count = 0, can = 0;
    CHECK_CUDA(cudaGetDeviceCount(&count));
    if (count >= 2) CHECK_CUDA(cudaDeviceCanAccessPeer(&can, 0, 1));
    if (count < 2 || !can) {
      ok = false;
      check = "rank 0 does not see GPU 1 with peer access";
    } else {
      cudaError_t e = cudaDeviceEnablePeerAccess(1, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();
      else CHECK_CUDA(e);
      float* remote;
      CHECK_CUDA(cudaSetDevice(1));
      CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&remote), n * sizeof(float)));
      CHECK_CUDA(cudaMemset(remote, 0, n * sizeof(float)));
      CHECK_CUDA(cudaDeviceSynchronize());
      CHECK_CUDA(cudaSetDevice(0));
      CHECK_CUDA(cudaMemset(inbox, 0, n * sizeof(float)));
      // cudaMemcpyPeerAsync may not be captured; a cudaMemcpyAsync between the two GPUs' memory
      // (unified addressing) is the same copy, and becomes a memcpy node.
      cudaGraph_t g;
      CHECK_CUDA(cudaStreamBeginCapture(cx.stream, cudaStreamCaptureModeRelaxed));
      for (int k = 0; k < kRoundTripsPerGraph; ++k) {
        CHECK_CUDA(cudaMemcpyAsync(remote, x, n * sizeof(float), cudaMemcpyDefault, cx.stream));
        CHECK_CUDA(cudaMemcpyAsync(inbox, remote, n * sizeof(float), cudaMemcpyDefault, cx.stream));
      }
      CHECK_CUDA(cudaStreamEndCapture(cx.stream, &g));
      cudaGraphExec_t ge;
      CHECK_CUDA(cudaGraphInstantiate(&ge, g, 0));
      CHECK_CUDA(cudaGraphLaunch(ge, cx.stream));
      CHECK_CUDA(cudaStreamSynchronize(cx.stream));
      ok = fetch<float>(inbox, n) == mine;
      check = "back home: rank 0's " + std::to_string(n) + " random floats (cudaMemcpyAsync, GPU 0 to 1 and back)";
      peer_us = us_per_launch(cx.stream, 5, [&] { CHECK_CUDA(cudaGraphLaunch(ge, cx.stream)); }) / kRoundTripsPerGraph;
      CHECK_CUDA(cudaGraphExecDestroy(ge));
      CHECK_CUDA(cudaGraphDestroy(g));
      CHECK_CUDA(cudaFree(remote));
    }
  }
  report(cx, "pingpong", config, "memcpy peer graph", peer_us, ok, check, unit, orch_us);
  CHECK_CUDA(cudaFree(x));
  CHECK_CUDA(cudaFree(inbox));
}

// ---------------------------------------------------------------------------------- halo
// examples/nvshmem_halo.orch's sweep on the CPU, the whole periodic grid.
void halo_sweep(const std::vector<float>& src, std::vector<float>* dst, size_t total_rows, size_t nx) {
  dst->resize(src.size());
  for (size_t r = 0; r < total_rows; ++r) {
    const size_t upr = (r + 1) % total_rows, downr = (r + total_rows - 1) % total_rows;
    for (size_t c = 0; c < nx; ++c) {
      float out = src[r * nx + c];
      if (c > 0 && c + 1 < nx) {
        float sum = src[upr * nx + c] + src[downr * nx + c];
        sum = sum + src[r * nx + c - 1];
        sum = sum + src[r * nx + c + 1];
        out = 0.25f * sum;
      }
      (*dst)[r * nx + c] = out;
    }
  }
}

void run_halo(const Context& cx, unsigned nx, unsigned rows) {
  char config[64];
  std::snprintf(config, sizeof config, "%u x %u per GPU", nx, rows);
  const size_t total_rows = size_t(rows) * cx.world, cells = size_t(nx) * rows;
  std::vector<float> grid(total_rows * nx);
  std::mt19937 rng(0x4a10 + nx);
  for (float& f : grid) f = static_cast<float>(rng() % 1024) / 1024.0f;  // exact, the same on every rank
  const std::vector<float> mine(grid.begin() + static_cast<std::ptrdiff_t>(cells * cx.rank),
                                grid.begin() + static_cast<std::ptrdiff_t>(cells * (cx.rank + 1)));
  std::vector<float> odd, scratch, want = grid;
  for (unsigned s = 0; s < 2 * kHaloPairs; s += 2) {
    halo_sweep(want, &odd, total_rows, nx);
    halo_sweep(odd, &scratch, total_rows, nx);
    want.swap(scratch);
  }
  const std::vector<float> want_mine(want.begin() + static_cast<std::ptrdiff_t>(cells * cx.rank),
                                     want.begin() + static_cast<std::ptrdiff_t>(cells * (cx.rank + 1)));
  const char* unit = "us/sweep";
  auto one = [&](const std::string& bin, const std::vector<std::pair<std::string, uint32_t>>& params,
                 std::vector<float>* result) {
    auto x = instantiate(cx, bin, params);
    CHECK_CUDA(cudaMemcpy(x->buffer("u"), mine.data(), cells * sizeof(float), cudaMemcpyHostToDevice));
    CHECK_ORCH(x->launch(cx.stream));
    CHECK_CUDA(cudaStreamSynchronize(cx.stream));
    *result = fetch<float>(x->buffer("u"), cells);
    // Timed launches go on from where the last ended: the same work each time.
    const double us = us_per_launch(cx.stream, 5, [&] { CHECK_ORCH(x->launch(cx.stream)); }) / (2 * kHaloPairs);
    CHECK_CUDA(cudaStreamSynchronize(cx.stream));
    return us;
  };
  std::vector<float> shmem_u, nccl_u;
  const double shmem_us = one(cx.dir + "/nvshmem_halo.bin", {{"nx", nx}, {"rows", rows}, {"pairs", kHaloPairs}}, &shmem_u);
  const double nccl_us = one(cx.dir + "/nvshmem_halo_nccl.bin", {{"nx", nx}, {"rows", rows}}, &nccl_u);
  const bool shmem_ok = shmem_u == want_mine, nccl_ok = nccl_u == want_mine;
  const std::string what = "u after 20 sweeps = the CPU reference of the " + std::to_string(total_rows) + "-row grid";
  report(cx, "halo", config, "orch nvshmem (one while)", shmem_us, shmem_ok, what + (shmem_ok ? "" : " (differs)"), unit);
  report(cx, "halo", config, "orch nccl (segments)", nccl_us, nccl_ok, what + (nccl_ok ? ", = nvshmem's bits" : " (differs)"),
         unit, shmem_us);
}

int rank_main(Context cx) {
  auto me = orch::ranks::from_environment();
  CHECK_ORCH(me);
  CHECK_ORCH(orch::ranks::use_device(*me));
  cx.rank = me->rank;
  cx.world = me->world_size;
  auto api = orch::rt::nccl::api();
  CHECK_ORCH(api);
  nccl = *api;
  void* lib = dlopen(nccl->path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (lib) {
    nccl_send = reinterpret_cast<SendRecv>(dlsym(lib, "ncclSend"));
    nccl_recv = reinterpret_cast<SendRecv>(dlsym(lib, "ncclRecv"));
  }
  if (!nccl_send || !nccl_recv) {
    std::fprintf(stderr, "nvshmem_bench: no ncclSend/ncclRecv in %s\n", nccl->path.c_str());
    return 1;
  }
  const char* id_file = std::getenv("ORCH_NCCL_ID_FILE");
  if (!id_file) {
    std::fprintf(stderr, "nvshmem_bench: ORCH_NCCL_ID_FILE is not set\n");
    return 1;
  }
  auto id = orch::ranks::share_unique_id(id_file, me->rank, std::chrono::seconds(120));
  CHECK_ORCH(id);
  orch::rt::nccl::UniqueId raw;
  std::memcpy(raw.internal, id->data(), sizeof raw.internal);
  CHECK_NCCL(nccl->CommInitRank(&cx.comm, cx.world, raw, cx.rank));
  CHECK_CUDA(cudaStreamCreateWithFlags(&cx.stream, cudaStreamNonBlocking));
  if (cx.rank == 0) {
    cudaDeviceProp prop;
    CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
    char date[32];
    const std::time_t now = std::time(nullptr);
    std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
    std::printf("nvshmem_bench: 2 ranks, one per GPU (%s, driver %s), NCCL %s, NVSHMEM 3.4.5, NCCL_NVLS_ENABLE=%s "
                "NVSHMEM_DISABLE_NVLS=%s, %s\n",
                prop.name, driver_version().c_str(), nccl->version_string().c_str(),
                std::getenv("NCCL_NVLS_ENABLE") ? std::getenv("NCCL_NVLS_ENABLE") : "unset",
                std::getenv("NVSHMEM_DISABLE_NVLS") ? std::getenv("NVSHMEM_DISABLE_NVLS") : "unset", date);
    std::printf("%-9s %-22s %-28s %10s\n", "bench", "size", "variant", "time");
    std::fflush(stdout);
  }
  for (unsigned n : {1u, 16384u}) run_pingpong(cx, n);
  for (auto [nx, rows] : {std::pair{256u, 32u}, std::pair{1024u, 256u}, std::pair{4096u, 2048u}}) run_halo(cx, nx, rows);
  CHECK_CUDA(cudaStreamSynchronize(cx.stream));
  // NVSHMEM started by orch stays up until the process ends (docs/multi-gpu.md), so the
  // communicator it was started over is left to the process's end too.
  return any_wrong ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: nvshmem_bench ORCHC NVSHMEM_HOME ROOT\n");
    return 2;
  }
  orch::ranks::default_nccl_environment();
  setenv("NVSHMEM_DISABLE_NVLS", "1", 0);
  setenv("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1", 0);
  const std::string home = argv[2];
  setenv("ORCH_NVSHMEM_LIBRARY", (home + "/lib/libnvshmem_host.so.3").c_str(), 0);
  Context cx;
  if (std::getenv("ORCH_RANK")) {
    cx.dir = argv[3];
    return rank_main(cx);
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count < 2) {
    std::printf("nvshmem_bench: needs two GPUs; skipped\n");
    return 77;
  }
  char tmpl[] = "/tmp/orch_nvshmem_bench_XXXXXX";
  if (!mkdtemp(tmpl)) {
    std::perror("nvshmem_bench: mkdtemp");
    return 1;
  }
  const std::string dir = tmpl, root = argv[3];
  struct Job {
    const char* source;
    const char* out;
    const char* options;
  };
  for (const Job& j : {Job{"bench/nvshmem_pingpong.orch", "nvshmem_pingpong", ""},
                       Job{"bench/nvshmem_pingpong.orch", "nvshmem_pingpong-plain", "--no-pdl --unroll 1"},
                       Job{"bench/nvshmem_pingpong_kernel.orch", "nvshmem_pingpong_kernel", ""},
                       Job{"bench/nvshmem_pingpong_ptr.orch", "nvshmem_pingpong_ptr", ""},
                       Job{"examples/nvshmem_halo.orch", "nvshmem_halo", ""},
                       Job{"bench/nvshmem_halo_nccl.orch", "nvshmem_halo_nccl", ""}}) {
    const std::string cmd = "'" + std::string(argv[1]) + "' " + j.options + " --nvshmem '" + home + "' '" + root +
                            "/" + j.source + "' -o '" + dir + "/" + j.out + ".bin'";
    if (std::system(cmd.c_str()) != 0) {
      std::fprintf(stderr, "nvshmem_bench: %s failed\n", cmd.c_str());
      return 1;
    }
  }
  orch::ranks::SpawnOptions o;
  o.timeout = std::chrono::seconds(300);
  const std::string ld = std::getenv("LD_LIBRARY_PATH") ? std::getenv("LD_LIBRARY_PATH") : "";
  o.env = {{"LD_LIBRARY_PATH", home + "/lib" + (ld.empty() ? "" : ":" + ld)}};
  auto exits = orch::ranks::spawn(2, {"/proc/self/exe", argv[1], argv[2], dir}, o);
  std::system(("rm -rf '" + dir + "'").c_str());
  if (!exits.ok()) {
    std::fprintf(stderr, "nvshmem_bench: %s\n", exits.error().to_string().c_str());
    return 1;
  }
  int rc = 0;
  for (const auto& x : *exits)
    if (!x.ok()) {
      std::fprintf(stderr, "nvshmem_bench: %s\n", x.describe().c_str());
      rc = 1;
    }
  return rc;
}
