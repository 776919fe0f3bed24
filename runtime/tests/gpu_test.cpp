// GPU tests (test suite "gpu"): every example compiled with orchc at test time, loaded,
// instantiated and run on the GPU, against a CPU reference on fresh random inputs. main()
// skips this suite, visibly and with the reason, where there is no CUDA device.
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <fstream>
#include <sstream>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "artifact/artifact.h"
#include "artifact/sample_pipeline.h"
#include "orch/orch.h"
#include "orch/runtime.h"
#include "runtime/tests/gpu_edit_util.h"
#include "runtime/tests/gpu_util.h"
#include "runtime/tests/test_util.h"

using namespace orch::test;

namespace {

std::unique_ptr<orch::Pipeline> load(const std::string& example, orch::LoadOptions options = {}) {
  std::string log;
  std::string path = orch::test::compile_example(example, &log);
  INFO(log);
  REQUIRE(!path.empty());
  auto p = orch::Pipeline::load(path, options);
  ORCH_REQUIRE_OK(p);
  MESSAGE(example, ": loaded ", p.value()->image());
  return std::move(p.value());
}

void report(const char* what, const orch::Executable& x) {
  auto st = x.stats();
  MESSAGE(std::string(what), ": ", st.nodes_patched_in_place, " nodes patched in place, ", st.patches_refused, " refused, ",
          st.graph_updates, " whole-graph updates, ", st.device_graph_uploads, " device graph re-uploads, ",
          st.segments_rebuilt, " segments rebuilt");
}

}  // namespace

TEST_SUITE("gpu") {

// The thread contract (orch/runtime.h): one Pipeline, instantiated on several threads at once,
// each Executable used by its own thread. Each thread's first CUDA call is instantiate itself
// (the runtime adds kernel nodes through the driver, in the thread's current context, which the
// runtime API must have made current by then), on the legacy stream; the odd threads bind every
// buffer (allocated here), so the runtime allocates nothing for them. Doctest's asserts stay on
// the main thread: each thread only records what went wrong.
TEST_CASE("the thread contract: one Pipeline instantiated and launched on four fresh threads at once, each exact") {
  auto p = load("saxpy");
  const uint32_t n = 4099;
  constexpr int kThreads = 4;
  std::vector<std::vector<float>> xs(kThreads), ys(kThreads), got(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    xs[t] = random_floats(n, -1, 1);
    ys[t] = random_floats(n, -1, 1);
  }
  std::vector<std::unique_ptr<PinnedBuffer>> hosts;
  std::vector<std::unique_ptr<DeviceBuffer>> devices;
  for (int t = 0; t < kThreads; ++t) {
    hosts.push_back(std::make_unique<PinnedBuffer>(2 * n * sizeof(float)));
    devices.push_back(std::make_unique<DeviceBuffer>(2 * n * sizeof(float)));
  }
  std::vector<std::string> problems(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      orch::Bindings b;
      b.param("n", n).param("a", 1.5f + static_cast<float>(t));
      if (t % 2) {
        char* h = static_cast<char*>(hosts[t]->p);
        char* d = static_cast<char*>(devices[t]->p);
        const size_t bytes = n * sizeof(float);
        b.buffer("x_host", h, bytes).buffer("y_host", h + bytes, bytes);
        b.buffer("x", d, bytes).buffer("y", d + bytes, bytes);
      }
      auto x = p->instantiate(b, nullptr);
      if (!x) {
        problems[t] = "instantiate: " + x.error().to_string();
        return;
      }
      std::copy(xs[t].begin(), xs[t].end(), static_cast<float*>((*x)->buffer("x_host")));
      std::copy(ys[t].begin(), ys[t].end(), static_cast<float*>((*x)->buffer("y_host")));
      for (int launch = 0; launch < 3; ++launch) {
        orch::Status st = (*x)->launch(nullptr);
        if (!st.ok()) {
          problems[t] = "launch: " + st.error().to_string();
          return;
        }
      }
      const cudaError_t e = cudaStreamSynchronize(nullptr);
      if (e != cudaSuccess) {
        problems[t] = std::string("cudaStreamSynchronize: ") + cudaGetErrorString(e);
        return;
      }
      const float* y = static_cast<const float*>((*x)->buffer("y_host"));
      got[t].assign(y, y + n);
    });
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    CAPTURE(t);
    CHECK(problems[t] == "");
    if (!problems[t].empty()) continue;
    // Three launches: y = a x + y, three times.
    std::vector<float> want = ys[t];
    const float a = 1.5f + static_cast<float>(t);
    for (int launch = 0; launch < 3; ++launch)
      for (uint32_t i = 0; i < n; ++i) want[i] = a * xs[t][i] + want[i];
    check_close(got[t], want, 1e-5, "y = a x + y, three launches, on its own thread");
  }
}

