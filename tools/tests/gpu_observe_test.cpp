// GPU proof of orch-run --nodes, --trace and --roofline (test suite "gpu"; scripts/gpu-check runs
// it): the runtime's observation hook sees every node it builds, traces of real runs name every
// kernel, copy and fill by its statement (jacobi, the fills of issue 13, moe and scheduler,
// which CUPTI cannot trace on the GPU side), and the roofline places saxpy as memory-bound near
// the device's bandwidth. Every run's result is checked against a CPU reference on random
// inputs. With $ORCH_TEST_OUT set, the traces and SVGs are written there for people to look at.
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <regex>
#include <set>
#include <tuple>

#include "lowering/profile.h"
#include "orch/observe.h"
#include "orch/runtime.h"
#include "tools/orch_run/sites.h"
#include "tools/orch_run/values.h"
#include "tools/tests/check_output.h"
#include "tools/tests/test_util.h"

using namespace orch::tools_test;
using nlohmann::json;

namespace {

// Where a test writes a file people may want to see: $ORCH_TEST_OUT, else the temporary folder.
std::string out_path(const std::string& name) {
  const std::string dir = test_out_dir();
  return (dir.empty() ? temp_dir() : dir) + "/" + name;
}

std::string binary(const std::string& orch_file, const char* options = nullptr) {
  std::string log;
  const std::string bin = compiled(orch_file, &log, options);
  REQUIRE_MESSAGE(!bin.empty(), log);
  return bin;
}

// orch-run in a process of its own ($ORCH_RUN, else the build's), as people run it: CUPTI keeps
// state across the runs of one process (on an H200, driver 580.159.04, a kernel record of a
// later pipeline carried the name of a kernel of an earlier one, unloaded by then).
RunOutput orch_run_process(const std::vector<std::string>& args) {
  std::string cmd = "'" + orch_run_path() + "'";
  for (const std::string& a : args) {
    std::string quoted;
    for (char c : a) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    cmd += " '" + quoted + "'";
  }
  static int runs = 0;
  const std::string base = temp_dir() + "/orch-run-" + std::to_string(runs++);
  const int status = std::system((cmd + " >'" + base + ".out' 2>'" + base + ".err'").c_str());
  RunOutput r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  r.out = read_all(base + ".out");
  r.err = read_all(base + ".err");
  return r;
}

std::vector<float> floats(const std::string& bytes) {
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}
std::vector<int32_t> ints(const std::string& bytes) {
  std::vector<int32_t> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

// The trace at `path`, checked against the schema and for nesting.
json trace_at(const std::string& path) {
  const std::string text = read_all(path);
  json doc;
  const std::string problem = trace_problem(text, &doc);
  INFO(path);
  REQUIRE(problem == "");
  return doc;
}

// Names of the GPU records (complete events with a statement) and of the unattributed ones.
std::map<std::string, int> record_names(const json& doc, int* unattributed) {
  std::map<std::string, int> names;
  *unattributed = 0;
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] != "X" || !e.contains("cat")) continue;
    const std::string cat = e["cat"];
    if (cat != "kernel" && cat != "memcpy" && cat != "memset") continue;
    ++names[e["name"].get<std::string>()];
    if (e["name"].get<std::string>().rfind("not attributed", 0) == 0) ++*unattributed;
  }
  return names;
}

std::string describe(const std::map<std::string, int>& names) {
  std::string s;
  for (const auto& [n, c] : names) s += std::to_string(c) + "x " + n + "\n";
  return s;
}

// The runtime's observation hook, recorded.
struct Recorder : orch::Observer {
  std::vector<std::tuple<int, int, std::vector<uint32_t>>> begun;
  int open = 0, max_open = 0, ended = 0, null_nodes = 0;
  std::map<std::string, int> phases_ok, phases_failed;
  void node_begin(const orch::NodeSite& s) override {
    begun.emplace_back(s.graph, s.member, *s.path);
    max_open = std::max(max_open, ++open);
  }
  void node_end(const orch::NodeSite&, cudaGraphNode_t made) override {
    --open;
    ++ended;
    null_nodes += made == nullptr;
  }
  void phase_end(orch::Phase p, int graph, int member, bool ok) override {
    (ok ? phases_ok : phases_failed)[std::string(orch::phase_name(p)) + " " + std::to_string(graph) + "." +
                                     std::to_string(member)]++;
  }
};

}  // namespace

