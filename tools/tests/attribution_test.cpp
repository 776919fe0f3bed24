// Attribution without a GPU: the sites of compiled pipelines, CUPTI-style node ids learned as the
// runtime builds its graphs (created, cloned) and activity records attributed through them; the
// --nodes table, including the fill that issue 13 found misattributed.
#include <doctest/doctest.h>

#include <cstdlib>
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
  int checked = 0;
  const SiteTable t(*l.pipeline);
  for (const Site& s : t.sites()) {
    const orch::fb::NodeKind k = s.node->kind();
    // Statements as written: the nodes orchc adds or fuses (conditions, scalar updates) are its own.
    if (s.generated || (k != orch::fb::NodeKind::Kernel && k != orch::fb::NodeKind::Memcpy && k != orch::fb::NodeKind::Memset))
      continue;
    CAPTURE(s.name);
    CHECK(text.find("[label=\"" + s.name + "\"") != std::string::npos);
    ++checked;
  }
  CHECK(checked == 8);  // 3 copies, 3 fills, 2 sweeps
}

namespace {

// CUDA as orch-run saw it on an H100 (driver 580, CUDA 13.0): a node id is (graph id << 32 |
// the node's index), indices counted per top-level graph with its conditional bodies' nodes
// after the nodes made before them (fills: 0..3 at the top, 4..6 in the while body). The
// template is graph 1, each conditional body a graph of its own (2, 3, ...).
struct FakeCuda {
  const SiteTable& t;
  NodeIds& ids;
  std::map<int, uint64_t> made;          // site: template node id
  std::map<std::pair<int, uint32_t>, uint32_t> bodies;  // (conditional site, body): graph id
  uint32_t next_graph = 2;
  bool ids_of_top = false;  // a body node's id names the top-level graph (1), not its body's
  FakeCuda(const SiteTable& sites, NodeIds& node_ids) : t(sites), ids(node_ids) {}

