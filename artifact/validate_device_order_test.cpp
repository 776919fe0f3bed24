// validate()'s rules for device_order and late graph arguments (validate_device_order.cpp); see
// validate_test.cpp.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "artifact/validate_test_util.h"

using namespace orch::artifact;
using namespace orch::artifact::test;
namespace fb = orch::fb;

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