TEST_SUITE("gpu") {

TEST_CASE("the observation hook hears every node the runtime builds, at the site orch-run names") {
  for (const char* name : {"jacobi", "moe", "scheduler"}) {
    CAPTURE(name);
    const std::string bin = binary(examples_dir() + "/" + name + ".orch");
    LoadedPipeline l = load_pipeline(bin);
    REQUIRE_MESSAGE(l.pipeline, l.error);
    orch::run::SiteTable sites(*l.pipeline);
    auto p = orch::Pipeline::load(bin);
    REQUIRE_MESSAGE(p, p.error().to_string());
    cudaStream_t stream = nullptr;
    REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
    Recorder rec;
    orch::Observer* before = orch::set_observer(&rec);
    {
      auto x = (*p)->instantiate(orch::Bindings(), stream);
      REQUIRE_MESSAGE(x, x.error().to_string());
      orch::Status s = x.value()->launch(stream);
      REQUIRE_MESSAGE(s, s.error().to_string());
      REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
    }
    orch::set_observer(before);
    REQUIRE(cudaStreamDestroy(stream) == cudaSuccess);
    CHECK(rec.open == 0);
    CHECK(rec.ended == static_cast<int>(rec.begun.size()));
    CHECK(rec.null_nodes == 0);
    // Every site built exactly once, and nothing else.
    std::set<int> found;
    for (const auto& [graph, member, path] : rec.begun) {
      const int site = sites.find(graph, member, path);
      CHECK(site >= 0);
      CHECK(found.insert(site).second);
    }
    CHECK(found.size() == sites.size());
    CHECK(rec.phases_failed.empty());
    bool launched = false, built = false, instantiated = false, uploaded = false;
    for (const auto& [phase, count] : rec.phases_ok) {
      launched |= phase.rfind("launch ", 0) == 0;
      built |= phase.rfind("build ", 0) == 0;
      instantiated |= phase.rfind("instantiate ", 0) == 0;
      uploaded |= phase.rfind("upload ", 0) == 0;
    }
    CHECK(launched);
    CHECK(built);
    CHECK(instantiated);
    CHECK(uploaded);
    if (std::string(name) == "jacobi") CHECK(rec.max_open == 2);  // a body node inside the while's window
  }
}

TEST_CASE("CUPTI's graph and node ids as orch-run hears them (a probe, reported, not asserted)") {
  // ORCH_RUN_CUPTI_DEBUG=1 prints every graph callback CUDA makes (graph, node, original,
  // exec ids; the statement being built), the template graphs as cudaGraphDebugDotPrint writes
  // them, and every activity record with how it was attributed: what the next attempt needs
  // when a node is not attributed. Each run in a process of its own; the logs go to
  // $ORCH_TEST_OUT (cupti-debug-*.log).
  const std::string orch_run_bin = orch_run_path();
  struct Probe {
    std::string name, bin, args;
  };
  // nested: two sibling ifs, each with an if nested in its body; its records tell which order
  // the exec numbers nested graphs' nodes in (breadth-first or recursive; every statement its
  // own kernel, so the kind check tells the candidates apart).
  std::vector<Probe> probes = {
      {"fills", binary(write_temp("fills.orch", fills_orch())), "--fill src=random:-1:1"},
      {"jacobi", binary(examples_dir() + "/jacobi.orch"),
       "--param n=4096 --param tol=-1 --param max_iters=6 --fill u_host=random --fill rhs_host=random"},
      {"nested", binary(write_temp("nested.orch", nested_orch())), "--fill x=random:-1:1"}};
  if (orch::nccl_version()) probes.push_back({"reduce", binary(write_temp("reduce.orch", reduce_orch())), "--fill g=random"});
  for (const Probe& p : probes) {
    const std::string log = out_path("cupti-debug-" + p.name + ".log");
    const std::string cmd = "ORCH_RUN_CUPTI_DEBUG=1 timeout -s KILL 120 '" + orch_run_bin + "' '" + p.bin + "' " + p.args +
                            " --warmup 0 --repeat 2 --timeout 60 --nodes >'" + log + "' 2>&1";
    const int status = std::system(cmd.c_str());
    const std::string text = read_all(log);
    size_t unattributed = 0, records = 0;
    // Records found by exec index, by the order(s) whose candidate ran them.
    std::map<std::string, int> orders;
    std::string numbering, first_launch;
    for (size_t at = 0; at < text.size();) {
      size_t eol = text.find('\n', at);
      if (eol == std::string::npos) eol = text.size();
      const std::string line = text.substr(at, eol - at);
      at = eol + 1;
      if (line.rfind("[orch-run cupti] exec numbering", 0) == 0 || line.rfind("[orch-run cupti]   index ", 0) == 0)
        numbering += line + "\n";
      if (line.rfind("[orch-run cupti] record:", 0) != 0) continue;
      ++records;
      if (line.rfind("[orch-run cupti] record: launch 1 ", 0) == 0) first_launch += line + "\n";
      if (line.find("-> not attributed") != std::string::npos) {
        ++unattributed;
        ++orders[line.find("ambiguous") != std::string::npos ? "not attributed: ambiguous" : "not attributed"];
        continue;
      }
      std::smatch m;
      if (std::regex_search(line, m, std::regex(R"(\[exec index \d+, (both orders|breadth-first order only|recursive order only))")))
        ++orders[m[1].str()];
    }
    std::string counts;
    for (const auto& [what, count] : orders) counts += "  " + what + ": " + std::to_string(count) + "\n";
    // The table and the last lines (the ids' summary) in the test's output; the rest in the log.
    const size_t table = text.find("per node (");
    MESSAGE(p.name << ": exit status " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1) << ", " << records
                   << " records, " << unattributed << " not attributed; log " << log << "\n"
                   << "records by exec index (the order whose candidate could run each):\n"
                   << (counts.empty() ? "  none\n" : counts) << numbering
                   << (p.name == "nested" ? first_launch : std::string())
                   << (table == std::string::npos ? text.substr(text.size() > 4000 ? text.size() - 4000 : 0)
                                                  : text.substr(table, 6000)));
  }
}

