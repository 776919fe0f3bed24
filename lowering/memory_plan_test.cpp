// The memory plan (issue 24) without a GPU: what plan_memory lets share and what it refuses, on
// small pipelines made for each rule, on the examples and on generated chains; the independent
// verifier (verify_memory_plan) accepting every plan and refusing broken ones; and random
// pipelines planned, verified and executed by a simulator of the arena that checks no read ever
// sees bytes another buffer left, on random orders of the DAG and random branches and trips.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "artifact/arena.h"
#include "compiler/check.h"
#include "lowering/lower.h"
#include "lowering/passes.h"

namespace orch {
namespace {

namespace fs = std::filesystem;

struct Lowered {
  SourceManager sources;
  DiagnosticEngine diags;
  CheckResult checked;
  lir::Program program;
};

std::unique_ptr<Lowered> lower_text(const std::string& text, bool plan = true, uint32_t unroll = 0) {
  auto l = std::make_unique<Lowered>();
  l->checked = check_text("t.orch", text, l->sources, {}, l->diags);
  REQUIRE_MESSAGE(!l->diags.has_errors(), format_diagnostics(l->diags.sorted(), l->sources, DiagnosticFormat::Text)
                                              << "\n" << text);
  LowerOptions o;
  o.memory_plan = plan;
  o.unroll = unroll;
  l->program = lower_to_lir(*l->checked.program, o);
  return l;
}

int buffer(const lir::Program& p, const std::string& name) {
  for (size_t i = 0; i < p.buffers.size(); ++i)
    if (p.buffers[i].name == name) return static_cast<int>(i);
  FAIL("no buffer " << name);
  return -1;
}

lir::PlanStatus status(const lir::Program& p, const std::string& name) {
  return p.memory_plan.status.at(static_cast<size_t>(buffer(p, name)));
}

int slot(const lir::Program& p, const std::string& name) {
  const int b = buffer(p, name);
  for (size_t i = 0; i < p.memory_plan.slots.size(); ++i)
    if (p.memory_plan.slots[i].buffer == b) return static_cast<int>(i);
  return -1;
}

// Both in the arena, with no conflict between them: the plan lets them share bytes.
bool may_share(const lir::Program& p, const std::string& a, const std::string& b) {
  int x = slot(p, a), y = slot(p, b);
  if (x < 0 || y < 0) return false;
  if (x > y) std::swap(x, y);
  const auto& c = p.memory_plan.conflicts;
  return std::find(c.begin(), c.end(), std::make_pair(static_cast<uint32_t>(x), static_cast<uint32_t>(y))) == c.end();
}

bool verified(const Lowered& l, std::string* report = nullptr) {
  DiagnosticEngine d;
  const bool ok = lowering::verify_memory_plan(l.program, d);
  if (report) *report = format_diagnostics(d.sorted(), l.sources, DiagnosticFormat::Text);
  return ok && !d.has_errors();
}

const char* kKernels = R"orch(
kernel step(n: u32, a: in f32[], b: out f32[]) source """extern "C" __global__ void step(unsigned n, const float* a, float* b) {}"""
kernel mix(n: u32, a: in f32[], c: in f32[], b: out f32[]) source """extern "C" __global__ void mix(unsigned n, const float* a, const float* c, float* b) {}"""
kernel bump(n: u32, a: inout f32[]) source """extern "C" __global__ void bump(unsigned n, float* a) {}"""
)orch";

// A chain of `stages` kernels, x -> t1 -> ... -> tN; every `skip` stages (0: never) a stage also
// reads the temporary `skip` stages back (a residual connection).
std::string chain(int stages, int skip = 0, const std::string& count = "n") {
  std::string s = "pipeline chain\nparam n: u32 = 1048576\nbuffer x: f32[" + count + "]\n";
  for (int i = 1; i <= stages; ++i) s += "buffer t" + std::to_string(i) + ": f32[" + count + "]\n";
  s += kKernels;
  s += "graph main {\n";
  for (int i = 1; i <= stages; ++i) {
    const std::string in = i == 1 ? "x" : "t" + std::to_string(i - 1);
    if (skip > 0 && i > skip && i % skip == 0)
      s += "  mix<<<ceil_div(n, 256), 256>>>(n, " + in + ", t" + std::to_string(i - skip) + ", t" + std::to_string(i) +
           ")\n";
    else
      s += "  step<<<ceil_div(n, 256), 256>>>(n, " + in + ", t" + std::to_string(i) + ")\n";
  }
  return s + "}\n";
}

TEST_SUITE("memory plan") {

TEST_CASE("memory plan: a 32-stage chain keeps two temporaries' worth of memory; the input and result stay whole") {
  auto l = lower_text(chain(32));
  const lir::Program& p = l->program;
  const lir::MemoryPlan& m = p.memory_plan;
  REQUIRE(m.ran);
  std::string report;
  CHECK_MESSAGE(verified(*l, &report), report);
  // x is read and never written: the application's input, whose contents carry between launches.
  CHECK(status(p, "x") == lir::PlanStatus::ReadFirst);
  for (int i = 1; i <= 32; ++i) CHECK(status(p, "t" + std::to_string(i)) == lir::PlanStatus::Arena);
  // Neighbours meet in one kernel; two stages apart they are ordered.
  CHECK_FALSE(may_share(p, "t1", "t2"));
  CHECK(may_share(p, "t1", "t3"));
  // The result t32 comes after every buffer it shares with.
  CHECK(may_share(p, "t1", "t32"));
  CHECK_FALSE(may_share(p, "t31", "t32"));
  REQUIRE(m.laid_out);
  const uint64_t one = 4ull << 20;
  CHECK(m.arena_bytes == 2 * one);
  CHECK(m.device_bytes_separate == 33 * one);
  CHECK(m.device_bytes_planned == 3 * one);
  CHECK(m.device_bytes_separate >= 2 * m.device_bytes_planned);
  MESSAGE("32-stage chain: device memory " << m.device_bytes_separate << " bytes without the plan, "
                                           << m.device_bytes_planned << " with it");
}

TEST_CASE("memory plan: --print-passes and --emit=ir show which buffers share, where, and the memory saved") {
  auto l = lower_text(chain(4));
  const std::string text = lir::print(l->program, l->sources);
  const std::string want = R"(memory plan: 4 buffers in one arena of 8388608 bytes at the defaults (16777216 one by one)
  t1: 4194304 bytes at 0; may share with t3, t4
  t2: 4194304 bytes at 4194304; may share with t4
  t3: 4194304 bytes at 0; may share with t1
  t4: 4194304 bytes at 4194304; may share with t1, t2
  device memory at the defaults: 12582912 bytes, 20971520 without the plan
)";
  CHECK_MESSAGE(text.find(want) != std::string::npos, text);
  // Without the plan, nothing is printed.
  auto off = lower_text(chain(4), false);
  CHECK(lir::print(off->program, off->sources).find("memory plan") == std::string::npos);
}

TEST_CASE("memory plan: a 32-stage chain with residual connections every 4 stages") {
  auto l = lower_text(chain(32, 4));
  const lir::MemoryPlan& m = l->program.memory_plan;
  std::string report;
  CHECK_MESSAGE(verified(*l, &report), report);
  REQUIRE(m.laid_out);
  // t4 is read again by stage 8: it is in use beside t5..t7, which may not share its bytes.
  CHECK_FALSE(may_share(l->program, "t4", "t6"));
  CHECK(may_share(l->program, "t4", "t9"));
  CHECK(m.device_bytes_separate >= 2 * m.device_bytes_planned);
  MESSAGE("32-stage chain with residuals: device memory " << m.device_bytes_separate << " bytes without the plan, "
                                                          << m.device_bytes_planned << " with it");
}

TEST_CASE("memory plan: --no-memory-plan allocates every buffer alone") {
  auto l = lower_text(chain(4), false);
  const lir::MemoryPlan& m = l->program.memory_plan;
  CHECK_FALSE(m.ran);
  CHECK(m.slots.empty());
  CHECK(status(l->program, "t1") == lir::PlanStatus::Off);
  CHECK(verified(*l));
}

TEST_CASE("memory plan: branches that may run at the same time never share") {
  auto l = lower_text(std::string("pipeline p\nparam n: u32 = 1024\n") +
                      "buffer x: f32[n]\nbuffer a: f32[n]\nbuffer b: f32[n]\nbuffer y: f32[n]\nbuffer z: f32[n]\n"
                      "buffer w: f32[n]\n" + kKernels + R"orch(
graph main {
  step<<<4, 256>>>(n, x, a)
  step<<<4, 256>>>(n, x, b)
  mix<<<4, 256>>>(n, a, b, y)
  step<<<4, 256>>>(n, y, z)
  step<<<4, 256>>>(n, z, w)
}
)orch");
  const lir::Program& p = l->program;
  CHECK(verified(*l));
  CHECK_FALSE(may_share(p, "a", "b"));  // both written from x, in either order or at once
  CHECK_FALSE(may_share(p, "a", "y"));  // mix reads a and writes y
  CHECK(may_share(p, "a", "z"));
  CHECK(may_share(p, "b", "z"));
  CHECK_FALSE(may_share(p, "y", "z"));
}

TEST_CASE("memory plan: loop-carried buffers and buffers of one loop do not share") {
  auto l = lower_text(std::string("pipeline p\nparam n: u32 = 1024\n") +
                      "buffer x: f32[n]\nbuffer before: f32[n]\nbuffer acc: f32[n]\nbuffer tmp: f32[n]\n"
                      "buffer carry: f32[n]\nbuffer after: f32[n]\nbuffer out: f32[n]\nbuffer iters: u32\n" +
                      kKernels + R"orch(
graph main {
  fill iters = 0
  step<<<4, 256>>>(n, x, before)
  step<<<4, 256>>>(n, before, acc)
  while iters < 4 {
    step<<<4, 256>>>(n, acc, tmp)
    step<<<4, 256>>>(n, tmp, acc)
    bump<<<4, 256>>>(n, carry)
    iters += 1
  }
  step<<<4, 256>>>(n, acc, after)
  step<<<4, 256>>>(n, after, out)
}
)orch");
  const lir::Program& p = l->program;
  std::string report;
  CHECK_MESSAGE(verified(*l, &report), report);
  // `carry` is read at the top of every iteration before anything writes it.
  CHECK(status(p, "carry") == lir::PlanStatus::ReadFirst);
  CHECK(status(p, "iters") == lir::PlanStatus::Scalar);
  // tmp is written first in each iteration, but the loop is one use: in use beside acc.
  CHECK_FALSE(may_share(p, "tmp", "acc"));
  CHECK(may_share(p, "before", "tmp"));
  CHECK(may_share(p, "tmp", "after"));
  CHECK_FALSE(may_share(p, "before", "acc"));
}

TEST_CASE("memory plan: the two sides of an if/else may share; a result one side writes may not") {
  auto l = lower_text(std::string("pipeline p\nparam n: u32 = 1024\n") +
                      "buffer x: f32[n]\nbuffer a: f32[n]\nbuffer b: f32[n]\nbuffer y: f32[n]\nbuffer flag: u32\n" +
                      kKernels + R"orch(
graph main {
  if flag != 0 {
    step<<<4, 256>>>(n, x, a)
    step<<<4, 256>>>(n, a, y)
  } else {
    step<<<4, 256>>>(n, x, b)
    step<<<4, 256>>>(n, b, y)
  }
}
)orch");
  const lir::Program& p = l->program;
  CHECK(verified(*l));
  CHECK(may_share(p, "a", "b"));
  CHECK(p.memory_plan.slots.at(0).offset == p.memory_plan.slots.at(1).offset);
  // y is written on either side only, and never read: a result whose old contents a launch
  // could leave (which side runs is decided on the GPU).
  CHECK(status(p, "y") == lir::PlanStatus::ReadFirst);
}

TEST_CASE("memory plan: a result is written at the top level, and comes after what it shares with") {
  auto l = lower_text(std::string("pipeline p\nparam n: u32 = 1024\n") +
                      "buffer x: f32[n]\nbuffer early: f32[n]\nbuffer mid: f32[n]\nbuffer r: f32[n]\nbuffer t: f32[n]\n"
                      "buffer u: f32[n]\nbuffer s: f32[n]\nbuffer flag: u32\n" + kKernels + R"orch(
graph main {
  step<<<4, 256>>>(n, x, early)
  step<<<4, 256>>>(n, early, mid)
  step<<<4, 256>>>(n, mid, r)
  step<<<4, 256>>>(n, x, t)
  step<<<4, 256>>>(n, t, u)
  if flag != 0 { step<<<4, 256>>>(n, x, s) }
}
)orch");
  const lir::Program& p = l->program;
  std::string report;
  CHECK_MESSAGE(verified(*l, &report), report);
  // r (a result) may reuse `early`, all of whose uses come first, but not t: t's uses are not
  // all before r's write.
  CHECK(may_share(p, "early", "r"));
  CHECK_FALSE(may_share(p, "r", "t"));
  CHECK_FALSE(may_share(p, "r", "u"));  // two results
  // s is written only when the branch runs: some launches leave its old contents.
  CHECK(status(p, "s") == lir::PlanStatus::ResultSometimes);
}

TEST_CASE("memory plan: what never shares: host, scalars, keep, collectives, device graphs, partial copies") {
  auto l = lower_text(std::string("pipeline p\nparam n: u32 = 1024\ncomm world\n") +
                      "buffer x: f32[n]\nbuffer h: f32[n] host\nbuffer kept: f32[n] keep\nbuffer g: f32[n]\n"
                      "buffer gsum: f32[n]\nbuffer side: f32[n]\nbuffer small: f32[n]\nbuffer big: f32[2 * n]\n"
                      "buffer t: f32[n]\nbuffer u: f32[n]\nbuffer v: f32[n]\nbuffer unused: f32[n]\nbuffer s: u32\n" +
                      kKernels + R"orch(
graph fan device { step<<<4, 256>>>(n, x, side) }
graph main {
  step<<<4, 256>>>(n, h, kept)
  step<<<4, 256>>>(n, kept, g)
  allreduce sum g -> gsum on world
  step<<<4, 256>>>(n, gsum, small)
  copy small -> big
  step<<<4, 256>>>(n, big, t)
  step<<<4, 256>>>(n, t, u)
  step<<<4, 256>>>(n, u, v)
  fill s = 1
  launch fan fire_and_forget
}
)orch");
  const lir::Program& p = l->program;
  std::string report;
  CHECK_MESSAGE(verified(*l, &report), report);
  CHECK(status(p, "h") == lir::PlanStatus::Host);
  CHECK(status(p, "kept") == lir::PlanStatus::Keep);
  CHECK(status(p, "g") == lir::PlanStatus::Collective);
  CHECK(status(p, "gsum") == lir::PlanStatus::Collective);
  CHECK(status(p, "side") == lir::PlanStatus::DeviceGraph);
  CHECK(status(p, "x") == lir::PlanStatus::DeviceGraph);
  CHECK(status(p, "s") == lir::PlanStatus::Scalar);
  CHECK(status(p, "unused") == lir::PlanStatus::Unused);
  // The copy writes n of big's 2n elements: the rest carries from the last launch.
  CHECK(status(p, "big") == lir::PlanStatus::ReadFirst);
  CHECK(may_share(p, "small", "u"));
  CHECK(may_share(p, "t", "v"));
}

TEST_CASE("memory plan: a size the defaults do not give is laid out at instantiate") {
  auto k = lower_text(std::string("pipeline p\nparam m: u32\nbuffer x: f32[m]\nbuffer t1: f32[m]\nbuffer t2: f32[m]\n"
                                  "buffer t3: f32[m]\n") +
                      kKernels + "graph main {\n  step<<<4, 256>>>(m, x, t1)\n  step<<<4, 256>>>(m, t1, t2)\n"
                                 "  step<<<4, 256>>>(m, t2, t3)\n}\n");
  const lir::MemoryPlan& m = k->program.memory_plan;
  CHECK(verified(*k));
  CHECK(may_share(k->program, "t1", "t3"));
  CHECK_FALSE(m.laid_out);
  CHECK(m.arena_bytes == 0);
  CHECK_FALSE(m.sized);
}

// ---- the verifier against broken plans ------------------------------------------------------

TEST_CASE("memory plan verifier: a dropped conflict, a buffer that may not share, a layout that overlaps") {
  auto l = lower_text(chain(6));
  REQUIRE(verified(*l));
  lir::MemoryPlan& m = l->program.memory_plan;
  const lir::MemoryPlan good = m;
  std::string report;
  SUBCASE("a conflict dropped: t1 and t2 meet in one kernel") {
    const uint32_t a = static_cast<uint32_t>(slot(l->program, "t1")), b = static_cast<uint32_t>(slot(l->program, "t2"));
    auto it = std::find(m.conflicts.begin(), m.conflicts.end(), std::make_pair(a, b));
    REQUIRE(it != m.conflicts.end());
    m.conflicts.erase(it);
    CHECK_FALSE(verified(*l, &report));
    CHECK(report.find("error[E0899]: internal compiler error: the memory plan lets `t1` and `t2` share memory") !=
          std::string::npos);
  }
  SUBCASE("the input put in the arena: it is read before anything writes it") {
    const int x = buffer(l->program, "x");
    m.slots.insert(m.slots.begin(), {x, 0, 0});
    for (auto& c : m.conflicts) {
      ++c.first;
      ++c.second;
    }
    m.status[x] = lir::PlanStatus::Arena;
    m.laid_out = false;
    CHECK_FALSE(verified(*l, &report));
    CHECK(report.find("puts `x` in the arena, but a node may read it before anything writes all of it") !=
          std::string::npos);
  }
  SUBCASE("conflicting buffers laid out on the same bytes") {
    const size_t a = static_cast<size_t>(slot(l->program, "t1")), b = static_cast<size_t>(slot(l->program, "t2"));
    m.slots[b].offset = m.slots[a].offset;
    CHECK_FALSE(verified(*l, &report));
    CHECK(report.find("lays the arena out wrongly at the defaults") != std::string::npos);
  }
  SUBCASE("the plan restored verifies") {
    m = good;
    CHECK(verified(*l));
  }
}

TEST_CASE("memory plan verifier: a result made to share with a buffer used after it") {
  auto l = lower_text(std::string("pipeline p\nparam n: u32 = 1024\n") +
                      "buffer x: f32[n]\nbuffer r: f32[n]\nbuffer t: f32[n]\nbuffer u: f32[n]\n" + kKernels + R"orch(
graph main {
  step<<<4, 256>>>(n, x, r)
  step<<<4, 256>>>(n, r, t)
  step<<<4, 256>>>(n, t, u)
  step<<<4, 256>>>(n, u, x)
}
)orch");
  // r is read by the second kernel and consumed; u too. Nothing lets x share: it is read first.
  lir::Program& p = l->program;
  REQUIRE(verified(*l));
  CHECK(may_share(p, "r", "u"));
  // Make r a result (drop the read of it), keep the plan: r now comes before u, which overwrites it.
  auto& deps = p.graphs[p.main_graph].body.nodes;
  for (lir::BufferAccess& a : deps[1].accesses)
    if (a.buffer == buffer(p, "r")) a.buffer = buffer(p, "x");
  // The verifier reads the operands, not the accesses the planner read: r is still read there.
  CHECK(verified(*l));
  // Through the operands: the kernel now reads x instead of r.
  std::string report;
  auto& k = std::get<lir::KernelNode>(deps[1].op);
  k.args[1].ref = buffer(p, "x");
  CHECK_FALSE(verified(*l, &report));
  CHECK(report.find("`r`, a result the application reads after the launch, is not the later of the two") !=
        std::string::npos);
}

// Puts buffer `name` into the arena, in conflict with every other slot (so that only the rules
// about the buffer itself can refuse it), and drops the layout.
void force_into_arena(lir::Program& p, const std::string& name) {
  lir::MemoryPlan& m = p.memory_plan;
  const int b = buffer(p, name);
  size_t at = 0;
  while (at < m.slots.size() && m.slots[at].buffer < b) ++at;
  m.slots.insert(m.slots.begin() + static_cast<std::ptrdiff_t>(at), {b, 0, 0});
  for (auto& c : m.conflicts) {
    if (c.first >= at) ++c.first;
    if (c.second >= at) ++c.second;
  }
  for (uint32_t i = 0; i < m.slots.size(); ++i)
    if (i != at) m.conflicts.emplace_back(std::min<uint32_t>(i, static_cast<uint32_t>(at)), std::max<uint32_t>(i, static_cast<uint32_t>(at)));
  std::sort(m.conflicts.begin(), m.conflicts.end());
  m.status[b] = lir::PlanStatus::Arena;
  m.laid_out = false;
}

TEST_CASE("memory plan verifier: a buffer read before the write that covers it") {
  auto l = lower_text(std::string("pipeline p\nparam n: u32 = 1024\n") +
                      "buffer x: f32[n]\nbuffer a: f32[n]\nbuffer b: f32[n]\nbuffer c: f32[n]\nbuffer d: f32[n]\n" +
                      kKernels + R"orch(
graph main {
  step<<<4, 256>>>(n, x, b)
  step<<<4, 256>>>(n, a, c)
  step<<<4, 256>>>(n, x, a)
  step<<<4, 256>>>(n, c, d)
  step<<<4, 256>>>(n, b, x)
}
)orch");
  lir::Program& p = l->program;
  REQUIRE(verified(*l));
  // `a` is read by the second kernel and written in full only by the third.
  CHECK(status(p, "a") == lir::PlanStatus::ReadFirst);
  force_into_arena(p, "a");
  std::string report;
  CHECK_FALSE(verified(*l, &report));
  CHECK(report.find("puts `a` in the arena, but a node may read it before anything writes all of it") !=
        std::string::npos);
}

std::string simulate(const lir::Program& p, std::mt19937& rng, int runs);  // below

TEST_CASE("memory plan verifier: a loop-carried buffer and a temporary the loop uses after it") {
  // A carries from one iteration to the next (bumped in place); B is the loop's own, used after
  // A in each iteration and never outside the loop. Inside one iteration every use of A comes
  // before every use of B, and A's first write before the loop too; but the next iteration reads
  // A after B has written: the loop is one use, and the two may not share. (Not unrolled, so
  // that the copies of the body do not interleave the two already.)
  auto l = lower_text(std::string("pipeline p\nparam n: u32 = 1024\n") +
                      "buffer x: f32[n]\nbuffer A: f32[n]\nbuffer T: f32[n]\nbuffer B: f32[n]\nbuffer C: f32[n]\n"
                      "buffer iters: u32\n" + kKernels + R"orch(
graph main {
  fill A = 0
  fill iters = 0
  while iters < 3 {
    bump<<<4, 256>>>(n, A)
    step<<<4, 256>>>(n, A, T)
    step<<<4, 256>>>(n, T, B)
    step<<<4, 256>>>(n, B, C)
    iters += 1
  }
}
)orch", true, 1);
  lir::Program& p = l->program;
  std::string report;
  REQUIRE_MESSAGE(verified(*l, &report), report);
  CHECK_FALSE(may_share(p, "A", "B"));
  // Forced to share (the conflict dropped, the arena laid out again): refused, and it would
  // corrupt A.
  for (const char* name : {"A", "B"})
    if (slot(p, name) < 0) force_into_arena(p, name);
  lir::MemoryPlan& m = p.memory_plan;
  const uint32_t a = static_cast<uint32_t>(slot(p, "A")), b = static_cast<uint32_t>(slot(p, "B"));
  auto it = std::find(m.conflicts.begin(), m.conflicts.end(), std::make_pair(std::min(a, b), std::max(a, b)));
  REQUIRE(it != m.conflicts.end());
  m.conflicts.erase(it);
  std::vector<uint64_t> bytes(m.slots.size(), 4096);
  const artifact::ArenaLayout layout = artifact::pack_arena(bytes, m.conflicts);
  for (size_t i = 0; i < m.slots.size(); ++i) m.slots[i] = {m.slots[i].buffer, layout.offsets[i], 4096};
  m.arena_bytes = layout.bytes;
  m.laid_out = true;
  REQUIRE(m.slots[a].offset == m.slots[b].offset);
  CHECK_FALSE(verified(*l, &report));
  CHECK(report.find("lets `A` and `B` share memory, but nothing orders") != std::string::npos);
  std::mt19937 rng(7);
  const std::string run = simulate(p, rng, 20);
  CHECK(run.find("reads `A`, whose bytes hold `B`'s") != std::string::npos);
}

// ---- examples ---------------------------------------------------------------------------------

TEST_CASE("memory plan: every example and bundled pipeline is planned and verified") {
  std::vector<fs::path> files;
  for (const std::string& dir : {std::string(ORCH_EXAMPLES_DIR), std::string(ORCH_PIPELINES_DIR)})
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".orch") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  CHECK(files.size() >= 11);
  for (const fs::path& f : files) {
    CAPTURE(f);
    auto l = std::make_unique<Lowered>();
    l->checked = check_file(f.string(), l->sources, {}, l->diags);
    REQUIRE(!l->diags.has_errors());
    l->program = lower_to_lir(*l->checked.program);
    std::string report;
    CHECK_MESSAGE(verified(*l, &report), report);
    const lir::MemoryPlan& m = l->program.memory_plan;
    std::string arena;
    for (const auto& s : m.slots) arena += " " + l->program.buffers[s.buffer].name;
    MESSAGE(f.filename().string() << ": " << m.slots.size() << " buffers in the arena (" << arena
                                  << " ); device bytes at the defaults " << m.device_bytes_separate << " -> "
                                  << m.device_bytes_planned << std::string(m.sized ? "" : " (sizes known only at bind)"));
  }
}

