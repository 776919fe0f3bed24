// to_mir: lowering's program starts as the checker's, node for node and edge for edge, with
// nothing of lowering's yet; and lowering leaves the checker's program as it was.
#include <doctest/doctest.h>

#include <functional>

#include "compiler/check.h"
#include "compiler/emit.h"
#include "lowering/lower.h"
#include "lowering/mir.h"

namespace orch {
namespace {

const char* const kConditionals = R"orch(pipeline conditionals
target sm_90
param n: u32 = 256
buffer x: f32[n]
buffer flag: i32
kernel work(n: u32, x: inout f32[]) source """extern "C" __global__ void work(unsigned n, float* x) {}"""
kernel spin(x: inout f32[], c: cond) source """extern "C" __global__ void spin(float* x, cudaGraphConditionalHandle c) {}"""
graph main {
  fill x = 0
  if flag != 0 { work<<<1, 128>>>(n, x) }
  while flag > 0 { flag -= 1 }
  while kernel { spin<<<1, 32>>>(x, cond) }
  switch flag {
    case 3 { fill x = 2 }
    default { work<<<1, 128>>>(n, x) }
  }
}
)orch";

TEST_CASE("to_mir: the checker's nodes, edges and declarations, no handle, guard or fused update") {
  SourceManager sources;
  DiagnosticEngine diags;
  CheckResult checked = check_text("t.orch", kConditionals, sources, {}, diags);
  REQUIRE_FALSE(diags.has_errors());
  const ir::Program& ir = *checked.program;
  const mir::Program m = mir::to_mir(ir);
  CHECK(m.name == ir.name);
  CHECK(m.main_graph == ir.main_graph);
  CHECK(m.buffers.size() == ir.buffers.size());
  CHECK(m.kernels.size() == ir.kernels.size());
  CHECK(m.handles.empty());
  CHECK(m.segments.empty());
  CHECK(m.unrolled_loops.empty());
  REQUIRE(m.graphs.size() == ir.graphs.size());
  size_t conditionals = 0;
  std::function<void(const ir::Region&, const mir::Region&)> same = [&](const ir::Region& a,
                                                                        const mir::Region& b) {
    REQUIRE(a.nodes.size() == b.nodes.size());
    REQUIRE(a.edges.size() == b.edges.size());
    for (size_t e = 0; e < a.edges.size(); ++e) {
      CHECK(a.edges[e].from == b.edges[e].from);
      CHECK(a.edges[e].to == b.edges[e].to);
      CHECK(a.edges[e].kind == b.edges[e].kind);
    }
    for (size_t i = 0; i < a.nodes.size(); ++i) {
      const ir::Node& x = a.nodes[i];
      const mir::Node& y = b.nodes[i];
      // The kinds the checker makes are mir's first ones, in the same order.
      CHECK(static_cast<int>(x.kind()) == static_cast<int>(y.kind()));
      CHECK(x.loc.file == y.loc.file);
      CHECK(x.loc.begin.line == y.loc.begin.line);
      CHECK(x.accesses.size() == y.accesses.size());
      CHECK_FALSE(y.guard);
      if (const auto* u = std::get_if<mir::ScalarUpdateNode>(&y.op))
        CHECK(u->fused_updates.empty());
      const mir::ConditionalParts* c = mir::conditional(y);
      CHECK((c != nullptr) == (ir::conditional(x) != nullptr));
      if (!c) continue;
      ++conditionals;
      CHECK(c->handle == -1);
      CHECK(c->cond.has_value() == ir::conditional(x)->cond.has_value());
      REQUIRE(c->bodies.size() == ir::bodies(x).size());
      for (size_t k = 0; k < c->bodies.size(); ++k) same(ir::bodies(x)[k], c->bodies[k]);
    }
  };
  for (size_t g = 0; g < ir.graphs.size(); ++g) same(ir.graphs[g].body, m.graphs[g].body);
  CHECK(conditionals == 4);
  // Same declarations, same nodes: the same YAML.
  CHECK(mir::print(m, sources) == emit_yaml(ir, sources));
}

TEST_CASE("lowering leaves the checker's program as the checker made it") {
  SourceManager sources;
  DiagnosticEngine diags;
  CheckResult checked = check_text("t.orch", kConditionals, sources, {}, diags);
  REQUIRE_FALSE(diags.has_errors());
  const std::string before = emit_yaml(*checked.program, sources);
  const lir::Program l = lower_to_lir(*checked.program);
  CHECK_FALSE(l.handles.empty());
  CHECK(emit_yaml(*checked.program, sources) == before);
  const mir::Program m = lower_graphs(*checked.program);
  CHECK(m.handles.size() == l.handles.size());
  CHECK(mir::print(m, sources) != before);  // handles, condition kernels
}

}  // namespace
}  // namespace orch
