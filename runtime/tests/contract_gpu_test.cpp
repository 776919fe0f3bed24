// The runtime's contract on a GPU (test suite "gpu"): bound sizes checked against the driver's
// allocation ranges for every kind of memory, `host` buffers that need host memory, overlapping
// buffers, the JIT log of broken PTX, the application's own stream capture, the C API's handles
// on live objects, destroying an executable mid-launch, and, in a child process (a fault loses
// the CUDA context of the whole process), what every call says after a kernel faults. Results
// are compared with CPU references on fresh random inputs. Cases named "(CUDA API errors on
// purpose)" make CUDA calls fail (a size the driver refuses, PTX that does not compile), so
// scripts/gpu-check runs them under memcheck with API error reports off.
#include <doctest/doctest.h>

#include <cuda.h>
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
#include <random>
#include <sstream>
#include <vector>

#include "artifact/artifact.h"
#include "artifact/sample_pipeline.h"
#include "orch/orch.h"
#include "orch/ranks.h"
#include "orch/runtime.h"
#include "runtime/src/internal.h"
#include "runtime/tests/gpu_util.h"
#include "runtime/tests/test_util.h"

using namespace orch::test;

namespace {

// y = a * x + y on device buffers the application binds.
const char* kDeviceSaxpy = R"(pipeline dsaxpy
target sm_90
param n: u32 = 1024
param a: f32 = 2.0
buffer x: f32[n]
buffer y: f32[n]
kernel saxpy(n: u32, a: f32, x: in f32[], y: inout f32[]) source """
extern "C" __global__ void saxpy(unsigned n, float a, const float* x, float* y) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
"""
graph main {
  saxpy<<<ceil_div(n, 256), 256>>>(n, a, x, y)
}
)";

// A kernel that faults on purpose: mode 1 stores to an address no allocation holds, mode 2
// traps; mode 0 scales x.
const char* kFault = R"(pipeline fault
target sm_90
param n: u32 = 256
param a: f32 = 2.0
param mode: u32 = 0
buffer x: f32[n]
kernel work(n: u32, a: f32, mode: u32, x: inout f32[]) source """
extern "C" __global__ void work(unsigned n, float a, unsigned mode, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (mode == 1 && i == 0) *(volatile float*)(16) = 1.0f;
  if (mode == 2 && i == 0) __trap();
  if (i < n) x[i] *= a;
}
"""
graph main {
  work<<<ceil_div(n, 256), 256>>>(n, a, mode, x)
}
)";

enum class Mem { Device, Managed, Pinned };
struct Memory {
  void* p = nullptr;
  Mem kind;
  Memory(Mem k, size_t bytes) : kind(k) {
    if (k == Mem::Device) CUDA_REQUIRE(cudaMalloc(&p, bytes));
    if (k == Mem::Managed) CUDA_REQUIRE(cudaMallocManaged(&p, bytes));
    if (k == Mem::Pinned) CUDA_REQUIRE(cudaHostAlloc(&p, bytes, cudaHostAllocMapped));
  }
  ~Memory() {
    if (!p) return;
    if (kind == Mem::Pinned) cudaFreeHost(p);
    else cudaFree(p);
  }
  char* c() const { return static_cast<char*>(p); }
};

std::string compile(const std::string& name, const char* source) {
  std::string log;
  std::string path = orch::test::compile_source(name, source, &log);
  INFO(log);
  REQUIRE(!path.empty());
  return path;
}

std::unique_ptr<orch::Pipeline> load(const std::string& path) {
  auto p = orch::Pipeline::load(path);
  ORCH_REQUIRE_OK(p);
  return std::move(p.value());
}

void upload(void* dst, const std::vector<float>& v) {
  CUDA_REQUIRE(cudaMemcpy(dst, v.data(), v.size() * 4, cudaMemcpyDefault));
  CUDA_REQUIRE(cudaDeviceSynchronize());
}

std::vector<float> download(const void* src, size_t n) {
  std::vector<float> v(n);
  CUDA_REQUIRE(cudaMemcpy(v.data(), src, n * 4, cudaMemcpyDefault));
  return v;
}

void check_saxpy(orch::Executable& x, cudaStream_t s, void* xp, void* yp, size_t n, float a, const char* what) {
  auto xs = random_floats(n), ys = random_floats(n);
  upload(xp, xs);
  upload(yp, ys);
  run(x, s);
  auto got = download(yp, n);
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i)
    if (std::fabs(got[i] - (a * xs[i] + ys[i])) > 1e-6f * std::max(1.0f, std::fabs(a * xs[i] + ys[i]))) ++bad;
  INFO(what, ": ", bad, " of ", n, " differ");
  CHECK(bad == 0);
}