// ---- random pipelines, and a simulator of the arena ------------------------------------------

// A random pipeline over array buffers of a few sizes, kernels that read one or two and write
// one, in-place kernels, fills, copies (some into larger buffers: a partial write), and
// if/else, switch and while around random statements. Reads mostly take buffers written
// earlier in the same scope (as real pipelines do), sometimes any buffer.
class RandomPipeline {
 public:
  explicit RandomPipeline(std::mt19937& rng) : rng_(rng) {}

  std::string make() {
    const int buffers = pick(4, 14);
    std::string s = "pipeline r\nparam n: u32 = 256\nbuffer flag: u32\nbuffer iters: u32\n";
    for (int i = 0; i < buffers; ++i) {
      const int count = std::vector<int>{64, 64, 128, 256}[static_cast<size_t>(pick(0, 3))];
      counts_.push_back(count);
      s += "buffer b" + std::to_string(i) + ": f32[" + std::to_string(count) + "]" +
           (pick(0, 15) == 0 ? " keep" : "") + "\n";
    }
    defined_ = {0, 1};  // the inputs
    s += kKernels;
    s += "kernel decide(n: u32, a: in f32[], f: out u32) source \"\"\"extern \"C\" __global__ void decide(unsigned n, const float* a, unsigned* f) {}\"\"\"\n";
    s += "graph main {\n  fill iters = 0\n";
    const int statements = pick(4, 16);
    for (int i = 0; i < statements; ++i) s += statement(1, 2);
    return s + "}\n";
  }

