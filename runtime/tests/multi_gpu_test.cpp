// Multi-GPU tests (test suite "multi-gpu", two CUDA devices or more): each case starts one
// process per GPU with orch::ranks::spawn (this test binary again, --orch-rank-worker=NAME),
// and every rank checks its own results against a CPU reference that knows every rank's
// inputs. The parent compiles the pipelines, waits with a timeout (a hang is a failure, never a
// stuck test run) and prints the ranks' logs. NCCL_NVLS_ENABLE=0 throughout (main() sets it).
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "artifact/artifact.h"
#include "orch/orch.h"
#include "orch/ranks.h"
#include "orch/runtime.h"
#include "runtime/src/nccl.h"
#include "runtime/src/plan.h"
#include "runtime/tests/rank_check.h"
#include "runtime/tests/test_util.h"

namespace {

// ---- inside a rank process --------------------------------------------------------------

orch::ranks::Rank g_me;
int& g_failures = orch::test::rank_checks().failures;

template <class... A>
void say(const char* fmt, A... a) {
  std::printf("rank %d: ", g_me.rank);
  std::printf(fmt, a...);
  std::printf("\n");
  std::fflush(stdout);
}

// The unique id number k of this spawn (rank 0 writes ORCH_NCCL_ID_FILE[.k], the others read).
orch::Result<std::array<char, 128>> shared_id(int k) {
  const char* base = std::getenv("ORCH_NCCL_ID_FILE");
  if (!base) return orch::Error(orch::ErrorCode::InvalidArgument, "ORCH_NCCL_ID_FILE is not set");
  std::string path = k == 0 ? std::string(base) : std::string(base) + "." + std::to_string(k);
  return orch::ranks::share_unique_id(path, g_me.rank, std::chrono::seconds(60));
}

// A communicator the "application" makes itself, through the same NCCL orch loads.
orch::Result<void*> app_comm(int k) {
  auto api = orch::rt::nccl::api();
  if (!api.ok()) return api.error();
  auto id = shared_id(k);
  if (!id.ok()) return id.error();
  orch::rt::nccl::UniqueId raw;
  std::memcpy(raw.internal, id->data(), sizeof raw.internal);
  void* comm = nullptr;
  int r = (*api)->CommInitRank(&comm, g_me.world_size, raw, g_me.rank);
  if (r != orch::rt::nccl::kSuccess) return orch::rt::nccl::error(**api, r, "ncclCommInitRank");
  return comm;
}

void destroy_app_comm(void* comm) {
  auto api = orch::rt::nccl::api();
  if (api.ok() && comm) (void)(*api)->CommDestroy(comm);
}

struct Stream {
  cudaStream_t s = nullptr;
  Stream() { (void)cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking); }
  ~Stream() {
    if (s) cudaStreamDestroy(s);
  }
  operator cudaStream_t() const { return s; }
};

bool copy_in(orch::Executable& x, const char* name, const void* data, size_t bytes) {
  void* p = x.buffer(name);
  if (!p || x.buffer_bytes(name) < bytes) return false;
  return cudaMemcpy(p, data, bytes, cudaMemcpyDefault) == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess;
}

bool copy_out(const orch::Executable& x, const char* name, void* data, size_t bytes) {
  void* p = x.buffer(name);
  if (!p) return false;
  return cudaMemcpy(data, p, bytes, cudaMemcpyDefault) == cudaSuccess;
}

bool launch_and_wait(orch::Executable& x, cudaStream_t s) {
  orch::Status st = x.launch(s);
  if (!st.ok()) {
    say("launch: %s", st.error().to_string().c_str());
    return false;
  }
  cudaError_t e = cudaStreamSynchronize(s);
  if (e != cudaSuccess) say("launch: %s", cudaGetErrorString(e));
  return e == cudaSuccess;
}

// Small integers, exact in every element type and in their sums over a few ranks.
double val(int rank, size_t i, int salt) {
  return static_cast<double>(static_cast<int>((i * 7 + static_cast<size_t>(rank) * 13 + static_cast<size_t>(salt) * 5) % 17)) - 8;
}

// dp_step's inputs and one step of its reference, for `world` ranks, on the first `n` elements.
float dp_w0(size_t i) { return 0.01f * static_cast<float>(i % 101) - 0.4f; }
float dp_data(int rank, size_t i) { return 0.02f * static_cast<float>((i * 3 + static_cast<size_t>(rank) * 7) % 89) - 0.5f; }
void dp_reference_step(std::vector<float>& w, size_t n, float lr, int world) {
  const float scale = static_cast<float>(1.0 / world);
  for (size_t i = 0; i < n; ++i) {
    float sum = 0;
    for (int r = 0; r < world; ++r) sum += (w[i] - dp_data(r, i)) * static_cast<float>(r + 1);
    w[i] -= lr * scale * sum;
  }
}

size_t count_differences(const std::vector<float>& got, const std::vector<float>& want, double tol, size_t* first) {
  size_t bad = 0;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    double d = std::fabs(double(got[i]) - double(want[i]));
    if (!(d <= tol * std::max(1.0, std::fabs(double(want[i]))))) {
      if (bad++ == 0) *first = i;
    }
  }
  return bad;
}

