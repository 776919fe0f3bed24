// One test per validate() rule: start from the valid sample, break one thing, and check the exact
// one-line error. docs/format.md lists the same rules.
#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <vector>

#include "artifact/test_util.h"

using namespace orch::artifact;
using namespace orch::artifact::test;
namespace fb = orch::fb;
using Op = fb::ExprOp;

namespace {

// Typed as the sample's params are: n u32, tol f32, mode i32.
constexpr fb::ScalarType U32 = fb::ScalarType::U32, F32 = fb::ScalarType::F32, I64 = fb::ScalarType::I64,
                         Bool = fb::ScalarType::Bool;
fb::ExprInstr lit(int64_t v) { return fb::ExprInstr(Op::ConstInt, U32, 0, v, 0); }
fb::ExprInstr par(int ref) {
  return fb::ExprInstr(Op::Param, ref == 1 ? F32 : ref == 2 ? fb::ScalarType::I32 : U32, ref, 0, 0);
}
fb::ExprInstr op(Op o, fb::ScalarType t = U32) { return fb::ExprInstr(o, t, 0, 0, 0); }

std::unique_ptr<fb::ExprT> expr(std::vector<fb::ExprInstr> code) {
  auto e = std::make_unique<fb::ExprT>();
  e->code = std::move(code);
  return e;
}

// Sample indices (see sample_pipeline.cpp).
constexpr int kMain = 0, kMainTail = 1, kExpert = 2;

fb::GraphT& graph(fb::PipelineT& t, int graph) { return *t.graphs[graph]; }
// The op of node `index` of a top-level graph, or of a body, made that node's own (own_op).
fb::OpT& node(fb::PipelineT& t, int graph, int index) { return own_op(t, *t.graphs[graph], index); }
fb::OpT& node(fb::PipelineT& t, const std::unique_ptr<fb::GraphT>& body, int index) { return own_op(t, *body, index); }
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

std::unique_ptr<fb::OpT> empty_node() { return make_op(fb::EmptyOpT()); }

std::unique_ptr<fb::GraphT> graph_of(fb::PipelineT& t, std::unique_ptr<fb::OpT> n) {
  auto g = std::make_unique<fb::GraphT>();
  add_node(t, *g, std::move(n));
  return g;
}

// Removes every node of a graph and the ops only they ran.
void clear(fb::PipelineT& t, int g) {
  graph(t, g).nodes.clear();
  graph(t, g).deps.clear();
  graph(t, g).dep_kinds.clear();
  drop_unused_ops(t);
}

std::unique_ptr<fb::OpT> new_collective() {
  fb::CollectiveOpT c;
  c.comm = 0;
  c.src = 0;
  c.dst = 0;
  return make_op(std::move(c));
}

// 'expert' as a family of `size`, passed to main.1's launcher as a table.
void make_family(fb::PipelineT& t, uint32_t size) {
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

void run(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    const std::string rule = c.rule;
    CAPTURE(rule);
    auto tree = sample_tree();
    c.mutate(*tree);
    drop_unused_ops(*tree);  // as the writer does: a test breaks one rule at a time
    CHECK(open_error(*tree) == c.error);
  }
}

}  // namespace

TEST_CASE("validate: the unmodified sample packs and opens") {
  auto tree = sample_tree();
  CHECK(open_error(*tree) == "");
  // The object API and the builder agree byte for byte is not required, only that both open.
}

TEST_CASE("validate: pipeline, params, buffers, comms") {
  run({
      {"pipeline name", [](fb::PipelineT& t) { t.name = ""; }, "the pipeline has an empty name"},
      {"param name", [](fb::PipelineT& t) { t.params[1]->name = ""; }, "param 1 has an empty name"},
      {"param duplicate", [](fb::PipelineT& t) { t.params[2]->name = "n"; },
       "param 'n' is declared twice (params 0 and 2)"},
      {"param type", [](fb::PipelineT& t) { t.params[0]->type = fb::ScalarType(13); },
       "param 'n' has unknown type 13"},
      {"param loc",
       [](fb::PipelineT& t) { t.params[0]->loc = std::make_unique<fb::SourceLoc>(2, 1, 1); },
       "param 'n': source location refers to file 2, but the pipeline lists 2 source files"},
      {"buffer duplicate", [](fb::PipelineT& t) { t.buffers[4]->name = "u"; },
       "buffer 'u' is declared twice (buffers 0 and 4)"},
      {"buffer name", [](fb::PipelineT& t) { t.buffers[3]->name = ""; },
       "buffer 3 has an empty name"},
      {"buffer type", [](fb::PipelineT& t) { t.buffers[1]->type = fb::ScalarType(200); },
       "buffer 'v' has unknown type 200"},
      {"buffer loc",
       [](fb::PipelineT& t) { t.buffers[0]->loc = std::make_unique<fb::SourceLoc>(9, 1, 1); },
       "buffer 'u': source location refers to file 9, but the pipeline lists 2 source files"},
      {"buffer symmetric and host", [](fb::PipelineT& t) { t.buffers[2]->symmetric = true; },
       "buffer 'u_host' is both symmetric and host memory"},
      {"symmetric device buffer", [](fb::PipelineT& t) { t.buffers[3]->symmetric = true; }, ""},
      {"comm name", [](fb::PipelineT& t) { t.comms[0]->name = ""; }, "comm 0 has an empty name"},
      {"comm duplicate",
       [](fb::PipelineT& t) {
         t.comms.push_back(std::make_unique<fb::CommT>());
         t.comms.back()->name = "world";
       },
       "comm 'world' is declared twice (comms 0 and 1)"},
  });
}

TEST_CASE("validate: expressions") {
  auto count = [](std::vector<fb::ExprInstr> code) {
    return [code](fb::PipelineT& t) { t.buffers[0]->count->code = code; };
  };
  std::vector<fb::ExprInstr> longest, too_long;
  for (int i = 0; i < 2048; ++i) longest.push_back(lit(i));
  for (int i = 0; i < 2047; ++i) longest.push_back(op(Op::Add));
  too_long = longest;
  too_long.push_back(lit(1));
  too_long.push_back(op(Op::Add));
  REQUIRE(longest.size() == kMaxExprLength - 1);
  REQUIRE(too_long.size() == kMaxExprLength + 1);
  run({
      {"empty", count({}), "buffer 'u' count: expression has no instructions"},
      {"underflow binary", count({par(0), op(Op::Add)}),
       "buffer 'u' count: expression instruction 1 (Add) needs 2 operands, the stack holds 1"},
      {"underflow unary", count({op(Op::Neg)}),
       "buffer 'u' count: expression instruction 0 (Neg) needs 1 operand, the stack holds 0"},
      {"underflow call", count({lit(1), op(Op::CeilDiv)}),
       "buffer 'u' count: expression instruction 1 (CeilDiv) needs 2 operands, the stack holds 1"},
      {"param ref high", count({par(3)}),
       "buffer 'u' count: expression instruction 0 refers to param 3, but the pipeline has 3 "
       "params"},
      {"param ref negative", count({par(-1)}),
       "buffer 'u' count: expression instruction 0 refers to param -1, but the pipeline has 3 "
       "params"},
      {"two values left", count({lit(1), lit(2)}),
       "buffer 'u' count: expression leaves 2 values on the stack instead of 1"},
      {"unknown op", count({fb::ExprInstr(Op(200), U32, 0, 0, 0)}),
       "buffer 'u' count: expression instruction 0 has unknown op 200"},
      {"longest accepted", count(longest), ""},
      {"too long", count(too_long),
       "buffer 'u' count: expression has 4097 instructions, more than the limit of 4096"},
      {"unknown type", count({fb::ExprInstr(Op::ConstInt, fb::ScalarType(13), 0, 1, 0)}),
       "buffer 'u' count: expression instruction 0 has unknown type 13"},
      {"param read as another type", count({fb::ExprInstr(Op::Param, I64, 0, 0, 0)}),
       "buffer 'u' count: expression instruction 0 reads param 0 as I64, but it is U32"},
      {"rank not u32", count({fb::ExprInstr(Op::Rank, I64, 0, 0, 0)}),
       "buffer 'u' count: expression instruction 0 (Rank) must be U32"},
      {"operator type against the rules", count({par(0), lit(2), op(Op::Mul, I64)}),
       "buffer 'u' count: expression instruction 2 (Mul) has type i64, but its operands give u32"},
      {"float operand of %", count({par(1), lit(2), op(Op::Mod, F32)}),
       "buffer 'u' count: expression instruction 2 (Mod): `%` needs integer operands"},
      {"constant out of its type", count({lit(-1)}),
       "buffer 'u' count: expression instruction 0 (Const) is not a value of u32"},
      {"float constant not of its type", count({fb::ExprInstr(Op::ConstFloat, F32, 0, 0, 0.1)}),
       "buffer 'u' count: expression instruction 0 (Const) is not a value of f32"},
      {"every op accepted", count({lit(1),      fb::ExprInstr(Op::FamilyIndex, U32, 0, 0, 0),
                                   op(Op::Add), fb::ExprInstr(Op::Rank, U32, 0, 0, 0),
                                   op(Op::Sub), fb::ExprInstr(Op::WorldSize, U32, 0, 0, 0),
                                   op(Op::Mul), lit(3),
                                   op(Op::Div), lit(3),
                                   op(Op::Mod), op(Op::Neg),
                                   op(Op::BitNot),
                                   lit(1),      op(Op::Shl),
                                   lit(1),      op(Op::Shr),
                                   fb::ExprInstr(Op::ConstFloat, F32, 0, 0, 2.5), op(Op::Add, F32),
                                   lit(1),      op(Op::Lt, Bool),
                                   lit(1),      op(Op::Le, Bool),
                                   lit(1),      op(Op::Gt, Bool),
                                   lit(1),      op(Op::Ge, Bool),
                                   lit(1),      op(Op::Eq, Bool),
                                   lit(1),      op(Op::Ne, Bool),
                                   lit(1),      op(Op::BitAnd, I64),
                                   lit(1),      op(Op::BitXor, I64),
                                   lit(1),      op(Op::BitOr, I64),
                                   lit(1),      op(Op::And, Bool),
                                   lit(1),      op(Op::Or, Bool),
                                   op(Op::Not, Bool),
                                   lit(1),      op(Op::Min, I64),
                                   lit(1),      op(Op::Max, I64),
                                   lit(1),      op(Op::CeilDiv, I64)}),
       ""},
      {"bind check condition",
       [](fb::PipelineT& t) { t.bind_checks[0]->condition->code = {op(Op::Eq)}; },
       "bind check 0 (E0410) condition: expression instruction 0 (Eq) needs 2 operands, the "
       "stack holds 0"},
  });
}