 private:
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  std::string b(int i) { return "b" + std::to_string(i); }
  int any() { return pick(0, static_cast<int>(counts_.size()) - 1); }
  // A buffer to read: mostly one written before in this scope.
  int source() {
    if (last_ >= 0 && pick(0, 1) == 0) return last_;  // chains: the buffer just written
    if (pick(0, 9) == 0 || defined_.empty()) return any();
    auto it = defined_.begin();
    std::advance(it, pick(0, static_cast<int>(defined_.size()) - 1));
    return *it;
  }
  int other(int not_this) {
    int x = any();
    while (x == not_this && counts_.size() > 1) x = any();
    return x;
  }
  // A buffer to write: mostly one not written yet in this scope (a fresh temporary).
  int target(int not_this) {
    std::vector<int> fresh;
    for (int i = 2; i < static_cast<int>(counts_.size()); ++i)
      if (!defined_.count(i) && i != not_this) fresh.push_back(i);
    if (fresh.empty() || pick(0, 3) == 0) return other(not_this);
    return fresh[static_cast<size_t>(pick(0, static_cast<int>(fresh.size()) - 1))];
  }
  int other_source(int not_this) {
    for (int t = 0; t < 8; ++t) {
      const int x = source();
      if (x != not_this) return x;
    }
    return other(not_this);
  }

