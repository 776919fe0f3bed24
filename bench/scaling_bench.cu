// Scaling figures (issue 26; docs/multi-gpu.md, "Scaling"): time per step on every GPU this
// process sees, one process per GPU, of
//   dp:   a data-parallel SGD step (scaling_dp.orch: 4 layers of 2 Mi f32 parameters, the
//         layers' gradients from this rank's samples, an allreduce of each gradient as soon as
//         it is ready, SGD on the mean), strong scaling (global batch 32, 32 / N samples per
//         rank) and weak scaling (8 samples per rank);
//   halo: a 2-D Jacobi sweep on rows cut into strips, the halo rows exchanged with an allgather
//         before every sweep, 20 sweeps per launch (scaling_halo.orch), strong scaling (16384
//         x 4096 cells in all) and weak scaling (4096 x 4096 per rank);
// each as
//   hand: the same kernels (scaling_kernels.cuh, built by nvcc) and NCCL calls, stream-captured
//         by hand into one CUDA graph with the same dependencies as the orch pipeline (the dp
//         step on three kinds of streams: gradients in backward order, allreduces in order on
//         a communication stream, each layer's SGD after its allreduce; the halo steps in one
//         line),
//   orch: the pipeline compiled by orchc with its defaults, run by the C++ runtime on the same
//         communicator and memory.
// Before timing, each variant runs one step (dp) or one launch (halo) from the same initial
// data and is checked: every variant against an exact CPU reference (all the data is exact in
// f32, see below) and orch against hand bit for bit on the whole result; the dp weights'
// fingerprint is recorded for bench/scaling_ddp.py to compare with DistributedDataParallel's.
// Times: µs per step, the median of 7 batches (CUDA events), the slowest rank's.
//
//   scaling_bench ORCHC BENCH_DIR RESULTS
//
// BENCH_DIR holds scaling_dp.orch, scaling_halo.orch and scaling_kernels.cuh (this folder);
// RESULTS gets one JSON line per result (appended; bench/scaling_ddp.py --table prints the
// table from it). The world size is the number of GPUs visible (CUDA_VISIBLE_DEVICES), which
// must be 1, 2, 4 or 8: the global problems split evenly, and dividing by the world size is
// exact. NVLink multicast stays off (NCCL_NVLS_ENABLE=0, NVSHMEM_DISABLE_NVLS=1,
// TORCH_SYMM_MEM_DISABLE_MULTICAST=1 unless set).
#include <cuda_runtime.h>
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
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench/check_calls.h"
#include "bench/gpu_timing.h"
#include "bench/scaling_kernels.cuh"
#include "orch/ranks.h"
#include "orch/runtime.h"
#include "runtime/src/nccl.h"

// ---- The problems. bench/scaling_ddp.py repeats the dp numbers and the data's hash.
constexpr int kLayers = 4;
constexpr unsigned kP = 1u << 21;          // parameters per layer
constexpr unsigned kStrongBatch = 32;      // global batch, strong scaling
constexpr unsigned kWeakBatch = 8;         // samples per rank, weak scaling
constexpr float kLr = 0.125f;
constexpr unsigned kNx = 4096;             // halo: cells per row
constexpr unsigned kStrongRows = 16384;    // halo: interior rows in all, strong scaling
constexpr unsigned kWeakRows = 4096;       // halo: interior rows per rank, weak scaling
constexpr int kSweepsPerLaunch = 20;       // as scaling_halo.orch: 10 x two_sweeps
constexpr int kBatches = 7;