#define WCLOSE(got, want, tol, what)                                                                  \
  do {                                                                                                \
    size_t first_ = 0;                                                                                \
    size_t bad_ = count_differences(got, want, tol, &first_);                                         \
    if (bad_) {                                                                                       \
      say("%s: %zu of %zu differ; first at %zu: got %.9g, want %.9g", what, bad_, (got).size(), first_, \
          double((got)[first_]), double((want)[first_]));                                             \
      ++g_failures;                                                                                   \
    }                                                                                                 \
  } while (0)

// dp_step with orch making the communicator from a unique id (C++ API), then set_param.
int scenario_dp_step(const std::vector<std::string>& args) {
  auto p = orch::Pipeline::load(args.at(0));
  RANK_REQUIRE_OK(p);
  Stream s;
  const uint32_t n = 100003;
  const int world = g_me.world_size;
  auto id = shared_id(0);
  RANK_REQUIRE_OK(id);
  orch::Bindings b;
  b.param("n", n).param("lr", 0.5f).comm_from_unique_id("world", id->data(), g_me.rank, world);
  auto x = (*p)->instantiate(b, s);
  RANK_REQUIRE_OK(x);
  orch::Executable& e = **x;
  RANK_CHECK(e.rank() == g_me.rank);
  RANK_CHECK(e.world_size() == world);
  RANK_CHECK(e.comm("world") != nullptr);
  std::vector<float> w(n), data(n);
  for (size_t i = 0; i < n; ++i) {
    w[i] = dp_w0(i);
    data[i] = dp_data(g_me.rank, i);
  }
  RANK_REQUIRE(copy_in(e, "w", w.data(), n * 4) && copy_in(e, "data", data.data(), n * 4));
  std::vector<float> got(n);
  for (int step = 1; step <= 2; ++step) {
    RANK_REQUIRE(launch_and_wait(e, s));
    dp_reference_step(w, n, 0.5f, world);
    RANK_REQUIRE(copy_out(e, "w", got.data(), n * 4));
    WCLOSE(got, w, 1e-5, step == 1 ? "w after step 1" : "w after step 2");
  }
  // lr only reaches the sgd kernel: patched in place, nothing captured again.
  RANK_REQUIRE_OK(e.set_param("lr", 0.25f));
  RANK_CHECK(e.stats().segments_rebuilt == 0);
  RANK_REQUIRE(launch_and_wait(e, s));
  dp_reference_step(w, n, 0.25f, world);
  RANK_REQUIRE(copy_out(e, "w", got.data(), n * 4));
  WCLOSE(got, w, 1e-5, "w after set_param(lr)");
  // n changes the allreduce's count: the segment is captured, built and instantiated again.
  RANK_REQUIRE_OK(e.set_param("n", n - 3));
  RANK_CHECK(e.stats().segments_rebuilt == 1);
  RANK_REQUIRE(launch_and_wait(e, s));
  dp_reference_step(w, n - 3, 0.25f, world);
  RANK_REQUIRE(copy_out(e, "w", got.data(), n * 4));
  WCLOSE(got, w, 1e-5, "w after set_param(n)");
  say("dp_step: 4 steps equal the reference (world %d); %zu nodes patched in place, %zu segments rebuilt", world,
      e.stats().nodes_patched_in_place, e.stats().segments_rebuilt);
  return 0;
}

// dp_step through the C API on the application's communicator; a wrong rank is refused.
int scenario_dp_step_c_api(const std::vector<std::string>& args) {
  auto comm = app_comm(0);
  RANK_REQUIRE_OK(comm);
  orch_pipeline* p = nullptr;
  orch_error* err = orch_pipeline_load(args.at(0).c_str(), &p);
  RANK_REQUIRE(err == nullptr);
  cudaStream_t s = nullptr;
  RANK_CUDA(cudaStreamCreate(&s));
  const uint32_t n = 4099;
  const int world = g_me.world_size;
  orch_bindings* b = orch_bindings_create();
  orch_bindings_param_u32(b, "n", n);
  orch_bindings_param_f32(b, "lr", 0.125f);
  // Every rank claims the next rank's place: each is refused, and tells the others so.
  orch_bindings_comm(b, "world", *comm, (g_me.rank + 1) % world, world);
  orch_executable* x = nullptr;
  err = orch_instantiate(p, b, s, &x);
  RANK_REQUIRE(err != nullptr);
  say("wrong rank refused: %s", orch_error_message(err));
  RANK_CHECK(orch_error_code(err) == ORCH_ERROR_INVALID_VALUE);
  RANK_CHECK(std::string(orch_error_message(err)).find("comm 'world' is bound as rank " +
                                                   std::to_string((g_me.rank + 1) % world) + " of " +
                                                   std::to_string(world) + ", but the communicator is rank " +
                                                   std::to_string(g_me.rank)) == 0);
  orch_error_destroy(err);
  orch_bindings_comm(b, "world", *comm, -1, -1);  // from the communicator
  err = orch_instantiate(p, b, s, &x);
  if (err) say("instantiate: %s", orch_error_message(err));
  RANK_REQUIRE(err == nullptr);
  RANK_CHECK(orch_executable_rank(x) == g_me.rank);
  RANK_CHECK(orch_executable_world_size(x) == world);
  RANK_CHECK(orch_executable_comm(x, "world") == *comm);
  std::vector<float> w(n), data(n), got(n);
  for (size_t i = 0; i < n; ++i) {
    w[i] = dp_w0(i);
    data[i] = dp_data(g_me.rank, i);
  }
  RANK_CUDA(cudaMemcpy(orch_executable_buffer(x, "w"), w.data(), n * 4, cudaMemcpyDefault));
  RANK_CUDA(cudaMemcpy(orch_executable_buffer(x, "data"), data.data(), n * 4, cudaMemcpyDefault));
  RANK_CUDA(cudaDeviceSynchronize());
  err = orch_launch(x, s);
  RANK_REQUIRE(err == nullptr);
  RANK_CUDA(cudaStreamSynchronize(s));
  dp_reference_step(w, n, 0.125f, world);
  RANK_CUDA(cudaMemcpy(got.data(), orch_executable_buffer(x, "w"), n * 4, cudaMemcpyDefault));
  WCLOSE(got, w, 1e-5, "w through the C API");
  orch_executable_destroy(x);
  orch_bindings_destroy(b);
  orch_pipeline_destroy(p);
  cudaStreamDestroy(s);
  destroy_app_comm(*comm);
  say("dp_step through the C API equals the reference");
  return 0;
}

