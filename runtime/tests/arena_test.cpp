// The memory plan at instantiate, without a GPU (runtime/src/arena.h): the runtime lays the
// arena out as orchc did at the params' defaults, leaves bound buffers out, lays it out again
// for other sizes (checked against the conflicts), has none without a plan; and the overlap
// check lets buffers of the arena share bytes while still refusing bound memory over them.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "artifact/arena.h"
#include "orch/runtime.h"
#include "runtime/src/arena.h"
#include "runtime/src/binding_checks.h"
#include "runtime/src/plan.h"
#include "runtime/tests/planned_pipeline.h"
#include "runtime/tests/test_util.h"

namespace {

using orch::test::OpenedExample;

OpenedExample compiled_planned(const char* options) {
  std::string log;
  const std::string path =
      orch::test::compile_source(options[0] ? "planned_cpu_off" : "planned_cpu", orch::test::planned_pipeline(), &log,
                                 options);
  INFO(log);
  REQUIRE(!path.empty());
  return orch::test::open_artifact(path);
}

int buffer_index(const orch::fb::Pipeline& p, const std::string& name) {
  for (uint32_t i = 0; i < p.buffers()->size(); ++i)
    if (p.buffers()->Get(i)->name()->str() == name) return static_cast<int>(i);
  FAIL("no buffer " << name);
  return -1;
}

}  // namespace

TEST_CASE("arena: the runtime lays the plan out as orchc did at the defaults, and again for other sizes") {
  const OpenedExample o = compiled_planned("");
  const orch::fb::Pipeline& p = *o.p;
  const orch::fb::MemoryPlan* m = p.memory_plan();
  REQUIRE(m != nullptr);
  REQUIRE(m->laid_out());
  const uint32_t slots = m->slots()->size();
  // The 32 temporaries, e1, e2, acc, w and out.
  CHECK(slots == 37);
  const uint32_t nbuffers = p.buffers()->size();
  std::vector<bool> none(nbuffers, false);

  auto plan = orch::rt::make_plan(p, orch::Bindings());
  REQUIRE(plan.ok());
  auto place = orch::rt::place_arena(p, *plan, none);
  REQUIRE(place.ok());
  CHECK(place->buffers == slots);
  CHECK(place->bytes == m->arena_bytes());
  for (uint32_t s = 0; s < slots; ++s) {
    const orch::fb::ArenaSlot* slot = m->slots()->Get(s);
    CHECK(place->offset[slot->buffer()] == static_cast<int64_t>(slot->offset()));
  }
  for (const char* alone : {"x", "y", "flag", "iters"}) CHECK(place->offset[buffer_index(p, alone)] == -1);
  // The arena holds 37 buffers of 4 MiB in far less than 37 times that.
  CHECK(place->alone_bytes == 37ull * (4u << 20));
  CHECK(place->bytes * 4 <= place->alone_bytes);

  // A buffer the application binds leaves the arena; the rest is laid out again.
  std::vector<bool> bound = none;
  bound[buffer_index(p, "t5")] = true;
  place = orch::rt::place_arena(p, *plan, bound);
  REQUIRE(place.ok());
  CHECK(place->buffers == slots - 1);
  CHECK(place->offset[buffer_index(p, "t5")] == -1);

  // Other sizes: n = 100003 elements, laid out again and checked against the conflicts.
  orch::Bindings b;
  b.param("n", 100003u);
  plan = orch::rt::make_plan(p, b);
  REQUIRE(plan.ok());
  place = orch::rt::place_arena(p, *plan, none);
  REQUIRE(place.ok());
  CHECK(place->buffers == slots);
  std::vector<uint64_t> bytes, offsets;
  std::vector<orch::artifact::SlotPair> conflicts;
  for (uint32_t s = 0; s < slots; ++s) {
    const uint32_t buf = m->slots()->Get(s)->buffer();
    bytes.push_back(plan->buffers[buf].bytes);
    offsets.push_back(static_cast<uint64_t>(place->offset[buf]));
    CHECK(offsets.back() % 256 == 0);
  }
  for (const orch::fb::SlotPair* c : *m->conflicts()) conflicts.emplace_back(c->a(), c->b());
  CHECK(orch::artifact::check_arena(bytes, offsets, conflicts, place->bytes) == "");
  CHECK(place->bytes < place->alone_bytes);
}

TEST_CASE("arena: without a plan (orchc --no-memory-plan) every buffer is allocated alone") {
  const OpenedExample o = compiled_planned("--no-memory-plan");
  CHECK(o.p->memory_plan() == nullptr);
  auto plan = orch::rt::make_plan(*o.p, orch::Bindings());
  REQUIRE(plan.ok());
  auto place = orch::rt::place_arena(*o.p, *plan, std::vector<bool>(o.p->buffers()->size(), false));
  REQUIRE(place.ok());
  CHECK(place->buffers == 0);
  CHECK(place->bytes == 0);
}

TEST_CASE("arena: buffers of the arena may share bytes; bound memory over them is still refused") {
  const OpenedExample o = compiled_planned("");
  const orch::fb::Pipeline& p = *o.p;
  const auto written = orch::rt::written_buffers(p);
  std::vector<orch::rt::Span> spans(p.buffers()->size());
  const int t1 = buffer_index(p, "t1"), t3 = buffer_index(p, "t3"), x = buffer_index(p, "x");
  spans[t1] = {0x100000, 4096, true};
  spans[t3] = {0x100000, 4096, true};
  orch::Bindings none;
  CHECK(orch::rt::check_overlaps(p, spans, written, none).ok());
  // x bound over the arena's bytes: refused, naming both.
  spans[x] = {0x100800, 4096, false};
  orch::Status s = orch::rt::check_overlaps(p, spans, written, none);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().code() == orch::ErrorCode::BuffersOverlap);
  CHECK(s.error().message().find("'x'") != std::string::npos);
}

TEST_CASE("allocations: rounded up to 16 bytes, for NCCL's 16-byte reads past a buffer's end") {
  using orch::rt::allocation_bytes;
  CHECK(allocation_bytes(0) == 0);
  CHECK(allocation_bytes(1) == 16);
  CHECK(allocation_bytes(16) == 16);
  CHECK(allocation_bytes(17) == 32);
  // 1048583 f32: the size at which compute-sanitizer saw NCCL's LL128 read 4 bytes past the end.
  CHECK(allocation_bytes(1048583ull * 4) == 4194336);
  CHECK(allocation_bytes(UINT64_MAX) == UINT64_MAX);
}