void expect_too_large(const orch::Error& e, const std::string& buffer, size_t bytes) {
  INFO(e.to_string());
  CHECK(e.code() == orch::ErrorCode::InvalidArgument);
  CHECK(e.message().find("buffer '" + buffer + "' is bound to " + std::to_string(bytes) + " bytes at 0x") == 0);
  CHECK(e.message().find("(bind the size of the memory you have)") != std::string::npos);
  CHECK(!e.where().empty());
}

}  // namespace

TEST_SUITE("gpu") {

TEST_CASE("a bound size past the end of its allocation is refused: device, offset, managed, async (CUDA API errors on purpose)") {
  auto p = load(compile("dsaxpy", kDeviceSaxpy));
  Stream s;
  const uint32_t n = 1024;  // 4 KiB per buffer
  Memory dx(Mem::Device, 4096), dy(Mem::Device, 4096);
  orch::Bindings b;
  b.param("n", n).param("a", 3.0f).buffer("x", dx.p, 4096).buffer("y", dy.p, 4096);
  auto x = instantiate(*p, b, s);
  check_saxpy(*x, s, dx.p, dy.p, n, 3.0f, "bound exactly");

  // The issue's case: 4 KiB bound as 64 MiB.
  orch::Bindings lie = b;
  lie.buffer("y", dy.p, 64 << 20);
  auto r = p->instantiate(lie, s);
  REQUIRE_FALSE(r.ok());
  expect_too_large(r.error(), "y", 64 << 20);
  MESSAGE(r.error().to_string());
  // rebind checks the same, and a refused rebind changes nothing.
  expect_too_large(x->rebind("y", dy.p, 64 << 20).error(), "y", 64 << 20);
  CHECK(x->buffer("y") == dy.p);
  check_saxpy(*x, s, dx.p, dy.p, n, 3.0f, "after the refused rebind");

  // An address inside an allocation: what fits from there is accepted, a byte more is not.
  const size_t two_mib = 2 << 20;
  Memory big(Mem::Device, two_mib);
  orch::Bindings inside = b;
  inside.buffer("x", big.c() + two_mib - 4096, 4096);
  auto x2 = instantiate(*p, inside, s);
  check_saxpy(*x2, s, big.c() + two_mib - 4096, dy.p, n, 3.0f, "x at the last 4 KiB of 2 MiB");
  inside.buffer("x", big.c() + two_mib - 4096, 8192);
  r = p->instantiate(inside, s);
  REQUIRE_FALSE(r.ok());
  expect_too_large(r.error(), "x", 8192);

  // Managed memory: the same rule.
  Memory mx(Mem::Managed, two_mib);
  orch::Bindings managed = b;
  managed.buffer("x", mx.p, two_mib);
  auto x3 = instantiate(*p, managed, s);
  check_saxpy(*x3, s, mx.p, dy.p, n, 3.0f, "x in managed memory");
  managed.buffer("x", mx.p, 64 << 20);
  r = p->instantiate(managed, s);
  REQUIRE_FALSE(r.ok());
  expect_too_large(r.error(), "x", 64 << 20);

  // Stream-ordered allocations are accepted at their size (what a pool maps around them may
  // let a larger size through: the driver reports the pool's mapping; reported, not required).
  void* async = nullptr;
  CUDA_REQUIRE(cudaMallocAsync(&async, 4096, s));
  CUDA_REQUIRE(cudaStreamSynchronize(s));
  orch::Bindings pooled = b;
  pooled.buffer("x", async, 4096);
  auto x4 = instantiate(*p, pooled, s);
  check_saxpy(*x4, s, async, dy.p, n, 3.0f, "x from cudaMallocAsync");
  pooled.buffer("x", async, 64 << 20);
  r = p->instantiate(pooled, s);
  MESSAGE("cudaMallocAsync's 4 KiB bound as 64 MiB: ", r.ok() ? std::string("accepted") : r.error().to_string());
  x4.reset();
  CUDA_REQUIRE(cudaFreeAsync(async, s));
  CUDA_REQUIRE(cudaStreamSynchronize(s));
}

TEST_CASE("pinned and registered host memory: bound sizes checked; host buffers need host memory (CUDA API errors on purpose)") {
  std::string log;
  const std::string staged = orch::test::compile_example("saxpy", &log);  // x_host, y_host are `host`
  INFO(log);
  REQUIRE(!staged.empty());
  auto p = load(staged);
  Stream s;
  const uint32_t n = 16384;  // 64 KiB per buffer
  const size_t bytes = n * 4;
  orch::Bindings b;
  b.param("n", n).param("a", -2.0f);

  // Pinned, mapped: bound exactly it runs (the CPU fills x_host through buffer()).
  Memory pinned(Mem::Pinned, bytes);
  orch::Bindings bp = b;
  bp.buffer("x_host", pinned.p, bytes);
  auto x = instantiate(*p, bp, s);
  CHECK(x->buffer("x_host") == pinned.p);
  check_saxpy(*x, s, x->buffer("x_host"), x->buffer("y_host"), n, -2.0f, "x_host pinned");
  bp.buffer("x_host", pinned.p, 64 << 20);
  auto r = p->instantiate(bp, s);
  REQUIRE_FALSE(r.ok());
  expect_too_large(r.error(), "x_host", 64 << 20);

  // Registered: 64 KiB of a 1 MiB page-aligned block; the rest stays pageable.
  void* block = nullptr;
  REQUIRE(posix_memalign(&block, 4096, 1 << 20) == 0);
  CUDA_REQUIRE(cudaHostRegister(block, bytes, cudaHostRegisterMapped));
  {
    orch::Bindings br = b;
    br.buffer("x_host", block, bytes);
    auto xr = instantiate(*p, br, s);
    CHECK(xr->buffer("x_host") == block);  // the CPU's address
    check_saxpy(*xr, s, block, xr->buffer("y_host"), n, -2.0f, "x_host registered");
    br.buffer("x_host", block, 1 << 20);  // past the registered range
    r = p->instantiate(br, s);
    REQUIRE_FALSE(r.ok());
    expect_too_large(r.error(), "x_host", 1 << 20);
    MESSAGE(r.error().to_string());
  }
  CUDA_REQUIRE(cudaHostUnregister(block));
  std::free(block);

  // A `host` buffer bound to device memory is refused: the CPU would write a device address.
  Memory dev(Mem::Device, bytes);
  orch::Bindings bd = b;
  bd.buffer("y_host", dev.p, bytes);
  r = p->instantiate(bd, s);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == orch::ErrorCode::InvalidArgument);
  CHECK(r.error().message().find("buffer 'y_host' is declared `host`") == 0);
  MESSAGE(r.error().to_string());
  void* before = x->buffer("x_host");
  CHECK(x->rebind("x_host", dev.p, bytes).error().code() == orch::ErrorCode::InvalidArgument);
  CHECK(x->buffer("x_host") == before);

  // Managed memory is host memory too: accepted, and buffer() is a pointer the CPU may use.
  Memory managed(Mem::Managed, bytes);
  orch::Bindings bm = b;
  bm.buffer("y_host", managed.p, bytes);
  auto xm = instantiate(*p, bm, s);
  CHECK(xm->buffer("y_host") == managed.p);
  check_saxpy(*xm, s, xm->buffer("x_host"), managed.p, n, -2.0f, "y_host managed");

  // The buffers the runtime allocates for `host` are host memory.
  cudaPointerAttributes attr = {};
  CUDA_REQUIRE(cudaPointerGetAttributes(&attr, xm->buffer("x_host")));
  CHECK(attr.type == cudaMemoryTypeHost);
  CHECK(attr.hostPointer == xm->buffer("x_host"));
}