TEST_CASE("validate: kernels") {
  run({
      {"name", [](fb::PipelineT& t) { t.kernels[0]->name = ""; }, "kernel 0 has an empty name"},
      {"lowered name", [](fb::PipelineT& t) { t.kernels[0]->lowered_name = ""; },
       "kernel 'scale' has an empty lowered_name"},
      {"image arch", [](fb::PipelineT& t) { t.kernels[0]->images[1]->arch = ""; },
       "kernel 'scale' image 1 has an empty arch"},
      {"empty cubin", [](fb::PipelineT& t) { t.kernels[0]->images[0]->cubin.clear(); },
       "kernel 'scale' image 0 (sm_90) has an empty CUBIN"},
      {"duplicate arch", [](fb::PipelineT& t) { t.kernels[0]->images[1]->arch = "sm_90"; },
       "kernel 'scale' has two images for sm_90"},
      {"ptx without arch", [](fb::PipelineT& t) { t.kernels[0]->ptx_arch = ""; },
       "kernel 'scale' has PTX but no ptx_arch"},
      {"no image", [](fb::PipelineT& t) { t.kernels[2]->images.clear(); },
       "kernel 'launcher' has neither a CUBIN nor PTX"},
      {"PTX alone is enough",
       [](fb::PipelineT& t) {
         t.kernels[2]->images.clear();
         t.kernels[2]->ptx = {'/', '/'};
         t.kernels[2]->ptx_arch = "compute_90";
       },
       ""},
      {"module index", [](fb::PipelineT& t) { t.kernels[1]->in_module = 1; },
       "kernel '__orch_cond_0': module index 1 is out of range (the pipeline has 1 module)"},
      {"negative module index", [](fb::PipelineT& t) { t.kernels[1]->in_module = -2; },
       "kernel '__orch_cond_0': module index -2 is out of range (the pipeline has 1 module)"},
      {"a kernel in a module with code of its own",
       [](fb::PipelineT& t) { t.kernels[1]->ptx_arch = "compute_90"; },
       "kernel '__orch_cond_0' is in module 0 but also has images or PTX of its own"},
      {"a kernel in a module with an image of its own",
       [](fb::PipelineT& t) { t.kernels[1]->images.push_back(std::make_unique<fb::KernelImageT>(*t.kernels[0]->images[0])); },
       "kernel '__orch_cond_0' is in module 0 but also has images or PTX of its own"},
      {"a kernel moved out of its module needs code",
       [](fb::PipelineT& t) {
         t.kernels[1]->in_module = -1;
         t.modules.clear();
       },
       "kernel '__orch_cond_0' has neither a CUBIN nor PTX"},
      {"a module no kernel uses", [](fb::PipelineT& t) { t.kernels[1]->in_module = -1;
         t.kernels[1]->images.push_back(std::make_unique<fb::KernelImageT>(*t.kernels[0]->images[0])); },
       "module 0 holds no kernel's code"},
      {"module without code",
       [](fb::PipelineT& t) {
         t.modules[0]->images.clear();
         t.modules[0]->ptx.clear();
       },
       "module 0 has neither a CUBIN nor PTX"},
      {"module PTX alone is enough", [](fb::PipelineT& t) { t.modules[0]->images.clear(); }, ""},
      {"module PTX without arch", [](fb::PipelineT& t) { t.modules[0]->ptx_arch = ""; },
       "module 0 has PTX but no ptx_arch"},
      {"module duplicate arch",
       [](fb::PipelineT& t) {
         t.modules[0]->images.push_back(std::make_unique<fb::KernelImageT>(*t.modules[0]->images[0]));
       },
       "module 0 has two images for sm_90"},
      {"module empty cubin", [](fb::PipelineT& t) { t.modules[0]->images[0]->cubin.clear(); },
       "module 0 image 0 (sm_90) has an empty CUBIN"},
      {"param name", [](fb::PipelineT& t) { t.kernels[0]->params[2]->name = ""; },
       "kernel 'scale' param 2 has an empty name"},
      {"param kind",
       [](fb::PipelineT& t) { t.kernels[0]->params[0]->kind = fb::KernelParamKind(9); },
       "kernel 'scale' param 'n' has unknown kind 9"},
      {"param type", [](fb::PipelineT& t) { t.kernels[0]->params[0]->type = fb::ScalarType(13); },
       "kernel 'scale' param 'n' has unknown type 13"},
      {"param access", [](fb::PipelineT& t) { t.kernels[0]->params[2]->access = fb::Access(4); },
       "kernel 'scale' param 'x' has unknown access 4"},
      {"cost flops type", [](fb::PipelineT& t) { t.kernels[0]->cost_flops_type = fb::ScalarType::U32; },
       "kernel 'scale' has cost_flops_type 2; FLOPs are F16, F32 or F64"},
      {"cost flops type f64", [](fb::PipelineT& t) { t.kernels[0]->cost_flops_type = fb::ScalarType::F64; }, ""},
      {"loc",
       [](fb::PipelineT& t) { t.kernels[0]->loc = std::make_unique<fb::SourceLoc>(5, 1, 1); },
       "kernel 'scale': source location refers to file 5, but the pipeline lists 2 source files"},
  });
}

