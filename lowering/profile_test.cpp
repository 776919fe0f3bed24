// Profiles (lowering/profile.h) and what the speed passes take from them (lowering/profile_use.h),
// without a GPU: the document read back as written; every kind of malformed input an error at its
// place, never a crash; nodes found by their statement; a profile of another pipeline or GPU
// ignored with a warning; and the decisions: a pipeline whose grid is a param without a default
// gets programmatic edges and unrolling from a profile whose launches fit in one wave and ran
// short, and not from one where they do not.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

#include "compiler/check.h"
#include "lowering/lower.h"
#include "lowering/passes.h"
#include "lowering/profile.h"
#include "lowering/profile_use.h"

namespace orch {
namespace {

using lowering::MeasuredLaunch;
using lowering::Profile;
using lowering::ProfileNode;

// The profile a small run writes, by hand.
Profile sample_profile() {
  Profile p;
  p.device = "NVIDIA H200";
  p.sms = 132;
  p.compute_capability = 90;
  p.driver = "580.159.04";
  p.cuda_driver_version = 13000;
  p.date = "2026-11-28T05:40:00Z";
  p.pipeline = "pgo";
  p.compiler_version = "0.1.0";
  p.sources = {"t.orch"};
  p.artifact_checksum = "0123456789abcdef";
  p.params = {{"n", uint64_t{65536}}, {"bias", int64_t{-3}}, {"alpha", 0.5}, {"on", true}, {"big", std::string("inf")}};
  p.pipeline_launches = 10;
  ProfileNode k;
  k.file = "t.orch";
  k.line = 9;
  k.column = 3;
  k.kernel = "axpb";
  k.what = "axpb<<<ceil_div(n, 256), 256>>>";
  k.launches = 10;
  k.median_ns = 1500;
  k.min_ns = 1400;
  MeasuredLaunch l;
  l.grid[0] = 256;
  l.block[0] = 256;
  l.registers = 16;
  l.static_shared_bytes = 0;
  l.dynamic_shared_bytes = 128;
  k.launch = l;
  p.nodes.push_back(k);
  ProfileNode f;
  f.file = "t.orch";
  f.line = 11;
  f.column = 3;
  f.what = "fill c = 10";
  f.launches = 10;
  f.median_ns = 700;
  f.min_ns = 650;
  f.bytes = 4;
  p.nodes.push_back(f);
  return p;
}

struct Parsed {
  std::optional<Profile> profile;
  lowering::ProfileError error;
};
Parsed parse(const std::string& text) {
  Parsed r;
  r.profile = lowering::parse_profile(text, &r.error);
  return r;
}

// "line:col" of a byte offset.
std::string place(const std::string& text, size_t offset) {
  size_t line = 1, start = 0;
  for (size_t i = 0; i < offset && i < text.size(); ++i)
    if (text[i] == '\n') {
      ++line;
      start = i + 1;
    }
  return std::to_string(line) + ":" + std::to_string(offset - start + 1);
}

// `text` with the first `from` replaced by `to`.
std::string edit(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  REQUIRE_MESSAGE(at != std::string::npos, from);
  return text.replace(at, from.size(), to);
}

}  // namespace

TEST_CASE("profile: the document reads back as written, one node per line") {
  const Profile p = sample_profile();
  const std::string text = lowering::profile_json(p);
  CHECK(text.rfind("{\n  \"format\": \"orch-profile\",\n  \"version\": 1,\n", 0) == 0);
  CHECK(text.find("\n    {\"file\":\"t.orch\",\"line\":9,\"column\":3,\"kernel\":\"axpb\"") != std::string::npos);
  Parsed r = parse(text);
  REQUIRE_MESSAGE(r.profile, r.error.message);
  const Profile& q = *r.profile;
  CHECK(q.device == "NVIDIA H200");
  CHECK(q.sms == 132);
  CHECK(q.compute_capability == 90);
  CHECK(q.driver == "580.159.04");
  CHECK(q.cuda_driver_version == 13000);
  CHECK(q.date == p.date);
  CHECK(q.pipeline == "pgo");
  CHECK(q.compiler_version == "0.1.0");
  CHECK(q.sources == p.sources);
  CHECK(q.artifact_checksum == p.artifact_checksum);
  CHECK(q.params == p.params);
  CHECK(q.pipeline_launches == 10);
  REQUIRE(q.nodes.size() == 2);
  const ProfileNode& k = q.nodes[0];
  CHECK(k.file == "t.orch");
  CHECK(k.line == 9);
  CHECK(k.column == 3);
  CHECK(k.kernel == "axpb");
  CHECK(k.what == p.nodes[0].what);
  CHECK(k.launches == 10);
  CHECK(k.median_ns == 1500);
  CHECK(k.min_ns == 1400);
  REQUIRE(k.launch);
  CHECK(k.launch->blocks() == 256);
  CHECK(k.launch->threads() == 256);
  CHECK(k.launch->registers == 16);
  CHECK(k.launch->shared_bytes() == 128);
  CHECK_FALSE(k.bytes);
  CHECK_FALSE(q.nodes[1].launch);
  CHECK(q.nodes[1].bytes == 4u);
  CHECK(q.nodes[1].kernel.empty());
  // Written again, the same bytes.
  CHECK(lowering::profile_json(q) == text);
}

TEST_CASE("profile: a hand-written profile with only the required fields reads") {
  const std::string text = R"({"format": "orch-profile", "version": 1,
    "device": {"name": "NVIDIA H100 80GB HBM3", "sms": 132, "compute_capability": 90},
    "pipeline": {"name": "p"},
    "nodes": [{"file": "p.orch", "line": 3, "column": 5, "kernel": "", "launches": 1, "median_ns": 10, "min_ns": 10,
               "unknown": "ignored"}],
    "comment": "keys a reader does not know are ignored"})";
  Parsed r = parse(text);
  REQUIRE_MESSAGE(r.profile, r.error.message);
  CHECK(r.profile->nodes.size() == 1);
  CHECK(r.profile->driver.empty());
  CHECK(r.profile->params.empty());
}