// ---- Random data that keeps every result exact. A hash of (key, index) picks k/1024 with k in
// [-1024, 1023] (dp) or [0, 1023] (halo). In the dp step every sum, the division by the batch
// and by the world size (powers of two), and the SGD update with lr = 1/8 are then exact in f32
// for one step from these values (the largest: |w1| < 1.25 on a grid of 2^-22, 22 bits), so
// every summation order (the kernel's, NCCL's at any world size, torch's) gives the same bits,
// and a CPU reference in double is exact. The stencil adds in a fixed order, which the CPU
// reference repeats in f32 (no FMA can form: the products come after the sums).
__host__ __device__ inline unsigned mix32(unsigned x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}
__host__ __device__ inline float signed_unit(unsigned key, unsigned i) {
  return static_cast<float>(static_cast<int>(mix32(i ^ mix32(key)) >> 21) - 1024) / 1024.0f;
}
__host__ __device__ inline float unit(unsigned key, unsigned i) {
  return static_cast<float>(mix32(i ^ mix32(key)) >> 22) / 1024.0f;
}
__host__ __device__ inline unsigned w_key(unsigned layer) { return 0x57000000u + layer; }
__host__ __device__ inline unsigned x_key(unsigned layer, unsigned sample) { return 0x58000000u + (layer << 16) + sample; }
constexpr unsigned kGridKey = 0x47524944u;

__global__ void init_w(unsigned p, unsigned layer, float* w) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < p) w[i] = signed_unit(w_key(layer), i);
}
// x[k][i] for this rank's samples first_sample .. first_sample + b - 1 (global sample numbers).
__global__ void init_x(unsigned p, unsigned b, unsigned layer, unsigned first_sample, float* x) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= p) return;
  for (unsigned k = 0; k < b; ++k) x[(unsigned long long)k * p + i] = signed_unit(x_key(layer, first_sample + k), i);
}
// The grid's initial values, boundaries included, by global row (-1 and `total` are the fixed
// top and bottom rows): local row j holds global row first_row + j - 1.
__host__ __device__ inline float grid_value(long long global_row, unsigned c, unsigned nx) {
  return unit(kGridKey, static_cast<unsigned>((global_row + 1) * nx + c));
}
__global__ void init_grid(unsigned nx, unsigned rows, long long first_row, float* u) {
  const unsigned c = blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned j = blockIdx.y;
  if (c < nx && j < rows + 2) u[(unsigned long long)j * nx + c] = grid_value(first_row + j - 1, c, nx);
}

namespace {

using orch::bench::driver_version;

// µs per launch of `launch`: the median of kBatches batches of `per_batch` launches.
template <class F>
double us_per_launch(cudaStream_t s, int per_batch, F&& launch) {
  return orch::bench::median_us_per_launch(s, 5, kBatches, per_batch, launch);
}

const orch::rt::nccl::Api* nccl = nullptr;
bool any_wrong = false;  // a variant's check failed on some rank: the exit status says so

struct Context {
  int rank = 0, world = 1;
  void* comm = nullptr;
  cudaStream_t stream = nullptr;
  std::string results;  // rank 0 appends here
  std::string dp_bin, halo_bin;
};

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out;
}

void append_line(const Context& cx, const std::string& line) {
  std::ofstream f(cx.results, std::ios::app);
  f << line << "\n";
  if (!f) {
    std::fprintf(stderr, "scaling_bench: cannot append to %s\n", cx.results.c_str());
    std::exit(1);
  }
}

// The fingerprint of a set of f32 arrays that bench/scaling_ddp.py computes the same way:
// (sum of the bit patterns, sum of (bits >> 8) * (i % 4096 + 1)), i the index in its array,
// as "hex:hex". Both sums stay under 2^60 for the dp weights (8 Mi values).
std::string fingerprint(const std::vector<std::vector<float>>& arrays) {
  uint64_t a = 0, b = 0;
  for (const auto& v : arrays)
    for (size_t i = 0; i < v.size(); ++i) {
      uint32_t bits;
      std::memcpy(&bits, &v[i], 4);
      a += bits;
      b += static_cast<uint64_t>(bits >> 8) * (i % 4096 + 1);
    }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%016llx:%016llx", static_cast<unsigned long long>(a), static_cast<unsigned long long>(b));
  return buf;
}

// Every rank's figures to rank 0 (and the others), `fields` doubles each.
std::vector<std::vector<double>> gather(const Context& cx, const std::vector<double>& mine) {
  auto all = orch::ranks::allgather(cx.comm, mine, cx.stream);
  CHECK_ORCH(all);
  return *all;
}