TEST_CASE("--nodes and --trace of the fills in and out of a loop (issue 13): each fill named once, by its own line") {
  // As the pipeline is written: one node per statement (the unrolled loop is the next case).
  const std::string bin = binary(write_temp("fills.orch", fills_orch()), "--no-pdl --unroll 1");
  const std::string trace = out_path("fills.trace.json"), acc = temp_dir() + "/acc.bin",
                    src = temp_dir() + "/src.bin";
  RunOutput r = orch_run_process({bin, "--fill", "src=random:-1:1", "--seed", "11", "--warmup", "1", "--repeat", "4",
                          "--nodes", "--trace", trace, "--dump", "acc=" + acc, "--dump", "src=" + src});
  INFO(r.out, r.err);
  REQUIRE(r.exit_code == 0);
  // The CPU reference: acc is refilled with 0 at every launch, then gets src once per round.
  const auto s = floats(read_all(src)), a = floats(read_all(acc));
  REQUIRE(s.size() == 4096);
  REQUIRE(a.size() == 4096);
  for (size_t i = 0; i < s.size(); ++i) REQUIRE(a[i] == doctest::Approx(3.0f * s[i]).epsilon(1e-5));
  // The table: the top-level fill has its own row, once; nothing unattributed or matched by guess.
  // Every node of the pipeline, the while body's included, on one row of its own.
  const std::string& out = r.out;
  for (const char* name : {"  fill acc = 0.0  fills.orch:24:3", "  fill i = 0  fills.orch:25:3",
                           "  fill tmp = 0.0  fills.orch:27:5", "  step<<<ceil_div(n, 256), 256>>>  fills.orch:28:5"}) {
    CAPTURE(name);
    const size_t at = out.find(name);
    CHECK(at != std::string::npos);
    CHECK(at == out.rfind(name));
  }
  CHECK(out.find("not attributed") == std::string::npos);
  CHECK(out.find("no statement") == std::string::npos);
  // The condition kernels orchc writes, before the loop and in its body, are named too: six
  // nodes ran (two fills, a condition, and in the body a fill, step and a condition).
  CHECK(out.find("fills.orch:26:3") != std::string::npos);
  CHECK(out.find("  6 nodes; their medians sum to") != std::string::npos);
  // The device status record orch-run reads after each launch is no node of the pipeline.
  CHECK(out.find("memcpy 16 B DtoH: ") == std::string::npos);
  // The trace: the same names, 4 launches.
  const json doc = trace_at(trace);
  int unattributed = 0;
  const auto names = record_names(doc, &unattributed);
  INFO(describe(names));
  CHECK(unattributed == 0);
  CHECK(names.count("fill acc = 0.0  fills.orch:24:3"));
  CHECK(names.at("fill acc = 0.0  fills.orch:24:3") == 4);
  CHECK(names.count("fill tmp = 0.0  fills.orch:27:5"));
  CHECK(names.count("step<<<ceil_div(n, 256), 256>>>  fills.orch:28:5"));
  CHECK(names.count("fill i = 0  fills.orch:25:3"));
  // What CUPTI reports of the loop (3 rounds per launch), for the record.
  MESSAGE("step records over 4 launches (3 rounds each): " << names.at("step<<<ceil_div(n, 256), 256>>>  fills.orch:28:5"));
}

TEST_CASE("--nodes and --trace of the fills' loop unrolled: every copy named by its statement, all attributed") {
  // orchc's default: the while body repeated 8 times per WHILE iteration, the copies from the
  // second on guarded (the fill a generated kernel); 3 rounds run copies 1-3, the rest do nothing.
  const std::string bin = binary(write_temp("fills_unrolled.orch", fills_orch()), "--unroll 8");
  const std::string trace = out_path("fills_unrolled.trace.json"), acc = temp_dir() + "/uacc.bin",
                    src = temp_dir() + "/usrc.bin";
  RunOutput r = orch_run_process({bin, "--fill", "src=random:-1:1", "--seed", "12", "--warmup", "1", "--repeat", "3",
                          "--nodes", "--trace", trace, "--dump", "acc=" + acc, "--dump", "src=" + src});
  INFO(r.out, r.err);
  REQUIRE(r.exit_code == 0);
  const auto sv = floats(read_all(src)), a = floats(read_all(acc));
  REQUIRE(sv.size() == 4096);
  REQUIRE(a.size() == 4096);
  for (size_t i = 0; i < sv.size(); ++i) REQUIRE(a[i] == doctest::Approx(3.0f * sv[i]).epsilon(1e-5));
  const std::string& out = r.out;
  CHECK(out.find("not attributed") == std::string::npos);
  CHECK(out.find("no statement") == std::string::npos);
  auto rows = [&](const std::string& what) {
    int n = 0;
    for (size_t at = out.find(what); at != std::string::npos; at = out.find(what, at + 1)) ++n;
    return n;
  };
  // The top-level fills once; every statement of the body once per copy.
  CHECK(rows("  fill acc = 0.0  fills_unrolled.orch:24:3") == 1);
  CHECK(rows("  fill i = 0  fills_unrolled.orch:25:3") == 1);
  CHECK(rows("fills_unrolled.orch:28:5") == 8);
  CHECK(rows("fills_unrolled.orch:27:5") == 8);
  const json doc = trace_at(trace);
  int unattributed = 0;
  const auto names = record_names(doc, &unattributed);
  INFO(describe(names));
  CHECK(unattributed == 0);
}