TEST_CASE("profile: malformed JSON is an error at its line and column") {
  const std::string good = lowering::profile_json(sample_profile());
  struct Case {
    std::string text, message, where;
  };
  const std::string truncated = good.substr(0, good.size() / 2);
  const std::vector<Case> cases = {
      {"", "not valid JSON: syntax error while parsing value - unexpected end of input; expected '[', '{', or a literal",
       "1:1"},
      {"{\n  \"format\": \"orch-profile\",\n  \"version\": 1,,\n}", "not valid JSON: syntax error while parsing object key - "
                                                                   "unexpected ','; expected string literal",
       "3:16"},
      {"{\"format\": \"orch-profile\"} trailing", "not valid JSON: syntax error while parsing value - invalid literal; last "
                                                 "read: '\"orch-profile\"} tra'; expected end of input",
       "1:30"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    Parsed r = parse(c.text);
    CHECK_FALSE(r.profile);
    CHECK(r.error.message == c.message);
    CHECK(place(c.text, r.error.offset) == c.where);
  }
  Parsed t = parse(truncated);
  CHECK_FALSE(t.profile);
  CHECK(t.error.message.rfind("not valid JSON: ", 0) == 0);
  // Nothing that is not text ends it either: every prefix, and bytes that are not UTF-8.
  for (size_t n = 0; n < good.size(); n += 7) CHECK_FALSE(parse(good.substr(0, n)).profile);
  CHECK_FALSE(parse(edit(good, "NVIDIA", "\xff\xfe")).profile);
  // Deep nesting is refused without recursion running out of stack.
  CHECK_FALSE(parse(std::string(200000, '[') + std::string(200000, ']')).profile);
}

TEST_CASE("profile: another format, another version, wrong types: an error naming the field, at its value") {
  const std::string good = lowering::profile_json(sample_profile());
  struct Case {
    std::string text, message, at;  // `at`: the text the offset must point at
  };
  const std::vector<Case> cases = {
      {"[1, 2]", "the profile is an array; expected a JSON object", "[1, 2]"},
      {edit(good, "\"format\": \"orch-profile\"", "\"format\": \"orch-trace\""),
       "`format` is \"orch-trace\"; expected \"orch-profile\"", "\"orch-trace\""},
      {edit(good, "\"version\": 1", "\"version\": 2"),
       "`version` is 2; this orchc reads version 1 (measure again with the orch-run of this build)", "2,"},
      {edit(good, "\"version\": 1", "\"version\": \"1\""),
       "`version` is a string; this orchc reads version 1 (measure again with the orch-run of this build)", "\"1\""},
      {edit(good, "  \"version\": 1,\n", ""), "the profile has no `version`", "{"},
      {edit(good, "\"sms\":132", "\"sms\":0"), "`device.sms` is 0; expected at least 1", "0,"},
      {edit(good, "\"sms\":132", "\"sms\":-4"), "`device.sms` is the negative number -4; expected an unsigned integer",
       "-4"},
      {edit(good, "\"name\":\"NVIDIA H200\"", "\"name\":7"), "`device.name` is the number 7; expected a string", "7,"},
      {edit(good, "\"device\": {", "\"device\": [{") + "", "", ""},  // not JSON any more: its own message
      {edit(good, "\"median_ns\":1500", "\"median_ns\":\"1500\""),
       "`nodes[0].median_ns` is a string; expected an unsigned integer", "\"1500\""},
      {edit(good, "\"median_ns\":1500", "\"median_ns\":1.5"),
       "`nodes[0].median_ns` is the number 1.5; expected an unsigned integer", "1.5"},
      {edit(good, "\"median_ns\":1500", "\"median_ns\":99999999999999999999999"),
       "`nodes[0].median_ns` is the number 9.999999999999999e+22; expected an unsigned integer", "9999"},
      {edit(good, "\"min_ns\":1400", "\"min_ns\":1600"), "`nodes[0].min_ns` is 1600, more than the median 1500", "1600"},
      {edit(good, "\"line\":9,", ""), "`nodes[0]` has no `line`", "{\"file\":\"t.orch\",\"column\""},
      {edit(good, "\"line\":9", "\"line\":0"), "`nodes[0].line` is 0; expected at least 1", "0,"},
      {edit(good, "\"grid\":[256,1,1]", "\"grid\":[256,1]"),
       "`nodes[0].grid` is an array of 2; expected an array of 3 unsigned integers (x, y, z)", "[256,1]"},
      {edit(good, "\"grid\":[256,1,1]", "\"grid\":[256,0,1]"), "`nodes[0].grid[1]` is 0; expected at least 1",
       "0,1]"},
      {edit(good, "\"block\":[256,1,1],", ""), "`nodes[0]` has no `block`", "{\"file\""},
      {edit(good, "\"registers\":16", "\"registers\":300"), "`nodes[0].registers` is 300; expected from 0 to 255",
       "300"},
      {edit(good, "\"nodes\": [", "\"nodes\": {\"a\": 1}, \"x\": ["), "`nodes` is an object; expected an array",
       "{\"a\": 1}"},
      {edit(good, "\"params\": {", "\"params\": {\"bad\": null, "),
       "`params.bad` is null; expected a number, a boolean or a string", "null"},
      {edit(good, "\"line\":11,\"column\":3,\"kernel\":\"\"", "\"line\":9,\"column\":3,\"kernel\":\"axpb\""),
       "`nodes[1]` has the key of `nodes[0]` (t.orch:9:3, kernel `axpb`): a statement has one node", "{\"file\":\"t.orch\",\"line\":9,\"column\":3,\"kernel\":\"axpb\",\"what\":\"fill"},
  };
  for (const Case& c : cases) {
    if (c.message.empty()) continue;
    CAPTURE(c.text);
    Parsed r = parse(c.text);
    CHECK_FALSE(r.profile);
    CHECK(r.error.message == c.message);
    CHECK(c.text.compare(r.error.offset, c.at.size(), c.at) == 0);
  }
  // The object in place of an array is not a valid document at all: still an error, no crash.
  CHECK_FALSE(parse(edit(good, "\"device\": {", "\"device\": [{")).profile);
}

TEST_CASE("profile: json_offset finds a value by its path, escapes and repeated keys included") {
  const std::string text = R"({"a": [1, {"b\"c": "x", "d": [true, null]}], "a": {"e": 3}})";
  using P = lowering::JsonPath;
  CHECK(text.substr(lowering::json_offset(text, P{})).rfind("{\"a\"", 0) == 0);
  // nlohmann keeps the last of repeated keys, and so does the offset.
  CHECK(text.substr(lowering::json_offset(text, P{std::string("a")})).rfind("{\"e\": 3}", 0) == 0);
  CHECK(text.substr(lowering::json_offset(text, P{std::string("a"), std::string("e")})).rfind("3}", 0) == 0);
  const std::string first = R"({"a": [1, {"b\"c": "x", "d": [true, null]}]})";
  CHECK(first.substr(lowering::json_offset(first, P{std::string("a"), size_t{1}, std::string("b\"c")})).rfind("\"x\"", 0) == 0);
  CHECK(first.substr(lowering::json_offset(first, P{std::string("a"), size_t{1}, std::string("d"), size_t{1}}))
            .rfind("null", 0) == 0);
  // A path past what there is: its deepest value that exists.
  CHECK(first.substr(lowering::json_offset(first, P{std::string("a"), size_t{7}})).rfind("[1,", 0) == 0);
  CHECK(first.substr(lowering::json_offset(first, P{std::string("zz")})).rfind("{\"a\"", 0) == 0);
}