  std::string statement(int indent, int depth) {
    const std::string pad(static_cast<size_t>(indent) * 2, ' ');
    // Mostly plain statements; one in five a conditional or a loop.
    int kind = pick(0, depth > 0 ? 19 : 14);
    if (kind <= 14) kind = std::vector<int>{0, 0, 0, 0, 0, 1, 1, 1, 2, 3, 4, 5, 5, 6, 7}[static_cast<size_t>(kind)];
    const int a = source(), c = target(a), d = other_source(a);
    if (kind <= 1 || kind == 5) last_ = c;
    switch (kind) {
      case 0: defined_.insert(c); return pad + "step<<<1, 64>>>(n, " + b(a) + ", " + b(c) + ")\n";
      case 1:
        defined_.insert(c);
        if (d == c) return pad + "step<<<1, 64>>>(n, " + b(a) + ", " + b(c) + ")\n";
        return pad + "mix<<<1, 64>>>(n, " + b(a) + ", " + b(d) + ", " + b(c) + ")\n";
      case 2: return pad + "bump<<<1, 64>>>(n, " + b(a) + ")\n";
      case 3: return pad + "bump<<<1, 64>>>(n, " + b(source()) + ")\n";
      case 4: return pad + "decide<<<1, 1>>>(n, " + b(a) + ", flag)\n";
      case 5: defined_.insert(c); return pad + "fill " + b(c) + " = 0\n";
      case 6:
        // copy needs a destination at least as large as the source.
        if (counts_[static_cast<size_t>(c)] >= counts_[static_cast<size_t>(a)]) {
          if (counts_[static_cast<size_t>(c)] == counts_[static_cast<size_t>(a)]) defined_.insert(c);
          return pad + "copy " + b(a) + " -> " + b(c) + "\n";
        }
        return pad + "copy " + b(c) + " -> " + b(a) + "\n";
      case 7: return pad + "decide<<<1, 1>>>(n, " + b(a) + ", flag)\n";
      case 15:
      case 16: {
        std::string s = pad + "if flag != 0 {\n" + block(indent + 1, depth - 1) + pad + "}";
        if (pick(0, 1)) s += " else {\n" + block(indent + 1, depth - 1) + pad + "}";
        return s + "\n";
      }
      case 17:
        return pad + "switch flag {\n" + pad + "  case 0 {\n" + block(indent + 2, depth - 1) + pad + "  }\n" + pad +
               "  case 3 {\n" + block(indent + 2, depth - 1) + pad + "  }\n" + pad + "  default {\n" +
               block(indent + 2, depth - 1) + pad + "  }\n" + pad + "}\n";
      default:
        return pad + "fill iters = 0\n" + pad + "while iters < 3 {\n" + block(indent + 1, depth - 1) + pad +
               "  iters += 1\n" + pad + "}\n";
    }
  }

