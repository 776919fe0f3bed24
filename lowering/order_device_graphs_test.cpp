// order_device_graphs: the order device graphs are instantiated in and the late graph arguments,
// on a self tail launch, a chain, a cycle and a family; the printer shows both, and the artifact
// records what the lowered program holds (the validator accepting it).
#include <doctest/doctest.h>

#include <cstring>

#include "lowering/speed_test_support.h"

namespace orch {
namespace {

// The structure build_lir makes, without the speed passes.
std::unique_ptr<Lowered> lower_plain(const std::string& text) { return lower_text(text, plain_lowering()); }

int graph(const lir::Program& p, const std::string& name) {
  for (size_t g = 0; g < p.graphs.size(); ++g)
    if (p.graphs[g].name == name) return static_cast<int>(g);
  FAIL("no graph " << name);
  return -1;
}

std::vector<std::string> order(const lir::Program& p) {
  std::vector<std::string> out;
  for (int g : p.device_order) out.push_back(p.graphs[g].name);
  return out;
}

// "exec b", "exec self (late)", "table experts": every graph argument of graph `name`'s kernels.
std::vector<std::string> graph_args(const lir::Program& p, const std::string& name) {
  std::vector<std::string> out;
  lir::for_each_node(p.graphs[graph(p, name)].body, [&](const lir::Node& n) {
    if (const auto* k = std::get_if<lir::KernelNode>(&n.op))
      for (const lir::KernelArg& a : k->args) {
        if (a.kind == lir::ArgKind::GraphTable) {
          CHECK_FALSE(a.late);
          out.push_back("table " + p.graphs[a.ref].name);
        }
        if (a.kind == lir::ArgKind::GraphExec)
          out.push_back(std::string("exec ") + (a.self ? "self" : p.graphs[a.ref].name) + (a.late ? " (late)" : ""));
        if (a.kind != lir::ArgKind::GraphExec) CHECK_FALSE(a.late);
      }
  });
  return out;
}

// `hop` launches graph `next` once, fire-and-forget; `again` its own graph, as a tail launch.
const char* const kHop = R"orch(
kernel hop(next: graph) launches next fire_and_forget <= 1 source """
extern "C" __global__ void hop(cudaGraphExec_t next) { cudaGraphLaunch(next, cudaStreamGraphFireAndForget); }
"""
kernel work(x: inout f32[]) source """
extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }
"""
kernel again(self: graph) launches self tail <= 1 source """
extern "C" __global__ void again(cudaGraphExec_t self) { cudaGraphLaunch(self, cudaStreamGraphTailLaunch); }
"""
)orch";

std::string pipeline(const std::string& graphs) {
  return "pipeline order\ntarget sm_90\nbuffer x: f32[32]\n" + std::string(kHop) + graphs;
}

TEST_CASE("order_device_graphs: a self tail launch is late, the host's launch is not") {
  auto l = lower_plain(R"orch(pipeline rounds
target sm_90
buffer x: f32[32]
kernel again(x: inout f32[], self: graph) launches self tail <= 1 source """
extern "C" __global__ void again(float* x, cudaGraphExec_t self) {
  if (x[0] < 10.0f) { x[0] += 1.0f; cudaGraphLaunch(self, cudaStreamGraphTailLaunch); }
}
"""
graph rounds device {
  again<<<1, 1>>>(x, self)
}
graph main {
  launch rounds tail
}
)orch");
  const lir::Program& p = l->program;
  CHECK(order(p) == std::vector<std::string>{"rounds"});
  CHECK(graph_args(p, "rounds") == std::vector<std::string>{"exec self (late)"});
  CHECK(graph_args(p, "main") == std::vector<std::string>{"exec rounds"});
  const std::string text = lir::print(p, l->sources);
  CHECK(text.find("device order rounds\n") != std::string::npos);
  CHECK(text.find("exec self (late)") != std::string::npos);
}

TEST_CASE("order_device_graphs: a chain is instantiated callee first, nothing late") {
  // Declared caller first: a launches b, b launches c.
  auto l = lower_plain(pipeline(R"orch(
graph a device {
  hop<<<1, 1>>>(b)
}
graph b device {
  hop<<<1, 1>>>(c)
}
graph c device {
  work<<<1, 32>>>(x)
}
graph main {
  launch a tail
}
)orch"));
  const lir::Program& p = l->program;
  CHECK(order(p) == std::vector<std::string>{"c", "b", "a"});
  CHECK(graph_args(p, "a") == std::vector<std::string>{"exec b"});
  CHECK(graph_args(p, "b") == std::vector<std::string>{"exec c"});
  CHECK(lir::print(p, l->sources).find("device order c, b, a\n") != std::string::npos);
}

TEST_CASE("order_device_graphs: in a cycle, the graph that closes it takes the other's exec late") {
  // a launches b and b launches a: b is placed first (a is on the path when b is visited), so
  // b's argument naming a is late and a's naming b is not. (main launches neither: a launch from
  // the host could launch a twice in one execution, E0608.)
  auto l = lower_plain(pipeline(R"orch(
graph a device {
  hop<<<1, 1>>>(b)
}
graph b device {
  hop<<<1, 1>>>(a)
}
graph main {
  work<<<1, 32>>>(x)
}
)orch"));
  const lir::Program& p = l->program;
  CHECK(order(p) == std::vector<std::string>{"b", "a"});
  CHECK(graph_args(p, "a") == std::vector<std::string>{"exec b"});
  CHECK(graph_args(p, "b") == std::vector<std::string>{"exec a (late)"});
}

TEST_CASE("order_device_graphs: a family's table is never late, a single graph's exec is ordered") {
  // route's graph comes before the family in the order (only `graph` arguments order it), and
  // still takes the family's table at build time: tables exist before any graph is built.
  auto l = lower_plain(R"orch(pipeline family
target sm_90
buffer x: f32[32]
kernel route(experts: graph[4], finish: graph) launches experts fire_and_forget <= 4, finish tail <= 1
    source """
extern "C" __global__ void route(cudaGraphExec_t* experts, cudaGraphExec_t finish) {
  for (int e = 0; e < 4; ++e) cudaGraphLaunch(experts[e], cudaStreamGraphFireAndForget);
  cudaGraphLaunch(finish, cudaStreamGraphTailLaunch);
}
"""
kernel work(e: u32, x: inout f32[]) source """
extern "C" __global__ void work(unsigned e, float* x) { x[e] += 1.0f; }
"""
graph top device {
  route<<<1, 1>>>(experts, finish)
}
graph experts[e: 4] device {
  work<<<1, 1>>>(e, x)
}
graph finish device {
  work<<<1, 1>>>(0, x)
}
graph main {
  launch top tail
}
)orch");
  const lir::Program& p = l->program;
  CHECK(order(p) == std::vector<std::string>{"finish", "top", "experts"});
  CHECK(graph_args(p, "top") == std::vector<std::string>{"table experts", "exec finish"});
}

TEST_CASE("order_device_graphs: the artifact records the order and the late arguments") {
  auto l = lower_plain(pipeline(R"orch(
graph a device {
  hop<<<1, 1>>>(b)
  again<<<1, 1>>>(self)
}
graph b device {
  hop<<<1, 1>>>(a)
}
graph main {
  work<<<1, 32>>>(x)
}
)orch"));
  lir::Program& p = l->program;
  for (lir::Kernel& k : p.kernels) {
    k.lowered_name = k.name;
    k.images = {{"sm_90", "stand-in"}};
  }
  const std::string bytes = lowering::serialize(p, l->sources);
  std::vector<uint64_t> aligned((bytes.size() + 7) / 8);
  std::memcpy(aligned.data(), bytes.data(), bytes.size());
  auto opened = artifact::open_pipeline(reinterpret_cast<const uint8_t*>(aligned.data()), bytes.size());
  REQUIRE_MESSAGE(opened.ok(), opened.error);
  const fb::Pipeline& f = *opened.pipeline;
  REQUIRE(f.device_order());
  CHECK(std::vector<int>(f.device_order()->begin(), f.device_order()->end()) == p.device_order);
  // Each graph's exec arguments, late or not, as the lowered program has them.
  for (int g : p.device_order) {
    std::vector<bool> lowered, written;
    lir::for_each_node(p.graphs[g].body, [&](const lir::Node& n) {
      if (const auto* k = std::get_if<lir::KernelNode>(&n.op))
        for (const lir::KernelArg& a : k->args)
          if (a.kind == lir::ArgKind::GraphExec) lowered.push_back(a.late);
    });
    const fb::Graph& fg = *f.graphs()->Get(static_cast<flatbuffers::uoffset_t>(g));
    for (const fb::Node* n : *fg.nodes())
      if (const fb::KernelOp* k = f.ops()->Get(n->op())->body_as_KernelOp())
        for (const fb::KernelArg* a : *k->args())
          if (a->kind() == fb::ArgKind::GraphExec) written.push_back(a->late());
    CHECK(written == lowered);
  }
  CHECK(graph_args(p, "a") == std::vector<std::string>{"exec b", "exec self (late)"});
  CHECK(graph_args(p, "b") == std::vector<std::string>{"exec a (late)"});
}

}  // namespace
}  // namespace orch
