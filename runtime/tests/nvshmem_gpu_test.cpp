// Multi-GPU test of NVSHMEM (issue 23; test suite "multi-gpu": skipped, exit 77, where fewer
// than two GPUs run sm_90 code): a kernel that calls NVSHMEM, compiled and linked by orchc into
// pipeline.bin, run on one process per GPU. Every PE puts n floats into the next PE's symmetric
// buffer and signals it (element puts, a fence, a signal), puts them again into a second buffer
// with one block-wide put-with-signal, then waits for both of its own signals; each rank checks
// what its predecessor put against a CPU reference that knows every rank's inputs.
//
// Two ways: by hand (the recipe the runtime follows: NVSHMEM's host library through orch's loader,
// bootstrapped from a unique id shared through the rank id file, the artifact's CUBIN loaded and
// given to nvshmemx_culibrary_init, symmetric buffers from nvshmem_malloc), and through the
// runtime itself (Pipeline::load, instantiate over a communicator orch makes, launch). Needs
// NVSHMEM 3.4.5: $ORCH_NVSHMEM_HOME (its nvidia/nvshmem folder), else the build's
// (scripts/fetch-nvshmem); without one each case says so and passes.
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "artifact/artifact.h"
#include "orch/ranks.h"
#include "orch/runtime.h"
#include "runtime/src/nvshmem.h"
#include "runtime/tests/rank_check.h"
#include "runtime/tests/test_util.h"

namespace {

const char* kPutSignal = R"(pipeline nvshmem_put_signal
target sm_90
comm world
param n: u32 = 1000
buffer src: f32[n]
buffer dst: f32[n] symmetric
buffer sig: u64 symmetric
buffer dst2: f32[n] symmetric
buffer sig2: u64 symmetric
kernel put_signal(n: u32, src: in f32[], dst: inout f32[], sig: inout u64, dst2: inout f32[], sig2: inout u64) source """
#include <nvshmem.h>
#include <nvshmemx.h>
// Two ways to hand n floats to the next PE: element puts, a fence and a signal; and one
// block-wide put-with-signal (the call orchc's NVRTC postlude bridges to the device library).
extern "C" __global__ void put_signal(unsigned n, const float* src, float* dst, unsigned long long* sig,
                                      float* dst2, unsigned long long* sig2) {
  const int peer = (nvshmem_my_pe() + 1) % nvshmem_n_pes();
  for (unsigned i = threadIdx.x; i < n; i += blockDim.x) nvshmem_float_p(dst + i, src[i], peer);
  __syncthreads();
  if (threadIdx.x == 0) {
    nvshmem_fence();
    nvshmemx_signal_op(sig, 1, NVSHMEM_SIGNAL_SET, peer);
  }
  nvshmemx_float_put_signal_block(dst2, src, n, sig2, 7, NVSHMEM_SIGNAL_SET, peer);
  if (threadIdx.x == 0) {
    nvshmem_signal_wait_until(sig, NVSHMEM_CMP_EQ, 1);
    nvshmem_signal_wait_until(sig2, NVSHMEM_CMP_EQ, 7);
  }
}
"""
graph main { put_signal<<<1, 256>>>(n, src, dst, sig, dst2, sig2) }
)";

// Rank r's input: exact in f32, different on every rank and element.
float input(int rank, unsigned i) { return static_cast<float>(rank * 100000 + static_cast<int>(i)) + 0.5f; }

// ---- inside a rank process --------------------------------------------------------------

int& failures = orch::test::rank_checks().failures;
int& my_rank = orch::test::rank_checks().rank;