  // A nested block: what it writes counts as written inside it only.
  std::string block(int indent, int depth) {
    const std::set<int> outside = defined_;
    const int last = last_;
    std::string s;
    const int n = pick(1, 5);
    for (int i = 0; i < n; ++i) s += statement(indent, depth);
    defined_ = outside;
    last_ = last;
    return s;
  }

  std::mt19937& rng_;
  std::vector<int> counts_;
  std::set<int> defined_;
  int last_ = -1;
};

// Runs the lowered program on an arena of 256-byte chunks laid out as the plan says at the
// defaults: each node in a random order its dependencies allow, branches and trip counts at
// random, unrolled copies cut off at random. Every read of an arena buffer must find, in each
// of its chunks, the bytes of that buffer's latest write of this launch.
class ArenaSimulator {
 public:
  ArenaSimulator(const lir::Program& p, std::mt19937& rng) : p_(p), rng_(rng) {
    const lir::MemoryPlan& m = p.memory_plan;
    first_chunk_.assign(p.buffers.size(), -1);
    chunks_.assign(p.buffers.size(), 0);
    for (const lir::MemoryPlan::Slot& s : m.slots) {
      first_chunk_[s.buffer] = static_cast<int64_t>(s.offset / artifact::kArenaAlignment);
      chunks_[s.buffer] = (s.bytes + artifact::kArenaAlignment - 1) / artifact::kArenaAlignment;
    }
    memory_.assign((m.arena_bytes + artifact::kArenaAlignment - 1) / artifact::kArenaAlignment, {-1, 0});
    version_.assign(p.buffers.size(), 0);
  }

