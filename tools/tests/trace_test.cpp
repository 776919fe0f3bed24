// --trace without a GPU: the Chrome trace made from recorded activity (CUPTI-style records with
// graph node ids, host phases) is valid against tools/tests/trace_schema.json, nests on every
// track, and names every node by its statement.
#include <doctest/doctest.h>

#include <set>

#include "tools/orch_run/trace.h"
#include "tools/tests/check_output.h"
#include "tools/tests/test_util.h"

using namespace orch::run;
using namespace orch::tools_test;
using nlohmann::json;

namespace {

struct Fixture {
  LoadedPipeline loaded;
  std::unique_ptr<SiteTable> sites;
  NodeIds ids;
  explicit Fixture(const std::string& name, const std::string& text) {
    std::string log;
    const std::string bin = compiled(write_temp(name, text), &log);
    REQUIRE_MESSAGE(!bin.empty(), log);
    loaded = load_pipeline(bin);
    REQUIRE_MESSAGE(loaded.pipeline, loaded.error);
    sites = std::make_unique<SiteTable>(*loaded.pipeline);
    // Built and instantiated as the runtime does: template ids 100 + i, exec clones 1000 + i.
    for (size_t i = 0; i < sites->size(); ++i) {
      ids.begin(static_cast<int>(i));
      ids.end(static_cast<int>(i), 100 + i);
      ids.cloned(100 + i, 1000 + i);
    }
  }
  uint64_t id(const std::string& name) const {
    for (size_t i = 0; i < sites->size(); ++i)
      if ((*sites)[static_cast<int>(i)].name == name) return 1000 + i;
    FAIL("no site " << name);
    return 0;
  }
};

NodeRecord rec(NodeRecord::Kind kind, const std::string& name, uint64_t node, uint64_t start, uint64_t end) {
  NodeRecord r;
  r.kind = kind;
  r.name = name;
  r.node_id = node;
  r.start_ns = start;
  r.end_ns = end;
  r.graph_id = 7;
  return r;
}

std::vector<const json*> events_named(const json& doc, const std::string& name) {
  std::vector<const json*> out;
  for (const json& e : doc["traceEvents"])
    if (e["name"] == name) out.push_back(&e);
  return out;
}

std::string thread_name(const json& doc, long long pid, long long tid) {
  for (const json& e : doc["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["pid"] == pid && e["tid"] == tid)
      return e["args"]["name"];
  return "";
}

}  // namespace

TEST_CASE("the schema check itself refuses what is not a trace") {
  json ok = json::parse(R"({"traceEvents": [{"ph": "X", "name": "a", "ts": 0, "dur": 1, "pid": 1, "tid": 1}]})");
  CHECK(trace_problem(ok.dump()) == "");
  CHECK(trace_problem("{").find("not valid JSON") == 0);
  CHECK(trace_problem(R"({"events": []})") == "schema: : lacks required 'traceEvents'");
  CHECK(trace_problem(R"({"traceEvents": [{"ph": "X", "name": "a", "ts": 0, "pid": 1, "tid": 1}]})") ==
        "schema: /traceEvents/0: lacks required 'dur'");
  CHECK(trace_problem(R"({"traceEvents": [{"ph": "Z", "name": "a", "ts": 0, "pid": 1, "tid": 1}]})")
            .find("schema: /traceEvents/0/ph: \"Z\" is not one of") == 0);
  CHECK(trace_problem(R"({"traceEvents": [{"ph": "i", "name": "a", "ts": -1, "s": "g", "pid": 1, "tid": 1}]})") ==
        "schema: /traceEvents/0/ts: -1 is below 0");
  CHECK(trace_problem(R"({"traceEvents": [{"ph": "M", "name": "colour", "pid": 1, "tid": 1, "args": {}}]})")
            .find("schema: /traceEvents/0/name") == 0);
  // Two slices of one thread that overlap without nesting cannot be drawn.
  CHECK(trace_problem(R"({"traceEvents": [{"ph": "X", "name": "a", "ts": 0, "dur": 10, "pid": 1, "tid": 1},
                                          {"ph": "X", "name": "b", "ts": 5, "dur": 10, "pid": 1, "tid": 1}]})")
            .find("pid 1 tid 1: a slice [5.000000, 15.000000] overlaps") == 0);
}

