// CPU tests of NVSHMEM's pieces that need no GPU: the host library's loader and its errors (no
// library, a library that is not NVSHMEM, a version other than the kernels'), the layouts orch
// declares itself, orchc putting NVSHMEM kernels into the artifact (CUBINs only, the version
// recorded), and Pipeline::load finding NVSHMEM for a pipeline that uses it.
// The cases that need NVSHMEM itself use the pinned one (ORCH_TEST_NVSHMEM_HOME, from
// scripts/fetch-nvshmem, or $ORCH_NVSHMEM_HOME) and say so where there is none.
#include <doctest/doctest.h>

#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "artifact/artifact.h"
#include "orch/runtime.h"
#include "runtime/src/nvshmem.h"
#include "runtime/src/plan.h"
#include "runtime/tests/test_util.h"

namespace {

struct ScopedEnv {
  std::string name;
  bool had = false;
  std::string old;
  ScopedEnv(const char* n, const char* value) : name(n) {
    if (const char* v = std::getenv(n)) {
      had = true;
      old = v;
    }
    if (value) setenv(n, value, 1);
    else unsetenv(n);
  }
  ~ScopedEnv() {
    if (had) setenv(name.c_str(), old.c_str(), 1);
    else unsetenv(name.c_str());
  }
};

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

const char* kSymmetricOnly = R"(pipeline sym
target sm_90
comm world
param n: u32 = 64
buffer halo: f32[n * n_pes] symmetric
graph main { fill halo = 0 }
)";

const char* kPutSignal = R"(pipeline put_signal
target sm_90
comm world
param n: u32 = 1000
buffer src: f32[n]
buffer dst: f32[n] symmetric
buffer sig: u64 symmetric
kernel put_signal(n: u32, src: in f32[], dst: inout f32[], sig: inout u64) source """
#include <nvshmem.h>
#include <nvshmemx.h>
extern "C" __global__ void put_signal(unsigned n, const float* src, float* dst, unsigned long long* sig) {
  const int peer = (nvshmem_my_pe() + 1) % nvshmem_n_pes();
  for (unsigned i = threadIdx.x; i < n; i += blockDim.x) nvshmem_float_p(dst + i, src[i], peer);
  __syncthreads();
  if (threadIdx.x == 0) {
    nvshmem_fence();
    nvshmemx_signal_op(sig, 1, NVSHMEM_SIGNAL_SET, peer);
    nvshmem_signal_wait_until(sig, NVSHMEM_CMP_EQ, 1);
  }
}
"""
graph main { put_signal<<<1, 256>>>(n, src, dst, sig) }
)";

}  // namespace

TEST_CASE("nvshmem loader: orch's layouts are NVSHMEM 3.4.5's") {
  using namespace orch::rt::nvshmem;
  CHECK(sizeof(UniqueId) == 128);
  CHECK(sizeof(InitAttr) == 144);
  CHECK(offsetof(InitAttr, args) == 16);
  CHECK(offsetof(InitArgs, uid_args) == 8);
  CHECK(offsetof(UniqueIdArgs, myrank) == 16);
  // The versions NVSHMEM checks: (1 << 16) + the struct's size.
  InitAttr attr;
  CHECK(attr.version == 65536 + 144);
  CHECK(attr.args.version == 65536 + 128);
  CHECK(attr.args.uid_args.version == 65536 + 24);
  CHECK(UniqueId{}.version == 65536 + 128);
}

TEST_CASE("nvshmem loader: a missing library is a clear error value") {
  auto r = orch::rt::nvshmem::open("/nonexistent/libnvshmem_host.so.3");
  REQUIRE(!r.ok());
  CHECK(r.error().code() == orch::ErrorCode::Nvshmem);
  CHECK(contains(r.error().message(), "cannot load NVSHMEM from '/nonexistent/libnvshmem_host.so.3'"));
  ScopedEnv env("ORCH_NVSHMEM_LIBRARY", "/nonexistent/libnvshmem_host.so.3");
  auto a = orch::rt::nvshmem::api("3.4.5");
  REQUIRE(!a.ok());
  CHECK(contains(a.error().message(), "the pipeline needs NVSHMEM, which could not be loaded"));
  CHECK(contains(a.error().message(), "(the path comes from ORCH_NVSHMEM_LIBRARY)"));
}