// ---- every collective kind, element type and size -----------------------------------------

struct TypeInfo {
  const char* name;
  orch::fb::ScalarType type;
  size_t size;
  bool is_float;
};

const TypeInfo kTypes[] = {
    {"f32", orch::fb::ScalarType::F32, 4, true},   {"f64", orch::fb::ScalarType::F64, 8, true},
    {"i32", orch::fb::ScalarType::I32, 4, false},  {"i64", orch::fb::ScalarType::I64, 8, false},
    {"bf16", orch::fb::ScalarType::BF16, 2, true}, {"f16", orch::fb::ScalarType::F16, 2, true},
};

const TypeInfo* type_named(const std::string& n) {
  for (const TypeInfo& t : kTypes)
    if (n == t.name) return &t;
  return nullptr;
}

double half_to_double(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1f, frac = h & 0x3ff;
  double v = exp == 0 ? std::ldexp(frac, -24) : exp == 31 ? INFINITY : std::ldexp(1024 + frac, exp - 25);
  return sign ? -v : v;
}

std::vector<uint8_t> encode(const TypeInfo& t, size_t count, const std::function<double(size_t)>& f) {
  std::vector<uint8_t> out(count * t.size);
  for (size_t i = 0; i < count; ++i) {
    uint64_t bits = 0;
    const double v = f(i);
    (void)orch::rt::encode_scalar(t.is_float ? orch::rt::Value::of_double(orch::expr::ScalarType::F64, v)
                                             : orch::rt::Value::of_int(orch::expr::ScalarType::I64, static_cast<int64_t>(v)),
                                  t.type, &bits);
    std::memcpy(out.data() + i * t.size, &bits, t.size);
  }
  return out;
}

double decode(const TypeInfo& t, const std::vector<uint8_t>& bytes, size_t i) {
  const uint8_t* p = bytes.data() + i * t.size;
  switch (t.type) {
    case orch::fb::ScalarType::F32: { float f; std::memcpy(&f, p, 4); return f; }
    case orch::fb::ScalarType::F64: { double d; std::memcpy(&d, p, 8); return d; }
    case orch::fb::ScalarType::I32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case orch::fb::ScalarType::I64: { int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    case orch::fb::ScalarType::BF16: {
      uint16_t h; std::memcpy(&h, p, 2);
      uint32_t bits = static_cast<uint32_t>(h) << 16; float f; std::memcpy(&f, &bits, 4); return f;
    }
    case orch::fb::ScalarType::F16: { uint16_t h; std::memcpy(&h, p, 2); return half_to_double(h); }
    default: return NAN;
  }
}

// Compares buffer `name` (count elements) with want(i); prints the first difference.
bool expect(const orch::Executable& x, const TypeInfo& t, const char* name, size_t count,
            const std::function<double(size_t)>& want, const std::string& what) {
  std::vector<uint8_t> got(count * t.size);
  if (!copy_out(x, name, got.data(), got.size())) {
    say("%s: cannot read %s", what.c_str(), name);
    return false;
  }
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < count; ++i)
    if (decode(t, got, i) != want(i) && bad++ == 0) first = i;
  if (bad) say("%s: %s: %zu of %zu differ; first at %zu: got %g, want %g", what.c_str(), name, bad, count, first,
               decode(t, got, first), want(first));
  return bad == 0;
}

