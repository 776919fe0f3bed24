// Attribution without a GPU: the sites of compiled pipelines, CUPTI-style node ids learned as the
// runtime builds its graphs (created, cloned) and activity records attributed through them; the
// --nodes table, including the fill that issue 13 found misattributed.
#include <doctest/doctest.h>

#include <cstdlib>
#include <set>
#include <string>
#include <thread>

#include "tools/orch_run/attribution.h"
#include "tools/orch_run/sites.h"
#include "tools/tests/test_util.h"

using namespace orch::run;
using namespace orch::tools_test;

namespace {


LoadedPipeline compile_text(const std::string& name, const std::string& text) {
  std::string log;
  const std::string bin = compiled(write_temp(name, text), &log);
  REQUIRE_MESSAGE(!bin.empty(), log);
  LoadedPipeline l = load_pipeline(bin);
  REQUIRE_MESSAGE(l.pipeline, l.error);
  return l;
}

// What the runtime and CUPTI do while a pipeline is instantiated: every site is built in order
// (conditional bodies inside their node's window) and gets template id 100 + index, then
// instantiation clones each into 1000 + index (the id activity records carry).
void build_and_instantiate(const SiteTable& t, NodeIds& ids) {
  std::vector<int> open;  // sites whose window is open, innermost last
  for (size_t i = 0; i < t.size(); ++i) {
    const Site& s = t[static_cast<int>(i)];
    while (!open.empty() && open.back() != s.parent) {
      ids.end(open.back(), 100 + static_cast<uint64_t>(open.back()));
      open.pop_back();
    }
    REQUIRE(t.find(s.graph, s.member, s.path) == static_cast<int>(i));  // the runtime's NodeSite finds it
    ids.begin(static_cast<int>(i));
    ids.created(100 + i);
    open.push_back(static_cast<int>(i));
  }
  while (!open.empty()) {
    ids.end(open.back(), 100 + static_cast<uint64_t>(open.back()));
    open.pop_back();
  }
  for (size_t i = 0; i < t.size(); ++i) ids.cloned(100 + i, 1000 + i);
}

int site_named(const SiteTable& t, const std::string& name) {
  for (size_t i = 0; i < t.size(); ++i)
    if (t[static_cast<int>(i)].name == name) return static_cast<int>(i);
  FAIL("no site " << name);
  return -1;
}

NodeRecord record(NodeRecord::Kind kind, const std::string& name, uint64_t node, uint64_t start, uint64_t end) {
  NodeRecord r;
  r.kind = kind;
  r.name = name;
  r.node_id = node;
  r.start_ns = start;
  r.end_ns = end;
  return r;
}

}  // namespace

TEST_CASE("node ids follow the site being built, through creation and cloning") {
  NodeIds ids;
  ids.created(7);  // made outside any site (a graph orch-run did not build): not attributed
  CHECK(ids.site_of(7) == -1);
  ids.begin(3);
  ids.created(30);  // the node itself
  ids.created(31);  // more nodes in the same window: NCCL's captured kernels of a collective
  ids.begin(4);     // a conditional body's node, nested
  ids.created(40);
  ids.end(4, 40);
  ids.created(32);
  ids.end(3, 30);
  ids.created(50);  // after the window: nothing
  CHECK(ids.site_of(30) == 3);
  CHECK(ids.site_of(31) == 3);
  CHECK(ids.site_of(32) == 3);
  CHECK(ids.site_of(40) == 4);
  CHECK(ids.site_of(50) == -1);
  ids.cloned(31, 131);   // instantiation
  ids.cloned(131, 231);  // a clone of a clone (a child graph node, then the exec)
  ids.cloned(999, 1999);  // a clone of something unknown stays unknown
  CHECK(ids.site_of(231) == 3);
  CHECK(ids.site_of(1999) == -1);
  // end() alone records the node made (CUPTI's id of the runtime's node), even without a
  // creation callback.
  ids.begin(9);
  ids.end(9, 90);
  CHECK(ids.site_of(90) == 9);
  // Another thread's window does not capture this thread's nodes.
  ids.begin(11);
  std::thread([&] { ids.created(60); }).join();
  ids.end(11, 0);
  CHECK(ids.site_of(60) == -1);
}