// A param that only a launch's grid reads: set_param must patch the grid (issue 20, item 8: a
// kernel-call comparison that ignored the grid kept the old one, and no test noticed).
TEST_CASE("set_param of a param only the grid reads patches the grid") {
  auto p = load_source("grid_only", R"(pipeline grid_only
target sm_90
param blocks: u32 = 2
buffer x: u32[16384]
kernel mark(x: out u32[]) source """
extern "C" __global__ void mark(unsigned* x) { x[blockIdx.x * blockDim.x + threadIdx.x] = blockIdx.x + 1u; }
"""
graph main {
  mark<<<blocks, 256>>>(x)
}
)");
  Stream s;
  auto x = instantiate(*p, orch::Bindings(), s);
  for (uint32_t blocks : {2u, 7u, 64u, 1u}) {
    CAPTURE(blocks);
    ORCH_REQUIRE_OK(x->set_param("blocks", blocks));
    write(*x, "x", std::vector<uint32_t>(16384, 0u));
    run(*x, s);
    std::vector<uint32_t> want(16384, 0u);
    for (uint32_t i = 0; i < blocks * 256; ++i) want[i] = i / 256 + 1;
    CHECK(read<uint32_t>(*x, "x", 16384) == want);
  }
}

TEST_CASE("saxpy equals the CPU reference; set_param and rebind patch it in place") {
  auto p = load("saxpy");
  Stream s;
  const uint32_t n = 10007;  // not a multiple of the block size
  orch::Bindings b;
  b.param("n", n).param("a", 3.0f);
  auto x = instantiate(*p, b, s);
  orch::Executable* const same = x.get();

  auto xs = random_floats(n, -1, 1), ys = random_floats(n, -1, 1);
  float* xh = static_cast<float*>(x->buffer("x_host"));
  float* yh = static_cast<float*>(x->buffer("y_host"));
  std::copy(xs.begin(), xs.end(), xh);
  std::copy(ys.begin(), ys.end(), yh);
  run(*x, s);
  std::vector<float> want(n);
  for (uint32_t i = 0; i < n; ++i) want[i] = 3.0f * xs[i] + ys[i];
  check_close(std::vector<float>(yh, yh + n), want, 1e-6, "y = 3x + y");

  SUBCASE("set_param a") {
    std::copy(ys.begin(), ys.end(), yh);
    ORCH_REQUIRE_OK(x->set_param("a", -0.5f));
    run(*x, s);
    for (uint32_t i = 0; i < n; ++i) want[i] = -0.5f * xs[i] + ys[i];
    check_close(std::vector<float>(yh, yh + n), want, 1e-6, "y = -0.5x + y");
    CHECK(x.get() == same);
    CHECK(x->stats().nodes_patched_in_place == 1);
    CHECK(x->stats().graph_updates == 0);
  }
  SUBCASE("set_param n shrinks the copies and the grid") {
    std::copy(ys.begin(), ys.end(), yh);
    ORCH_REQUIRE_OK(x->set_param("n", 300u));
    run(*x, s);
    for (uint32_t i = 0; i < n; ++i) want[i] = i < 300 ? 3.0f * xs[i] + ys[i] : ys[i];
    check_close(std::vector<float>(yh, yh + n), want, 1e-6, "only the first 300 change");
    report("saxpy set_param n (copies and grid)", *x);
    // Growing a runtime-allocated buffer needs a new instantiation: refused, nothing changes.
    orch::Status st = x->set_param("n", n + 1);
    CHECK(st.error().code() == orch::ErrorCode::Unsupported);
    CHECK(st.error().message().find("would grow") != std::string::npos);
    CHECK(x->param_as_double("n").value() == 300);
  }
  SUBCASE("rebind x_host to the application's pinned memory") {
    PinnedBuffer mine(n * sizeof(float));
    auto x2 = random_floats(n, 5, 6);
    std::copy(x2.begin(), x2.end(), mine.f());
    std::copy(ys.begin(), ys.end(), yh);
    ORCH_REQUIRE_OK(x->rebind("x_host", mine.p, mine.bytes));
    CHECK(x->buffer("x_host") == mine.p);
    run(*x, s);
    for (uint32_t i = 0; i < n; ++i) want[i] = 3.0f * x2[i] + ys[i];
    check_close(std::vector<float>(yh, yh + n), want, 1e-6, "y = 3 x2 + y");
    CHECK(x->rebind("x_host", mine.p, 16).error().code() == orch::ErrorCode::BufferTooSmall);
    std::vector<float> pageable(n);
    CHECK(x->rebind("x_host", pageable.data(), n * 4).error().code() == orch::ErrorCode::InvalidArgument);
    CHECK(x->rebind("nope", mine.p, mine.bytes).error().code() == orch::ErrorCode::UnknownName);
    // Put it back before `mine` is freed.
    PinnedBuffer again(n * sizeof(float));
    ORCH_REQUIRE_OK(x->rebind("x_host", again.p, again.bytes));
    CUDA_REQUIRE(cudaStreamSynchronize(s));
    x.reset();
  }
  SUBCASE("bound device buffers are used as given") {
    DeviceBuffer dx(n * 4), dy(n * 4);
    orch::Bindings b2 = b;
    b2.buffer("x", dx.p, dx.bytes).buffer("y", dy.p, dy.bytes);
    auto x2 = instantiate(*p, b2, s);
    CHECK(x2->buffer("x") == dx.p);
    std::copy(xs.begin(), xs.end(), static_cast<float*>(x2->buffer("x_host")));
    std::copy(ys.begin(), ys.end(), static_cast<float*>(x2->buffer("y_host")));
    run(*x2, s);
    for (uint32_t i = 0; i < n; ++i) want[i] = 3.0f * xs[i] + ys[i];
    check_close(read<float>(*x2, "y", n), want, 1e-6, "y in the application's buffer");
    orch::Bindings small = b;
    small.buffer("y", dy.p, 8);
    auto r = p->instantiate(small, s);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code() == orch::ErrorCode::BufferTooSmall);
    CHECK(r.error().message().find("buffer 'y'") == 0);
  }
}