  uint32_t graph_of(int site) const {
    const Site& s = t[site];
    return s.parent < 0 ? 1u : bodies.at({s.parent, s.body});
  }
  void build() {
    ids.graph_created(1);  // cudaGraphCreate, before the build phase
    ids.phase_begin(0, -1);
    uint32_t index = 0;
    std::vector<int> open;
    for (size_t i = 0; i < t.size(); ++i) {
      const Site& s = t[static_cast<int>(i)];
      while (!open.empty() && open.back() != s.parent) {
        ids.end(open.back(), made.at(open.back()));
        open.pop_back();
      }
      ids.begin(static_cast<int>(i));
      const uint64_t id = (uint64_t{ids_of_top ? 1u : graph_of(static_cast<int>(i))} << 32) | index++;
      made[static_cast<int>(i)] = id;
      ids.created(id, graph_of(static_cast<int>(i)));
      if (s.node->kind() == orch::fb::NodeKind::Conditional)
        for (uint32_t b = 0; b < s.node->bodies()->size(); ++b) {
          bodies[{static_cast<int>(i), b}] = next_graph;
          ids.graph_created(next_graph++);  // made with the conditional node, in its window
        }
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
  // The id an activity record carries for `site`: the top-level graph's clone, or graph 45 for
  // a body's node, with the template's index.
  uint64_t ran(int site) const {
    const uint64_t index = static_cast<uint32_t>(made.at(site));
    return ((t[site].parent < 0 ? uint64_t{10} : uint64_t{45}) << 32) | index;
  }
};

NodeRecord ran_record(NodeRecord::Kind kind, const std::string& name, uint64_t node, uint32_t graph, uint64_t start,
                      uint64_t end) {
  NodeRecord r = record(kind, name, node, start, end);
  r.graph_id = graph;
  return r;
}

}  // namespace

TEST_CASE("nodes of a while body whose clones CUDA never names: found by (graph, index), each path") {
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
    Via via;                // how a body node is found
    bool ids_of_top = false;
  };
  for (const Case& c : {Case{"the body graph's clone is reported (GRAPH_CLONED)", true, false, 10, Via::GraphIndex},
                        Case{"nothing said of the body's clone; the record names the exec", false, false, 7, Via::TopIndex},
                        Case{"the body graph made during instantiation, unnamed", false, true, 45, Via::TopIndex},
                        Case{"the record names the top-level graph's clone", false, false, 10, Via::TopIndex},
                        Case{"body nodes' ids name the top-level graph; the body's clone is reported", true, false, 10,
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
    const NodeIds::Found f_fill = ids.find(ran_record(K::Kernel, "memset32", cuda.ran(in_loop), c.record_graph, 0, 1));
    CHECK(f_fill.site == in_loop);
    CHECK(f_fill.via == c.via);
    const NodeIds::Found f_step = ids.find(ran_record(K::Kernel, "step", cuda.ran(step), c.record_graph, 0, 1));
    CHECK(f_step.site == step);
    CHECK(f_step.via == c.via);
    // A record that cannot be the statement's work is not attributed, and says why.
    const NodeIds::Found f_odd = ids.find(ran_record(K::Kernel, "mystery", cuda.ran(step), c.record_graph, 0, 1));
    CHECK(f_odd.site == -1);
    CHECK(f_odd.why.find("names step<<<ceil_div(n, 256), 256>>>  fills.orch:28:5, which cannot run kernel mystery") !=
          std::string::npos);
    const NodeIds::Found f_copy = ids.find(ran_record(K::Memcpy, "", cuda.ran(in_loop), c.record_graph, 0, 1));
    CHECK(f_copy.site == -1);
    // A graph nothing was said of, named by nothing: not attributed.
    CHECK(ids.find(ran_record(K::Kernel, "step", (uint64_t{99} << 32) | 5, 98, 0, 1)).site == -1);
  }
}

TEST_CASE("(graph, index) is not used where it is ambiguous or the id layout did not hold") {
  LoadedPipeline l = compile_text("fills.orch", fills_orch());
  SiteTable t(*l.pipeline);
  const int in_loop = site_named(t, "fill tmp = 0.0  fills.orch:27:5");
  const int top = site_named(t, "fill acc = 0.0  fills.orch:24:3");
  using K = NodeRecord::Kind;
  {
    // Two statements made with the same index in one top-level graph (not what CUDA does):
    // a record with that index names neither.
    NodeIds ids(&t);
    ids.phase_begin(0, -1);
    ids.begin(top);
    ids.created((uint64_t{1} << 32) | 4, 1);
    ids.end(top, (uint64_t{1} << 32) | 4);
    ids.begin(in_loop);
    ids.created((uint64_t{2} << 32) | 4, 2);
    ids.end(in_loop, (uint64_t{2} << 32) | 4);
    ids.graph_created(45);
    ids.phase_end();
    const NodeIds::Found f = ids.find(ran_record(K::Memset, "", (uint64_t{45} << 32) | 4, 45, 0, 1));
    CHECK(f.site == -1);
    CHECK(f.why == "its top-level graph and index names more than one statement");
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
    NodeIds ids(&t);
    ids.phase_begin(0, -1);
    ids.begin(top);
    ids.created((uint64_t{1} << 32) | 0, 1);
    ids.end(top, (uint64_t{1} << 32) | 0);
    ids.begin(in_loop);
    ids.created((uint64_t{2} << 32) | 4);
    ids.end(in_loop, (uint64_t{2} << 32) | 4);
    ids.phase_end();
    ids.phase_begin(0, -1);
    ids.exec_created(1, 7);
    ids.phase_end();
    const NodeIds::Found f = ids.find(ran_record(K::Memset, "", (uint64_t{45} << 32) | 4, 7, 0, 1));
    CHECK(f.site == in_loop);
    CHECK(f.via == Via::TopIndex);
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
  LoadedPipeline l = compile_text("reduce.orch", R"(pipeline reduce
target sm_90
param n: u32 = 65536
buffer g: f32[n]
buffer s: f32[n]
buffer r: f32[n]
comm world
kernel twice(n: u32, g: in f32[], s: out f32[]) source """
extern "C" __global__ void twice(unsigned n, const float* g, float* s) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) s[i] = 2.0f * g[i];
}
"""
graph main {
  twice<<<ceil_div(n, 256), 256>>>(n, g, s)
  allreduce sum s -> r on world
}
)");
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
  CHECK(a.records[0].via == Via::TopIndex);
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
                   " stream 0 1.0 us -> step<<<ceil_div(n, 256), 256>>>  fills.orch:28:5 [top-level graph + index]\n") !=
        std::string::npos);
  CHECK(lines.find("memcpy 16 B DtoH graph 0 node 0 stream 0 1.4 us -> outside the pipeline's graphs\n") !=
        std::string::npos);
  CHECK(node_id_text((uint64_t{45} << 32) | 4) == "193273528324 (graph 45, index 4)");
  CHECK(node_id_text(77) == "77");
}