int scenario_collectives(const std::vector<std::string>& args) {
  auto comm = app_comm(0);
  RANK_REQUIRE_OK(comm);
  const int world = g_me.world_size, me = g_me.rank, root = world - 1;
  const std::vector<uint32_t> sizes = {1048583, 1, 3, 1000, 4097, 65536};
  Stream s;
  for (const std::string& arg : args) {
    const size_t eq = arg.find('=');
    const TypeInfo* t = type_named(arg.substr(0, eq));
    RANK_REQUIRE(t != nullptr);
    auto p = orch::Pipeline::load(arg.substr(eq + 1));
    RANK_REQUIRE_OK(p);
    orch::Bindings b;
    b.param("n", sizes[0]).comm("world", *comm);  // rank and size from the communicator
    auto x = (*p)->instantiate(b, s);
    RANK_REQUIRE_OK(x);
    orch::Executable& e = **x;
    int checked = 0;
    for (uint32_t n : sizes) {
      if (n != sizes[0]) RANK_REQUIRE_OK(e.set_param("n", n));
      const size_t nn = n, wn = static_cast<size_t>(world) * n;
      auto in = [&](const char* name, size_t count, int salt) {
        auto bytes = encode(*t, count, [&](size_t i) { return val(me, i, salt); });
        return copy_in(e, name, bytes.data(), bytes.size());
      };
      RANK_REQUIRE(in("a", nn, 1) && in("b", nn, 2) && in("c", nn, 3) && in("s", nn, 4) && in("big", wn, 5) &&
               in("v", nn, 6));
      RANK_REQUIRE(launch_and_wait(e, s));
      const std::string what = std::string(t->name) + " n=" + std::to_string(n);
      bool ok = true;
      ok &= expect(e, *t, "a", nn, [&](size_t i) { double z = 0; for (int r = 0; r < world; ++r) z += val(r, i, 1); return z; },
                   what + " allreduce sum (in place)");
      ok &= expect(e, *t, "b_max", nn, [&](size_t i) { double z = -1e9; for (int r = 0; r < world; ++r) z = std::max(z, val(r, i, 2)); return z; },
                   what + " allreduce max");
      ok &= expect(e, *t, "c", nn, [&](size_t i) { return val(root, i, 3); }, what + " broadcast from the last rank");
      ok &= expect(e, *t, "full", wn, [&](size_t i) { return val(static_cast<int>(i / nn), i % nn, 4); },
                   what + " allgather");
      ok &= expect(e, *t, "part", nn, [&](size_t i) { double z = 0; for (int r = 0; r < world; ++r) z += val(r, me * nn + i, 5); return z; },
                   what + " reduce_scatter sum");
      if (t->is_float)
        ok &= expect(e, *t, "v_out", nn, [&](size_t i) { double z = 0; for (int r = 0; r < world; ++r) z += val(r, i, 6); return z / world; },
                     what + " allreduce avg");
      else
        ok &= expect(e, *t, "v_out", nn, [&](size_t i) { double z = 1e9; for (int r = 0; r < world; ++r) z = std::min(z, val(r, i, 6)); return z; },
                     what + " allreduce min");
      if (!ok) ++g_failures;
      ++checked;
    }
    say("%s: 6 collectives x %d sizes checked (%zu segments rebuilt by set_param)", t->name, checked,
        e.stats().segments_rebuilt);
    RANK_CHECK(e.stats().segments_rebuilt == sizes.size() - 1);
  }
  destroy_app_comm(*comm);
  return 0;
}

// pipelines/guarded_step.orch: allreduce, then an `if` on the reduced data (two segments).
int scenario_guarded(const std::vector<std::string>& args) {
  auto p = orch::Pipeline::load(args.at(0));
  RANK_REQUIRE_OK(p);
  auto id = shared_id(0);
  RANK_REQUIRE_OK(id);
  Stream s;
  const uint32_t n = 4099;
  const int world = g_me.world_size;
  orch::Bindings b;
  b.param("n", n).param("lr", 0.5f).comm_from_unique_id("world", id->data(), g_me.rank, world);
  auto x = (*p)->instantiate(b, s);
  RANK_REQUIRE_OK(x);
  orch::Executable& e = **x;
  std::vector<float> w(n), xs(n), got(n);
  for (size_t i = 0; i < n; ++i) {
    w[i] = dp_w0(i);
    xs[i] = dp_data(g_me.rank, i);
  }
  RANK_REQUIRE(copy_in(e, "w", w.data(), n * 4) && copy_in(e, "x", xs.data(), n * 4));
  RANK_REQUIRE(launch_and_wait(e, s));
  dp_reference_step(w, n, 0.5f, world);  // same arithmetic as dp_step
  RANK_REQUIRE(copy_out(e, "w", got.data(), n * 4));
  WCLOSE(got, w, 1e-5, "guarded_step: finite gradients update w");
  // What the GPU holds now: the skipped step below must leave exactly these bits. (Not the CPU's
  // w: its sum runs in another order than NCCL's, which at 4 ranks differs by an ulp.)
  const std::vector<float> after_first = got;
  uint32_t bad = 7;
  RANK_REQUIRE(copy_out(e, "bad", &bad, 4));
  RANK_CHECK(bad == 0);
  // The last rank's data turns non-finite: the reduced gradient is non-finite everywhere, and
  // every rank skips the update alike.
  if (g_me.rank == world - 1) {
    xs[17] = INFINITY;
    RANK_REQUIRE(copy_in(e, "x", xs.data(), n * 4));
  }
  RANK_REQUIRE(launch_and_wait(e, s));
  RANK_REQUIRE(copy_out(e, "w", got.data(), n * 4));
  WCLOSE(got, after_first, 0, "guarded_step: a non-finite gradient leaves w alone");
  RANK_REQUIRE(copy_out(e, "bad", &bad, 4));
  RANK_CHECK(bad == 1);
  say("guarded_step: updates when finite, skips on every rank when not");
  return 0;
}