TEST_CASE("jacobi converges to the reference solution") {
  auto p = load("jacobi");
  Stream s;
  // Small enough that fp32 rounding noise, amplified by 1 / (1 - spectral radius), stays far
  // below tol (n = 32 with values near 1 can cycle at ~1e-5 and never converge).
  const uint32_t n = 16;
  const float tol = 1e-6f;
  orch::Bindings b;
  b.param("n", n).param("tol", tol).param("max_iters", 100000u);
  auto x = instantiate(*p, b, s);
  auto u0 = random_floats(n, 0, 1), rhs = random_floats(n, 0, 1e-3f);
  std::memcpy(x->buffer("u_host"), u0.data(), n * 4);
  std::memcpy(x->buffer("rhs_host"), rhs.data(), n * 4);
  run(*x, s);
  const uint32_t iters = read<uint32_t>(*x, "iters", 1)[0];
  MESSAGE("jacobi: ", iters, " sweeps");
  CHECK(iters % 2 == 0);
  CHECK(iters > 2);
  CHECK(iters < 100000);  // it stopped on the tolerance, not on max_iters

  // The same sweeps on the CPU.
  std::vector<float> u = u0, v(n);
  float last_change = 0, previous_change = 0;
  auto sweep = [&](const std::vector<float>& src, std::vector<float>& dst) {
    float change = 0;
    for (uint32_t i = 0; i < n; ++i) {
      float left = i > 0 ? src[i - 1] : 0.0f, right = i + 1 < n ? src[i + 1] : 0.0f;
      dst[i] = 0.5f * (rhs[i] + left + right);
      change = std::max(change, std::fabs(dst[i] - src[i]));
    }
    return change;
  };
  for (uint32_t k = 0; k < iters / 2; ++k) {
    previous_change = last_change;
    const float first = sweep(u, v);  // in this order (std::max's arguments have none)
    const float second = sweep(v, u);
    last_change = std::max(first, second);
  }
  CHECK(last_change <= tol * 1.01f);
  CHECK(previous_change > tol * 0.99f);
  std::vector<float> gpu(static_cast<float*>(x->buffer("u_host")), static_cast<float*>(x->buffer("u_host")) + n);
  check_close(gpu, u, 1e-5, "GPU vs CPU after the same sweeps");
  CHECK(std::fabs(read<float>(*x, "residual", 1)[0] - last_change) <= 1e-6f);

  // And both are the solution of the tridiagonal system 2u_i - u_{i-1} - u_{i+1} = rhs_i.
  std::vector<double> c(n), d(n), exact(n);
  for (uint32_t i = 0; i < n; ++i) {
    double m = 2.0 - (i ? c[i - 1] * -1.0 : 0.0);
    c[i] = -1.0 / m;
    d[i] = (rhs[i] + (i ? d[i - 1] : 0.0)) / m;
  }
  for (int i = n - 1; i >= 0; --i) exact[i] = d[i] - c[i] * (i + 1 < int(n) ? exact[i + 1] : 0.0);
  std::vector<float> exact_f(exact.begin(), exact.end());
  check_close(gpu, exact_f, 1e-3, "GPU vs the exact solution");

  // set_param on a value the condition kernels read: a looser tolerance stops earlier.
  ORCH_REQUIRE_OK(x->set_param("tol", 1e-3f));
  std::memcpy(x->buffer("u_host"), u0.data(), n * 4);
  run(*x, s);
  const uint32_t fewer = read<uint32_t>(*x, "iters", 1)[0];
  report("jacobi set_param tol (condition kernels, one in the WHILE body)", *x);
  MESSAGE("jacobi with tol 1e-3: ", fewer, " sweeps");
  CHECK(fewer < iters);
}

