// The kernel compiler end to end: NVRTC and nvJitLink run for real (no GPU needed), the
// examples' kernels are read in place from examples/.
#include "lowering/shared_memory_test_kernels.h"
#include "lowering/kernel_compiler.h"

#include <doctest/doctest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>

#include "lowering/cubin_resources.h"
#include "lowering/kernel_cache.h"
#include "lowering/nvrtc_log.h"

namespace orch {
namespace {

namespace fs = std::filesystem;

std::string examples_dir() {
  return ORCH_EXAMPLES_DIR;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  if (!out) throw std::runtime_error("cannot write " + path);
}

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "orch_lowering_XXXXXX").string();
    if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The text between `source """` and `"""` after `kernel NAME(` in .orch text, and the line and
// column where it starts, the way the front end hands inline kernels over.
struct Inline {
  std::string code;
  uint32_t line = 0, col = 0;
};
Inline inline_source(const std::string& orch, const std::string& kernel) {
  size_t k = orch.find("kernel " + kernel + "(");
  size_t open = orch.find("source \"\"\"", k);
  if (k == std::string::npos || open == std::string::npos) throw std::runtime_error("no " + kernel);
  size_t begin = open + 10;
  size_t end = orch.find("\"\"\"", begin);
  Inline out;
  out.code = orch.substr(begin, end - begin);
  out.line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < begin; ++i)
    if (orch[i] == '\n') ++out.line, line_start = i + 1;
  out.col = static_cast<uint32_t>(begin - line_start + 1);
  return out;
}

bool is_elf(const std::string& image) {
  return image.rfind(
             "\x7f"
             "ELF",
             0) == 0;
}
// ELF e_type: 1 relocatable, 2 executable (a fully linked CUBIN).
int elf_type(const std::string& image) {
  return image.size() > 17 ? static_cast<unsigned char>(image[16]) | (image[17] << 8) : -1;
}

const char* kScale = R"(extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
)";

KernelSource plain(std::string name, std::string code) {
  KernelSource s;
  s.name = name;
  s.file_name = name + ".cu";
  s.code = std::move(code);
  return s;
}

CompileOptions no_cache(std::vector<std::string> archs) {
  CompileOptions o;
  o.archs = std::move(archs);
  o.use_cache = false;
  return o;
}

std::string text_of(const DiagnosticEngine& diags, const SourceManager& sm) {
  return format_diagnostics(diags.all(), sm, DiagnosticFormat::Text);
}

TEST_CASE("an extern \"C\" kernel compiles to a CUBIN per arch and PTX for the newest") {
  DiagnosticEngine diags;
  auto out = compile_kernels({plain("scale", kScale)}, no_cache({"sm_80", "sm_90"}), diags);
  REQUIRE(out.size() == 1);
  REQUIRE(out[0].has_value());
  CHECK(diags.all().empty());
  const CompiledKernel& k = *out[0];
  CHECK(k.name == "scale");
  CHECK(k.lowered_name == "scale");
  REQUIRE(k.cubins.size() == 2);
  CHECK(k.cubins[0].arch == "sm_80");
  CHECK(k.cubins[1].arch == "sm_90");
  for (const KernelImage& img : k.cubins) {
    CHECK(is_elf(img.cubin));
    CHECK(elf_type(img.cubin) == 2);
    CHECK_FALSE(img.from_cache);
  }
  CHECK(k.cubins[0].cubin != k.cubins[1].cubin);
  CHECK(k.ptx_arch == "compute_90");
  CHECK(k.ptx.find(".entry scale") != std::string::npos);
  CHECK(k.ptx.find(".target sm_90") != std::string::npos);
  CHECK_FALSE(k.device_runtime);
  CHECK_FALSE(k.ptx_relocatable);
  CHECK(k.cache_hits == 0);
  CHECK(k.cache_misses == 0);
}