// A collective before and after a WHILE loop (three segments), launched twice.
int scenario_while(const std::vector<std::string>& args) {
  auto p = orch::Pipeline::load(args.at(0));
  RANK_REQUIRE_OK(p);
  auto id = shared_id(0);
  RANK_REQUIRE_OK(id);
  Stream s;
  const uint32_t n = 3001, rounds = 5;
  const int world = g_me.world_size;
  orch::Bindings b;
  b.param("n", n).param("rounds", rounds).comm_from_unique_id("world", id->data(), g_me.rank, world);
  auto x = (*p)->instantiate(b, s);
  RANK_REQUIRE_OK(x);
  orch::Executable& e = **x;
  std::vector<float> xv(n), got(n);
  for (size_t i = 0; i < n; ++i) xv[i] = static_cast<float>(val(g_me.rank, i, 9));
  RANK_REQUIRE(copy_in(e, "x", xv.data(), n * 4));
  // Every rank's x after the first allreduce is the same sum.
  std::vector<float> want(n);
  for (size_t i = 0; i < n; ++i) {
    double z = 0;
    for (int r = 0; r < world; ++r) z += val(r, i, 9);
    want[i] = static_cast<float>(world * (z + rounds));
  }
  RANK_REQUIRE(launch_and_wait(e, s));
  RANK_REQUIRE(copy_out(e, "x", got.data(), n * 4));
  WCLOSE(got, want, 0, "allreduce, while (5 rounds), allreduce");
  uint32_t it = 0;
  RANK_REQUIRE(copy_out(e, "it", &it, 4));
  RANK_CHECK(it == rounds);
  // The loop bound is a param of the condition kernel: patched in place, no capture again.
  RANK_REQUIRE_OK(e.set_param("rounds", 2u));
  RANK_CHECK(e.stats().segments_rebuilt == 0);
  RANK_REQUIRE(launch_and_wait(e, s));
  for (size_t i = 0; i < n; ++i) want[i] = static_cast<float>(world * (double(world) * want[i] + 2));
  RANK_REQUIRE(copy_out(e, "x", got.data(), n * 4));
  WCLOSE(got, want, 0, "the second launch, 2 rounds");
  say("collective + while + collective: correct on two launches");
  return 0;
}

// Ranks with different pipelines, and a rank that fails, are refused on every rank.
int scenario_mismatch(const std::vector<std::string>& args) {
  auto comm = app_comm(0);
  RANK_REQUIRE_OK(comm);
  const int me = g_me.rank;
  auto mine = orch::Pipeline::load(args.at(me == 0 ? 0 : 1));
  RANK_REQUIRE_OK(mine);
  Stream s;
  orch::Bindings b;
  b.param("n", 1024u).comm("world", *comm);
  auto x = (*mine)->instantiate(b, s);
  RANK_REQUIRE(!x.ok());
  say("different pipelines: %s", x.error().to_string().c_str());
  RANK_CHECK(x.error().code() == orch::ErrorCode::RankMismatch);
  const std::string other = me == 0 ? "rank 1" : "rank 0";
  RANK_CHECK(x.error().message().find(other + " runs a different pipeline (collective sequence hash 0x") == 0);

  // Same pipeline, but one rank's buffer is too small: that rank's own error, and the others
  // learn it failed instead of waiting for it.
  auto same = orch::Pipeline::load(args.at(0));
  RANK_REQUIRE_OK(same);
  void* tiny = nullptr;
  RANK_CUDA(cudaMalloc(&tiny, 16));
  orch::Bindings b2 = b;
  if (me == 1) b2.buffer("w", tiny, 16);
  x = (*same)->instantiate(b2, s);
  RANK_REQUIRE(!x.ok());
  say("one rank fails: %s", x.error().to_string().c_str());
  if (me == 1) {
    RANK_CHECK(x.error().code() == orch::ErrorCode::BufferTooSmall);
  } else {
    RANK_CHECK(x.error().code() == orch::ErrorCode::RankMismatch);
    RANK_CHECK(x.error().message().find("rank 1 could not instantiate pipeline 'dp_step'") == 0);
  }
  // The communicator is still in step: the same pipeline everywhere runs.
  {
    auto good = (*same)->instantiate(b, s);
    RANK_REQUIRE_OK(good);
    RANK_REQUIRE(launch_and_wait(**good, s));
  }
  cudaFree(tiny);
  destroy_app_comm(*comm);
  say("mismatches refused with clear errors, then the matching pipeline ran");
  return 0;
}

// NVIDIA/nccl#1986: can an executable graph hold NCCL's captured work and a conditional node?
// Hand-built graphs, outside orch's lowering (which keeps them in separate segments anyway).
// What the driver accepts is reported (PROBE lines, for docs/multi-gpu.md) and either outcome
// passes; but a graph CUDA accepts and launches must compute the right answer, so a silent
// wrong result fails the scenario.
// " (NCCL_GRAPH_MIXING_SUPPORT=0)" where the probe runs with NCCL's graph mixing off: NCCL then
// leaves out the event record/wait nodes it adds to captured work for launches mixed with
// uncaptured ones, the nodes CUDA refuses inside a conditional body (pytorch/pytorch#180960).
const char* mixing_note() {
  const char* v = std::getenv("NCCL_GRAPH_MIXING_SUPPORT");
  return v && std::string(v) == "0" ? " (NCCL_GRAPH_MIXING_SUPPORT=0)" : "";
}

