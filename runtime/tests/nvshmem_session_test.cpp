// CPU tests of NVSHMEM's process-wide Session (runtime/src/nvshmem.h) against a recording fake
// of the host library (Api is a table of function pointers): one initialisation shared by every
// joiner and kept after the last one lets go, the unique id made on rank 0 and shared before the
// initialisation, the application's own NVSHMEM adopted and never finalised, a rank that differs
// refused, failures that leave nothing initialised, and symmetric memory freed before its
// session can end. Also the plan's symmetric size hash, which the ranks compare before
// nvshmem_malloc. Each test ends the session it started (Session::end_for_tests).
#include <doctest/doctest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "artifact/pipeline_generated.h"
#include "orch/runtime.h"
#include "runtime/src/nvshmem.h"
#include "runtime/src/plan.h"
#include "runtime/tests/test_util.h"

namespace {

using orch::rt::nvshmem::Api;
using orch::rt::nvshmem::InitAttr;
using orch::rt::nvshmem::Session;
using orch::rt::nvshmem::SymmetricMemory;
using orch::rt::nvshmem::UniqueId;

struct Fake;
Fake* fake = nullptr;  // the fake the fake library answers from, while one lives

// What the fake library saw and what it answers; the library's for as long as it lives, so a
// test that stops at a failed REQUIRE leaves no dangling fake behind.
struct Fake {
  Fake() { fake = this; }
  ~Fake() { fake = nullptr; }
  Fake(const Fake&) = delete;
  Fake& operator=(const Fake&) = delete;
  std::vector<std::string> calls;
  int status = 0;  // nvshmemx_init_status
  int pe = -1, pes = -1;
  int init_result = 0, uniqueid_result = 0;
  int attr_rank = -1, attr_world = -1;
  char attr_id[8] = {};  // the first bytes of the id the initialisation got
  int frees = 0;
};

Api make_api() {
  Api a;
  a.path = "fake-nvshmem";
  a.init_status = [] { return fake->status; };
  a.get_uniqueid = [](UniqueId* id) {
    fake->calls.push_back("get_uniqueid");
    std::memcpy(id->internal, "rank0id", 8);
    return fake->uniqueid_result;
  };
  a.set_attr_uniqueid_args = [](int rank, int world, const UniqueId* id, InitAttr* attr) {
    fake->calls.push_back("set_attr " + std::to_string(rank) + "/" + std::to_string(world));
    fake->attr_rank = rank;
    fake->attr_world = world;
    std::memcpy(fake->attr_id, id->internal, 8);
    (void)attr;
    return 0;
  };
  a.hostlib_init_attr = [](unsigned flags, InitAttr*) {
    fake->calls.push_back("init " + std::to_string(flags));
    if (fake->init_result != 0) return fake->init_result;
    fake->status = 2;
    fake->pe = fake->attr_rank;
    fake->pes = fake->attr_world;
    return 0;
  };
  a.hostlib_finalize = [] {
    fake->calls.push_back("finalize");
    fake->status = 0;
  };
  a.my_pe = [] { return fake->pe; };
  a.n_pes = [] { return fake->pes; };
  a.free = [](void*) {
    fake->calls.push_back("free");
    ++fake->frees;
  };
  return a;
}

// Shares nothing: rank 0's id stays where join put it (a one-rank world, or a test that plays
// rank 0); counts its calls.
struct Share {
  int calls = 0;
  orch::Status result;
  std::function<orch::Status(UniqueId*)> fn() {
    return [this](UniqueId*) {
      ++calls;
      fake->calls.push_back("share");
      return result;
    };
  }
};

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("nvshmem session: the first join initialises over the shared id, later ones share it, it outlives them") {
  Fake f;
  const Api api = make_api();
  Share share;
  auto a = Session::join(api, 0, 2, share.fn());
  ORCH_REQUIRE_OK(a);
  CHECK((*a)->owned());
  CHECK((*a)->rank() == 0);
  CHECK((*a)->world_size() == 2);
  // The id is made, then shared, then handed to the initialisation: in that order.
  CHECK(f.calls == std::vector<std::string>{"get_uniqueid", "share", "set_attr 0/2", "init 8"});
  CHECK(std::string(f.attr_id) == "rank0id");
  const uint64_t generation = (*a)->generation();

  auto b = Session::join(api, 0, 2, share.fn());
  ORCH_REQUIRE_OK(b);
  CHECK(b->get() == a->get());
  CHECK(share.calls == 1);

  // A rank or world size other than the session's: refused, the session untouched.
  auto c = Session::join(api, 1, 2, share.fn());
  REQUIRE(!c.ok());
  CHECK(c.error().code() == orch::ErrorCode::Nvshmem);
  CHECK(contains(c.error().message(), "NVSHMEM already runs in this process as PE 0 of 2, but this pipeline's "
                                      "communicator makes it PE 1 of 2"));

  a->reset();
  b->reset();
  CHECK(f.calls.back() == "init 8");  // started by orch: kept to the end of the process
  auto d = Session::join(api, 0, 2, share.fn());
  ORCH_REQUIRE_OK(d);
  CHECK((*d)->generation() == generation);
  CHECK(share.calls == 1);
  d->reset();

  // Ended (tests only): finalised, and a later join starts again, a new generation.
  Session::end_for_tests();
  CHECK(f.calls.back() == "finalize");
  CHECK(f.status == 0);
  auto e = Session::join(api, 0, 2, share.fn());
  ORCH_REQUIRE_OK(e);
  CHECK((*e)->generation() != generation);
  e->reset();
  Session::end_for_tests();
}

TEST_CASE("nvshmem session: a rank other than 0 makes no id, and takes rank 0's from the share") {
  Fake f;
  const Api api = make_api();
  auto s = Session::join(api, 1, 2, [](UniqueId* id) {
    std::memcpy(id->internal, "fromzero", 8);
    return orch::Status();
  });
  ORCH_REQUIRE_OK(s);
  CHECK(f.calls == std::vector<std::string>{"set_attr 1/2", "init 8"});
  CHECK(std::string(f.attr_id, 8) == "fromzero");
  s->reset();
  Session::end_for_tests();
}

TEST_CASE("nvshmem session: the application's NVSHMEM is adopted, checked against the rank, and never finalised") {
  Fake f;
  f.status = 2;
  f.pe = 1;
  f.pes = 4;
  const Api api = make_api();
  Share share;
  auto s = Session::join(api, 1, 4, share.fn());
  ORCH_REQUIRE_OK(s);
  CHECK(!(*s)->owned());
  CHECK(share.calls == 0);
  s->reset();
  Session::end_for_tests();
  CHECK(f.calls.empty());  // no initialisation, no finalise

  auto wrong = Session::join(api, 2, 4, share.fn());
  REQUIRE(!wrong.ok());
  CHECK(wrong.error().message() ==
        "the application initialised NVSHMEM as PE 1 of 4, but the pipeline's communicator makes this process PE 2 "
        "of 4; PE r must be the communicator's rank r");
}

TEST_CASE("nvshmem session: failures are error values and leave NVSHMEM as it was") {
  Fake f;
  const Api api = make_api();
  Share share;

  auto bad_rank = Session::join(api, 2, 2, share.fn());
  REQUIRE(!bad_rank.ok());
  CHECK(bad_rank.error().code() == orch::ErrorCode::InvalidValue);
  CHECK(f.calls.empty());

  share.result = orch::Error(orch::ErrorCode::Unbound, "no communicator to share it over");
  auto unshared = Session::join(api, 0, 2, share.fn());
  REQUIRE(!unshared.ok());
  CHECK(unshared.error().message() == "no communicator to share it over");
  CHECK(f.status == 0);

  share.result = orch::Status();
  f.uniqueid_result = 5;
  auto no_id = Session::join(api, 0, 2, share.fn());
  REQUIRE(!no_id.ok());
  CHECK(no_id.error().message() == "nvshmemx_get_uniqueid failed");

  f.uniqueid_result = 0;
  f.init_result = 7;
  f.calls.clear();
  auto no_init = Session::join(api, 0, 2, share.fn());
  REQUIRE(!no_init.ok());
  CHECK(no_init.error().code() == orch::ErrorCode::Nvshmem);
  CHECK(no_init.error().message() == "nvshmemx_hostlib_init_attr(PE 0 of 2) failed (NVSHMEM_DEBUG=INFO says why)");
  CHECK(f.calls.back() == "init 8");  // nothing to finalise

  // After the failures, a join that works.
  f.init_result = 0;
  auto ok = Session::join(api, 0, 2, share.fn());
  ORCH_REQUIRE_OK(ok);
  ok->reset();
  Session::end_for_tests();
  CHECK(f.calls.back() == "finalize");
}

TEST_CASE("nvshmem session: symmetric memory is freed before its session can end") {
  Fake f;
  const Api api = make_api();
  Share share;
  auto s = Session::join(api, 0, 1, share.fn());
  ORCH_REQUIRE_OK(s);
  int word = 0;
  {
    SymmetricMemory m(*s, &word);
    SymmetricMemory moved(std::move(m));
    CHECK(!m);
    CHECK(moved.get() == &word);
    s->reset();
    Session::end_for_tests();  // the memory still holds the session
    CHECK(f.calls.back() == "init 8");
  }
  CHECK(f.frees == 1);
  CHECK(f.calls.size() >= 2);
  CHECK(f.calls[f.calls.size() - 2] == "free");
  CHECK(f.calls.back() == "finalize");
}

TEST_CASE("symmetric_sizes_hash: equal for equal sizes, different when a symmetric size differs, blind to others") {
  orch::fb::PipelineT t;
  for (const char* name : {"a", "s", "t"}) {
    auto b = std::make_unique<orch::fb::BufferT>();
    b->name = name;
    b->symmetric = std::string(name) != "a";
    t.buffers.push_back(std::move(b));
  }
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(orch::fb::Pipeline::Pack(fbb, &t));
  const orch::fb::Pipeline& p = *flatbuffers::GetRoot<orch::fb::Pipeline>(fbb.GetBufferPointer());
  orch::rt::Plan plan;
  plan.buffers.resize(3);
  plan.buffers[0].bytes = 100;
  plan.buffers[1].bytes = 64;
  plan.buffers[2].bytes = 8;
  const uint64_t h = orch::rt::symmetric_sizes_hash(p, plan);
  orch::rt::Plan other = plan;
  other.buffers[0].bytes = 200;  // not symmetric
  CHECK(orch::rt::symmetric_sizes_hash(p, other) == h);
  other.buffers[1].bytes = 128;
  CHECK(orch::rt::symmetric_sizes_hash(p, other) != h);
  other = plan;
  std::swap(other.buffers[1].bytes, other.buffers[2].bytes);  // the same sizes on other buffers
  CHECK(orch::rt::symmetric_sizes_hash(p, other) != h);
  CHECK(orch::rt::uses_nvshmem(p));
}