TEST_CASE("validate: conditional handles, graphs, main graph and segments") {
  run({
      {"handle graph range", [](fb::PipelineT& t) { t.handles[0]->graph = 3; },
       "handle 0: graph index 3 is out of range (the pipeline has 3 graphs)"},
      {"handle graph device", [](fb::PipelineT& t) { t.handles[0]->graph = kExpert; },
       "handle 0: graph 'expert' is a device graph, which cannot hold conditional nodes"},
      {"handle unused",
       [](fb::PipelineT& t) {
         t.handles.push_back(std::make_unique<fb::ConditionalHandleT>());
         t.handles.back()->graph = kMain;
       },
       "handle 1 (graph 'main') is not used by any conditional node; CUDA may refuse to "
       "instantiate the graph"},
      {"handle of another graph", [](fb::PipelineT& t) { t.handles[0]->graph = kMainTail; },
       "graph 'main' node 3 arg 1: conditional handle 0 belongs to graph 'main.1', not to graph "
       "'main' which holds this kernel"},
      {"conditional node with a handle of another graph",
       [](fb::PipelineT& t) {
         t.handles.push_back(std::make_unique<fb::ConditionalHandleT>());
         t.handles.back()->graph = kMainTail;
         cond_node(t, kMain, 4).handle = 1;
       },
       "graph 'main' node 4: conditional handle 1 belongs to graph 'main.1', not to graph 'main' "
       "which holds this node"},
      {"condition kernel with a handle of another graph",
       [](fb::PipelineT& t) {
         t.handles.push_back(std::make_unique<fb::ConditionalHandleT>());
         t.handles.back()->graph = kMainTail;
         kernel_node(t, kMain, 3).args[1]->ref = 1;
       },
       "graph 'main' node 3 arg 1: conditional handle 1 belongs to graph 'main.1', not to graph "
       "'main' which holds this kernel"},
      {"family at the limit", [](fb::PipelineT& t) { make_family(t, kMaxFamilySize); }, ""},
      {"family too large", [](fb::PipelineT& t) { make_family(t, kMaxFamilySize + 1); },
       "graph 'expert': family size 65537 is more than 65536"},
      {"device graph of empty nodes only",
       [](fb::PipelineT& t) {
         clear(t, kExpert);
         add_node(t, graph(t, kExpert), empty_node());
       },
       "graph 'expert': a device graph has no kernel, memcpy or memset node"},
      {"device graph with only a memset",
       [](fb::PipelineT& t) {
         fb::GraphT& else_body = *cond_node(t, kMain, 4).bodies[1];
         graph(t, kExpert).nodes[0] = else_body.nodes[0];  // the memset's op
         else_body.nodes.clear();
         add_node(t, else_body, empty_node());
         drop_unused_ops(t);
       },
       ""},
      {"family not device", [](fb::PipelineT& t) { t.graphs[kMainTail]->family_size = 4; },
       "graph 'main.1': family size 4 but not a device graph (families are instantiated for "
       "device launch)"},
      {"device graph empty", [](fb::PipelineT& t) { clear(t, kExpert); },
       "graph 'expert': a device graph has no nodes"},
      {"fire and forget",
       [](fb::PipelineT& t) { t.graphs[kMainTail]->fire_and_forget_launches = 121; },
       "graph 'main.1': 121 fire-and-forget launches, more than CUDA's 120"},
      {"fire and forget limit",
       [](fb::PipelineT& t) { t.graphs[kMainTail]->fire_and_forget_launches = 120; }, ""},
      {"tail launches", [](fb::PipelineT& t) { t.graphs[kMainTail]->tail_launches = 256; },
       "graph 'main.1': 256 tail launches, more than CUDA's 255"},
      {"tail launches limit", [](fb::PipelineT& t) { t.graphs[kMainTail]->tail_launches = 255; },
       ""},
      {"unnamed graph",
       [](fb::PipelineT& t) {
         t.graphs[kMainTail]->name = "";
         t.graphs[kMainTail]->tail_launches = 256;
       },
       "graph 1: 256 tail launches, more than CUDA's 255"},
      {"main range", [](fb::PipelineT& t) { t.main_graph = 3; },
       "main_graph 3 is out of range (the pipeline has 3 graphs)"},
      {"main negative", [](fb::PipelineT& t) { t.main_graph = -1; },
       "main_graph -1 is out of range (the pipeline has 3 graphs)"},
      {"main device", [](fb::PipelineT& t) { t.main_graph = kExpert; },
       "main_graph 2 (graph 'expert') is a device graph; the host launches main"},
      {"no graphs",
       [](fb::PipelineT& t) {
         t.graphs.clear();
         t.handles.clear();
         t.segments.clear();
         t.device_order.clear();
       },
       "main_graph 0 is out of range (the pipeline has 0 graphs)"},
      {"segment range",
       [](fb::PipelineT& t) {
         t.segments = {0, 3};
       },
       "segments[1]: graph index 3 is out of range (the pipeline has 3 graphs)"},
      {"segment device",
       [](fb::PipelineT& t) {
         t.segments = {0, kExpert};
       },
       "segments[1]: graph 'expert' is a device graph; segments are launched by the host"},
      {"segment twice",
       [](fb::PipelineT& t) {
         t.segments = {0, 1, 0};
       },
       "segments[2]: graph 'main' is listed twice"},
      {"no segments", [](fb::PipelineT& t) { t.segments.clear(); }, ""},
      {"bind check code", [](fb::PipelineT& t) { t.bind_checks[0]->code = ""; },
       "bind check 0 has an empty code"},
      {"bind check message", [](fb::PipelineT& t) { t.bind_checks[0]->message = ""; },
       "bind check 0 (E0410) has an empty message"},
      {"bind check loc",
       [](fb::PipelineT& t) { t.bind_checks[0]->loc = std::make_unique<fb::SourceLoc>(2, 1, 1); },
       "bind check 0: source location refers to file 2, but the pipeline lists 2 source files"},
      {"bind check with the family index and no members",
       [](fb::PipelineT& t) {
         t.bind_checks[0]->condition->code = {fb::ExprInstr(Op::FamilyIndex, U32, 0, 0, 0), lit(4),
                                              op(Op::Lt, fb::ScalarType::Bool)};
       },
       "bind check 0 (E0410) uses the family index but has no family_size to check it for"},
      {"bind check with the family index for every member",
       [](fb::PipelineT& t) {
         t.bind_checks[0]->condition->code = {fb::ExprInstr(Op::FamilyIndex, U32, 0, 0, 0), lit(4),
                                              op(Op::Lt, fb::ScalarType::Bool)};
         t.bind_checks[0]->family_size = 4;
       },
       ""},
      {"bind check members at the limit",
       [](fb::PipelineT& t) { t.bind_checks[0]->family_size = 65536; }, ""},
      {"bind check members over the limit",
       [](fb::PipelineT& t) { t.bind_checks[0]->family_size = 65537; },
       "bind check 0 (E0410) has family_size 65537, more than the limit of 65536"},
      {"status site loc",
       [](fb::PipelineT& t) {
         t.status_sites.push_back(std::make_unique<fb::StatusSiteT>());
         t.status_sites.back()->loc = std::make_unique<fb::SourceLoc>(5, 1, 1);
       },
       "status site 0: source location refers to file 5, but the pipeline lists 2 source files"},
      {"status site",
       [](fb::PipelineT& t) {
         t.status_sites.push_back(std::make_unique<fb::StatusSiteT>());
         t.status_sites.back()->loc = std::make_unique<fb::SourceLoc>(1, 1, 1);
         t.status_sites.back()->what = "launch expert tail";
       },
       ""},
  });
}

TEST_CASE("validate: nodes and dependencies") {
  run({
      {"later dependency", [](fb::PipelineT& t) { set_deps(graph(t, kMain), 2, {7}); },
       "graph 'main' node 2: dependency 7 is not an earlier node"},
      {"self dependency", [](fb::PipelineT& t) { set_deps(graph(t, kMain), 2, {2}); },
       "graph 'main' node 2: dependency 2 is not an earlier node"},
      {"duplicate dependency",
       [](fb::PipelineT& t) {
         set_deps(graph(t, kMain), 3, {1, 2, 1});
       },
       "graph 'main' node 3: dependency 1 is listed twice"},
      {"no body", [](fb::PipelineT& t) { node(t, kMain, 0).body.Reset(); },
       "graph 'main' node 0: op 0 has no body (type NONE)"},
      {"unknown body type",
       [](fb::PipelineT& t) {
         fb::OpT& n = node(t, kMain, 0);
         n.body.Reset();
         n.body.type = fb::OpBody(7);  // packed without a table: the writer knows no such type
       },
       "graph 'main' node 0: op 0 has unknown body type 7"},
      {"loc",
       [](fb::PipelineT& t) { set_loc(graph(t, kMain), 0, fb::SourceLoc(2, 1, 1)); },
       "graph 'main' node 0: source location refers to file 2, but the pipeline lists 2 source "
       "files"},
      {"empty node in a host graph", [](fb::PipelineT& t) { add_node(t, graph(t, kMainTail), empty_node()); },
       ""},
      {"empty node in a conditional body",
       [](fb::PipelineT& t) { add_node(t, *cond_node(t, kMain, 4).bodies[0], empty_node()); }, ""},
      {"empty node in a device graph",
       [](fb::PipelineT& t) { add_node(t, graph(t, kExpert), empty_node()); },
       "graph 'expert' node 1: a device graph cannot hold an empty node"},
      {"op index", [](fb::PipelineT& t) { set_op(graph(t, kMain), 0, 99); },
       "graph 'main' node 0: op index 99 is out of range (the pipeline has 10 ops)"},
      // main's dependencies: node 2 {0}, node 3 {1, 2}, node 4 {3}, node 5 {4}: deps_end 0, 0,
      // 1, 3, 4, 5.
      {"dependencies past deps", [](fb::PipelineT& t) { set_deps_end(graph(t, kMain), 5, 6); },
       "graph 'main' node 5: dependencies end at 6, outside 4..5 (where the node before ends them, and "
       "deps' length)"},
      {"dependencies ending before the node before's", [](fb::PipelineT& t) { set_deps_end(graph(t, kMain), 3, 0); },
       "graph 'main' node 3: dependencies end at 0, outside 1..5 (where the node before ends them, and "
       "deps' length)"},
      {"deps no node owns",
       [](fb::PipelineT& t) {
         graph(t, kMain).deps.push_back(0);
         graph(t, kMain).dep_kinds.push_back(fb::EdgeKind::Full);
       },
       "graph 'main': deps has 6 entries, but the nodes' dependencies end at 5"},
      // An op is proved once per top-level graph and whether in a body: the same op again in
      // another context is proved again.
      {"an op a host graph may hold, again in a device graph",
       [](fb::PipelineT& t) {
         const uint32_t i = add_node(t, graph(t, kMainTail), empty_node());
         add_node(graph(t, kExpert), graph(t, kMainTail).nodes[i].op());
       },
       "graph 'expert' node 1: a device graph cannot hold an empty node"},
  });
}

namespace {

// Appends to main a node 6 that runs the op of main's node 2 (the scale kernel, proved at node 2),
// after `deps` with `kinds` (empty: Full), at `loc`: a node the validator decides on its fast
// path unless something is wrong with it.
void again(fb::PipelineT& t, const std::vector<uint32_t>& deps, const std::vector<fb::EdgeKind>& kinds = {},
           const fb::SourceLoc& loc = fb::SourceLoc(0, 30, 3)) {
  fb::GraphT& main = graph(t, kMain);
  set_deps(main, add_node(main, main.nodes[2].op(), {}, loc), deps, kinds);
}

}  // namespace

TEST_CASE("validate: a node whose op is proved is held to every node rule") {
  using fb::EdgeKind;
  run({
      {"accepted", [](fb::PipelineT& t) { again(t, {2}); }, ""},
      {"accepted, programmatic",
       [](fb::PipelineT& t) {
         t.kernels[0]->waits_at_entry = true;
         again(t, {2}, {EdgeKind::Programmatic});
       },
       ""},
      {"later dependency", [](fb::PipelineT& t) { again(t, {7}); },
       "graph 'main' node 6: dependency 7 is not an earlier node"},
      {"self dependency", [](fb::PipelineT& t) { again(t, {6}); },
       "graph 'main' node 6: dependency 6 is not an earlier node"},
      {"duplicate dependency", [](fb::PipelineT& t) { again(t, {0, 0}); },
       "graph 'main' node 6: dependency 0 is listed twice"},
      {"loc", [](fb::PipelineT& t) { again(t, {}, {}, fb::SourceLoc(2, 30, 3)); },
       "graph 'main' node 6: source location refers to file 2, but the pipeline lists 2 source files"},
      {"dependencies past deps",
       [](fb::PipelineT& t) {
         again(t, {2});
         set_deps_end(graph(t, kMain), 6, graph(t, kMain).nodes[6].deps_end() + 1);
       },
       "graph 'main' node 6: dependencies end at 7, outside 5..6 (where the node before ends them, and deps' "
       "length)"},
      {"dependencies ending before the node before's",
       [](fb::PipelineT& t) {
         again(t, {});
         set_deps_end(graph(t, kMain), 6, 4);
       },
       "graph 'main' node 6: dependencies end at 4, outside 5..5 (where the node before ends them, and deps' "
       "length)"},
      {"unknown edge kind", [](fb::PipelineT& t) { again(t, {2}, {EdgeKind(2)}); },
       "graph 'main' node 6: dependency 2 has unknown edge kind 2"},
      {"unknown edge kind between kernels that allow programmatic edges",
       [](fb::PipelineT& t) {
         t.kernels[0]->waits_at_entry = true;
         again(t, {2}, {EdgeKind(2)});
       },
       "graph 'main' node 6: dependency 2 has unknown edge kind 2"},
      {"programmatic into a kernel that does not wait", [](fb::PipelineT& t) { again(t, {2}, {EdgeKind::Programmatic}); },
       "graph 'main' node 6: programmatic dependency on node 2: kernel 'scale' does not wait at entry "
       "(waits_at_entry), so it could read what node 2 writes before it is written"},
      {"programmatic from a memset",
       [](fb::PipelineT& t) {
         t.kernels[0]->waits_at_entry = true;
         again(t, {1}, {EdgeKind::Programmatic});
       },
       "graph 'main' node 6: programmatic dependency on node 1: node 1 is a memset node; a programmatic edge "
       "joins two kernel nodes"},
      {"programmatic on a target without it",
       [](fb::PipelineT& t) {
         t.kernels[0]->waits_at_entry = true;
         t.targets = {"sm_80"};
         graph(t, kMain).dep_kinds.clear();  // node 3's programmatic edge would be refused first
         again(t, {2}, {EdgeKind::Programmatic});
       },
       "graph 'main' node 6: programmatic dependency on node 2: programmatic edges need compute capability 9.0 "
       "or newer, but the pipeline targets sm_80"},
  });
}