TEST_CASE("sites: every node the runtime builds, named as orchc --emit=dot names it (jacobi)") {
  std::string log;
  const std::string bin = compiled(spec_dir() + "/examples/jacobi.orch", &log);
  REQUIRE_MESSAGE(!bin.empty(), log);
  LoadedPipeline l = load_pipeline(bin);
  REQUIRE_MESSAGE(l.pipeline, l.error);
  SiteTable t(*l.pipeline);
  std::string names;
  for (const Site& s : t.sites())
    names += std::string(s.depth, ' ') + s.name + (s.generated ? " [generated]" : "") + "\n";
  INFO(names);
  const int sweep1 = site_named(t, "sweep<<<ceil_div(n, 256), 256>>>  jacobi.orch:27:5");
  const int sweep2 = site_named(t, "sweep<<<ceil_div(n, 256), 256>>>  jacobi.orch:28:5");
  const int fill_in = site_named(t, "fill residual = 0.0  jacobi.orch:26:5");
  const int fill_top = site_named(t, "fill residual = 0.0  jacobi.orch:24:3");
  CHECK(t[sweep1].in_while);
  CHECK(t[sweep2].in_while);
  CHECK(t[fill_in].in_while);
  CHECK_FALSE(t[fill_top].in_while);
  CHECK(t[fill_top].parent == -1);
  CHECK(t[sweep1].kernel_symbol == "sweep");
  const int loop = t[sweep1].parent;
  REQUIRE(loop >= 0);
  CHECK(t[loop].node->kind() == orch::fb::NodeKind::Conditional);
  CHECK(t[fill_in].parent == loop);
  CHECK(t.level_name(sweep1) == "main / " + t[loop].what + " (body)");
  CHECK(t.level_name(fill_top) == "main");
  CHECK(t.find(t[sweep2].graph, t[sweep2].member, t[sweep2].path) == sweep2);
  CHECK(t.find(99, -1, {0}) == -1);
}

TEST_CASE("records are attributed by node id, per launch and per run (the fills of issue 13)") {
  LoadedPipeline l = compile_text("fills.orch", fills_orch());
  SiteTable t(*l.pipeline);
  NodeIds ids;
  build_and_instantiate(t, ids);
  const int top = site_named(t, "fill acc = 0.0  fills.orch:24:3");
  const int in_loop = site_named(t, "fill tmp = 0.0  fills.orch:27:5");
  const int step = site_named(t, "step<<<ceil_div(n, 256), 256>>>  fills.orch:28:5");
  const int counter = site_named(t, "fill i = 0  fills.orch:25:3");
  const uint64_t top_id = 1000 + top, loop_id = 1000 + in_loop, step_id = 1000 + step, counter_id = 1000 + counter;
  using K = NodeRecord::Kind;
  // Both 16 KiB fills run as CUDA's memset32 kernel; the 4-byte one as a memset. Launch 1 reports
  // two iterations of the loop, launch 2 one; one record comes from a node orch-run never saw.
  std::vector<std::vector<NodeRecord>> launches = {
      {record(K::Kernel, "memset32", top_id, 1000, 1400), record(K::Memset, "", counter_id, 1000, 1100),
       record(K::Kernel, "memset32", loop_id, 2000, 2300), record(K::Kernel, "step", step_id, 2400, 3400),
       record(K::Kernel, "memset32", loop_id, 4000, 4300), record(K::Kernel, "step", step_id, 4400, 5400),
       record(K::Kernel, "mystery", 77, 6000, 6100)},
      {record(K::Kernel, "memset32", top_id, 11000, 11600), record(K::Memset, "", counter_id, 11000, 11100),
       record(K::Kernel, "memset32", loop_id, 12000, 12300), record(K::Kernel, "step", step_id, 12400, 13600),
       record(K::Kernel, "other", step_id, 14000, 14000)},  // no duration: not run
  };
  launches[0][1].bytes = launches[1][1].bytes = 4;
  const Attribution a = attribute(launches, ids);
  CHECK(a.launches == 2);
  CHECK(a.without_duration == 1);
  REQUIRE(a.records.size() == 11);
  int loop_runs = 0;
  for (const Attributed& x : a.records) {
    if (x.record.node_id == top_id) CHECK(x.site == top);
    if (x.record.node_id == loop_id) {
      CHECK(x.site == in_loop);
      ++loop_runs;
    }
    if (x.record.node_id == 77) CHECK(x.site == -1);
  }
  CHECK(loop_runs == 3);
  // The second iteration of launch 1 is run 2.
  for (const Attributed& x : a.records)
    if (x.record.node_id == step_id && x.launch == 0 && x.record.start_ns == 4400) CHECK(x.run == 2);

  const auto rows = node_rows(a);
  REQUIRE(rows.size() == 5);
  auto row_of = [&](int site) -> const NodeRow& {
    for (const NodeRow& r : rows)
      if (r.site == site) return r;
    FAIL("no row for site " << site);
    return rows[0];
  };
  const NodeRow& top_row = row_of(top);
  CHECK(top_row.runs_per_launch == 1);
  CHECK(top_row.per_launch.median == doctest::Approx(0.0005));  // 0.4 and 0.6 us
  const NodeRow& step_row = row_of(step);
  CHECK(step_row.runs_per_launch == doctest::Approx(1.5));
  CHECK(step_row.max_runs == 2);
  CHECK(step_row.per_launch.max == doctest::Approx(0.002));  // two 1 us runs in launch 1
  CHECK(step_row.per_run.median == doctest::Approx(0.001));

  const std::string table = format_node_table(t, rows, summarize({0.01, 0.012}), 2);
  INFO(table);
  CHECK(table.find("per node (CUPTI activity records of 2 more launches") == 0);
  // The top-level fill: its own row, named, once; no "no statement matches".
  CHECK(table.find("fill acc = 0.0  fills.orch:24:3  (run as kernel memset32)\n") != std::string::npos);
  CHECK(table.find("fill acc") == table.rfind("fill acc"));
  CHECK(table.find("fill tmp = 0.0  fills.orch:27:5  (run as kernel memset32)  [loop body: 0.3 us per run, up to 2 runs in "
                   "a launch]\n") != std::string::npos);
  CHECK(table.find("   1.50  step<<<ceil_div(n, 256), 256>>>  fills.orch:28:5  [loop body: 1.0 us per run, up to 2 runs in a "
                   "launch]\n") !=
        std::string::npos);
  CHECK(table.find("fill i = 0  fills.orch:25:3\n") != std::string::npos);
  CHECK(table.find("kernel mystery: CUDA graph node 77 was not made for any statement as orch-run saw the graphs "
                   "built; not attributed") != std::string::npos);
  CHECK(table.find("no statement") == std::string::npos);
  CHECK(table.find("4 nodes; their medians sum to ") != std::string::npos);
  CHECK(table.find("1 row not attributed") != std::string::npos);
}