  // One launch; "" or what went wrong.
  std::string launch() {
    written_.assign(p_.buffers.size(), false);
    std::vector<int> launches = p_.segments;
    if (launches.empty()) launches.push_back(p_.main_graph);
    for (int g : launches) {
      body(p_.graphs[static_cast<size_t>(g)].body, {});
      if (!error_.empty()) break;
    }
    return error_;
  }

 private:
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  // `cut`: per unrolled loop, the last copy that runs in this iteration.
  void body(const lir::Body& b, std::map<int, uint32_t> cut) {
    const size_t n = b.nodes.size();
    std::vector<size_t> waiting(n, 0);
    std::vector<std::vector<size_t>> next(n);
    for (size_t i = 0; i < n; ++i)
      for (const lir::Dep& d : b.nodes[i].deps) {
        ++waiting[i];
        next[d.from].push_back(i);
      }
    std::vector<size_t> ready;
    for (size_t i = 0; i < n; ++i)
      if (waiting[i] == 0) ready.push_back(i);
    // Copies of an unrolled loop's body: how far this iteration gets.
    for (const lir::Node& x : b.nodes)
      if (x.guard && !cut.count(x.guard->loop))
        cut[x.guard->loop] = static_cast<uint32_t>(pick(1, static_cast<int>(p_.unrolled_loops[x.guard->loop].copies)));
    while (!ready.empty() && error_.empty()) {
      const size_t k = static_cast<size_t>(pick(0, static_cast<int>(ready.size()) - 1));
      const size_t i = ready[k];
      ready.erase(ready.begin() + static_cast<std::ptrdiff_t>(k));
      run(b.nodes[i], cut);
      for (size_t j : next[i])
        if (--waiting[j] == 0) ready.push_back(j);
    }
  }