int scenario_nccl1986(const std::vector<std::string>&) {
  auto api_r = orch::rt::nccl::api();
  RANK_REQUIRE_OK(api_r);
  const orch::rt::nccl::Api& nccl = **api_r;
  auto comm_r = app_comm(0);
  RANK_REQUIRE_OK(comm_r);
  void* comm = *comm_r;
  const int world = g_me.world_size;
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  say("probe setup: CUDA driver %d, runtime %d, NCCL %s", driver, runtime, nccl.version_string().c_str());
  const size_t n = 1 << 16;
  float* d = nullptr;
  int* flag = nullptr;
  int* agree = nullptr;
  RANK_CUDA(cudaMalloc(reinterpret_cast<void**>(&d), n * sizeof(float)));
  RANK_CUDA(cudaMalloc(reinterpret_cast<void**>(&flag), sizeof(int)));
  RANK_CUDA(cudaMalloc(reinterpret_cast<void**>(&agree), sizeof(int)));
  Stream s, cap;
  std::vector<float> host(n);

  // All ranks launch only if all of them instantiated (else the launching ones would hang).
  auto everyone = [&](int ok) {
    int v = ok;
    if (cudaMemcpy(agree, &v, sizeof v, cudaMemcpyHostToDevice) != cudaSuccess) return false;
    if (nccl.AllReduce(agree, agree, 1, orch::rt::nccl::kInt32, orch::rt::nccl::kMin, comm, s) != 0) return false;
    if (cudaStreamSynchronize(s) != cudaSuccess) return false;
    if (cudaMemcpy(&v, agree, sizeof v, cudaMemcpyDeviceToHost) != cudaSuccess) return false;
    return v == 1;
  };
  auto capture_allreduce = [&](cudaGraph_t into) -> cudaError_t {
    cudaError_t e = cudaStreamBeginCaptureToGraph(cap, into, nullptr, nullptr, 0, cudaStreamCaptureModeRelaxed);
    if (e != cudaSuccess) return e;
    int r = nccl.AllReduce(d, d, n, orch::rt::nccl::kFloat32, orch::rt::nccl::kSum, comm, cap);
    cudaGraph_t g = nullptr;
    e = cudaStreamEndCapture(cap, &g);
    if (r != 0) return cudaErrorUnknown;
    return e;
  };

  for (int variant = 0; variant < 2; ++variant) {
    const char* name = variant == 0 ? "A: a captured allreduce (child graph node) before an IF node in the same graph"
                                    : "B: a captured allreduce inside the IF node's body";
    std::vector<float> init(n, static_cast<float>(g_me.rank + 1));
    RANK_CUDA(cudaMemcpy(d, init.data(), n * 4, cudaMemcpyHostToDevice));
    RANK_CUDA(cudaMemset(flag, 0, sizeof(int)));
    cudaGraph_t g = nullptr;
    RANK_CUDA(cudaGraphCreate(&g, 0));
    cudaGraphConditionalHandle h = 0;
    RANK_CUDA(cudaGraphConditionalHandleCreate(&h, g, 1, cudaGraphCondAssignDefault));
    cudaGraphNode_t before = nullptr;
    if (variant == 0) {
      cudaGraph_t child = nullptr;
      RANK_CUDA(cudaGraphCreate(&child, 0));
      cudaError_t ce = capture_allreduce(child);
      if (ce != cudaSuccess) say("%s: capture: %s", name, cudaGetErrorString(ce));
      RANK_REQUIRE(ce == cudaSuccess);
      RANK_CUDA(cudaGraphAddChildGraphNode(&before, g, nullptr, 0, child));
      cudaGraphDestroy(child);
    }
    cudaGraphNodeParams cp = {};
    cp.type = cudaGraphNodeTypeConditional;
    cp.conditional.handle = h;
    cp.conditional.type = cudaGraphCondTypeIf;
    cp.conditional.size = 1;
    cudaGraphNode_t cond = nullptr;
    RANK_CUDA(cudaGraphAddNode(&cond, g, before ? &before : nullptr, nullptr, before ? 1 : 0, &cp));
    cudaGraph_t body = cp.conditional.phGraph_out[0];
    cudaMemsetParams mp = {};
    mp.dst = flag;
    mp.value = 1;
    mp.elementSize = 4;
    mp.width = 1;
    mp.height = 1;
    cudaGraphNode_t set_flag = nullptr;
    RANK_CUDA(cudaGraphAddMemsetNode(&set_flag, body, nullptr, 0, &mp));
    if (variant == 1) {
      cudaError_t ce = capture_allreduce(body);
      if (ce != cudaSuccess) {
        say("PROBE nccl#1986%s %s: capturing into the body: %s", mixing_note(), name, cudaGetErrorString(ce));
        (void)cudaGetLastError();
        cudaGraphDestroy(g);
        RANK_REQUIRE(everyone(0) == false);
        continue;
      }
    }
    cudaGraphExec_t exec = nullptr;
    cudaGraphInstantiateParams ip = {};
    cudaError_t ie = cudaGraphInstantiateWithParams(&exec, g, &ip);
    (void)cudaGetLastError();
    const bool all = everyone(ie == cudaSuccess);
    std::string outcome = std::string("instantiate ") + cudaGetErrorName(ie) + " (result " +
                          std::to_string(static_cast<int>(ip.result_out)) + ")";
    if (all) {
      cudaError_t le = cudaGraphLaunch(exec, s);
      if (le == cudaSuccess) le = cudaStreamSynchronize(s);
      outcome += std::string("; launch ") + cudaGetErrorName(le);
      if (le == cudaSuccess) {
        int f = 0;
        RANK_CUDA(cudaMemcpy(&f, flag, 4, cudaMemcpyDeviceToHost));
        RANK_CUDA(cudaMemcpy(host.data(), d, n * 4, cudaMemcpyDeviceToHost));
        const float want = static_cast<float>(world * (world + 1) / 2);
        const bool sum_ok = std::all_of(host.begin(), host.end(), [&](float v) { return v == want; });
        outcome += std::string(sum_ok ? ", allreduce correct" : ", allreduce WRONG") +
                   (f == 1 ? ", IF body ran" : ", IF body did not run");
        RANK_CHECK(sum_ok);
        RANK_CHECK(f == 1);  // the handle's default is 1: the body runs
      } else {
        // Instantiated on every rank but failed to run: an error CUDA reports, not a wrong
        // answer; reported, and the next variant goes on.
        (void)cudaGetLastError();
      }
    } else {
      outcome += "; not launched (a rank could not instantiate)";
    }
    say("PROBE nccl#1986%s %s: %s", mixing_note(), name, outcome.c_str());
    if (exec) cudaGraphExecDestroy(exec);
    cudaGraphDestroy(g);
  }
  cudaFree(d);
  cudaFree(flag);
  cudaFree(agree);
  destroy_app_comm(comm);
  return 0;
}