TEST_CASE("--nodes and --trace of sibling ifs with nested ifs: every kernel named once by its line; results match the CPU") {
  // The nested graphs' nodes run with exec indices whose order among several nested graphs is
  // not known (breadth-first or recursive): every statement here runs its own kernel, so the
  // kind check picks the one candidate that ran it. This fails if CUDA uses neither order.
  const std::string bin = binary(write_temp("nested.orch", nested_orch()));
  const std::string trace = out_path("nested.trace.json"), x = temp_dir() + "/nx.bin", wa = temp_dir() + "/nwa.bin",
                    wb = temp_dir() + "/nwb.bin";
  RunOutput r = orch_run_process({bin, "--fill", "x=random:-1:1", "--seed", "17", "--warmup", "1", "--repeat", "3", "--nodes",
                          "--trace", trace, "--dump", "x=" + x, "--dump", "wa=" + wa, "--dump", "wb=" + wb});
  INFO(r.out, r.err);
  REQUIRE(r.exit_code == 0);
  // CPU: go = 1 takes every if: wa = 3 (2x + 1) - 0.5, wb = (x - 4)^2 + 7.
  const auto xs = floats(read_all(x)), a = floats(read_all(wa)), b = floats(read_all(wb));
  REQUIRE(xs.size() == 4096);
  REQUIRE(a.size() == 4096);
  REQUIRE(b.size() == 4096);
  for (size_t i = 0; i < xs.size(); ++i) {
    REQUIRE(a[i] == doctest::Approx(3.0f * (2.0f * xs[i] + 1.0f) - 0.5f).epsilon(1e-5));
    const float yb = xs[i] - 4.0f;
    REQUIRE(b[i] == doctest::Approx(yb * yb + 7.0f).epsilon(1e-5));
  }
  const std::string& out = r.out;
  CHECK(out.find("not attributed") == std::string::npos);
  for (const char* name : {"  a1<<<ceil_div(n, 256), 256>>>  nested.orch:56:5", "  a2<<<ceil_div(n, 256), 256>>>  nested.orch:58:7",
                           "  a3<<<ceil_div(n, 256), 256>>>  nested.orch:60:5", "  b1<<<ceil_div(n, 256), 256>>>  nested.orch:63:5",
                           "  b2<<<ceil_div(n, 256), 256>>>  nested.orch:65:7", "  b3<<<ceil_div(n, 256), 256>>>  nested.orch:67:5"}) {
    CAPTURE(name);
    const size_t at = out.find(name);
    CHECK(at != std::string::npos);
    CHECK(at == out.rfind(name));
  }
  // Six kernels and four conditions.
  CHECK(out.find("  10 nodes; their medians sum to") != std::string::npos);
  const json doc = trace_at(trace);
  int unattributed = 0;
  const auto names = record_names(doc, &unattributed);
  INFO(describe(names));
  CHECK(unattributed == 0);
  // Which order each nested kernel was found in, for the record.
  std::map<std::string, int> found_by;
  for (const json& e : doc["traceEvents"])
    if (e["ph"] == "X" && e.contains("args") && e["args"].contains("found by"))
      ++found_by[e["args"]["found by"].get<std::string>()];
  std::string how;
  for (const auto& [f, c] : found_by) how += std::to_string(c) + "x " + f + "\n";
  MESSAGE("nested graphs' nodes found by (3 launches):\n" << how);
}