TEST_CASE("nvshmem loader: a library that is not NVSHMEM names the missing symbol") {
  auto r = orch::rt::nvshmem::open("libm.so.6");
  REQUIRE(!r.ok());
  CHECK(r.error().message() ==
        "'libm.so.6' is not a usable NVSHMEM host library: it has no symbol nvshmemx_vendor_get_version_info");
}

TEST_CASE("nvshmem loader: the pinned NVSHMEM loads without a GPU, and its version must be the kernels'") {
  const std::string home = orch::test::nvshmem_home();
  if (home.empty()) {
    MESSAGE("SKIPPED (no NVSHMEM here: scripts/fetch-nvshmem, or ORCH_NVSHMEM_HOME)");
    return;
  }
  const std::string lib = home + "/lib/libnvshmem_host.so.3";
  auto r = orch::rt::nvshmem::open(lib);
  ORCH_REQUIRE_OK(r);
  CHECK((*r)->version_string() == "3.4.5");
  ScopedEnv env("ORCH_NVSHMEM_LIBRARY", lib.c_str());
  ORCH_REQUIRE_OK(orch::rt::nvshmem::api("3.4.5"));
  auto other = orch::rt::nvshmem::api("3.4.6");
  REQUIRE(!other.ok());
  CHECK(other.error().message() == "NVSHMEM from '" + lib +
                                       "' is version 3.4.5, but the pipeline's kernels were linked with NVSHMEM 3.4.6's "
                                       "device library; the two must be the same release (set ORCH_NVSHMEM_LIBRARY to "
                                       "NVSHMEM 3.4.6's libnvshmem_host.so.3, or compile with that NVSHMEM)");
}

TEST_CASE("nvshmem: a pipeline with a symmetric buffer loads NVSHMEM at load, before any device work") {
  std::string log;
  const std::string path = orch::test::compile_source("nvshmem_symmetric_only", kSymmetricOnly, &log);
  INFO(log);
  REQUIRE(!path.empty());
  orch::test::OpenedExample o = orch::test::open_artifact(path);
  REQUIRE(o.p->buffers()->size() == 1);
  CHECK(o.p->buffers()->Get(0)->symmetric());
  CHECK(o.p->nvshmem_version() == nullptr);  // no kernel calls NVSHMEM
  {
    // No NVSHMEM: the load says so, naming the pipeline and where the path came from.
    ScopedEnv env("ORCH_NVSHMEM_LIBRARY", "/nonexistent/libnvshmem_host.so.3");
    auto loaded = orch::Pipeline::load(path);
    REQUIRE(!loaded.ok());
    CHECK(loaded.error().code() == orch::ErrorCode::Nvshmem);
    CHECK(contains(loaded.error().message(), path + ": pipeline 'sym': the pipeline needs NVSHMEM, which could not be "
                                                    "loaded: cannot load NVSHMEM from '/nonexistent/libnvshmem_host.so.3'"));
  }
  const std::string home = orch::test::nvshmem_home();
  if (home.empty()) {
    MESSAGE("SKIPPED the rest (no NVSHMEM here: scripts/fetch-nvshmem, or ORCH_NVSHMEM_HOME)");
    return;
  }
  // A symmetric buffer is the runtime's to allocate on every PE: binding one is refused.
  float memory[64 * 2];
  orch::Bindings b;
  b.comm("world", nullptr, 0, 2).buffer("halo", memory, sizeof memory);
  auto plan = orch::rt::make_plan(*o.p, b);
  REQUIRE(!plan.ok());
  CHECK(plan.error().code() == orch::ErrorCode::InvalidArgument);
  CHECK(plan.error().message() ==
        "buffer 'halo' is symmetric: the runtime allocates it on NVSHMEM's symmetric heap, on every PE at once, so it "
        "cannot be bound (read it with Executable::buffer)");
  CHECK(orch::rt::uses_nvshmem(*o.p));

  // With NVSHMEM found, the load goes on to the device: here, where there is none, NoDevice.
  const std::string lib = home + "/lib/libnvshmem_host.so.3";
  ScopedEnv env("ORCH_NVSHMEM_LIBRARY", lib.c_str());
  auto loaded = orch::Pipeline::load(path);
  if (loaded.ok()) {
    MESSAGE("a GPU is present: the load went through");
    return;
  }
  CHECK(loaded.error().code() == orch::ErrorCode::NoDevice);
}