TEST_CASE("branch takes each branch for inputs that force it") {
  auto p = load("branch");
  Stream s;
  const uint32_t n = 1000;
  const float lr = 0.01f;
  orch::Bindings b;
  b.param("n", n);
  auto x = instantiate(*p, b, s);

  struct Case {
    const char* name;
    bool nan;
    uint32_t mode;
  };
  for (const Case& c : {Case{"finite g, mode 0", false, 0}, Case{"finite g, mode 1", false, 1},
                        Case{"finite g, mode 7 (default)", false, 7}, Case{"NaN in g, mode 0", true, 0},
                        Case{"NaN in g, mode 1", true, 1}, Case{"NaN in g, mode 2 (default)", true, 2}}) {
    CAPTURE(c.name);
    auto w = random_floats(n, -1, 1), g = random_floats(n, -1, 1);
    if (c.nan) g[n / 3] = NAN;
    write(*x, "w", w);
    write(*x, "g", g);
    write(*x, "mode", std::vector<uint32_t>{c.mode});
    run(*x, s);
    std::vector<float> want_w(n), want_g = g;
    for (uint32_t i = 0; i < n; ++i) {
      float wi = c.nan ? w[i] : w[i] - lr * g[i];
      want_w[i] = c.mode == 0 ? wi * 0.5f : c.mode == 1 ? wi * 2.0f : 0.0f;
      if (c.nan) want_g[i] = 0;
    }
    CHECK(read<uint32_t>(*x, "overflow", 1)[0] == (c.nan ? 1u : 0u));
    check_close(read<float>(*x, "g", n), want_g, 0, "g");
    check_close(read<float>(*x, "w", n), want_w, 1e-6, "w");
  }

  // lr is read by sgd inside the IF's else body: patched in place there too.
  ORCH_REQUIRE_OK(x->set_param("lr", 0.25f));
  auto w = random_floats(n, -1, 1), g = random_floats(n, -1, 1);
  write(*x, "w", w);
  write(*x, "g", g);
  write(*x, "mode", std::vector<uint32_t>{1});
  run(*x, s);
  std::vector<float> want(n);
  for (uint32_t i = 0; i < n; ++i) want[i] = (w[i] - 0.25f * g[i]) * 2.0f;
  check_close(read<float>(*x, "w", n), want, 1e-6, "w with lr = 0.25");
  report("branch set_param lr (sgd in the IF's else body)", *x);
  CHECK(x->stats().nodes_patched_in_place + x->stats().patches_refused == 1);
}