struct VariantResult {
  double us = 0;
  bool ok = false;
  std::string check;  // what was checked, or what failed
};

// Writes one result line per variant (rank 0) and prints it; every rank's time in the line.
void report(const Context& cx, const std::string& bench, const std::string& scaling, const std::string& config,
            const char* variant, const VariantResult& r, const std::string& fp) {
  std::vector<std::vector<double>> all = gather(cx, {r.us, r.ok ? 1.0 : 0.0});
  bool ok = true;
  for (const auto& v : all) ok &= v[1] == 1.0;
  any_wrong |= !ok;
  if (cx.rank != 0) return;
  double worst = 0;
  std::string ranks = "[";
  for (size_t k = 0; k < all.size(); ++k) {
    worst = std::max(worst, all[k][0]);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%s%.2f", k ? ", " : "", all[k][0]);
    ranks += buf;
  }
  ranks += "]";
  std::printf("%-5s %-7s N=%d %-5s %10.2f us/step  ranks %s  %s: %s\n", bench.c_str(), scaling.c_str(), cx.world,
              variant, worst, ranks.c_str(), ok ? "ok" : "WRONG", r.check.c_str());
  std::fflush(stdout);
  std::ostringstream line;
  line << "{\"kind\": \"result\", \"bench\": \"" << bench << "\", \"scaling\": \"" << scaling << "\", \"world\": "
       << cx.world << ", \"variant\": \"" << variant << "\", \"us\": " << worst << ", \"us_ranks\": " << ranks
       << ", \"ok\": " << (ok ? "true" : "false") << ", \"check\": \"" << json_escape(r.check) << "\", \"config\": \""
       << json_escape(config) << "\", \"fingerprint\": \"" << fp << "\"}";
  append_line(cx, line.str());
}

