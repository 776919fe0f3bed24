// NVSHMEM at instantiate (executable_nvshmem.cpp) on the CPU: against the recording fake of the
// CUDA seam (fake_graph_api.h) and a fake NVSHMEM host library (nvshmem::Api is a table of
// function pointers). The symmetric buffers are allocated in the buffers' order with their
// bound sizes rounded up to 16 bytes, each zeroed, then the stream waited for, then one
// barrier_all; the Executable's buffers point at them; a failed nvshmem_malloc names its
// buffer; the memory goes back to NVSHMEM (nvshmem_free) when the Executable goes. Joining
// without an NCCL communicator works only where the application started NVSHMEM itself.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "runtime/src/executable_impl.h"
#include "runtime/tests/fake_graph_api.h"
#include "runtime/tests/test_util.h"

namespace {

namespace fb = orch::fb;
using Impl = orch::Executable::Impl;
using orch::rt::nvshmem::Api;
using orch::rt::nvshmem::Session;

// A pipeline with two symmetric buffers (one a scalar) between two ordinary ones; no kernel
// calls NVSHMEM, so it compiles without NVSHMEM.
const char* const kSymmetric = R"(pipeline seam_symmetric
target sm_90
comm world
param n: u32 = 100
buffer a: f32[n]
buffer halo: f32[n * n_pes] symmetric
buffer b: u8[n]
buffer sig: u64 symmetric
graph main {
  fill a = 1
  fill halo = 2
  fill b = 3
  fill sig = 0
}
)";

struct FakeShmem;
FakeShmem* shmem = nullptr;  // the fake the fake API answers from, while one lives

// What the fake NVSHMEM saw, and what it answers. It is the fake API's for as long as it lives,
// so a test that stops at a failed REQUIRE leaves no dangling fake behind.
struct FakeShmem {
  FakeShmem() { shmem = this; }
  ~FakeShmem() { shmem = nullptr; }
  FakeShmem(const FakeShmem&) = delete;
  FakeShmem& operator=(const FakeShmem&) = delete;

  std::vector<std::string> calls;
  std::vector<size_t> mallocs;
  size_t fail_malloc = SIZE_MAX;  // this malloc (0-based) returns nullptr
  int status = 2;                 // initialised by the application, as PE 1 of 4
  int pe = 1, pes = 4;
  size_t cuda_calls_at_barrier = 0;
  orch::test::FakeGraphApi* cuda = nullptr;
};

Api fake_api() {
  Api a;
  a.path = "fake-nvshmem";
  a.init_status = [] { return shmem->status; };
  a.my_pe = [] { return shmem->pe; };
  a.n_pes = [] { return shmem->pes; };
  a.malloc = [](size_t bytes) -> void* {
    const size_t i = shmem->mallocs.size();
    shmem->mallocs.push_back(bytes);
    shmem->calls.push_back("malloc");
    if (i == shmem->fail_malloc) return nullptr;
    return reinterpret_cast<void*>(uintptr_t{0x5EA0000000} + (uintptr_t{i} << 24));
  };
  a.free = [](void*) { shmem->calls.push_back("free"); };
  a.barrier_all = [] {
    shmem->calls.push_back("barrier_all");
    shmem->cuda_calls_at_barrier = shmem->cuda->calls.size();
  };
  return a;
}

// An Executable's Impl as instantiate() has it when NVSHMEM starts: the plan made, the ordinary
// buffers placed; rank 1 of 4 through a comm bound without an NCCL communicator.
struct ShmemBuild {
  orch::test::FakeGraphApi cuda;
  orch::test::OpenedExample artifact;
  Api api = fake_api();
  std::unique_ptr<Impl> x;

  void make(unsigned n) {
    std::string log;
    const std::string path = orch::test::compile_source("seam_symmetric", kSymmetric, &log);
    INFO(log);
    REQUIRE(!path.empty());
    artifact = orch::test::open_artifact(path);
    auto pl = std::make_shared<orch::Pipeline::Impl>();
    pl->fb = artifact.p;
    pl->name = "seam_symmetric";
    pl->nvshmem = &api;
    x = std::make_unique<Impl>();
    x->cuda = &cuda;
    x->pipeline = pl;
    x->p = artifact.p;
    orch::Bindings b;
    b.param("n", n).comm("world", nullptr, 1, 4);
    auto plan = orch::rt::make_plan(*artifact.p, b);
    ORCH_REQUIRE_OK(plan);
    x->plan = std::move(plan.value());
    x->buffers.resize(artifact.p->buffers()->size());
  }
};

}  // namespace