namespace {

// The pipeline of the decisions: its grid is a param without a default, so no launch is known
// to fit in one wave before it runs.
const char* const kPgo = R"(pipeline pgo
target sm_90
param n: u32
buffer x: f32[n]
buffer c: i32
kernel axpb(n: u32, x: inout f32[]) source """extern "C" __global__ void axpb(unsigned n, float* x) { unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = 0.5f * x[i] + 1.0f; }"""
graph main {
  axpb<<<ceil_div(n, 256), 256>>>(n, x)
  axpb<<<ceil_div(n, 256), 256>>>(n, x)
  fill c = 10
  while c > 0 {
    axpb<<<ceil_div(n, 256), 256>>>(n, x)
    c -= 1
  }
}
)";

struct Compile {
  SourceManager sources;
  DiagnosticEngine diags;
  CheckResult checked;
  std::shared_ptr<const lowering::BoundProfile> profile;
  std::string warnings;
};

// kPgo checked, and `profile` (if given) read as orchc reads it from "prof.json".
std::unique_ptr<Compile> checked(const std::optional<Profile>& profile, const std::string& text = kPgo,
                                 const std::string& path = "t.orch") {
  auto c = std::make_unique<Compile>();
  c->checked = check_text(path, text, c->sources, {}, c->diags);
  REQUIRE_MESSAGE(!c->diags.has_errors(), format_diagnostics(c->diags.sorted(), c->sources, DiagnosticFormat::Text));
  if (profile) {
    const uint32_t file = c->sources.add("prof.json", lowering::profile_json(*profile));
    c->profile = lowering::match_profile(*profile, file, *c->checked.program, c->sources, c->diags);
  }
  c->warnings = format_diagnostics(c->diags.sorted(), c->sources, DiagnosticFormat::Text);
  return c;
}

