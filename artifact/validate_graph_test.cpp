// validate()'s rules for graphs, nodes, dependencies and edge kinds (validate_graph.cpp, and
// the pipeline's handles, main graph and segments); see validate_test.cpp.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "artifact/validate_test_util.h"

using namespace orch::artifact;
using namespace orch::artifact::test;
namespace fb = orch::fb;

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
