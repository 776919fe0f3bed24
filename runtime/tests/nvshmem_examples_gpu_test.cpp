// Multi-GPU tests of the three NVSHMEM examples (issue 23; test suite "multi-gpu": skipped, exit
// 77, where fewer than two GPUs run sm_90 code): examples/nvshmem_pipeline.orch,
// examples/nvshmem_halo.orch and examples/nvshmem_queue.orch, compiled by orchc with --nvshmem,
// run through the runtime on one process per GPU (orch::ranks::spawn of this binary with
// --orch-rank-worker=NAME). Each rank instantiates over a communicator orch makes from a unique id
// (NVSHMEM starts over it), copies seeded inputs into the runtime-allocated buffers, launches
// several times and compares its buffers, symmetric ones included (Executable::buffer), with a
// CPU reference that knows every rank's inputs (they come from the seed). Inputs are chosen so
// that the reference matches bit for bit: every product and sum in the pipeline and queue
// examples is exact in f32, and the halo reference does the sweep's f32 operations in the
// kernel's order (no multiply feeds an add there, so no contraction can differ).
//
// One more case runs every example twice in the same processes, compiled by default and with
// `--no-pdl --unroll 1` (two Executables at once, sharing NVSHMEM), on the same inputs: both
// must equal the reference and each other bit for bit.
//
// The pipeline example runs on exactly two PEs (its peers are `1 - my_pe`); halo and queue on
// min(GPUs, 8). Needs NVSHMEM 3.4.5: $ORCH_NVSHMEM_HOME (the wheel's nvidia/nvshmem), else the
// build's (scripts/fetch-nvshmem); without one each case says so and passes.
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "orch/ranks.h"
#include "orch/runtime.h"
#include "runtime/tests/rank_check.h"
#include "runtime/tests/test_util.h"

