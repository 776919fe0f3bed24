// The CUBIN reader (lowering/cubin_resources.h) on images NVRTC makes here, against what the
// driver said of the same kernels on an H200 (driver 580.159.04, 2026-11-28, through
// cuFuncGetAttribute: NUM_REGS, SHARED_SIZE_BYTES, MAX_THREADS_PER_BLOCK, REQUIRED_CLUSTER_*;
// and launches one thread past MAX_THREADS_PER_BLOCK failing with CUDA_ERROR_INVALID_VALUE under
// __launch_bounds__, CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES for registers), and on corrupted images.
#include <doctest/doctest.h>

#include <random>

#include "lowering/cubin_resources.h"
#include "lowering/kernel_compiler.h"

namespace orch::lowering {
namespace {

const char* const kKernels = R"cu(
extern "C" __global__ void __launch_bounds__(256) small(float* x, int n) {
  __shared__ float tile[1000];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  tile[threadIdx.x] = i < n ? x[i] : 0.f;
  __syncthreads();
  if (i < n) x[i] = tile[(threadIdx.x + 1) % 256];
}
extern "C" __global__ void noshared(float* x) { x[threadIdx.x] += 1.f; }
extern "C" __global__ void big(float* x) {
  __shared__ float t[12000];
  t[threadIdx.x] = x[threadIdx.x]; __syncthreads(); x[threadIdx.x] = t[(threadIdx.x + 1) % 32];
}
extern "C" __global__ void __cluster_dims__(2, 1, 1) clus2(float* x) { x[threadIdx.x] *= 2.f; }
extern "C" __global__ void __launch_bounds__(128, 4) lb(float* x) { x[threadIdx.x] *= 2.f; }
__device__ float helper(float v) { return v * 3.f; }
extern "C" __global__ void heavy(double* x, int n) {
  double a[128];
#pragma unroll
  for (int j = 0; j < 128; ++j) a[j] = x[j * n + threadIdx.x];
  double s = 0;
#pragma unroll
  for (int k = 0; k < 128; ++k)
#pragma unroll
    for (int j = 0; j < 128; ++j) s += a[j] * a[(j * 7 + k) % 128];
  x[threadIdx.x] = s + helper(1.f);
}
)cu";

std::string cubin_for(const std::string& arch) {
  KernelSource src;
  src.name = "misc";
  src.code = kKernels;
  src.file_name = "misc.cu";
  for (const char* k : {"small", "noshared", "big", "clus2", "lb", "heavy"}) src.entries.push_back({k, k, {}, {}});
  CompileOptions options;
  options.archs = {arch};
  options.use_cache = false;
  DiagnosticEngine diags;
  auto out = compile_kernels({src}, options, diags);
  REQUIRE(out.size() == 1);
  REQUIRE(out[0].has_value());
  REQUIRE(out[0]->cubins.size() == 1);
  return out[0]->cubins[0].cubin;
}

}  // namespace

TEST_SUITE("cubin resources") {

TEST_CASE("registers, static shared memory, launch bounds and clusters as the driver reports them") {
  for (const char* arch : {"sm_90", "sm_100"}) {
    INFO(arch);
    const std::string cubin = cubin_for(arch);
    std::string error;
    auto r = read_cubin_resources(cubin, &error);
    INFO(error);
    REQUIRE(r.has_value());
    // Kernels only: the device function has no entry.
    CHECK(r->size() == 6);
    CHECK(r->count("helper") == 0);
    // The H200 said: static 4000 (the section is 1024 bytes larger: the reserved part), 48000,
    // 0; MAX_THREADS_PER_BLOCK 256 and 128 under __launch_bounds__; a required cluster width 2.
    CHECK(r->at("small").static_shared == 4000);
    CHECK(r->at("small").max_threads == 256);
    CHECK(r->at("big").static_shared == 48000);
    CHECK(r->at("big").max_threads == 0);
    CHECK(r->at("noshared").static_shared == 0);
    CHECK(r->at("lb").max_threads == 128);
    CHECK(r->at("clus2").has_cluster());
    CHECK(r->at("clus2").cluster[0] == 2);
    CHECK(r->at("clus2").cluster[1] == 1);
    CHECK(r->at("clus2").cluster[2] == 1);
    CHECK(r->at("clus2").cluster_size() == 2);
    CHECK_FALSE(r->at("small").has_cluster());
    for (const auto& [name, k] : *r) {
      INFO(name);
      CHECK(k.registers >= 8);
      CHECK(k.registers <= 255);
    }
    // 128 doubles live at once: far more registers than the small kernels.
    CHECK(r->at("heavy").registers > 128);
  }
}

TEST_CASE("the threads a block may have for its registers, as an H200 reported them") {
  // cuFuncGetAttribute(MAX_THREADS_PER_BLOCK) for kernels compiled with -maxrregcount to each
  // register count (H200, driver 580.159.04); one warp more failed to launch with
  // CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES for each count below 1024.
  const std::pair<uint32_t, uint32_t> measured[] = {
      {24, 1024}, {32, 1024}, {40, 1024}, {48, 1024}, {56, 1024}, {64, 1024}, {72, 896},
      {80, 768},  {88, 640},  {96, 640},  {104, 512}, {112, 512}, {120, 512}, {128, 512},
      {136, 384}, {142, 384}, {152, 384}, {168, 384}, {184, 256}, {200, 256}, {216, 256},
      {232, 256}, {248, 256}, {254, 256}};
  const RegisterFile h200;  // the sm_90 profile's values
  for (const auto& [registers, threads] : measured) {
    INFO(registers);
    CHECK(std::min<uint32_t>(1024, max_threads_for_registers(registers, h200)) == threads);
  }
}

TEST_CASE("a corrupted image is an error, never a crash") {
  const std::string cubin = cubin_for("sm_90");
  std::string error;
  CHECK_FALSE(read_cubin_resources("", &error).has_value());
  CHECK(error == "not an ELF image");
  CHECK_FALSE(read_cubin_resources(std::string(64, '\0'), &error).has_value());
  std::string wrong_class = cubin;
  wrong_class[4] = 1;  // ELFCLASS32
  CHECK_FALSE(read_cubin_resources(wrong_class, &error).has_value());
  CHECK(error == "not a 64-bit little-endian ELF image");
  // Every truncation that cuts the section headers is refused; the reader never reads past the
  // bytes it is given (the sanitizer builds would say).
  for (size_t n = 0; n < cubin.size(); n += 97) (void)read_cubin_resources(std::string_view(cubin).substr(0, n), &error);
  std::mt19937_64 rng(20261128);
  for (int round = 0; round < 2000; ++round) {
    std::string bad = cubin;
    const int flips = 1 + static_cast<int>(rng() % 8);
    for (int f = 0; f < flips; ++f) bad[rng() % bad.size()] = static_cast<char>(rng());
    (void)read_cubin_resources(bad, &error);
  }
}

}  // TEST_SUITE

}  // namespace orch::lowering
