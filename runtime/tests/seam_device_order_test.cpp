// Device graphs built and instantiated in the artifact's device_order (orchc's
// order_device_graphs), against the recording fake of the CUDA seam: a graph's exec argument is
// set at build time where its graph came first, and only the late ones (a self tail launch, the
// graph that closes a cycle) are set on the executable graphs after every device graph is
// instantiated, before any upload. set_param afterwards re-evaluates them like any argument.
// (main launches neither graph: a launch from the host could launch `a` twice, E0608.)
#include <doctest/doctest.h>

#include <set>

#include "runtime/tests/seam_build.h"

using namespace orch::test::seam;

namespace {

// a launches b and itself (a tail launch); b launches a: a cycle. orchc orders b first (a is
// declared first, and is on the path when b is visited), so b's argument naming a is late, and
// so is a's own.
const char* const kCycle = R"orch(pipeline seam_cycle
target sm_90
param n: u32 = 32
buffer x: f32[32]
kernel hop(next: graph) launches next fire_and_forget <= 1 source """
extern "C" __global__ void hop(cudaGraphExec_t next) { cudaGraphLaunch(next, cudaStreamGraphFireAndForget); }
"""
kernel again(self: graph) launches self tail <= 1 source """
extern "C" __global__ void again(cudaGraphExec_t self) { cudaGraphLaunch(self, cudaStreamGraphTailLaunch); }
"""
kernel work(x: inout f32[]) source """
extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }
"""
graph a device {
  hop<<<1, 1>>>(b)
  again<<<1, 1>>>(self)
}
graph b device {
  hop<<<1, 1>>>(a)
}
graph main {
  work<<<1, n>>>(x)
}
)orch";

// The index of the first call named `name` acting on `on` (any when 0), or calls.size().
size_t first_call(const FakeBuild& f, const std::string& name, uintptr_t on = 0) {
  for (size_t i = 0; i < f.cuda.calls.size(); ++i)
    if (f.cuda.calls[i].name == name && (on == 0 || f.cuda.calls[i].on == on)) return i;
  return f.cuda.calls.size();
}

}  // namespace

TEST_CASE("seam: device graphs are instantiated in device_order, and only late arguments are patched after") {
  FakeBuild f;
  ORCH_REQUIRE_OK(f.build(compiled("seam_cycle", kCycle), Bindings()));
  check_built(f);  // every exec argument, late or not, holds its graph's exec in the end

  // The artifact's order, which is not the graphs' index order.
  REQUIRE(f.p->device_order());
  const std::vector<int> order(f.p->device_order()->begin(), f.p->device_order()->end());
  CHECK(order == std::vector<int>{f.graph("b"), f.graph("a")});
  const Impl::Top& a = f.top("a");
  const Impl::Top& b = f.top("b");
  const auto instantiates = f.cuda.named("instantiate");
  REQUIRE(instantiates.size() == 3);
  CHECK(instantiates[0]->on == h(b.graph_template.get()));
  CHECK(instantiates[1]->on == h(a.graph_template.get()));
  CHECK(instantiates[2]->on == h(f.top("main").graph_template.get()));
  // b is built whole before a's template gets a node.
  const std::vector<uintptr_t>& a_nodes = f.cuda.graph_nodes.at(h(a.graph_template.get()));
  const std::vector<uintptr_t>& b_nodes = f.cuda.graph_nodes.at(h(b.graph_template.get()));
  REQUIRE(a_nodes.size() == 2);
  REQUIRE(b_nodes.size() == 1);
  const uintptr_t a_hop = a_nodes[0], a_again = a_nodes[1], b_hop = b_nodes[0];

  // At build time: a's hop already has b's exec (b came first); the late ones are null.
  auto added = [&](uintptr_t node) -> const FakeCall& {
    for (const FakeCall& c : f.cuda.calls)
      if (c.name == "add_kernel_node" && c.node == node) return c;
    FAIL("no add_kernel_node made node " << node);
    return f.cuda.calls.front();
  };
  CHECK(added(a_hop).params.args == std::vector<uint64_t>{h(b.exec.get())});
  CHECK(added(a_again).params.args == std::vector<uint64_t>{0});
  CHECK(added(b_hop).params.args == std::vector<uint64_t>{0});

  // After instantiation, exactly the late nodes are set, in the template and the exec, each once,
  // before the first upload; no other node is touched.
  const size_t last_device_instantiate = first_call(f, "instantiate", h(a.graph_template.get()));
  const size_t first_upload = first_call(f, "upload");
  std::multiset<uintptr_t> set_template, set_exec;
  for (size_t i = 0; i < f.cuda.calls.size(); ++i) {
    const FakeCall& c = f.cuda.calls[i];
    if (c.name != "kernel_node_set_params" && c.name != "exec_kernel_node_set_params") continue;
    CHECK(i > last_device_instantiate);
    CHECK(i < first_upload);
    (c.name == "kernel_node_set_params" ? set_template : set_exec).insert(c.node);
  }
  CHECK(set_template == std::multiset<uintptr_t>{a_again, b_hop});
  CHECK(set_exec == std::multiset<uintptr_t>{a_again, b_hop});
  CHECK(f.cuda.exec_node(h(a.exec.get()), a_again).args == std::vector<uint64_t>{h(a.exec.get())});
  CHECK(f.cuda.exec_node(h(b.exec.get()), b_hop).args == std::vector<uint64_t>{h(a.exec.get())});

  // set_param re-evaluates every node, exec arguments included: only the changed launch (main's)
  // is patched, not the late arguments again.
  const size_t from = f.cuda.calls.size();
  ORCH_REQUIRE_OK(f.exec->set_param("n", 16u));
  const std::vector<std::string> names = f.cuda.names_since(from);
  CHECK(count(names, "kernel_node_set_params") == 1);
  CHECK(count(names, "exec_kernel_node_set_params") == 1);
  const std::vector<uintptr_t> main_work = f.kernel_nodes(f.top("main"), f.kernel("work"));
  REQUIRE(main_work.size() == 1);
  for (size_t i = from; i < f.cuda.calls.size(); ++i)
    if (f.cuda.calls[i].name == "exec_kernel_node_set_params") CHECK(f.cuda.calls[i].node == main_work[0]);
  check_built(f);
}