// A node of kPgo's statement at `line` (column 3 at the top, 5 in the loop's body).
ProfileNode at(uint32_t line, const std::string& kernel, uint64_t median_ns, std::optional<uint32_t> blocks = std::nullopt,
               uint32_t threads = 256, uint32_t registers = 16) {
  ProfileNode n;
  n.file = "t.orch";
  n.line = line;
  n.column = line == 12 || line == 13 ? 5 : 3;
  n.kernel = kernel;
  n.launches = 10;
  n.median_ns = median_ns;
  n.min_ns = median_ns;
  if (blocks) {
    MeasuredLaunch l;
    l.grid[0] = *blocks;
    l.block[0] = threads;
    l.registers = registers;
    n.launch = l;
  }
  return n;
}

// kPgo's profile: its three launches of axpb with `blocks` blocks each, and every node's time.
Profile pgo_profile(uint32_t blocks, uint64_t loop_kernel_ns = 1500, uint32_t threads = 256, uint32_t registers = 16) {
  Profile p = sample_profile();
  p.nodes = {at(8, "axpb", 1500, blocks, threads, registers), at(9, "axpb", 1500, blocks, threads, registers),
             at(10, "", 700), at(11, "", 900), at(12, "axpb", loop_kernel_ns, blocks, threads, registers),
             at(13, "", 800)};
  return p;
}