TEST_CASE("a mapping of several virtual-memory pieces is one range; past the mapped pieces it is refused (CUDA API errors on purpose)") {
  int dev = 0;
  CUDA_REQUIRE(cudaGetDevice(&dev));
  CUDA_REQUIRE(cudaFree(nullptr));  // the primary context, current for the driver calls
  auto entry = [](const char* name) {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    CUDA_REQUIRE(cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &q));
    REQUIRE(q == cudaDriverEntryPointSuccess);
    return fn;
  };
  auto device_get = reinterpret_cast<decltype(&cuDeviceGet)>(entry("cuDeviceGet"));
  auto device_attribute = reinterpret_cast<decltype(&cuDeviceGetAttribute)>(entry("cuDeviceGetAttribute"));
  CUdevice cu_dev = 0;
  int vmm = 0;
  REQUIRE(device_get(&cu_dev, dev) == CUDA_SUCCESS);
  REQUIRE(device_attribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, cu_dev) == CUDA_SUCCESS);
  if (!vmm) {
    MESSAGE("SKIPPED: the device has no virtual memory management");
    return;
  }
  auto granularity = reinterpret_cast<decltype(&cuMemGetAllocationGranularity)>(entry("cuMemGetAllocationGranularity"));
  auto reserve = reinterpret_cast<decltype(&cuMemAddressReserve)>(entry("cuMemAddressReserve"));
  auto create = reinterpret_cast<decltype(&cuMemCreate)>(entry("cuMemCreate"));
  auto map = reinterpret_cast<decltype(&cuMemMap)>(entry("cuMemMap"));
  auto set_access = reinterpret_cast<decltype(&cuMemSetAccess)>(entry("cuMemSetAccess"));
  auto unmap = reinterpret_cast<decltype(&cuMemUnmap)>(entry("cuMemUnmap"));
  auto release = reinterpret_cast<decltype(&cuMemRelease)>(entry("cuMemRelease"));
  auto address_free = reinterpret_cast<decltype(&cuMemAddressFree)>(entry("cuMemAddressFree"));

  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  size_t g = 0;
  REQUIRE(granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS);
  CUdeviceptr base = 0;
  REQUIRE(reserve(&base, 4 * g, 0, 0, 0) == CUDA_SUCCESS);
  CUmemGenericAllocationHandle pieces[2] = {};
  for (int i = 0; i < 2; ++i) {
    REQUIRE(create(&pieces[i], g, &prop, 0) == CUDA_SUCCESS);
    REQUIRE(map(base + i * g, g, 0, pieces[i], 0) == CUDA_SUCCESS);
  }
  CUmemAccessDesc access = {};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  REQUIRE(set_access(base, 2 * g, &access, 1) == CUDA_SUCCESS);
  {
    auto p = load(compile("dsaxpy", kDeviceSaxpy));
    Stream s;
    const uint32_t n = static_cast<uint32_t>(2 * g / 4);  // y spans both pieces exactly
    Memory dx(Mem::Device, 2 * g);
    orch::Bindings b;
    b.param("n", n).param("a", 0.5f).buffer("x", dx.p, 2 * g).buffer("y", reinterpret_cast<void*>(base), 2 * g);
    auto x = instantiate(*p, b, s);
    check_saxpy(*x, s, dx.p, reinterpret_cast<void*>(base), n, 0.5f, "y over two mapped pieces");
    b.buffer("y", reinterpret_cast<void*>(base), 3 * g);  // the third piece is reserved, not mapped
    auto r = p->instantiate(b, s);
    REQUIRE_FALSE(r.ok());
    expect_too_large(r.error(), "y", 3 * g);
    MESSAGE(r.error().to_string());
  }
  CUDA_REQUIRE(cudaDeviceSynchronize());
  CHECK(unmap(base, 2 * g) == CUDA_SUCCESS);
  for (auto h : pieces) CHECK(release(h) == CUDA_SUCCESS);
  CHECK(address_free(base, 4 * g) == CUDA_SUCCESS);
}