namespace {

// ---- inputs, the same on every rank -----------------------------------------------------

uint64_t mix(uint64_t z) {  // splitmix64's finaliser
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// A nonzero integer in [-range, range], a function of the seed, the example, the launch, the
// rank whose input it is, and the element: any rank can compute any rank's inputs.
int pick(uint64_t seed, int example, int launch, int rank, uint64_t i, int range) {
  const uint64_t stream = mix(seed ^ mix((static_cast<uint64_t>(example) << 48) ^
                                         (static_cast<uint64_t>(launch) << 32) ^ static_cast<uint64_t>(rank)));
  int m = static_cast<int>(mix(stream ^ mix(i)) % static_cast<uint64_t>(2 * range)) - range;  // [-range, range)
  return m >= 0 ? m + 1 : m;
}

constexpr int kPipeline = 1, kHalo = 2, kQueue = 3;

// ---- inside a rank process --------------------------------------------------------------

int& failures = orch::test::rank_checks().failures;
int& my_rank = orch::test::rank_checks().rank;
int world = 0;

// One compiled example: what it was compiled with (for the logs) and its pipeline.bin.
struct Variant {
  std::string label;
  std::string bin;
};

// The arguments every scenario gets: NVSHMEM's host library, the seed, then label and
// pipeline.bin of each variant (one, or two to compare).
struct Args {
  std::string library;
  uint64_t seed = 0;
  std::vector<Variant> variants;
};

bool parse_args(const std::vector<std::string>& args, Args* out) {
  if (args.size() < 4 || (args.size() - 2) % 2 != 0) return false;
  out->library = args[0];
  out->seed = std::strtoull(args[1].c_str(), nullptr, 0);
  for (size_t i = 2; i + 1 < args.size(); i += 2) out->variants.push_back({args[i], args[i + 1]});
  return true;
}

// Everything a scenario holds, released in the same order on every rank: the Executables first
// (freeing symmetric memory is collective), in the order they were made, then the pipelines.
struct Held {
  cudaStream_t stream = nullptr;
  std::vector<std::unique_ptr<orch::Pipeline>> pipelines;
  std::vector<std::unique_ptr<orch::Executable>> executables;
  std::vector<void*> memory;  // cudaMalloc'd by the test
  ~Held() {
    for (auto& e : executables) e.reset();
    pipelines.clear();
    for (void* m : memory) (void)cudaFree(m);
    if (stream) (void)cudaStreamDestroy(stream);
  }
};

int next_id = 0;

// Loads every variant and instantiates each, with `bind` adding params and buffers, over a
// communicator of its own: an NCCL unique id serves one ncclCommInitRank only (NVIDIA/nccl#1038),
// so each Executable gets a fresh one through a file of its own beside ORCH_NCCL_ID_FILE. The
// first starts NVSHMEM; the second joins its session.
template <class Bind>
int load_and_instantiate(const Args& a, Held* h, Bind bind) {
  setenv("ORCH_NVSHMEM_LIBRARY", a.library.c_str(), 1);
  RANK_CUDA(cudaStreamCreateWithFlags(&h->stream, cudaStreamNonBlocking));
  const char* id_file = std::getenv("ORCH_NCCL_ID_FILE");
  RANK_REQUIRE(id_file, "ORCH_NCCL_ID_FILE is not set");
  for (const Variant& v : a.variants) {
    auto p = orch::Pipeline::load(v.bin);
    RANK_REQUIRE_OK(p);
    h->pipelines.push_back(std::move(*p));
  }
  for (size_t i = 0; i < a.variants.size(); ++i) {
    const std::string path = std::string(id_file) + ".example-" + std::to_string(next_id++);
    auto id = orch::ranks::share_unique_id(path, my_rank, std::chrono::seconds(60));
    RANK_REQUIRE_OK(id);
    orch::Bindings b;
    b.comm_from_unique_id("world", id->data(), my_rank, world);
    if (bind(b, h) != 0) return 1;
    auto x = h->pipelines[i]->instantiate(b, h->stream);
    RANK_REQUIRE(x.ok(), "%s: instantiate: %s", a.variants[i].label.c_str(), x.ok() ? "" : x.error().to_string().c_str());
    RANK_CHECK((*x)->rank() == my_rank);
    RANK_CHECK((*x)->world_size() == world);
    h->executables.push_back(std::move(*x));
  }
  return 0;
}

template <class T>
int copy_in(orch::Executable& e, const char* name, const std::vector<T>& data) {
  void* p = e.buffer(name);
  RANK_REQUIRE(p != nullptr, "no buffer '%s'", name);
  RANK_REQUIRE(e.buffer_bytes(name) == data.size() * sizeof(T), "buffer '%s' holds %zu bytes, want %zu", name,
           e.buffer_bytes(name), data.size() * sizeof(T));
  RANK_CUDA(cudaMemcpy(p, data.data(), data.size() * sizeof(T), cudaMemcpyHostToDevice));
  return 0;
}

template <class T>
int copy_out(const orch::Executable& e, const char* name, std::vector<T>* data, size_t count) {
  void* p = e.buffer(name);
  RANK_REQUIRE(p != nullptr, "no buffer '%s'", name);
  RANK_REQUIRE(e.buffer_bytes(name) >= count * sizeof(T), "buffer '%s' holds %zu bytes, want %zu", name,
           e.buffer_bytes(name), count * sizeof(T));
  data->assign(count, T{});
  RANK_CUDA(cudaMemcpy(data->data(), p, count * sizeof(T), cudaMemcpyDeviceToHost));
  return 0;
}

int fill_bytes(orch::Executable& e, const char* name, int byte) {
  void* p = e.buffer(name);
  RANK_REQUIRE(p != nullptr, "no buffer '%s'", name);
  RANK_CUDA(cudaMemset(p, byte, e.buffer_bytes(name)));
  return 0;
}

int launch_and_wait(orch::Executable& e, cudaStream_t s, const std::string& label) {
  orch::Status st = e.launch(s);
  RANK_REQUIRE(st.ok(), "%s: launch: %s", label.c_str(), st.ok() ? "" : st.error().to_string().c_str());
  RANK_CUDA(cudaStreamSynchronize(s));
  orch::Status d = e.device_status();
  RANK_REQUIRE(d.ok(), "%s: device status: %s", label.c_str(), d.ok() ? "" : d.error().to_string().c_str());
  return 0;
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// Elements of `got` whose bits differ from `want`'s; prints the first four.
size_t mismatches(const std::string& label, const char* what, const std::vector<float>& got,
                  const std::vector<float>& want) {
  size_t bad = 0;
  for (size_t i = 0; i < got.size() || i < want.size(); ++i) {
    const bool have_got = i < got.size(), have_want = i < want.size();
    if (have_got && have_want && bits(got[i]) == bits(want[i])) continue;
    if (bad++ < 4)
      std::printf("rank %d (%s): %s[%zu] = %.9g (0x%08x), want %.9g (0x%08x)\n", my_rank, label.c_str(), what, i,
                  have_got ? double(got[i]) : std::nan(""), have_got ? bits(got[i]) : 0u,
                  have_want ? double(want[i]) : std::nan(""), have_want ? bits(want[i]) : 0u);
  }
  if (bad > 4) std::printf("rank %d (%s): %s: %zu of %zu differ\n", my_rank, label.c_str(), what, bad, want.size());
  std::fflush(stdout);
  return bad;
}

// What each variant produced at each launch, compared across variants at the end.
using Fingerprint = std::vector<float>;

int compare_variants(const Args& a, const std::vector<std::vector<Fingerprint>>& prints, const char* what) {
  if (a.variants.size() < 2) return 0;
  size_t bad = 0, compared = 0;
  for (size_t launch = 0; launch < prints[0].size(); ++launch) {
    const std::string label = a.variants[1].label + " against " + a.variants[0].label + ", launch " +
                              std::to_string(launch + 1);
    bad += mismatches(label, what, prints[1][launch], prints[0][launch]);
    compared += prints[0][launch].size();
  }
  RANK_CHECK(bad == 0);
  std::printf("rank %d: %s and %s: %zu values of %s over %zu launches %s\n", my_rank, a.variants[0].label.c_str(),
              a.variants[1].label.c_str(), compared, what, prints[0].size(),
              bad == 0 ? "identical bit for bit" : "DIFFER");
  return 0;
}

// ---- examples/nvshmem_pipeline.orch -----------------------------------------------------
//
// PE 0 runs stage 0 (send = 2x + 1) on microbatch t and puts it into PE 1's inbox; PE 1 runs
// stage 1 (y = inbox^2 - 1) on it a round later. x = m/4 (|m| <= 256): 2x + 1 has at most ten
// significant bits, so its square and the -1 are exact in f32, with or without an FMA.

constexpr uint32_t kPipeN = 3000;    // elements of one microbatch (not a multiple of 256)
constexpr uint32_t kPipeSteps = 12;  // microbatches

std::vector<float> pipeline_x(uint64_t seed, int launch, int rank) {
  std::vector<float> x(size_t(kPipeN) * kPipeSteps);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(pick(seed, kPipeline, launch, rank, i, 256)) / 4.0f;
  return x;
}

int scenario_pipeline(const std::vector<std::string>& argv) {
  Args a;
  RANK_REQUIRE(parse_args(argv, &a), "bad arguments");
  RANK_REQUIRE(world == 2, "examples/nvshmem_pipeline.orch runs on exactly 2 PEs (its peer is 1 - my_pe), not %d", world);
  Held h;
  int rc = load_and_instantiate(a, &h, [](orch::Bindings& b, Held*) {
    b.param("n", kPipeN).param("steps", kPipeSteps);
    return 0;
  });
  if (rc) return rc;
  const int launches = a.variants.size() == 1 ? 3 : 2;
  const size_t n = kPipeN, total = size_t(kPipeN) * kPipeSteps;
  std::vector<std::vector<Fingerprint>> prints(a.variants.size());
  for (int launch = 0; launch < launches; ++launch) {
    // Fresh inputs each launch (the example resets its state with its two barriers).
    const std::vector<float> mine = pipeline_x(a.seed, launch, my_rank);
    const std::vector<float> x0 = pipeline_x(a.seed, launch, 0);
    std::vector<float> want_y(total), want_last(n), zeros(n, 0.0f);
    for (size_t i = 0; i < total; ++i) {
      const float s = 2.0f * x0[i] + 1.0f;
      want_y[i] = s * s - 1.0f;
    }
    for (size_t i = 0; i < n; ++i) want_last[i] = 2.0f * x0[(kPipeSteps - 1) * n + i] + 1.0f;
    std::vector<float> nan_y(total);
    for (float& f : nan_y) {
      const uint32_t all = 0xffffffffu;
      std::memcpy(&f, &all, sizeof f);
    }
    for (size_t v = 0; v < a.variants.size(); ++v) {
      orch::Executable& e = *h.executables[v];
      const std::string label = a.variants[v].label + ", launch " + std::to_string(launch + 1) + "/" +
                                std::to_string(launches);
      if (copy_in(e, "x", mine)) return 1;
      if (fill_bytes(e, "y", 0xff)) return 1;  // NaN: what stage 1 leaves unwritten shows
      if (launch_and_wait(e, h.stream, label)) return 1;
      std::vector<float> y, send, inbox;
      std::vector<uint64_t> full, free_;
      if (copy_out(e, "y", &y, total) || copy_out(e, "send", &send, n) || copy_out(e, "inbox", &inbox, n) ||
          copy_out(e, "full", &full, 1) || copy_out(e, "free", &free_, 1))
        return 1;
      size_t bad = 0;
      if (my_rank == 1) {
        // Stage 1 of every microbatch, from PE 0's x; PE 1's inbox holds the last microbatch
        // (PE 0's last put, of the same values, may still be landing); PE 1's send is never
        // written; `full` is at least `steps` (waited for) and at most steps + 1 (the last put).
        bad += mismatches(label, "y", y, want_y);
        bad += mismatches(label, "inbox", inbox, want_last);
        bad += mismatches(label, "send", send, zeros);
        RANK_CHECK(full[0] == kPipeSteps || full[0] == kPipeSteps + 1);
        RANK_CHECK(free_[0] <= kPipeSteps + 1);
        std::printf("rank 1 (%s): y (%zu floats) = (2x + 1)^2 - 1 of PE 0's x, inbox = PE 0's last microbatch, send "
                    "untouched, full = %llu: %s\n",
                    label.c_str(), total, static_cast<unsigned long long>(full[0]), bad ? "MISMATCH" : "ok");
        prints[v].push_back(y);
      } else {
        // Stage 0 only: y stays NaN, send is the last microbatch's stage 0, the inbox only ever
        // gets PE 1's send (zeros), and `free` is steps + 1 (waited for, and PE 1's last signal).
        std::vector<uint32_t> ybits(total);
        std::memcpy(ybits.data(), y.data(), total * sizeof(float));
        const size_t written = static_cast<size_t>(
            std::count_if(ybits.begin(), ybits.end(), [](uint32_t u) { return u != 0xffffffffu; }));
        if (written) std::printf("rank 0 (%s): %zu elements of y written, want none\n", label.c_str(), written);
        bad += written;
        bad += mismatches(label, "send", send, want_last);
        bad += mismatches(label, "inbox", inbox, zeros);
        RANK_CHECK(free_[0] == kPipeSteps + 1);
        RANK_CHECK(full[0] <= kPipeSteps + 1);
        std::printf("rank 0 (%s): send = 2x + 1 of the last microbatch (%zu floats), y untouched, inbox zeros, free = "
                    "%llu: %s\n",
                    label.c_str(), n, static_cast<unsigned long long>(free_[0]), bad ? "MISMATCH" : "ok");
        prints[v].push_back(send);
      }
      RANK_CHECK(bad == 0);
    }
  }
  if (compare_variants(a, prints, my_rank == 1 ? "y" : "send")) return 1;
  return failures == 0 ? 0 : 1;
}

// ---- examples/nvshmem_halo.orch ---------------------------------------------------------
//
// The reference is the whole grid: kHaloTotalRows rows of nx at every world size, periodic in
// rows (PE p holds rows p * rows .., rows = kHaloTotalRows / world), columns 0 and nx - 1 fixed,
// its inputs a function of the global cell. A sweep is the kernel's f32 arithmetic in its order:
// 0.25f * (up + down + left + right), up the next row, down the previous one. So one GPU and
// every world size must give the same bits: the solver's answer does not depend on the split.

constexpr uint32_t kHaloNx = 300;         // columns (not a multiple of 256)
constexpr uint32_t kHaloTotalRows = 96;   // rows in all: 96 on one PE, 48 on each of 2, 24 of 4, 12 of 8
constexpr uint32_t kHaloPairs = 16;       // loop trips: 32 sweeps a launch

void halo_sweep(const std::vector<float>& src, std::vector<float>* dst, size_t total_rows, size_t nx) {
  dst->resize(src.size());
  for (size_t r = 0; r < total_rows; ++r) {
    const size_t upr = (r + 1) % total_rows, downr = (r + total_rows - 1) % total_rows;
    for (size_t c = 0; c < nx; ++c) {
      float out = src[r * nx + c];
      if (c > 0 && c + 1 < nx) {
        const float up = src[upr * nx + c], down = src[downr * nx + c];
        float sum = up + down;
        sum = sum + src[r * nx + c - 1];
        sum = sum + src[r * nx + c + 1];
        out = 0.25f * sum;
      }
      (*dst)[r * nx + c] = out;
    }
  }
}

std::vector<float> halo_rows(const std::vector<float>& grid, size_t first_row, size_t count, size_t nx) {
  return std::vector<float>(grid.begin() + static_cast<std::ptrdiff_t>(first_row * nx),
                            grid.begin() + static_cast<std::ptrdiff_t>((first_row + count) * nx));
}

int scenario_halo(const std::vector<std::string>& argv) {
  Args a;
  RANK_REQUIRE(parse_args(argv, &a), "bad arguments");
  RANK_REQUIRE(world >= 1 && kHaloTotalRows % static_cast<uint32_t>(world) == 0, "world size %d", world);
  const uint32_t rows_each = kHaloTotalRows / static_cast<uint32_t>(world);
  Held h;
  int rc = load_and_instantiate(a, &h, [rows_each](orch::Bindings& b, Held*) {
    b.param("nx", kHaloNx).param("rows", rows_each).param("pairs", kHaloPairs);
    return 0;
  });
  if (rc) return rc;
  const size_t nx = kHaloNx, rows = rows_each, total_rows = kHaloTotalRows;
  const size_t below = (size_t(my_rank) * rows + total_rows - 1) % total_rows;  // the row under my first
  const size_t above = ((size_t(my_rank) + 1) * rows) % total_rows;            // the row over my last
  // Launches 1 and 3 start from fresh inputs; launch 2 goes on from where launch 1 ended.
  const int launches = a.variants.size() == 1 ? 3 : 2;
  std::vector<float> grid, scratch, odd;
  std::vector<std::vector<Fingerprint>> prints(a.variants.size());
  for (int launch = 0; launch < launches; ++launch) {
    const bool fresh = launch % 2 == 0;
    if (fresh) {
      grid.assign(total_rows * nx, 0.0f);
      for (size_t g = 0; g < total_rows * nx; ++g)
        grid[g] = static_cast<float>(pick(a.seed, kHalo, launch, 0, g, 1024)) / 1024.0f;
    }
    std::vector<float> mine = halo_rows(grid, size_t(my_rank) * rows, rows, nx);
    for (uint32_t j = 0; j < kHaloPairs; ++j) {
      halo_sweep(grid, &odd, total_rows, nx);  // u -> v
      halo_sweep(odd, &scratch, total_rows, nx);  // v -> u
      grid.swap(scratch);
    }
    const std::vector<float> want_u = halo_rows(grid, size_t(my_rank) * rows, rows, nx);
    const std::vector<float> want_first = halo_rows(grid, size_t(my_rank) * rows, 1, nx);
    const std::vector<float> want_last = halo_rows(grid, size_t(my_rank) * rows + rows - 1, 1, nx);
    const std::vector<float> want_lo_b = halo_rows(odd, below, 1, nx);  // the last v rows the neighbours sent
    const std::vector<float> want_hi_b = halo_rows(odd, above, 1, nx);
    for (size_t v = 0; v < a.variants.size(); ++v) {
      orch::Executable& e = *h.executables[v];
      const std::string label = a.variants[v].label + ", launch " + std::to_string(launch + 1) + "/" +
                                std::to_string(launches) + (fresh ? ", fresh inputs" : ", continued");
      if (fresh && copy_in(e, "u", mine)) return 1;
      if (launch_and_wait(e, h.stream, label)) return 1;
      std::vector<float> u, first, last, lo_b, hi_b;
      std::vector<uint64_t> got_a, got_b;
      if (copy_out(e, "u", &u, rows * nx) || copy_out(e, "first", &first, nx) || copy_out(e, "last", &last, nx) ||
          copy_out(e, "lo_b", &lo_b, nx) || copy_out(e, "hi_b", &hi_b, nx) || copy_out(e, "got_a", &got_a, 1) ||
          copy_out(e, "got_b", &got_b, 1))
        return 1;
      size_t bad = 0;
      bad += mismatches(label, "u", u, want_u);
      bad += mismatches(label, "first", first, want_first);
      bad += mismatches(label, "last", last, want_last);
      bad += mismatches(label, "lo_b", lo_b, want_lo_b);
      bad += mismatches(label, "hi_b", hi_b, want_hi_b);
      // Every b row was waited for; the last trip's a rows were put but not waited for.
      RANK_CHECK(got_b[0] == 2ull * kHaloPairs);
      RANK_CHECK(got_a[0] >= 2ull * kHaloPairs && got_a[0] <= 2ull * kHaloPairs + 2);
      RANK_CHECK(bad == 0);
      std::printf("rank %d (%s): u (%zu x %zu) after %u sweeps of the %zu-row periodic grid, first/last rows, "
                  "halos lo_b (row %zu) and hi_b (row %zu), got_b = %llu, got_a = %llu: %s\n",
                  my_rank, label.c_str(), rows, nx, 2 * kHaloPairs, total_rows, below, above,
                  static_cast<unsigned long long>(got_b[0]), static_cast<unsigned long long>(got_a[0]),
                  bad ? "MISMATCH" : "ok");
      prints[v].push_back(u);
    }
  }
  if (compare_variants(a, prints, "u")) return 1;
  return failures == 0 ? 0 : 1;
}

// ---- examples/nvshmem_queue.orch --------------------------------------------------------
//
// Task t's result is (t + 1) * sum(row t of x), computed by whichever block of whichever PE took
// it, into PE 0's `results`; every PE gets them back with `get`. x = m/4 (|m| <= 128), the same
// on every PE: every partial sum of a row is exact in f32 (at most 1000 * 32 in quarters, under
// 2^24), so the sum is the same in any order, and the one rounding left is the product's, which
// the reference does in f32 too.

constexpr uint32_t kQueueTasks = 3000;
constexpr uint32_t kQueueN = 1000;
constexpr uint32_t kQueueBlocks = 8;  // work<<<8, 256>>> in the example

int scenario_queue(const std::vector<std::string>& argv) {
  Args a;
  RANK_REQUIRE(parse_args(argv, &a), "bad arguments");
  RANK_REQUIRE(world >= 2, "world size %d", world);
  Held h;
  // `taken` is bound to memory of the test's, so it is readable after the launch whatever the
  // memory plan does with it.
  int rc = load_and_instantiate(a, &h, [](orch::Bindings& b, Held* held) {
    void* taken = nullptr;
    RANK_CUDA(cudaMalloc(&taken, 256));
    held->memory.push_back(taken);
    b.param("tasks", kQueueTasks).param("n", kQueueN).buffer("taken", taken, sizeof(uint32_t));
    return 0;
  });
  if (rc) return rc;
  const size_t tasks = kQueueTasks, n = kQueueN;
  const int launches = a.variants.size() == 1 ? 3 : 2;
  std::vector<std::vector<Fingerprint>> prints(a.variants.size());
  for (int launch = 0; launch < launches; ++launch) {
    std::vector<float> x(tasks * n), want(tasks);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(pick(a.seed, kQueue, launch, 0, i, 128)) / 4.0f;
    for (size_t t = 0; t < tasks; ++t) {
      double s = 0;
      for (size_t i = 0; i < n; ++i) s += x[t * n + i];
      const float sum = static_cast<float>(s);  // exact
      RANK_REQUIRE(static_cast<double>(sum) == s, "row %zu's sum %g is not exact in f32", t, s);
      want[t] = sum * static_cast<float>(t + 1);
    }
    for (size_t v = 0; v < a.variants.size(); ++v) {
      orch::Executable& e = *h.executables[v];
      const std::string label = a.variants[v].label + ", launch " + std::to_string(launch + 1) + "/" +
                                std::to_string(launches);
      if (copy_in(e, "x", x)) return 1;
      if (fill_bytes(e, "all", 0xff)) return 1;  // NaN: a result the get missed shows
      if (launch_and_wait(e, h.stream, label)) return 1;
      std::vector<float> all, results;
      std::vector<uint64_t> head;
      std::vector<uint32_t> taken;
      if (copy_out(e, "all", &all, tasks) || copy_out(e, "results", &results, tasks) ||
          copy_out(e, "head", &head, 1) || copy_out(e, "taken", &taken, 1))
        return 1;
      size_t bad = mismatches(label, "all", all, want);
      // PE 0 holds the queue and the results: every block's last fetch-and-add finds the queue
      // empty, so head = tasks + blocks * PEs. The other PEs' head stays as filled.
      if (my_rank == 0) {
        bad += mismatches(label, "results", results, want);
        RANK_CHECK(head[0] == tasks + uint64_t(kQueueBlocks) * static_cast<uint64_t>(world));
      } else {
        RANK_CHECK(head[0] == 0);
      }
      RANK_CHECK(taken[0] <= tasks);
      // Every task is taken exactly once: the PEs' `taken` add up to `tasks`.
      auto counts = orch::ranks::allgather(e.comm("world"), {static_cast<double>(taken[0])}, h.stream);
      RANK_REQUIRE_OK(counts);
      double sum = 0;
      std::string spread;
      for (const std::vector<double>& c : *counts) {
        RANK_REQUIRE(c.size() == 1, "allgather gave %zu values", c.size());
        sum += c[0];
        spread += (spread.empty() ? "" : " ") + std::to_string(static_cast<long long>(c[0]));
      }
      RANK_CHECK(sum == static_cast<double>(tasks));
      RANK_CHECK(bad == 0);
      std::printf("rank %d (%s): all (%zu results) = (t + 1) * sum of row t%s, taken by PE: %s (sum %.0f of %zu)%s: "
                  "%s\n",
                  my_rank, label.c_str(), tasks, my_rank == 0 ? ", and PE 0's results" : "", spread.c_str(), sum,
                  tasks,
                  my_rank == 0 ? (", head = " + std::to_string(static_cast<unsigned long long>(head[0]))).c_str() : "",
                  bad || sum != static_cast<double>(tasks) ? "MISMATCH" : "ok");
      prints[v].push_back(all);
    }
  }
  if (compare_variants(a, prints, "all")) return 1;
  return failures == 0 ? 0 : 1;
}

int in_rank(int (*scenario)(const std::vector<std::string>&), const std::vector<std::string>& args) {
  auto me = orch::ranks::from_environment();
  RANK_REQUIRE(me.ok(), "%s", me.ok() ? "" : me.error().to_string().c_str());
  my_rank = me->rank;
  world = me->world_size;
  return scenario(args);
}

const bool registered_pipeline = orch::test::register_rank_scenario(
    "nvshmem_example_pipeline", [](const std::vector<std::string>& a) { return in_rank(scenario_pipeline, a); });
const bool registered_halo = orch::test::register_rank_scenario(
    "nvshmem_example_halo", [](const std::vector<std::string>& a) { return in_rank(scenario_halo, a); });
const bool registered_queue = orch::test::register_rank_scenario(
    "nvshmem_example_queue", [](const std::vector<std::string>& a) { return in_rank(scenario_queue, a); });

// ---- the parent -------------------------------------------------------------------------

uint64_t test_seed() {
  if (const char* s = std::getenv("ORCH_TEST_SEED"))
    if (*s) return std::strtoull(s, nullptr, 0);
  return 0x23a5e7d1ull;
}

// examples/NAME.orch compiled with `options` (and --nvshmem HOME) as <tmp>/NAME-TAG.bin.
std::string compile_with(const std::string& name, const std::string& tag, const std::string& options,
                         const std::string& home) {
  const std::string path = orch::test::examples_dir() + "/" + name + ".orch";
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "cannot read ", path);
  std::stringstream text;
  text << in.rdbuf();
  std::string log;
  const std::string all = options + (options.empty() ? "" : " ") + "--nvshmem '" + home + "'";
  const std::string bin = orch::test::compile_source(name + "-" + tag, text.str(), &log, all.c_str());
  INFO(log);
  REQUIRE(!bin.empty());
  return bin;
}

// Runs `scenario` on `world` processes (one per GPU), each given NVSHMEM's library, the seed
// and the variants (label, pipeline.bin), and checks that every rank passed.
void run_ranks(const std::string& scenario, int world, const std::string& home,
               const std::vector<std::pair<std::string, std::string>>& variants) {
  static int serial = 0;
  const std::string logs = orch::test::temp_dir() + "/ranks-" + scenario + "-" + std::to_string(serial++);
  std::filesystem::create_directories(logs);
  orch::ranks::SpawnOptions o;
  o.timeout = std::chrono::seconds(150);
  if (const char* cap = std::getenv("ORCH_TEST_RANK_TIMEOUT"))
    if (std::atoi(cap) > 0) o.timeout = std::chrono::seconds(std::min(150, std::atoi(cap)));
  o.log_dir = logs;
  // NVLink multicast off (issue 23's proof runs with it off); NVSHMEM's own libraries beside its host library.
  const char* ld = std::getenv("LD_LIBRARY_PATH");
  o.env = {{"ORCH_NCCL_TIMEOUT", "60"},
           {"NCCL_NVLS_ENABLE", "0"},
           {"NVSHMEM_DISABLE_NVLS", "1"},
           {"LD_LIBRARY_PATH", home + "/lib" + (ld && *ld ? ":" + std::string(ld) : std::string())}};
  std::vector<std::string> argv = {"/proc/self/exe", "--orch-rank-worker=" + scenario,
                                   home + "/lib/libnvshmem_host.so.3", std::to_string(test_seed())};
  for (const auto& v : variants) {
    argv.push_back(v.first);
    argv.push_back(v.second);
  }
  MESSAGE(scenario, " on ", world, " ranks, seed ", test_seed());
  auto exits = orch::ranks::spawn(world, argv, o);
  ORCH_REQUIRE_OK(exits);
  for (const orch::ranks::Exit& x : *exits) {
    std::ifstream in(x.log);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    MESSAGE(x.describe(), "\n", text);
    CHECK(x.ok());
  }
}

int gpus() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
  return count;
}

// The world each example runs at: the pipeline's peers are `1 - my_pe`, so exactly 2 PEs;
// the others on every GPU, up to 8.
int world_for(const std::string& name) { return name == "nvshmem_pipeline" ? 2 : std::min(gpus(), 8); }

// The rank scenario of example `name` ("nvshmem_halo": "nvshmem_example_halo").
std::string scenario_for(const std::string& name) { return "nvshmem_example_" + name.substr(std::string("nvshmem_").size()); }

// The example compiled as the suite compiles it ($ORCH_ORCHC_OPTIONS, if set), on its world.
void run_example(const std::string& name) {
  const std::string home = orch::test::nvshmem_home();
  if (home.empty()) {
    MESSAGE("SKIPPED: no NVSHMEM 3.4.5 (set ORCH_NVSHMEM_HOME to the nvidia-nvshmem-cu13 wheel's nvidia/nvshmem)");
    return;
  }
  const int world = world_for(name);
  REQUIRE(world >= 2);
  const char* env = std::getenv("ORCH_ORCHC_OPTIONS");
  const std::string options = env ? env : "";
  const std::string label = options.empty() ? "default" : options;
  run_ranks(scenario_for(name), world, home, {{label, compile_with(name, "main", options, home)}});
}

}  // namespace