TEST_CASE("a trace of recorded launches: every node named, loops grouped, host phases, valid") {
  Fixture f("fills.orch", fills_orch());
  using K = NodeRecord::Kind;
  const uint64_t top = f.id("fill acc = 0.0  fills.orch:24:3"), counter = f.id("fill i = 0  fills.orch:25:3"),
                 fill_in = f.id("fill tmp = 0.0  fills.orch:27:5"),
                 step = f.id("step<<<ceil_div(n, 256), 256>>>  fills.orch:28:5");
  const uint64_t t0 = 5'000'000;
  std::vector<std::vector<NodeRecord>> launches = {
      {rec(K::Kernel, "memset32", top, t0 + 1000, t0 + 1400), rec(K::Memset, "", counter, t0 + 1000, t0 + 1100),
       rec(K::Kernel, "memset32", fill_in, t0 + 2000, t0 + 2300), rec(K::Kernel, "step", step, t0 + 2400, t0 + 3400),
       rec(K::Kernel, "memset32", fill_in, t0 + 4000, t0 + 4300), rec(K::Kernel, "step", step, t0 + 4400, t0 + 5400),
       rec(K::Kernel, "mystery", 77, t0 + 6000, t0 + 6100)},
      {rec(K::Kernel, "memset32", top, t0 + 11000, t0 + 11600), rec(K::Memset, "", counter, t0 + 11000, t0 + 11100),
       rec(K::Kernel, "memset32", fill_in, t0 + 12000, t0 + 12300),
       rec(K::Kernel, "step", step, t0 + 12400, t0 + 13600)},
  };
  const Attribution a = attribute(launches, f.ids);
  TraceInput in;
  in.sites = f.sites.get();
  in.pipeline = "fills";
  in.device = "NVIDIA H200 (device 0)";
  in.gpu = &a;
  in.host = {{"load fills.bin", "load", t0 - 900000, t0 - 800000, true},
             {"instantiate fills", "instantiate", t0 - 700000, t0 - 100000, true},
             {"build main", "build", t0 - 690000, t0 - 600000, true},
             {"instantiate main", "instantiate", t0 - 590000, t0 - 300000, true},
             {"upload main", "upload", t0 - 290000, t0 - 200000, false},
             {"profiled launch 1", "launch", t0 - 50, t0 + 8000, true},
             {"launch main", "launch", t0 - 40, t0 - 20, true}};
  in.notes = {"timed launches (CUDA events, not traced): median 12.0 us"};
  const std::string text = trace_json(in);
  write_temp("fills.trace.json", text);  // kept with ORCH_KEEP_TEST_FILES=1, for tools/trace_svg.py
  json doc;
  const std::string problem = trace_problem(text, &doc);
  INFO(text);
  REQUIRE(problem == "");

  // Every record, named by its statement, once per run.
  CHECK(events_named(doc, "fill acc = 0.0  fills.orch:24:3").size() == 2);
  CHECK(events_named(doc, "fill i = 0  fills.orch:25:3").size() == 2);
  CHECK(events_named(doc, "fill tmp = 0.0  fills.orch:27:5").size() == 3);
  const auto steps = events_named(doc, "step<<<ceil_div(n, 256), 256>>>  fills.orch:28:5");
  REQUIRE(steps.size() == 3);
  const json& s = *steps[0];
  CHECK(s["ph"] == "X");
  CHECK(s["cat"] == "kernel");
  CHECK(s["args"]["statement"] == "step<<<ceil_div(n, 256), 256>>>");
  CHECK(s["args"]["place"] == "fills.orch:28:5");
  CHECK(s["args"]["kernel"] == "step");
  CHECK(s["args"]["run in launch"] == 1);
  CHECK(s["args"]["CUDA graph node"] == std::to_string(step));
  CHECK(s["dur"].get<double>() == doctest::Approx(1.0));  // 1000 ns
  // The fill CUDA ran as its memset32 kernel is a kernel record, named by the fill.
  CHECK((*events_named(doc, "fill acc = 0.0  fills.orch:24:3")[0])["args"]["kernel"] == "memset32");
  // The loop: a span per launch, with its iterations.
  const Site* found = nullptr;
  for (const Site& x : f.sites->sites())
    if (orch::artifact::op_kind(*x.node) == orch::artifact::NodeKind::Conditional) found = &x;
  REQUIRE(found);
  const Site& loop = *found;
  CHECK(loop.name == "while i < rounds  fills.orch:26:3");
  const auto spans = events_named(doc, loop.name);
  REQUIRE(spans.size() == 2);
  CHECK((*spans[0])["args"]["iterations reported"] == 2);
  CHECK((*spans[1])["args"]["iterations reported"] == 1);
  CHECK((*spans[1])["args"]["note"] == "CUPTI reports one run per launch of a node in a while body (the first iteration)");
  CHECK(events_named(doc, "iteration 1").size() == 2);
  CHECK(events_named(doc, "iteration 2").size() == 1);
  CHECK((*events_named(doc, "iteration 2")[0])["ts"].get<double>() == doctest::Approx((t0 + 4000 - (t0 - 900000)) / 1000.0));
  // Launches on their own track.
  CHECK(events_named(doc, "launch 1 of fills").size() == 1);
  CHECK(events_named(doc, "launch 2 of fills").size() == 1);
  // What orch-run could not attribute is said so, never guessed.
  const auto stray = events_named(doc, "not attributed: kernel mystery");
  REQUIRE(stray.size() == 1);
  CHECK((*stray[0])["args"]["why"] ==
        "CUDA graph node 77 was not made for any statement as orch-run saw the graphs built");
  // Host phases on the host process; the first event is at 0.
  const auto load = events_named(doc, "load fills.bin");
  REQUIRE(load.size() == 1);
  CHECK((*load[0])["ts"] == 0.0);
  CHECK((*load[0])["pid"] == 1);
  CHECK((*events_named(doc, "upload main")[0])["args"]["ok"] == false);
  CHECK(events_named(doc, "timed launches (CUDA events, not traced): median 12.0 us").size() == 1);
  // Tracks: one per graph level.
  std::set<std::string> tracks;
  for (const json& e : doc["traceEvents"])
    if (e["ph"] == "X" && e["pid"] == 2) tracks.insert(thread_name(doc, 2, e["tid"]));
  CHECK(tracks.count("launches"));
  CHECK(tracks.count("main"));
  CHECK(tracks.count("main / " + loop.what + " (body)"));
  CHECK(tracks.count("main / " + loop.what + " (iterations)"));
  CHECK(tracks.count("not attributed"));
  CHECK(doc["otherData"]["pipeline"] == "fills");
}

