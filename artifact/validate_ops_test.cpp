// validate()'s rules for each op kind and a kernel node's arguments (validate_ops.cpp); see
// validate_test.cpp.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "artifact/validate_test_util.h"

using namespace orch::artifact;
using namespace orch::artifact::test;
namespace fb = orch::fb;

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