TEST_CASE("validate: kernel nodes and arguments") {
  run({
      {"kernel index", [](fb::PipelineT& t) { kernel_node(t, kMain, 2).kernel = 3; },
       "graph 'main' node 2: kernel index 3 is out of range (the pipeline has 3 kernels)"},
      {"kernel index negative", [](fb::PipelineT& t) { kernel_node(t, kMain, 2).kernel = -1; },
       "graph 'main' node 2: kernel index -1 is out of range (the pipeline has 3 kernels)"},
      {"grid count", [](fb::PipelineT& t) { kernel_node(t, kMain, 2).grid.pop_back(); },
       "graph 'main' node 2: grid has 2 expressions, expected 3"},
      {"grid absent", [](fb::PipelineT& t) { kernel_node(t, kMain, 2).grid.clear(); },
       "graph 'main' node 2: grid has 0 expressions, expected 3"},
      {"block count", [](fb::PipelineT& t) { kernel_node(t, kMain, 2).block.push_back(expr({lit(1)})); },
       "graph 'main' node 2: block has 4 expressions, expected 3"},
      {"grid expr", [](fb::PipelineT& t) { kernel_node(t, kMain, 2).grid[1]->code.clear(); },
       "graph 'main' node 2: grid[1]: expression has no instructions"},
      {"block expr", [](fb::PipelineT& t) { kernel_node(t, kMain, 2).block[2]->code = {par(5)}; },
       "graph 'main' node 2: block[2]: expression instruction 0 refers to param 5, but the "
       "pipeline has 3 params"},
      {"shared bytes",
       [](fb::PipelineT& t) {
         kernel_node(t, kMain, 3).shared_bytes->code = {lit(1), lit(1)};
       },
       "graph 'main' node 3: shared_bytes: expression leaves 2 values on the stack instead of 1"},
      {"a launch shape instead of the expressions",
       [](fb::PipelineT& t) {
         fb::KernelOpT& n = kernel_node(t, kMain, 2);
         n.grid.clear();
         n.block.clear();
         n.shared_bytes.reset();
         n.launch = std::make_unique<fb::LaunchShape>(4, 1, 1, 256, 1, 1, 1024);
       },
       ""},
      {"a launch shape of any values (the runtime checks ranges as it does for expressions)",
       [](fb::PipelineT& t) { kernel_node(t, kMainTail, 0).launch = std::make_unique<fb::LaunchShape>(0, 0, 0, 0, 0, 0, ~0u); },
       ""},
      {"a launch shape and grid expressions",
       [](fb::PipelineT& t) { kernel_node(t, kMain, 2).launch = std::make_unique<fb::LaunchShape>(4, 1, 1, 256, 1, 1, 0); },
       "graph 'main' node 2: a kernel node has both a launch shape and grid, block or shared_bytes expressions"},
      {"a launch shape and shared_bytes alone",
       [](fb::PipelineT& t) { kernel_node(t, kMainTail, 0).shared_bytes = expr({lit(0)}); },
       "graph 'main.1' node 0: a kernel node has both a launch shape and grid, block or shared_bytes expressions"},
      {"neither a launch shape nor grid expressions",
       [](fb::PipelineT& t) { kernel_node(t, kMainTail, 0).launch.reset(); },
       "graph 'main.1' node 0: grid has 0 expressions, expected 3"},
      {"a declared cost", [](fb::PipelineT& t) {
         kernel_node(t, kMain, 2).cost_bytes = expr({lit(12)});
         kernel_node(t, kMain, 2).cost_flops = expr({lit(2)});
       },
       ""},
      {"cost bytes expr", [](fb::PipelineT& t) { kernel_node(t, kMain, 2).cost_bytes = expr({par(7)}); },
       "graph 'main' node 2: cost_bytes: expression instruction 0 refers to param 7, but the pipeline has 3 params"},
      {"cost flops expr", [](fb::PipelineT& t) { kernel_node(t, kMain, 2).cost_flops = expr({lit(1), lit(1)}); },
       "graph 'main' node 2: cost_flops: expression leaves 2 values on the stack instead of 1"},
      {"argument count", [](fb::PipelineT& t) { kernel_node(t, kMain, 2).args.pop_back(); },
       "graph 'main' node 2: kernel 'scale' takes 3 arguments, the node passes 2"},
      {"argument kind mismatch",
       [](fb::PipelineT& t) { kernel_node(t, kMain, 2).args[0]->kind = fb::ArgKind::Buffer; },
       "graph 'main' node 2 arg 0: a Buffer argument cannot bind kernel param 'n' of kind Value"},
      {"array param needs buffer",
       [](fb::PipelineT& t) { kernel_node(t, kMain, 2).args[2]->kind = fb::ArgKind::Value; },
       "graph 'main' node 2 arg 2: a Value argument cannot bind kernel param 'x' of kind Array"},
      {"cond param needs handle",
       [](fb::PipelineT& t) { kernel_node(t, kMain, 3).args[1]->kind = fb::ArgKind::Buffer; },
       "graph 'main' node 3 arg 1: a Buffer argument cannot bind kernel param 'cond' of kind "
       "Cond"},
      {"unknown argument kind",
       [](fb::PipelineT& t) { kernel_node(t, kMain, 2).args[0]->kind = fb::ArgKind(7); },
       "graph 'main' node 2 arg 0: unknown argument kind 7"},
      {"status param needs the status record",
       [](fb::PipelineT& t) {
         t.kernels[0]->params[0]->kind = fb::KernelParamKind::Status;
       },
       "graph 'main' node 2 arg 0: a Value argument cannot bind kernel param 'n' of kind Status"},
      {"status record for a status param",
       [](fb::PipelineT& t) {
         t.kernels[0]->params[0]->kind = fb::KernelParamKind::Status;
         kernel_node(t, kMain, 2).args[0]->kind = fb::ArgKind::Status;
         // `scale` runs in two more places.
         kernel_node(t, cond_node(t, kMain, 4).bodies[0], 0).args[0]->kind = fb::ArgKind::Status;
         kernel_node(t, kExpert, 0).args[0]->kind = fb::ArgKind::Status;
       },
       ""},
      {"value type",
       [](fb::PipelineT& t) { kernel_node(t, kMain, 2).args[0]->type = fb::ScalarType::F32; },
       "graph 'main' node 2 arg 0: argument type f32 does not match kernel param 'n' of type u32"},
      {"unknown value type",
       [](fb::PipelineT& t) { kernel_node(t, kMain, 2).args[0]->type = fb::ScalarType(13); },
       "graph 'main' node 2 arg 0: unknown argument type 13"},
      {"value missing", [](fb::PipelineT& t) { kernel_node(t, kMain, 2).args[0]->value.reset(); },
       "graph 'main' node 2 arg 0: value is missing"},
      {"value expr", [](fb::PipelineT& t) { kernel_node(t, kMain, 2).args[1]->value->code = {par(9)}; },
       "graph 'main' node 2 arg 1: value: expression instruction 0 refers to param 9, but the "
       "pipeline has 3 params"},
      {"buffer ref", [](fb::PipelineT& t) { kernel_node(t, kMain, 2).args[2]->ref = 5; },
       "graph 'main' node 2 arg 2: buffer index 5 is out of range (the pipeline has 5 buffers)"},
      {"handle ref", [](fb::PipelineT& t) { kernel_node(t, kMain, 3).args[1]->ref = 1; },
       "graph 'main' node 3 arg 1: handle index 1 is out of range (the pipeline has 1 handle)"},
      {"graph exec of host graph",
       [](fb::PipelineT& t) { kernel_node(t, kMainTail, 0).args[1]->ref = kMain; },
       "graph 'main.1' node 0 arg 1: graph 'main' is not a device graph, so a kernel cannot "
       "launch it"},
      {"graph exec of itself in a host graph",
       [](fb::PipelineT& t) { kernel_node(t, kMainTail, 0).args[1]->ref = -1; },
       "graph 'main.1' node 0 arg 1: a graph exec of the graph itself (ref -1) is only valid in a "
       "device graph"},
      {"graph exec range", [](fb::PipelineT& t) { kernel_node(t, kMainTail, 0).args[1]->ref = 3; },
       "graph 'main.1' node 0 arg 1: graph index 3 is out of range (the pipeline has 3 graphs)"},
      {"graph exec of a family", [](fb::PipelineT& t) { t.graphs[kExpert]->family_size = 4; },
       "graph 'main.1' node 0 arg 1: graph 'expert' is a graph family; pass it as a GraphTable"},
      {"graph table of a non-family",
       [](fb::PipelineT& t) {
         t.kernels[2]->params[1]->kind = fb::KernelParamKind::GraphFamily;
         kernel_node(t, kMainTail, 0).args[1]->kind = fb::ArgKind::GraphTable;
       },
       "graph 'main.1' node 0 arg 1: graph 'expert' is not a graph family (family_size 0)"},
      {"graph table range",
       [](fb::PipelineT& t) {
         t.kernels[2]->params[1]->kind = fb::KernelParamKind::GraphFamily;
         kernel_node(t, kMainTail, 0).args[1]->kind = fb::ArgKind::GraphTable;
         kernel_node(t, kMainTail, 0).args[1]->ref = -1;
       },
       "graph 'main.1' node 0 arg 1: graph index -1 is out of range (the pipeline has 3 graphs)"},
      {"graph table of a family",
       [](fb::PipelineT& t) {
         t.kernels[2]->params[1]->kind = fb::KernelParamKind::GraphFamily;
         kernel_node(t, kMainTail, 0).args[1]->kind = fb::ArgKind::GraphTable;
         t.graphs[kExpert]->family_size = 4;
       },
       ""},
      {"a device graph launches itself",
       [](fb::PipelineT& t) {
         fb::KernelOpT tail;
         const fb::KernelOpT& launcher = kernel_node(t, kMainTail, 0);
         tail.kernel = launcher.kernel;
         tail.launch = std::make_unique<fb::LaunchShape>(*launcher.launch);
         for (int ref : {0, -1}) {
           tail.args.push_back(std::make_unique<fb::KernelArgT>());
           tail.args.back()->kind = ref == 0 ? fb::ArgKind::Buffer : fb::ArgKind::GraphExec;
           tail.args.back()->ref = ref;
           tail.args.back()->late = ref == -1;  // its own exec exists once it is instantiated
         }
         add_node(t, graph(t, kExpert), make_op(std::move(tail)));
       },
       ""},
  });
}