TEST_CASE("countdown runs exactly 1000 iterations") {
  for (bool ptx : {false, true}) {
    CAPTURE(ptx);
    orch::LoadOptions o;
    o.force_ptx = ptx;
    auto p = load("countdown", o);
    if (ptx) CHECK(p->image().find("PTX (JIT)") != std::string::npos);
    Stream s;
    auto x = instantiate(*p, orch::Bindings(), s);
    for (int launch = 1; launch <= 2; ++launch) {
      run(*x, s);
      CHECK(read<int32_t>(*x, "counter", 1)[0] == 0);
      auto trace = read<int32_t>(*x, "trace", 1024);
      int ones = 0, zeros = 0;
      for (int i = 0; i < 1024; ++i) {
        if (trace[i] == launch) ++ones;
        if (trace[i] == 0) ++zeros;
      }
      CHECK(ones == 1000);
      CHECK(zeros == 24);
      CHECK(trace[999] == launch);
      CHECK(trace[1000] == 0);
    }
  }
}

TEST_CASE("moe equals the CPU result for random routings, experts without tokens included") {
  auto p = load("moe");
  Stream s;
  const uint32_t tokens = 300, hidden = 64;
  orch::Bindings b;
  b.param("tokens", tokens).param("hidden", hidden);
  auto x = instantiate(*p, b, s);
  struct Routing {
    const char* name;
    std::vector<int> experts;
  };
  for (const Routing& r : {Routing{"all eight", {0, 1, 2, 3, 4, 5, 6, 7}}, Routing{"experts 1 and 4 only", {1, 4}},
                           Routing{"expert 7 only", {7}}, Routing{"all eight again", {0, 1, 2, 3, 4, 5, 6, 7}}}) {
    CAPTURE(r.name);
    auto xs = random_floats(size_t(tokens) * hidden, -1, 1);
    std::vector<int32_t> expert_of(tokens);
    std::uniform_int_distribution<size_t> pick(0, r.experts.size() - 1);
    for (auto& e : expert_of) e = r.experts[pick(rng())];
    write(*x, "x", xs);
    write(*x, "expert_of", expert_of);
    run(*x, s);
    std::vector<float> want(xs.size());
    std::vector<int32_t> counts(8, 0);
    for (uint32_t t = 0; t < tokens; ++t) {
      const int e = expert_of[t];
      ++counts[e];
      const float gain = 1.0f + 0.5f * float(e);
      for (uint32_t h = 0; h < hidden; ++h) {
        float y = gain * xs[size_t(t) * hidden + h];
        want[size_t(t) * hidden + h] = xs[size_t(t) * hidden + h] + y;
      }
    }
    CHECK(read<int32_t>(*x, "counts", 8) == counts);
    check_close(read<float>(*x, "out", xs.size()), want, 1e-6, "out = x + gain(e) x");
  }

  // set_param in device graphs: hidden is an argument of every family member and of finish
  // (and sizes combine's grid). The buffers shrink, which a runtime-owned buffer allows.
  const uint32_t h2 = 16;
  ORCH_REQUIRE_OK(x->set_param("hidden", h2));
  auto xs = random_floats(size_t(tokens) * h2, -1, 1);
  std::vector<int32_t> expert_of(tokens);
  for (uint32_t t = 0; t < tokens; ++t) expert_of[t] = int32_t(t % 5);
  write(*x, "x", xs);
  write(*x, "expert_of", expert_of);
  run(*x, s);
  report("moe set_param hidden (family members and finish)", *x);
  CHECK(x->stats().device_graph_uploads == 9);
  std::vector<float> want(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) want[i] = xs[i] + (1.0f + 0.5f * float(expert_of[i / h2])) * xs[i];
  check_close(read<float>(*x, "out", xs.size()), want, 1e-6, "out with hidden = 16");
}