  void run(const lir::Node& n, const std::map<int, uint32_t>& cut) {
    if (n.guard && cut.count(n.guard->loop) && n.guard->copy > cut.at(n.guard->loop)) return;  // skipped copy
    if (const auto* c = std::get_if<lir::ConditionalNode>(&n.op)) {
      if (c->type == lir::ConditionalType::While) {
        const int trips = pick(0, 3);
        for (int t = 0; t < trips && error_.empty(); ++t) body(c->bodies[0], {});
      } else {
        const int which = pick(-1, static_cast<int>(c->bodies.size()) - 1);
        if (which >= 0) body(c->bodies[static_cast<size_t>(which)], cut);
      }
      return;
    }
    for (const lir::BufferAccess& a : n.accesses) {
      if (!a.read || first_chunk_[a.buffer] < 0) continue;
      if (!written_[a.buffer]) {
        error_ = "`" + n.what + "` reads arena buffer `" + p_.buffers[a.buffer].name + "` before this launch writes it";
        return;
      }
      for (uint64_t c = 0; c < chunks_[a.buffer]; ++c) {
        const auto& cell = memory_[static_cast<size_t>(first_chunk_[a.buffer]) + c];
        if (cell.first != a.buffer || cell.second != version_[a.buffer]) {
          error_ = "`" + n.what + "` reads `" + p_.buffers[a.buffer].name + "`, whose bytes hold " +
                   (cell.first < 0 ? std::string("nothing") : "`" + p_.buffers[cell.first].name + "`'s");
          return;
        }
      }
    }
    for (const lir::BufferAccess& a : n.accesses) {
      if (!a.write || first_chunk_[a.buffer] < 0) continue;
      written_[a.buffer] = true;
      ++version_[a.buffer];
      for (uint64_t c = 0; c < chunks_[a.buffer]; ++c)
        memory_[static_cast<size_t>(first_chunk_[a.buffer]) + c] = {a.buffer, version_[a.buffer]};
    }
  }

  const lir::Program& p_;
  std::mt19937& rng_;
  std::vector<int64_t> first_chunk_;
  std::vector<uint64_t> chunks_;
  std::vector<std::pair<int, uint64_t>> memory_;  // per chunk: the buffer and version last written
  std::vector<uint64_t> version_;
  std::vector<bool> written_;
  std::string error_;
};

std::string simulate(const lir::Program& p, std::mt19937& rng, int runs) {
  for (int r = 0; r < runs; ++r) {
    ArenaSimulator sim(p, rng);
    for (int launch = 0; launch < 2; ++launch)
      if (std::string e = sim.launch(); !e.empty()) return e;
  }
  return "";
}