// args: the artifact, NVSHMEM's host library.
int scenario_put_signal(const std::vector<std::string>& args) {
  auto me = orch::ranks::from_environment();
  RANK_REQUIRE(me.ok(), "%s", me.ok() ? "" : me.error().to_string().c_str());
  my_rank = me->rank;
  const int world = me->world_size;
  RANK_REQUIRE(args.size() == 2, "expected the artifact and the library");

  std::ifstream in(args[0], std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  const std::string file = bytes.str();
  std::vector<uint64_t> storage((file.size() + 7) / 8);
  std::memcpy(storage.data(), file.data(), file.size());
  orch::artifact::OpenResult open =
      orch::artifact::open_pipeline(reinterpret_cast<const uint8_t*>(storage.data()), file.size());
  RANK_REQUIRE(open.ok(), "%s", open.error.c_str());
  const orch::fb::Pipeline& p = *open.pipeline;
  RANK_REQUIRE(p.nvshmem_version() != nullptr, "no NVSHMEM version in the artifact");

  setenv("ORCH_NVSHMEM_LIBRARY", args[1].c_str(), 1);
  auto api_r = orch::rt::nvshmem::api(p.nvshmem_version()->str());
  RANK_REQUIRE(api_r.ok(), "%s", api_r.ok() ? "" : api_r.error().to_string().c_str());
  const orch::rt::nvshmem::Api& api = **api_r;

  // The bootstrap: rank 0's unique id, through the same file channel as NCCL's.
  const char* id_file = std::getenv("ORCH_NCCL_ID_FILE");
  RANK_REQUIRE(id_file, "ORCH_NCCL_ID_FILE is not set");
  const std::string path = std::string(id_file) + ".nvshmem";
  orch::rt::nvshmem::UniqueId id;
  std::array<char, 128> raw{};
  if (me->rank == 0) {
    RANK_REQUIRE(api.get_uniqueid(&id) == 0, "nvshmemx_get_uniqueid failed");
    std::memcpy(raw.data(), &id, sizeof id);
    orch::Status w = orch::ranks::write_unique_id(path, raw);
    RANK_REQUIRE(w.ok(), "%s", w.ok() ? "" : w.error().to_string().c_str());
  } else {
    auto r = orch::ranks::read_unique_id(path, std::chrono::seconds(60));
    RANK_REQUIRE(r.ok(), "%s", r.ok() ? "" : r.error().to_string().c_str());
    std::memcpy(&id, r->data(), sizeof id);
  }
  orch::rt::nvshmem::InitAttr attr;
  RANK_REQUIRE(api.set_attr_uniqueid_args(me->rank, world, &id, &attr) == 0, "nvshmemx_set_attr_uniqueid_args failed");
  RANK_REQUIRE(api.hostlib_init_attr(orch::rt::nvshmem::kInitWithUniqueId, &attr) == 0, "nvshmemx_hostlib_init_attr failed");
  RANK_CHECK(api.my_pe() == me->rank);
  RANK_CHECK(api.n_pes() == world);

  // The kernel's CUBIN for this GPU, as orchc linked it.
  int device = 0, major = 0, minor = 0;
  RANK_CUDA(cudaGetDevice(&device));
  RANK_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  RANK_CUDA(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  const std::string arch = "sm_" + std::to_string(major * 10 + minor);
  const orch::fb::Kernel* k = nullptr;
  for (uint32_t i = 0; p.kernels() && i < p.kernels()->size(); ++i)
    if (p.kernels()->Get(i)->name()->str() == "put_signal") k = p.kernels()->Get(i);
  RANK_REQUIRE(k && k->images(), "no kernel put_signal with images");
  const orch::fb::KernelImage* image = nullptr;
  for (uint32_t i = 0; i < k->images()->size(); ++i)
    if (k->images()->Get(i)->arch()->str() == arch) image = k->images()->Get(i);
  RANK_REQUIRE(image, "no %s CUBIN", arch.c_str());
  cudaLibrary_t library = nullptr;
  RANK_CUDA(cudaLibraryLoadData(&library, image->cubin()->data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  RANK_REQUIRE(api.culibrary_init(library) == 0, "nvshmemx_culibrary_init failed");
  cudaKernel_t kernel = nullptr;
  RANK_CUDA(cudaLibraryGetKernel(&kernel, library, k->lowered_name()->c_str()));

  // Symmetric buffers from NVSHMEM's heap, the source from CUDA's.
  unsigned n = 1000;
  float* dst = static_cast<float*>(api.malloc(n * sizeof(float)));
  auto* sig = static_cast<unsigned long long*>(api.malloc(sizeof(unsigned long long)));
  float* dst2 = static_cast<float*>(api.malloc(n * sizeof(float)));
  auto* sig2 = static_cast<unsigned long long*>(api.malloc(sizeof(unsigned long long)));
  RANK_REQUIRE(dst && sig && dst2 && sig2, "nvshmem_malloc failed");
  float* src = nullptr;
  RANK_CUDA(cudaMalloc(reinterpret_cast<void**>(&src), n * sizeof(float)));
  std::vector<float> mine(n);
  for (unsigned i = 0; i < n; ++i) mine[i] = input(me->rank, i);
  RANK_CUDA(cudaMemcpy(src, mine.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  RANK_CUDA(cudaMemset(dst, 0xff, n * sizeof(float)));  // NaN: an element never written fails
  RANK_CUDA(cudaMemset(sig, 0, sizeof *sig));
  RANK_CUDA(cudaMemset(dst2, 0xff, n * sizeof(float)));
  RANK_CUDA(cudaMemset(sig2, 0, sizeof *sig2));
  RANK_CUDA(cudaDeviceSynchronize());
  api.barrier_all();  // every PE's signal is 0 before any PE's kernel can set it

  void* params[] = {&n, &src, &dst, &sig, &dst2, &sig2};
  RANK_CUDA(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(1), dim3(256), params, 0, nullptr));
  RANK_CUDA(cudaDeviceSynchronize());

  std::vector<float> got(n), got2(n);
  unsigned long long got_sig = 0, got_sig2 = 0;
  RANK_CUDA(cudaMemcpy(got.data(), dst, n * sizeof(float), cudaMemcpyDeviceToHost));
  RANK_CUDA(cudaMemcpy(&got_sig, sig, sizeof got_sig, cudaMemcpyDeviceToHost));
  RANK_CUDA(cudaMemcpy(got2.data(), dst2, n * sizeof(float), cudaMemcpyDeviceToHost));
  RANK_CUDA(cudaMemcpy(&got_sig2, sig2, sizeof got_sig2, cudaMemcpyDeviceToHost));
  const int from = (me->rank + world - 1) % world;
  unsigned wrong = 0, wrong2 = 0;
  for (unsigned i = 0; i < n; ++i) {
    if (got[i] != input(from, i) && wrong++ < 4)
      std::printf("rank %d: dst[%u] = %g, want %g (from rank %d)\n", me->rank, i, got[i], input(from, i), from);
    if (got2[i] != input(from, i) && wrong2++ < 4)
      std::printf("rank %d: dst2[%u] = %g, want %g (from rank %d)\n", me->rank, i, got2[i], input(from, i), from);
  }
  RANK_CHECK(wrong == 0);
  RANK_CHECK(wrong2 == 0);
  RANK_CHECK(got_sig == 1);
  RANK_CHECK(got_sig2 == 7);
  std::printf("rank %d: %u + %u floats from rank %d, signals %llu and %llu\n", me->rank, n - wrong, n - wrong2,
              from, got_sig, got_sig2);

  api.barrier_all();
  api.free(dst);
  api.free(sig);
  api.free(dst2);
  api.free(sig2);
  RANK_CUDA(cudaFree(src));
  api.hostlib_finalize();
  RANK_CUDA(cudaLibraryUnload(library));
  return failures == 0 ? 0 : 1;
}

// The same pipeline run by the runtime: Pipeline::load, instantiate with a communicator orch
// makes from a unique id (NVSHMEM starts over it), launch; the symmetric buffers read back with
// Executable::buffer. A second Executable of the same pipeline in the same process shares the
// NVSHMEM session and gets buffers of its own. args: the artifact, NVSHMEM's host library.
int scenario_runtime_put_signal(const std::vector<std::string>& args) {
  auto me = orch::ranks::from_environment();
  RANK_REQUIRE(me.ok(), "%s", me.ok() ? "" : me.error().to_string().c_str());
  my_rank = me->rank;
  const int world = me->world_size;
  RANK_REQUIRE(args.size() == 2, "expected the artifact and the library");
  setenv("ORCH_NVSHMEM_LIBRARY", args[1].c_str(), 1);
  auto p = orch::Pipeline::load(args[0]);
  RANK_REQUIRE(p.ok(), "%s", p.ok() ? "" : p.error().to_string().c_str());
  const char* id_file = std::getenv("ORCH_NCCL_ID_FILE");
  RANK_REQUIRE(id_file, "ORCH_NCCL_ID_FILE is not set");
  // A fresh NCCL unique id for every communicator orch makes: ncclCommInitRank with an id used
  // before waits in the bootstrap forever (NVIDIA/nccl#1038).
  auto bindings = [&](int k, orch::Bindings* out) -> bool {
    auto id = orch::ranks::share_unique_id(std::string(id_file) + "." + std::to_string(k), me->rank,
                                           std::chrono::seconds(60));
    if (!id.ok()) {
      std::printf("rank %d: unique id %d: %s\n", me->rank, k, id.error().to_string().c_str());
      return false;
    }
    out->param("n", 1000u).comm_from_unique_id("world", id->data(), me->rank, world);
    return true;
  };
  cudaStream_t stream = nullptr;
  RANK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const unsigned n = 1000;
  std::vector<float> mine(n);
  for (unsigned i = 0; i < n; ++i) mine[i] = input(me->rank, i);
  const int from = (me->rank + world - 1) % world;

  auto check = [&](orch::Executable& e, const char* which) -> int {
    // Symmetric buffers start zeroed on every PE.
    unsigned long long sig0 = 99;
    RANK_CUDA(cudaMemcpy(&sig0, e.buffer("sig"), sizeof sig0, cudaMemcpyDeviceToHost));
    RANK_CHECK(sig0 == 0);
    RANK_CUDA(cudaMemcpy(e.buffer("src"), mine.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    RANK_REQUIRE(e.launch(stream).ok(), "%s: launch", which);
    RANK_CUDA(cudaStreamSynchronize(stream));
    std::vector<float> got(n), got2(n);
    unsigned long long got_sig = 0, got_sig2 = 0;
    RANK_CUDA(cudaMemcpy(got.data(), e.buffer("dst"), n * sizeof(float), cudaMemcpyDeviceToHost));
    RANK_CUDA(cudaMemcpy(got2.data(), e.buffer("dst2"), n * sizeof(float), cudaMemcpyDeviceToHost));
    RANK_CUDA(cudaMemcpy(&got_sig, e.buffer("sig"), sizeof got_sig, cudaMemcpyDeviceToHost));
    RANK_CUDA(cudaMemcpy(&got_sig2, e.buffer("sig2"), sizeof got_sig2, cudaMemcpyDeviceToHost));
    unsigned wrong = 0;
    for (unsigned i = 0; i < n; ++i)
      if ((got[i] != input(from, i) || got2[i] != input(from, i)) && wrong++ < 4)
        std::printf("rank %d (%s): dst[%u] = %g, dst2[%u] = %g, want %g\n", me->rank, which, i, got[i], i, got2[i],
                    input(from, i));
    RANK_CHECK(wrong == 0);
    RANK_CHECK(got_sig == 1);
    RANK_CHECK(got_sig2 == 7);
    std::printf("rank %d (%s): %u floats twice from rank %d through the runtime\n", me->rank, which, n - wrong, from);
    return 0;
  };
  // The first Executable lives to the end, so NVSHMEM starts once in this process (whether
  // NVSHMEM starts again after orch finalised it is not asked here).
  orch::Bindings b0, b1, b2;
  RANK_REQUIRE(bindings(0, &b0) && bindings(1, &b1) && bindings(2, &b2), "unique ids");
  auto first = (*p)->instantiate(b0, stream);
  RANK_REQUIRE(first.ok(), "first: %s", first.ok() ? "" : first.error().to_string().c_str());
  RANK_REQUIRE(check(**first, "first executable") == 0, "first executable");
  {
    // Two at once: the second shares NVSHMEM, and its symmetric buffers are its own.
    auto second = (*p)->instantiate(b1, stream);
    RANK_REQUIRE(second.ok(), "second: %s", second.ok() ? "" : second.error().to_string().c_str());
    RANK_CHECK((*second)->buffer("dst") != (*first)->buffer("dst"));
    RANK_REQUIRE(check(**second, "beside another") == 0, "beside another");
  }
  // A symmetric buffer cannot be bound (refused on every rank, after the communicator is made).
  orch::Bindings bad = b2;
  float* mem = nullptr;
  RANK_CUDA(cudaMalloc(reinterpret_cast<void**>(&mem), n * sizeof(float)));
  bad.buffer("dst", mem, n * sizeof(float));
  auto refused = (*p)->instantiate(bad, stream);
  RANK_CHECK(!refused.ok());
  if (!refused.ok()) RANK_CHECK(refused.error().message().find("is symmetric") != std::string::npos);
  RANK_CUDA(cudaFree(mem));
  RANK_CUDA(cudaStreamDestroy(stream));
  return failures == 0 ? 0 : 1;
}

const bool registered = orch::test::register_rank_scenario("nvshmem_put_signal", scenario_put_signal);
const bool registered_runtime =
    orch::test::register_rank_scenario("nvshmem_runtime_put_signal", scenario_runtime_put_signal);

// Compiles kPutSignal and runs `scenario` on one process per GPU, each with NVSHMEM's folder.
void run_put_signal(const char* scenario) {
  const std::string home = orch::test::nvshmem_home();
  if (home.empty()) {
    MESSAGE("SKIPPED: no NVSHMEM 3.4.5 (set ORCH_NVSHMEM_HOME to the nvidia-nvshmem-cu13 wheel's nvidia/nvshmem)");
    return;
  }
  std::string log;
  const std::string options = "--nvshmem '" + home + "'";
  const std::string bin = orch::test::compile_source("nvshmem_put_signal", kPutSignal, &log, options.c_str());
  INFO(log);
  REQUIRE(!bin.empty());

  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
  const int world = std::min(count, 8);
  const std::string logs = orch::test::temp_dir() + "/ranks-" + scenario;
  std::filesystem::create_directories(logs);
  orch::ranks::SpawnOptions o;
  o.timeout = std::chrono::seconds(120);
  if (const char* cap = std::getenv("ORCH_TEST_RANK_TIMEOUT"))
    if (std::atoi(cap) > 0) o.timeout = std::chrono::seconds(std::min(120, std::atoi(cap)));
  o.log_dir = logs;
  // NVLink multicast off (issue 23's proof runs with it off); NVSHMEM's own libraries beside its host library.
  const char* ld = std::getenv("LD_LIBRARY_PATH");
  o.env = {{"NCCL_NVLS_ENABLE", "0"},
           {"NVSHMEM_DISABLE_NVLS", "1"},
           {"LD_LIBRARY_PATH", home + "/lib" + (ld && *ld ? ":" + std::string(ld) : std::string())}};
  auto exits = orch::ranks::spawn(
      world, {"/proc/self/exe", std::string("--orch-rank-worker=") + scenario, bin, home + "/lib/libnvshmem_host.so.3"},
      o);
  ORCH_REQUIRE_OK(exits);
  for (const orch::ranks::Exit& x : *exits) {
    std::ifstream in(x.log);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    MESSAGE(x.describe(), "\n", text);
    CHECK(x.ok());
  }
}

}  // namespace

TEST_SUITE("multi-gpu") {

TEST_CASE("NVSHMEM: a kernel orchc linked puts and signals to the next PE; every rank equals the CPU reference") {
  (void)registered;
  run_put_signal("nvshmem_put_signal");
}

TEST_CASE("NVSHMEM through the runtime: instantiate starts NVSHMEM over orch's communicator; every rank equals the CPU reference") {
  (void)registered_runtime;
  run_put_signal("nvshmem_runtime_put_signal");
}

}  // TEST_SUITE("multi-gpu")