// A device graph 'second' (graph 3) whose one node launches `target` (kExpert, or -1: itself)
// with main.1's launcher kernel, the argument marked `late`; device_order becomes `order`.
void add_second(fb::PipelineT& t, int target, bool late, std::vector<int> order) {
  fb::KernelOpT k;
  const fb::KernelOpT& launcher = kernel_node(t, kMainTail, 0);
  k.kernel = launcher.kernel;
  k.launch = std::make_unique<fb::LaunchShape>(*launcher.launch);
  for (int ref : {0, target}) {
    k.args.push_back(std::make_unique<fb::KernelArgT>());
    k.args.back()->kind = k.args.size() == 1 ? fb::ArgKind::Buffer : fb::ArgKind::GraphExec;
    k.args.back()->ref = ref;
  }
  k.args.back()->late = late;
  auto g = std::make_unique<fb::GraphT>();
  g->name = "second";
  g->device = true;
  add_node(t, *g, make_op(std::move(k)));
  t.graphs.push_back(std::move(g));
  t.device_order = std::move(order);
}

TEST_CASE("validate: device_order and late graph arguments") {
  run({
      {"device_order empty", [](fb::PipelineT& t) { t.device_order.clear(); },
       "graph 'expert' is a device graph missing from device_order"},
      {"device_order range", [](fb::PipelineT& t) { t.device_order = {kExpert, 3}; },
       "device_order[1]: graph index 3 is out of range (the pipeline has 3 graphs)"},
      {"device_order host graph", [](fb::PipelineT& t) { t.device_order = {kMain, kExpert}; },
       "device_order[0]: graph 'main' is not a device graph; only device graphs are ordered"},
      {"device_order twice", [](fb::PipelineT& t) { t.device_order = {kExpert, kExpert}; },
       "device_order[1]: graph 'expert' is listed twice (also at device_order[0])"},
      {"device_order missing one", [](fb::PipelineT& t) { add_second(t, kExpert, false, {kExpert}); },
       "graph 'second' is a device graph missing from device_order"},
      {"a chain, callee first", [](fb::PipelineT& t) { add_second(t, kExpert, false, {kExpert, 3}); }, ""},
      {"a chain, callee after, not late",
       [](fb::PipelineT& t) { add_second(t, kExpert, false, {3, kExpert}); },
       "graph 'second' node 0 arg 1: the exec of graph 'expert' is not instantiated before graph 'second' "
       "(device_order), so the argument must be marked late"},
      {"a chain, callee after, late", [](fb::PipelineT& t) { add_second(t, kExpert, true, {3, kExpert}); }, ""},
      {"late, but the callee comes first",
       [](fb::PipelineT& t) { add_second(t, kExpert, true, {kExpert, 3}); },
       "graph 'second' node 0 arg 1: the argument is marked late, but the exec of graph 'expert' is "
       "instantiated before graph 'second' (device_order)"},
      {"self by ref -1, not late", [](fb::PipelineT& t) { add_second(t, -1, false, {kExpert, 3}); },
       "graph 'second' node 0 arg 1: the exec of the graph itself exists only once it is instantiated, so "
       "the argument must be marked late"},
      {"self by its index, not late", [](fb::PipelineT& t) { add_second(t, 3, false, {3, kExpert}); },
       "graph 'second' node 0 arg 1: the exec of the graph itself exists only once it is instantiated, so "
       "the argument must be marked late"},
      {"self by its index, late", [](fb::PipelineT& t) { add_second(t, 3, true, {kExpert, 3}); }, ""},
      {"late in a host graph", [](fb::PipelineT& t) { kernel_node(t, kMainTail, 0).args[1]->late = true; },
       "graph 'main.1' node 0 arg 1: the argument is marked late, but graph 'main.1' is a host graph, built "
       "after every device graph"},
      {"late buffer argument", [](fb::PipelineT& t) { kernel_node(t, kMainTail, 0).args[0]->late = true; },
       "graph 'main.1' node 0 arg 0: a Buffer argument is marked late; only a GraphExec argument can be set "
       "after instantiation"},
  });
}

TEST_CASE("validate: memcpy and memset nodes") {
  run({
      {"memcpy src", [](fb::PipelineT& t) { memcpy_node(t, kMain, 0).src = 5; },
       "graph 'main' node 0: memcpy source buffer index 5 is out of range (the pipeline has 5 "
       "buffers)"},
      {"memcpy dst", [](fb::PipelineT& t) { memcpy_node(t, kMain, 0).dst = -1; },
       "graph 'main' node 0: memcpy destination buffer index -1 is out of range (the pipeline "
       "has 5 buffers)"},
      {"memcpy same buffer",
       [](fb::PipelineT& t) { memcpy_node(t, kMain, 0).src = memcpy_node(t, kMain, 0).dst; },
       "graph 'main' node 0: memcpy source and destination are the same buffer 'u'"},
      {"memset dst", [](fb::PipelineT& t) { memset_node(t, kMain, 1).dst = 7; },
       "graph 'main' node 1: memset buffer index 7 is out of range (the pipeline has 5 buffers)"},
      {"memset size 3", [](fb::PipelineT& t) { memset_node(t, kMain, 1).element_size = 3; },
       "graph 'main' node 1: memset element size 3 is not 1, 2 or 4"},
      {"memset size 0", [](fb::PipelineT& t) { memset_node(t, kMain, 1).element_size = 0; },
       "graph 'main' node 1: memset element size 0 is not 1, 2 or 4"},
      {"memset size 8", [](fb::PipelineT& t) { memset_node(t, kMain, 1).element_size = 8; },
       "graph 'main' node 1: memset element size 8 is not 1, 2 or 4"},
      {"memset value byte",
       [](fb::PipelineT& t) {
         memset_node(t, kMain, 1).element_size = 1;
         memset_node(t, kMain, 1).value = 256;
       },
       "graph 'main' node 1: memset value 256 does not fit in 1 byte"},
      {"memset value half",
       [](fb::PipelineT& t) {
         memset_node(t, kMain, 1).element_size = 2;
         memset_node(t, kMain, 1).value = 0x10000;
       },
       "graph 'main' node 1: memset value 65536 does not fit in 2 bytes"},
      {"memset value word", [](fb::PipelineT& t) { memset_node(t, kMain, 1).value = 0xFFFFFFFF; },
       ""},
      {"memset element does not divide",
       [](fb::PipelineT& t) { t.buffers[3]->type = fb::ScalarType::U16; },
       "graph 'main' node 1: memset element size 4 does not divide the 2-byte elements of buffer "
       "'flag'"},
  });
}