TEST_CASE("--trace of jacobi: every copy, fill and sweep named by its line; the result matches the CPU") {
  const std::string bin = binary(examples_dir() + "/jacobi.orch");
  const unsigned n = 4096, warmup = 1, repeat = 3;
  const std::string trace = out_path("jacobi.trace.json");
  const std::string u0 = temp_dir() + "/u0.bin", rhs = temp_dir() + "/rhs.bin", u = temp_dir() + "/u.bin";
  {
    const auto a = orch::run::random_bytes(orch::run::ScalarType::F32, n, 5, "u", orch::run::RandomRange{orch::ScalarValue::of(-1.0), orch::ScalarValue::of(1.0)});
    const auto b = orch::run::random_bytes(orch::run::ScalarType::F32, n, 6, "rhs", orch::run::RandomRange{orch::ScalarValue::of(-1.0), orch::ScalarValue::of(1.0)});
    write_temp("u0.bin", std::string(a.begin(), a.end()));
    write_temp("rhs.bin", std::string(b.begin(), b.end()));
  }
  RunOutput r = orch_run_process({bin, "--param", "n=4096", "--param", "tol=-1", "--param", "max_iters=20", "--fill",
                          "u_host=file:" + u0, "--fill", "rhs_host=file:" + rhs, "--warmup", std::to_string(warmup),
                          "--repeat", std::to_string(repeat), "--trace", trace, "--dump", "u_host=" + u});
  INFO(r.out, r.err);
  REQUIRE(r.exit_code == 0);
  // CPU: every launch copies u_host in and out and runs 10 iterations of two sweeps (iters < 20).
  std::vector<float> uu = floats(read_all(u0)), rr = floats(read_all(rhs)), vv(n);
  auto sweep = [&](const std::vector<float>& src, std::vector<float>& dst) {
    for (unsigned i = 0; i < n; ++i) {
      const float left = i > 0 ? src[i - 1] : 0.0f, right = i + 1 < n ? src[i + 1] : 0.0f;
      dst[i] = 0.5f * (rr[i] + left + right);
    }
  };
  for (unsigned launch = 0; launch < warmup + 2 * repeat; ++launch)  // warm-up, timed, profiled
    for (int it = 0; it < 10; ++it) {
      sweep(uu, vv);
      sweep(vv, uu);
    }
  const auto got = floats(read_all(u));
  REQUIRE(got.size() == n);
  for (unsigned i = 0; i < n; ++i) REQUIRE(got[i] == doctest::Approx(uu[i]).epsilon(1e-4));
  const json doc = trace_at(trace);
  int unattributed = 0;
  const auto names = record_names(doc, &unattributed);
  INFO(describe(names));
  CHECK(unattributed == 0);
  for (const char* name : {"copy u_host -> u  jacobi.orch:21:3", "copy rhs_host -> rhs  jacobi.orch:22:3",
                           "fill iters = 0  jacobi.orch:23:3", "fill residual = 0.0  jacobi.orch:24:3",
                           "fill residual = 0.0  jacobi.orch:26:5", "sweep<<<ceil_div(n, 256), 256>>>  jacobi.orch:27:5",
                           "sweep<<<ceil_div(n, 256), 256>>>  jacobi.orch:28:5", "copy u -> u_host  jacobi.orch:31:3"}) {
    CAPTURE(name);
    CHECK(names.count(name) == 1);
  }
  // The loop's span and its iterations (as many as CUPTI reported), and the host phases.
  bool span = false, build = false, instantiate = false, upload = false, launch = false;
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const std::string n2 = e["name"];
    if (e["cat"] == "conditional" && n2.find("jacobi.orch:25:3") != std::string::npos) {
      span = true;
      MESSAGE("iterations reported in a launch of jacobi's loop (10 ran): " << e["args"]["iterations reported"]);
    }
    build |= n2 == "build main";
    instantiate |= n2 == "instantiate main";
    upload |= n2 == "upload main";
    launch |= n2 == "launch main";
  }
  CHECK(span);
  CHECK(build);
  CHECK(instantiate);
  CHECK(upload);
  CHECK(launch);
}