TEST_CASE("overlapping buffers are refused unless allowed; set_param and rebind check them too") {
  auto p = load(compile("dsaxpy", kDeviceSaxpy));
  Stream s;
  const uint32_t n = 1024;
  Memory m(Mem::Device, 16384);
  orch::Bindings b;
  b.param("n", n).param("a", 3.0f);

  // y written, x read: half of them shared.
  orch::Bindings half = b;
  half.buffer("x", m.p, 4096).buffer("y", m.c() + 2048, 4096);
  auto r = p->instantiate(half, s);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == orch::ErrorCode::BuffersOverlap);
  CHECK(r.error().message().find("share 2048 bytes, and the pipeline writes 'y'") != std::string::npos);
  MESSAGE(r.error().to_string());

  // The same memory for both: refused by default, allowed on request; y = a y + y then.
  orch::Bindings same = b;
  same.buffer("x", m.p, 4096).buffer("y", m.p, 4096);
  CHECK(p->instantiate(same, s).error().code() == orch::ErrorCode::BuffersOverlap);
  same.allow_overlap("y", "x");
  auto x = instantiate(*p, same, s);
  auto ys = random_floats(n);
  upload(m.p, ys);
  run(*x, s);
  auto got = download(m.p, n);
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i)
    if (std::fabs(got[i] - (3.0f * ys[i] + ys[i])) > 1e-6f * std::max(1.0f, std::fabs(4.0f * ys[i]))) ++bad;
  CHECK(bad == 0);

  // Separate at n = 1024, overlapping at n = 2000: set_param refuses, and nothing changes.
  orch::Bindings grow = b;
  grow.buffer("x", m.p, 16384).buffer("y", m.c() + 6144, 10240);
  auto xg = instantiate(*p, grow, s);
  orch::Status st = xg->set_param("n", 2000u);
  CHECK(st.error().code() == orch::ErrorCode::BuffersOverlap);
  CHECK(xg->param_as_double("n").value() == 1024);
  CHECK(xg->buffer_bytes("x") == 4096);
  // The graph still runs n = 1024: only the first 1024 elements of y change.
  auto xs = random_floats(2000), y0 = random_floats(2000);
  upload(m.p, xs);
  upload(m.c() + 6144, y0);
  run(*xg, s);
  got = download(m.c() + 6144, 2000);
  bad = 0;
  for (size_t i = 0; i < 2000; ++i) {
    const float want = i < 1024 ? 3.0f * xs[i] + y0[i] : y0[i];
    if (std::fabs(got[i] - want) > 1e-6f * std::max(1.0f, std::fabs(want))) ++bad;
  }
  CHECK(bad == 0);

  // rebind onto the other buffer's memory: refused, and the old pointer stays.
  Memory other(Mem::Device, 4096);
  orch::Bindings sep = b;
  sep.buffer("x", other.p, 4096).buffer("y", m.p, 4096);
  auto xs2 = instantiate(*p, sep, s);
  CHECK(xs2->rebind("x", m.c() + 1024, 4096).error().code() == orch::ErrorCode::BuffersOverlap);
  CHECK(xs2->buffer("x") == other.p);
}

