// Attribution without a GPU: the sites of compiled pipelines, CUPTI-style node ids learned as the
// runtime builds its graphs (created, cloned) and activity records attributed through them; the
// --nodes table, including the fill that issue 13 found misattributed.
#include <doctest/doctest.h>

#include <cstdlib>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "lowering/profile.h"
#include "tools/orch_run/attribution.h"
#include "tools/orch_run/profile.h"
#include "tools/orch_run/sites.h"
#include "tools/tests/cupti_logs.h"
#include "tools/tests/test_util.h"

using namespace orch::run;
using namespace orch::tools_test;
using orch::artifact::NodeKind;
using orch::artifact::op_kind;

namespace {


// The H100's logs (cupti_logs.h) and the fake CUDA below count the nodes of plain graphs: the
// pipelines here are compiled as those runs compiled them, without the speed passes.
constexpr const char* kPlain = "--no-pdl --unroll 1";

LoadedPipeline compile_text(const std::string& name, const std::string& text) {
  std::string log;
  const std::string bin = compiled(write_temp(name, text), &log, kPlain);
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
  const std::string bin = compiled(examples_dir() + "/jacobi.orch", &log);
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
  CHECK(op_kind(*t[loop].node) == NodeKind::Conditional);
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
  const std::string bin = compiled(examples_dir() + "/moe.orch", &log);
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
  const std::string src = examples_dir() + "/jacobi.orch";
  const std::string bin = compiled(src, &log);
  REQUIRE_MESSAGE(!bin.empty(), log);
  LoadedPipeline l = load_pipeline(bin);
  REQUIRE_MESSAGE(l.pipeline, l.error);
  const std::string orchc = orchc_path();
  const std::string dot = temp_dir() + "/jacobi.dot";
  REQUIRE(std::system(("'" + orchc + "' --emit=dot '" + src + "' > '" + dot + "'").c_str()) == 0);
  const std::string text = read_all(dot);
  std::set<std::string> checked;  // an unrolled loop's copies are their statement's, named alike
  const SiteTable t(*l.pipeline);
  for (const Site& s : t.sites()) {
    const NodeKind k = op_kind(*s.node);
    // Statements as written: the nodes orchc adds or fuses (conditions, scalar updates) are its own.
    if (s.generated || (k != NodeKind::Kernel && k != NodeKind::Memcpy && k != NodeKind::Memset))
      continue;
    CAPTURE(s.name);
    CHECK(text.find("[label=\"" + s.name + "\"") != std::string::npos);
    checked.insert(s.name);
  }
  CHECK(checked.size() == 8);  // 3 copies, 3 fills, 2 sweeps
}

namespace {

// CUDA as orch-run saw it on an H100 (driver 580.159.04, CUDA 13.0; tools/tests/cupti_logs.h): a
// node id is (graph id << 32 | the node's index), indices counted per graph from 0. The template
// is graph 1, each conditional body a graph of its own (2, 3, ...) made in the conditional's
// window before the conditional node itself. Instantiation clones graph 1 into graph 10 and names
// every top-level node's clone; a body node runs as (graph 10, n0 + its index), n0 the top-level
// graph's node count (one body: both orders agree).
struct FakeCuda {
  const SiteTable& t;
  NodeIds& ids;
  std::map<int, uint64_t> made;          // site: template node id
  std::map<std::pair<int, uint32_t>, uint32_t> bodies;  // (conditional site, body): graph id
  std::map<uint32_t, uint32_t> counted;  // graph: nodes made in it
  uint32_t next_graph = 2;
  bool ids_of_top = false;  // a body node's id names the top-level graph (1) and its counter, not its body's
  FakeCuda(const SiteTable& sites, NodeIds& node_ids) : t(sites), ids(node_ids) {}