TEST_CASE("--trace of moe and scheduler, which launch graphs from the device: host side, said so; results match the CPU") {
  {
    const std::string bin = binary(examples_dir() + "/moe.orch");
    const unsigned tokens = 512, hidden = 64;
    const std::string trace = out_path("moe.trace.json");
    const std::string x = temp_dir() + "/moe_x.bin", e = temp_dir() + "/moe_e.bin", out = temp_dir() + "/moe_out.bin";
    RunOutput r = orch_run_process({bin, "--param", "tokens=512", "--param", "hidden=64", "--fill", "x=random:-1:1", "--fill",
                            "expert_of=random", "--repeat", "2", "--trace", trace, "--dump", "x=" + x, "--dump",
                            "expert_of=" + e, "--dump", "out=" + out});
    INFO(r.out, r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("(host side only: pipeline moe launches graphs from the device") != std::string::npos);
    const auto xs = floats(read_all(x)), o = floats(read_all(out));
    const auto ex = ints(read_all(e));
    REQUIRE(o.size() == size_t{tokens} * hidden);
    for (unsigned t = 0; t < tokens; ++t)
      for (unsigned h = 0; h < hidden; ++h) {
        const float gain = 1.0f + 0.5f * static_cast<float>(ex[t] & 7);
        const size_t i = size_t{t} * hidden + h;
        REQUIRE(o[i] == doctest::Approx(xs[i] + gain * xs[i]).epsilon(1e-5));
      }
    const json doc = trace_at(trace);
    bool note = false, member = false;
    for (const json& ev : doc["traceEvents"]) {
      note |= ev["ph"] == "i" && ev["name"].get<std::string>().find("launches graphs from the device") != std::string::npos;
      member |= ev["ph"] == "X" && ev["name"] == "instantiate experts[3]";
    }
    CHECK(note);
    CHECK(member);
    // --nodes says why it cannot, before any GPU work.
    r = orch_run_process({bin, "--nodes"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("--nodes: pipeline moe launches graphs from the device") != std::string::npos);
  }
  {
    const std::string bin = binary(examples_dir() + "/scheduler.orch");
    const unsigned items = 200000;
    const std::string trace = out_path("scheduler.trace.json");
    const std::string w0 = temp_dir() + "/work0.bin", w = temp_dir() + "/work.bin";
    const auto init = orch::run::random_bytes(orch::run::ScalarType::F32, items, 9, "work");
    write_temp("work0.bin", std::string(init.begin(), init.end()));
    RunOutput r = orch_run_process({bin, "--param", "items=200000", "--param", "batch=16384", "--fill", "work=file:" + w0,
                            "--warmup", "0", "--repeat", "2", "--trace", trace, "--dump", "work=" + w});
    INFO(r.out, r.err);
    REQUIRE(r.exit_code == 0);
    auto v = floats(read_all(w0));
    const auto got = floats(read_all(w));
    REQUIRE(got.size() == items);
    for (unsigned i = 0; i < items; ++i) {
      float x = v[i];
      for (int launch = 0; launch < 2; ++launch)  // 2 timed launches; device graphs are not profiled
        for (unsigned k = 0; k < (i * 2654435761u) % 256u; ++k) x = std::fma(x, 0.999f, 1.0f);
      REQUIRE(got[i] == doctest::Approx(x).epsilon(1e-4));
    }
    trace_at(trace);
  }
}

TEST_CASE("CUPTI and device-launched graphs today (a probe, reported, not asserted)") {
  // ORCH_RUN_TRACE_DEVICE_GRAPHS=1 makes orch-run trace moe's launches anyway, in a process of
  // its own (a failed launch may take the process's CUDA context with it).
  const std::string bin = binary(examples_dir() + "/moe.orch");
  const std::string orch_run_bin = orch_run_path();
  const std::string log = temp_dir() + "/probe.log", trace = out_path("moe.probe.trace.json");
  const std::string cmd = "ORCH_RUN_TRACE_DEVICE_GRAPHS=1 timeout -s KILL 120 '" + orch_run_bin + "' '" + bin +
                          "' --param tokens=512 --param hidden=64 --fill expert_of=random --repeat 2 --timeout 60 --nodes"
                          " --trace '" + trace + "' >'" + log + "' 2>&1";
  const int status = std::system(cmd.c_str());
  MESSAGE("with CUPTI's activity tracing on, moe's device graph launches "
          << (WIFEXITED(status) && WEXITSTATUS(status) == 0 ? "WORKED (orch-run may stop refusing them)" : "still fail")
          << "; exit status " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1) << "; orch-run said:\n"
          << read_all(log));
}

TEST_CASE("--roofline of saxpy: memory-bound, near the device's bandwidth; the SVG renders") {
  const std::string src = write_temp("triad.orch", R"(// z = a * x + y, out of place (so any number of launches gives the same z).
pipeline triad
target sm_90

param n: u32 = 1 << 24
param a: f32 = 2.0

buffer x: f32[n]
buffer y: f32[n]
buffer z: f32[n]

kernel saxpy(n: u32, a: f32, x: in f32[], y: in f32[], z: out f32[])
    cost bytes 12 * n, flops 2 * n
    source """
extern "C" __global__ void saxpy(unsigned n, float a, const float* x, const float* y, float* z) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) z[i] = a * x[i] + y[i];
}
"""

graph main {
  saxpy<<<ceil_div(n, 256), 256>>>(n, a, x, y, z)
}
)");
  const std::string bin = binary(src);
  for (const bool declared : {false, true}) {
    CAPTURE(declared);
    const std::string svg = out_path(declared ? "triad.declared.roofline.svg" : "triad.roofline.svg");
    const std::string xp = temp_dir() + "/tx.bin", yp = temp_dir() + "/ty.bin", zp = temp_dir() + "/tz.bin";
    std::vector<std::string> args = {bin, "--param", "a=1.5", "--fill", "x=random:-1:1", "--fill", "y=random:-1:1",
                                     "--repeat", "20", "--roofline", svg, "--dump", "x=" + xp, "--dump", "y=" + yp,
                                     "--dump", "z=" + zp};
    if (declared) args.push_back("--declared-costs");
    RunOutput r = orch_run_process(args);
    INFO(r.out, r.err);
    REQUIRE(r.exit_code == 0);
    MESSAGE(r.out);
    const auto x = floats(read_all(xp)), y = floats(read_all(yp)), z = floats(read_all(zp));
    REQUIRE(z.size() == size_t{1} << 24);
    for (size_t i = 0; i < z.size(); i += 997)  // an FMA, or a multiply and an add: within an ulp of the terms
      REQUIRE(std::fabs(z[i] - std::fma(1.5f, x[i], y[i])) <= 1e-6f * (std::fabs(1.5f * x[i]) + std::fabs(y[i])) + 1e-30f);
    // The report: the source of the counts, memory-bound, near the bandwidth.
    const bool measured = r.out.find("measured (CUPTI range profiler)") != std::string::npos;
    if (declared) CHECK(r.out.find("declared (`cost` clause)") != std::string::npos);
    MESSAGE("counts " << (measured ? "measured by CUPTI's range profiler" : "as declared"));
    std::smatch m;
    REQUIRE(std::regex_search(r.out, m, std::regex(R"(intensity ([0-9.]+) FLOP/B; ([0-9.]+)% of peak bandwidth)")));
    const double intensity = std::stod(m[1]), bandwidth = std::stod(m[2]);
    CHECK(intensity > 0.1);
    CHECK(intensity < 0.25);  // 2 FLOPs per 12 bytes
    CHECK(bandwidth > 50);    // a streaming kernel on 192 MiB runs near the DRAM bandwidth
    CHECK(bandwidth < 110);
    CHECK(r.out.find("memory-bound") != std::string::npos);
    // The picture: well-formed, the point left of the f32 ridge, and it renders.
    const std::string text = read_all(svg);
    CHECK(xml_problem(text) == "");
    std::smatch ridge, point;
    REQUIRE(std::regex_search(text, ridge, std::regex(R"re(id="roof-f32" x1="([0-9.]+)")re")));
    REQUIRE(std::regex_search(text, point, std::regex(R"re(<circle class="point" cx="([0-9.]+)")re")));
    CHECK(std::stod(point[1]) < std::stod(ridge[1]));
    const std::string png = svg + ".png";
    if (std::system("command -v rsvg-convert >/dev/null 2>&1") == 0) {
      CHECK(std::system(("rsvg-convert -o '" + png + "' '" + svg + "'").c_str()) == 0);
      CHECK(read_all(png).size() > 1000);
    } else if (std::system("command -v python3 >/dev/null 2>&1") == 0) {
      CHECK(std::system(("python3 -c 'import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])' '" + svg + "'")
                            .c_str()) == 0);
    }
  }
}