TEST_CASE("set_param that empties the grid is refused as empty, and changes nothing") {
  auto p = load(compile("dsaxpy", kDeviceSaxpy));
  Stream s;
  Memory dx(Mem::Device, 4096), dy(Mem::Device, 4096);
  orch::Bindings b;
  b.param("n", 1024u).param("a", 1.5f).buffer("x", dx.p, 4096).buffer("y", dy.p, 4096);
  auto x = instantiate(*p, b, s);
  orch::Status st = x->set_param("n", 0u);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code() == orch::ErrorCode::BindCheckFailed);
  CHECK(st.error().message() == "E0205: grid of `saxpy` is empty in x (no blocks)");
  CHECK(x->param_as_double("n").value() == 1024);
  check_saxpy(*x, s, dx.p, dy.p, 1024, 1.5f, "after the refused set_param");
}

TEST_CASE("broken PTX: the error holds the JIT compiler's log (CUDA API errors on purpose)") {
  const std::string path = compile("dsaxpy", kDeviceSaxpy);
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  const std::string file = text.str();
  std::vector<uint64_t> aligned(file.size() / 8 + 1);
  std::memcpy(aligned.data(), file.data(), file.size());
  auto opened = orch::artifact::open_pipeline(reinterpret_cast<const uint8_t*>(aligned.data()), file.size());
  REQUIRE(opened.ok());
  std::unique_ptr<orch::fb::PipelineT> tree(opened.pipeline->UnPack());
  REQUIRE(!tree->kernels.empty());
  for (auto& k : tree->kernels) {
    REQUIRE(!k->ptx.empty());
    k->images.clear();  // no CUBIN: the PTX must be compiled
    while (!k->ptx.empty() && k->ptx.back() == 0) k->ptx.pop_back();  // the junk goes before any NUL
    const std::string junk = "\nthis is not ptx;\n";
    k->ptx.insert(k->ptx.end(), junk.begin(), junk.end());
  }
  const std::string payload = orch::artifact::pack_payload(*tree);
  const std::string broken =
      orch::artifact::wrap_payload(reinterpret_cast<const uint8_t*>(payload.data()), payload.size());
  auto r = orch::Pipeline::load_from_memory(broken.data(), broken.size());
  REQUIRE_FALSE(r.ok());
  MESSAGE(r.error().to_string());
  CHECK(r.error().code() == orch::ErrorCode::Cuda);
  CHECK(r.error().cuda_error() != 0);
  const std::string& m = r.error().message();
  const size_t at = m.find(" (JIT log: ");
  REQUIRE(at != std::string::npos);
  const std::string log = m.substr(at + 11);
  CHECK(log.size() > 2);
  CHECK(log.find("not available") == std::string::npos);
  CHECK(log.find("without a message") == std::string::npos);
  CHECK(log.find("error") != std::string::npos);  // ptxas: "... line N; error : syntax error ..."
  CHECK(m.find('\n') == std::string::npos);       // one line
}