// ---------------------------------------------------------------------------------- dp step
void run_dp(const Context& cx, bool strong) {
  const unsigned b = strong ? kStrongBatch / cx.world : kWeakBatch;
  const unsigned global_batch = b * cx.world;
  const std::string scaling = strong ? "strong" : "weak";
  char config[160];
  std::snprintf(config, sizeof config, "%d layers x %u f32 parameters, %u samples per rank, global batch %u, lr %g",
                kLayers, kP, b, global_batch, kLr);
  const unsigned blocks = (kP + 255) / 256;
  const float inv_b = 1.0f / static_cast<float>(b);
  const float scale = 1.0f / static_cast<float>(cx.world);

  float *w[kLayers], *x[kLayers], *g[kLayers], *d[kLayers + 1];
  for (int l = 0; l < kLayers; ++l) {
    CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&w[l]), kP * sizeof(float)));
    CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&g[l]), kP * sizeof(float)));
    CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&x[l]), size_t(b) * kP * sizeof(float)));
    init_x<<<blocks, 256, 0, cx.stream>>>(kP, b, l, cx.rank * b, x[l]);
    CHECK_CUDA(cudaGetLastError());
  }
  for (int l = 0; l <= kLayers; ++l) {
    CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&d[l]), sizeof(float)));
    CHECK_CUDA(cudaMemsetAsync(d[l], 0, sizeof(float), cx.stream));
  }
  auto reset = [&] {
    for (int l = 0; l < kLayers; ++l) init_w<<<blocks, 256, 0, cx.stream>>>(kP, l, w[l]);
    CHECK_CUDA(cudaGetLastError());
  };

  // The CPU reference at sampled indices (and each layer's first and last): exact, in double.
  std::mt19937 rng(1234 + cx.rank);
  std::vector<unsigned> idx = {0, kP - 1};
  for (int k = 0; k < 254; ++k) idx.push_back(rng() % kP);
  std::vector<std::vector<double>> want(kLayers);
  size_t moved = 0;
  for (int l = 0; l < kLayers; ++l)
    for (unsigned i : idx) {
      const double w0 = signed_unit(w_key(l), i);
      double sum = 0;
      for (unsigned s = 0; s < global_batch; ++s) sum += signed_unit(x_key(l, s), i);
      const double w1 = w0 - static_cast<double>(kLr) * (w0 - sum / global_batch);
      want[l].push_back(w1);
      moved += w1 != w0 && w1 != 0.0;
    }
  if (moved < idx.size() * kLayers * 9 / 10) {  // the reference itself must not be trivial
    std::fprintf(stderr, "scaling_bench: the dp reference barely moves (%zu of %zu)\n", moved, idx.size() * kLayers);
    std::exit(1);
  }
  auto fetch = [&] {
    std::vector<std::vector<float>> host(kLayers, std::vector<float>(kP));
    CHECK_CUDA(cudaStreamSynchronize(cx.stream));
    for (int l = 0; l < kLayers; ++l)
      CHECK_CUDA(cudaMemcpy(host[l].data(), w[l], kP * sizeof(float), cudaMemcpyDeviceToHost));
    return host;
  };
  auto check_ref = [&](const std::vector<std::vector<float>>& got, VariantResult& r) {
    for (int l = 0; l < kLayers; ++l)
      for (size_t k = 0; k < idx.size(); ++k)
        if (static_cast<double>(got[l][idx[k]]) != want[l][k]) {
          char buf[200];
          std::snprintf(buf, sizeof buf, "w%d[%u] after one step: got %.9g, want %.9g (exact)", l, idx[k],
                        got[l][idx[k]], want[l][k]);
          r.ok = false;
          r.check = buf;
          return;
        }
    r.ok = true;
    r.check = "one step equals the exact CPU reference at " + std::to_string(idx.size() * kLayers) + " sampled weights";
  };

  // hand: the orch pipeline's DAG captured from streams. Gradients on `s` in backward order
  // (each passes d on to the next), allreduces in that order on `sc`, each as soon as its
  // gradient is ready, each layer's SGD on its own stream after its allreduce; all joined.
  cudaStream_t sc, su[kLayers];
  CHECK_CUDA(cudaStreamCreateWithFlags(&sc, cudaStreamNonBlocking));
  for (auto& st : su) CHECK_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaEvent_t fork, comm_done, ev_grad[kLayers], ev_ar[kLayers], ev_upd[kLayers];
  for (cudaEvent_t* e : {&fork, &comm_done}) CHECK_CUDA(cudaEventCreateWithFlags(e, cudaEventDisableTiming));
  for (int l = 0; l < kLayers; ++l)
    for (cudaEvent_t* e : {&ev_grad[l], &ev_ar[l], &ev_upd[l]}) CHECK_CUDA(cudaEventCreateWithFlags(e, cudaEventDisableTiming));
  cudaGraph_t graph;
  CHECK_CUDA(cudaStreamBeginCapture(cx.stream, cudaStreamCaptureModeRelaxed));
  CHECK_CUDA(cudaEventRecord(fork, cx.stream));
  CHECK_CUDA(cudaStreamWaitEvent(sc, fork, 0));
  for (int l = kLayers - 1; l >= 0; --l) {
    grad<<<blocks, 256, 0, cx.stream>>>(kP, b, inv_b, w[l], x[l], d[l + 1], g[l], d[l]);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaEventRecord(ev_grad[l], cx.stream));
    CHECK_CUDA(cudaStreamWaitEvent(sc, ev_grad[l], 0));
    CHECK_NCCL(nccl->AllReduce(g[l], g[l], kP, orch::rt::nccl::kFloat32, orch::rt::nccl::kSum, cx.comm, sc));
    CHECK_CUDA(cudaEventRecord(ev_ar[l], sc));
    CHECK_CUDA(cudaStreamWaitEvent(su[l], ev_ar[l], 0));
    sgd<<<blocks, 256, 0, su[l]>>>(kP, kLr, scale, w[l], g[l]);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaEventRecord(ev_upd[l], su[l]));
  }
  CHECK_CUDA(cudaEventRecord(comm_done, sc));
  CHECK_CUDA(cudaStreamWaitEvent(cx.stream, comm_done, 0));
  for (int l = 0; l < kLayers; ++l) CHECK_CUDA(cudaStreamWaitEvent(cx.stream, ev_upd[l], 0));
  CHECK_CUDA(cudaStreamEndCapture(cx.stream, &graph));
  cudaGraphExec_t exec;
  CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  CHECK_CUDA(cudaGraphUpload(exec, cx.stream));

  VariantResult hand;
  reset();
  CHECK_CUDA(cudaGraphLaunch(exec, cx.stream));
  const std::vector<std::vector<float>> hand_w = fetch();
  check_ref(hand_w, hand);
  const std::string fp = fingerprint(hand_w);
  hand.us = us_per_launch(cx.stream, 30, [&] { CHECK_CUDA(cudaGraphLaunch(exec, cx.stream)); });

  // orch: the pipeline on the same memory and communicator.
  VariantResult orch_r;
  std::string orch_fp;
  {
    auto p = orch::Pipeline::load(cx.dp_bin);
    CHECK_ORCH(p);
    orch::Bindings bind;
    bind.param("p", kP).param("b", b).param("lr", kLr).comm("world", cx.comm);
    for (int l = 0; l < kLayers; ++l) {
      const std::string n = std::to_string(l);
      bind.buffer("w" + n, w[l], kP * sizeof(float))
          .buffer("x" + n, x[l], size_t(b) * kP * sizeof(float))
          .buffer("g" + n, g[l], kP * sizeof(float));
    }
    for (int l = 0; l <= kLayers; ++l) bind.buffer("d" + std::to_string(l), d[l], sizeof(float));
    auto ex = (*p)->instantiate(bind, cx.stream);
    CHECK_ORCH(ex);
    reset();
    CHECK_ORCH((*ex)->launch(cx.stream));
    const std::vector<std::vector<float>> orch_w = fetch();
    check_ref(orch_w, orch_r);
    orch_fp = fingerprint(orch_w);
    bool same = true;
    for (int l = 0; l < kLayers; ++l) same &= std::memcmp(orch_w[l].data(), hand_w[l].data(), kP * sizeof(float)) == 0;
    if (orch_r.ok && !same) {
      orch_r.ok = false;
      orch_r.check = "differs from the hand-captured step's weights";
    } else if (orch_r.ok) {
      orch_r.check += "; all weights equal the hand-captured step's bit for bit";
    }
    orch_r.us = us_per_launch(cx.stream, 30, [&] { CHECK_ORCH((*ex)->launch(cx.stream)); });
    CHECK_CUDA(cudaStreamSynchronize(cx.stream));
  }
  report(cx, "dp", scaling, config, "hand", hand, fp);
  report(cx, "dp", scaling, config, "orch", orch_r, orch_fp);

  CHECK_CUDA(cudaGraphExecDestroy(exec));
  CHECK_CUDA(cudaGraphDestroy(graph));
  for (cudaEvent_t e : {fork, comm_done}) CHECK_CUDA(cudaEventDestroy(e));
  for (int l = 0; l < kLayers; ++l)
    for (cudaEvent_t e : {ev_grad[l], ev_ar[l], ev_upd[l]}) CHECK_CUDA(cudaEventDestroy(e));
  CHECK_CUDA(cudaStreamDestroy(sc));
  for (auto st : su) CHECK_CUDA(cudaStreamDestroy(st));
  for (int l = 0; l < kLayers; ++l)
    for (float* ptr : {w[l], x[l], g[l]}) CHECK_CUDA(cudaFree(ptr));
  for (float* ptr : d) CHECK_CUDA(cudaFree(ptr));
}