TEST_CASE("--trace of a collective on one rank with NCCL: its kernels named by the allreduce") {
  if (!orch::nccl_version()) {
    MESSAGE("skipped: NCCL cannot be loaded here");
    return;
  }
  const std::string src = write_temp("reduce.orch", reduce_orch());
  const std::string bin = binary(src);
  // Out of place: on one rank NCCL copies s to r (in place it would do nothing at all).
  const std::string trace = out_path("reduce.trace.json"), gp = temp_dir() + "/g.bin", rp = temp_dir() + "/r.bin";
  RunOutput r = orch_run_process({bin, "--fill", "g=random:-1:1", "--repeat", "2", "--trace", trace, "--dump", "g=" + gp,
                          "--dump", "r=" + rp});
  INFO(r.out, r.err);
  REQUIRE(r.exit_code == 0);
  const auto g = floats(read_all(gp)), s = floats(read_all(rp));
  for (size_t i = 0; i < g.size(); ++i) REQUIRE(s[i] == doctest::Approx(2.0f * g[i]));  // one rank: the sum is itself
  const json doc = trace_at(trace);
  int unattributed = 0;
  const auto names = record_names(doc, &unattributed);
  INFO(describe(names));
  CHECK(unattributed == 0);
  CHECK(names.count("allreduce sum s -> r on world  reduce.orch:16:3"));
  CHECK(names.count("twice<<<ceil_div(n, 256), 256>>>  reduce.orch:15:3"));
}

TEST_CASE("--trace with two ranks: one file per rank, ranks as processes") {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < 2 || !orch::nccl_version()) {
    (void)cudaGetLastError();
    MESSAGE("skipped: needs two GPUs and NCCL");
    return;
  }
  const std::string src = write_temp("reduce2.orch", R"(pipeline reduce2
target sm_90
param n: u32 = 65536
buffer s: f32[n]
comm world
graph main {
  allreduce sum s on world
}
)");
  const std::string bin = binary(src);
  const std::string orch_run_bin = orch_run_path();
  const std::string trace = out_path("reduce2.trace.json"), log = temp_dir() + "/ranks.log";
  const std::string cmd = "timeout -s KILL 300 '" + orch_run_bin + "' '" + bin + "' --ranks 2 --repeat 2 --trace '" +
                          trace + "' >'" + log + "' 2>&1";
  const int status = std::system(cmd.c_str());
  INFO(read_all(log));
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  for (int rank = 0; rank < 2; ++rank) {
    const json doc = trace_at(trace + ".rank" + std::to_string(rank));
    CHECK(doc["otherData"]["rank"] == rank);
    int unattributed = 0;
    const auto names = record_names(doc, &unattributed);
    INFO(describe(names));
    CHECK(unattributed == 0);
    CHECK(names.count("allreduce sum s on world  reduce2.orch:7:3"));
  }
}