size_t programmatic(const lir::Program& p) {
  size_t n = 0;
  for (const lir::Node& node : p.graphs[p.main_graph].body.nodes)
    for (const lir::Dep& d : node.deps) n += d.kind == lir::DepKind::Programmatic;
  return n;
}

struct Decided {
  lir::Program program;
  std::string ir;
  std::vector<std::string> unroll_notes;
};

Decided decide(Compile& c) {
  Decided d;
  // The unroll pass's notes, on a program of its own.
  {
    SourceManager sources;
    DiagnosticEngine diags;
    CheckResult r = check_text("t.orch", kPgo, sources, {}, diags);
    lowering::PassOptions o;
    o.residency = lowering::residency_of(r.program->profile);
    o.profile.profile = c.profile;
    mir::Program p = mir::to_mir(*r.program);
    lowering::drop_helper_graphs(p);
    lowering::split_segments(p);
    lowering::lower_conditions(p);
    d.unroll_notes = lowering::unroll_loops(p, o);
  }
  LowerOptions options;
  options.profile = c.profile;
  d.program = lower_to_lir(*c.checked.program, options);
  d.ir = lir::print(d.program, c.sources);
  return d;
}

}  // namespace

TEST_CASE("profile: nodes are found by their statement's file, line, column and kernel") {
  auto c = checked(pgo_profile(256));
  REQUIRE(c->profile);
  CHECK(c->warnings.empty());
  const ir::Program& p = *c->checked.program;
  const ir::Region& main = p.graphs[p.main_graph].body;
  REQUIRE(main.nodes.size() >= 4);
  // The statements' own places find their nodes; a kernel statement only under its kernel's name.
  const lowering::ProfileNode* first = c->profile->find(main.nodes[0].loc, "axpb");
  REQUIRE(first);
  CHECK(first->line == 8);
  CHECK_FALSE(c->profile->find(main.nodes[0].loc, ""));
  CHECK_FALSE(c->profile->find(main.nodes[0].loc, "other"));
  SourceRange off = main.nodes[0].loc;
  ++off.begin.col;
  CHECK_FALSE(c->profile->find(off, "axpb"));
  // A profile measured from another folder names the file by another path: the same name finds it.
  Profile moved = pgo_profile(256);
  for (ProfileNode& n : moved.nodes) n.file = "/home/someone/pipelines/t.orch";
  auto m = checked(moved);
  REQUIRE(m->profile);
  CHECK(m->profile->find(main.nodes[0].loc, "axpb"));
  // ... but not another file's name.
  Profile other = pgo_profile(256);
  for (ProfileNode& n : other.nodes) n.file = "u.orch";
  auto o = checked(other);
  CHECK_FALSE(o->profile);
}

TEST_CASE("profile: one of another pipeline, another GPU or with no statement of this one is a warning, and ignored") {
  Profile renamed = pgo_profile(256);
  renamed.pipeline = "other";
  auto a = checked(renamed);
  CHECK_FALSE(a->profile);
  CHECK_FALSE(a->diags.has_errors());
  CHECK(a->warnings.find("prof.json:") == 0);
  CHECK(a->warnings.find("warning[W0006]: this profile was measured on pipeline `other`, not `pgo`; the profile is "
                         "ignored and every choice is made as without it\n") != std::string::npos);
  CHECK(a->warnings.find("\"pipeline\": {\"name\":\"other\"") != std::string::npos);  // the line shown
  Profile ampere = pgo_profile(256);
  ampere.compute_capability = 80;
  ampere.device = "NVIDIA A100-SXM4-80GB";
  auto b = checked(ampere);
  CHECK_FALSE(b->profile);
  CHECK(b->warnings.find("warning[W0006]: this profile was measured on NVIDIA A100-SXM4-80GB (sm_80), and the pipeline "
                         "targets sm_90; the profile is ignored") != std::string::npos);
  Profile moved = pgo_profile(256);
  for (ProfileNode& n : moved.nodes) n.line += 100;
  auto c = checked(moved);
  CHECK_FALSE(c->profile);
  CHECK(c->warnings.find("warning[W0006]: none of the profile's 6 nodes is a statement of pipeline `pgo` (the source "
                         "changed since it was measured, or it is another pipeline's); the profile is ignored") !=
        std::string::npos);
}