TEST_CASE("launch and instantiate inside the application's stream capture: refused, the capture intact") {
  auto p = load(compile("dsaxpy", kDeviceSaxpy));
  Stream s;
  Memory dx(Mem::Device, 4096), dy(Mem::Device, 4096);
  orch::Bindings b;
  b.param("n", 1024u).param("a", 2.0f).buffer("x", dx.p, 4096).buffer("y", dy.p, 4096);
  auto x = instantiate(*p, b, s);

  Memory marker(Mem::Device, 4);
  CUDA_REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  orch::Status st = x->launch(s);
  CHECK(st.error().code() == orch::ErrorCode::Unsupported);
  CHECK(st.error().message().find("launch: the stream is being captured") == 0);
  MESSAGE(st.error().to_string());
  auto r = p->instantiate(b, s);
  CHECK(r.error().code() == orch::ErrorCode::Unsupported);
  CHECK(r.error().message().find("instantiate: the stream is being captured") == 0);
  // The application's own work goes on being captured, and the capture ends cleanly.
  CUDA_REQUIRE(cudaMemsetAsync(marker.p, 0x5a, 4, s));
  cudaGraph_t graph = nullptr;
  CUDA_REQUIRE(cudaStreamEndCapture(s, &graph));
  REQUIRE(graph != nullptr);
  cudaGraphExec_t exec = nullptr;
  CUDA_REQUIRE(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_REQUIRE(cudaGraphLaunch(exec, s));
  CUDA_REQUIRE(cudaStreamSynchronize(s));
  uint32_t got = 0;
  CUDA_REQUIRE(cudaMemcpy(&got, marker.p, 4, cudaMemcpyDeviceToHost));
  CHECK(got == 0x5a5a5a5au);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  // Outside the capture, the executable runs as before.
  check_saxpy(*x, s, dx.p, dy.p, 1024, 2.0f, "after the capture");
}

TEST_CASE("destroying an executable right after its launches waits for them; its memory is not freed under them") {
  auto p = load(compile("dsaxpy", kDeviceSaxpy));
  Stream s;
  orch::Bindings b;
  b.param("n", 1u << 24).param("a", 1.0f);  // 64 MiB buffers the runtime allocates
  auto x = instantiate(*p, b, s);
  for (int i = 0; i < 20; ++i) ORCH_REQUIRE_OK(x->launch(s));
  x.reset();  // no synchronize first
  CUDA_REQUIRE(cudaStreamSynchronize(s));
  CUDA_REQUIRE(cudaGetLastError());
}

TEST_CASE("C API: destroying live objects twice, and using a destroyed executable, are harmless") {
  const std::string path = compile("dsaxpy", kDeviceSaxpy);
  orch_pipeline* p = nullptr;
  orch_error* e = orch_pipeline_load(path.c_str(), &p);
  REQUIRE(e == nullptr);
  CHECK(std::string(orch_pipeline_name(p)) == "dsaxpy");
  orch_bindings* b = orch_bindings_create();
  CHECK(orch_bindings_param_u32(b, "n", 256) == nullptr);
  Stream s;
  orch_executable* x = reinterpret_cast<orch_executable*>(8);
  // The arguments after a live pipeline: NULL bindings, NULL out.
  e = orch_instantiate(p, nullptr, s, &x);
  CHECK(x == nullptr);
  CHECK(std::string(orch_error_message(e)) == "orch_instantiate: `bindings` is NULL");
  orch_error_destroy(e);
  e = orch_instantiate(p, b, s, nullptr);
  CHECK(std::string(orch_error_message(e)) == "orch_instantiate: `out` is NULL");
  orch_error_destroy(e);
  REQUIRE(orch_instantiate(p, b, s, &x) == nullptr);
  REQUIRE(orch_launch(x, s) == nullptr);
  CUDA_REQUIRE(cudaStreamSynchronize(s));
  // NULL names on a live executable.
  for (orch_error* n : {orch_set_param_u32(x, nullptr, 1), orch_set_param_i32(x, nullptr, 1),
                        orch_set_param_u64(x, nullptr, 1), orch_set_param_i64(x, nullptr, 1),
                        orch_set_param_f32(x, nullptr, 1), orch_set_param_f64(x, nullptr, 1),
                        orch_rebind(x, nullptr, nullptr, 0)}) {
    CHECK(orch_error_code(n) == ORCH_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(orch_error_message(n)).find(": `name` is NULL") != std::string::npos);
    orch_error_destroy(n);
  }
  CHECK(orch_executable_buffer(x, nullptr) == nullptr);
  CHECK(orch_executable_comm(x, nullptr) == nullptr);
  CHECK(orch_executable_comm(x, "nope") == nullptr);
  CHECK(orch_executable_rank(x) == 0);
  CHECK(orch_executable_world_size(x) == 1);
  CHECK(orch_executable_buffer(x, "y") != nullptr);
  // Handles of one type are not another's.
  e = orch_launch(reinterpret_cast<orch_executable*>(p), s);
  CHECK(orch_error_code(e) == ORCH_ERROR_INVALID_ARGUMENT);
  orch_error_destroy(e);
  orch_executable_destroy(x);
  orch_executable_destroy(x);
  e = orch_launch(x, s);
  CHECK(orch_error_code(e) == ORCH_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(orch_error_message(e)) ==
        "orch_launch: `exec` is not a live orch_executable (destroyed already, or never one)");
  orch_error_destroy(e);
  CHECK(orch_executable_buffer(x, "y") == nullptr);
  e = orch_set_param_u32(x, "n", 1);
  CHECK(orch_error_code(e) == ORCH_ERROR_INVALID_ARGUMENT);
  orch_error_destroy(e);
  // The pipeline may go before or after its executables; twice is harmless.
  REQUIRE(orch_instantiate(p, b, s, &x) == nullptr);
  orch_pipeline_destroy(p);
  orch_pipeline_destroy(p);
  REQUIRE(orch_launch(x, s) == nullptr);  // the executable keeps the kernels loaded
  CUDA_REQUIRE(cudaStreamSynchronize(s));
  orch_executable_destroy(x);
  orch_bindings_destroy(b);
  orch_bindings_destroy(b);
  e = orch_instantiate(p, b, s, &x);
  CHECK(orch_error_code(e) == ORCH_ERROR_INVALID_ARGUMENT);
  CHECK(x == nullptr);
  orch_error_destroy(e);
}

// A kernel that faults loses the CUDA context for the whole process, so it runs in a process of
// its own (this binary again, as the multi-GPU tests run their ranks); it prints what each call
// said and exits 0 when every check held.
TEST_CASE("after a kernel faults, every call says the context is lost (child processes)") {
  const std::string path = compile("fault", kFault);
  for (const char* mode : {"1", "2"}) {
    CAPTURE(mode);
    const std::string logs = orch::test::temp_dir() + "/sticky-" + mode;
    std::filesystem::create_directories(logs);
    orch::ranks::SpawnOptions o;
    o.timeout = std::chrono::seconds(120);
    o.log_dir = logs;
    auto exits = orch::ranks::spawn(1, {"/proc/self/exe", "--orch-rank-worker=sticky_fault", path, mode}, o);
    ORCH_REQUIRE_OK(exits);
    REQUIRE(exits->size() == 1);
    std::ifstream in((*exits)[0].log);
    std::stringstream log;
    log << in.rdbuf();
    MESSAGE((*exits)[0].describe(), "\n", log.str());
    CHECK((*exits)[0].ok());
  }
}

}  // TEST_SUITE("gpu")