TEST_CASE("scheduler processes every item exactly once over ceil(items / batch) rounds") {
  auto p = load("scheduler");
  Stream s;
  const uint32_t items = 200000, batch = 16384;
  orch::Bindings b;
  b.param("items", items).param("batch", batch);
  auto x = instantiate(*p, b, s);
  auto work = random_floats(items, 0, 1);
  write(*x, "work", work);
  run(*x, s);
  const uint32_t rounds = (items + batch - 1) / batch;
  CHECK(read<uint32_t>(*x, "round", 1)[0] == rounds);
  CHECK(read<uint32_t>(*x, "head", 1)[0] == items);
  CHECK(read<uint32_t>(*x, "finished", 1)[0] == 0);
  // The per-item cost loop on the CPU, fused (as NVRTC contracts it) and not; processing an
  // item twice or never would be far from both.
  auto got = read<float>(*x, "work", items);
  size_t bad = 0, first = 0;
  for (uint32_t i = 0; i < items; ++i) {
    float fused = work[i], plain = work[i];
    const uint32_t k_max = (i * 2654435761u) % 256u;
    for (uint32_t k = 0; k < k_max; ++k) {
      fused = std::fma(fused, 0.999f, 1.0f);
      plain = plain * 0.999f + 1.0f;
    }
    const float tol = 1e-5f * std::max(1.0f, std::fabs(fused));
    if (std::fabs(got[i] - fused) > tol && std::fabs(got[i] - plain) > tol && bad++ == 0) first = i;
  }
  INFO(bad, " items differ; first ", first, ": got ", got[first]);
  CHECK(bad == 0);
}

TEST_CASE("a pipeline with a WHILE loop and a device launch runs as segments") {
  // The driver hangs on one graph holding both (DESIGN.md); lowering splits main in two.
  const char* src = R"(pipeline segments
target sm_90
buffer counter: i32
buffer out: i32[4]
kernel step(counter: inout i32, c: cond) source """
extern "C" __global__ void step(int* counter, cudaGraphConditionalHandle c) {
  if (threadIdx.x == 0) { int left = --(*counter); cudaGraphSetConditional(c, left > 0); }
}
"""
kernel mark(counter: in i32, out: inout i32[]) source """
extern "C" __global__ void mark(const int* counter, int* out) {
  if (threadIdx.x < 4) out[threadIdx.x] += 10 + *counter;
}
"""
graph child device {
  mark<<<1, 32>>>(counter, out)
}
graph main {
  fill counter = 50
  while kernel {
    step<<<1, 32>>>(counter, cond)
  }
  launch child tail
}
)";
  std::string log;
  std::string path = orch::test::compile_source("segments", src, &log);
  INFO(log);
  REQUIRE(!path.empty());
  auto p = orch::Pipeline::load(path);
  ORCH_REQUIRE_OK(p);
  Stream s;
  auto x = instantiate(**p, orch::Bindings(), s);
  run(*x, s);
  CHECK(read<int32_t>(*x, "counter", 1)[0] == 0);
  CHECK(read<int32_t>(*x, "out", 4) == std::vector<int32_t>{10, 10, 10, 10});
  run(*x, s);
  CHECK(read<int32_t>(*x, "out", 4) == std::vector<int32_t>{20, 20, 20, 20});
}