TEST_CASE("validate: conditional nodes") {
  run({
      {"if without bodies", [](fb::PipelineT& t) { cond_node(t, kMain, 4).bodies.clear(); },
       "graph 'main' node 4: If conditional has 0 bodies, expected 1 or 2"},
      {"if with three bodies",
       [](fb::PipelineT& t) { cond_node(t, kMain, 4).bodies.push_back(graph_of(t, empty_node())); },
       "graph 'main' node 4: If conditional has 3 bodies, expected 1 or 2"},
      {"if with one body", [](fb::PipelineT& t) { cond_node(t, kMain, 4).bodies.pop_back(); }, ""},
      {"while with two bodies",
       [](fb::PipelineT& t) { cond_node(t, kMain, 4).type = fb::ConditionalType::While; },
       "graph 'main' node 4: While conditional has 2 bodies, expected 1"},
      {"while with one body",
       [](fb::PipelineT& t) {
         cond_node(t, kMain, 4).type = fb::ConditionalType::While;
         cond_node(t, kMain, 4).bodies.pop_back();
       },
       ""},
      {"switch without bodies",
       [](fb::PipelineT& t) {
         cond_node(t, kMain, 4).type = fb::ConditionalType::Switch;
         cond_node(t, kMain, 4).bodies.clear();
       },
       "graph 'main' node 4: Switch conditional has no bodies, expected at least 1"},
      {"switch with three bodies",
       [](fb::PipelineT& t) {
         cond_node(t, kMain, 4).type = fb::ConditionalType::Switch;
         cond_node(t, kMain, 4).bodies.push_back(graph_of(t, empty_node()));
       },
       ""},
      {"unknown type",
       [](fb::PipelineT& t) { cond_node(t, kMain, 4).type = fb::ConditionalType(3); },
       "graph 'main' node 4: unknown conditional type 3"},
      {"handle range", [](fb::PipelineT& t) { cond_node(t, kMain, 4).handle = 1; },
       "graph 'main' node 4: conditional handle index 1 is out of range (the pipeline has 1 "
       "handle)"},
      {"handle missing", [](fb::PipelineT& t) { cond_node(t, kMain, 4).handle = -1; },
       "graph 'main' node 4: conditional handle index -1 is out of range (the pipeline has 1 "
       "handle)"},
      {"handle shared by two nodes",
       [](fb::PipelineT& t) {
         fb::ConditionalOpT second;
         second.handle = 0;
         second.bodies.push_back(graph_of(t, empty_node()));
         add_node(t, graph(t, kMain), make_op(std::move(second)));
       },
       "graph 'main' node 6: conditional handle 0 is already used by another conditional node (a "
       "handle drives one node)"},
      {"in a device graph",
       [](fb::PipelineT& t) {
         fb::ConditionalOpT cond;
         cond.handle = 0;
         cond.bodies.push_back(graph_of(t, empty_node()));
         add_node(t, graph(t, kExpert), make_op(std::move(cond)));
       },
       "graph 'expert' node 1: a device graph cannot hold a conditional node"},
      {"device body", [](fb::PipelineT& t) { cond_node(t, kMain, 4).bodies[0]->device = true; },
       "graph 'main' node 4 body 0: a conditional body cannot be a device graph"},
      {"family body", [](fb::PipelineT& t) { cond_node(t, kMain, 4).bodies[1]->family_size = 2; },
       "graph 'main' node 4 body 1: a conditional body cannot be a graph family"},
      {"error inside a body",
       [](fb::PipelineT& t) { kernel_node(t, cond_node(t, kMain, 4).bodies[0], 0).kernel = 9; },
       "graph 'main' node 4 body 0 node 0: kernel index 9 is out of range (the pipeline has 3 "
       "kernels)"},
      {"dependency inside a body",
       [](fb::PipelineT& t) { set_deps(*cond_node(t, kMain, 4).bodies[1], 0, {0}); },
       "graph 'main' node 4 body 1 node 0: dependency 0 is not an earlier node"},
  });
}

namespace {

// Appends to main a conditional nested `depth` bodies deep, each level with its own handle.
void nest(fb::PipelineT& t, int depth) {
  std::unique_ptr<fb::OpT> inner = empty_node();
  for (int level = 0; level < depth; ++level) {
    fb::ConditionalOpT cond;
    cond.type = fb::ConditionalType::While;
    cond.handle = static_cast<int>(t.handles.size());
    t.handles.push_back(std::make_unique<fb::ConditionalHandleT>());
    t.handles.back()->graph = kMain;
    cond.bodies.push_back(graph_of(t, std::move(inner)));
    inner = make_op(std::move(cond));
  }
  add_node(t, graph(t, kMain), std::move(inner));
}

}  // namespace

namespace {

// main.1's launcher op (kernel 'launcher', which launches 'expert' from the device), moved out;
// main.1's node 0 becomes an empty node.
std::unique_ptr<fb::OpT> take_launcher(fb::PipelineT& t) {
  fb::OpT& launcher = node(t, kMainTail, 0);
  auto n = std::make_unique<fb::OpT>(std::move(launcher));
  launcher = *empty_node();
  return n;
}

// A copy of kernel 'scale' that launches kernels from the device, used by the op given.
void make_cdp(fb::PipelineT& t, fb::OpT& n) {
  auto k = std::make_unique<fb::KernelT>(*t.kernels[0]);
  k->name = "parent";
  k->launches_kernels = true;
  body_of<fb::KernelOpT>(n).kernel = static_cast<int>(t.kernels.size());
  t.kernels.push_back(std::move(k));
}

}  // namespace

TEST_CASE("validate: kernels that launch from the device") {
  run({
      {"graph launcher in a conditional body",
       [](fb::PipelineT& t) {
         auto launcher = take_launcher(t);
         add_node(t, *cond_node(t, kMain, 4).bodies[0], std::move(launcher));
       },
       "graph 'main' node 4 body 0 node 1: kernel 'launcher' launches graphs from the device, "
       "which a conditional body cannot hold"},
      {"graph launcher beside a conditional node",
       [](fb::PipelineT& t) {
         auto launcher = take_launcher(t);
         add_node(t, graph(t, kMain), std::move(launcher));
       },
       "graph 'main': holds conditional nodes and kernels that launch from the device; one "
       "executable graph cannot hold both"},
      {"graph launcher in its own segment", [](fb::PipelineT& t) { (void)t; }, ""},
      {"collective beside a conditional node",
       [](fb::PipelineT& t) { add_node(t, graph(t, kMain), new_collective()); },
       "graph 'main': holds conditional nodes and collectives; one executable graph cannot hold "
       "both"},
      {"kernel launcher (dynamic parallelism) in a device graph",
       [](fb::PipelineT& t) { make_cdp(t, node(t, kExpert, 0)); },
       "graph 'expert' node 0: kernel 'parent' launches kernels from the device, which a device "
       "graph cannot hold"},
      {"kernel launcher in a conditional body",
       [](fb::PipelineT& t) { make_cdp(t, node(t, cond_node(t, kMain, 4).bodies[0], 0)); },
       "graph 'main' node 4 body 0 node 0: kernel 'parent' launches kernels from the device, which "
       "a conditional body cannot hold"},
      {"kernel launcher beside a conditional node",
       [](fb::PipelineT& t) {
         make_cdp(t, node(t, kMain, 2));
         graph(t, kMain).dep_kinds.clear();  // else node 3's programmatic edge is refused first
       },
       "graph 'main': holds conditional nodes and kernels that launch from the device; one "
       "executable graph cannot hold both"},
      {"kernel launcher at top level, then its op in a conditional body",
       [](fb::PipelineT& t) {
         make_cdp(t, node(t, kMain, 2));
         graph(t, kMain).dep_kinds.clear();
         fb::GraphT& then_body = *cond_node(t, kMain, 4).bodies[0];
         add_node(then_body, graph(t, kMain).nodes[2].op());
       },
       "graph 'main' node 4 body 0 node 1: kernel 'parent' launches kernels from the device, which a conditional body "
       "cannot hold"},
      {"kernel launcher in a segment without conditional nodes",
       [](fb::PipelineT& t) {
         auto n = std::make_unique<fb::OpT>(node(t, kMain, 2));
         make_cdp(t, *n);
         add_node(t, graph(t, kMainTail), std::move(n));
       },
       ""},
  });
}