TEST_CASE("concurrent nodes of one graph level get lanes, so every track nests") {
  Fixture f("fills.orch", fills_orch());
  using K = NodeRecord::Kind;
  const uint64_t top = f.id("fill acc = 0.0  fills.orch:24:3"), counter = f.id("fill i = 0  fills.orch:25:3");
  // The two top-level fills run at once and overlap without nesting.
  std::vector<std::vector<NodeRecord>> launches = {
      {rec(K::Kernel, "memset32", top, 1000, 3000), rec(K::Memset, "", counter, 2000, 4000)}};
  const Attribution a = attribute(launches, f.ids);
  TraceInput in;
  in.sites = f.sites.get();
  in.pipeline = "fills";
  in.device = "GPU";
  in.gpu = &a;
  json doc;
  REQUIRE(trace_problem(trace_json(in), &doc) == "");
  const json& x = *events_named(doc, "fill acc = 0.0  fills.orch:24:3")[0];
  const json& y = *events_named(doc, "fill i = 0  fills.orch:25:3")[0];
  CHECK(x["tid"] != y["tid"]);
  CHECK(thread_name(doc, 2, x["tid"]) == "main");
  CHECK(thread_name(doc, 2, y["tid"]) == "main (lane 2)");
}

TEST_CASE("a trace of the host side only, with ranks as processes") {
  Fixture f("fills.orch", fills_orch());
  TraceInput in;
  in.sites = f.sites.get();
  in.pipeline = "moe";
  in.device = "NVIDIA H200 (device 1)";
  in.rank = 1;
  in.world_size = 2;
  in.host = {{"load moe.bin", "load", 100, 200, true}};
  in.notes = {"pipeline moe launches graphs from the device, and CUPTI's activity tracing makes such launches fail"};
  json doc;
  REQUIRE(trace_problem(trace_json(in), &doc) == "");
  bool host_named = false, gpu_named = false;
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name" && e["pid"] == 3)
      host_named = e["args"]["name"] == "rank 1: orch-run (host)";
    if (e["ph"] == "M" && e["name"] == "process_name" && e["pid"] == 4)
      gpu_named = e["args"]["name"] == "rank 1: GPU NVIDIA H200 (device 1): pipeline moe";
    if (e["ph"] == "X") CHECK(e["pid"] == 3);
  }
  CHECK(host_named);
  CHECK(gpu_named);
  const auto notes = events_named(
      doc, "pipeline moe launches graphs from the device, and CUPTI's activity tracing makes such launches fail");
  REQUIRE(notes.size() == 1);
  CHECK((*notes[0])["ph"] == "i");
  CHECK(doc["otherData"]["rank"] == 1);
}