TEST_CASE("--profile: measured on the GPU, its nodes match the source, and orchc --profile decides from it") {
  // The grid is a param without a default: orchc cannot know the launches fit in one wave, so
  // without a profile it makes no programmatic edge and does not unroll the loop.
  const std::string src = write_temp("pgo.orch", R"(pipeline pgo
target sm_90
param n: u32
buffer x: f32[n]
buffer c: i32
kernel add1(n: u32, x: inout f32[]) source """
extern "C" __global__ void add1(unsigned n, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}
"""
graph main {
  add1<<<ceil_div(n, 256), 256>>>(n, x)
  add1<<<ceil_div(n, 256), 256>>>(n, x)
  fill c = 10
  while c > 0 {
    add1<<<ceil_div(n, 256), 256>>>(n, x)
    c -= 1
  }
}
)");
  // orchc in a process, as people run it.
  auto orchc = [](const std::string& args, std::string* err) {
    const std::string e = temp_dir() + "/pgo-orchc.err";
    const int status = std::system(("'" + orchc_path() + "' " + args + " >/dev/null 2>'" + e + "'").c_str());
    *err = read_all(e);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  std::string err;
  const std::string plain = temp_dir() + "/pgo-plain.bin";
  REQUIRE_MESSAGE(orchc("--print-passes '" + src + "' -o '" + plain + "'", &err) == 0, err);
  CHECK(err.find("not unrolled: a launch of its body has a grid known only when it runs") != std::string::npos);
  // Measured: 65536 elements, 256 blocks of 256 threads, one wave on any sm_90. One timed launch
  // and one profiled: x = 0.5 + 2 * 12 after both.
  const std::string profile = out_path("pgo.profile.json"), xp = temp_dir() + "/pgo-x.bin";
  RunOutput r = orch_run_process({plain, "--param", "n=65536", "--fill", "x=0.5", "--warmup", "0", "--repeat", "1",
                                  "--profile", profile, "--dump", "x=" + xp});
  INFO(r.out, r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("wrote the profile (") != std::string::npos);
  for (float v : floats(read_all(xp))) REQUIRE(v == 24.5f);
  const std::string text = read_all(profile);
  MESSAGE(text);
  orch::lowering::ProfileError error;
  const auto p = orch::lowering::parse_profile(text, &error);
  REQUIRE_MESSAGE(p, error.message);
  CHECK(p->pipeline == "pgo");
  CHECK_FALSE(p->device.empty());
  CHECK(p->sms > 0);
  CHECK(p->compute_capability >= 90);
  CHECK(p->cuda_driver_version >= 13000);
  CHECK(p->date.size() == 20);
  CHECK(p->pipeline_launches == 1);
  REQUIRE(p->params.size() == 1);
  CHECK(p->params[0].first == "n");
  CHECK(std::get<uint64_t>(p->params[0].second) == 65536);
  // Every node is a statement of pgo.orch: the three launches of add1 as they ran, the fill, the
  // loop's condition kernels and the scalar update.
  const std::set<std::tuple<uint32_t, uint32_t, std::string>> statements = {
      {13, 3, "add1"}, {14, 3, "add1"}, {15, 3, ""}, {16, 3, ""}, {17, 5, "add1"}, {18, 5, ""}};
  std::set<std::tuple<uint32_t, uint32_t, std::string>> seen;
  for (const orch::lowering::ProfileNode& n : p->nodes) {
    CAPTURE(n.line);
    CHECK(orch::lowering::file_name(n.file) == "pgo.orch");
    CHECK(statements.count({n.line, n.column, n.kernel}) == 1);
    seen.insert({n.line, n.column, n.kernel});
    CHECK(n.launches >= 1);
    CHECK(n.min_ns <= n.median_ns);
    CHECK(n.median_ns > 0);
    if (n.kernel == "add1") {
      REQUIRE(n.launch);
      CHECK(n.launch->blocks() == 256);
      CHECK(n.launch->threads() == 256);
      CHECK(n.launch->registers > 0);
    }
  }
  for (const auto& k : {std::make_tuple(13u, 3u, std::string("add1")), std::make_tuple(14u, 3u, std::string("add1")),
                        std::make_tuple(17u, 5u, std::string("add1"))})
    CHECK(seen.count(k) == 1);
  // Compiled with it: the launches fit in one wave, so the edge between the two top-level
  // launches is programmatic, and the loop's choice is made from the measured times.
  const std::string tuned = temp_dir() + "/pgo-tuned.bin";
  REQUIRE_MESSAGE(orchc("--print-passes --profile '" + profile + "' '" + src + "' -o '" + tuned + "'", &err) == 0, err);
  MESSAGE(err.substr(0, 4000));
  CHECK(err.find("warning") == std::string::npos);
  CHECK(err.find("programmatic from the profile's measured launches") != std::string::npos);
  CHECK(err.find("`while c > 0` at line 16:3: ") != std::string::npos);
  CHECK(err.find("from the profile: its body ran ") != std::string::npos);
  // And it runs, exactly: one launch, 12 additions.
  RunOutput t = orch_run_process({tuned, "--param", "n=65536", "--fill", "x=0.5", "--warmup", "0", "--repeat", "1",
                                  "--dump", "x=" + xp});
  INFO(t.out, t.err);
  REQUIRE(t.exit_code == 0);
  for (float v : floats(read_all(xp))) REQUIRE(v == 12.5f);
}

}  // TEST_SUITE("gpu")