// ---------------------------------------------------------------------------------- halo
// Global rows [a, b) after `steps` sweeps from the initial grid, on the CPU: the sweep of
// rows [a - steps, b + steps) (clamped to the fixed rows -1 and `total`), whose outer rows go
// stale one row a step from each end that is not a fixed row, which never reaches [a, b).
std::vector<float> reference_rows(long long total, unsigned nx, long long a, long long b, int steps) {
  const long long lo = std::max<long long>(-1, a - steps), hi = std::min<long long>(total, b + steps - 1);
  const long long n = hi - lo + 1;
  std::vector<float> u(size_t(n) * nx), v;
  for (long long r = 0; r < n; ++r)
    for (unsigned c = 0; c < nx; ++c) u[size_t(r) * nx + c] = grid_value(lo + r, c, nx);
  v = u;
  for (int s = 0; s < steps; ++s) {
    for (long long r = 1; r + 1 < n; ++r) {
      const float* up = &u[size_t(r - 1) * nx];
      const float* mid = &u[size_t(r) * nx];
      const float* down = &u[size_t(r + 1) * nx];
      float* out = &v[size_t(r) * nx];
      for (unsigned c = 1; c + 1 < nx; ++c) out[c] = 0.25f * (((up[c] + down[c]) + mid[c - 1]) + mid[c + 1]);
    }
    std::swap(u, v);
  }
  return std::vector<float>(u.begin() + size_t(a - lo) * nx, u.begin() + size_t(b - lo) * nx);
}

