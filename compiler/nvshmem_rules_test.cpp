// The checker's rules for NVSHMEM (issue 23): `symmetric` buffers and `my_pe` / `n_pes`, one
// code at a time in the style of rules_test.cpp (the full text `orchc --check` prints, then the
// closest pipeline that obeys the rule, which must check clean).
#include <doctest/doctest.h>

#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "compiler/check.h"
#include "tests/test_support.h"

namespace orch {
namespace {

struct Checked {
  SourceManager sources;
  DiagnosticEngine diags;
  CheckResult result;
  std::string text() const { return format_diagnostics(diags.sorted(), sources, DiagnosticFormat::Text); }
};

std::unique_ptr<Checked> check(const std::string& program) {
  auto c = std::make_unique<Checked>();
  CheckOptions options;
  options.targets_dir = ORCH_TEST_TARGETS_DIR;
  c->result = check_text("t.orch", program, c->sources, options, c->diags);
  return c;
}

std::string diagnostics_of(const std::string& program) { return check(program)->text(); }

// `program` with each edit (from, to) applied; each `from` must occur exactly once.
std::string fix(std::string program, std::initializer_list<std::pair<const char*, const char*>> edits) {
  for (const auto& [from, to] : edits) {
    size_t at = program.find(from);
    if (at == std::string::npos || program.find(from, at + 1) != std::string::npos)
      throw std::logic_error(std::string("edit must match exactly once: ") + from);
    program.replace(at, std::string(from).size(), to);
  }
  return program;
}

// Two PEs hand a halo over with NVSHMEM: the smallest pipeline that uses every piece.
const char* kHalo = R"orch(pipeline halo
comm world
param n: u32 = 1024
buffer halo: f32[n * n_pes] symmetric
buffer sig: u64 symmetric
kernel put(n: u32, me: u32, pes: u32, halo: inout f32[], sig: inout u64) source """
#include <nvshmem.h>
#include <nvshmemx.h>
extern "C" __global__ void put(unsigned n, unsigned me, unsigned pes, float* halo, unsigned long long* sig) {}
"""
graph main {
  put<<<1, 256>>>(n, my_pe, n_pes, halo, sig)
}
)orch";

}  // namespace

TEST_SUITE("rules: nvshmem") {

TEST_CASE("symmetric buffers, my_pe and n_pes check clean and reach the program") {
  auto c = check(kHalo);
  CHECK(c->text() == "");
  REQUIRE(c->result.program);
  const ir::Program& p = *c->result.program;
  REQUIRE(p.buffers.size() == 2);
  CHECK(p.buffers[0].symmetric);
  CHECK(p.buffers[1].symmetric);
  CHECK_FALSE(p.buffers[0].keep);
  CHECK(p.uses_rank);
}

TEST_CASE("`symmetric` stays usable as a name") {
  CHECK(diagnostics_of(R"orch(pipeline p
param symmetric: u32 = 4
buffer x: f32[symmetric]
graph main { fill x = 0 }
)orch") == "");
}

TEST_CASE("my_pe and n_pes are built-in names") {
  CHECK(diagnostics_of(fix(kHalo, {{"param n: u32 = 1024", "param my_pe: u32 = 1024"}})).find(
            "error[E0102]: `my_pe` is a built-in name and cannot be redeclared") != std::string::npos);
}

TEST_CASE("E0706: a symmetric buffer in host memory") {
  const std::string program = fix(kHalo, {{"buffer sig: u64 symmetric", "buffer sig: u64 host symmetric"}});
  CHECK(diagnostics_of(program) == R"txt(t.orch:5:22: error[E0706]: buffer `sig` cannot be both `symmetric` and `host`: NVSHMEM's symmetric heap is device memory
buffer sig: u64 host symmetric
                     ^~~~~~~~~
1 error generated.
)txt");
  CHECK(diagnostics_of(fix(program, {{"u64 host symmetric", "u64 symmetric"}})) == "");
}

TEST_CASE("E0707: a symmetric buffer in a pipeline without a comm, reported once") {
  const std::string program = fix(kHalo, {{"comm world\n", ""}});
  CHECK(diagnostics_of(program) == R"txt(t.orch:3:29: error[E0707]: symmetric buffer `halo` needs a `comm`: orch starts NVSHMEM over the ranks of the pipeline's communicator (PE r is rank r), and this pipeline declares none
buffer halo: f32[n * n_pes] symmetric
                            ^~~~~~~~~
1 error generated.
)txt");
  CHECK(diagnostics_of(fix(program, {{"pipeline halo\n", "pipeline halo\ncomm world\n"}})) == "");
}

TEST_CASE("E0708: a symmetric buffer sized by the PE") {
  const std::string program = fix(kHalo, {{"f32[n * n_pes]", "f32[n * (my_pe + 1)]"}});
  CHECK(diagnostics_of(program) == R"txt(t.orch:4:23: error[E0708]: the size of symmetric buffer `halo` depends on `my_pe`: NVSHMEM allocates a symmetric buffer on every PE at once, the same size on each
buffer halo: f32[n * (my_pe + 1)] symmetric
                      ^~~~~
t.orch:4:35: note: `halo` is symmetric here
buffer halo: f32[n * (my_pe + 1)] symmetric
                                  ^~~~~~~~~
1 error generated.
)txt");
  // `rank` is the same number.
  CHECK(diagnostics_of(fix(kHalo, {{"f32[n * n_pes]", "f32[rank]"}})).find("error[E0708]: the size of symmetric buffer "
                                                                          "`halo` depends on `rank`") != std::string::npos);
  // Closest valid: size it by what every PE shares (params, the PE count).
  CHECK(diagnostics_of(fix(program, {{"f32[n * (my_pe + 1)]", "f32[n * n_pes]"}})) == "");
}

TEST_CASE("E0115, not E0708: a buffer that is not symmetric sized by the PE") {
  CHECK(diagnostics_of(fix(kHalo, {{"buffer sig: u64 symmetric", "buffer sig: u64 symmetric\nbuffer mine: f32[my_pe]"}}))
            .find("error[E0115]: `my_pe` is not known when buffers are sized") != std::string::npos);
}

TEST_CASE("E0709: my_pe in a pipeline without symmetric buffers") {
  const std::string program = R"orch(pipeline p
comm world
param n: u32 = 1024
buffer x: f32[n]
kernel shard(n: u32, r: u32, x: out f32[]) source """extern "C" __global__ void shard(unsigned n, unsigned r, float* x) {}"""
graph main {
  shard<<<4, 256>>>(n, my_pe, x)
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:7:24: error[E0709]: `my_pe` is the PE number of NVSHMEM, but this pipeline declares no `symmetric` buffer; use `rank`
  shard<<<4, 256>>>(n, my_pe, x)
                       ^~~~~
1 error generated.
)txt");
  CHECK(diagnostics_of(fix(program, {{"(n, my_pe, x)", "(n, rank, x)"}})) == "");
  CHECK(diagnostics_of(fix(program, {{"buffer x: f32[n]", "buffer x: f32[n] symmetric"}})) == "");
}

TEST_CASE("`keep` on a symmetric buffer changes nothing: W0118") {
  CHECK(diagnostics_of(fix(kHalo, {{"u64 symmetric", "u64 symmetric keep"}}))
            .find("warning[W0118]: `keep` has no effect on a `symmetric` buffer") != std::string::npos);
}

}  // TEST_SUITE("rules: nvshmem")

}  // namespace orch