// ---- the child process ---------------------------------------------------------------------

namespace {

int g_sticky_failures = 0;

#define STICKY_CHECK(cond)                                              \
  do {                                                                  \
    if (!(cond)) {                                                      \
      std::printf("sticky_fault: FAILED: %s (line %d)\n", #cond, __LINE__); \
      ++g_sticky_failures;                                              \
    }                                                                   \
  } while (0)

void said(const char* call, const orch::Error& e) {
  std::printf("sticky_fault: %s: [%s] %s\n", call, orch::error_code_name(e.code()), e.to_string().c_str());
}

bool lost(const orch::Error& e, cudaError_t expected) {
  return e.code() == orch::ErrorCode::ContextLost && e.where().empty() && e.cuda_error() == static_cast<int>(expected) &&
         e.message().find("the CUDA context is lost: ") == 0;
}

// args: the fault pipeline, the mode (1: illegal address, 2: trap).
int scenario_sticky_fault(const std::vector<std::string>& args) {
  if (args.size() != 2) return 2;
  const unsigned mode = static_cast<unsigned>(std::atoi(args[1].c_str()));
  auto p = orch::Pipeline::load(args[0]);
  if (!p.ok()) {
    said("load", p.error());
    return 1;
  }
  cudaStream_t s = nullptr;
  if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) return 1;
  orch::Bindings b;
  b.param("n", 256u).param("a", 2.0f);
  auto x = (*p)->instantiate(b, s);
  if (!x.ok()) {
    said("instantiate", x.error());
    return 1;
  }
  orch::Executable& exec = **x;
  // A healthy launch first: x doubles.
  std::vector<float> v(256, 1.5f);
  STICKY_CHECK(cudaMemcpy(exec.buffer("x"), v.data(), 1024, cudaMemcpyDefault) == cudaSuccess);
  STICKY_CHECK(exec.launch(s).ok());
  STICKY_CHECK(cudaStreamSynchronize(s) == cudaSuccess);
  STICKY_CHECK(cudaMemcpy(v.data(), exec.buffer("x"), 1024, cudaMemcpyDefault) == cudaSuccess);
  STICKY_CHECK(v[0] == 3.0f && v[255] == 3.0f);

  // Then the fault.
  STICKY_CHECK(exec.set_param("mode", mode).ok());
  STICKY_CHECK(exec.launch(s).ok());
  const cudaError_t fault = cudaStreamSynchronize(s);
  std::printf("sticky_fault: the application's synchronize: %s\n", cudaGetErrorName(fault));
  // A store to an address no allocation holds is an illegal address; a trap is reported as a
  // launch failure or an illegal instruction, depending on the GPU: any sticky error will do.
  if (mode == 1) STICKY_CHECK(fault == cudaErrorIllegalAddress);
  STICKY_CHECK(orch::rt::is_sticky(fault));
  const cudaError_t expected = fault;

  // Every call that reaches CUDA now says the context is lost, naming no statement.
  orch::Status st = exec.launch(s);
  said("launch", st.error());
  STICKY_CHECK(lost(st.error(), expected));
  STICKY_CHECK(st.error().message().find("here: cannot launch graph 'main'") != std::string::npos ||
               st.error().message().find("here: launch") != std::string::npos);

  // set_param either patches (host-side bookkeeping CUDA may still accept) or fails and
  // changes nothing; what param_as_double says is what the graph holds.
  st = exec.set_param("a", 5.0f);
  said("set_param", st.error());
  if (st.ok()) {
    STICKY_CHECK(exec.param_as_double("a").value() == 5.0);
  } else {
    STICKY_CHECK(st.error().code() == orch::ErrorCode::ContextLost);
    STICKY_CHECK(st.error().where().empty());
    STICKY_CHECK(exec.param_as_double("a").value() == 2.0);
  }
  st = exec.launch(s);
  STICKY_CHECK(st.error().code() == orch::ErrorCode::ContextLost);

  auto again = (*p)->instantiate(b, s);
  said("instantiate", again.error());
  STICKY_CHECK(!again.ok() && again.error().code() == orch::ErrorCode::ContextLost);

  auto reload = orch::Pipeline::load(args[0]);
  said("load", reload.error());
  STICKY_CHECK(reload.ok() || reload.error().code() == orch::ErrorCode::ContextLost);

  // Binding memory the application had allocated before the fault: CUDA knows no memory now, and
  // orch says the context is lost rather than that the memory is unknown (issue 21).
  orch::Bindings bound = b;
  bound.buffer("x", exec.buffer("x"), 1024);
  auto with_memory = (*p)->instantiate(bound, s);
  if (!with_memory.ok()) said("instantiate with bound memory", with_memory.error());
  STICKY_CHECK(!with_memory.ok() && with_memory.error().code() == orch::ErrorCode::ContextLost);
  // And the device status says so too, where the pipeline has no status record.
  orch::Status status = exec.device_status();
  if (!status.ok()) said("device_status", status.error());
  STICKY_CHECK(!status.ok() && status.error().code() == orch::ErrorCode::ContextLost);

  x.value().reset();  // does not hang: nothing is left running
  std::printf("sticky_fault: the executable was destroyed\n");
  return g_sticky_failures == 0 ? 0 : 1;
}

const bool sticky_registered = orch::test::register_rank_scenario("sticky_fault", scenario_sticky_fault);

}  // namespace