const bool registered = orch::test::register_rank_scenario("dp_step", scenario_dp_step) &&
                        orch::test::register_rank_scenario("dp_step_c_api", scenario_dp_step_c_api) &&
                        orch::test::register_rank_scenario("collectives", scenario_collectives) &&
                        orch::test::register_rank_scenario("guarded", scenario_guarded) &&
                        orch::test::register_rank_scenario("while", scenario_while) &&
                        orch::test::register_rank_scenario("mismatch", scenario_mismatch) &&
                        orch::test::register_rank_scenario("nccl1986", scenario_nccl1986);

// ---- in the test process ------------------------------------------------------------------

int world_for_tests() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
  return std::min(count, 8);
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string last_lines(const std::string& text, int n) {
  size_t pos = text.size();
  if (pos && text[pos - 1] == '\n') --pos;
  while (n-- > 0 && pos != std::string::npos && pos > 0) pos = text.rfind('\n', pos - 1);
  return pos == std::string::npos ? text : text.substr(pos + 1);
}

// Runs `scenario` on one process per GPU and checks that every rank succeeded.
void run_ranks(const std::string& scenario, const std::vector<std::string>& args, int timeout_s,
               bool show_logs = false, const std::vector<std::pair<std::string, std::string>>& env = {}) {
  static int serial = 0;
  const std::string logs = orch::test::temp_dir() + "/ranks-" + scenario + "-" + std::to_string(serial++);
  std::filesystem::create_directories(logs);
  // ORCH_TEST_RANK_TIMEOUT caps every case's timeout (seconds), for a GPU machine on a budget.
  if (const char* cap = std::getenv("ORCH_TEST_RANK_TIMEOUT"))
    if (std::atoi(cap) > 0) timeout_s = std::min(timeout_s, std::atoi(cap));
  orch::ranks::SpawnOptions o;
  o.timeout = std::chrono::seconds(timeout_s);
  o.log_dir = logs;
  o.env = {{"ORCH_NCCL_TIMEOUT", "60"}, {"NCCL_NVLS_ENABLE", "0"}};
  o.env.insert(o.env.end(), env.begin(), env.end());
  std::vector<std::string> argv = {"/proc/self/exe", "--orch-rank-worker=" + scenario};
  argv.insert(argv.end(), args.begin(), args.end());
  const int world = world_for_tests();
  auto exits = orch::ranks::spawn(world, argv, o);
  ORCH_REQUIRE_OK(exits);
  for (const orch::ranks::Exit& x : *exits) {
    const std::string log = slurp(x.log);
    if (show_logs || !x.ok()) MESSAGE(x.describe(), "\n", log);
    else MESSAGE(x.describe(), "\n", last_lines(log, 2));
    INFO(x.describe(), "\n", log);
    CHECK(x.ok());
  }
}

std::string compile_or_fail(const std::string& name, const std::string& source) {
  std::string log;
  std::string path = orch::test::compile_source(name, source, &log);
  INFO(log);
  REQUIRE(!path.empty());
  return path;
}