TEST_CASE("nvshmem: the pipeline example's peer `1 - my_pe` is refused at bind time beyond 2 PEs") {
  const std::string home = orch::test::nvshmem_home();
  if (home.empty()) {
    MESSAGE("SKIPPED (no NVSHMEM here: scripts/fetch-nvshmem, or ORCH_NVSHMEM_HOME)");
    return;
  }
  std::ifstream in(orch::test::examples_dir() + "/nvshmem_pipeline.orch");
  REQUIRE(in.good());
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string log;
  const std::string options = "--nvshmem '" + home + "'";
  const std::string path = orch::test::compile_source("nvshmem_pipeline", text, &log, options.c_str());
  INFO(log);
  REQUIRE(!path.empty());
  orch::test::OpenedExample o = orch::test::open_artifact(path);
  for (int rank = 0; rank < 2; ++rank) {
    orch::Bindings two;
    two.comm("world", nullptr, rank, 2);
    ORCH_CHECK_OK(orch::rt::make_plan(*o.p, two));
  }
  // PE 2 of 3: its peer 1 - 2 is no PE (my_pe is a u32, so the check cannot even evaluate it).
  orch::Bindings three;
  three.comm("world", nullptr, 2, 3);
  auto plan = orch::rt::make_plan(*o.p, three);
  REQUIRE(!plan.ok());
  INFO(plan.error().to_string());
  CHECK(plan.error().code() == orch::ErrorCode::InvalidValue);
  CHECK(contains(plan.error().message(),
                 "cannot evaluate a bind check (overflow: 1 - 2 does not fit u32): the peer of `signal` is a PE "
                 "(0 <= peer < n_pes)"));
  CHECK(contains(plan.error().where(), "nvshmem_pipeline.orch:"));
  // PE 0 of 3 is within range: 1 - 0 is PE 1.
  orch::Bindings zero;
  zero.comm("world", nullptr, 0, 3);
  ORCH_CHECK_OK(orch::rt::make_plan(*o.p, zero));
}

TEST_CASE("nvshmem: orchc puts a kernel that calls NVSHMEM into the artifact as linked CUBINs, no PTX") {
  const std::string home = orch::test::nvshmem_home();
  if (home.empty()) {
    MESSAGE("SKIPPED (no NVSHMEM here: scripts/fetch-nvshmem, or ORCH_NVSHMEM_HOME)");
    return;
  }
  std::string log;
  const std::string options = "--nvshmem '" + home + "'";
  const std::string path = orch::test::compile_source("nvshmem_put_signal", kPutSignal, &log, options.c_str());
  INFO(log);
  REQUIRE(!path.empty());
  orch::test::OpenedExample o = orch::test::open_artifact(path);
  REQUIRE(o.p->nvshmem_version() != nullptr);
  CHECK(o.p->nvshmem_version()->str() == "3.4.5");
  REQUIRE(o.p->kernels()->size() >= 1);
  const auto* k = o.p->kernels()->Get(0);
  CHECK(k->name()->str() == "put_signal");
  REQUIRE(k->images() != nullptr);
  REQUIRE(k->images()->size() == 1);
  CHECK(k->images()->Get(0)->arch()->str() == "sm_90");
  const std::string cubin(reinterpret_cast<const char*>(k->images()->Get(0)->cubin()->data()),
                          k->images()->Get(0)->cubin()->size());
  CHECK(contains(cubin, std::string(1, '\0') + "nvshmemi_device_state_d" + std::string(1, '\0')));
  CHECK((k->ptx() == nullptr || k->ptx()->size() == 0));
  // The runtime loads the NVSHMEM the artifact names (3.4.5), then needs a device: here, none.
  ScopedEnv env("ORCH_NVSHMEM_LIBRARY", (home + "/lib/libnvshmem_host.so.3").c_str());
  auto loaded = orch::Pipeline::load(path);
  if (!loaded.ok()) CHECK(loaded.error().code() == orch::ErrorCode::NoDevice);
}