TEST_CASE("profile: orchc's reading of the file: E0004 unreadable, E0006 invalid at its line and column") {
  SourceManager sources;
  DiagnosticEngine diags;
  CHECK_FALSE(lowering::read_profile("/nonexistent/prof.json", sources, diags));
  const std::string dir = std::filesystem::temp_directory_path() / ("orch-profile-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  CHECK_FALSE(lowering::read_profile(dir, sources, diags));
  const std::string bad = dir + "/bad.json";
  std::ofstream(bad) << edit(lowering::profile_json(sample_profile()), "\"median_ns\":1500", "\"median_ns\":-1");
  CHECK_FALSE(lowering::read_profile(bad, sources, diags));
  const std::string text = format_diagnostics(diags.sorted(), sources, DiagnosticFormat::Text);
  CHECK(text.find("<unknown>: error[E0004]: cannot read the profile `/nonexistent/prof.json`: ") != std::string::npos);
  CHECK(text.find("<unknown>: error[E0004]: cannot read the profile `" + dir + "`: it is a directory") != std::string::npos);
  CHECK(text.find(bad + ":10:") != std::string::npos);
  CHECK(text.find("error[E0006]: invalid profile (orchc --profile): `nodes[0].median_ns` is the negative number -1; "
                  "expected an unsigned integer\n") != std::string::npos);
  const std::string good = dir + "/good.json";
  std::ofstream(good) << lowering::profile_json(sample_profile());
  DiagnosticEngine clean;
  CHECK(lowering::read_profile(good, sources, clean));
  CHECK_FALSE(clean.has_errors());
  std::filesystem::remove_all(dir);
}

TEST_CASE("profile: measured residency counts registers and shared memory on the profiled GPU's SMs") {
  // sm_90's limits (targets/sm_90.yaml), as the speed passes get them.
  SourceManager sources;
  DiagnosticEngine diags;
  const CheckResult c = check_text("t.orch", kPgo, sources, {}, diags);
  REQUIRE_FALSE(diags.has_errors());
  lowering::Residency r = lowering::residency_of(c.program->profile);
  REQUIRE(r.sms == 132);
  auto resident = [&](const MeasuredLaunch& l) { return lowering::measured_shape(l, r).resident; };
  MeasuredLaunch l;
  l.block[0] = 256;
  l.registers = 32;
  CHECK(resident(l) == 8 * 132);  // threads decide
  CHECK(std::string(lowering::measured_shape(l, r).limit) == "threads");
  l.registers = 64;  // 2048 registers a warp: 32 warps, 4 blocks of 8
  CHECK(resident(l) == 4 * 132);
  CHECK(std::string(lowering::measured_shape(l, r).limit) == "registers");
  l.block[0] = 1024;  // one block of 32 warps
  CHECK(resident(l) == 1 * 132);
  l.registers = 72;  // 2304 registers a warp: 28 warps, no block of 32
  CHECK(resident(l) == 0);
  l.block[0] = 32;
  l.registers = 0;
  CHECK(resident(l) == 32 * 132);  // blocks decide
  l.dynamic_shared_bytes = 100000;  // with the driver's reserve per block: 2 per SM
  CHECK(resident(l) == 2 * 132);
  l.dynamic_shared_bytes = 50000;
  l.static_shared_bytes = 50000;  // static and dynamic alike
  CHECK(resident(l) == 2 * 132);
  r.sms = 114;  // an H100 PCIe
  CHECK(resident(l) == 2 * 114);
  CHECK(lowering::measured_shape(l, r).blocks == 1u);
  CHECK(lowering::measured_shape(l, r).threads == 32u);
}

TEST_CASE("profile decisions: without a profile a grid from a param without a default gets neither speed pass") {
  auto c = checked(std::nullopt);
  Decided d = decide(*c);
  CHECK(programmatic(d.program) == 0);
  CHECK(d.program.unrolled_loops.empty());
  CHECK(d.ir.find("# full edge from kernels: this launch has a grid known only when it runs") != std::string::npos);
  REQUIRE(d.unroll_notes.size() == 1);
  CHECK(d.unroll_notes[0].find("not unrolled: a launch of its body has a grid known only when it runs") !=
        std::string::npos);
}

TEST_CASE("profile decisions: launches measured in one wave and short get programmatic edges and unrolling") {
  auto c = checked(pgo_profile(256));
  REQUIRE(c->profile);
  Decided d = decide(*c);
  CHECK(programmatic(d.program) == 1);  // axpb -> axpb at the top
  CHECK(d.ir.find("# programmatic edge from kernels: from the profile: this launch ran 256 blocks of 256 threads (16 "
                  "registers per thread), within the 1056 such blocks an NVIDIA H200 holds at once (132 SMs x 8) "
                  "(programmatic edges join one-wave launches only)") != std::string::npos);
  CHECK(d.program.unrolled_loops.size() == 1);
  REQUIRE(d.unroll_notes.size() == 1);
  CHECK(d.unroll_notes[0] ==
        "`while c > 0` at line 11:3: 16 copies of its body per WHILE iteration (the compiler's choice for 2 nodes; "
        "from the profile: its body ran 2.30 us per iteration (its nodes' medians, summed), its measured launches in "
        "one wave)");
  // A profile that has only the loop's statements: the top-level edge keeps the static rule.
  Profile loop_only = pgo_profile(256);
  loop_only.nodes.erase(loop_only.nodes.begin(), loop_only.nodes.begin() + 2);
  auto l = checked(loop_only);
  REQUIRE(l->profile);
  Decided dl = decide(*l);
  CHECK(programmatic(dl.program) == 0);
  CHECK(dl.program.unrolled_loops.size() == 1);
}

TEST_CASE("profile decisions: launches measured in more than one wave get no programmatic edges; past 4 waves no copies") {
  // 4096 blocks of 256 threads: 4 waves, 3 past the first, which the compiler still unrolls.
  auto four = checked(pgo_profile(4096));
  REQUIRE(four->profile);
  Decided d4 = decide(*four);
  CHECK(programmatic(d4.program) == 0);
  CHECK(d4.ir.find("# full edge from kernels: from the profile: this launch ran 4096 blocks of 256 threads (16 registers "
                   "per thread), more than the 1056 such blocks an NVIDIA H200 holds at once (132 SMs x 8) "
                   "(programmatic edges join one-wave launches only)") != std::string::npos);
  CHECK(d4.program.unrolled_loops.size() == 1);
  REQUIRE(d4.unroll_notes.size() == 1);
  CHECK(d4.unroll_notes[0] == "`while c > 0` at line 11:3: 16 copies of its body per WHILE iteration (the compiler's "
                              "choice for 2 nodes; from the profile: its body ran 2.30 us per iteration (its nodes' "
                              "medians, summed), its measured launches in at most 4 waves)");
  // One block more: a fifth wave.
  auto c = checked(pgo_profile(4225));
  REQUIRE(c->profile);
  Decided d = decide(*c);
  CHECK(programmatic(d.program) == 0);
  CHECK(d.program.unrolled_loops.empty());
  REQUIRE(d.unroll_notes.size() == 1);
  CHECK(d.unroll_notes[0] == "`while c > 0` at line 11:3: not unrolled: from the profile: a launch of its body ran 4225 "
                             "blocks of 256 threads (16 registers per thread), more than the 1056 such blocks an NVIDIA "
                             "H200 holds at once (132 SMs x 8); its launches run 4 waves past their first, more than 3, "
                             "so its run time, not the loop's turn-around, dominates (--unroll N unrolls it anyway)");
  // Registers count: 264 blocks of 1024 threads fit 2 a SM with 32 registers, 1 with 64.
  auto fits = checked(pgo_profile(264, 1500, 1024, 32));
  CHECK(programmatic(decide(*fits).program) == 1);
  auto heavy = checked(pgo_profile(264, 1500, 1024, 64));
  CHECK(programmatic(decide(*heavy).program) == 0);
}

TEST_CASE("profile decisions: a loop's measured time is reported, not a reason to keep it rolled; edges do not care") {
  // A body longer than a WHILE iteration's turn-around is unrolled all the same where its
  // launches fit in one wave (unroll_loops.cpp says why the time does not decide).
  auto c = checked(pgo_profile(256, 9000));
  REQUIRE(c->profile);
  Decided d = decide(*c);
  CHECK(programmatic(d.program) == 1);
  CHECK(d.program.unrolled_loops.size() == 1);
  REQUIRE(d.unroll_notes.size() == 1);
  CHECK(d.unroll_notes[0] == "`while c > 0` at line 11:3: 16 copies of its body per WHILE iteration (the compiler's "
                             "choice for 2 nodes; from the profile: its body ran 9.80 us per iteration (its nodes' "
                             "medians, summed), its measured launches in one wave)");
  // --unroll N and --no-pdl are still the user's word.
  LowerOptions forced;
  forced.profile = c->profile;
  forced.unroll = 4;
  CHECK(lower_to_lir(*checked(pgo_profile(256, 9000))->checked.program, forced).unrolled_loops.size() == 1);
  LowerOptions off;
  off.profile = c->profile;
  off.pdl = false;
  CHECK(programmatic(lower_to_lir(*checked(pgo_profile(256))->checked.program, off)) == 0);
}

TEST_CASE("profile decisions: a fill measured by its bytes sizes its guarded copy") {
  const std::string text = R"(pipeline pgo
target sm_90
param n: u32
buffer x: f32[n]
buffer c: i32
graph main {
  fill c = 10
  while c > 0 {
    fill x = 1.5
    c -= 1
  }
}
)";
  auto unrolled = [&](uint64_t bytes) {
    Profile p = sample_profile();
    ProfileNode f;
    f.file = "t.orch";
    f.line = 9;
    f.column = 5;
    f.launches = 1;
    f.median_ns = 900;
    f.min_ns = 900;
    f.bytes = bytes;
    p.nodes = {f};
    auto c = checked(p, text);
    REQUIRE(c->profile);
    LowerOptions o;
    o.profile = c->profile;
    return lower_to_lir(*c->checked.program, o).unrolled_loops.size();
  };
  CHECK(unrolled(4 * 256 * 1056 * 4) == 1);      // 4 x 1056 blocks of 256 threads: four waves
  CHECK(unrolled(4 * 256 * 1056 * 4 + 4) == 0);  // one more block: a fifth
  CHECK(lower_to_lir(*checked(std::nullopt, text)->checked.program, {}).unrolled_loops.empty());
}

}  // namespace orch

namespace orch {

TEST_CASE("profile decisions: compiled, a loop the profile unrolled stays unrolled, and the artifact holds the edges") {
  // lower_to_artifact checks the unrolled loops again once the kernels are compiled
  // (unrolled_past_wave_budget): with the profile, their launches are as measured, not unknown.
  for (const bool with_profile : {false, true}) {
    CAPTURE(with_profile);
    auto c = checked(with_profile ? std::optional<Profile>(pgo_profile(256)) : std::nullopt);
    LowerOptions options;
    options.compile.use_cache = false;
    options.profile = c->profile;
    lir::Program lowered;
    std::optional<std::string> bytes = lower_to_artifact(*c->checked.program, c->sources, options, c->diags, &lowered);
    INFO(format_diagnostics(c->diags.sorted(), c->sources, DiagnosticFormat::Text));
    REQUIRE(bytes.has_value());
    CHECK(lowered.unrolled_loops.size() == (with_profile ? 1u : 0u));
    CHECK(programmatic(lowered) == (with_profile ? 1u : 0u));
  }
}

}  // namespace orch
