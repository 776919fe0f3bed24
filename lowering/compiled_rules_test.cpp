// The rules that need compiled kernels (lowering/check_compiled_kernels.cpp, with the PTX read by
// lowering/inspect_ptx.cpp): each with the exact text orchc prints and the closest pipeline that
// compiles. And the checker and the loader agreeing: for each limit pipeline.bin's validator
// enforces, a pipeline at the limit checks and opens, and one past it is refused by the checker.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>

#include "artifact/artifact.h"
#include "lowering/cubin_resources.h"
#include "compiler/check.h"
#include "lowering/inspect_ptx.h"
#include "lowering/lower.h"
#include "lowering/passes.h"

namespace orch {
namespace {

namespace fs = std::filesystem;

std::string edit(std::string text, const std::string& from, const std::string& to) {
  size_t at = text.find(from);
  if (at == std::string::npos || text.find(from, at + 1) != std::string::npos)
    throw std::logic_error("edit must match exactly once: " + from);
  return text.replace(at, from.size(), to);
}

// Checks and compiles `text` as t.orch, as `orchc -o` does; the diagnostics as orchc prints
// them ("" when it compiled clean). `launches` receives each kernel's launches_kernels.
std::string compile(const std::string& text, std::vector<bool>* launches = nullptr,
                    std::vector<int>* segments = nullptr) {
  // The tests' own kernel cache (the build tree's test-cache: lowering/test_main.cpp), so no
  // folder is left behind in /tmp.
  static const std::string cache = default_kernel_cache_dir();
  SourceManager sources;
  DiagnosticEngine diags;
  CheckResult r = check_text("t.orch", text, sources, {}, diags);
  if (diags.has_errors()) return "--check: " + format_diagnostics(diags.sorted(), sources, DiagnosticFormat::Text);
  LowerOptions options;
  options.compile.cache_dir = cache;
  lir::Program lowered;
  auto bytes = lower_to_artifact(*r.program, sources, options, diags, &lowered);
  if (launches)
    for (const lir::Kernel& k : lowered.kernels) launches->push_back(k.launches_kernels);
  if (segments) *segments = lowered.segments;
  std::string out = format_diagnostics(diags.sorted(), sources, DiagnosticFormat::Text);
  if (bytes && out.empty()) {
    std::vector<uint64_t> aligned((bytes->size() + 7) / 8);
    std::memcpy(aligned.data(), bytes->data(), bytes->size());
    auto opened = artifact::open_pipeline(reinterpret_cast<const uint8_t*>(aligned.data()), bytes->size());
    if (!opened.ok()) return "load: " + opened.error;
  }
  if (!bytes && out.empty()) return "no artifact and no diagnostic";
  return out;
}

}  // namespace

TEST_SUITE("compiled rules") {

TEST_CASE("E0120: a parameter declared smaller than the kernel takes it") {
  const std::string program = R"orch(pipeline p
param n: u32 = 1024
buffer x: f32[n]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, double a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scale<<<ceil_div(n, 256), 256>>>(n, 2.0, x)
}
)orch";
  CHECK(compile(program) == R"txt(t.orch:4:22: error[E0120]: parameter `a` of kernel `scale` is declared f32, a 4-byte floating-point value, but the compiled kernel takes an 8-byte floating-point value there (parameter 2: .param .f64 scale_param_1)
kernel scale(n: u32, a: f32, x: inout f32[]) source """
                     ^~~~~~
t.orch:5:28: note: `scale` is defined here
extern "C" __global__ void scale(unsigned n, double a, float* x) {
                           ^~~~~
1 error generated.
)txt");
  // Closest valid: declare what the source takes.
  CHECK(compile(edit(program, "a: f32", "a: f64")) == "");
}

TEST_CASE("E0120: a parameter count that differs from the kernel's") {
  const std::string program = R"orch(pipeline p
buffer x: f32[16]
kernel fill1(n: u32, x: out f32[]) source """
extern "C" __global__ void fill1(float* x) { x[threadIdx.x] = 1.0f; }
"""
graph main { fill1<<<1, 16>>>(16, x) }
)orch";
  CHECK(compile(program) == R"txt(t.orch:3:1: error[E0120]: kernel `fill1` declares 2 parameters, but its compiled code takes 1
kernel fill1(n: u32, x: out f32[]) source """
^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
t.orch:4:28: note: `fill1` is defined here
extern "C" __global__ void fill1(float* x) { x[threadIdx.x] = 1.0f; }
                           ^~~~~
1 error generated.
)txt");
  CHECK(compile(edit(edit(program, "(n: u32, x: out", "(x: out"), "(16, x)", "(x)")) == "");
}