std::string collectives_source(const TypeInfo& t) {
  const std::string T = t.name;
  return "pipeline coll_" + T + "\ntarget sm_90\nparam n: u32 = 16\ncomm world\n" +
         "buffer a: " + T + "[n]\nbuffer b: " + T + "[n]\nbuffer b_max: " + T + "[n]\nbuffer c: " + T + "[n]\n" +
         "buffer s: " + T + "[n]\nbuffer full: " + T + "[n * world_size]\nbuffer big: " + T +
         "[n * world_size]\nbuffer part: " + T + "[n]\nbuffer v: " + T + "[n]\nbuffer v_out: " + T + "[n]\n" +
         "graph main {\n"
         "  allreduce sum a on world\n"
         "  allreduce max b -> b_max on world\n"
         "  broadcast c from world_size - 1 on world\n"
         "  allgather s -> full on world\n"
         "  reduce_scatter sum big -> part on world\n" +
         (t.is_float ? "  allreduce avg v -> v_out on world\n" : "  allreduce min v -> v_out on world\n") + "}\n";
}

const char* kWhileSource = R"(pipeline loop_allreduce
target sm_90
param n: u32 = 1024
param rounds: u32 = 5
comm world
buffer x: f32[n]
buffer it: u32
kernel bump(n: u32, x: inout f32[]) source """
extern "C" __global__ void bump(unsigned n, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}
"""
graph main {
  allreduce sum x on world
  fill it = 0
  while it < rounds {
    bump<<<ceil_div(n, 256), 256>>>(n, x)
    it += 1
  }
  allreduce sum x on world
}
)";

std::string dp_step_bin() {
  std::string log;
  std::string path = orch::test::compile_example("dp_step", &log);
  INFO(log);
  REQUIRE(!path.empty());
  return path;
}

}  // namespace

namespace orch::test {

int run_rank_worker(const std::string& scenario, const std::vector<std::string>& args) {
  auto me = orch::ranks::from_environment();
  if (!me.ok()) {
    std::printf("rank worker: %s\n", me.error().to_string().c_str());
    return 2;
  }
  g_me = *me;
  orch::test::rank_checks().rank = g_me.rank;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  orch::Status s = orch::ranks::use_device(g_me);
  if (!s.ok()) {
    say("%s", s.error().to_string().c_str());
    return 2;
  }
  (void)registered;
  RankScenario fn = nullptr;
  auto it = rank_scenarios().find(scenario);
  if (it != rank_scenarios().end()) fn = it->second;
  if (!fn) {
    say("no scenario '%s'", scenario.c_str());
    return 2;
  }
  say("scenario %s on GPU %d of world %d (NCCL_NVLS_ENABLE=%s)", scenario.c_str(), g_me.local_rank, g_me.world_size,
      std::getenv("NCCL_NVLS_ENABLE") ? std::getenv("NCCL_NVLS_ENABLE") : "unset");
  int rc = fn(args);
  if (rc == 0 && g_failures) rc = 1;
  say("scenario %s: %s (%d failed checks)", scenario.c_str(), rc == 0 ? "passed" : "FAILED", g_failures);
  return rc;
}

}  // namespace orch::test

TEST_SUITE("multi-gpu") {

TEST_CASE("dp_step on every GPU equals the CPU reference; orch makes the communicator; set_param") {
  run_ranks("dp_step", {dp_step_bin()}, 180);
}

TEST_CASE("dp_step through the C API on the application's communicator; a wrong rank is refused") {
  run_ranks("dp_step_c_api", {dp_step_bin()}, 180);
}

TEST_CASE("every collective kind for f32, f64, i32, i64, bf16 and f16 at sizes that do not divide evenly") {
  std::vector<std::string> args;
  for (const TypeInfo& t : kTypes) args.push_back(std::string(t.name) + "=" + compile_or_fail(std::string("coll_") + t.name, collectives_source(t)));
  run_ranks("collectives", args, 300);
}

TEST_CASE("pipelines/guarded_step.orch (allreduce, then an if on its result) on every GPU") {
  std::string log;
  std::string path = orch::test::compile_file("guarded_step", orch::test::pipelines_dir() + "/guarded_step.orch", &log);
  INFO(log);
  REQUIRE(!path.empty());
  run_ranks("guarded", {path}, 180);
}

TEST_CASE("a collective, a WHILE loop and a collective again on every GPU") {
  run_ranks("while", {compile_or_fail("loop_allreduce", kWhileSource)}, 180);
}

TEST_CASE("ranks that run different pipelines, or fail, are refused with a clear error instead of hanging") {
  run_ranks("mismatch", {dp_step_bin(), compile_or_fail("loop_allreduce_m", kWhileSource)}, 120, true);
}

TEST_CASE("probe: NCCL's captured work beside and inside a conditional node (NVIDIA/nccl#1986)") {
  run_ranks("nccl1986", {}, 120, true);
}

// The same with NCCL's graph mixing off (read once per process, so ranks of their own): if CUDA
// then accepts the allreduce inside the IF body, and it computes the right answer, E0401 could
// be lifted for applications that run NCCL that way (docs/multi-gpu.md, nccl#1986).
TEST_CASE("probe: the same with NCCL_GRAPH_MIXING_SUPPORT=0") {
  run_ranks("nccl1986", {}, 120, true, {{"NCCL_GRAPH_MIXING_SUPPORT", "0"}});
}

}  // TEST_SUITE