TEST_CASE("the --nodes table of saxpy: one row per node, in order") {
  std::string log;
  const std::string bin = compiled_saxpy(&log);
  REQUIRE_MESSAGE(!bin.empty(), log);
  LoadedPipeline l = load_pipeline(bin);
  REQUIRE_MESSAGE(l.pipeline, l.error);
  SiteTable t(*l.pipeline);
  REQUIRE(t.size() == 1);
  CHECK(t[0].name == "saxpy<<<ceil_div(n, 256), 256>>>  saxpy.orch:21:3");
  NodeIds ids;
  build_and_instantiate(t, ids);
  std::vector<std::vector<NodeRecord>> launches;
  for (uint64_t d : {10100, 10200, 11000})
    launches.push_back({record(NodeRecord::Kind::Kernel, "saxpy", 1000, 5000, 5000 + d)});
  const std::string table = format_node_table(t, node_rows(attribute(launches, ids)), summarize({0.015}), 3);
  CHECK(table.find("     10.2 us    11.0 us       1  saxpy<<<ceil_div(n, 256), 256>>>  saxpy.orch:21:3\n") !=
        std::string::npos);
  CHECK(table.find("1 nodes; their medians sum to 10.2 us, the launch median is 15.0 us") != std::string::npos);
  CHECK_FALSE(uses_device_graphs(*l.pipeline));
  CHECK(format_node_table(t, {}, summarize({0.015}), 0).find("(CUPTI reported no kernel, copy or fill)") !=
        std::string::npos);
}

TEST_CASE("sites of device graphs and families (moe): one per member, named by member") {
  std::string log;
  const std::string bin = compiled(spec_dir() + "/examples/moe.orch", &log);
  REQUIRE_MESSAGE(!bin.empty(), log);
  LoadedPipeline l = load_pipeline(bin);
  REQUIRE_MESSAGE(l.pipeline, l.error);
  CHECK(uses_device_graphs(*l.pipeline));
  SiteTable t(*l.pipeline);
  int experts = 0;
  for (const Site& s : t.sites())
    if (s.graph_name.rfind("experts[", 0) == 0) {
      ++experts;
      CHECK(s.device_graph);
      CHECK(s.member >= 0);
      CHECK(t.level_name(static_cast<int>(&s - &t.sites()[0])) ==
            s.graph_name + " (device graph, launched by route<<<1, 1024>>>  moe.orch:35:3)");
    }
  CHECK(experts == 8);
  const int route = site_named(t, "route<<<1, 1024>>>  moe.orch:35:3");
  CHECK_FALSE(t[route].device_graph);
  CHECK(t.level_name(route) == "main");
}

TEST_CASE("orchc --emit=dot labels the statements' nodes with the names orch-run gives them") {
  std::string log;
  const std::string src = spec_dir() + "/examples/jacobi.orch";
  const std::string bin = compiled(src, &log);
  REQUIRE_MESSAGE(!bin.empty(), log);
  LoadedPipeline l = load_pipeline(bin);
  REQUIRE_MESSAGE(l.pipeline, l.error);
  const char* env = std::getenv("ORCH_ORCHC");
  const std::string orchc = env && *env ? env : ORCH_TOOLS_ORCHC;
  const std::string dot = temp_dir() + "/jacobi.dot";
  REQUIRE(std::system(("'" + orchc + "' --emit=dot '" + src + "' > '" + dot + "'").c_str()) == 0);
  const std::string text = read_all(dot);
  std::set<std::string> checked;  // an unrolled loop's copies are their statement's, named alike
  const SiteTable t(*l.pipeline);
  for (const Site& s : t.sites()) {
    const orch::fb::NodeKind k = s.node->kind();
    // Statements as written: the nodes orchc adds or fuses (conditions, scalar updates) are its own.
    if (s.generated || (k != orch::fb::NodeKind::Kernel && k != orch::fb::NodeKind::Memcpy && k != orch::fb::NodeKind::Memset))
      continue;
    CAPTURE(s.name);
    CHECK(text.find("[label=\"" + s.name + "\"") != std::string::npos);
    checked.insert(s.name);
  }
  CHECK(checked.size() == 8);  // 3 copies, 3 fills, 2 sweeps
}