TEST_CASE("a trace: body nodes found by index say so; work outside the graphs has a track of its own") {
  Fixture f("fills.orch", fills_orch());
  using K = NodeRecord::Kind;
  const uint64_t top = f.id("fill acc = 0.0  fills.orch:24:3");
  // A body node whose clone CUDA did not name: its graph (45) was cloned from the template's
  // (graph 2, where the runtime made it as node 2:4).
  const int step = static_cast<int>(f.id("step<<<ceil_div(n, 256), 256>>>  fills.orch:28:5") - 1000);
  f.ids.created((uint64_t{2} << 32) | 5, 2);
  f.ids.add((uint64_t{2} << 32) | 5, step);
  f.ids.graph_cloned(2, 45);
  NodeRecord in_body = rec(K::Kernel, "step", (uint64_t{45} << 32) | 5, 2000, 3000);
  NodeRecord status = rec(K::Memcpy, "", 0, 3500, 4000);
  status.graph_id = 0;
  status.bytes = 16;
  status.copy_kind = 2;
  const Attribution a = attribute({{rec(K::Kernel, "memset32", top, 1000, 1400), in_body, status}}, f.ids);
  REQUIRE(a.outside.size() == 1);
  TraceInput in;
  in.sites = f.sites.get();
  in.pipeline = "fills";
  in.device = "GPU";
  in.gpu = &a;
  json doc;
  REQUIRE(trace_problem(trace_json(in), &doc) == "");
  const auto steps = events_named(doc, "step<<<ceil_div(n, 256), 256>>>  fills.orch:28:5");
  REQUIRE(steps.size() == 1);
  CHECK((*steps[0])["args"]["found by"] == "graph + index");
  CHECK((*steps[0])["args"]["CUDA graph node"] == std::to_string((uint64_t{45} << 32) | 5));
  CHECK_FALSE((*events_named(doc, "fill acc = 0.0  fills.orch:24:3")[0])["args"].contains("found by"));
  const auto outside = events_named(doc, "outside the graphs: memcpy 16 B DtoH");
  REQUIRE(outside.size() == 1);
  CHECK(thread_name(doc, 2, (*outside[0])["tid"]) == "outside the pipeline's graphs");
  CHECK((*outside[0])["cat"] == "memcpy");
  // The launch's span is the graphs' work: 1000 to 3000 ns.
  const auto launch = events_named(doc, "launch 1 of fills");
  REQUIRE(launch.size() == 1);
  CHECK((*launch[0])["dur"].get<double>() == doctest::Approx(2.0));
}