TEST_CASE("generated kernels of every kind run from one module, from its CUBIN and from its PTX") {
  // Fills no memset can do (f64), scalar updates (one that can fail, and so reports to the
  // device status record, whose definitions the module then holds once for all its kernels),
  // conditions for while, if and switch, and a device graph launcher: orchc compiles them all
  // into one module (artifact format 2).
  const char* src = R"(pipeline generated_module
target sm_90
param n: u32 = 4096
buffer x: f32[n]
buffer d: f64[n]
buffer mode: u32
buffer sel: u32
buffer count: i32
buffer den: i32
buffer q: i32
kernel add(n: u32, v: f32, x: inout f32[]) source """
extern "C" __global__ void add(unsigned n, float v, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += v;
}
"""
graph child device { add<<<ceil_div(n, 256), 256>>>(n, 100.0, x) }
graph main {
  fill d = 1.5
  q = 1000 / den
  count = 3
  while count > 0 {
    add<<<ceil_div(n, 256), 256>>>(n, 1.0, x)
    count -= 1
  }
  if mode == 0 {
    add<<<ceil_div(n, 256), 256>>>(n, 10.0, x)
  } else {
    fill d = 2.5
  }
  switch sel {
    case 0 { add<<<ceil_div(n, 256), 256>>>(n, 1000.0, x) }
    case 7 { fill d = 3.5 }
    default { add<<<ceil_div(n, 256), 256>>>(n, -1.0, x) }
  }
  launch child tail
}
)";
  std::string log;
  const std::string path = orch::test::compile_source("generated_module", src, &log);
  INFO(log);
  REQUIRE(!path.empty());
  {
    // The artifact holds one module with every generated kernel (the first), and no generated
    // kernel has code of its own; a user kernel with variants (a guarded copy of an unrolled
    // loop's body) shares a module of its own with them.
    const orch::test::OpenedExample opened = orch::test::open_artifact(path);
    const orch::fb::Pipeline& fb = *opened.p;
    REQUIRE(fb.modules() != nullptr);
    CHECK(fb.modules()->size() <= 2);
    int generated = 0;
    for (const orch::fb::Kernel* k : *fb.kernels()) {
      CHECK(k->generated() == (k->in_module() == 0));
      generated += k->generated();
    }
    CHECK(generated >= 6);
  }
  const uint32_t n = 4096;
  std::uniform_real_distribution<double> any_double(-1e6, 1e6);
  for (bool ptx : {false, true}) {
    CAPTURE(ptx);
    orch::LoadOptions o;
    o.force_ptx = ptx;
    auto p = orch::Pipeline::load(path, o);
    ORCH_REQUIRE_OK(p);
    if (ptx) CHECK((*p)->image().find("PTX (JIT)") != std::string::npos);
    Stream s;
    auto x = instantiate(**p, orch::Bindings(), s);
    for (uint32_t mode : {0u, 1u}) {
      for (uint32_t sel : {0u, 7u, 3u}) {
        CAPTURE(mode);
        CAPTURE(sel);
        const std::vector<float> x0 = random_floats(n, -1, 1);
        std::vector<double> d0(n);
        for (double& v : d0) v = any_double(rng());
        write(*x, "x", x0);
        write(*x, "d", d0);
        write(*x, "mode", std::vector<uint32_t>{mode});
        write(*x, "sel", std::vector<uint32_t>{sel});
        write(*x, "count", std::vector<int32_t>{-5});
        // Division by zero in one case of three: q keeps its value and the status says why.
        std::uniform_int_distribution<int32_t> any_den(1, 1 << 20);
        const int32_t den = sel == 3 ? 0 : (rng()() % 2 ? 1 : -1) * any_den(rng());
        write(*x, "den", std::vector<int32_t>{den});
        write(*x, "q", std::vector<int32_t>{-7});
        run(*x, s);
        if (den == 0) {
          auto st = x->device_status();
          REQUIRE_FALSE(st.ok());
          INFO(st.error().to_string());
          CHECK(st.error().code() == orch::ErrorCode::DeviceError);
          CHECK(st.error().message().find("the expression could not be evaluated on the GPU: division by zero") != std::string::npos);
          CHECK(st.error().where().find("generated_module.orch:") != std::string::npos);
          CHECK(read<int32_t>(*x, "q", 1)[0] == -7);
          ORCH_REQUIRE_OK(x->clear_device_status());
        } else {
          ORCH_CHECK_OK(x->device_status());
          CHECK(read<int32_t>(*x, "q", 1)[0] == 1000 / den);
        }
        // The same float additions in the same order as the GPU: exact.
        std::vector<float> want(n);
        for (uint32_t i = 0; i < n; ++i) {
          float v = x0[i];
          for (int k = 0; k < 3; ++k) v += 1.0f;
          if (mode == 0) v += 10.0f;
          if (sel == 0) v += 1000.0f;
          if (sel != 0 && sel != 7) v += -1.0f;
          v += 100.0f;  // the tail-launched child, after main
          want[i] = v;
        }
        check_close(read<float>(*x, "x", n), want, 0, "x");
        const double want_d = sel == 7 ? 3.5 : mode == 0 ? 1.5 : 2.5;
        const std::vector<double> d = read<double>(*x, "d", n);
        CHECK(std::count(d.begin(), d.end(), want_d) == static_cast<long>(n));
        CHECK(read<int32_t>(*x, "count", 1)[0] == 0);
      }
    }
  }
}

