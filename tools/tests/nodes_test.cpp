// --nodes without a GPU: grouping CUPTI-style records by graph node, and matching rows to the
// statements of a compiled pipeline.
#include <doctest/doctest.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "artifact/artifact.h"
#include "tools/orch_run/nodes.h"
#include "tools/tests/test_util.h"

using namespace orch::run;

namespace {

NodeRecord kernel(const char* name, uint64_t node, uint64_t start, uint64_t end, uint32_t graph = 1) {
  NodeRecord r;
  r.kind = NodeRecord::Kind::Kernel;
  r.name = name;
  r.graph_id = graph;
  r.node_id = node;
  r.start_ns = start;
  r.end_ns = end;
  return r;
}

}  // namespace

TEST_CASE("records are grouped per graph node and launch, in order of their start") {
  std::vector<std::vector<NodeRecord>> launches = {
      // launch 1: node 7 (a loop body) runs twice, node 3 once, after it
      {kernel("body", 7, 1000, 3000), kernel("body", 7, 5000, 6000), kernel("tail", 3, 9000, 9500)},
      // launch 2: the same, different times; base time differs
      {kernel("tail", 3, 109000, 109700), kernel("body", 7, 100000, 102000), kernel("body", 7, 104000, 105000)},
      // launch 3: the loop ran once; a branch node 9 appears; node 11 was not taken (no duration)
      {kernel("body", 7, 200000, 202000), kernel("branch", 9, 203000, 203100, 2), kernel("tail", 3, 204000, 204500),
       kernel("other", 11, 203000, 203000, 2)},
  };
  const auto rows = aggregate_nodes(launches);
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].name == "body");
  CHECK(rows[0].per_launch.count == 3);
  CHECK(rows[0].per_launch.median == doctest::Approx(0.003));  // 3 us in launches 1 and 2
  CHECK(rows[0].per_launch.min == doctest::Approx(0.002));
  CHECK(rows[0].runs_per_launch == doctest::Approx(5.0 / 3));
  CHECK(rows[1].name == "branch");  // starts before `tail` in the one launch it ran
  CHECK(rows[1].per_launch.count == 1);
  CHECK(rows[1].runs_per_launch == doctest::Approx(1.0 / 3));
  CHECK(rows[2].name == "tail");
  CHECK(rows[2].per_launch.median == doctest::Approx(0.0005));
  CHECK(rows[2].runs_per_launch == 1);
  CHECK(aggregate_nodes({}).empty());
  CHECK(aggregate_nodes({{}}).empty());
}