TEST_SUITE("multi-gpu") {

TEST_CASE("NVSHMEM example nvshmem_pipeline on 2 PEs: 3 launches with fresh inputs; PE 1's y, inboxes, send and signal words equal the CPU reference") {
  (void)registered_pipeline;
  run_example("nvshmem_pipeline");
}

TEST_CASE("NVSHMEM example nvshmem_halo on every GPU: u, edge rows, b halos and signal counts equal the CPU reference over 3 launches (one continued)") {
  (void)registered_halo;
  run_example("nvshmem_halo");
}

TEST_CASE("NVSHMEM example nvshmem_halo on one GPU: the same global grid as on every GPU, the same CPU reference's bits") {
  (void)registered_halo;
  const std::string home = orch::test::nvshmem_home();
  if (home.empty()) {
    MESSAGE("SKIPPED: no NVSHMEM 3.4.5 (set ORCH_NVSHMEM_HOME to the nvidia-nvshmem-cu13 wheel's nvidia/nvshmem)");
    return;
  }
  // One PE: its halos are its own rows, put to itself. With the case above, the answer is the
  // same bits on one GPU and on every GPU.
  run_ranks(scenario_for("nvshmem_halo"), 1, home, {{"default", compile_with("nvshmem_halo", "one", "", home)}});
}

TEST_CASE("NVSHMEM example nvshmem_queue on every GPU: results = (t + 1) * row sums on every PE, tasks taken once in all, over 3 launches") {
  (void)registered_queue;
  run_example("nvshmem_queue");
}

TEST_CASE("NVSHMEM examples: --no-pdl --unroll 1 and the default give identical results, equal to the CPU reference") {
  const std::string home = orch::test::nvshmem_home();
  if (home.empty()) {
    MESSAGE("SKIPPED: no NVSHMEM 3.4.5 (set ORCH_NVSHMEM_HOME to the nvidia-nvshmem-cu13 wheel's nvidia/nvshmem)");
    return;
  }
  (void)registered_pipeline;
  (void)registered_halo;
  (void)registered_queue;
  for (const std::string name : {"nvshmem_pipeline", "nvshmem_halo", "nvshmem_queue"}) {
    CAPTURE(name);
    const int world = world_for(name);
    REQUIRE(world >= 2);
    run_ranks(scenario_for(name), world, home,
              {{"default", compile_with(name, "default", "", home)},
               {"--no-pdl --unroll 1", compile_with(name, "nopdl", "--no-pdl --unroll 1", home)}});
  }
}

}  // TEST_SUITE("multi-gpu")
