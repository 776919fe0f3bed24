// Helpers shared by the validate() tests (validate*_test.cpp): expressions by hand, the sample's
// graphs and nodes by kind, and run(), which opens one broken variant of the sample per rule.
#pragma once

#include <doctest/doctest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "artifact/test_util.h"

namespace orch::artifact::test {

using Op = fb::ExprOp;

// Typed as the sample's params are: n u32, tol f32, mode i32.
constexpr fb::ScalarType U32 = fb::ScalarType::U32, F32 = fb::ScalarType::F32, I64 = fb::ScalarType::I64,
                         Bool = fb::ScalarType::Bool;
inline fb::ExprInstr lit(int64_t v) { return fb::ExprInstr(Op::ConstInt, U32, 0, v, 0); }
inline fb::ExprInstr par(int ref) {
  return fb::ExprInstr(Op::Param, ref == 1 ? F32 : ref == 2 ? fb::ScalarType::I32 : U32, ref, 0, 0);
}
inline fb::ExprInstr op(Op o, fb::ScalarType t = U32) { return fb::ExprInstr(o, t, 0, 0, 0); }

inline std::unique_ptr<fb::ExprT> expr(std::vector<fb::ExprInstr> code) {
  auto e = std::make_unique<fb::ExprT>();
  e->code = std::move(code);
  return e;
}

// Sample indices (see sample_pipeline.cpp).
constexpr int kMain = 0, kMainTail = 1, kExpert = 2;

inline fb::GraphT& graph(fb::PipelineT& t, int graph) { return *t.graphs[graph]; }
// The op of node `index` of a top-level graph, or of a body, made that node's own (own_op).
inline fb::OpT& node(fb::PipelineT& t, int graph, int index) { return own_op(t, *t.graphs[graph], index); }
inline fb::OpT& node(fb::PipelineT& t, const std::unique_ptr<fb::GraphT>& body, int index) {
  return own_op(t, *body, index);
}
// The same, as the body of its kind (the node must be of that kind).
template <class G>
fb::KernelOpT& kernel_node(fb::PipelineT& t, G&& graph, int index) {
  return body_of<fb::KernelOpT>(node(t, graph, index));
}
template <class G>
fb::MemcpyOpT& memcpy_node(fb::PipelineT& t, G&& graph, int index) {
  return body_of<fb::MemcpyOpT>(node(t, graph, index));
}
template <class G>
fb::MemsetOpT& memset_node(fb::PipelineT& t, G&& graph, int index) {
  return body_of<fb::MemsetOpT>(node(t, graph, index));
}
template <class G>
fb::ConditionalOpT& cond_node(fb::PipelineT& t, G&& graph, int index) {
  return body_of<fb::ConditionalOpT>(node(t, graph, index));
}
template <class G>
fb::CollectiveOpT& collective_node(fb::PipelineT& t, G&& graph, int index) {
  return body_of<fb::CollectiveOpT>(node(t, graph, index));
}

inline std::unique_ptr<fb::OpT> empty_node() { return make_op(fb::EmptyOpT()); }

inline std::unique_ptr<fb::GraphT> graph_of(fb::PipelineT& t, std::unique_ptr<fb::OpT> n) {
  auto g = std::make_unique<fb::GraphT>();
  add_node(t, *g, std::move(n));
  return g;
}

// Removes every node of a graph and the ops only they ran.
inline void clear(fb::PipelineT& t, int g) {
  graph(t, g).nodes.clear();
  graph(t, g).deps.clear();
  graph(t, g).dep_kinds.clear();
  drop_unused_ops(t);
}

inline std::unique_ptr<fb::OpT> new_collective() {
  fb::CollectiveOpT c;
  c.comm = 0;
  c.src = 0;
  c.dst = 0;
  return make_op(std::move(c));
}

// 'expert' as a family of `size`, passed to main.1's launcher as a table.
inline void make_family(fb::PipelineT& t, uint32_t size) {
  t.graphs[kExpert]->family_size = size;
  t.kernels[2]->params[1]->kind = fb::KernelParamKind::GraphFamily;
  t.kernels[2]->params[1]->family_size = size;
  kernel_node(t, kMainTail, 0).args[1]->kind = fb::ArgKind::GraphTable;
}

struct Case {
  const char* rule;
  std::function<void(fb::PipelineT&)> mutate;
  std::string error;  // "" when the variant must be accepted
};

inline void run(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    const std::string rule = c.rule;
    CAPTURE(rule);
    auto tree = sample_tree();
    c.mutate(*tree);
    drop_unused_ops(*tree);  // as the writer does: a test breaks one rule at a time
    CHECK(open_error(*tree) == c.error);
  }
}

// main.1's launcher op (kernel 'launcher', which launches 'expert' from the device), moved out;
// main.1's node 0 becomes an empty node.
inline std::unique_ptr<fb::OpT> take_launcher(fb::PipelineT& t) {
  fb::OpT& launcher = node(t, kMainTail, 0);
  auto n = std::make_unique<fb::OpT>(std::move(launcher));
  launcher = *empty_node();
  return n;
}

// A copy of kernel 'scale' that launches kernels from the device, used by the op given.
inline void make_cdp(fb::PipelineT& t, fb::OpT& n) {
  auto k = std::make_unique<fb::KernelT>(*t.kernels[0]);
  k->name = "parent";
  k->launches_kernels = true;
  body_of<fb::KernelOpT>(n).kernel = static_cast<int>(t.kernels.size());
  t.kernels.push_back(std::move(k));
}

}  // namespace orch::artifact::test