TEST_CASE("dp_step bound without an NCCL communicator is refused, naming the allreduce") {
  auto p = load("dp_step");
  Stream s;
  orch::Bindings b;
  b.param("n", 5003u).comm("world", nullptr, 0, 1);
  auto r = p->instantiate(b, s);
  REQUIRE_FALSE(r.ok());  // a collective needs a communicator
  CHECK(r.error().code() == orch::ErrorCode::Unbound);
  CHECK(r.error().message().find("comm 'world' is bound without an NCCL communicator, but `allreduce") == 0);
  CHECK(r.error().where().find("dp_step.orch:") != std::string::npos);
  MESSAGE(r.error().to_string());
}

// Needs NCCL: where the library cannot be loaded, main() excludes the cases named "with NCCL"
// and says so (SKIPPED), and run alone they exit 77.
TEST_CASE("dp_step on one rank with NCCL: orch makes the communicator, captures the allreduce, equals the CPU reference") {
  auto p = load("dp_step");
  Stream s;
  const uint32_t n = 5003;
  orch::Bindings b;
  b.param("n", n);
  auto version = orch::nccl_version();
  ORCH_REQUIRE_OK(version);
  MESSAGE("NCCL ", *version);
  auto id = orch::nccl_unique_id();
  ORCH_REQUIRE_OK(id);
  b.comm_from_unique_id("world", id->data(), 0, 1).param("lr", 0.25f);
  auto x = instantiate(*p, b, s);
  CHECK(x->comm("world") != nullptr);
  CHECK(x->rank() == 0);
  CHECK(x->world_size() == 1);
  std::vector<float> w = random_floats(n, -1, 1), data = random_floats(n, -1, 1);
  write(*x, "w", w);
  write(*x, "data", data);
  run(*x, s);
  for (uint32_t i = 0; i < n; ++i) w[i] -= 0.25f * 1.0f * ((w[i] - data[i]) * 1.0f);
  check_close(read<float>(*x, "w", n), w, 1e-6, "w after one step");
  // A smaller n changes the allreduce's count: its segment is captured and built again.
  ORCH_REQUIRE_OK(x->set_param("n", n - 1000));
  CHECK(x->stats().segments_rebuilt == 1);
  run(*x, s);
  for (uint32_t i = 0; i < n - 1000; ++i) w[i] -= 0.25f * 1.0f * ((w[i] - data[i]) * 1.0f);
  check_close(read<float>(*x, "w", n), w, 1e-6, "w after a second step on fewer elements");
  report("dp_step, one rank", *x);
}

TEST_CASE("errors name the statement: a bind check at instantiate") {
  auto p = load("moe");
  Stream s;
  orch::Bindings b;
  // tokens * hidden is u32 arithmetic (both are u32): 2^40 overflows it, which the grid's bind
  // check cannot evaluate (InvalidValue, not BindCheckFailed), at the grid's place.
  b.param("tokens", 1u << 20).param("hidden", 1u << 20);
  auto r = p->instantiate(b, s);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == orch::ErrorCode::InvalidValue);
  CHECK(r.error().message().find("overflow: 1048576 * 1048576 does not fit u32") != std::string::npos);
  CHECK(r.error().where().find("moe.orch:31:13") != std::string::npos);
}

TEST_CASE("C API: countdown end to end") {
  std::string log;
  std::string path = orch::test::compile_example("countdown", &log);
  REQUIRE(!path.empty());
  orch_pipeline* p = nullptr;
  orch_error* e = orch_pipeline_load(path.c_str(), &p);
  INFO(std::string(e ? orch_error_message(e) : ""));
  REQUIRE(e == nullptr);
  CHECK(std::string(orch_pipeline_name(p)) == "countdown");
  Stream s;
  orch_bindings* b = orch_bindings_create();
  orch_executable* x = nullptr;
  e = orch_instantiate(p, b, s, &x);
  REQUIRE(e == nullptr);
  REQUIRE(orch_launch(x, s) == nullptr);
  CUDA_REQUIRE(cudaStreamSynchronize(s));
  int32_t counter = -1;
  CUDA_REQUIRE(cudaMemcpy(&counter, orch_executable_buffer(x, "counter"), 4, cudaMemcpyDefault));
  CHECK(counter == 0);
  e = orch_set_param_u32(x, "nope", 1);
  CHECK(orch_error_code(e) == ORCH_ERROR_UNKNOWN_NAME);
  orch_error_destroy(e);
  orch_executable_destroy(x);
  orch_bindings_destroy(b);
  orch_pipeline_destroy(p);
}

}  // TEST_SUITE("gpu")