TEST_CASE("rows name the .orch statements they came from") {
  std::string log;
  const std::string bin = orch::tools_test::compiled_saxpy(&log);
  REQUIRE_MESSAGE(!bin.empty(), log);
  std::ifstream in(bin, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string bytes = ss.str();
  std::vector<uint64_t> storage((bytes.size() + 7) / 8);
  std::memcpy(storage.data(), bytes.data(), bytes.size());
  auto opened = orch::artifact::open_pipeline(reinterpret_cast<const uint8_t*>(storage.data()), bytes.size());
  REQUIRE(opened.ok());
  auto sizes = [](const std::string& name) -> size_t { return name.empty() ? 0 : 16384; };

  NodeRow row;
  row.kind = NodeRecord::Kind::Kernel;
  row.name = "saxpy";
  const auto st = statements_for(*opened.pipeline, row, sizes);
  REQUIRE(st.size() == 1);
  CHECK(st[0].text == "saxpy<<<ceil_div(n, 256), 256>>>  saxpy.orch:21:3");
  CHECK_FALSE(st[0].in_while);
  CHECK_FALSE(uses_device_graphs(*opened.pipeline));
  row.name = "other";
  CHECK(statements_for(*opened.pipeline, row, sizes).empty());
  row.kind = NodeRecord::Kind::Memcpy;
  row.bytes = 16384;
  CHECK(statements_for(*opened.pipeline, row, sizes).empty());  // saxpy copies nothing

  row.kind = NodeRecord::Kind::Kernel;
  row.name = "saxpy";
  row.per_launch = summarize({0.0101, 0.0102, 0.0110});
  row.runs_per_launch = 1;
  Summary launch = summarize({0.015});
  const std::string table = format_node_table(*opened.pipeline, {row}, sizes, launch, 3);
  CHECK(table.find("per node (CUPTI activity records of 3 more launches") == 0);
  CHECK(table.find("     10.2 us    11.0 us       1  saxpy<<<ceil_div(n, 256), 256>>>  saxpy.orch:21:3\n") !=
        std::string::npos);
  CHECK(table.find("1 nodes; their medians sum to 10.2 us, the launch median is 15.0 us") != std::string::npos);
}

TEST_CASE("loops, fills in loops and copy directions are told apart (jacobi)") {
  std::string log;
  const std::string bin = orch::tools_test::compiled(orch::tools_test::spec_dir() + "/examples/jacobi.orch", &log);
  REQUIRE_MESSAGE(!bin.empty(), log);
  std::ifstream in(bin, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string bytes = ss.str();
  std::vector<uint64_t> storage((bytes.size() + 7) / 8);
  std::memcpy(storage.data(), bytes.data(), bytes.size());
  auto opened = orch::artifact::open_pipeline(reinterpret_cast<const uint8_t*>(storage.data()), bytes.size());
  REQUIRE(opened.ok());
  const auto& p = *opened.pipeline;
  // n = 1 << 20 floats; the scalars are 4 bytes.
  auto sizes = [](const std::string& name) -> size_t {
    return name == "residual" || name == "iters" ? 4 : (1u << 20) * 4;
  };
  auto texts = [](const std::vector<Statement>& v) {
    std::string s;
    for (const auto& st : v) s += st.text + (st.in_while ? " [loop]" : "") + "\n";
    return s;
  };
  NodeRow row;
  row.kind = NodeRecord::Kind::Kernel;
  row.name = "sweep";
  CHECK(texts(statements_for(p, row, sizes)) ==
        "sweep<<<ceil_div(n, 256), 256>>>  jacobi.orch:27:5 [loop]\n"
        "sweep<<<ceil_div(n, 256), 256>>>  jacobi.orch:28:5 [loop]\n");
  row.name = "memset32";  // CUDA's kernel for the fill inside the loop
  // The literal 0 took residual's type, f32, so the statement shows it as a float.
  CHECK(texts(statements_for(p, row, sizes)) == "fill residual = 0.0  jacobi.orch:26:5 [loop]\n");
  row.kind = NodeRecord::Kind::Memset;
  row.bytes = 4;
  CHECK(texts(statements_for(p, row, sizes)) ==
        "fill iters = 0  jacobi.orch:23:3\nfill residual = 0.0  jacobi.orch:24:3\n");
  row.kind = NodeRecord::Kind::Memcpy;
  row.bytes = (1u << 20) * 4;
  row.copy_kind = 1;  // HtoD
  CHECK(texts(statements_for(p, row, sizes)) ==
        "copy rhs_host -> rhs  jacobi.orch:22:3\ncopy u_host -> u  jacobi.orch:21:3\n");
  row.copy_kind = 2;  // DtoH
  CHECK(texts(statements_for(p, row, sizes)) == "copy u -> u_host  jacobi.orch:31:3\n");

  row.kind = NodeRecord::Kind::Kernel;
  row.name = "sweep";
  row.per_launch = summarize({0.026});
  row.runs_per_launch = 1;
  const std::string table = format_node_table(p, {row}, sizes, summarize({0.3}), 1);
  CHECK(table.find("kernel sweep, one of 2 statements: sweep<<<ceil_div(n, 256), 256>>>  jacobi.orch:27:5; "
                   "sweep<<<ceil_div(n, 256), 256>>>  jacobi.orch:28:5  [while body: CUPTI reports one "
                   "iteration per launch]\n") != std::string::npos);
}