TEST_CASE("validate: edge kinds (programmatic edges)") {
  using fb::EdgeKind;
  // The sample's main node 3 (the generated condition kernel, which waits at entry) depends on
  // node 1 (a memset) fully and on node 2 (the scale kernel) programmatically.
  run({
      {"every edge written as Full",
       [](fb::PipelineT& t) { graph(t, kMain).dep_kinds.assign(graph(t, kMain).deps.size(), EdgeKind::Full); }, ""},
      {"no kinds: every edge Full", [](fb::PipelineT& t) { graph(t, kMain).dep_kinds.clear(); }, ""},
      {"fewer kinds than deps", [](fb::PipelineT& t) { graph(t, kMain).dep_kinds.pop_back(); },
       "graph 'main': dep_kinds has 4 entries for 5 dependencies"},
      {"more kinds than deps", [](fb::PipelineT& t) { graph(t, kMain).dep_kinds.push_back(EdgeKind::Full); },
       "graph 'main': dep_kinds has 6 entries for 5 dependencies"},
      {"unknown kind",
       [](fb::PipelineT& t) { set_deps(graph(t, kMain), 3, {1, 2}, {EdgeKind::Full, EdgeKind(2)}); },
       "graph 'main' node 3: dependency 2 has unknown edge kind 2"},
      {"from a memset",
       [](fb::PipelineT& t) { set_deps(graph(t, kMain), 3, {1, 2}, {EdgeKind::Programmatic, EdgeKind::Full}); },
       "graph 'main' node 3: programmatic dependency on node 1: node 1 is a memset node; a programmatic "
       "edge joins two kernel nodes"},
      {"into a conditional node",
       [](fb::PipelineT& t) { set_deps(graph(t, kMain), 4, {3}, {EdgeKind::Programmatic}); },
       "graph 'main' node 4: programmatic dependency on node 3: this node is a conditional node; a "
       "programmatic edge joins two kernel nodes"},
      {"into an empty node",
       [](fb::PipelineT& t) {
         set_deps(graph(t, kMain), 5, {3}, {EdgeKind::Programmatic});
       },
       "graph 'main' node 5: programmatic dependency on node 3: this node is an empty node; a "
       "programmatic edge joins two kernel nodes"},
      {"into a kernel that does not wait at entry",
       [](fb::PipelineT& t) { t.kernels[1]->waits_at_entry = false; },
       "graph 'main' node 3: programmatic dependency on node 2: kernel '__orch_cond_0' does not wait "
       "at entry (waits_at_entry), so it could read what node 2 writes before it is written"},
      {"from a kernel that launches kernels",
       [](fb::PipelineT& t) { make_cdp(t, node(t, kMain, 2)); },
       "graph 'main' node 3: programmatic dependency on node 2: kernel 'parent' launches work from the "
       "device; a programmatic edge cannot join it"},
      {"into a kernel that launches graphs",
       [](fb::PipelineT& t) {
         // main.1's launcher, made to wait at entry, programmatically after a scale kernel (in
         // place of the launcher at node 0).
         auto launcher = std::make_unique<fb::OpT>(node(t, kMainTail, 0));
         const fb::OpT scale = node(t, kMain, 2);
         node(t, kMainTail, 0) = scale;
         const uint32_t i = add_node(t, graph(t, kMainTail), std::move(launcher));
         set_deps(graph(t, kMainTail), i, {0}, {EdgeKind::Programmatic});
         t.kernels[2]->waits_at_entry = true;
       },
       "graph 'main.1' node 3: programmatic dependency on node 0: kernel 'launcher' launches work from "
       "the device; a programmatic edge cannot join it"},
      {"a target without programmatic dependent launch",
       [](fb::PipelineT& t) { t.targets = {"sm_90", "sm_80"}; },
       "graph 'main' node 3: programmatic dependency on node 2: programmatic edges need compute "
       "capability 9.0 or newer, but the pipeline targets sm_80"},
      {"a target that is not an sm arch", [](fb::PipelineT& t) { t.targets = {"compute_90"}; },
       "graph 'main' node 3: programmatic dependency on node 2: programmatic edges need compute "
       "capability 9.0 or newer, but the pipeline targets compute_90"},
      {"no targets", [](fb::PipelineT& t) { t.targets.clear(); },
       "graph 'main' node 3: programmatic dependency on node 2: programmatic edges need compute "
       "capability 9.0 or newer, and the pipeline lists no targets"},
      {"sm_80 without programmatic edges",
       [](fb::PipelineT& t) {
         t.targets = {"sm_80"};
         graph(t, kMain).dep_kinds.clear();
       },
       ""},
      {"sm_90a and sm_100", [](fb::PipelineT& t) { t.targets = {"sm_90a", "sm_100"}; }, ""},
      {"between kernels of a conditional body",
       [](fb::PipelineT& t) {
         // A second node running the same op (shared, as the writer shares it).
         fb::GraphT& body = *cond_node(t, kMain, 4).bodies[0];
         set_deps(body, add_node(body, body.nodes[0].op()), {0}, {EdgeKind::Programmatic});
         t.kernels[0]->waits_at_entry = true;
       },
       ""},
  });
}

TEST_CASE("validate: nesting depth") {
  auto tree = sample_tree();
  nest(*tree, static_cast<int>(kMaxGraphDepth));
  CHECK(open_error(*tree) == "");

  tree = sample_tree();
  nest(*tree, static_cast<int>(kMaxGraphDepth) + 1);
  // The path: graph, node 6, (body 0, node 0) for each of the 64 levels allowed, then the body
  // that is one too deep: 131 frames, of which the first and last six are printed.
  CHECK(open_error(*tree) ==
        "graph 'main' node 6 body 0 node 0 body 0 node 0 ... (119 more) ... node 0 body 0 node 0 "
        "body 0 node 0 body 0: conditional bodies are nested more than 64 deep");

  // Ops are one flat vector, so nesting is no deeper in the buffer: the validator's limit holds
  // at any depth.
  tree = sample_tree();
  nest(*tree, 100);
  CHECK(open_error(*tree) ==
        "graph 'main' node 6 body 0 node 0 body 0 node 0 ... (119 more) ... node 0 body 0 node 0 "
        "body 0 node 0 body 0: conditional bodies are nested more than 64 deep");

  // An op among its own bodies' nodes (a cycle through indices) stops at the same limit.
  tree = sample_tree();
  {
    fb::GraphT& then_body = *body_of<fb::ConditionalOpT>(*tree->ops[tree->graphs[kMain]->nodes[4].op()]).bodies[0];
    add_node(then_body, tree->graphs[kMain]->nodes[4].op());
  }
  CHECK(open_error(*tree) == "graph 'main' node 4 body 0 node 1: conditional handle 0 is already used by "
                             "another conditional node (a handle drives one node)");
}

TEST_CASE("validate: collective nodes") {
  run({
      {"in a device graph",
       [](fb::PipelineT& t) { add_node(t, graph(t, kExpert), new_collective()); },
       "graph 'expert' node 1: a device graph cannot hold a collective"},
      {"in a conditional body",
       [](fb::PipelineT& t) { add_node(t, *cond_node(t, kMain, 4).bodies[1], new_collective()); },
       "graph 'main' node 4 body 1 node 1: a collective cannot be inside a conditional body (ranks "
       "could diverge)"},
      {"unknown kind",
       [](fb::PipelineT& t) { collective_node(t, kMainTail, 1).collective = fb::CollectiveKind(4); },
       "graph 'main.1' node 1: unknown collective kind 4"},
      {"unknown reduce op",
       [](fb::PipelineT& t) { collective_node(t, kMainTail, 1).reduce_op = fb::ReduceOp(5); },
       "graph 'main.1' node 1: unknown reduce op 5"},
      {"comm range", [](fb::PipelineT& t) { collective_node(t, kMainTail, 1).comm = 1; },
       "graph 'main.1' node 1: comm index 1 is out of range (the pipeline has 1 comm)"},
      {"source buffer", [](fb::PipelineT& t) { collective_node(t, kMainTail, 1).src = 9; },
       "graph 'main.1' node 1: collective source buffer index 9 is out of range (the pipeline has "
       "5 buffers)"},
      {"destination buffer", [](fb::PipelineT& t) { collective_node(t, kMainTail, 1).dst = -1; },
       "graph 'main.1' node 1: collective destination buffer index -1 is out of range (the "
       "pipeline has 5 buffers)"},
      {"broadcast needs a root",
       [](fb::PipelineT& t) { collective_node(t, kMainTail, 1).collective = fb::CollectiveKind::Broadcast; },
       "graph 'main.1' node 1: root is missing"},
      {"broadcast with a root",
       [](fb::PipelineT& t) {
         collective_node(t, kMainTail, 1).collective = fb::CollectiveKind::Broadcast;
         collective_node(t, kMainTail, 1).root = expr({lit(0)});
       },
       ""},
      {"bad root",
       [](fb::PipelineT& t) {
         collective_node(t, kMainTail, 1).root = expr({lit(0), op(Op::Not), op(Op::Or)});
       },
       "graph 'main.1' node 1: root: expression instruction 2 (Or) needs 2 operands, the stack "
       "holds 1"},
  });
}

namespace {

// A pipeline of `node_count` kernel nodes: with `shared_op`, all run one op; else each its own op,
// the ops sharing one grid vector, one block vector and one argument vector, each pointing at the
// same long expression: a few kilobytes that would expand to many megabytes if walked naively.
// `big` is the expression's length.
std::string shared_pipeline(int big, int node_count, bool shared_op = false) {
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<fb::ExprInstr> code;
  code.push_back(lit(1));
  for (int i = 1; i < big; i += 2) {
    code.push_back(lit(1));
    code.push_back(op(Op::Add));
  }
  const auto e = fb::CreateExprDirect(fbb, &code);
  const auto grid = fbb.CreateVector(std::vector<flatbuffers::Offset<fb::Expr>>{e, e, e});
  const auto arg = fb::CreateKernelArg(fbb, fb::ArgKind::Value, fb::ScalarType::U32, e);
  const auto args = fbb.CreateVector(std::vector<flatbuffers::Offset<fb::KernelArg>>{arg});
  std::vector<flatbuffers::Offset<fb::Op>> ops;
  std::vector<fb::Node> nodes;
  for (int i = 0; i < node_count; ++i) {
    if (!shared_op || i == 0)
      ops.push_back(fb::CreateOp(fbb, 0, fb::OpBody::KernelOp,
                                 fb::CreateKernelOp(fbb, 0, nullptr, grid, grid, e, args).Union()));
    nodes.emplace_back(static_cast<uint32_t>(ops.size() - 1), 0, fb::SourceLoc());
  }
  const auto main = fb::CreateGraph(fbb, fbb.CreateString("main"), fbb.CreateVectorOfStructs(nodes));
  const std::vector<uint8_t> cubin(16, 1);
  const std::vector<flatbuffers::Offset<fb::KernelImage>> images = {
      fb::CreateKernelImageDirect(fbb, "sm_90", &cubin)};
  const std::vector<flatbuffers::Offset<fb::KernelParam>> params = {
      fb::CreateKernelParamDirect(fbb, "x", fb::KernelParamKind::Value, fb::ScalarType::U32)};
  const std::vector<flatbuffers::Offset<fb::Kernel>> kernels = {
      fb::CreateKernelDirect(fbb, "k", "k", false, &images, nullptr, nullptr, &params)};
  const std::vector<flatbuffers::Offset<fb::Graph>> graphs = {main};
  fb::FinishPipelineBuffer(
      fbb, fb::CreatePipelineDirect(fbb, "shared", nullptr, nullptr, nullptr, nullptr, nullptr,
                                    nullptr, &kernels, &graphs, 0, nullptr, nullptr, nullptr, 0, nullptr,
                                    nullptr, &ops));
  return std::string(reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize());
}

}  // namespace

TEST_CASE("validate: one op shared by many nodes is checked once") {
  // 20,000 nodes running one op with three 4,001-instruction expressions: walked per node, that
  // would be 20,000 times the op; checked once per graph, it fits the budget with room to spare.
  const std::string payload = shared_pipeline(4001, 20000, /*shared_op=*/true);
  CHECK(open(wrap(payload)).error == "");
}