// The plan with conflict `c` dropped and the arena laid out again.
lir::Program without_conflict(const lir::Program& p, size_t c) {
  lir::Program q = p;
  lir::MemoryPlan& m = q.memory_plan;
  m.conflicts.erase(m.conflicts.begin() + static_cast<std::ptrdiff_t>(c));
  std::vector<uint64_t> bytes;
  for (const auto& s : m.slots) bytes.push_back(s.bytes);
  artifact::ArenaLayout layout = artifact::pack_arena(bytes, m.conflicts);
  REQUIRE(layout.ok());
  for (size_t i = 0; i < m.slots.size(); ++i) m.slots[i].offset = layout.offsets[i];
  m.arena_bytes = layout.bytes;
  return q;
}

TEST_CASE("memory plan: random pipelines are planned, verified, and run on the arena without a clobbered read") {
  std::mt19937 rng(std::random_device{}());
  const unsigned seed = rng();
  CAPTURE(seed);
  rng.seed(seed);
  int planned = 0, shared = 0, mutants = 0, mutants_refused = 0, mutants_caught_running = 0;
  std::map<std::string, int> statuses;
  for (int i = 0; i < 300; ++i) {
    RandomPipeline gen(rng);
    const std::string text = gen.make();
    CAPTURE(text);
    auto l = std::make_unique<Lowered>();
    l->checked = check_text("t.orch", text, l->sources, {}, l->diags);
    if (l->diags.has_errors()) continue;  // a race the checker refuses (fire-and-forget never; kept simple)
    l->program = lower_to_lir(*l->checked.program);
    const lir::Program& p = l->program;
    std::string report;
    REQUIRE_MESSAGE(verified(*l, &report), report);
    REQUIRE(p.memory_plan.laid_out);
    ++planned;
    shared += p.memory_plan.slots.size() >= 2;
    for (lir::PlanStatus st : p.memory_plan.status) ++statuses[lir::to_string(st)];
    const std::string run = simulate(p, rng, 20);
    REQUIRE_MESSAGE(run.empty(), run);
    // A conflict dropped: the verifier refuses it, or running finds nothing wrong.
    if (!p.memory_plan.conflicts.empty()) {
      const size_t c = static_cast<size_t>(std::uniform_int_distribution<size_t>(0, p.memory_plan.conflicts.size() - 1)(rng));
      Lowered mutant;
      mutant.program = without_conflict(p, c);
      ++mutants;
      std::string why;
      if (!verified(mutant, &why)) {
        ++mutants_refused;
        mutants_caught_running += !simulate(mutant.program, rng, 20).empty();
      } else {
        const std::string bad = simulate(mutant.program, rng, 50);
        REQUIRE_MESSAGE(bad.empty(), "the verifier accepted a plan that corrupts a read: " << bad);
      }
    }
  }
  MESSAGE(planned << " random pipelines planned and verified, " << shared << " with buffers sharing; " << mutants
                  << " with a conflict dropped, " << mutants_refused << " of them refused by the verifier ("
                  << mutants_caught_running << " also corrupted a read when run)");
  for (const auto& [what, count] : statuses) MESSAGE(count << " buffers: " << what);
  CHECK(planned >= 250);
  CHECK(shared >= 15);
  CHECK(mutants_caught_running > 0);  // the simulator can see a clobbered read
}

// A conflict list packed, then checked: pack_arena's layouts always pass check_arena, and they
// are as small as the largest buffer when nothing conflicts and the sum when everything does.
TEST_CASE("arena: random conflict graphs pack into layouts that check") {
  std::mt19937 rng(std::random_device{}());
  for (int t = 0; t < 300; ++t) {
    const size_t n = std::uniform_int_distribution<size_t>(1, 24)(rng);
    std::vector<uint64_t> bytes(n);
    for (uint64_t& b : bytes) b = std::uniform_int_distribution<uint64_t>(0, 5000)(rng);
    std::vector<artifact::SlotPair> conflicts;
    const int density = std::uniform_int_distribution<int>(0, 100)(rng);
    for (uint32_t a = 0; a < n; ++a)
      for (uint32_t b = a + 1; b < n; ++b)
        if (std::uniform_int_distribution<int>(0, 99)(rng) < density) conflicts.emplace_back(a, b);
    const artifact::ArenaLayout l = artifact::pack_arena(bytes, conflicts);
    REQUIRE(l.ok());
    CHECK(artifact::check_arena(bytes, l.offsets, conflicts, l.bytes) == "");
    const uint64_t largest = *std::max_element(bytes.begin(), bytes.end());
    CHECK(l.bytes >= largest);
    if (conflicts.empty()) CHECK(l.bytes == largest);
    // Moving a conflicting buffer onto its neighbour is caught.
    if (!conflicts.empty() && bytes[conflicts[0].first] > 0 && bytes[conflicts[0].second] > 0) {
      std::vector<uint64_t> moved = l.offsets;
      moved[conflicts[0].second] = moved[conflicts[0].first];
      CHECK(artifact::check_arena(bytes, moved, conflicts, l.bytes + bytes[conflicts[0].second]) != "");
    }
  }
  // Sizes past 64 bits are an error, not a wrapped offset.
  const artifact::ArenaLayout big = artifact::pack_arena({UINT64_MAX - 10, 100}, {{0, 1}});
  CHECK_FALSE(big.ok());
}

}  // TEST_SUITE("memory plan")

}  // namespace
}  // namespace orch
