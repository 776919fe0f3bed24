// What orchc's speed passes (issue 11) do on the GPU, against CPU references on fresh random
// inputs: programmatic edges that orchc made itself, into user kernels it patched to wait at
// entry (a missing wait reads what the kernel before has not written yet); guarded unrolling of
// `while` loops, for every trip count around the copies per iteration (0, 1, U-1, U, U+1, ...,
// 1,000) and several U, each equal to the CPU's loop and so to the loop without unrolling;
// nested loops (the slots reset before each inner loop); and a condition that cannot be
// evaluated inside an unrolled copy (reported where the loop is, and the loop ends).
//
// Suite "gpu". ORCH_TEST_SHORT=1 keeps the trip counts and launch counts small (for
// compute-sanitizer's synccheck and racecheck, scripts/gpu-check).
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "artifact/artifact.h"
#include "orch/runtime.h"
#include "runtime/tests/gpu_util.h"
#include "runtime/tests/test_util.h"

using namespace orch::test;

namespace {

bool short_run() {
  const char* env = std::getenv("ORCH_TEST_SHORT");
  return env && *env && std::string(env) != "0";
}

// dst[i] = src[(i * 7919 + c) % n] * 2654435761 + c * 40503 + i (u32, wrapping), c a device scalar:
// every iteration of a loop leaves its own mark, so a copy run once too often or too few shows.
constexpr const char* kMixc = R"(kernel mixc(n: u32, c: in i32, src: in u32[], dst: out u32[]) source """
extern "C" __global__ void mixc(unsigned n, const int* c, const unsigned* src, unsigned* dst) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    const unsigned k = (unsigned)*c;
    unsigned j = (unsigned)(((unsigned long long)i * 7919ull + k) % n);
    dst[i] = src[j] * 2654435761u + k * 40503u + i;
  }
}
"""
kernel step(c: inout i32) source """
extern "C" __global__ void step(int* c) { if (threadIdx.x == 0) --(*c); }
"""
)";

void mixc_cpu(uint32_t n, int32_t c, const std::vector<uint32_t>& src, std::vector<uint32_t>& dst) {
  const uint32_t k = static_cast<uint32_t>(c);
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t j = static_cast<uint32_t>((uint64_t{i} * 7919u + k) % n);
    dst[i] = src[j] * 2654435761u + k * 40503u + i;
  }
}

std::vector<uint32_t> random_u32(size_t n) {
  std::vector<uint32_t> v(n);
  for (uint32_t& x : v) x = rng()();
  return v;
}

// Exact comparison, naming the first difference.
void same(const std::vector<uint32_t>& got, const std::vector<uint32_t>& want, const std::string& what) {
  REQUIRE(got.size() == want.size());
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i] && bad++ == 0) first = i;
  INFO(what, ": ", bad, " of ", got.size(), " differ; first at ", first, ": got ", got[first], ", want ", want[first]);
  CHECK(bad == 0);
}

// The artifact at `path`: how many edges are programmatic and how many loops are unrolled (guard
// slot buffers), to know the test ran what it means to.
struct Shape {
  size_t programmatic = 0;
  size_t unrolled = 0;
  size_t widest_body = 0;  // the most nodes of a conditional body
};
Shape shape_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<uint64_t> aligned((file.size() + 7) / 8);
  std::memcpy(aligned.data(), file.data(), file.size());
  auto opened = orch::artifact::open_pipeline(reinterpret_cast<const uint8_t*>(aligned.data()), file.size());
  INFO(opened.error);
  REQUIRE(opened.ok());
  Shape s;
  std::function<void(const orch::fb::Graph&)> walk = [&](const orch::fb::Graph& g) {
    if (!g.nodes()) return;
    if (g.dep_kinds())
      for (orch::fb::EdgeKind k : *g.dep_kinds()) s.programmatic += k == orch::fb::EdgeKind::Programmatic;
    for (const orch::fb::Node* at : *g.nodes()) {
      const orch::fb::ConditionalOp* n = opened.pipeline->ops()->Get(at->op())->body_as_ConditionalOp();
      if (n && n->bodies())
        for (const orch::fb::Graph* b : *n->bodies()) {
          s.widest_body = std::max<size_t>(s.widest_body, b->nodes() ? b->nodes()->size() : 0);
          walk(*b);
        }
    }
  };
  for (const orch::fb::Graph* g : *opened.pipeline->graphs()) walk(*g);
  for (const orch::fb::Buffer* b : *opened.pipeline->buffers())
    s.unrolled += b->name()->str().rfind("orch.guard.", 0) == 0;
  return s;
}

std::unique_ptr<orch::Pipeline> compile_and_load(const std::string& name, const std::string& source, const char* options,
                                                 Shape* shape) {
  std::string log;
  const std::string path = compile_source(name, source, &log, options);
  INFO(log);
  REQUIRE(!path.empty());
  if (shape) *shape = shape_of(path);
  auto p = orch::Pipeline::load(path);
  ORCH_REQUIRE_OK(p);
  return std::move(p.value());
}

// Hops each wait for nothing themselves and let their successors launch at once: only the wait
// orchc puts at their entry keeps each from reading what the hop before has not written.
constexpr const char* kHop = R"(kernel hop(n: u32, salt: u32, src: in u32[], dst: out u32[]) source """
extern "C" __global__ void hop(unsigned n, unsigned salt, const unsigned* src, unsigned* dst) {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    unsigned j = (unsigned)(((unsigned long long)i * 7919ull + salt) % n);
    dst[i] = src[j] * 2654435761u + salt * 40503u + i;
  }
}
"""
)";

// A pipeline `name` of `hops` hops over a and b (param n, 3001 by default), with `count += 1`
// (a one-block generated kernel) after every `count_every` hops.
std::string hops_source(const std::string& name, int hops, int count_every) {
  std::string source = "pipeline " + name + "\ntarget sm_90\nparam n: u32 = 3001\nbuffer a: u32[n]\nbuffer b: u32[n]\n"
                       "buffer count: u32\n" + kHop + "graph main {\n";
  for (int k = 0; k < hops; ++k) {
    source += "  hop<<<ceil_div(n, 128), 128>>>(n, " + std::to_string(k + 1) + ", " + (k % 2 ? "b, a" : "a, b") + ")\n";
    if (k % count_every == count_every - 1) source += "  count += 1\n";
  }
  return source + "}\n";
}

// Launches `x` (hops_source's pipeline) `launches` times on fresh random a and b, and checks
// a, b and count against the CPU's hops.
void run_hops(orch::Executable& x, cudaStream_t s, uint32_t n, int hops, int count_every, int launches) {
  std::vector<uint32_t> a = random_u32(n), b = random_u32(n);
  write(x, "a", a);
  write(x, "b", b);
  write(x, "count", std::vector<uint32_t>{0});
  for (int l = 0; l < launches; ++l) {
    ORCH_REQUIRE_OK(x.launch(s));
    for (int k = 0; k < hops; ++k) {
      if (k % 2 == 0) mixc_cpu(n, k + 1, a, b);
      else mixc_cpu(n, k + 1, b, a);
    }
  }
  CUDA_REQUIRE(cudaStreamSynchronize(s));
  same(read<uint32_t>(x, "a", n), a, "a");
  same(read<uint32_t>(x, "b", n), b, "b");
  CHECK(read<uint32_t>(x, "count", 1)[0] == uint32_t(launches * (hops / count_every)));
  ORCH_CHECK_OK(x.device_status());
}

}  // namespace

TEST_SUITE("gpu") {

TEST_CASE("orchc's programmatic edges: 64 dependent user kernels that wait only through orchc's patch, exact "
          "over thousands of launches") {
  constexpr int kHops = 64;
  const std::string source = hops_source("hops", kHops, 16);  // generated kernels in the chain too
  const int launches = short_run() ? 20 : 3000;
  for (const char* options : {"", "--no-pdl"}) {
    CAPTURE(options);
    Shape shape;
    auto p = compile_and_load(std::string("hops") + (*options ? "_plain" : ""), source, options, &shape);
    // Every kernel -> kernel edge is programmatic by default (the 63 between hops, the 3 between
    // the updates of `count`), none with --no-pdl.
    CHECK(shape.programmatic == (*options ? 0u : size_t(kHops - 1 + 3)));
    Stream s;
    auto x = instantiate(*p, orch::Bindings(), s);
    run_hops(*x, s, 3001, kHops, 16, launches);
  }
}

// orchc makes an edge programmatic where both launches fit in one wave at the params' defaults;
// the runtime keeps it only where they still do with the bound params on this GPU (the
// driver's occupancy times its SMs), and makes the rest full edges: as exact either way.
TEST_CASE("programmatic edges: kept where both launches fit in one wave with the bound params, full otherwise") {
  constexpr int kHops = 16;
  // `count += 1` every 8 hops: one-block generated kernels, always one wave.
  const std::string source = hops_source("waves", kHops, 8);
  Shape shape;
  auto p = compile_and_load("waves", source, "", &shape);
  // 15 edges between hops, 1 between the two updates of `count`.
  REQUIRE(shape.programmatic == size_t(kHops - 1 + 1));
  int sms = 0;
  CUDA_REQUIRE(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  // 3001 elements: 24 blocks, one wave on any GPU; 2^24: 131072 blocks of 128 threads, more than
  // any GPU holds at once (16 blocks of 128 threads per SM at most).
  for (const uint32_t n : {3001u, 1u << 24}) {
    CAPTURE(n);
    Stream s;
    auto x = instantiate(*p, orch::Bindings().param("n", n), s);
    const orch::Executable::Stats st = x->stats();
    MESSAGE("n = ", n, " on ", sms, " SMs: ", st.programmatic_edges, " programmatic edges in the artifact, ",
            st.programmatic_edges_made_full, " made full");
    CHECK(st.programmatic_edges == shape.programmatic);
    CHECK(st.programmatic_edges_made_full == (n == 3001u ? 0u : size_t(kHops - 1)));
    run_hops(*x, s, n, kHops, 8, n == 3001u ? 50 : 2);
  }
}

TEST_CASE("unrolled loops: every trip count around the copies per iteration gives the CPU's buffers, for several U "
          "and without unrolling") {
  const std::string source = std::string(
                                 "pipeline unrolled\ntarget sm_90\nparam n: u32 = 2053\nparam iters: i32 = 5\n"
                                 "buffer a: u32[n]\nbuffer b: u32[n]\nbuffer e: u32[n]\nbuffer t: u32[40]\n"
                                 "buffer c: i32\nbuffer d: i32\n") +
                             kMixc +
                             "graph main {\n"
                             "  c = iters\n"
                             "  d = 0\n"
                             "  while c > 0 {\n"
                             "    mixc<<<ceil_div(n, 256), 256>>>(n, c, a, b)\n"
                             // Blocks of 100 and 45 threads: the guards' warp reconvergence on
                             // a partial last warp.
                             "    mixc<<<ceil_div(n, 100), 100>>>(n, c, b, a)\n"
                             "    d += c * 3\n"
                             "    fill t = 7\n"
                             "    step<<<1, 45>>>(c)\n"
                             "    copy a -> e\n"
                             "  }\n"
                             "}\n";
  struct Config {
    const char* options;
    size_t unrolled;
  };
  const Config configs[] = {{"", 1}, {"--unroll 3", 1}, {"--unroll 16", 1}, {"--no-pdl --unroll 1", 0}, {"--no-pdl", 1}};
  std::vector<int32_t> counts = {0, 1, 2, 3, 4, 7, 8, 9, 15, 16, 17, 1000};
  if (short_run()) counts = {0, 1, 2, 3, 4, 7, 8, 9};
  const uint32_t n = 2053;
  int config = 0;
  for (const Config& cfg : configs) {
    CAPTURE(cfg.options);
    Shape shape;
    auto p = compile_and_load("unrolled" + std::to_string(config++), source, cfg.options, &shape);
    CHECK(shape.unrolled == cfg.unrolled);
    Stream s;
    auto x = instantiate(*p, orch::Bindings(), s);
    for (int32_t iters : counts) {
      CAPTURE(iters);
      ORCH_REQUIRE_OK(x->set_param("iters", iters));
      std::vector<uint32_t> a = random_u32(n), b = random_u32(n), e = random_u32(n), t = random_u32(40);
      write(*x, "a", a);
      write(*x, "b", b);
      write(*x, "e", e);
      write(*x, "t", t);
      int32_t d = 0;
      // Twice: the second launch finds the slots as the first left them.
      for (int launch = 0; launch < 2; ++launch) {
        run(*x, s);
        d = 0;
        for (int32_t c = iters; c > 0; --c) {
          mixc_cpu(n, c, a, b);
          mixc_cpu(n, c, b, a);
          d += c * 3;
          std::fill(t.begin(), t.end(), 7u);
          e = a;
        }
      }
      same(read<uint32_t>(*x, "a", n), a, "a");
      same(read<uint32_t>(*x, "b", n), b, "b");
      same(read<uint32_t>(*x, "e", n), e, "e");
      same(read<uint32_t>(*x, "t", 40), t, "t");
      CHECK(read<int32_t>(*x, "c", 1)[0] == std::min(iters, 0));
      CHECK(read<int32_t>(*x, "d", 1)[0] == d);
      ORCH_CHECK_OK(x->device_status());
    }
  }
}

// The compiler's own choice for a body of one kernel is 16 copies (lowering::auto_unroll): the
// benchmark's loop, with a kernel that also mixes data with the counter, so a copy that runs when
// it should not (or does not when it should) changes the buffer.
TEST_CASE("unrolled loops: a one-kernel body gets 16 copies, exact for every trip count around 16") {
  const std::string source =
      "pipeline one_node\ntarget sm_90\nparam iters: i32 = 5\nbuffer a: u32[256]\nbuffer c: i32\n"
      "kernel stir(c: inout i32, a: inout u32[]) source \"\"\"\n"
      "extern \"C\" __global__ void stir(int* c, unsigned* a) {\n"
      "  const unsigned k = (unsigned)*c;\n"
      "  a[threadIdx.x] = a[threadIdx.x] * 2654435761u + k * 40503u + threadIdx.x;\n"
      "  __syncthreads();\n"
      "  if (threadIdx.x == 0) *c = (int)k - 1;\n"
      "}\n\"\"\"\n"
      "graph main {\n  c = iters\n  while c > 0 {\n    stir<<<1, 256>>>(c, a)\n  }\n}\n";
  const char* const options[] = {"", "--no-pdl --unroll 1"};
  std::vector<int32_t> counts = {0, 1, 2, 15, 16, 17, 31, 32, 33, 1000};
  if (short_run()) counts = {0, 1, 15, 16, 17};
  for (const char* o : options) {
    CAPTURE(o);
    Shape shape;
    auto p = compile_and_load(std::string("one_node") + (*o ? "_plain" : ""), source, o, &shape);
    const bool unrolled = *o == 0;
    CHECK(shape.unrolled == (unrolled ? 1u : 0u));
    CHECK(shape.widest_body == (unrolled ? 17u : 2u));  // 16 copies and the condition kernel
    Stream s;
    auto x = instantiate(*p, orch::Bindings(), s);
    for (int32_t iters : counts) {
      CAPTURE(iters);
      ORCH_REQUIRE_OK(x->set_param("iters", iters));
      std::vector<uint32_t> a = random_u32(256);
      write(*x, "a", a);
      run(*x, s);
      for (int32_t c = iters; c > 0; --c)
        for (uint32_t i = 0; i < 256; ++i) a[i] = a[i] * 2654435761u + static_cast<uint32_t>(c) * 40503u + i;
      same(read<uint32_t>(*x, "a", 256), a, "a");
      CHECK(read<int32_t>(*x, "c", 1)[0] == std::min(iters, 0));
      ORCH_CHECK_OK(x->device_status());
    }
  }
}

TEST_CASE("unrolled loops: a loop inside a loop starts each time with fresh guard slots") {
  const std::string source = std::string(
                                 "pipeline nested\ntarget sm_90\nparam n: u32 = 777\nparam outer: i32 = 3\n"
                                 "param inner: i32 = 5\nbuffer a: u32[n]\nbuffer b: u32[n]\nbuffer c: i32\n"
                                 "buffer k: i32\nbuffer d: i32\n") +
                             kMixc +
                             "graph main {\n"
                             "  c = outer\n"
                             "  d = 0\n"
                             "  while c > 0 {\n"
                             "    k = inner + c\n"
                             "    while k > 0 {\n"
                             "      mixc<<<ceil_div(n, 128), 128>>>(n, k, a, b)\n"
                             "      mixc<<<ceil_div(n, 128), 128>>>(n, c, b, a)\n"
                             "      step<<<1, 32>>>(k)\n"
                             "    }\n"
                             "    d += 1\n"
                             "    step<<<1, 32>>>(c)\n"
                             "  }\n"
                             "}\n";
  const uint32_t n = 777;
  int config = 0;
  for (const char* options : {"", "--unroll 4", "--no-pdl --unroll 1"}) {
    CAPTURE(options);
    Shape shape;
    auto p = compile_and_load("nested" + std::to_string(config++), source, options, &shape);
    CHECK(shape.unrolled == (std::string(options).find("--unroll 1") == std::string::npos ? 1u : 0u));
    Stream s;
    auto x = instantiate(*p, orch::Bindings(), s);
    for (auto [outer, inner] : {std::pair<int32_t, int32_t>{3, 5}, {4, 0}, {2, 11}, {0, 3}}) {
      CAPTURE(outer);
      CAPTURE(inner);
      ORCH_REQUIRE_OK(x->set_param("outer", outer));
      ORCH_REQUIRE_OK(x->set_param("inner", inner));
      std::vector<uint32_t> a = random_u32(n), b = random_u32(n);
      write(*x, "a", a);
      write(*x, "b", b);
      run(*x, s);
      int32_t d = 0;
      for (int32_t c = outer; c > 0; --c) {
        for (int32_t k = inner + c; k > 0; --k) {
          mixc_cpu(n, k, a, b);
          mixc_cpu(n, c, b, a);
        }
        ++d;
      }
      same(read<uint32_t>(*x, "a", n), a, "a");
      same(read<uint32_t>(*x, "b", n), b, "b");
      CHECK(read<int32_t>(*x, "d", 1)[0] == d);
      ORCH_CHECK_OK(x->device_status());
    }
  }
}

TEST_CASE("unrolled loops: a condition that cannot be evaluated in a copy is reported at the loop, which ends") {
  const std::string source = std::string("pipeline guard_error\ntarget sm_90\nparam start: i32 = 3\nbuffer c: i32\n") +
                             kMixc +
                             "graph main {\n"
                             "  c = start\n"
                             "  while 100 / c > 1 {\n"
                             "    step<<<1, 32>>>(c)\n"
                             "  }\n"
                             "}\n";
  const std::string before = source.substr(0, source.find("  while"));
  const std::string line_column = ".orch:" + std::to_string(std::count(before.begin(), before.end(), '\n') + 1) + ":3";
  int config = 0;
  for (const char* options : {"", "--unroll 1"}) {
    CAPTURE(options);
    const std::string name = "guard_error" + std::to_string(config++);
    const std::string where = name + line_column;
    auto p = compile_and_load(name, source, options, nullptr);
    Stream s;
    auto x = instantiate(*p, orch::Bindings(), s);
    // c: 3 -> 2 -> 1 -> 0, where 100 / c divides by zero: false, and reported.
    run(*x, s);
    CHECK(read<int32_t>(*x, "c", 1)[0] == 0);
    auto st = x->device_status();
    REQUIRE_FALSE(st.ok());
    INFO(st.error().to_string());
    CHECK(st.error().code() == orch::ErrorCode::DeviceError);
    CHECK(st.error().message().find("the expression could not be evaluated on the GPU: division by zero") != std::string::npos);
    CHECK(st.error().where().find(where) != std::string::npos);
    ORCH_REQUIRE_OK(x->clear_device_status());
    // A start the condition holds for all the way: no error.
    ORCH_REQUIRE_OK(x->set_param("start", int32_t{-5}));
    run(*x, s);
    CHECK(read<int32_t>(*x, "c", 1)[0] == -5);  // 100 / -5 > 1 is false at once
    ORCH_CHECK_OK(x->device_status());
  }
}

// Kernels of one source file share its device state (__device__, __constant__ and __managed__
// objects) however orchc lowers them: a programmatic edge into `take` (patched to wait) and the
// guarded copies of an unrolled loop are entries of the file's one module, not modules of their
// own with their own `total` (issue 20: a counter ended at 1000 where 1400 was right).
TEST_CASE("module state: kernels of one file share its __device__ variables with and without the speed passes") {
  const std::string cu = temp_dir() + "/shared_state.cu";
  std::ofstream(cu) << R"(__device__ unsigned long long total;  // zero when the module loads
__constant__ unsigned scale = 3;
extern "C" __global__ void add(unsigned n, const unsigned* x, unsigned* order) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&total, (unsigned long long)x[i] * scale);
  if (i == 0) ++*order;
}
extern "C" __global__ void take(unsigned long long* out, unsigned* order) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    *out += total;
    total = 0;
    ++*order;
  }
}
)";
  const std::string source =
      "pipeline shared_state\ntarget sm_90\nparam n: u32 = 5003\nparam iters: i32 = 5\n"
      "buffer x: u32[n]\nbuffer y: u32[n]\nbuffer out: u64\nbuffer loop_out: u64\nbuffer c: i32\n"
      // `order` is what orch sees of the kernels' shared state: each writes it, so they run in
      // program order (the device variable itself is invisible to the DAG).
      "buffer order: u32\n"
      "kernel add(n: u32, x: in u32[], order: inout u32) from \"shared_state.cu\"\n"
      "kernel take(out: inout u64, order: inout u32) from \"shared_state.cu\"\n"
      "graph main {\n"
      "  add<<<ceil_div(n, 256), 256>>>(n, x, order)\n"
      "  take<<<1, 32>>>(out, order)\n"
      "  add<<<ceil_div(n, 128), 128>>>(n, y, order)\n"
      "  take<<<1, 32>>>(out, order)\n"
      "  c = iters\n"
      "  while c > 0 {\n"
      "    add<<<ceil_div(n, 256), 256>>>(n, x, order)\n"
      "    take<<<1, 32>>>(loop_out, order)\n"
      "    c -= 1\n"
      "  }\n"
      "}\n";
  const uint32_t n = 5003;
  int config = 0;
  for (const std::string options : {"", "--no-pdl --unroll 1", "--unroll 4", "--no-pdl"}) {
    CAPTURE(options);
    Shape shape;
    auto p = compile_and_load("shared_state" + std::to_string(config++), source, options.c_str(), &shape);
    if (options.empty()) {
      CHECK(shape.programmatic > 0);
      CHECK(shape.unrolled == 1);
    }
    Stream s;
    auto x = instantiate(*p, orch::Bindings(), s);
    uint64_t out = 0, loop_out = 0;
    write(*x, "out", std::vector<uint64_t>{0});
    write(*x, "loop_out", std::vector<uint64_t>{0});
    for (int32_t iters : {0, 1, 3, 4, 5, 17}) {
      CAPTURE(iters);
      ORCH_REQUIRE_OK(x->set_param("iters", iters));
      const std::vector<uint32_t> xs = random_u32(n), ys = random_u32(n);
      write(*x, "x", xs);
      write(*x, "y", ys);
      run(*x, s);
      uint64_t sx = 0, sy = 0;
      for (uint32_t i = 0; i < n; ++i) sx += uint64_t{xs[i]} * 3, sy += uint64_t{ys[i]} * 3;
      out += sx + sy;
      loop_out += sx * static_cast<uint64_t>(iters);
      CHECK(read<uint64_t>(*x, "out", 1)[0] == out);
      CHECK(read<uint64_t>(*x, "loop_out", 1)[0] == loop_out);
      ORCH_CHECK_OK(x->device_status());
    }
  }
}

// Loops decided on scalars of every width (u8, i64, f32, bool, u64, and an f32 param the guards
// must take as bits, not as a number) whose bodies update f16 and bf16 scalars: exact with and
// without the speed passes (issue 20: the plain build failed with an unspecified launch failure).
// Every value is exact in its type, so the CPU's arithmetic in float is the GPU's.
// Eight `while` loops over device scalars of every width, with f16/bf16 bodies; the loops the
// DAG leaves free of each other run one after another (lowering/one_loop_at_a_time.cpp).
const char* const kScalarLoops = R"(pipeline condtypes
target sm_90
param start8: u8 = 5
param limit: f32 = 10.0
buffer c8: u8
buffer c64: i64
buffer cf: f32
buffer go: bool
buffer cu: u64
buffer k: i32
buffer steps: i32
buffer h: f16
buffer b: bf16
buffer c16: i16
buffer hv: f16[3]
buffer d: f64
graph main {
  c8 = start8
  h = 0
  b = 0
  while c8 > 0 {
    h += 1.5
    b += 2.0
    c8 -= 1
  }
  c64 = 7
  while c64 > 0 {
    h += 0.5
    c64 -= 1
  }
  cf = 2.5
  while cf > 0.0 {
    b += 0.5
    cf -= 0.5
  }
  go = true
  k = 0
  while go {
    h += 0.25
    k += 1
    go = k < 3
  }
  cu = 5000000003
  while cu > 5000000000 {
    b += 1.0
    cu -= 1
  }
  cf = 0.0
  steps = 0
  while cf < limit {
    cf += 0.5
    steps += 1
  }
  c16 = 4
  while c16 > 0 {
    fill hv = 0.5
    if c16 == 2 {
      b += 0.25
    }
    c16 -= 1
  }
  d = 1.5
  while d > 0.0 {
    h += 0.125
    d -= 0.5
  }
}
)";

// The bits of an f16 or bf16 that holds `x` exactly (normal or zero).
uint16_t f16_bits(float x) {
  if (x == 0.0f) return 0;
  int e = 0;
  const float m = std::frexp(x, &e);  // x = m * 2^e, m in [0.5, 1)
  return static_cast<uint16_t>(((e - 1 + 15) << 10) | static_cast<int>((m * 2.0f - 1.0f) * 1024.0f));
}
uint16_t bf16_bits(float x) {
  uint32_t u = 0;
  std::memcpy(&u, &x, 4);
  return static_cast<uint16_t>(u >> 16);
}

// What one launch of kScalarLoops leaves, from start8 = `start` and limit = `limit`.
void check_scalar_loops(const orch::Executable& x, uint8_t start, float limit) {
  const float h = 1.5f * start + 0.5f * 7 + 0.25f * 3 + 0.125f * 3;
  const float b = 2.0f * start + 0.5f * 5 + 1.0f * 3 + 0.25f;
  CHECK(read<uint16_t>(x, "h", 1)[0] == f16_bits(h));
  CHECK(read<uint16_t>(x, "b", 1)[0] == bf16_bits(b));
  CHECK(read<uint8_t>(x, "c8", 1)[0] == 0);
  CHECK(read<int64_t>(x, "c64", 1)[0] == 0);
  CHECK(read<uint8_t>(x, "go", 1)[0] == 0);
  CHECK(read<int32_t>(x, "k", 1)[0] == 3);
  CHECK(read<uint64_t>(x, "cu", 1)[0] == 5000000000ull);
  CHECK(read<int32_t>(x, "steps", 1)[0] == static_cast<int32_t>(std::ceil(limit / 0.5f)));
  CHECK(read<int16_t>(x, "c16", 1)[0] == 0);
  CHECK(read<uint16_t>(x, "hv", 3) == std::vector<uint16_t>(3, f16_bits(0.5f)));
  CHECK(read<double>(x, "d", 1)[0] == 0.0);
  ORCH_CHECK_OK(x.device_status());
}

TEST_CASE("scalar loops: conditions of every width and f16/bf16 bodies, exact with and without the speed passes") {
  int config = 0;
  for (const std::string options : {"", "--no-pdl --unroll 1", "--unroll 3", "--no-pdl", "--unroll 1"}) {
    CAPTURE(options);
    auto p = compile_and_load("condtypes" + std::to_string(config++), kScalarLoops, options.c_str(), nullptr);
    Stream s;
    auto x = instantiate(*p, orch::Bindings(), s);
    for (uint8_t start : {uint8_t{0}, uint8_t{1}, uint8_t{5}, uint8_t{17}}) {
      for (float limit : {0.0f, 2.5f, 10.0f}) {
        CAPTURE(int(start));
        CAPTURE(limit);
        ORCH_REQUIRE_OK(x->set_param("start8", start));
        ORCH_REQUIRE_OK(x->set_param("limit", limit));
        run(*x, s);
        check_scalar_loops(*x, start, limit);
      }
    }
  }
}

// Before lowering/one_loop_at_a_time.cpp and rt::launch_after_other_loops, the loops kScalarLoops
// leaves free of each other faulted the GPU every few hundred launches (H200, driver 580.159.04)
// and a few thousand launches in a row crashed cuGraphLaunch on the host; so did two graphs with
// one WHILE loop each on two streams. Without unrolling, each WHILE runs its body many times.
TEST_CASE("scalar loops: thousands of launches in a row, and two executables on two streams") {
  auto p = compile_and_load("condtypes_many", kScalarLoops, "--unroll 1", nullptr);
  Stream s1, s2;
  auto x1 = instantiate(*p, orch::Bindings(), s1);
  auto x2 = instantiate(*p, orch::Bindings(), s2);
  for (int i = 0; i < 3000; ++i) ORCH_REQUIRE_OK(x1->launch(s1));
  CUDA_REQUIRE(cudaStreamSynchronize(s1));
  check_scalar_loops(*x1, 5, 10.0f);
  for (int i = 0; i < 1000; ++i) {
    ORCH_REQUIRE_OK(x1->launch(s1));
    ORCH_REQUIRE_OK(x2->launch(s2));
  }
  CUDA_REQUIRE(cudaStreamSynchronize(s1));
  CUDA_REQUIRE(cudaStreamSynchronize(s2));
  CUDA_REQUIRE(cudaGetLastError());
  check_scalar_loops(*x1, 5, 10.0f);
  check_scalar_loops(*x2, 5, 10.0f);

  // With a second GPU: an executable of device 1 launched while device 0 is current, beside one
  // of device 0 (the runtime orders launches per the stream's device, whichever is current).
  int devices = 0;
  CUDA_REQUIRE(cudaGetDeviceCount(&devices));
  if (devices < 2) {
    MESSAGE("one GPU: the launches from a process that drives two GPUs are not checked");
    return;
  }
  CUDA_REQUIRE(cudaSetDevice(1));
  cudaStream_t s3 = nullptr;
  CUDA_REQUIRE(cudaStreamCreateWithFlags(&s3, cudaStreamNonBlocking));
  auto p1 = compile_and_load("condtypes_many", kScalarLoops, "--unroll 1", nullptr);  // loaded on device 1
  auto x3 = instantiate(*p1, orch::Bindings(), s3);
  CUDA_REQUIRE(cudaSetDevice(0));
  for (int i = 0; i < 200; ++i) {
    ORCH_REQUIRE_OK(x3->launch(s3));
    ORCH_REQUIRE_OK(x1->launch(s1));
  }
  CUDA_REQUIRE(cudaStreamSynchronize(s3));
  CUDA_REQUIRE(cudaStreamSynchronize(s1));
  check_scalar_loops(*x1, 5, 10.0f);
  CUDA_REQUIRE(cudaSetDevice(1));
  check_scalar_loops(*x3, 5, 10.0f);
  x3.reset();
  p1.reset();
  CUDA_REQUIRE(cudaStreamDestroy(s3));
  CUDA_REQUIRE(cudaSetDevice(0));
}

}  // TEST_SUITE("gpu")

TEST_SUITE("gpu") {

// What the compiled-kernel rules (E0204, E0206, E0207: lowering/check_compiled_kernels.cpp) allow
// runs, exactly at each limit: a kernel of ~170 registers per thread in blocks of the most threads
// orchc's bind check lets through (found by binding: it must be under 1024, the registers bound
// it), 48000 bytes of static shared memory with 232448 - 48000 dynamic bytes, and a
// __cluster_dims__(2, 1, 1) kernel in a grid of whole clusters. One step past each limit the
// binding is refused with the rule's code, before the driver sees it.
TEST_CASE("compiled launch limits: launches at each limit run exactly; past it the binding is refused") {
  const std::string source = R"(pipeline limits
target sm_90
param n: u32 = 4096
param threads: u32 = 128
param dynamic: u64 = 184448
param clusters: u32 = 16
buffer a: u32[n * 160]
buffer s: u32[n]
buffer x: u32[n]
buffer y: u32[n]
buffer z: u32[n]
kernel heavy(n: u32, a: in u32[], s: out u32[]) source """
extern "C" __global__ void heavy(unsigned n, const unsigned* a, unsigned* s) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned v[160];
#pragma unroll
  for (int j = 0; j < 160; ++j) v[j] = a[j * n + i];
  unsigned t = 0;