TEST_CASE("validate: an op no node runs is refused") {
  auto tree = sample_tree();
  tree->ops.push_back(empty_node());
  CHECK(open_error(*tree) == "op " + std::to_string(tree->ops.size() - 1) + " is used by no node");
}

TEST_CASE("validate: shared sub-tables cannot blow up the walk") {
  const std::string modest = shared_pipeline(3, 50);  // sharing a short expression is fine
  CHECK(open(wrap(modest)).error == "");

  const std::string bomb = shared_pipeline(4001, 200);
  CHECK(bomb.size() < 200000);
  CHECK(open(wrap(bomb)).error ==
        "the pipeline expands to more than 4 times its size through shared sub-tables; refusing "
        "to walk it");
}

namespace {

// A vector of one T that starts 4 bytes off an 8-byte boundary: something FlatBufferBuilder never
// writes and the verifier does not check (it checks a vector's length field, not its structs'
// alignment). The vector is made to point into a [uint] vector so that one element reads as the
// length, the next ones as one T.
template <class T>
flatbuffers::Offset<flatbuffers::Vector<const T*>> misaligned_vector(flatbuffers::FlatBufferBuilder& fbb) {
  static_assert(sizeof(T) <= 6 * 4, "the [uint] vector holds a length and six words");
  const auto words = fbb.CreateVector(std::vector<uint32_t>{1, 1, 0, 0, 0, 0, 0, 0});
  // Builder offsets count from the end of the finished (8-byte aligned) buffer, so a struct at
  // builder offset d is misaligned exactly when d % 8 == 4. The pseudo vector starting at word
  // k has its data at o - 4k - 4.
  const uint32_t o = words.o;
  const uint32_t k = (o - 4) % 8 == 4 ? 0 : 1;
  return flatbuffers::Offset<flatbuffers::Vector<const T*>>(o - 4 * k);
}

// A pipeline with one empty node; `misaligned` says which vector starts 4 bytes off: the code of
// its one buffer's count, or its memory plan's slots.
enum class Misaligned { ExprCode, ArenaSlots };
std::string misaligned_pipeline(Misaligned what) {
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<fb::Buffer>> buffers;
  flatbuffers::Offset<fb::MemoryPlan> plan = 0;
  if (what == Misaligned::ExprCode) {
    const auto count = fb::CreateExpr(fbb, misaligned_vector<fb::ExprInstr>(fbb));
    buffers.push_back(fb::CreateBuffer(fbb, fbb.CreateString("b"), fb::ScalarType::U8, count));
  } else {
    plan = fb::CreateMemoryPlan(fbb, 256, misaligned_vector<fb::ArenaSlot>(fbb));
  }
  const std::vector<flatbuffers::Offset<fb::Op>> ops = {
      fb::CreateOp(fbb, 0, fb::OpBody::EmptyOp, fb::CreateEmptyOp(fbb).Union())};
  const std::vector<fb::Node> nodes = {fb::Node(0, 0, fb::SourceLoc())};
  const std::vector<flatbuffers::Offset<fb::Graph>> graphs = {
      fb::CreateGraph(fbb, fbb.CreateString("main"), fbb.CreateVectorOfStructs(nodes))};
  fb::FinishPipelineBuffer(
      fbb, fb::CreatePipelineDirect(fbb, "misaligned", nullptr, nullptr, nullptr, nullptr, &buffers,
                                    nullptr, nullptr, &graphs, 0, nullptr, nullptr, nullptr,
                                    // a 64-bit field: the builder then pads the buffer to 8 bytes
                                    /*collective_hash=*/1, nullptr, nullptr, &ops, plan));
  return std::string(reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize());
}

}  // namespace

TEST_CASE("validate: a misaligned expression is refused before it is read") {
  const std::string payload = misaligned_pipeline(Misaligned::ExprCode);
  REQUIRE(payload.size() % 8 == 0);
  CHECK(open(wrap(payload)).error == "buffer 'b' count: expression code is not 8-byte aligned");
}

// Found by scripts/fuzz-artifact: the slots were read (8-byte structs) before this check.
TEST_CASE("validate: misaligned memory plan slots are refused before they are read") {
  const std::string payload = misaligned_pipeline(Misaligned::ArenaSlots);
  REQUIRE(payload.size() % 8 == 0);
  CHECK(open(wrap(payload)).error == "memory plan: slots are not 8-byte aligned");
}

// The verifier passes a union whose type names a table that is not there (the object API cannot
// write one): its op is refused, naming it.
TEST_CASE("validate: an op whose body type has no table is refused") {
  flatbuffers::FlatBufferBuilder fbb;
  const std::vector<flatbuffers::Offset<fb::Op>> ops = {fb::CreateOp(fbb, 0, fb::OpBody::KernelOp, 0)};
  const std::vector<fb::Node> nodes = {fb::Node(0, 0, fb::SourceLoc())};
  const std::vector<flatbuffers::Offset<fb::Graph>> graphs = {
      fb::CreateGraph(fbb, fbb.CreateString("main"), fbb.CreateVectorOfStructs(nodes))};
  fb::FinishPipelineBuffer(
      fbb, fb::CreatePipelineDirect(fbb, "bodiless", nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                    &graphs, 0, nullptr, nullptr, nullptr, 0, nullptr, nullptr, &ops));
  const std::string payload(reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize());
  CHECK(open(wrap(payload)).error == "graph 'main' node 0: op 0 is a KernelOp without its table");
}

// The sample's plan: v (4 MiB at 0) and counts (32 KiB at 4 MiB), conflicting.
TEST_CASE("validate: memory plan") {
  using Slot = fb::ArenaSlot;
  run({
      {"no plan at all", [](fb::PipelineT& t) { t.memory_plan.reset(); }, ""},
      {"the two slots may share once the conflict is gone: the layout may overlap them",
       [](fb::PipelineT& t) {
         t.memory_plan->conflicts.clear();
         t.memory_plan->slots[1] = Slot(4, 0, 32768);
         t.memory_plan->arena_bytes = 4u << 20;
       },
       ""},
      {"alignment", [](fb::PipelineT& t) { t.memory_plan->alignment = 100; },
       "memory plan: alignment 100 is not a power of two from 256 to 2^30"},
      {"alignment too small", [](fb::PipelineT& t) { t.memory_plan->alignment = 128; },
       "memory plan: alignment 128 is not a power of two from 256 to 2^30"},
      {"slot buffer out of range", [](fb::PipelineT& t) { t.memory_plan->slots[1] = Slot(9, 4u << 20, 32768); },
       "memory plan slot 1: buffer index 9 is out of range (the pipeline has 5 buffers)"},
      {"slots out of order", [](fb::PipelineT& t) { t.memory_plan->slots[0] = Slot(4, 0, 4u << 20); },
       "memory plan slot 1: buffers are not in increasing order"},
      {"host slot", [](fb::PipelineT& t) { t.memory_plan->slots[0] = Slot(2, 0, 4u << 20); },
       "memory plan slot 0: buffer 'u_host' is host memory, which never shares an arena"},
      {"symmetric slot", [](fb::PipelineT& t) { t.buffers[t.memory_plan->slots[0].buffer()]->symmetric = true; },
       "memory plan slot 0: buffer 'v' is on NVSHMEM's symmetric heap, which never shares an arena"},
      {"scalar slot", [](fb::PipelineT& t) { t.memory_plan->slots[0] = Slot(3, 0, 4); },
       "memory plan slot 0: buffer 'flag' is a device scalar, which never shares an arena"},
      {"conflict reversed", [](fb::PipelineT& t) { t.memory_plan->conflicts[0] = fb::SlotPair(1, 0); },
       "memory plan conflict 0 (1, 0) is not two slots, lower first, of the 2"},
      {"conflict past the slots", [](fb::PipelineT& t) { t.memory_plan->conflicts[0] = fb::SlotPair(0, 2); },
       "memory plan conflict 0 (0, 2) is not two slots, lower first, of the 2"},
      {"conflict repeated", [](fb::PipelineT& t) { t.memory_plan->conflicts.push_back(fb::SlotPair(0, 1)); },
       "memory plan conflict 1 is out of order or repeated"},
      {"conflicting slots overlap", [](fb::PipelineT& t) { t.memory_plan->slots[1] = Slot(4, 4u << 19, 32768); },
       "memory plan: slots 0 and 1 may be in use at the same time but share bytes"},
      {"offset not aligned", [](fb::PipelineT& t) { t.memory_plan->slots[1] = Slot(4, (4u << 20) + 8, 32768); },
       "memory plan: slot 1 is at offset 4194312, not a multiple of 256"},
      {"slot past the arena", [](fb::PipelineT& t) { t.memory_plan->arena_bytes = 4u << 20; },
       "memory plan: slot 1 (32768 bytes at 4194304) ends past the arena's 4194304 bytes"},
      {"not laid out, yet placed", [](fb::PipelineT& t) { t.memory_plan->laid_out = false; },
       "memory plan slot 0 has an offset or size, but the plan is not laid out"},
      {"not laid out, arena size set",
       [](fb::PipelineT& t) {
         t.memory_plan->laid_out = false;
         t.memory_plan->slots = {Slot(1, 0, 0), Slot(4, 0, 0)};
       },
       "memory plan: arena_bytes is set, but the plan is not laid out"},
      {"not laid out", [](fb::PipelineT& t) {
         t.memory_plan->laid_out = false;
         t.memory_plan->slots = {Slot(1, 0, 0), Slot(4, 0, 0)};
         t.memory_plan->arena_bytes = 0;
       },
       ""},
  });
}