TEST_CASE("a template kernel's entry expression gets its mangled name") {
  DiagnosticEngine diags;
  KernelSource s = plain("scale", R"(template <typename T>
__global__ void scale(unsigned n, T a, T* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
)");
  s.entries = {{s.name, "scale<float>", {}, {}}};
  auto out = compile_kernels({s}, no_cache({"sm_90"}), diags);
  REQUIRE(out[0].has_value());
  CHECK(out[0]->lowered_name == "_Z5scaleIfEvjT_PS0_");
  CHECK(out[0]->ptx.find(".entry _Z5scaleIfEvjT_PS0_") != std::string::npos);
}

// What real kernels include (issue 20): the toolkit's headers as nvcc finds them, CCCL's
// (include/cccl in CUDA 13) among them.
TEST_CASE("kernels include cooperative groups, cuda::atomic, cuda::barrier, cuda::ptx and cub") {
  DiagnosticEngine diags;
  SourceManager sm;
  KernelSource s = plain("reduce", R"(#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cuda/atomic>
#include <cuda/barrier>
#include <cuda/ptx>
#include <cub/block/block_reduce.cuh>
namespace cg = cooperative_groups;
extern "C" __global__ void reduce(const int* x, int* out) {
  using Reduce = cub::BlockReduce<int, 128>;
  __shared__ typename Reduce::TempStorage temp;
  __shared__ cuda::barrier<cuda::thread_scope_block> bar;
  cg::thread_block block = cg::this_thread_block();
  if (block.thread_rank() == 0) init(&bar, block.size());
  block.sync();
  bar.arrive_and_wait();
  const int v = x[blockIdx.x * 128 + threadIdx.x];
  const int tile_sum = cg::reduce(cg::tiled_partition<32>(block), v, cg::plus<int>());
  const int sum = Reduce(temp).Sum(v);
  if (threadIdx.x == 0) {
    cuda::atomic_ref<int, cuda::thread_scope_device> total(*out);
    total.fetch_add(sum + 0 * tile_sum, cuda::std::memory_order_relaxed);
    (void)cuda::ptx::get_sreg_smid();
  }
}
)");
  s.origin = {sm.add("reduce.cu", s.code), {1, 1}, {1, 1}};
  auto out = compile_kernels({s}, no_cache({"sm_90"}), diags);
  INFO(text_of(diags, sm));
  REQUIRE(out[0].has_value());
  CHECK(!diags.has_errors());
  CHECK(out[0]->lowered_name == "reduce");
}

TEST_CASE("device-runtime kernels are linked against cudadevrt") {
  SourceManager sm;
  std::string moe_path = examples_dir() + "/moe.cu";
  std::string moe = read_file(moe_path);
  KernelSource route;
  route.name = "route";
  route.code = moe;
  route.file_name = moe_path;
  route.uses_device_runtime = true;  // it has `graph` parameters
  route.origin = {sm.add(moe_path, moe), {1, 1}, {1, 1}};

  std::string countdown_path = examples_dir() + "/countdown.orch";
  std::string countdown = read_file(countdown_path);
  Inline step_src = inline_source(countdown, "step");
  KernelSource step;
  step.name = "step";
  step.code = step_src.code;
  step.file_name = "countdown.orch";
  step.uses_device_runtime = false;  // left to the scan for cudaGraphSetConditional
  step.origin = {sm.add(countdown_path, countdown), {step_src.line, 1}, {step_src.line, 1}};
  step.first_line_in_origin = step_src.line;
  step.first_col_in_origin = step_src.col;

  DiagnosticEngine diags;
  auto out = compile_kernels({route, step}, no_cache({"sm_80", "sm_90"}), diags);
  INFO(text_of(diags, sm));
  CHECK(diags.all().empty());
  for (const auto& k : out) {
    REQUIRE(k.has_value());
    CHECK(k->device_runtime);
    CHECK(k->ptx_relocatable);
    CHECK(k->lowered_name == k->name);
    REQUIRE(k->cubins.size() == 2);
    for (const KernelImage& img : k->cubins) {
      CHECK(is_elf(img.cubin));
      CHECK(elf_type(img.cubin) == 2);  // linked, not the relocatable -rdc output
    }
    CHECK(k->ptx.find(".entry " + k->name) != std::string::npos);
  }
  CHECK(out[0]->ptx.find("cudaGraphLaunch") != std::string::npos);
  CHECK(out[1]->ptx.find("cudaGraphSetConditional") != std::string::npos);
}

// What nvlink gives nvcc's by-hand build: cudadevrt's members only where the code references
// what they define. nvJitLink takes a library whole, so every device-runtime kernel used to carry
// all of cuda_device_runtime.o (32 kernels of its own, 13 KB of initialized globals; the MoE
// route kernel 206,432 bytes against nvlink's 8,928).
TEST_CASE("cudadevrt is linked only into code that references it, as nvlink links it") {
  SourceManager sm;
  // Graph launches only (examples/moe.cu's route, countdown's cudaGraphSetConditional): the driver
  // resolves them; the image holds the kernel and nothing of cudadevrt.
  const std::string moe_path = examples_dir() + "/moe.cu";
  const std::string moe = read_file(moe_path);
  KernelSource route;
  route.name = "route";
  route.code = moe;
  route.file_name = moe_path;
  route.uses_device_runtime = true;
  route.origin = {sm.add(moe_path, moe), {1, 1}, {1, 1}};
  // A device-side launch and cudaMalloc: cudadevrt's __cudaCDP2* functions, linked in.
  KernelSource parent = plain("parent", R"(extern "C" __global__ void child(int* p) { *p = 1; }
extern "C" __global__ void parent(int* p) {
  child<<<1, 1>>>(p);
  void* q = nullptr;
  if (cudaMalloc(&q, 16) == cudaSuccess) cudaFree(q);
}
)");
  parent.uses_device_runtime = true;
  DiagnosticEngine diags;
  auto out = compile_kernels({route, parent}, no_cache({"sm_80", "sm_90"}), diags);
  INFO(text_of(diags, sm));
  CHECK(diags.all().empty());
  REQUIRE(out[0].has_value());
  REQUIRE(out[1].has_value());
  for (const KernelImage& img : out[0]->cubins) {
    INFO(img.arch);
    CHECK(elf_type(img.cubin) == 2);
    std::string error;
    auto kernels = lowering::read_cubin_resources(img.cubin, &error);
    REQUIRE(kernels.has_value());
    CHECK(kernels->size() == 3);  // moe.cu's route, expert_ffn and combine: no memcpy_3d_device of cudadevrt's
    CHECK(kernels->count("route") == 1);
    for (const auto& [name, r] : *kernels) CHECK_MESSAGE(name.find("cuda_device_runtime") == std::string::npos, name);
    CHECK(img.cubin.find("__cudaCDP2") == std::string::npos);
    CHECK(img.cubin.find("cudaGraphLaunch") != std::string::npos);  // left to the driver
    CHECK(img.cubin.size() < 32 * 1024);
  }
  for (const KernelImage& img : out[1]->cubins) {
    INFO(img.arch);
    CHECK(elf_type(img.cubin) == 2);
    CHECK(img.cubin.find("__cudaCDP2LaunchDeviceV2") != std::string::npos);
    std::string error;
    auto kernels = lowering::read_cubin_resources(img.cubin, &error);
    REQUIRE(kernels.has_value());
    CHECK(kernels->count("parent") == 1);
    CHECK(kernels->count("child") == 1);
  }
}

// The expert kernel of bench/real_workloads.py's MoE rows: a k loop over 16 rows of x in shared
// memory. NVRTC 13.0 addresses shared memory with 64-bit pointers and leaves the loop rolled (48
// registers on sm_90); nvcc, with 32-bit ones, unrolls it twice (40): kernel_toolchain.cpp, nvcc_ptx.
const char* const kExpert = orch::lowering::test::kExpertFfn;
const char* const kSgemm = orch::lowering::test::kSgemm;


// The nvcc tests compare with: $ORCH_NVCC, else $CUDA_HOME's, else /usr/local/cuda's; empty if none.
std::string test_nvcc() {
  const char* given = std::getenv("ORCH_NVCC");
  std::string p = given && *given ? given
                  : std::getenv("CUDA_HOME") && *std::getenv("CUDA_HOME")
                      ? std::string(std::getenv("CUDA_HOME")) + "/bin/nvcc"
                      : "/usr/local/cuda/bin/nvcc";
  return access(p.c_str(), X_OK) == 0 ? p : std::string();
}

uint32_t registers_of(const std::string& cubin, const std::string& kernel) {
  std::string error;
  auto r = lowering::read_cubin_resources(cubin, &error);
  INFO(error);
  REQUIRE(r.has_value());
  REQUIRE(r->count(kernel) == 1);
  return r->at(kernel).registers;
}

// nvcc's CUBIN of `code` (`nvcc -cubin -arch=ARCH FLAGS`), as the by-hand build makes it.
std::string nvcc_cubin(const std::string& nvcc, const std::string& code, const std::string& arch,
                       const std::string& flags = "") {
  TempDir dir;
  write_file(dir.path() + "/k.cu", code);
  const std::string cmd = "'" + nvcc + "' -cubin -arch=" + arch + " -std=c++17 " + flags + " '" + dir.path() +
                          "/k.cu' -o '" + dir.path() + "/k.cubin' 2>&1";
  REQUIRE_MESSAGE(std::system(cmd.c_str()) == 0, cmd);
  return read_file(dir.path() + "/k.cubin");
}

// A shared-memory address taken whole into a 64-bit register (`mov.u64 %rd1, xs;`): NVRTC's way.
bool shared_addresses_64_bit(const std::string& ptx, const std::string& symbol) {
  return std::regex_search(ptx, std::regex("mov\\.u64\\s+%rd[0-9]+, " + symbol + ";"));
}

TEST_CASE("a kernel that uses shared memory is compiled as nvcc compiles it: no more registers") {
  const std::string nvcc = test_nvcc();
  if (nvcc.empty()) {
    MESSAGE("SKIPPED: no nvcc (set ORCH_NVCC or CUDA_HOME)");
    return;
  }
  DiagnosticEngine diags;
  auto out = compile_kernels({plain("expert_ffn", kExpert)}, no_cache({"sm_90"}), diags);
  REQUIRE(out[0].has_value());
  CHECK(diags.all().empty());
  const uint32_t orch = registers_of(out[0]->cubins[0].cubin, "expert_ffn");
  const uint32_t by_hand = registers_of(nvcc_cubin(nvcc, kExpert, "sm_90"), "expert_ffn");
  // The by-hand build is relocatable (-rdc=true: the ejected file's route launches graphs).
  const uint32_t by_hand_rdc = registers_of(nvcc_cubin(nvcc, kExpert, "sm_90", "-rdc=true"), "expert_ffn");
  MESSAGE("expert_ffn on sm_90: orchc " << orch << " registers, nvcc " << by_hand << ", nvcc -rdc=true "
                                        << by_hand_rdc);
  CHECK(orch <= by_hand);
  CHECK(orch <= by_hand_rdc);
  // nvcc's PTX: 32-bit shared addresses, the k loop unrolled twice (3 x 16 FMAs with the rest).
  CHECK_FALSE(shared_addresses_64_bit(out[0]->ptx, "xs"));
  const std::string body = out[0]->ptx.substr(out[0]->ptx.find(".entry expert_ffn("));
  size_t fmas = 0;
  for (size_t at = body.find("fma.rn.f32"); at != std::string::npos; at = body.find("fma.rn.f32", at + 1)) ++fmas;
  CHECK(fmas == 48);

  // NVRTC alone still compiles it (use_nvcc off, as where nvcc is missing): its own PTX.
  CompileOptions o = no_cache({"sm_90"});
  o.use_nvcc = false;
  DiagnosticEngine d2;
  auto alone = compile_kernels({plain("expert_ffn", kExpert)}, o, d2);
  REQUIRE(alone[0].has_value());
  CHECK(shared_addresses_64_bit(alone[0]->ptx, "xs"));
  MESSAGE("NVRTC alone: " << registers_of(alone[0]->cubins[0].cubin, "expert_ffn") << " registers");

  // nvcc's PTX of a unit without the device runtime compiled whole (--shared-memory-code
  // whole-program; auto links the SGEMM's by nvJitLink, shared_memory_code_test.cpp), as NVRTC's
  // is: no more registers than either NVRTC alone or nvcc -cubin.
  DiagnosticEngine d3;
  CompileOptions whole = no_cache({"sm_90"});
  whole.shared_memory_code = SharedMemoryCode::whole_program;
  auto sgemm = compile_kernels({plain("sgemm", kSgemm)}, whole, d3);
  auto sgemm_alone = compile_kernels({plain("sgemm", kSgemm)}, o, d3);
  REQUIRE(sgemm[0].has_value());
  REQUIRE(sgemm_alone[0].has_value());
  CHECK_FALSE(shared_addresses_64_bit(sgemm[0]->ptx, "_ZZ5sgemmE2sa"));
  CHECK(elf_type(sgemm[0]->cubins[0].cubin) == 2);
  const uint32_t sgemm_orch = registers_of(sgemm[0]->cubins[0].cubin, "sgemm");
  MESSAGE("sgemm on sm_90: orchc " << sgemm_orch << " registers, NVRTC alone "
                                   << registers_of(sgemm_alone[0]->cubins[0].cubin, "sgemm"));
  CHECK(sgemm_orch <= registers_of(sgemm_alone[0]->cubins[0].cubin, "sgemm"));
  CHECK(sgemm_orch <= registers_of(nvcc_cubin(nvcc, kSgemm, "sm_90"), "sgemm"));
}

TEST_CASE("nvcc's PTX takes orchc's entry patches, cudadevrt and template entries; a failing nvcc leaves NVRTC's") {
  const std::string nvcc = test_nvcc();
  if (nvcc.empty()) {
    MESSAGE("SKIPPED: no nvcc (set ORCH_NVCC or CUDA_HOME)");
    return;
  }
  // Shared memory and a device graph launch (-rdc, cudadevrt), entered both as it is and with a
  // wait at its entry (a patched copy); a template kernel named by its entry expression.
  const std::string code = R"(__device__ int launched;
extern "C" __global__ void route(const int* expert_of, int* counts, cudaGraphExec_t g) {
  __shared__ int hist[8];
  if (threadIdx.x < 8) hist[threadIdx.x] = 0;
  __syncthreads();
  atomicAdd(&hist[expert_of[threadIdx.x] & 7], 1);
  __syncthreads();
  if (threadIdx.x < 8) counts[threadIdx.x] = hist[threadIdx.x];
  if (threadIdx.x == 0 && hist[0] > 0) { ++launched; cudaGraphLaunch(g, cudaStreamGraphFireAndForget); }
}
template <typename T>
__global__ void tile_sum(const T* x, T* out) {
  __shared__ T s[64];
  s[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  if (threadIdx.x == 0) { T t = 0; for (int i = 0; i < 64; ++i) t += s[i]; *out = t; }
}
)";
  KernelSource s = plain("route", code);
  s.uses_device_runtime = true;
  KernelEntry plain_route{"route", "", {}, {}};
  KernelEntry waiting{"route_waits", "route", {}, {}};
  waiting.patch.wait = true;
  KernelEntry sum{"tile_sum", "tile_sum<float>", {}, {}};
  s.entries = {plain_route, waiting, sum};
  DiagnosticEngine diags;
  auto out = compile_kernels({s}, no_cache({"sm_90"}), diags);
  REQUIRE(out[0].has_value());
  CHECK(diags.all().empty());
  const CompiledKernel& k = *out[0];
  REQUIRE(k.symbols.size() == 3);
  CHECK(k.symbols[0] == "route");
  CHECK(k.symbols[1] != "route");
  CHECK(k.symbols[2] == "_Z8tile_sumIfEvPKT_PS0_");
  CHECK(elf_type(k.cubins[0].cubin) == 2);  // linked with cudadevrt
  CHECK(k.ptx_relocatable);
  CHECK(k.ptx.find("griddepcontrol.wait") != std::string::npos);
  CHECK(k.ptx.find(".entry _Z8tile_sumIfEvPKT_PS0_(") != std::string::npos);
  CHECK_FALSE(shared_addresses_64_bit(k.ptx, "_ZZ5routeE4hist"));
  std::string error;
  auto resources = lowering::read_cubin_resources(k.cubins[0].cubin, &error);
  REQUIRE(resources.has_value());
  for (const std::string& sym : k.symbols) CHECK(resources->count(sym) == 1);

  // An nvcc that fails: NVRTC's PTX, the same kernels, no message.
  const char* before = std::getenv("ORCH_NVCC");
  const std::string saved = before ? before : "";
  setenv("ORCH_NVCC", "/bin/false", 1);
  DiagnosticEngine d2;
  auto fallback = compile_kernels({s}, no_cache({"sm_90"}), d2);
  if (before) setenv("ORCH_NVCC", saved.c_str(), 1); else unsetenv("ORCH_NVCC");
  REQUIRE(fallback[0].has_value());
  CHECK(d2.all().empty());
  CHECK(fallback[0]->symbols == k.symbols);
  CHECK(shared_addresses_64_bit(fallback[0]->ptx, "_ZZ5routeE4hist"));
  CHECK(elf_type(fallback[0]->cubins[0].cubin) == 2);
}

TEST_CASE("whether nvcc may give the PTX is part of the cache key") {
  if (test_nvcc().empty()) {
    MESSAGE("SKIPPED: no nvcc (set ORCH_NVCC or CUDA_HOME)");
    return;
  }
  TempDir dir;
  CompileOptions o;
  o.archs = {"sm_90"};
  o.cache_dir = dir.path();
  const std::vector<KernelSource> sources = {plain("expert_ffn", kExpert)};
  DiagnosticEngine diags;
  auto with = compile_kernels(sources, o, diags);
  o.use_nvcc = false;
  auto without = compile_kernels(sources, o, diags);
  o.use_nvcc = true;
  auto again = compile_kernels(sources, o, diags);
  REQUIRE(with[0].has_value());
  REQUIRE(without[0].has_value());
  REQUIRE(again[0].has_value());
  CHECK(with[0]->cache_misses == 2);
  CHECK(without[0]->cache_misses == 2);  // not nvcc's images
  CHECK(without[0]->ptx != with[0]->ptx);
  CHECK(again[0]->cache_hits == 2);
  CHECK(again[0]->ptx == with[0]->ptx);
  CHECK_FALSE(diags.has_errors());

  // nvcc finds a unit's headers where NVRTC does (its include folders), and a changed header
  // is a miss for nvcc's images too.
  fs::create_directories(dir.path() + "/inc");
  write_file(dir.path() + "/inc/tile.cuh", "#pragma once\n__shared__ float tile[64];\n");
  KernelSource t = plain("t", "#include \"tile.cuh\"\nextern \"C\" __global__ void t(float* x) {\n"
                              "  tile[threadIdx.x] = x[threadIdx.x];\n  __syncthreads();\n"
                              "  x[threadIdx.x] = tile[63 - threadIdx.x];\n}\n");
  t.include_dirs = {dir.path() + "/inc"};
  auto t1 = compile_kernels({t}, o, diags);
  REQUIRE(t1[0].has_value());
  CHECK_FALSE(shared_addresses_64_bit(t1[0]->ptx, "tile"));
  CHECK(t1[0]->ptx.find("tile[256]") != std::string::npos);
  write_file(dir.path() + "/inc/tile.cuh", "#pragma once\n__shared__ float tile[128];\n");
  auto t2 = compile_kernels({t}, o, diags);
  REQUIRE(t2[0].has_value());
  CHECK(t2[0]->cache_misses == 2);
  CHECK(t2[0]->ptx.find("tile[512]") != std::string::npos);
  CHECK_FALSE(diags.has_errors());
}

TEST_CASE("a syntax error in an inline source points at its .orch line and column") {
  const std::string orch = R"(pipeline bad
target sm_90

kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a
  x[0] = 1.0f;
  x[1] = undefined_value;
}
"""
)";
  SourceManager sm;
  uint32_t file = sm.add("bad.orch", orch);
  Inline src = inline_source(orch, "scale");
  KernelSource s;
  s.name = "scale";
  s.code = src.code;
  s.file_name = "bad.orch";
  s.origin = {file, {4, 1}, {4, 7}};
  s.first_line_in_origin = src.line;
  s.first_col_in_origin = src.col;
  DiagnosticEngine diags;
  auto out = compile_kernels({s}, no_cache({"sm_80", "sm_90"}), diags);
  CHECK_FALSE(out[0].has_value());
  CHECK(text_of(diags, sm) ==
        "bad.orch:8:3: error[E0901]: expected a \";\"\n"
        "  x[0] = 1.0f;\n"
        "  ^\n"
        "bad.orch:9:10: error[E0901]: identifier \"undefined_value\" is undefined\n"
        "  x[1] = undefined_value;\n"
        "         ^~~~~~~~~~~~~~~\n"
        "2 errors generated.\n");
}

TEST_CASE("code that starts on the `source \"\"\"` line keeps its column offset") {
  const std::string orch =
      "pipeline p\n"
      "kernel f(x: out f32[]) source \"\"\"extern \"C\" __global__ void f(float* x) { *x = nope; "
      "}\"\"\"\n";
  SourceManager sm;
  uint32_t file = sm.add("one.orch", orch);
  Inline src = inline_source(orch, "f");
  KernelSource s = plain("f", src.code);
  s.file_name = "one.orch";
  s.origin = {file, {2, 1}, {2, 7}};
  s.first_line_in_origin = src.line;
  s.first_col_in_origin = src.col;
  DiagnosticEngine diags;
  compile_kernels({s}, no_cache({"sm_90"}), diags);
  REQUIRE(diags.all().size() == 1);
  const Diagnostic& d = diags.all()[0];
  CHECK(d.code == "E0901");
  CHECK(d.message == "identifier \"nope\" is undefined");
  CHECK(d.range.begin.line == 2);
  CHECK(d.range.begin.col == orch.find("nope") - orch.find('\n'));
  CHECK(d.range.end.col == d.range.begin.col + 4);
}

TEST_CASE("joined code maps each message to the statement of the kernel that holds it") {
  // Two kernels in one program (as the module of generated kernels is), each in a namespace
  // of its own; the second has an error, which belongs to the second statement.
  const std::string orch = "pipeline p\ngraph main {\n  first\n  second\n}\n";
  SourceManager sm;
  uint32_t file = sm.add("joined.orch", orch);
  KernelSource s = plain("joined", "namespace a {\n"
                                   "extern \"C\" __global__ void ka(float* x) { *x = 1; }\n"
                                   "}\n"
                                   "namespace b {\n"
                                   "extern \"C\" __global__ void kb(float* x) {\n"
                                   "  *x = nope;\n"
                                   "}\n"
                                   "}\n");
  s.entries = {{s.name, "a::ka", {}, {}}};
  s.origin = {file, {3, 3}, {3, 8}};
  s.segments = {{1, {file, {3, 3}, {3, 8}}}, {4, {file, {4, 3}, {4, 9}}}};
  DiagnosticEngine diags;
  compile_kernels({s}, no_cache({"sm_90"}), diags);
  REQUIRE(diags.all().size() == 1);
  const Diagnostic& d = diags.all()[0];
  CHECK(d.code == "E0901");
  CHECK(d.message == "identifier \"nope\" is undefined");
  CHECK(d.range.begin.line == 4);
  CHECK(d.range.begin.col == 3);
  CHECK(d.range.end.col == 9);
  // Without the error both kernels are entries of one image, under their own names: a kernel
  // declared extern "C" inside a namespace keeps its plain symbol.
  s.code.replace(s.code.find("nope"), 4, "2");
  DiagnosticEngine clean;
  auto out = compile_kernels({s}, no_cache({"sm_90"}), clean);
  REQUIRE(out[0].has_value());
  CHECK(clean.all().empty());
  CHECK(out[0]->lowered_name == "ka");
  CHECK(out[0]->ptx.find(".entry ka(") != std::string::npos);
  CHECK(out[0]->ptx.find(".entry kb(") != std::string::npos);
}

TEST_CASE("errors in a `from` file point into the .cu file; warnings are W0901") {
  const std::string cu =
      "extern \"C\" __global__ void k(float* x) {\n"
      "  int unused = 3;\n"
      "  x[0] = 1.0f;\n"
      "}\n";
  SourceManager sm;
  KernelSource s = plain("k", cu);
  s.file_name = "/nonexistent/k.cu";
  s.origin = {sm.add("k.cu", cu), {1, 1}, {1, 1}};
  DiagnosticEngine diags;
  auto out = compile_kernels({s}, no_cache({"sm_80", "sm_90"}), diags);
  REQUIRE(out[0].has_value());
  CHECK_FALSE(diags.has_errors());
  // Reported once, although NVRTC ran three times (two CUBINs and the PTX).
  CHECK(text_of(diags, sm) ==
        "k.cu:2:7: warning[W0901]: variable \"unused\" was declared but never referenced "
        "[#177-D]\n"
        "  int unused = 3;\n"
        "      ^~~~~~\n"
        "1 warning generated.\n");
  CHECK(out[0]->log.find("#177-D") != std::string::npos);
}

TEST_CASE("a template error carries its instantiation point as a note") {
  const std::string cu =
      "struct S {};\n"
      "template <typename T> __global__ void scale(float a, T* x) {\n"
      "  x[0] *= a;\n"
      "}\n"
      "template __global__ void scale<S>(float, S*);\n";
  SourceManager sm;
  KernelSource s = plain("scale", cu);
  s.entries = {{s.name, "scale<S>", {}, {}}};
  s.origin = {sm.add("t.cu", cu), {1, 1}, {1, 1}};
  DiagnosticEngine diags;
  compile_kernels({s}, no_cache({"sm_90"}), diags);
  REQUIRE(diags.all().size() == 1);
  const Diagnostic& d = diags.all()[0];
  CHECK(d.message == "no operator \"*=\" matches these operands; operand types are: S *= float");
  CHECK(d.range.begin.line == 3);
  CHECK(d.range.begin.col == 8);
  bool instantiation_note = false;
  for (const DiagnosticNote& n : d.notes)
    if (n.message.find("detected during instantiation") != std::string::npos) {
      instantiation_note = true;
      CHECK(n.range.begin.line == 5);
    }
  CHECK(instantiation_note);
}

TEST_CASE("an entry that names nothing, an unknown arch and a bad flag are clear errors") {
  SourceManager sm;
  uint32_t file = sm.add("k.orch", "kernel scale(...)\n");
  KernelSource s = plain("scale", kScale);
  s.origin = {file, {1, 1}, {1, 7}};
  {
    s.entries = {{s.name, "scale<float>", {}, {}}};
    DiagnosticEngine diags;
    auto out = compile_kernels({s}, no_cache({"sm_90"}), diags);
    CHECK_FALSE(out[0].has_value());
    REQUIRE(diags.all().size() == 1);
    CHECK(diags.all()[0].code == "E0901");
    CHECK(diags.all()[0].range.begin.line == 1);
    CHECK(diags.all()[0].message.rfind("entry \"scale<float>\" of kernel 'scale' does not name",
                                       0) == 0);
    s.entries.clear();
  }
  {
    DiagnosticEngine diags;
    auto out = compile_kernels({s}, no_cache({"sm_90", "sm_1"}), diags);
    CHECK_FALSE(out[0].has_value());
    REQUIRE(diags.all().size() == 1);
    CHECK(diags.all()[0].code == "E0111");
    CHECK(diags.all()[0].message.find("'sm_1'") != std::string::npos);
  }
  {
    DiagnosticEngine diags;
    CompileOptions o = no_cache({"sm_90"});
    o.extra_flags = {"--no-such-flag"};
    auto out = compile_kernels({s}, o, diags);
    CHECK_FALSE(out[0].has_value());
    REQUIRE(diags.all().size() == 1);
    CHECK(diags.all()[0].code == "E0901");
    CHECK(diags.all()[0].range.begin.line == 1);
    CHECK(diags.all()[0].message.find("--no-such-flag") != std::string::npos);
  }
}

std::vector<fs::path> cache_files(const std::string& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".okc") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

TEST_CASE("the cache hits the second time and survives corrupt files") {
  TempDir dir;
  CompileOptions o;
  o.archs = {"sm_80", "sm_90"};
  o.cache_dir = dir.path();
  KernelSource warn =
      plain("warn", "extern \"C\" __global__ void warn(int* x) { int unused; *x = 1; }\n");
  std::vector<KernelSource> sources = {plain("scale", kScale), warn};

  DiagnosticEngine d1;
  auto t0 = std::chrono::steady_clock::now();
  auto first = compile_kernels(sources, o, d1);
  auto t1 = std::chrono::steady_clock::now();
  DiagnosticEngine d2;
  auto second = compile_kernels(sources, o, d2);
  auto t2 = std::chrono::steady_clock::now();
  double cold = std::chrono::duration<double>(t1 - t0).count();
  double warm = std::chrono::duration<double>(t2 - t1).count();
  MESSAGE("cold " << cold << " s, warm " << warm << " s");

  for (size_t i = 0; i < sources.size(); ++i) {
    REQUIRE(first[i].has_value());
    REQUIRE(second[i].has_value());
    CHECK(first[i]->cache_misses == 3);
    CHECK(first[i]->cache_hits == 0);
    CHECK(second[i]->cache_hits == 3);
    CHECK(second[i]->cache_misses == 0);
    CHECK(second[i]->cubins[1].from_cache);
    CHECK(second[i]->lowered_name == first[i]->lowered_name);
    CHECK(second[i]->ptx == first[i]->ptx);
    for (size_t a = 0; a < 2; ++a) CHECK(second[i]->cubins[a].cubin == first[i]->cubins[a].cubin);
  }
  // A hit replays the warnings a miss reported.
  REQUIRE(d1.all().size() == 1);
  REQUIRE(d2.all().size() == 1);
  CHECK(d2.all()[0].code == "W0901");
  CHECK(d2.all()[0].message == d1.all()[0].message);

  std::vector<fs::path> files = cache_files(dir.path());
  REQUIRE(files.size() == 6);
  std::vector<std::string> good;
  for (const fs::path& f : files) good.push_back(read_file(f.string()));
  // Damage four: a flipped byte mid-image, a cut-off tail, an empty file, and a valid file
  // written under another key.
  std::string flipped = good[0];
  flipped[flipped.size() / 2] ^= 0x5a;
  write_file(files[0].string(), flipped);
  write_file(files[1].string(), good[1].substr(0, good[1].size() - 7));
  write_file(files[2].string(), "");
  write_file(files[3].string(), good[4]);

  DiagnosticEngine d3;
  auto third = compile_kernels(sources, o, d3);
  unsigned hits = 0, misses = 0;
  for (const auto& k : third) {
    REQUIRE(k.has_value());
    hits += k->cache_hits;
    misses += k->cache_misses;
  }
  CHECK(hits == 2);
  CHECK(misses == 4);
  CHECK_FALSE(d3.has_errors());
  for (size_t i = 0; i < sources.size(); ++i) {
    CHECK(third[i]->ptx == first[i]->ptx);
    for (size_t a = 0; a < 2; ++a) CHECK(third[i]->cubins[a].cubin == first[i]->cubins[a].cubin);
  }
  // The damaged files were rewritten whole.
  for (size_t i = 0; i < files.size(); ++i) CHECK(read_file(files[i].string()) == good[i]);
  // No temporary files are left behind.
  size_t all_files = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir.path()))
    all_files += e.is_regular_file();
  CHECK(all_files == 6);
}

TEST_CASE("use_cache=false neither reads nor writes; headers are part of the key") {
  TempDir dir;
  fs::create_directories(dir.path() + "/inc");
  write_file(dir.path() + "/inc/gain.cuh",
             "#pragma once\n__device__ inline float gain() { return 2.0f; }\n");
  KernelSource s = plain(
      "g", "#include \"gain.cuh\"\nextern \"C\" __global__ void g(float* x) { *x = gain(); }\n");
  s.include_dirs = {dir.path() + "/inc"};
  CompileOptions o;
  o.archs = {"sm_90"};
  o.cache_dir = dir.path() + "/cache";
  o.use_cache = false;
  DiagnosticEngine diags;
  auto a = compile_kernels({s}, o, diags);
  REQUIRE(a[0].has_value());
  CHECK_FALSE(fs::exists(o.cache_dir));
  o.use_cache = true;
  auto b = compile_kernels({s}, o, diags);
  auto c = compile_kernels({s}, o, diags);
  CHECK(b[0]->cache_misses == 2);
  CHECK(c[0]->cache_hits == 2);
  write_file(dir.path() + "/inc/gain.cuh",
             "#pragma once\n__device__ inline float gain() { return 3.0f; }\n");
  auto d = compile_kernels({s}, o, diags);
  CHECK(d[0]->cache_misses == 2);
  CHECK(d[0]->ptx != c[0]->ptx);
  CHECK_FALSE(diags.has_errors());
}

TEST_CASE("eight kernels compile the same in parallel as one at a time") {
  SourceManager sm;
  std::vector<KernelSource> sources;
  for (int i = 0; i < 8; ++i) {
    std::string name = "k" + std::to_string(i);
    std::string code = "extern \"C\" __global__ void " + name +
                       "(float* x) {\n  x[threadIdx.x] *= " + std::to_string(i + 1) + ".0f;\n";
    if (i == 2) code += "  int unused_" + name + ";\n";      // a warning
    if (i == 5) code += "  x[0] = missing_" + name + ";\n";  // an error
    code += "}\n";
    KernelSource s = plain(name, code);
    s.origin = {sm.add(name + ".cu", code), {1, 1}, {1, 1}};
    sources.push_back(std::move(s));
  }
  CompileOptions o = no_cache({"sm_90"});
  o.jobs = 1;
  DiagnosticEngine serial_diags;
  auto serial = compile_kernels(sources, o, serial_diags);
  o.jobs = 4;
  DiagnosticEngine parallel_diags;
  auto parallel = compile_kernels(sources, o, parallel_diags);
  CHECK(text_of(serial_diags, sm) == text_of(parallel_diags, sm));
  CHECK(serial_diags.all().size() == 2);
  CHECK(serial_diags.all()[0].code == "W0901");
  CHECK(serial_diags.all()[1].code == "E0901");
  for (size_t i = 0; i < sources.size(); ++i) {
    REQUIRE(serial[i].has_value() == parallel[i].has_value());
    CHECK(serial[i].has_value() == (i != 5));
    if (!serial[i]) continue;
    CHECK(serial[i]->lowered_name == parallel[i]->lowered_name);
    CHECK(serial[i]->ptx == parallel[i]->ptx);
    CHECK(serial[i]->cubins[0].cubin == parallel[i]->cubins[0].cubin);
  }
}

TEST_CASE("cache files decode only when whole and under their own key") {
  CacheEntry e{"_Z1kv", "log text",
               std::string("\x7f"
                           "ELF\0\1\2",
                           7)};
  std::string bytes = encode_cache_entry("k1", e);
  auto back = decode_cache_entry("k1", bytes);
  REQUIRE(back.has_value());
  CHECK(back->lowered_name == e.lowered_name);
  CHECK(back->log == e.log);
  CHECK(back->image == e.image);
  CHECK_FALSE(decode_cache_entry("k2", bytes).has_value());
  for (size_t cut = 0; cut < bytes.size(); ++cut)
    CHECK_FALSE(decode_cache_entry("k1", std::string_view(bytes).substr(0, cut)).has_value());
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string bad = bytes;
    bad[i] ^= 0x01;
    CHECK_FALSE(decode_cache_entry("k1", bad).has_value());
  }
  CHECK_FALSE(decode_cache_entry("k1", bytes + "x").has_value());
  CHECK(KeyBuilder().add("ab").add("c").hex() != KeyBuilder().add("a").add("bc").hex());
  CHECK(hash128_hex("").size() == 32);
}

TEST_CASE("the default cache dir follows ORCH_CACHE_DIR, then XDG_CACHE_HOME, then HOME") {
  std::string saved_orch = std::getenv("ORCH_CACHE_DIR") ? std::getenv("ORCH_CACHE_DIR") : "";
  std::string saved_xdg = std::getenv("XDG_CACHE_HOME") ? std::getenv("XDG_CACHE_HOME") : "";
  std::string saved_home = std::getenv("HOME") ? std::getenv("HOME") : "";
  setenv("ORCH_CACHE_DIR", "/tmp/orch-here", 1);
  CHECK(default_kernel_cache_dir() == "/tmp/orch-here");
  unsetenv("ORCH_CACHE_DIR");
  setenv("XDG_CACHE_HOME", "/xdg", 1);
  CHECK(default_kernel_cache_dir() == "/xdg/orch/kernels");
  unsetenv("XDG_CACHE_HOME");
  setenv("HOME", "/home/u", 1);
  CHECK(default_kernel_cache_dir() == "/home/u/.cache/orch/kernels");
  auto restore = [](const char* name, const std::string& v) {
    if (v.empty())
      unsetenv(name);
    else
      setenv(name, v.c_str(), 1);
  };
  restore("ORCH_CACHE_DIR", saved_orch);
  restore("XDG_CACHE_HOME", saved_xdg);
  restore("HOME", saved_home);
}

}  // namespace
}  // namespace orch