TEST_CASE("nvshmem at instantiate: symmetric buffers in order, rounded, zeroed, waited for, then one barrier") {
  FakeShmem s;
  {
    ShmemBuild f;
    s.cuda = &f.cuda;
    f.make(100);
    ORCH_REQUIRE_OK(f.x->join_nvshmem(nullptr));  // the application's NVSHMEM, PE 1 of 4
    REQUIRE(static_cast<bool>(f.x->nvshmem));
    CHECK(!f.x->nvshmem->owned());
    ORCH_REQUIRE_OK(f.x->allocate_symmetric(nullptr));
    // halo: 100 * 4 f32 = 1600 bytes; sig: 8 bytes, rounded up to 16.
    CHECK(s.mallocs == std::vector<size_t>{1600, 16});
    CHECK(s.calls == std::vector<std::string>{"malloc", "malloc", "barrier_all"});
    const auto memsets = f.cuda.named("memset_async");
    REQUIRE(memsets.size() == 2);
    CHECK(memsets[0]->on == 0x5EA0000000);
    CHECK(memsets[0]->params.bytes == 1600);
    CHECK(memsets[0]->params.value == 0);
    CHECK(memsets[1]->on == 0x5EA1000000);
    CHECK(memsets[1]->params.bytes == 16);
    // The barrier comes after the stream that zeroed them has finished.
    REQUIRE(!f.cuda.calls.empty());
    CHECK(s.cuda_calls_at_barrier == f.cuda.calls.size());
    CHECK(f.cuda.calls.back().name == "stream_synchronize");
    // The Executable's buffers: only the symmetric ones are placed here.
    const auto& buffers = f.x->buffers;
    CHECK(buffers[0].ptr == nullptr);
    CHECK(buffers[1].ptr == reinterpret_cast<void*>(uintptr_t{0x5EA0000000}));
    CHECK(buffers[1].capacity == 1600);
    CHECK(buffers[1].owned);
    CHECK(buffers[2].ptr == nullptr);
    CHECK(buffers[3].ptr == reinterpret_cast<void*>(uintptr_t{0x5EA1000000}));
    CHECK(buffers[3].capacity == 8);
  }
  // The Executable gone: both buffers back to NVSHMEM; the application's NVSHMEM not finalised.
  CHECK(s.calls == std::vector<std::string>{"malloc", "malloc", "barrier_all", "free", "free"});
}

TEST_CASE("nvshmem at instantiate: a failed nvshmem_malloc names its buffer; what was allocated goes back") {
  FakeShmem s;
  s.fail_malloc = 1;
  {
    ShmemBuild f;
    s.cuda = &f.cuda;
    f.make(100);
    ORCH_REQUIRE_OK(f.x->join_nvshmem(nullptr));
    const orch::Status st = f.x->allocate_symmetric(nullptr);
    REQUIRE(!st.ok());
    CHECK(st.error().code() == orch::ErrorCode::Nvshmem);
    CHECK(st.error().message() ==
          "buffer 'sig': nvshmem_malloc(16) failed: NVSHMEM's symmetric heap has no room for it "
          "(NVSHMEM_SYMMETRIC_SIZE sets its size)");
    INFO(st.error().where());
    CHECK(st.error().where().find("seam_symmetric.orch:8") != std::string::npos);
    CHECK(s.calls == std::vector<std::string>{"malloc", "malloc"});  // no barrier
  }
  CHECK(s.calls == std::vector<std::string>{"malloc", "malloc", "free"});
}

TEST_CASE("nvshmem at instantiate: without NVSHMEM running, a comm without NCCL cannot start it") {
  FakeShmem s;
  s.status = 0;  // not initialised
  ShmemBuild f;
  s.cuda = &f.cuda;
  f.make(100);
  const orch::Status st = f.x->join_nvshmem(nullptr);
  REQUIRE(!st.ok());
  CHECK(st.error().code() == orch::ErrorCode::Unbound);
  CHECK(st.error().message() ==
        "pipeline 'seam_symmetric' uses NVSHMEM, which is not initialised in this process, and no comm is bound "
        "with an NCCL communicator to start it over (Bindings::comm with an ncclComm_t, or comm_from_unique_id; "
        "or initialise NVSHMEM in the application first, PE r as rank r)");
  CHECK(!static_cast<bool>(f.x->nvshmem));
  CHECK(s.calls.empty());
  Session::end_for_tests();
}

TEST_CASE("nvshmem at instantiate: the application's NVSHMEM as another PE than the comm's rank is refused") {
  FakeShmem s;
  s.pe = 2;
  ShmemBuild f;
  s.cuda = &f.cuda;
  f.make(100);
  const orch::Status st = f.x->join_nvshmem(nullptr);
  REQUIRE(!st.ok());
  CHECK(st.error().message() ==
        "the application initialised NVSHMEM as PE 2 of 4, but the pipeline's communicator makes this process PE 1 "
        "of 4; PE r must be the communicator's rank r");
}