void run_halo(const Context& cx, bool strong) {
  const unsigned rows = strong ? kStrongRows / cx.world : kWeakRows;
  const long long total = static_cast<long long>(rows) * cx.world;
  const long long first = static_cast<long long>(rows) * cx.rank;  // this rank's first global row
  const std::string scaling = strong ? "strong" : "weak";
  char config[160];
  std::snprintf(config, sizeof config, "%lld x %u cells, %u rows per rank, %d sweeps per launch", total, kNx, rows,
                kSweepsPerLaunch);
  const size_t cells = size_t(rows + 2) * kNx;
  float *u, *v, *edges, *gathered;
  CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&u), cells * sizeof(float)));
  CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&v), cells * sizeof(float)));
  CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&edges), 2 * kNx * sizeof(float)));
  CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&gathered), size_t(2) * kNx * cx.world * sizeof(float)));
  auto reset = [&] {
    const dim3 grid((kNx + 255) / 256, rows + 2);
    init_grid<<<grid, 256, 0, cx.stream>>>(kNx, rows, first, u);
    init_grid<<<grid, 256, 0, cx.stream>>>(kNx, rows, first, v);
    CHECK_CUDA(cudaGetLastError());
  };

  // The reference: this rank's first and last kSweepsPerLaunch rows (every row the exchange
  // reaches within one launch) and as many in the middle.
  struct Band {
    long long a, b;
    std::vector<float> want;
  };
  std::vector<Band> bands;
  for (long long a : {first, first + rows / 2 - kSweepsPerLaunch / 2, first + rows - kSweepsPerLaunch})
    bands.push_back({a, a + kSweepsPerLaunch, reference_rows(total, kNx, a, a + kSweepsPerLaunch, kSweepsPerLaunch)});
  size_t moved = 0, checked = 0;
  for (const Band& bd : bands)
    for (long long r = bd.a; r < bd.b; ++r)
      for (unsigned c = 1; c + 1 < kNx; ++c, ++checked)
        moved += bd.want[size_t(r - bd.a) * kNx + c] != grid_value(r, c, kNx);
  if (moved < checked * 9 / 10) {
    std::fprintf(stderr, "scaling_bench: the halo reference barely moves (%zu of %zu)\n", moved, checked);
    std::exit(1);
  }
  auto fetch = [&] {
    std::vector<float> host(cells);
    CHECK_CUDA(cudaStreamSynchronize(cx.stream));
    CHECK_CUDA(cudaMemcpy(host.data(), u, cells * sizeof(float), cudaMemcpyDeviceToHost));
    return host;
  };
  auto check_ref = [&](const std::vector<float>& got, VariantResult& r) {
    for (const Band& bd : bands)
      for (long long gr = bd.a; gr < bd.b; ++gr)
        for (unsigned c = 0; c < kNx; ++c) {
          const float have = got[size_t(gr - first + 1) * kNx + c], want = bd.want[size_t(gr - bd.a) * kNx + c];
          if (std::memcmp(&have, &want, 4) != 0) {
            char buf[200];
            std::snprintf(buf, sizeof buf, "row %lld column %u after %d sweeps: got %.9g, want %.9g (same f32 order)",
                          gr, c, kSweepsPerLaunch, have, want);
            r.ok = false;
            r.check = buf;
            return;
          }
        }
    r.ok = true;
    r.check = "one launch equals the CPU's f32 sweeps bit for bit on " + std::to_string(bands.size() * kSweepsPerLaunch) +
              " rows per rank (first, middle, last)";
  };

  const dim3 sweep_grid((kNx + 31) / 32, (rows + 7) / 8), sweep_block(32, 8);
  const unsigned edge_blocks = (kNx + 255) / 256;
  cudaGraph_t graph;
  CHECK_CUDA(cudaStreamBeginCapture(cx.stream, cudaStreamCaptureModeRelaxed));
  for (int s = 0; s < kSweepsPerLaunch; ++s) {
    float* src = s % 2 ? v : u;
    float* dst = s % 2 ? u : v;
    pack<<<edge_blocks, 256, 0, cx.stream>>>(kNx, rows, src, edges);
    CHECK_NCCL(nccl->AllGather(edges, gathered, 2 * kNx, orch::rt::nccl::kFloat32, cx.comm, cx.stream));
    unpack<<<edge_blocks, 256, 0, cx.stream>>>(kNx, rows, cx.rank, cx.world, gathered, src);
    sweep<<<sweep_grid, sweep_block, 0, cx.stream>>>(kNx, rows, src, dst);
    CHECK_CUDA(cudaGetLastError());
  }
  CHECK_CUDA(cudaStreamEndCapture(cx.stream, &graph));
  cudaGraphExec_t exec;
  CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  CHECK_CUDA(cudaGraphUpload(exec, cx.stream));

  VariantResult hand;
  reset();
  CHECK_CUDA(cudaGraphLaunch(exec, cx.stream));
  const std::vector<float> hand_u = fetch();
  check_ref(hand_u, hand);
  hand.us = us_per_launch(cx.stream, 5, [&] { CHECK_CUDA(cudaGraphLaunch(exec, cx.stream)); }) / kSweepsPerLaunch;

  VariantResult orch_r;
  {
    auto p = orch::Pipeline::load(cx.halo_bin);
    CHECK_ORCH(p);
    orch::Bindings bind;
    bind.param("nx", kNx).param("rows", rows).comm("world", cx.comm);
    bind.buffer("u", u, cells * sizeof(float))
        .buffer("v", v, cells * sizeof(float))
        .buffer("edges", edges, 2 * kNx * sizeof(float))
        .buffer("gathered", gathered, size_t(2) * kNx * cx.world * sizeof(float));
    auto ex = (*p)->instantiate(bind, cx.stream);
    CHECK_ORCH(ex);
    reset();
    CHECK_ORCH((*ex)->launch(cx.stream));
    const std::vector<float> orch_u = fetch();
    check_ref(orch_u, orch_r);
    if (orch_r.ok && std::memcmp(orch_u.data(), hand_u.data(), cells * sizeof(float)) != 0) {
      orch_r.ok = false;
      orch_r.check = "differs from the hand-captured launch's grid";
    } else if (orch_r.ok) {
      orch_r.check += "; the whole strip equals the hand-captured launch's bit for bit";
    }
    orch_r.us = us_per_launch(cx.stream, 5, [&] { CHECK_ORCH((*ex)->launch(cx.stream)); }) / kSweepsPerLaunch;
    CHECK_CUDA(cudaStreamSynchronize(cx.stream));
  }
  report(cx, "halo", scaling, config, "hand", hand, "");
  report(cx, "halo", scaling, config, "orch", orch_r, "");

  CHECK_CUDA(cudaGraphExecDestroy(exec));
  CHECK_CUDA(cudaGraphDestroy(graph));
  for (float* ptr : {u, v, edges, gathered}) CHECK_CUDA(cudaFree(ptr));
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
  const char* id_file = std::getenv("ORCH_NCCL_ID_FILE");
  if (!id_file) {
    std::fprintf(stderr, "scaling_bench: ORCH_NCCL_ID_FILE is not set\n");
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
    int device = 0;
    CHECK_CUDA(cudaGetDevice(&device));
    CHECK_CUDA(cudaGetDeviceProperties(&prop, device));
    char date[32];
    const std::time_t now = std::time(nullptr);
    std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
    std::printf("scaling_bench: %d rank(s), one per GPU (%s, driver %s), NCCL %s (%s), NCCL_NVLS_ENABLE=%s, %s\n",
                cx.world, prop.name, driver_version().c_str(), nccl->version_string().c_str(), nccl->path.c_str(),
                std::getenv("NCCL_NVLS_ENABLE") ? std::getenv("NCCL_NVLS_ENABLE") : "unset", date);
    std::fflush(stdout);
    std::ostringstream line;
    line << "{\"kind\": \"meta\", \"source\": \"scaling_bench\", \"world\": " << cx.world << ", \"gpu\": \""
         << json_escape(prop.name) << "\", \"driver\": \"" << json_escape(driver_version()) << "\", \"nccl\": \""
         << nccl->version_string() << "\", \"date\": \"" << date << "\"}";
    append_line(cx, line.str());
  }
  run_dp(cx, true);
  run_dp(cx, false);
  run_halo(cx, true);
  run_halo(cx, false);
  CHECK_CUDA(cudaStreamDestroy(cx.stream));
  CHECK_NCCL(nccl->CommDestroy(cx.comm));
  return any_wrong ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: scaling_bench ORCHC BENCH_DIR RESULTS\n");
    return 2;
  }
  // Every process this one starts inherits these (the children of spawn too).
  orch::ranks::default_nccl_environment();
  setenv("NVSHMEM_DISABLE_NVLS", "1", 0);
  setenv("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1", 0);
  Context cx;
  cx.results = argv[3];
  if (std::getenv("ORCH_RANK")) {  // a rank: the parent passes the compiled pipelines
    cx.dp_bin = std::string(argv[2]) + "/scaling_dp.bin";
    cx.halo_bin = std::string(argv[2]) + "/scaling_halo.bin";
    return rank_main(cx);
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count < 1) {
    std::printf("scaling_bench: no CUDA device; skipped\n");
    return 77;
  }
  const int world = std::min(count, 8);
  if (world & (world - 1)) {
    std::printf("scaling_bench: %d GPUs visible; the benchmark runs on 1, 2, 4 or 8 (set CUDA_VISIBLE_DEVICES)\n", count);
    return 77;
  }
  // Compile both pipelines with orchc's defaults into a private folder the ranks read.
  char tmpl[] = "/tmp/orch_scaling_XXXXXX";
  if (!mkdtemp(tmpl)) {
    std::perror("scaling_bench: mkdtemp");
    return 1;
  }
  const std::string dir = tmpl;
  for (const char* name : {"scaling_dp", "scaling_halo"}) {
    const std::string cmd = "'" + std::string(argv[1]) + "' '" + argv[2] + "/" + name + ".orch' -o '" + dir + "/" +
                            name + ".bin'";
    if (std::system(cmd.c_str()) != 0) {
      std::fprintf(stderr, "scaling_bench: %s failed\n", cmd.c_str());
      return 1;
    }
  }
  orch::ranks::SpawnOptions o;
  o.timeout = std::chrono::seconds(300);
  auto exits = orch::ranks::spawn(world, {"/proc/self/exe", argv[1], dir, argv[3]}, o);
  std::system(("rm -rf '" + dir + "'").c_str());
  if (!exits.ok()) {
    std::fprintf(stderr, "scaling_bench: %s\n", exits.error().to_string().c_str());
    return 1;
  }
  int rc = 0;
  for (const auto& x : *exits)
    if (!x.ok()) {
      std::fprintf(stderr, "scaling_bench: %s\n", x.describe().c_str());
      rc = 1;
    }
  return rc;
}