  uint32_t graph_of(int site) const {
    const Site& s = t[site];
    return s.parent < 0 ? 1u : bodies.at({s.parent, s.body});
  }
  void build() {
    ids.graph_created(1);  // cudaGraphCreate, before the build phase
    ids.phase_begin(0, -1);
    std::vector<int> open;
    for (size_t i = 0; i < t.size(); ++i) {
      const Site& s = t[static_cast<int>(i)];
      while (!open.empty() && open.back() != s.parent) {
        ids.end(open.back(), made.at(open.back()));
        open.pop_back();
      }
      ids.begin(static_cast<int>(i));
      if (op_kind(*s.node) == NodeKind::Conditional)
        for (uint32_t b = 0; b < s.node->body_as_ConditionalOp()->bodies()->size(); ++b) {
          bodies[{static_cast<int>(i), b}] = next_graph;
          ids.graph_created(next_graph++);  // made with the conditional node, in its window
        }
      const uint32_t counter = ids_of_top ? 1u : graph_of(static_cast<int>(i));
      const uint64_t id = (uint64_t{ids_of_top ? 1u : graph_of(static_cast<int>(i))} << 32) | counted[counter]++;
      made[static_cast<int>(i)] = id;
      ids.created(id, graph_of(static_cast<int>(i)));
      open.push_back(static_cast<int>(i));
    }
    while (!open.empty()) {
      ids.end(open.back(), made.at(open.back()));
      open.pop_back();
    }
    ids.phase_end();
  }
  // Instantiation into exec 7 as the callbacks tell it: the top-level graph cloned into graph 10
  // with every top-level node's clone named; the bodies' nodes' clones never named.
  void instantiate(bool body_graph_cloned, bool body_graph_made) {
    ids.phase_begin(0, -1);
    ids.graph_cloned(1, 10);
    for (const auto& [site, id] : made)
      if (t[site].parent < 0) ids.cloned(id, (uint64_t{10} << 32) | static_cast<uint32_t>(id), 1, 10);
    if (body_graph_cloned) ids.graph_cloned(bodies.begin()->second, 45);
    if (body_graph_made) ids.graph_created(45);
    ids.exec_created(1, 7);
    ids.phase_end();
  }
  // The id an activity record carries for `site`: its clone in graph 10 for a top-level node; for
  // a body's node, (graph 10, top-level nodes + its index) as the exec numbers it, or with
  // `local`, (graph 45, its index in its body).
  uint64_t ran(int site, bool local = false) const {
    const uint32_t index = static_cast<uint32_t>(made.at(site));
    if (t[site].parent < 0) return (uint64_t{10} << 32) | index;
    if (local) return (uint64_t{45} << 32) | index;
    return (uint64_t{10} << 32) | (counted.at(1) + index);
  }
};

NodeRecord ran_record(NodeRecord::Kind kind, const std::string& name, uint64_t node, uint32_t graph, uint64_t start,
                      uint64_t end) {
  NodeRecord r = record(kind, name, node, start, end);
  r.graph_id = graph;
  return r;
}

}  // namespace

TEST_CASE("nodes of a while body whose clones CUDA never names: found by (graph, index) or exec index, each path") {
  LoadedPipeline l = compile_text("fills.orch", fills_orch());
  SiteTable t(*l.pipeline);
  const int top = site_named(t, "fill acc = 0.0  fills.orch:24:3");
  const int in_loop = site_named(t, "fill tmp = 0.0  fills.orch:27:5");
  const int step = site_named(t, "step<<<ceil_div(n, 256), 256>>>  fills.orch:28:5");
  using K = NodeRecord::Kind;
  struct Case {
    const char* what;
    bool body_graph_cloned, body_graph_made;
    uint32_t record_graph;  // the record's graphId
    bool local;             // a body node's record names graph 45 and its index in the body
    Via via;                // how a body node is found (None: not at all)
    bool ids_of_top = false;
  };
  for (const Case& c :
       {Case{"the body graph's clone is reported (GRAPH_CLONED)", true, false, 10, true, Via::GraphIndex},
        Case{"nothing said of the body's clone; the record names the exec", false, false, 7, false, Via::ExecIndex},
        Case{"the record names the top-level graph's clone (as on the H100)", false, false, 10, false, Via::ExecIndex},
        // A graph CUDA made during instantiation that no clone ties to the template (fills' graphs
        // 5 and 6 on the H100): its indices are its own, not the exec's.
        Case{"the record names a graph made during instantiation, unnamed", false, true, 45, true, Via::None},
        Case{"body nodes' ids name the top-level graph; the body's clone is reported", true, false, 10, true,
             Via::GraphIndex, true}}) {
    const std::string what = c.what;
    CAPTURE(what);
    NodeIds ids(&t);
    FakeCuda cuda(t, ids);
    cuda.ids_of_top = c.ids_of_top;
    cuda.build();
    cuda.instantiate(c.body_graph_cloned, c.body_graph_made);
    // The layout was checked on every node made and cloned (the top-level graph's 4); the body's
    // 3 nodes break it where their ids name the top-level graph.
    CHECK(ids.summary().find("node id = (id of the graph CUDA said made it) << 32 | index: held for " +
                             std::to_string(t.size() + 4 - (c.ids_of_top ? 3 : 0)) + " nodes, not for " +
                             (c.ids_of_top ? "3" : "0") + ";") != std::string::npos);
    // Top-level nodes: by the clones CUDA named.
    const NodeIds::Found f_top = ids.find(ran_record(K::Kernel, "memset32", cuda.ran(top), c.record_graph, 0, 1));
    CHECK(f_top.site == top);
    CHECK(f_top.via == Via::NodeId);
    // Body nodes: by index.
    const uint64_t fill_id = cuda.ran(in_loop, c.local), step_id = cuda.ran(step, c.local);
    const NodeIds::Found f_fill = ids.find(ran_record(K::Kernel, "memset32", fill_id, c.record_graph, 0, 1));
    CHECK(f_fill.site == (c.via == Via::None ? -1 : in_loop));
    CHECK(f_fill.via == c.via);
    const NodeIds::Found f_step = ids.find(ran_record(K::Kernel, "step", step_id, c.record_graph, 0, 1));
    CHECK(f_step.site == (c.via == Via::None ? -1 : step));
    CHECK(f_step.via == c.via);
    if (c.via == Via::ExecIndex) {
      CHECK(f_step.exec_index == 5);  // fill acc, fill i, the condition, the while; fill tmp, step
      CHECK(f_step.orders == (kBreadthFirst | kRecursive));
      CHECK(found_text(f_step) == "exec index 5, both orders");
    }
    // A record that cannot be the statement's work is not attributed, and says why.
    const NodeIds::Found f_odd = ids.find(ran_record(K::Kernel, "mystery", step_id, c.record_graph, 0, 1));
    CHECK(f_odd.site == -1);
    if (c.via != Via::None)
      CHECK(f_odd.why.find("names step<<<ceil_div(n, 256), 256>>>  fills.orch:28:5, which cannot run kernel mystery") !=
            std::string::npos);
    const NodeIds::Found f_copy = ids.find(ran_record(K::Memcpy, "", fill_id, c.record_graph, 0, 1));
    CHECK(f_copy.site == -1);
    // A graph nothing was said of, named by nothing: not attributed.
    CHECK(ids.find(ran_record(K::Kernel, "step", (uint64_t{99} << 32) | 5, 98, 0, 1)).site == -1);
    // Past the exec's nodes: nothing.
    CHECK(ids.find(ran_record(K::Kernel, "step", (uint64_t{10} << 32) | 7, 7, 0, 1)).site == -1);
  }
}

TEST_CASE("(graph, index) is not used where it is ambiguous or the id layout did not hold") {
  LoadedPipeline l = compile_text("fills.orch", fills_orch());
  SiteTable t(*l.pipeline);
  const int in_loop = site_named(t, "fill tmp = 0.0  fills.orch:27:5");
  const int top = site_named(t, "fill acc = 0.0  fills.orch:24:3");
  using K = NodeRecord::Kind;
  {
    // A body graph orch-run did not see made in any window (so not which node it is nested in):
    // the exec's indices past the top-level graph's own nodes cannot be numbered, and say so.
    NodeIds ids(&t);
    ids.phase_begin(0, -1);
    ids.begin(top);
    ids.created((uint64_t{1} << 32) | 0, 1);
    ids.end(top, (uint64_t{1} << 32) | 0);
    ids.begin(in_loop);
    ids.created((uint64_t{2} << 32) | 0, 2);
    ids.end(in_loop, (uint64_t{2} << 32) | 0);
    ids.graph_cloned(1, 45);
    ids.cloned((uint64_t{1} << 32) | 0, (uint64_t{45} << 32) | 0, 1, 45);
    ids.exec_created(1, 45);
    ids.phase_end();
    const NodeIds::Found f = ids.find(ran_record(K::Memset, "", (uint64_t{45} << 32) | 1, 45, 0, 1));
    CHECK(f.site == -1);
    CHECK(f.why ==
          "the exec's numbering of nested graphs is unknown here: graph 2 holds fill tmp = 0.0  fills.orch:27:5, but "
          "orch-run did not see which node it is nested in");
    CHECK(ids.exec_numbering().find("exec numbering of template graph 1: 1 top-level nodes (indices 0 to 0), 1 in all; "
                                    "past the top-level nodes unknown: graph 2 holds") == 0);
    // The top-level graph's own nodes still are (here found by their clone).
    CHECK(ids.find(ran_record(K::Memset, "", (uint64_t{45} << 32) | 0, 45, 0, 1)).site == top);
  }
  {
    // A node whose id's high half names no graph CUDA reported (ids of another layout) has no
    // index: nothing is found by it.
    NodeIds ids(&t);
    ids.begin(in_loop);
    ids.created((uint64_t{2} << 32) | 4, 2);
    ids.end(in_loop, (uint64_t{2} << 32) | 4);
    ids.begin(top);
    ids.created((uint64_t{9} << 32) | 0, 1);
    ids.end(top, (uint64_t{9} << 32) | 0);
    ids.graph_cloned(2, 45);
    ids.graph_cloned(1, 50);
    CHECK(ids.summary().find("held for 1 nodes, not for 1;") != std::string::npos);
    CHECK(ids.find(ran_record(K::Memset, "", (uint64_t{45} << 32) | 4, 45, 0, 1)).site == in_loop);
    CHECK(ids.find(ran_record(K::Memset, "", (uint64_t{45} << 32) | 4, 0, 0, 1)).site == in_loop);  // by the high half
    CHECK(ids.find(ran_record(K::Kernel, "memset32", (uint64_t{50} << 32) | 0, 50, 0, 1)).site == -1);
  }
  {
    // Body nodes whose graph CUDA never named (no graph in their callbacks): where the layout
    // held for every node that had one, their ids' halves still give graph and index.
    const int loop = t[in_loop].parent;
    NodeIds ids(&t);
    ids.phase_begin(0, -1);
    ids.begin(top);
    ids.created((uint64_t{1} << 32) | 0, 1);
    ids.end(top, (uint64_t{1} << 32) | 0);
    ids.begin(loop);
    ids.graph_created(2);
    ids.created((uint64_t{1} << 32) | 1, 1);
    ids.begin(in_loop);
    ids.created((uint64_t{2} << 32) | 0);
    ids.end(in_loop, (uint64_t{2} << 32) | 0);
    ids.end(loop, (uint64_t{1} << 32) | 1);
    ids.phase_end();
    ids.phase_begin(0, -1);
    ids.exec_created(1, 7);
    ids.phase_end();
    const NodeIds::Found f = ids.find(ran_record(K::Memset, "", (uint64_t{45} << 32) | 2, 7, 0, 1));
    CHECK(f.site == in_loop);
    CHECK(f.via == Via::ExecIndex);
  }
  {
    // Without the sites, nothing is checked against a statement's kind, and no top-level index.
    NodeIds ids;
    ids.created((uint64_t{2} << 32) | 4, 2);
    ids.add((uint64_t{2} << 32) | 4, 3);
    ids.graph_cloned(2, 45);
    const NodeIds::Found f = ids.find(ran_record(K::Kernel, "anything", (uint64_t{45} << 32) | 4, 0, 0, 1));
    CHECK(f.site == 3);
    CHECK(f.via == Via::GraphIndex);
  }
}

TEST_CASE("a collective's captured graph is the collective's, through every clone CUDA reports") {
  LoadedPipeline l = compile_text("reduce.orch", reduce_orch());
  SiteTable t(*l.pipeline);
  REQUIRE(t.size() == 2);
  const int twice = site_named(t, "twice<<<ceil_div(n, 256), 256>>>  reduce.orch:15:3");
  const int reduce = site_named(t, "allreduce sum s -> r on world  reduce.orch:16:3");
  using K = NodeRecord::Kind;
  NodeIds ids(&t);
  ids.graph_created(1);
  ids.phase_begin(0, -1);
  ids.begin(twice);
  ids.created((uint64_t{1} << 32) | 0, 1);
  ids.end(twice, (uint64_t{1} << 32) | 0);
  ids.begin(reduce);
  ids.graph_created(20);  // NCCL's stream capture
  ids.created((uint64_t{20} << 32) | 0, 20);
  ids.graph_cloned(20, 21);  // cudaGraphAddChildGraphNode embeds a clone
  ids.cloned((uint64_t{20} << 32) | 0, (uint64_t{21} << 32) | 0, 20, 21);
  ids.created((uint64_t{1} << 32) | 1, 1);
  ids.end(reduce, (uint64_t{1} << 32) | 1);
  ids.phase_end();
  ids.phase_begin(0, -1);
  ids.graph_cloned(21, 30);  // instantiation clones the child graph, its nodes' clones unnamed
  ids.exec_created(1, 7);
  ids.phase_end();
  const NodeIds::Found f = ids.find(ran_record(K::Kernel, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", (uint64_t{30} << 32) | 0, 7, 0, 1));
  CHECK(f.site == reduce);
  CHECK(f.via == Via::Graph);
  // The child graph's nodes as the observer walks them (add, add_graph) are found too.
  NodeIds walked(&t);
  walked.add((uint64_t{21} << 32) | 0, reduce);
  walked.add_graph(21, reduce);
  walked.graph_cloned(21, 31);
  CHECK(walked.find(ran_record(K::Memcpy, "", (uint64_t{31} << 32) | 2, 31, 0, 1)).site == reduce);
  // Nodes of the top-level graph are not the collective's.
  CHECK(ids.find(ran_record(K::Kernel, "twice", (uint64_t{1} << 32) | 0, 7, 0, 1)).site == twice);
}

TEST_CASE("work outside the graphs (graph node 0) is no pipeline node: left out of the table, counted") {
  LoadedPipeline l = compile_text("fills.orch", fills_orch());
  SiteTable t(*l.pipeline);
  NodeIds ids(&t);
  FakeCuda cuda(t, ids);
  cuda.build();
  cuda.instantiate(false, false);
  const int step = site_named(t, "step<<<ceil_div(n, 256), 256>>>  fills.orch:28:5");
  using K = NodeRecord::Kind;
  NodeRecord status = record(K::Memcpy, "", 0, 9000, 10400);
  status.bytes = 16;
  status.copy_kind = 2;
  std::vector<std::vector<NodeRecord>> launches = {
      {ran_record(K::Kernel, "step", cuda.ran(step), 7, 1000, 2000), status},
      {ran_record(K::Kernel, "step", cuda.ran(step), 7, 11000, 12000), status}};
  launches[1][1].start_ns = 19000;
  launches[1][1].end_ns = 20400;
  const Attribution a = attribute(launches, ids);
  REQUIRE(a.records.size() == 2);
  CHECK(a.records[0].site == step);
  CHECK(a.records[0].via == Via::ExecIndex);
  CHECK(a.records[0].how == "exec index 5, both orders");  // the trace's "found by"
  REQUIRE(a.outside.size() == 2);
  CHECK(a.outside[1].launch == 1);
  const std::string table = format_node_table(t, node_rows(a), summarize({0.01}), 2, a.outside);
  INFO(table);
  CHECK(table.find("not attributed") == std::string::npos);
  CHECK(table.find("memcpy 16 B DtoH: ") == std::string::npos);
  CHECK(table.find("  not shown: 2 records of work outside the pipeline's graphs (orch-run's and the runtime's own "
                   "copies around the launches, such as reading the device status): memcpy 16 B DtoH x2\n") !=
        std::string::npos);
  CHECK(table.find("1 nodes; their medians sum to 1.0 us") != std::string::npos);
  // ORCH_RUN_CUPTI_DEBUG's lines: every record, how it was found.
  const std::string lines = describe_records(launches[0], 0, ids, t);
  CHECK(lines.find("[orch-run cupti] record: launch 1 kernel step graph 7 node " + node_id_text(cuda.ran(step)) +
                   " stream 0 1.0 us -> step<<<ceil_div(n, 256), 256>>>  fills.orch:28:5 [exec index 5, both orders]\n") !=
        std::string::npos);
  CHECK(lines.find("memcpy 16 B DtoH graph 0 node 0 stream 0 1.4 us -> outside the pipeline's graphs\n") !=
        std::string::npos);
  CHECK(node_id_text((uint64_t{45} << 32) | 4) == "193273528324 (graph 45, index 4)");
  CHECK(node_id_text(77) == "77");
}

namespace {

uint64_t bytes_of(const std::string& number, const std::string& unit) {
  const double v = std::stod(number);
  return static_cast<uint64_t>(v * (unit == "KiB" ? 1024.0 : unit == "MiB" ? 1048576.0 : 1.0));
}

// Replays an ORCH_RUN_CUPTI_DEBUG log (tools/tests/cupti_logs.h) into `ids` as cupti.cpp's
// callbacks and observer did (the lines they print are what they were told), checking that each
// site the log names is the table's; returns the activity records. `walked_parent`: a child graph
// the observer walked is tied to the node the runtime made (as orch-run does now; the logged
// build did not yet), else left to the window it was made in.
std::vector<NodeRecord> replay(const std::string& log, const SiteTable& t, NodeIds& ids, bool walked_parent) {
  std::vector<NodeRecord> records;
  std::vector<std::pair<uint32_t, int>> walked;  // (child graph, site) until the node's id is known
  uint64_t clock = 1000;
  const std::regex begin_re(R"(node_begin site (\d+) \((.*)\))"),
      end_re(R"(node_end site (\d+) \((.*)\) made node (\d+).*)"), graph_re(R"(GRAPH_CREATED: graph (\d+) window.*)"),
      node_re(R"(GRAPHNODE_CREATED: graph (\d+) node (\d+) .*)"),
      clone_re(R"(GRAPHNODE_CLONED: graph (\d+) original graph (\d+) node (\d+) .* original node (\d+) .*)"),
      exec_re(R"(GRAPHEXEC_CREATED: graph (\d+) exec (\d+) .*)"), phase_re(R"(phase \w+ of graph (\d+) (begins|ends))"),
      child_re(R"(child graph (\d+) of site (\d+) .*)"), child_node_re(R"(child graph node (\d+) .* of site (\d+) .*)"),
      record_re(R"(record: launch 1 (kernel (\S+)|memset ([\d.]+) (\w+)|memcpy ([\d.]+) (\w+) (\w+)) graph (\d+) node (\d+)(?: \(graph \d+, index \d+\))? stream (\d+) ([\d.]+) us -> .*)");
  std::istringstream in(log);
  int lines = 0;
  for (std::string line; std::getline(in, line);) {
    const std::string prefix = "[orch-run cupti] ";
    if (line.empty()) continue;
    REQUIRE(line.rfind(prefix, 0) == 0);
    const std::string l = line.substr(prefix.size());
    std::smatch m;
    ++lines;
    auto u64 = [&](int i) { return static_cast<uint64_t>(std::stoull(m[i].str())); };
    auto u32 = [&](int i) { return static_cast<uint32_t>(std::stoul(m[i].str())); };
    if (std::regex_match(l, m, begin_re)) {
      REQUIRE(t[static_cast<int>(u32(1))].name == m[2].str());
      ids.begin(static_cast<int>(u32(1)));
    } else if (std::regex_match(l, m, end_re)) {
      REQUIRE(t[static_cast<int>(u32(1))].name == m[2].str());
      for (const auto& [g, site] : walked) ids.add_graph(g, site, u64(3));
      walked.clear();
      ids.end(static_cast<int>(u32(1)), u64(3));
    } else if (std::regex_match(l, m, graph_re)) {
      ids.graph_created(u32(1));
    } else if (std::regex_match(l, m, node_re)) {
      ids.created(u64(2), u32(1));
    } else if (std::regex_match(l, m, clone_re)) {
      ids.cloned(u64(4), u64(3), u32(2), u32(1));
    } else if (std::regex_match(l, m, exec_re)) {
      ids.exec_created(u32(1), u32(2));
    } else if (std::regex_match(l, m, phase_re)) {
      if (m[2] == "begins")
        ids.phase_begin(static_cast<int>(u32(1)), -1);
      else
        ids.phase_end();
    } else if (std::regex_match(l, m, child_node_re)) {
      ids.add(u64(1), static_cast<int>(u32(2)));
    } else if (std::regex_match(l, m, child_re)) {
      if (walked_parent)
        walked.emplace_back(u32(1), static_cast<int>(u32(2)));
      else
        ids.add_graph(u32(1), static_cast<int>(u32(2)));
    } else if (std::regex_match(l, m, record_re)) {
      NodeRecord r;
      if (m[2].matched) {
        r.kind = NodeRecord::Kind::Kernel;
        r.name = m[2];
      } else if (m[3].matched) {
        r.kind = NodeRecord::Kind::Memset;
        r.bytes = bytes_of(m[3], m[4]);
      } else {
        r.kind = NodeRecord::Kind::Memcpy;
        r.bytes = bytes_of(m[5], m[6]);
        r.copy_kind = m[7] == "HtoD" ? 1 : m[7] == "DtoH" ? 2 : m[7] == "DtoD" ? 8 : 0;
      }
      r.graph_id = u32(8);
      r.node_id = u64(9);
      r.stream_id = u32(10);
      r.start_ns = clock;
      r.end_ns = clock + static_cast<uint64_t>(std::stod(m[11]) * 1000.0);
      clock += 10000;
      records.push_back(r);
    }
    // Everything else (the destroy callbacks, GRAPHEXEC_CREATE_STARTING): only printed.
  }
  REQUIRE(lines > 20);
  return records;
}

}  // namespace

TEST_CASE("the H100's logs replayed: every record of fills, jacobi and a one-rank allreduce attributed") {
  struct Case {
    const char* name;
    std::string source;
    const char* log;
    size_t records;
    std::map<uint32_t, std::string> nested;  // exec index: the statement found by it
  };
  const std::string jacobi = examples_dir() + "/jacobi.orch";
  const std::vector<Case> cases = {
      {"fills", write_temp("fills.orch", fills_orch()), kFillsLog, 13,
       // The while body after the top-level graph's 4 nodes.
       {{4, "fill tmp = 0.0  fills.orch:27:5"},
        {5, "step<<<ceil_div(n, 256), 256>>>  fills.orch:28:5"},
        {6, "orch_condition_1<<<1, 1>>>  fills.orch:26:3"}}},
      {"jacobi", jacobi, kJacobiLog, 19,
       // After all 7 top-level nodes, the copy after the while (index 6) included.
       {{7, "fill residual = 0.0  jacobi.orch:26:5"},
        {8, "sweep<<<ceil_div(n, 256), 256>>>  jacobi.orch:27:5"},
        {9, "sweep<<<ceil_div(n, 256), 256>>>  jacobi.orch:28:5"},
        {10, "orch_condition_1<<<1, 1>>>  jacobi.orch:25:3"}}},
      {"reduce", write_temp("reduce.orch", reduce_orch()), kReduceLog, 2,
       // The child graph's captured copy after the kernel and the child graph node.
       {{2, "allreduce sum s -> r on world  reduce.orch:16:3"}}},
  };
  for (const Case& c : cases)
    for (const bool walked : {false, true}) {
      CAPTURE(c.name);
      CAPTURE(walked);
      std::string log;
      const std::string bin = compiled(c.source, &log, kPlain);
      REQUIRE_MESSAGE(!bin.empty(), log);
      LoadedPipeline l = load_pipeline(bin);
      REQUIRE_MESSAGE(l.pipeline, l.error);
      SiteTable t(*l.pipeline);
      NodeIds ids(&t);
      const std::vector<NodeRecord> records = replay(c.log, t, ids, walked);
      REQUIRE(records.size() == c.records);
      INFO(ids.summary());
      INFO(ids.exec_numbering());
      size_t nested = 0;
      for (const NodeRecord& r : records) {
        CAPTURE(node_id_text(r.node_id));
        CAPTURE(r.name);
        if (outside_graphs(r)) continue;
        const NodeIds::Found f = ids.find(r);
        REQUIRE_MESSAGE(f.site >= 0, f.why);
        const auto it = c.nested.find(static_cast<uint32_t>(r.node_id));
        if (it == c.nested.end()) {
          CHECK(f.via == Via::NodeId);  // a top-level node: its clone CUDA named
          continue;
        }
        ++nested;
        CHECK(t[f.site].name == it->second);
        CHECK(f.via == Via::ExecIndex);
        CHECK(f.exec_index == it->first);
        CHECK(f.orders == (kBreadthFirst | kRecursive));  // one nested graph: both orders agree
      }
      CHECK(nested > 0);
      // Every record attributed in the debug lines too, none guessed.
      const std::string lines = describe_records(records, 0, ids, t);
      CHECK(lines.find("not attributed") == std::string::npos);
      if (std::string(c.name) == "fills") {
        CHECK(lines.find("[orch-run cupti] record: launch 1 kernel step graph 3 node 12884901893 (graph 3, index 5) stream "
                         "16 1.9 us -> step<<<ceil_div(n, 256), 256>>>  fills.orch:28:5 [exec index 5, both orders]\n") !=
              std::string::npos);
        CHECK(lines.find("[orch-run cupti] record: launch 1 memset 16.0 KiB graph 3 node 12884901888 (graph 3, index 0) "
                         "stream 13 0.8 us -> fill acc = 0.0  fills.orch:24:3 [node id]\n") != std::string::npos);
        CHECK(ids.exec_numbering().find("exec numbering of template graph 1: 4 top-level nodes (indices 0 to 3), 7 in "
                                        "all\n  index 4: breadth-first 8589934592 (graph 2, index 0) fill tmp = 0.0  "
                                        "fills.orch:27:5 (both orders)\n") == 0);
      }
      if (std::string(c.name) == "reduce")  // the capture (graph 2) is not nested; its clone (3) is
        CHECK(ids.exec_numbering().find("exec numbering of template graph 1: 2 top-level nodes (indices 0 to 1), 3 in "
                                        "all\n  index 2: breadth-first 12884901888 (graph 3, index 0) allreduce") == 0);
      // A record past what the exec numbers, or of a kind its statement cannot run: nothing.
      NodeRecord past = records[0];
      past.node_id = (past.node_id & ~uint64_t{0xffffffff}) | 99;
      CHECK(ids.find(past).site == -1);
    }
}

namespace {

// Two sibling `if`s, each with an `if` nested in its body and a kernel after it: the pipeline of
// the GPU probe that tells which order CUDA numbers nested graphs in (nested_orch()), or with
// `same`, one where every statement in the bodies runs one kernel (no kind check tells them apart).
std::string nested_text(bool same) {
  if (!same) return nested_orch();
  std::string text = R"(pipeline nested_same
target sm_90
param n: u32 = 4096
param go: u32 = 1
kernel k(n: u32, a: in f32[], b: out f32[]) source """
extern "C" __global__ void k(unsigned n, const float* a, float* b) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) b[i] = a[i] + 1.0f;
}
"""
)";
  for (const char* b : {"x", "ya", "za", "wa", "yb", "zb", "wb"}) text += std::string("buffer ") + b + ": f32[n]\n";
  auto call = [](const char* a, const char* b) { return std::string("k<<<ceil_div(n, 256), 256>>>(n, ") + a + ", " + b + ")\n"; };
  return text + "graph main {\n  if go == 1 {\n    " + call("x", "ya") + "    if go != 0 {\n      " + call("ya", "za") +
         "    }\n    " + call("za", "wa") + "  }\n  if go > 0 {\n    " + call("x", "yb") + "    if go < 2 {\n      " +
         call("yb", "zb") + "    }\n    " + call("zb", "wb") + "  }\n}\n";
}

// Builds and instantiates `t` as CUDA did on the H100 (graph 1 the template, a body graph per
// conditional made in its window, indices per graph; the top-level nodes cloned into graph 100,
// exec 100) and returns every site's exec index under `order`: the top-level nodes, then the
// nested graphs breadth-first or recursively.
std::map<int, uint32_t> build_nested(const SiteTable& t, NodeIds& ids, ExecOrder order) {
  std::map<int, uint64_t> made;
  std::map<int, uint32_t> graph_of;                  // site: graph
  std::map<uint32_t, std::vector<int>> nodes;        // graph: sites in index order
  std::map<int, std::vector<uint32_t>> bodies;       // conditional site: its graphs
  uint32_t next = 2;
  ids.graph_created(1);
  ids.phase_begin(0, -1);
  std::function<void(uint32_t, int)> build = [&](uint32_t g, int parent) {
    for (size_t i = 0; i < t.size(); ++i) {
      const int s = static_cast<int>(i);
      if (t[s].parent != parent || (parent >= 0 && bodies[parent][t[s].body] != g)) continue;
      ids.begin(s);
      if (op_kind(*t[s].node) == NodeKind::Conditional)
        for (uint32_t b = 0; b < t[s].node->body_as_ConditionalOp()->bodies()->size(); ++b) {
          bodies[s].push_back(next);
          ids.graph_created(next++);
        }
      const uint64_t id = (uint64_t{g} << 32) | nodes[g].size();
      nodes[g].push_back(s);
      graph_of[s] = g;
      made[s] = id;
      ids.created(id, g);
      for (uint32_t body : bodies[s]) build(body, s);
      ids.end(s, id);
    }
  };
  build(1, -1);
  ids.phase_end();
  ids.phase_begin(0, -1);
  ids.graph_created(100);
  for (size_t i = 0; i < nodes[1].size(); ++i) {
    const uint64_t clone = (uint64_t{100} << 32) | i;
    ids.created(clone, 100);
    ids.cloned(made[nodes[1][i]], clone, 1, 100);
  }
  ids.exec_created(1, 100);
  ids.phase_end();
  std::vector<uint32_t> flat;
  std::function<void(uint32_t)> recurse = [&](uint32_t g) {
    flat.push_back(g);
    for (int s : nodes[g])
      for (uint32_t b : bodies[s]) recurse(b);
  };
  if (order == kRecursive) {
    recurse(1);
  } else {
    flat.push_back(1);
    for (size_t i = 0; i < flat.size(); ++i)
      for (int s : nodes[flat[i]])
        for (uint32_t b : bodies[s]) flat.push_back(b);
  }
  std::map<int, uint32_t> index;
  uint32_t k = 0;
  for (uint32_t g : flat)
    for (int s : nodes[g]) index[s] = k++;
  return index;
}

}  // namespace

TEST_CASE("sibling bodies with nested bodies: the two orders diverge; the kind check decides or nothing is found") {
  using K = NodeRecord::Kind;
  for (const bool same : {false, true})
    for (const ExecOrder truth : {kBreadthFirst, kRecursive}) {
      CAPTURE(same);
      CAPTURE(static_cast<int>(truth));
      LoadedPipeline l = compile_text(same ? "nested_same.orch" : "nested.orch", nested_text(same));  // (compiled() caches by path)
      SiteTable t(*l.pipeline);
      NodeIds ids(&t);
      const std::map<int, uint32_t> index = build_nested(t, ids, truth);
      const std::map<int, uint32_t> other = [&] {
        NodeIds scratch(&t);
        return build_nested(t, scratch, truth == kBreadthFirst ? kRecursive : kBreadthFirst);
      }();
      INFO(ids.exec_numbering());
      REQUIRE(index.size() == 14);  // 2 conditions and 2 ifs at the top; per body a kernel, a condition, an if, a kernel; 2 nested kernels
      size_t differ = 0, decided = 0, ambiguous = 0;
      for (const auto& [site, k] : index) {
        const Site& s = t[site];
        if (op_kind(*s.node) != NodeKind::Kernel) continue;  // conditional nodes run nothing
        CAPTURE(s.name);
        const NodeIds::Found f = ids.find(ran_record(K::Kernel, s.kernel_symbol, (uint64_t{100} << 32) | k, 100, 0, 1));
        if (s.parent < 0) {
          CHECK(f.via == Via::NodeId);
          continue;
        }
        // Which statement each order puts at this index.
        int in_other = -1;
        for (const auto& [o, ko] : other)
          if (ko == k) in_other = o;
        REQUIRE(in_other >= 0);
        const bool agree = in_other == site;
        differ += !agree;
        const bool other_fits = op_kind(*t[in_other].node) == NodeKind::Kernel &&
                                t[in_other].kernel_symbol == s.kernel_symbol;
        if (agree || !other_fits) {
          REQUIRE_MESSAGE(f.site == site, f.why);
          CHECK(f.via == Via::ExecIndex);
          CHECK(f.exec_index == k);
          CHECK(f.orders == (agree ? (kBreadthFirst | kRecursive) : truth));
          decided += !agree;
        } else {
          // Both orders name a node that can run it: no guess, and the candidates said.
          CHECK(f.site == -1);
          CHECK(f.why.find("the exec's numbering of nested graphs is ambiguous here (its exec index " +
                           std::to_string(k) + "; candidates: breadth-first ") == 0);
          CHECK(f.why.find(s.name) != std::string::npos);
          CHECK(f.why.find(t[in_other].name) != std::string::npos);
          ++ambiguous;
        }
      }
      CHECK(differ > 0);
      if (same) {
        CHECK(ambiguous > 0);  // k against k
        CHECK(decided > 0);    // k against a condition kernel
      } else {
        CHECK(ambiguous == 0);  // every kernel its own
        CHECK(decided == differ);
      }
      // A record whose kernel neither candidate runs: not attributed, both candidates named.
      uint32_t k_differ = 0;
      for (const auto& [site, k] : index)
        if (t[site].parent >= 0 && other.at(site) != k) k_differ = k;
      const NodeIds::Found none = ids.find(ran_record(K::Kernel, "mystery", (uint64_t{100} << 32) | k_differ, 100, 0, 1));
      CHECK(none.site == -1);
      CHECK(none.why.find("neither can run kernel mystery") != std::string::npos);
    }
  // Without the sites there is no kind check: where the orders differ, nothing is found.
  LoadedPipeline l = compile_text("nested.orch", nested_text(false));
  SiteTable t(*l.pipeline);
  NodeIds ids;
  const std::map<int, uint32_t> index = build_nested(t, ids, kBreadthFirst);
  NodeIds scratch(&t);
  const std::map<int, uint32_t> rec = build_nested(t, scratch, kRecursive);
  for (const auto& [site, k] : index) {
    if (t[site].parent < 0) continue;
    const NodeIds::Found f = ids.find(ran_record(K::Kernel, "any", (uint64_t{100} << 32) | k, 100, 0, 1));
    CAPTURE(t[site].name);
    if (rec.at(site) == k) {
      CHECK(f.site == site);
    } else {
      CHECK(f.site == -1);
      CHECK(f.why.find("ambiguous") != std::string::npos);
    }
  }
}

TEST_CASE("a collective's child graph: numbered after the top-level nodes through the node walked, or its window") {
  LoadedPipeline l = compile_text("reduce.orch", reduce_orch());
  SiteTable t(*l.pipeline);
  const int twice = site_named(t, "twice<<<ceil_div(n, 256), 256>>>  reduce.orch:15:3");
  const int reduce = site_named(t, "allreduce sum s -> r on world  reduce.orch:16:3");
  using K = NodeRecord::Kind;
  for (const bool walked : {false, true}) {
    CAPTURE(walked);
    NodeIds ids(&t);
    ids.graph_created(1);
    ids.phase_begin(0, -1);
    ids.begin(twice);
    ids.created((uint64_t{1} << 32) | 0, 1);
    ids.end(twice, (uint64_t{1} << 32) | 0);
    ids.begin(reduce);
    ids.graph_created(2);  // NCCL's capture: two kernels here
    ids.created((uint64_t{2} << 32) | 0, 2);
    ids.created((uint64_t{2} << 32) | 1, 2);
    ids.graph_created(3);  // the child graph node's copy, its nodes clones of the capture's
    ids.created((uint64_t{3} << 32) | 0, 3);
    ids.cloned((uint64_t{2} << 32) | 0, (uint64_t{3} << 32) | 0, 2, 3);
    ids.created((uint64_t{3} << 32) | 1, 3);
    ids.cloned((uint64_t{2} << 32) | 1, (uint64_t{3} << 32) | 1, 2, 3);
    ids.created((uint64_t{1} << 32) | 1, 1);
    if (walked) ids.add_graph(3, reduce, (uint64_t{1} << 32) | 1);
    ids.end(reduce, (uint64_t{1} << 32) | 1);
    ids.phase_end();
    ids.phase_begin(0, -1);
    ids.graph_created(4);
    ids.cloned((uint64_t{1} << 32) | 0, (uint64_t{4} << 32) | 0, 1, 4);
    ids.cloned((uint64_t{1} << 32) | 1, (uint64_t{4} << 32) | 1, 1, 4);
    ids.exec_created(1, 4);
    ids.phase_end();
    INFO(ids.exec_numbering());
    for (uint32_t k : {2u, 3u}) {
      const NodeIds::Found f =
          ids.find(ran_record(K::Kernel, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", (uint64_t{4} << 32) | k, 4, 0, 1));
      CHECK(f.site == reduce);
      CHECK(f.via == Via::ExecIndex);
    }
    CHECK(ids.find(ran_record(K::Kernel, "x", (uint64_t{4} << 32) | 4, 4, 0, 1)).site == -1);  // 4 nodes in all
  }
}

TEST_CASE("an if with an else: one node, two bodies; the else body's nodes after the then body's") {
  LoadedPipeline l = compile_text("branches.orch", R"(pipeline branches
target sm_90
param n: u32 = 4096
param go: u32 = 1
buffer x: f32[n]
buffer y: f32[n]
buffer z: f32[n]
kernel p(n: u32, a: in f32[], b: out f32[]) source """
extern "C" __global__ void p(unsigned n, const float* a, float* b) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) b[i] = a[i] + 1.0f;
}
"""
kernel q(n: u32, a: in f32[], b: out f32[]) source """
extern "C" __global__ void q(unsigned n, const float* a, float* b) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) b[i] = a[i] * 2.0f;
}
"""
graph main {
  if go == 1 {
    p<<<ceil_div(n, 256), 256>>>(n, x, y)
  } else {
    q<<<ceil_div(n, 256), 256>>>(n, x, y)
    p<<<ceil_div(n, 256), 256>>>(n, y, z)
  }
  q<<<ceil_div(n, 256), 256>>>(n, y, z)
}
)");
  SiteTable t(*l.pipeline);
  NodeIds ids(&t);
  const std::map<int, uint32_t> index = build_nested(t, ids, kBreadthFirst);
  NodeIds scratch(&t);
  CHECK(build_nested(t, scratch, kRecursive) == index);  // one level: the orders agree
  INFO(ids.exec_numbering());
  const int then_p = site_named(t, "p<<<ceil_div(n, 256), 256>>>  branches.orch:22:5");
  const int else_q = site_named(t, "q<<<ceil_div(n, 256), 256>>>  branches.orch:24:5");
  const int else_p = site_named(t, "p<<<ceil_div(n, 256), 256>>>  branches.orch:25:5");
  // The condition, the if and the last q at the top (0 to 2); then the then body, then the else.
  CHECK(index.at(then_p) == 3);
  CHECK(index.at(else_q) == 4);
  CHECK(index.at(else_p) == 5);
  for (const int s : {then_p, else_q, else_p}) {
    const NodeIds::Found f =
        ids.find(ran_record(NodeRecord::Kind::Kernel, t[s].kernel_symbol, (uint64_t{100} << 32) | index.at(s), 100, 0, 1));
    CHECK(f.site == s);
    CHECK(found_text(f) == "exec index " + std::to_string(index.at(s)) + ", both orders");
  }
}

TEST_CASE("--profile: one node per statement, the unrolled copies and orchc's kernels of a statement together") {
  // The fills' loop unrolled 8 times: copies 2-8 of `fill tmp = 0` are kernels orchc writes and
  // those of `step` guarded variants of it; all of them are their statements' nodes.
  std::string log;
  const std::string bin = compiled(write_temp("fills_profile.orch", fills_orch()), &log, "--unroll 8");
  REQUIRE_MESSAGE(!bin.empty(), log);
  LoadedPipeline l = load_pipeline(bin);
  REQUIRE_MESSAGE(l.pipeline, l.error);
  SiteTable t(*l.pipeline);
  NodeIds ids;
  build_and_instantiate(t, ids);
  using K = NodeRecord::Kind;
  // Every site runs once per launch, two launches: kernels with a launch shape that grows with
  // the copy (the largest is kept), copies and memsets with bytes.
  std::vector<std::vector<NodeRecord>> launches(2);
  int step_sites = 0, tmp_sites = 0;
  for (uint32_t launch = 0; launch < 2; ++launch)
    for (size_t i = 0; i < t.size(); ++i) {
      const Site& site = t[static_cast<int>(i)];
      if (op_kind(*site.node) == NodeKind::Conditional) continue;
      const bool kernel = op_kind(*site.node) == NodeKind::Kernel;
      NodeRecord r = record(kernel ? K::Kernel : op_kind(*site.node) == NodeKind::Memset ? K::Memset : K::Memcpy,
                            kernel ? site.kernel_symbol : "", 1000 + i, 10000 * launch + 100 * i,
                            10000 * launch + 100 * i + 10 + i + launch);
      if (kernel) {
        r.grid[0] = 16 + static_cast<uint32_t>(i);
        r.grid[1] = r.grid[2] = 1;
        r.block[0] = 256;
        r.block[1] = r.block[2] = 1;
        r.registers = 10 + static_cast<uint32_t>(i);
        r.dynamic_shared_bytes = 64;
      } else {
        r.bytes = 4 * (i + 1);
      }
      launches[launch].push_back(r);
      if (launch == 0 && site.line == 28) ++step_sites;
      if (launch == 0 && site.line == 27) ++tmp_sites;
    }
  CHECK(step_sites == 8);
  CHECK(tmp_sites == 8);
  const Attribution a = attribute(launches, ids);
  orch::lowering::Profile p;
  add_profile_nodes(t, a, &p);
  auto node = [&](uint32_t line, const std::string& kernel) -> const orch::lowering::ProfileNode& {
    for (const auto& n : p.nodes)
      if (n.line == line && n.kernel == kernel) return n;
    FAIL("no node at line " << line << " for kernel `" << kernel << "`");
    return p.nodes.front();
  };
  // The statements: two top-level fills, the while's condition kernels, and the body's three.
  std::set<std::pair<uint32_t, std::string>> keys;
  for (const auto& n : p.nodes) {
    CHECK(orch::lowering::file_name(n.file) == "fills_profile.orch");
    keys.emplace(n.line, n.kernel);
  }
  CHECK(keys == std::set<std::pair<uint32_t, std::string>>{
                    {24, ""}, {25, ""}, {26, ""}, {27, ""}, {28, "step"}, {29, ""}});
  const auto& step = node(28, "step");
  CHECK(step.column == 5);
  CHECK(step.what == "step<<<ceil_div(n, 256), 256>>>");
  CHECK(step.launches == 16);  // 8 copies, 2 launches
  REQUIRE(step.launch);
  CHECK(step.launch->threads() == 256);
  CHECK(step.launch->dynamic_shared_bytes == 64);
  CHECK(step.min_ns <= step.median_ns);
  // The largest grid and registers of its copies.
  uint32_t most = 0;
  for (size_t i = 0; i < t.size(); ++i)
    if (t[static_cast<int>(i)].line == 28) most = std::max(most, 16 + static_cast<uint32_t>(i));
  CHECK(step.launch->grid[0] == most);
  CHECK(step.launch->registers == most - 6);
  const auto& tmp = node(27, "");
  CHECK(tmp.launches == 16);
  CHECK(tmp.what == "fill tmp = 0.0");
  // The profile as written reads back, with those nodes.
  p.device = "test";
  p.sms = 1;
  p.compute_capability = 90;
  p.pipeline = "fills";
  orch::lowering::ProfileError error;
  const auto back = orch::lowering::parse_profile(orch::lowering::profile_json(p), &error);
  REQUIRE_MESSAGE(back, error.message);
  CHECK(back->nodes.size() == p.nodes.size());
}