TEST_CASE("E0120: pointer against value, and integer against floating point, of one size") {
  const std::string head = "pipeline p\nbuffer x: f32[16]\nbuffer s: u32\nkernel k(";
  auto with = [&](const std::string& decl, const std::string& cpp, const std::string& args) {
    return compile(head + decl + ") source \"\"\"\nextern \"C\" __global__ void k(" + cpp +
                   ") { }\n\"\"\"\ngraph main { k<<<1, 1>>>(" + args + ") }\n");
  };
  CHECK(with("x: inout f32[]", "float x", "x").find("parameter `x` of kernel `k` is declared a buffer, passed as an 8-byte pointer, but the compiled kernel takes a 4-byte floating-point value there (parameter 1: .param .f32 k_param_0)") != std::string::npos);
  CHECK(with("a: u32", "float a", "3").find("is declared u32, a 4-byte integer, but the compiled kernel takes a 4-byte floating-point value") != std::string::npos);
  CHECK(with("a: f32", "int a", "3.0").find("is declared f32, a 4-byte floating-point value, but the compiled kernel takes a 4-byte integer") != std::string::npos);
  CHECK(with("a: f64", "float* a", "3.0").find("is declared f64, an 8-byte floating-point value, but the compiled kernel takes an 8-byte integer or pointer") != std::string::npos);
  CHECK(with("c: cond", "float c", "cond").find("--check") == 0);  // `cond` outside a loop: the checker's
  // The matching forms compile, every scalar type included.
  CHECK(with("x: inout f32[], s: in u32", "float* x, const unsigned* s", "x, s") == "");
  CHECK(compile(R"orch(pipeline p
buffer x: f32[16]
kernel k(a: f16, b: bf16, c: bool, d: i8, e: u16, f: i64, g: f64, h: u8, i: i32, x: inout f32[]) source """
#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void k(__half a, __nv_bfloat16 b, bool c, signed char d, unsigned short e,
                             long long f, double g, unsigned char h, int i, float* x) {
  x[0] = __half2float(a) + __bfloat162float(b) + c + d + e + f + g + h + i;
}
"""
graph main { k<<<1, 1>>>(1.5, 2.5, true, -3, 4, 5, 6.0, 7, 8, x) }
)orch") == "");
  // Signedness is not a mismatch (u32 against int), and an 8-byte integer against a pointer
  // cannot be told apart in PTX (.u64 both): both compile.
  CHECK(with("a: u32", "int a", "3") == "");
  CHECK(with("a: u64", "float* a", "3") == "");
}

TEST_CASE("E0120: a template entry and a `from` file with several kernels") {
  const fs::path dir = fs::temp_directory_path() / ("orch-e0120-" + std::to_string(getpid()));
  fs::create_directories(dir);
  {
    std::ofstream(dir / "k.cu") << "extern \"C\" __global__ void other(double d) { }\n"
                                   "template <class T> __global__ void scale(T* x, T a) { x[0] = a; }\n"
                                   "template __global__ void scale<float>(float*, float);\n";
  }
  const std::string program = "pipeline p\nbuffer x: f32[4]\n"
                              "kernel s(x: inout f32[], a: f64) entry \"scale<float>\" from \"k.cu\"\n"
                              "graph main { s<<<1, 1>>>(x, 2.0) }\n";
  SourceManager sources;
  DiagnosticEngine diags;
  std::ofstream(dir / "t.orch") << program;
  CheckResult r = check_file((dir / "t.orch").string(), sources, {}, diags);
  REQUIRE_FALSE(diags.has_errors());
  LowerOptions options;
  options.compile.use_cache = false;
  CHECK_FALSE(lower_to_artifact(*r.program, sources, options, diags));
  const std::string text = format_diagnostics(diags.sorted(), sources, DiagnosticFormat::Text);
  CHECK(text.find("t.orch:3:26: error[E0120]: parameter `a` of kernel `s` is declared f64, an 8-byte floating-point value, but the compiled kernel takes a 4-byte floating-point value there (parameter 2: .param .f32 _Z5scaleIfEvPT_S0__param_1)") != std::string::npos);
  CHECK(text.find("k.cu:2:36: note: `s` is defined here") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("E0506: a kernel that launches kernels through a helper, in a device graph") {
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
kernel parent(x: inout f32[]) source """
extern "C" __global__ void child(float* x) { x[threadIdx.x] *= 2.0f; }
__device__ void spawn(float* x) { child<<<1, 1024>>>(x); }
extern "C" __global__ void parent(float* x) {
  if (threadIdx.x == 0) spawn(x);
}
"""
graph helper device { parent<<<1, 32>>>(x) }
graph main { launch helper tail }
)orch";
  CHECK(compile(program) == R"txt(t.orch:10:23: error[E0506]: kernel `parent` launches kernels from the device (CUDA dynamic parallelism: its compiled code calls cudaLaunchDevice), which a graph launched from the device cannot hold
graph helper device { parent<<<1, 32>>>(x) }
                      ^~~~~~~~~~~~~~~~~~~~
t.orch:6:28: note: `parent` is defined here
extern "C" __global__ void parent(float* x) {
                           ^~~~~~
t.orch:10:1: note: `helper` is a device graph
graph helper device { parent<<<1, 32>>>(x) }
^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: run it in the host-launched graph, where CUDA allows it.
  std::vector<bool> launches;
  CHECK(compile(edit(program, "graph helper device { parent<<<1, 32>>>(x) }\ngraph main { launch helper tail }",
                     "graph main { parent<<<1, 32>>>(x) }"),
                &launches) == "");
  CHECK(launches == std::vector<bool>{true});
}

TEST_CASE("E0507: a kernel that launches kernels through a macro, in a conditional body") {
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
buffer ready: u32
kernel parent(x: inout f32[]) source """
#define SPAWN(k, x) k<<<1, 1024>>>(x)
extern "C" __global__ void child(float* x) { x[threadIdx.x] *= 2.0f; }
extern "C" __global__ void parent(float* x) {
  if (threadIdx.x == 0) SPAWN(child, x);
}
"""
graph main {
  if ready != 0 {
    parent<<<1, 32>>>(x)
  }
}
)orch";
  CHECK(compile(program) == R"txt(t.orch:13:5: error[E0507]: kernel `parent` launches kernels from the device (CUDA dynamic parallelism: its compiled code calls cudaLaunchDevice), which a conditional body cannot hold
    parent<<<1, 32>>>(x)
    ^~~~~~~~~~~~~~~~~~~~
t.orch:7:28: note: `parent` is defined here
extern "C" __global__ void parent(float* x) {
                           ^~~~~~
t.orch:12:3: note: the conditional is here
  if ready != 0 {
  ^~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: launch unconditionally; the kernel is kept in a segment of its own, apart
  // from the `if` left in main.
  std::vector<int> segments;
  const std::string fixed = edit(program, "  if ready != 0 {\n    parent<<<1, 32>>>(x)\n  }\n",
                                 "  parent<<<1, 32>>>(x)\n  if ready != 0 { fill x = 0 }\n");
  CHECK(compile(fixed, nullptr, &segments) == "");
  CHECK(segments.size() == 2);
}

TEST_CASE("E0507: a launch made in an included file, beside a conditional node") {
  const fs::path dir = fs::temp_directory_path() / ("orch-e0507-" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "spawn.cuh") << "#define SPAWN(k, x) k<<<1, 1024>>>(x)\n";
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
buffer ready: u32
kernel parent(x: inout f32[]) source """
// Links the device runtime (the kernel compiler sees cudaGraphSetConditional named here; a
// launch hidden in a header alone would not even compile, E0901).
#include "spawn.cuh"
extern "C" __global__ void child(float* x) { x[threadIdx.x] *= 2.0f; }
extern "C" __global__ void parent(float* x) { if (threadIdx.x == 0) SPAWN(child, x); }
"""
graph main {
  parent<<<1, 32>>>(x)
  if ready != 0 { fill x = 0 }
}
)orch";
  auto compile_in_dir = [&](const std::string& text) {
    std::ofstream(dir / "t.orch") << text;
    SourceManager sources;
    DiagnosticEngine diags;
    CheckResult r = check_file((dir / "t.orch").string(), sources, {}, diags);
    REQUIRE_FALSE(diags.has_errors());
    LowerOptions options;
    options.compile.use_cache = false;
    auto bytes = lower_to_artifact(*r.program, sources, options, diags);
    return format_diagnostics(diags.sorted(), sources, DiagnosticFormat::Text);
  };
  const std::string text = compile_in_dir(program);
  CHECK(text.find("t.orch:12:3: error[E0507]: kernel `parent` launches kernels from the device (CUDA "
                  "dynamic parallelism: its compiled code calls cudaLaunchDevice) but its source does "
                  "not show it") != std::string::npos);
  CHECK(text.find("t.orch:13:3: note: a conditional node in the same graph") != std::string::npos);
  // Closest valid: the launch in the kernel's own source, which gets it a segment of its own.
  CHECK(compile_in_dir(edit(program, "SPAWN(child, x)", "child<<<1, 1024>>>(x)")) == "");
  fs::remove_all(dir);
}

TEST_CASE("E0508: a kernel that launches graphs without declaring a graph parameter") {
  const std::string program = R"orch(pipeline p
buffer x: f32[16]
kernel again(x: inout f32[]) source """
extern "C" __global__ void again(float* x) {
  if (x[0] < 4.0f) { x[0] += 1.0f; cudaGraphLaunch(cudaGetCurrentGraphExec(), cudaStreamGraphTailLaunch); }
}
"""
graph rounds device { again<<<1, 1>>>(x) }
graph main { launch rounds tail }
)orch";
  CHECK(compile(program) == R"txt(t.orch:3:1: error[E0508]: kernel `again` launches graphs from the device (its compiled code calls cudaGraphLaunch), but declares no `graph` parameter with a launch budget, so the launches it makes are not counted or ordered
kernel again(x: inout f32[]) source """
^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
t.orch:4:28: note: `again` is defined here
extern "C" __global__ void again(float* x) {
                           ^~~~~
1 error generated.
)txt");
  // Closest valid: take the graph as a parameter with a budget.
  CHECK(compile(edit(edit(edit(program, "kernel again(x: inout f32[]) source",
                               "kernel again(x: inout f32[], self: graph) launches self tail <= 1 source"),
                          "again(float* x) {", "again(float* x, cudaGraphExec_t self) {"),
                     "again<<<1, 1>>>(x)", "again<<<1, 1>>>(x, self)")) == "");
}

// The lowered program of `text`, compiled (nullopt after errors).
std::optional<lir::Program> lowered(const std::string& text, LowerOptions options = {}) {
  static const std::string cache = default_kernel_cache_dir();
  SourceManager sources;
  DiagnosticEngine diags;
  CheckResult r = check_text("t.orch", text, sources, {}, diags);
  if (diags.has_errors()) return std::nullopt;
  options.compile.cache_dir = cache;
  lir::Program out;
  if (!lower_to_artifact(*r.program, sources, options, diags, &out) || diags.has_errors()) return std::nullopt;
  return out;
}

// Whether the program's bind checks of `code` all hold with the params at `values` (by index;
// the rest at their defaults), and how many there are.
std::pair<bool, int> bind_checks_hold(const lir::Program& p, const std::string& code,
                                      const std::map<int, uint64_t>& values) {
  bool holds = true;
  int count = 0;
  for (const lir::BindCheck& b : p.bind_checks) {
    if (b.code != code) continue;
    ++count;
    REQUIRE(expr::verify(b.condition.code.data(), b.condition.code.size()) == "");
    expr::Evaluation v = expr::evaluate(b.condition.code, [&](const expr::Instr& in) -> std::optional<expr::Value> {
      if (in.kind != expr::InstrKind::Param) return std::nullopt;
      auto it = values.find(in.ref);
      if (it != values.end()) return expr::Value::of_uint(in.type, it->second);
      return p.params[static_cast<size_t>(in.ref)].default_value;
    });
    REQUIRE(v.known());
    holds &= v.value.truthy();
  }
  return {holds, count};
}

const char* const kBoundsProgram = R"orch(pipeline p
param n: u32 = 4096
param threads: u32 = 256
buffer x: f32[n]
kernel scale(n: u32, x: inout f32[]) source """
extern "C" __global__ void __launch_bounds__(256) scale(unsigned n, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 2.0f;
}
"""
graph main {
  scale<<<ceil_div(n, 512), 512>>>(n, x)
}
)orch";

TEST_CASE("E0206: a block larger than the kernel's __launch_bounds__") {
  CHECK(compile(kBoundsProgram) == R"txt(t.orch:11:3: error[E0206]: block of `scale` has 512 threads, but `scale` is compiled with __launch_bounds__(256), so a block may have at most 256 threads
  scale<<<ceil_div(n, 512), 512>>>(n, x)
  ^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
t.orch:6:51: note: `scale` is defined here
extern "C" __global__ void __launch_bounds__(256) scale(unsigned n, float* x) {
                                                  ^~~~~
1 error generated.
)txt");
  // At the bound it compiles, with nothing left to check at bind time.
  const std::string at_bound = edit(kBoundsProgram, "<<<ceil_div(n, 512), 512>>>", "<<<ceil_div(n, 256), 256>>>");
  CHECK(compile(at_bound) == "");
  auto fixed = lowered(at_bound);
  REQUIRE(fixed);
  CHECK(bind_checks_hold(*fixed, "E0206", {}).second == 0);
  // A block from a param: proven at its default, and a bind check for the values bound later.
  auto by_param = lowered(edit(kBoundsProgram, "<<<ceil_div(n, 512), 512>>>", "<<<ceil_div(n, threads), threads>>>"));
  REQUIRE(by_param);
  CHECK(bind_checks_hold(*by_param, "E0206", {{1, 256}}) == std::make_pair(true, 1));
  CHECK(bind_checks_hold(*by_param, "E0206", {{1, 128}}) == std::make_pair(true, 1));
  CHECK(bind_checks_hold(*by_param, "E0206", {{1, 288}}) == std::make_pair(false, 1));
  CHECK(compile(edit(edit(kBoundsProgram, "<<<ceil_div(n, 512), 512>>>", "<<<ceil_div(n, threads), threads>>>"),
                     "threads: u32 = 256", "threads: u32 = 320"))
            .find("error[E0206]: block of `scale` has 320 threads, but `scale` is compiled with "
                  "__launch_bounds__(256), so a block may have at most 256 threads (with the params' default "
                  "values)") != std::string::npos);
}

TEST_CASE("E0206: registers x threads over the register file") {
  const std::string program = R"orch(pipeline p
param n: u32 = 512
buffer x: f64[n * 128]
kernel heavy(n: u32, x: inout f64[]) source """
extern "C" __global__ void heavy(unsigned n, double* x) {
  double a[128];
#pragma unroll
  for (int j = 0; j < 128; ++j) a[j] = x[j * n + threadIdx.x];
  double s = 0;
#pragma unroll
  for (int k = 0; k < 128; ++k)
#pragma unroll
    for (int j = 0; j < 128; ++j) s += a[j] * a[(j * 7 + k) % 128];
  x[threadIdx.x] = s;
}
"""
graph main {
  heavy<<<1, 512>>>(n, x)
}
)orch";
  auto compiled = lowered(edit(program, "<<<1, 512>>>", "<<<1, 128>>>"));
  REQUIRE(compiled);
  std::string error;
  auto r = lowering::read_cubin_resources(compiled->kernels[0].images.empty()
                                               ? compiled->modules.at(static_cast<size_t>(compiled->kernels[0].module)).images.at(0).cubin
                                               : compiled->kernels[0].images.at(0).cubin,
                                           &error);
  REQUIRE(r);
  const uint32_t registers = r->at("heavy").registers;
  const uint32_t most = lowering::max_threads_for_registers(registers, {});
  INFO(registers);
  REQUIRE(most < 512);
  CHECK(compile(program) ==
        "t.orch:18:3: error[E0206]: block of `heavy` has 512 threads, but its sm_90 code uses " +
            std::to_string(registers) + " registers per thread, and sm_90 has 65536 per block, so a block may have at most " +
            std::to_string(most) + R"txt( threads
  heavy<<<1, 512>>>(n, x)
  ^~~~~~~~~~~~~~~~~~~~~~~
t.orch:5:28: note: `heavy` is defined here
extern "C" __global__ void heavy(unsigned n, double* x) {
                           ^~~~~
1 error generated.
)txt");
  CHECK(compile(edit(program, "<<<1, 512>>>", "<<<1, " + std::to_string(most) + ">>>")) == "");
  CHECK(compile(edit(program, "<<<1, 512>>>", "<<<1, dim3(32, " + std::to_string(most / 32 + 1) + ")>>>"))
            .find("error[E0206]") != std::string::npos);
}

TEST_CASE("E0204: static and dynamic shared memory together over the opt-in limit") {
  const std::string program = R"orch(pipeline p
param bytes: u64 = 184448
buffer x: f32[1024]
kernel big(x: inout f32[]) source """
extern "C" __global__ void big(float* x) {
  __shared__ float t[12000];
  extern __shared__ float more[];
  t[threadIdx.x] = x[threadIdx.x]; more[threadIdx.x] = 1.0f; __syncthreads();
  x[threadIdx.x] = t[(threadIdx.x + 1) % 32] + more[(threadIdx.x + 1) % 32];
}
"""
graph main {
  big<<<1, 32, 184449>>>(x)
}
)orch";
  CHECK(compile(program) == R"txt(t.orch:13:3: error[E0204]: launch of `big` asks for 184449 bytes of dynamic shared memory; with its 48000 bytes of static shared memory, sm_90 allows at most 184448 per block (232448 in all)
  big<<<1, 32, 184449>>>(x)
  ^~~~~~~~~~~~~~~~~~~~~~~~~
t.orch:5:28: note: `big` is defined here
extern "C" __global__ void big(float* x) {
                           ^~~
1 error generated.
)txt");
  // 232448 - 48000: the most the H200 let cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES) set.
  CHECK(compile(edit(program, "184449>>>", "184448>>>")) == "");
  auto by_param = lowered(edit(program, "184449>>>", "bytes>>>"));
  REQUIRE(by_param);
  CHECK(bind_checks_hold(*by_param, "E0204", {{0, 184448}}).first);
  CHECK_FALSE(bind_checks_hold(*by_param, "E0204", {{0, 184449}}).first);
}

const char* const kClusterProgram = R"orch(pipeline p
param blocks: u32 = 4
buffer x: f32[1024]
kernel pairs(x: inout f32[]) source """
extern "C" __global__ void __cluster_dims__(2, 1, 1) pairs(float* x) { x[blockIdx.x * 32 + threadIdx.x] *= 2.0f; }
"""
graph main {
  pairs<<<3, 32>>>(x)
}
)orch";

TEST_CASE("E0207: a grid that is not whole clusters") {
  CHECK(compile(kClusterProgram) == R"txt(t.orch:8:3: error[E0207]: grid of `pairs` has 3 blocks in x, not a multiple of 2: `pairs` is compiled with __cluster_dims__(2, 1, 1), and a grid must be whole clusters
  pairs<<<3, 32>>>(x)
  ^~~~~~~~~~~~~~~~~~~
t.orch:5:54: note: `pairs` is defined here
extern "C" __global__ void __cluster_dims__(2, 1, 1) pairs(float* x) { x[blockIdx.x * 32 + threadIdx.x] *= 2.0f; }
                                                     ^~~~~
1 error generated.
)txt");
  CHECK(compile(edit(kClusterProgram, "<<<3, 32>>>", "<<<4, 32>>>")) == "");
  auto by_param = lowered(edit(kClusterProgram, "<<<3, 32>>>", "<<<blocks, 32>>>"));
  REQUIRE(by_param);
  CHECK(bind_checks_hold(*by_param, "E0207", {{0, 8}}) == std::make_pair(true, 1));
  CHECK(bind_checks_hold(*by_param, "E0207", {{0, 7}}) == std::make_pair(false, 1));
}

TEST_CASE("E0208: a cluster past the portable size") {
  const std::string program =
      edit(edit(kClusterProgram, "__cluster_dims__(2, 1, 1)", "__cluster_dims__(16, 1, 1)"), "<<<3, 32>>>", "<<<16, 32>>>");
  CHECK(compile(program) == R"txt(t.orch:8:3: error[E0208]: `pairs` is compiled with __cluster_dims__(16, 1, 1), a cluster of 16 blocks; sm_90 allows at most 8 (the portable cluster size: orch does not opt in to larger, non-portable ones)
  pairs<<<16, 32>>>(x)
  ^~~~~~~~~~~~~~~~~~~~
t.orch:5:55: note: `pairs` is defined here
extern "C" __global__ void __cluster_dims__(16, 1, 1) pairs(float* x) { x[blockIdx.x * 32 + threadIdx.x] *= 2.0f; }
                                                      ^~~~~
1 error generated.
)txt");
  CHECK(compile(edit(program, "__cluster_dims__(16, 1, 1)", "__cluster_dims__(8, 1, 1)")) == "");
}

// The compiled-limit rules judge each variant orchc makes (a kernel waiting at entry, a guarded
// copy) by its own CUBIN. A variant that needed more registers than the kernel as written would
// make a launch that fits without the speed passes fail with them: it must not. Kernels from 40
// to 200 live values, each behind another kernel (it waits at entry) and in a `while` (guarded).
TEST_CASE("variants orchc makes need no more registers than the kernel as written") {
  for (int values : {40, 72, 104, 136, 168, 200}) {
    CAPTURE(values);
    const std::string v = std::to_string(values);
    const std::string program = R"orch(pipeline p
param n: u32 = 4096
param iters: i32 = 5
buffer a: u32[n * )orch" + v + R"orch(]
buffer s: u32[n]
buffer c: i32
kernel heavy(n: u32, a: in u32[], s: inout u32[]) source """
extern "C" __global__ void heavy(unsigned n, const unsigned* a, unsigned* s) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned v[)orch" + v + R"orch(];
#pragma unroll
  for (int j = 0; j < )orch" + v + R"orch(; ++j) v[j] = a[j * n + i];
  unsigned t = s[i];
#pragma unroll
  for (int k = 0; k < 4; ++k)
#pragma unroll
    for (int j = 0; j < )orch" + v + R"orch(; ++j) t += v[j] * v[(j * 7 + k) % )orch" + v + R"orch(];
  s[i] = t;
}
"""
graph main {
  heavy<<<ceil_div(n, 128), 128>>>(n, a, s)
  heavy<<<ceil_div(n, 128), 128>>>(n, a, s)
  c = iters
  while c > 0 {
    heavy<<<ceil_div(n, 128), 128>>>(n, a, s)
    c -= 1
  }
}
)orch";
    // Registers by symbol, the most over every image of the program compiled with `options`.
    auto registers_of = [&](const LowerOptions& options) {
      auto l = lowered(program, options);
      REQUIRE(l);
      std::map<std::string, uint32_t> registers;
      auto read_all = [&](const std::vector<lir::Image>& images) {
        for (const lir::Image& image : images) {
          std::string error;
          auto r = lowering::read_cubin_resources(image.cubin, &error);
          REQUIRE(r);
          for (const auto& [name, k] : *r) registers[name] = std::max(registers[name], k.registers);
        }
      };
      for (const lir::Module& m : l->modules) read_all(m.images);
      for (const lir::Kernel& k : l->kernels) read_all(k.images);
      std::vector<std::pair<std::string, uint32_t>> heavy;  // every entry orchc made of `heavy`
      for (const lir::Kernel& k : l->kernels)
        if (k.name == "heavy") heavy.push_back({k.lowered_name, registers.at(k.lowered_name)});
      return heavy;
    };
    const auto plain = registers_of(plain_lowering());
    REQUIRE(plain.size() == 1);
    const uint32_t written = plain[0].second;
    const auto fast = registers_of(LowerOptions{});
    MESSAGE(values, " values: ", written, " registers as written, ", fast.size(), " entries with the speed passes");
    CHECK(fast.size() >= 2);  // waiting at entry, and guarded
    for (const auto& [symbol, registers] : fast) {
      CAPTURE(symbol);
      CHECK(registers <= written);
    }
  }
}

TEST_CASE("inspect_ptx: entries, parameters, calls through device functions") {
  const std::string ptx = R"ptx(
.version 9.0
.target sm_90
.address_size 64
.extern .func  (.param .b32 func_retval0) __cudaCDP2LaunchDeviceV2
(
	.param .b64 __cudaCDP2LaunchDeviceV2_param_0,
	.param .b64 __cudaCDP2LaunchDeviceV2_param_1
)
;
.func _Z4deepPf$1
(
	.param .b64 _Z4deepPf$1_param_0
)
;
.visible .entry k1(
	.param .u64 k1_param_0,
	.param .align 16 .b8 k1_param_1[16],
	.param .f32 k1_param_2
)
.maxntid 256, 1, 1
{
	// call.uni foo; in a comment
	{ // callseq 7, 0
	.param .b64 param0;
	call.uni
	_Z4deepPf$1,
	(
	param0
	);
	}
	ret;
}
.visible .entry plain()
{
	ret;
}
.func _Z4deepPf$1(
	.param .b64 _Z4deepPf$1_param_0
)
{
	.param .b32 retval0;
	call.uni (retval0),
	__cudaCDP2LaunchDeviceV2,
	(
	param0,
	param1
	);
	call %rd4, (param0);
	ret;
}
)ptx";
  lowering::PtxModule m = lowering::parse_ptx(ptx);
  REQUIRE(m.functions.count("k1") == 1);
  const lowering::PtxFunction& k1 = m.functions.at("k1");
  CHECK(k1.entry);
  CHECK(k1.defined);
  REQUIRE(k1.params.size() == 3);
  CHECK(k1.params[0].kind == 'u');
  CHECK(k1.params[0].size == 8);
  CHECK(k1.params[1].kind == 'b');
  CHECK(k1.params[1].size == 16);
  CHECK(k1.params[1].align == 16);
  CHECK(k1.params[1].text == ".param .align 16 .b8 k1_param_1[16]");
  CHECK(k1.params[2].kind == 'f');
  CHECK(k1.params[2].size == 4);
  CHECK(k1.calls == std::set<std::string>{"_Z4deepPf$1"});
  CHECK(m.functions.at("plain").params.empty());
  CHECK(m.functions.at("_Z4deepPf$1").defined);
  CHECK(m.functions.at("_Z4deepPf$1").calls == std::set<std::string>{"__cudaCDP2LaunchDeviceV2"});
  CHECK(lowering::ptx_reaches(m, "k1", lowering::ptx_kernel_launch_calls()));
  CHECK_FALSE(lowering::ptx_reaches(m, "plain", lowering::ptx_kernel_launch_calls()));
  CHECK_FALSE(lowering::ptx_reaches(m, "k1", lowering::ptx_graph_launch_calls()));
}

}  // TEST_SUITE("compiled rules")

// ---- the checker and the loader agree ------------------------------------------------------------

namespace {

// The checked program lowered and serialized without NVRTC (each kernel gets a stand-in image:
// the validator reads no CUBIN), then opened as the runtime opens it: "" or the loader's error.
std::string check_and_load(const std::string& text, std::string* check_codes) {
  SourceManager sources;
  DiagnosticEngine diags;
  CheckResult r = check_text("t.orch", text, sources, {}, diags);
  for (const Diagnostic& d : diags.sorted()) *check_codes += (check_codes->empty() ? "" : " ") + d.code;
  if (!r.program || diags.has_errors()) return "not loaded";
  lir::Program lowered = lower_to_lir(*r.program);
  for (lir::Kernel& k : lowered.kernels) {
    k.lowered_name = k.name;
    k.images = {{"sm_90", std::string("\x7f" "ELF stand-in", 12)}};
  }
  std::string bytes = lowering::serialize(lowered, sources);
  std::vector<uint64_t> aligned((bytes.size() + 7) / 8);
  std::memcpy(aligned.data(), bytes.data(), bytes.size());
  return artifact::open_pipeline(reinterpret_cast<const uint8_t*>(aligned.data()), bytes.size()).error;
}

std::string nested_ifs(uint32_t depth) {
  std::string s = "pipeline p\nbuffer c: u32\nbuffer w: f32[16]\ngraph main {\n";
  for (uint32_t i = 0; i < depth; ++i) s += "if c != " + std::to_string(i) + " {\n";
  s += "fill w = 0\n";
  for (uint32_t i = 0; i < depth; ++i) s += "}\n";
  return s + "}\n";
}

// A main graph whose kernels `fan<k>` may make `n` launches of `mode` (split over kernels of at
// most the per-kernel budget, so only the per-graph sum is at stake), each launching the members
// of a family of its own, so that no executable graph is launched twice (E0608).
std::string launches(const std::string& mode, uint64_t n) {
  // The children touch no buffer, so no ordering rule (E0606/E0607) joins in.
  std::string s = "pipeline p\n"
                  "kernel work(n: u32) source \"\"\"extern \"C\" __global__ void work(unsigned n) { }\"\"\"\n";
  std::string calls;
  for (uint64_t k = 0; n > 0; ++k) {
    uint64_t part = std::min<uint64_t>(n, 100);
    n -= part;
    const std::string name = "fan" + std::to_string(k), child = "child" + std::to_string(k);
    s += "graph " + child + "[i: " + std::to_string(part) + "] device { work<<<1, 1>>>(1) }\n";
    s += "kernel " + name + "(g: graph[" + std::to_string(part) + "]) launches g " + mode + " <= " +
         std::to_string(part) + " source \"\"\"extern \"C\" __global__ void " + name +
         "(const cudaGraphExec_t* g) { }\"\"\"\n";
    calls += "  " + name + "<<<1, 1>>>(" + child + ")\n";
  }
  return s + "graph main {\n" + calls + "}\n";
}

std::string family(uint64_t members) {
  return "pipeline p\nbuffer x: f32[16]\n"
         "kernel work(x: inout f32[]) source \"\"\"extern \"C\" __global__ void work(float* x) { }\"\"\"\n"
         "graph experts[e: " + std::to_string(members) + "] device { work<<<1, 1>>>(x) }\n"
         "graph main { launch experts[0] tail }\n";
}

}  // namespace

TEST_SUITE("checker and loader agree") {

TEST_CASE("at each loader limit a pipeline checks and loads; one past it the checker refuses") {
  struct Limit {
    const char* what;
    std::string at, past;
    const char* code;  // what the checker says past the limit
  };
  const Limit limits[] = {
      {"conditional nesting (kMaxGraphDepth)", nested_ifs(artifact::kMaxGraphDepth),
       nested_ifs(artifact::kMaxGraphDepth + 1), "E0412"},
      {"fire-and-forget launches per execution", launches("fire_and_forget", artifact::kMaxFireAndForgetLaunches),
       launches("fire_and_forget", artifact::kMaxFireAndForgetLaunches + 1), "E0601"},
      {"tail launches per execution", launches("tail", artifact::kMaxTailLaunches),
       launches("tail", artifact::kMaxTailLaunches + 1), "E0602"},
      {"family members", family(artifact::kMaxFamilySize), family(artifact::kMaxFamilySize + 1), "E0115"},
  };
  for (const Limit& l : limits) {
    CAPTURE(l.what);
    std::string codes;
    CHECK(check_and_load(l.at, &codes) == "");
    CHECK(codes == "");
    codes.clear();
    CHECK(check_and_load(l.past, &codes) == "not loaded");
    CHECK(codes == l.code);
  }
}

TEST_CASE("the longest expressions the parser accepts make bind checks the loader accepts") {
  // A block and a fill value of (nearly) the parser's 2000 tokens, each over a param, so that
  // E0201-E0203 and E0303 record bind checks holding the expression twice: at most ~4010
  // instructions, under the loader's kMaxExprLength.
  std::string product = "t";
  while (product.size() < 2 * 997) product += "*1";  // t*1*1...: 1995 tokens, with `1, ` 1997
  const std::string text = "pipeline p\nparam t: u32 = 4\nbuffer x: u8[16]\n"
                           "kernel k(x: inout u8[]) source \"\"\"extern \"C\" __global__ void k(unsigned char* x) { }\"\"\"\n"
                           "graph main {\n  k<<<1, " + product + ">>>(x)\n  fill x = " + product + "\n}\n";
  std::string codes;
  CHECK(check_and_load(text, &codes) == "");
  CHECK(codes == "");
}

TEST_CASE("what the checker accepts in the examples and bundled pipelines, the loader loads") {
  const std::string examples = ORCH_EXAMPLES_DIR;
  size_t seen = 0;
  for (const std::string& dir : {examples, std::string(ORCH_PIPELINES_DIR)}) {
    REQUIRE_MESSAGE(fs::is_directory(dir), dir);
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.path().extension() != ".orch") continue;
      CAPTURE(entry.path().string());
      std::ifstream in(entry.path());
      std::string text((std::istreambuf_iterator<char>(in)), {});
      SourceManager sources;
      DiagnosticEngine diags;
      CheckResult r = check_file(entry.path().string(), sources, {}, diags);
      REQUIRE_FALSE(diags.has_errors());
      lir::Program lowered = lower_to_lir(*r.program);
      for (lir::Kernel& k : lowered.kernels) {
        k.lowered_name = k.name;
        k.images = {{"sm_90", "stand-in"}};
      }
      std::string bytes = lowering::serialize(lowered, sources);
      std::vector<uint64_t> aligned((bytes.size() + 7) / 8);
      std::memcpy(aligned.data(), bytes.data(), bytes.size());
      CHECK(artifact::open_pipeline(reinterpret_cast<const uint8_t*>(aligned.data()), bytes.size()).error == "");
      ++seen;
    }
  }
  CHECK(seen >= 11);
}

TEST_CASE("the ordering verifier requires every kind of ordering: RAW, WAR, WAW, condition") {
  // Each dropped edge below is the only ordering between its two nodes, and only the rule named
  // needs it (the mutation check, scripts/mutate-rules, relies on that).
  const std::string text = R"orch(pipeline p
buffer x: f32[16]
buffer y: f32[16]
buffer flag: u32
kernel k(x: in f32[], y: out f32[]) source """extern "C" __global__ void k(const float* x, float* y) { }"""
graph main {
  k<<<1, 16>>>(x, y)
  fill x = 2
  fill y = 3
  k<<<1, 16>>>(x, y)
  if flag != 0 { fill x = 4 }
}
)orch";
  SourceManager sources;
  DiagnosticEngine diags;
  CheckResult r = check_text("t.orch", text, sources, {}, diags);
  REQUIRE_FALSE(diags.has_errors());
  lir::Program lowered = lower_to_lir(*r.program);
  lir::Body& main = lowered.graphs[lowered.main_graph].body;
  DiagnosticEngine ok;
  REQUIRE(lowering::verify_ordering(lowered, ok));
  // Nodes: 0 k (reads x, writes y), 1 fill x, 2 fill y, 3 k, 4 condition kernel, 5 if.
  REQUIRE(main.nodes.size() == 6);
  const struct {
    const char* kind;
    int from, to;
    const char* says;
  } drops[] = {
      {"WAR: fill x after k read it", 0, 1, "conflicts with on `x`"},
      {"WAW: fill y after k wrote it", 0, 2, "conflicts with on `y`"},
      {"RAW: k reads the x the fill wrote", 1, 3, "conflicts with on `x`"},
      {"condition kernel before its if", 4, 5, "may run before the kernel that sets its condition"},
  };
  for (const auto& d : drops) {
    const std::string kind = d.kind;
    CAPTURE(kind);
    lir::Body copy = main;
    std::vector<lir::Dep>& deps = main.nodes[d.to].deps;
    auto it = std::find_if(deps.begin(), deps.end(),
                           [&](const lir::Dep& e) { return static_cast<int>(e.from) == d.from; });
    REQUIRE(it != deps.end());
    deps.erase(it);
    DiagnosticEngine bad;
    CHECK_FALSE(lowering::verify_ordering(lowered, bad));
    REQUIRE(bad.has_errors());
    CHECK(bad.all()[0].code == "E0899");
    INFO(bad.all()[0].message);
    CHECK(bad.all()[0].message.find(d.says) != std::string::npos);
    main = copy;
  }
}

}  // TEST_SUITE("checker and loader agree")

}  // namespace orch