#pragma unroll
  for (int k = 0; k < 4; ++k)
#pragma unroll
    for (int j = 0; j < 160; ++j) t += v[j] * v[(j * 7 + k) % 160];
  s[i] = t;
}
"""
kernel roll(n: u32, x: in u32[], y: out u32[]) source """
extern "C" __global__ void roll(unsigned n, const unsigned* x, unsigned* y) {
  __shared__ unsigned t[12000];
  extern __shared__ unsigned more[];
  const unsigned dyn = 184448 / 4;
  for (unsigned j = threadIdx.x; j < 12000; j += blockDim.x) t[j] = x[(blockIdx.x * 12000u + j) % n];
  for (unsigned j = threadIdx.x; j < dyn; j += blockDim.x) more[j] = x[(blockIdx.x * 7u + j) % n] ^ j;
  __syncthreads();
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = t[(i * 31u) % 12000] + more[(i * 17u) % dyn];
}
"""
kernel pairs(n: u32, y: in u32[], z: out u32[]) source """
extern "C" __global__ void __cluster_dims__(2, 1, 1) pairs(unsigned n, const unsigned* y, unsigned* z) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) z[i] = y[i] * 3u + blockIdx.x % 2;
}
"""
graph main {
  heavy<<<ceil_div(n, threads), threads>>>(n, a, s)
  roll<<<ceil_div(n, 256), 256, dynamic>>>(n, x, y)
  pairs<<<clusters, ceil_div(n, clusters)>>>(n, y, z)
}
)";
  const uint32_t n = 4096;
  int config = 0;
  for (const std::string options : {"", "--no-pdl --unroll 1"}) {
    CAPTURE(options);
    auto p = compile_and_load("limits" + std::to_string(config++), source, options.c_str(), nullptr);
    Stream st;
    // The most threads the bind check lets through.
    uint32_t most = 0;
    for (uint32_t t = 1024; t >= 32 && most == 0; t -= 32) {
      orch::Bindings b;
      b.set_param("threads", orch::ScalarValue::of(t));
      auto x = p->instantiate(b, st);
      if (x.ok()) {
        most = t;
      } else {
        INFO(x.error().to_string());
        CHECK(x.error().message().rfind("E0206", 0) == 0);
      }
    }
    INFO("most threads: ", most);
    REQUIRE(most > 0);
    CHECK(most < 1024);  // the registers bound it
    orch::Bindings b;
    b.set_param("threads", orch::ScalarValue::of(most));
    auto x = instantiate(*p, b, st);
    std::vector<uint32_t> a = random_u32(size_t{n} * 160);
    const std::vector<uint32_t> xs = random_u32(n);
    write(*x, "a", a);
    write(*x, "x", xs);
    run(*x, st);
    ORCH_CHECK_OK(x->device_status());
    std::vector<uint32_t> want_s(n), want_y(n), want_z(n);
    for (uint32_t i = 0; i < n; ++i) {
      uint32_t t = 0;
      for (int k = 0; k < 4; ++k)
        for (int j = 0; j < 160; ++j) t += a[size_t(j) * n + i] * a[size_t((j * 7 + k) % 160) * n + i];
      want_s[i] = t;
    }
    same(read<uint32_t>(*x, "s", n), want_s, "the most threads the registers allow");
    const uint32_t dyn = 184448 / 4;
    for (uint32_t i = 0; i < n; ++i) {
      const uint32_t blk = i / 256, j = (i * 17u) % dyn;
      want_y[i] = xs[(blk * 12000u + (i * 31u) % 12000) % n] + (xs[(blk * 7u + j) % n] ^ j);
      want_z[i] = want_y[i] * 3u + (i / 256) % 2;  // 16 blocks of 256 threads
    }
    same(read<uint32_t>(*x, "y", n), want_y, "static + dynamic shared memory at the limit");
    same(read<uint32_t>(*x, "z", n), want_z, "whole clusters");
    auto refused = [&](const char* param, orch::ScalarValue v, const char* code) {
      CAPTURE(param);
      orch::Bindings bad_bindings;
      bad_bindings.set_param(param, v);
      auto bad = p->instantiate(bad_bindings, st);
      REQUIRE_FALSE(bad.ok());
      INFO(bad.error().to_string());
      CHECK(bad.error().message().rfind(code, 0) == 0);
    };
    refused("threads", orch::ScalarValue::of(most + 32), "E0206");
    refused("dynamic", orch::ScalarValue::of(uint64_t{184452}), "E0204");
    refused("clusters", orch::ScalarValue::of(uint32_t{15}), "E0207");
  }
}

}  // TEST_SUITE("gpu")
