// The graph builder and the patcher on the CPU, against the recording fake of the CUDA seam
// (fake_graph_api.h): every node kind the runtime builds (kernel, memcpy, memset, conditional
// IF/WHILE/SWITCH with their bodies, device graphs and families with their exec tables, a
// device graph's own exec, collectives captured into a segment), checked node by node against
// the artifact; every set_param patch path (in place, refused then updated, device graphs
// re-uploaded at the next launch, a segment rebuilt for a collective, nothing to patch); and
// undo: each CUDA call of a patch failed in turn leaves the Executable, its graphs and its
// executable graphs exactly as they were. The Executable is made as instantiate() makes it
// after its buffers (Impl::build_all), with made-up buffer addresses and kernel handles.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "artifact/sample_pipeline.h"
#include "runtime/src/executable_impl.h"
#include "runtime/tests/fake_graph_api.h"
#include "runtime/tests/test_util.h"

namespace {

namespace fb = orch::fb;
using orch::Bindings;
using orch::Executable;
using orch::Status;
using orch::test::FakeCall;
using orch::test::FakeGraphApi;
using orch::test::FakeParams;
using orch::test::FakeState;
using orch::test::OpenedExample;
using Impl = orch::Executable::Impl;

uintptr_t u(const void* p) { return reinterpret_cast<uintptr_t>(p); }
template <class H>
uintptr_t h(H handle) {
  return reinterpret_cast<uintptr_t>(handle);
}

uint64_t f32_slot(float v) {
  uint64_t s = 0;
  std::memcpy(&s, &v, sizeof v);
  return s;
}

// One Executable built against a fake. Not movable: the Executable points at `cuda`.
struct FakeBuild {
  FakeGraphApi cuda;  // outlives the Executable, whose owners free through it
  OpenedExample artifact;
  const fb::Pipeline* p = nullptr;
  std::unique_ptr<Executable> exec;
  std::unique_ptr<Impl> failed;  // a build that failed, kept for inspection
  Impl* x = nullptr;
  Status built;

  FakeBuild() = default;
  FakeBuild(const FakeBuild&) = delete;

  // Builds `a` with `b` as instantiate() would after the buffers; `comm_world`: the world size
  // of a made-up communicator bound to every comm (rank 0).
  Status build(OpenedExample a, Bindings b, int comm_world = 0) {
    artifact = std::move(a);
    p = artifact.p;
    auto pl = std::make_shared<orch::Pipeline::Impl>();
    pl->fb = p;
    pl->name = p->name()->str();
    pl->device = 0;
    pl->arch = 90;
    const uint32_t nkernels = p->kernels() ? p->kernels()->size() : 0;
    for (uint32_t k = 0; k < nkernels; ++k) {
      const uintptr_t handle = 0xC0DE00000000 + 0x1000 * (k + 1);
      pl->kernels.push_back(reinterpret_cast<cudaKernel_t>(handle));
      const fb::Kernel* kernel = p->kernels()->Get(k);
      cuda.kernel_arg_count[handle] = kernel->params() ? kernel->params()->size() : 0;
    }
    pl->shared_bytes_allowed.assign(nkernels, 0);
    auto impl = std::make_unique<Impl>();
    impl->cuda = &cuda;
    impl->pipeline = pl;
    impl->p = p;
    const uint32_t ncomms = p->comms() ? p->comms()->size() : 0;
    for (uint32_t c = 0; c < ncomms; ++c) {
      void* comm = reinterpret_cast<void*>(uintptr_t{0xC0330000} + 0x100 * c);
      impl->comms.use_unchecked(c, comm, 0, comm_world);
      b.comm(p->comms()->Get(c)->name()->string_view(), comm, 0, comm_world);
    }
    orch::Result<orch::rt::Plan> plan = orch::rt::make_plan(*p, b);
    if (!plan.ok()) return plan.error();
    impl->plan = std::move(plan.value());
    impl->bindings = b;
    const uint32_t nbuffers = p->buffers() ? p->buffers()->size() : 0;
    impl->buffers.resize(nbuffers);
    for (uint32_t i = 0; i < nbuffers; ++i) {
      Impl::BufferState& s = impl->buffers[i];
      s.ptr = reinterpret_cast<void*>(uintptr_t{0x7000000000} + (uintptr_t{i} << 32));
      s.capacity = impl->plan.buffers[i].bytes;
    }
    built = impl->build_all(nullptr);
    x = impl.get();
    if (!built.ok()) {
      failed = std::move(impl);
      return built;
    }
    exec = std::make_unique<Executable>(std::move(impl));
    return {};
  }

  int graph(const std::string& name) const {
    for (uint32_t g = 0; g < p->graphs()->size(); ++g)
      if (p->graphs()->Get(g)->name()->str() == name) return static_cast<int>(g);
    FAIL("no graph " << name);
    return -1;
  }
  Impl::Top& top(const std::string& name, int member = -1) {
    const int g = graph(name);
    for (Impl::Top& t : x->tops)
      if (t.graph == g && t.member == member) return t;
    FAIL("no top " << name << "[" << member << "]");
    return x->tops.front();
  }
  uintptr_t buffer(const std::string& name) const {
    for (uint32_t i = 0; i < p->buffers()->size(); ++i)
      if (p->buffers()->Get(i)->name()->str() == name) return u(x->buffers[i].ptr);
    FAIL("no buffer " << name);
    return 0;
  }
  uintptr_t kernel(const std::string& name) const {
    for (uint32_t k = 0; k < p->kernels()->size(); ++k)
      if (p->kernels()->Get(k)->name()->str() == name) return h(x->pipeline->kernels[k]);
    FAIL("no kernel " << name);
    return 0;
  }
  // The template nodes of top-level graph `t` (bodies included, depth first) running `kernel`.
  std::vector<uintptr_t> kernel_nodes(const Impl::Top& t, uintptr_t kernel) const {
    std::vector<uintptr_t> all, out;
    cuda.nodes_of(h(t.graph_template.get()), &all);
    for (uintptr_t n : all)
      if (cuda.node(n).kind == "kernel" && cuda.node(n).kernel == kernel) out.push_back(n);
    return out;
  }
  double param(const char* name) const { return exec->param_as_double(name).value(); }
};

OpenedExample compiled(const std::string& name, const std::string& source) {
  std::string log;
  const std::string path = orch::test::compile_source(name, source, &log);
  INFO(log);
  REQUIRE(!path.empty());
  return orch::test::open_artifact(path);
}

// The golden sample artifact (artifact/sample_pipeline.cpp), opened as the runtime opens a file:
// it has every node kind, an empty node and a programmatic edge among them, two segments and a
// device graph.
OpenedExample sample() {
  const std::string bytes = orch::artifact::sample_artifact();
  OpenedExample o;
  o.size = bytes.size();
  o.storage.assign(bytes.size() / 8 + 1, 0);
  std::memcpy(o.storage.data(), bytes.data(), bytes.size());
  auto r = orch::artifact::open_pipeline(reinterpret_cast<const uint8_t*>(o.storage.data()), o.size);
  INFO(r.error);
  REQUIRE(r.ok());
  o.p = r.pipeline;
  return o;
}

Bindings sample_bindings() {
  Bindings b;
  b.param("n", 1024u).param("mode", 1);
  return b;
}

// Every kind of host node: kernels, a copy, fills, an if/else, a while loop, a switch.
const char* const kHostPipeline = R"(pipeline seam_host
target sm_90
param n: u32 = 1024
param scale: f32 = 2.0
buffer a: f32[n]
buffer b: f32[n]
buffer flag: u32
buffer iters: u32
buffer mode: u32
kernel axpy(n: u32, s: f32, x: in f32[], y: inout f32[]) source """
extern "C" __global__ void axpy(unsigned n, float s, const float* x, float* y) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += s * x[i];
}
"""
graph main {
  fill flag = 0
  copy a -> b
  axpy<<<ceil_div(n, 128), 128>>>(n, scale, a, b)
  if flag != 0 {
    fill b = 0
  } else {
    axpy<<<ceil_div(n, 256), 256>>>(n, 1.5, b, a)
  }
  fill iters = 0
  while iters < 3 {
    axpy<<<ceil_div(n, 64), 64>>>(n, scale, a, b)
    axpy<<<ceil_div(n, 64), 64>>>(n, scale, b, a)
    iters += 1
  }
  switch mode {
    case 0 { fill a = 0 }
    case 1 { copy b -> a }
    default { axpy<<<1, 32>>>(n, scale, b, a) }
  }
}
)";

OpenedExample host_pipeline() { return compiled("seam_host", kHostPipeline); }

Bindings host_bindings(unsigned n = 1000) {
  Bindings b;
  b.param("n", n);
  return b;
}

// Checks graph `g` (the fake's) against artifact graph `graph`, node by node, recursing into
// conditional bodies: the kind, the dependencies, and the parameters each kind takes from the
// artifact and the plan (kernel, buffer arguments; copy and fill addresses and sizes; a
// conditional's handle, type and bodies; a collective's buffers and count).
void check_graph(FakeBuild& f, uintptr_t g, const fb::Graph& graph, const Impl::Top& t,
                 int depth = 0) {
  const Impl& x = *f.x;
  const fb::Pipeline& p = *f.p;
  const auto it = f.cuda.graph_nodes.find(g);
  REQUIRE(it != f.cuda.graph_nodes.end());
  const std::vector<uintptr_t>& made = it->second;
  const uint32_t count = graph.nodes() ? graph.nodes()->size() : 0;
  REQUIRE(made.size() == count);
  uint32_t first = 0;
  for (uint32_t i = 0; i < count; ++i) {
    const fb::Node* at = graph.nodes()->Get(i);
    const fb::Op& op = *p.ops()->Get(at->op());
    const FakeParams& n = f.cuda.node(made[i]);
    INFO("graph '" << p.graphs()->Get(t.graph)->name()->str() << "' depth " << depth << " node "
                   << i << ": " << op.what()->str());
    // The artifact's dependencies, in order (a collective also waits for the one before it).
    std::vector<uintptr_t> deps;
    for (uint32_t j = first; j < at->deps_end(); ++j) deps.push_back(made[graph.deps()->Get(j)]);
    first = at->deps_end();
    const FakeCall* call = nullptr;
    for (const FakeCall& c : f.cuda.calls)  // the call that made it (later ones set it)
      if (c.node == made[i]) {
        call = &c;
        break;
      }
    REQUIRE(call);
    const orch::artifact::NodeKind kind = orch::artifact::op_kind(op);
    if (kind == orch::artifact::NodeKind::Collective) {
      for (uintptr_t d : deps)
        CHECK(std::find(call->deps.begin(), call->deps.end(), d) != call->deps.end());
    } else {
      CHECK(call->deps == deps);
    }
    switch (kind) {
      case orch::artifact::NodeKind::Kernel: {
        const fb::KernelOp& k = *op.body_as_KernelOp();
        REQUIRE(n.kind == "kernel");
        CHECK(n.kernel == h(x.pipeline->kernels[k.kernel()]));
        const uint32_t nargs = k.args() ? k.args()->size() : 0;
        REQUIRE(n.args.size() == nargs);
        for (uint32_t a = 0; a < nargs; ++a) {
          const fb::KernelArg* arg = k.args()->Get(a);
          switch (arg->kind()) {
            case fb::ArgKind::Buffer:
              CHECK(n.args[a] == u(x.buffers[arg->ref()].ptr));
              break;
            case fb::ArgKind::CondHandle:
              CHECK(n.args[a] == x.handles[arg->ref()]);
              break;
            case fb::ArgKind::GraphTable:
              CHECK(n.args[a] == u(x.tables[arg->ref()].get()));
              break;
            case fb::ArgKind::Status:
              CHECK(n.args[a] == u(x.status.get()));
              break;
            case fb::ArgKind::GraphExec: {
              const int ref = arg->ref() < 0 ? t.graph : arg->ref();
              const Impl::Top& target = ref == t.graph ? t : x.tops[x.top_of_graph[ref]];
              CHECK(target.exec);
              CHECK(n.args[a] == h(target.exec.get()));
              break;
            }
            case fb::ArgKind::Value:
              break;  // checked by the tests that know the values
          }
        }
        break;
      }
      case orch::artifact::NodeKind::Memcpy: {
        const fb::MemcpyOp& m = *op.body_as_MemcpyOp();
        REQUIRE(n.kind == "memcpy");
        CHECK(n.dst == u(x.buffers[m.dst()].ptr));
        CHECK(n.src == u(x.buffers[m.src()].ptr));
        CHECK(n.bytes == x.plan.buffers[m.src()].bytes);
        break;
      }
      case orch::artifact::NodeKind::Memset: {
        const fb::MemsetOp& m = *op.body_as_MemsetOp();
        REQUIRE(n.kind == "memset");
        CHECK(n.dst == u(x.buffers[m.dst()].ptr));
        CHECK(n.value == m.value());
        CHECK(n.element_size == m.element_size());
        CHECK(n.width == x.plan.buffers[m.dst()].bytes / m.element_size());
        CHECK(n.height == 1);
        break;
      }
      case orch::artifact::NodeKind::Empty:
        CHECK(n.kind == "empty");
        break;
      case orch::artifact::NodeKind::Conditional: {
        const fb::ConditionalOp& c = *op.body_as_ConditionalOp();
        REQUIRE(n.kind == "conditional");
        CHECK(n.cond_handle == x.handles[c.handle()]);
        const int type = c.type() == fb::ConditionalType::If      ? cudaGraphCondTypeIf
                         : c.type() == fb::ConditionalType::While ? cudaGraphCondTypeWhile
                                                                  : cudaGraphCondTypeSwitch;
        CHECK(n.cond_type == type);
        const uint32_t nbodies = c.bodies() ? c.bodies()->size() : 0;
        CHECK(n.cond_size == nbodies);
        const std::vector<uintptr_t>& bodies = f.cuda.bodies.at(made[i]);
        REQUIRE(bodies.size() == nbodies);
        for (uint32_t b = 0; b < nbodies; ++b)
          check_graph(f, bodies[b], *c.bodies()->Get(b), t, depth + 1);
        break;
      }
      case orch::artifact::NodeKind::Collective: {
        const fb::CollectiveOp& c = *op.body_as_CollectiveOp();
        REQUIRE(n.kind == "collective");
        CHECK(n.collective == static_cast<int>(c.collective()));
        CHECK(n.src == u(x.buffers[c.src()].ptr));
        CHECK(n.dst == u(x.buffers[c.dst()].ptr));
        CHECK(n.comm == u(x.comms.handle(static_cast<size_t>(c.comm()))));
        break;
      }
    }
  }
}

// Every top-level graph as the artifact says, and each executable graph holding exactly its
// template's parameters.
void check_built(FakeBuild& f) {
  for (const Impl::Top& t : f.x->tops) {
    check_graph(f, h(t.graph_template.get()), *f.p->graphs()->Get(t.graph), t);
    REQUIRE(t.exec);
    CHECK(f.cuda.graph_of_exec.at(h(t.exec.get())) == h(t.graph_template.get()));
    CHECK(f.cuda.exec_flags.at(h(t.exec.get())) ==
          (t.device ? static_cast<unsigned>(cudaGraphInstantiateFlagDeviceLaunch) : 0u));
    std::vector<uintptr_t> all;
    f.cuda.nodes_of(h(t.graph_template.get()), &all);
    for (uintptr_t n : all) CHECK(f.cuda.exec_node(h(t.exec.get()), n) == f.cuda.node(n));
  }
}

size_t count(const std::vector<std::string>& names, const std::string& name) {
  return static_cast<size_t>(std::count(names.begin(), names.end(), name));
}

}  // namespace

TEST_CASE(
    "seam: a host pipeline's kernels, copies, fills and IF/WHILE/SWITCH nodes are built as the "
    "artifact says") {
  FakeBuild f;
  ORCH_REQUIRE_OK(f.build(host_pipeline(), host_bindings(1000)));
  check_built(f);
  REQUIRE(f.x->tops.size() == 1);
  const Impl::Top& main = f.top("main");
  CHECK_FALSE(main.device);

  // The conditionals: an IF (with its else), a WHILE (host graphs with one launch after other
  // loops) and a SWITCH of three bodies, each on a handle created on main with the artifact's
  // default and flags.
  std::vector<int> types;
  for (uintptr_t n : f.cuda.graph_nodes.at(h(main.graph_template.get())))
    if (f.cuda.node(n).kind == "conditional") types.push_back(f.cuda.node(n).cond_type);
  CHECK(types ==
        std::vector<int>{cudaGraphCondTypeIf, cudaGraphCondTypeWhile, cudaGraphCondTypeSwitch});
  CHECK(f.x->has_loops);
  const auto creates = f.cuda.named("conditional_handle_create");
  REQUIRE(creates.size() == f.p->handles()->size());
  for (uint32_t i = 0; i < f.p->handles()->size(); ++i) {
    const fb::ConditionalHandle* ch = f.p->handles()->Get(i);
    CHECK(creates[i]->on == h(main.graph_template.get()));
    CHECK(creates[i]->default_value == ch->default_value());
    CHECK(creates[i]->flags ==
          (ch->set_default() ? static_cast<unsigned>(cudaGraphCondAssignDefault) : 0u));
    CHECK(f.x->handles[i] == creates[i]->node);
  }

  // The values: n = 1000, scale = 2 (the default), 1.5 in the else branch.
  const uintptr_t axpy = f.kernel("axpy");
  const std::vector<uintptr_t> nodes = f.kernel_nodes(main, axpy);
  REQUIRE(nodes.size() >= 4);
  const FakeParams& first = f.cuda.node(nodes[0]);
  CHECK(first.grid[0] == 8);  // ceil_div(1000, 128)
  CHECK(first.block[0] == 128);
  CHECK(first.grid[1] == 1);
  CHECK(first.block[2] == 1);
  CHECK(first.args == std::vector<uint64_t>{1000, f32_slot(2.0f), f.buffer("a"), f.buffer("b")});
  const FakeParams& branch = f.cuda.node(nodes[1]);
  CHECK(branch.grid[0] == 4);  // ceil_div(1000, 256)
  CHECK(branch.args == std::vector<uint64_t>{1000, f32_slot(1.5f), f.buffer("b"), f.buffer("a")});
  const FakeParams& loop = f.cuda.node(nodes[2]);
  CHECK(loop.grid[0] == 16);  // ceil_div(1000, 64)
  CHECK(loop.block[0] == 64);
  const FakeParams& last = f.cuda.node(nodes.back());
  CHECK(last.grid[0] == 1);
  CHECK(last.block[0] == 32);
  CHECK(last.args == std::vector<uint64_t>{1000, f32_slot(2.0f), f.buffer("b"), f.buffer("a")});

  // The order instantiate makes its calls in: the device status record (the generated
  // kernels of the conditions report into it), the template and its handles, the nodes, then
  // instantiate, upload and wait.
  const std::vector<std::string> names = f.cuda.names_since(0);
  REQUIRE(names.size() > 6);
  REQUIRE(f.x->status);
  CHECK(names[0] == "malloc");
  CHECK(f.cuda.calls[0].params.bytes == Impl::kStatusBytes);
  CHECK(names[1] == "memset_async");
  CHECK(names[2] == "graph_create");
  CHECK(names[3] == "conditional_handle_create");
  CHECK(names[names.size() - 3] == "instantiate");
  CHECK(names[names.size() - 2] == "upload");
  CHECK(names.back() == "stream_synchronize");
  CHECK(f.cuda.named("upload").front()->on == h(main.exec.get()));
}

TEST_CASE("seam: the sample artifact: every node kind, an empty node, a programmatic edge, two segments") {
  FakeBuild f;
  ORCH_REQUIRE_OK(f.build(sample(), sample_bindings(), 2));
  check_built(f);
  REQUIRE(f.x->segments.size() == 2);
  CHECK(f.top("expert").device);
  // Segments in order, after the device graph.
  const auto instantiates = f.cuda.named("instantiate");
  REQUIRE(instantiates.size() == 3);
  CHECK(instantiates[0]->on == h(f.top("expert").graph_template.get()));
  CHECK(instantiates[1]->on == h(f.top("main").graph_template.get()));
  CHECK(instantiates[2]->on == h(f.top("main.1").graph_template.get()));
  // main ends in an empty node after the IF.
  const std::vector<uintptr_t>& main = f.cuda.graph_nodes.at(h(f.top("main").graph_template.get()));
  CHECK(f.cuda.node(main.back()).kind == "empty");
  // The condition kernel's edge from the scale kernel is programmatic: both fit in one wave.
  const FakeCall* condition = nullptr;
  for (const FakeCall* c : f.cuda.named("add_kernel_node"))
    if (c->edge_types.size() == 2) condition = c;
  REQUIRE(condition);
  CHECK(condition->edge_types ==
        std::vector<int>{CU_GRAPH_DEPENDENCY_TYPE_DEFAULT, CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC});
  CHECK(f.exec->stats().programmatic_edges == 1);
  CHECK(f.exec->stats().programmatic_edges_made_full == 0);
  // main.1's launcher: a launch shape of constants, and the device graph's exec as argument.
  const std::vector<uintptr_t>& tail = f.cuda.graph_nodes.at(h(f.top("main.1").graph_template.get()));
  const FakeParams& launcher = f.cuda.node(tail[0]);
  CHECK(launcher.grid[0] == 8);
  CHECK(launcher.block[0] == 32);
  CHECK(launcher.args == std::vector<uint64_t>{f.buffer("u"), h(f.top("expert").exec.get())});
  CHECK(f.cuda.node(tail[1]).kind == "collective");
  CHECK(f.cuda.node(tail[1]).bytes == 1024);
}

TEST_CASE("seam: a programmatic edge is made full where a launch runs in more than one wave here") {
  FakeBuild f;
  f.cuda.blocks_per_sm = 0;  // the driver says no block fits: several waves
  ORCH_REQUIRE_OK(f.build(sample(), sample_bindings(), 2));
  for (const FakeCall* c : f.cuda.named("add_kernel_node")) CHECK(c->edge_types.empty());  // no edge data
  CHECK(f.exec->stats().programmatic_edges == 1);
  CHECK(f.exec->stats().programmatic_edges_made_full == 1);
}

TEST_CASE(
    "seam: device graphs and a family: members instantiated for device launch, their exec table "
    "filled") {
  FakeBuild f;
  ORCH_REQUIRE_OK(f.build(orch::test::open_example("moe"), Bindings()));
  check_built(f);
  const int experts = f.graph("experts");
  REQUIRE(f.p->graphs()->Get(experts)->family_size() == 8);
  REQUIRE(f.x->members[experts].size() == 8);
  // The table: allocated, then the eight execs copied into it in member order.
  REQUIRE(f.x->tables[experts]);
  const uintptr_t table = u(f.x->tables[experts].get());
  const auto mallocs = f.cuda.named("malloc");
  bool allocated = false;
  for (const FakeCall* c : mallocs)
    allocated |= c->node == table && c->params.bytes == 8 * sizeof(cudaGraphExec_t);
  CHECK(allocated);
  const FakeCall* fill = nullptr;
  for (const FakeCall* c : f.cuda.named("memcpy_async"))
    if (c->on == table) fill = c;
  REQUIRE(fill);
  REQUIRE(fill->data.size() == 8);
  for (int m = 0; m < 8; ++m) {
    const Impl::Top& member = f.top("experts", m);
    CHECK(member.device);
    CHECK(fill->data[m] == h(member.exec.get()));
    // expert_ffn's first argument is the family index.
    const std::vector<uintptr_t> nodes = f.kernel_nodes(member, f.kernel("expert_ffn"));
    REQUIRE(nodes.size() == 1);
    CHECK(f.cuda.node(nodes[0]).args.at(0) == static_cast<uint64_t>(m));
  }
  // Device graphs are built and instantiated before the segment that launches them.
  const auto instantiates = f.cuda.named("instantiate");
  REQUIRE(instantiates.size() == f.x->tops.size());
  CHECK(instantiates.back()->on == h(f.top("main").graph_template.get()));
  // route's table and finish's exec, in the segment.
  const std::vector<uintptr_t> route = f.kernel_nodes(f.top("main"), f.kernel("route"));
  REQUIRE(route.size() == 1);
  const FakeParams& r = f.cuda.node(route[0]);
  CHECK(std::find(r.args.begin(), r.args.end(), table) != r.args.end());
  CHECK(std::find(r.args.begin(), r.args.end(), h(f.top("finish").exec.get())) != r.args.end());
}

TEST_CASE(
    "seam: a device graph that tail-launches itself gets its own exec, in the template and the "
    "exec") {
  FakeBuild f;
  ORCH_REQUIRE_OK(f.build(orch::test::open_example("scheduler"), Bindings()));
  check_built(f);
  const Impl::Top& rounds = f.top("rounds");
  CHECK(rounds.device);
  const std::vector<uintptr_t> nodes = f.kernel_nodes(rounds, f.kernel("claim_and_run"));
  REQUIRE(nodes.size() == 1);
  const uintptr_t self = h(rounds.exec.get());
  CHECK(f.cuda.node(nodes[0]).args.back() == self);
  CHECK(f.cuda.exec_node(self, nodes[0]).args.back() == self);
  // Built with no exec yet (a null slot), then patched in place once instantiated: the refresh
  // of the device graphs inside build_all (instantiate() zeroes the stats after it).
  bool built_null = false;
  for (const FakeCall* c : f.cuda.named("add_kernel_node"))
    if (c->params.kernel == f.kernel("claim_and_run")) built_null = c->params.args.back() == 0;
  CHECK(built_null);
  CHECK(f.cuda.named("exec_kernel_node_set_params").size() == 1);
  CHECK(f.exec->stats().nodes_patched_in_place == 1);
  // The device status record, which the generated launcher takes: allocated and zeroed.
  CHECK(f.x->status);
}

TEST_CASE("seam: a collective is captured into its segment, after its dependencies") {
  FakeBuild f;
  Bindings b;
  b.param("n", 4096u);
  ORCH_REQUIRE_OK(f.build(orch::test::open_example("dp_step"), b, 2));
  check_built(f);
  const auto issued = f.cuda.named("issue_collective");
  REQUIRE(issued.size() == 1);
  const FakeParams& c = issued[0]->params;
  CHECK(c.collective == static_cast<int>(fb::CollectiveKind::AllReduce));
  CHECK(c.bytes == 4096);  // NCCL's count
  CHECK(c.src == f.buffer("g"));
  CHECK(c.dst == f.buffer("g"));
  CHECK(c.value == orch::rt::nccl::kFloat32);
  CHECK(c.element_size == orch::rt::nccl::kSum);
  const Impl::Top& main = f.top("main");
  const auto begins = f.cuda.named("begin_capture_to_graph");
  REQUIRE(begins.size() == 1);
  CHECK(begins[0]->node == h(main.graph_template.get()));
  CHECK(f.cuda.named("end_capture").size() == 1);
  // world_size 2: sgd's 1.0 / world_size is 0.5.
  const std::vector<uintptr_t> sgd = f.kernel_nodes(main, f.kernel("sgd"));
  REQUIRE(sgd.size() == 1);
  const std::vector<uint64_t>& args = f.cuda.node(sgd[0]).args;
  CHECK(std::find(args.begin(), args.end(), f32_slot(0.5f)) != args.end());
}

TEST_CASE(
    "seam: set_param patches kernels, copies and fills in the template and in place in the exec") {
  FakeBuild f;
  ORCH_REQUIRE_OK(f.build(host_pipeline(), host_bindings(1000)));
  const Impl::Top& main = f.top("main");
  const uintptr_t exec = h(main.exec.get());
  const uintptr_t axpy = f.kernel("axpy");

  SUBCASE("an argument only: the kernels that take it") {
    const size_t from = f.cuda.calls.size();
    ORCH_REQUIRE_OK(f.exec->set_param("scale", 3.0f));
    const std::vector<std::string> names = f.cuda.names_since(from);
    // Four launches take `scale` (the loop's two, unrolled or not, the first and the default
    // case): each patched once in the template and once in the exec, nothing else.
    const size_t patched = count(names, "kernel_node_set_params");
    CHECK(patched >= 4);
    CHECK(count(names, "exec_kernel_node_set_params") == patched);
    CHECK(names.size() == 2 * patched);
    CHECK(f.exec->stats().nodes_patched_in_place == patched);
    CHECK(f.exec->stats().graph_updates == 0);
    for (uintptr_t n : f.kernel_nodes(main, axpy)) {
      const FakeParams& k = f.cuda.node(n);
      CHECK(f.cuda.exec_node(exec, n) == k);
      CHECK((k.args[1] == f32_slot(3.0f) || k.args[1] == f32_slot(1.5f)));
    }
    CHECK(f.param("scale") == 3.0);
  }
  SUBCASE("a size: grids, copy bytes and fill widths") {
    const size_t from = f.cuda.calls.size();
    ORCH_REQUIRE_OK(f.exec->set_param("n", 2000u));
    const std::vector<std::string> names = f.cuda.names_since(from);
    CHECK(count(names, "memcpy_node_set_params_1d") == 2);  // a -> b, and b -> a in case 1
    CHECK(count(names, "exec_memcpy_node_set_params_1d") == 2);
    CHECK(count(names, "memset_node_set_params") == 2);  // fill b and fill a: 2000 elements now
    CHECK(count(names, "exec_memset_node_set_params") == 2);
    std::vector<uintptr_t> all;
    f.cuda.nodes_of(h(main.graph_template.get()), &all);
    size_t copies = 0, big_fills = 0;
    for (uintptr_t n : all) {
      const FakeParams& k = f.cuda.node(n);
      CHECK(f.cuda.exec_node(exec, n) == k);
      if (k.kind == "memcpy") {
        CHECK(k.bytes == 8000);
        ++copies;
      }
      if (k.kind == "memset" && k.width == 2000) ++big_fills;
      if (k.kind == "kernel" && k.kernel == axpy) CHECK(k.args[0] == 2000);
    }
    CHECK(copies == 2);
    CHECK(big_fills == 2);
    CHECK(f.cuda.node(f.kernel_nodes(main, axpy)[0]).grid[0] == 16);  // ceil_div(2000, 128)
    check_built(f);
  }
  SUBCASE("the same value again: nothing to patch") {
    const size_t from = f.cuda.calls.size();
    ORCH_REQUIRE_OK(f.exec->set_param("n", 1000u));
    CHECK(f.cuda.names_since(from).empty());
  }
  SUBCASE("a value the bind checks or the plan refuse: no CUDA call at all") {
    const size_t from = f.cuda.calls.size();
    CHECK_FALSE(f.exec->set_param("n", -1).ok());
    CHECK_FALSE(f.exec->set_param("nope", 1u).ok());
    CHECK(f.cuda.calls.size() == from);
  }
  SUBCASE("a patch the exec refuses: the whole graph is updated from the template") {
    f.cuda.fail_next("exec_kernel_node_set_params", cudaErrorGraphExecUpdateFailure);
    const size_t from = f.cuda.calls.size();
    ORCH_REQUIRE_OK(f.exec->set_param("scale", 3.0f));
    const std::vector<std::string> names = f.cuda.names_since(from);
    CHECK(count(names, "exec_update") == 1);
    CHECK(names.back() == "exec_update");
    const orch::Executable::Stats s = f.exec->stats();
    CHECK(s.patches_refused == 1);
    CHECK(s.graph_updates == 1);
    CHECK(s.nodes_patched_in_place == count(names, "exec_kernel_node_set_params") - 1);
    for (uintptr_t n : f.kernel_nodes(main, axpy))
      CHECK(f.cuda.exec_node(exec, n) == f.cuda.node(n));
  }
}

// rebind() checks the new memory with the driver (binding_checks.cpp, not behind the seam), then
// points the buffer at it and patches as set_param does: that patch, driven directly.
// Two allreduces, each after a small kernel; with `large`, a multi-wave kernel beside them.
std::string two_allreduces(bool large) {
  std::string t =
      "pipeline two_ar\ntarget sm_90\nparam n: u32 = 256\ncomm world\nbuffer big: f32[1 << 24]\n"
      "buffer g0: f32[n]\nbuffer g1: f32[n]\n"
      "kernel scale(n: u32, x: inout f32[]) source \"\"\"extern \"C\" __global__ void scale(unsigned n, float* x) "
      "{ unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 2.0f; }\"\"\"\n"
      "graph main {\n  scale<<<ceil_div(n, 256), 256>>>(n, g0)\n  allreduce sum g0 on world\n"
      "  scale<<<ceil_div(n, 256), 256>>>(n, g1)\n  allreduce sum g1 on world\n";
  if (large) t += "  scale<<<65536, 256>>>(1 << 24, big)\n";
  return t + "}\n";
}

OpenedExample compiled_with(const std::string& name, const std::string& source, const char* options) {
  std::string log;
  const std::string path = orch::test::compile_source(name, source, &log, options);
  INFO(log);
  REQUIRE(!path.empty());
  return orch::test::open_artifact(path);
}

// A collective that a kernel may run beside (lowering/prioritize_collectives.cpp) has NCCL's
// kernels at the device's greatest priority, and its segment is instantiated with node
// priorities; one with nothing beside it changes nothing.
TEST_CASE("seam: high-priority collectives: NCCL's kernels at the greatest priority, node priorities on") {
  for (bool large : {true, false}) {
    INFO("large kernel beside: " << large);
    FakeBuild f;
    ORCH_REQUIRE_OK(f.build(compiled_with(large ? "two_ar_large" : "two_ar", two_allreduces(large), ""), Bindings(), 2));
    const auto issued = f.cuda.named("issue_collective");
    REQUIRE(issued.size() == 2);
    const auto set = f.cuda.named("kernel_node_set_priority");
    const Impl::Top& main = f.top("main");
    if (large) {
      REQUIRE(set.size() == 2);
      for (int k = 0; k < 2; ++k) {
        CHECK(set[k]->node == issued[k]->node);  // the collective's (NCCL's) node, nothing else
        CHECK(f.cuda.node(set[k]->node).priority == -5);
      }
      CHECK(main.node_priority);
    } else {
      CHECK(set.empty());
      CHECK(f.cuda.named("graph_get_nodes").empty());
      CHECK_FALSE(main.node_priority);
    }
    bool instantiated = false;
    for (const auto* c : f.cuda.named("instantiate")) {
      if (c->on != h(main.graph_template.get())) continue;
      instantiated = true;
      CHECK(((c->flags & cudaGraphInstantiateFlagUseNodePriority) != 0) == large);
    }
    CHECK(instantiated);
  }
}

// The runtime keeps each collective after the one before it, by an edge of its own only where the
// graph does not already order them (a kernel lined up between them).
TEST_CASE("seam: a collective waits for the one before it, with no edge the graph already implies") {
  for (const char* options : {"", "--no-line-up"}) {
    INFO(options);
    const bool lined_up = options[0] == 0;
    FakeBuild f;
    ORCH_REQUIRE_OK(f.build(compiled_with(lined_up ? "two_ar" : "two_ar_free", two_allreduces(false), options), Bindings(), 2));
    const auto issued = f.cuda.named("issue_collective");
    REQUIRE(issued.size() == 2);
    const std::vector<uintptr_t>& second = issued[1]->deps;
    const bool has_chain_edge = std::find(second.begin(), second.end(), issued[0]->node) != second.end();
    CHECK(has_chain_edge == !lined_up);
    // Its kernel is always one of its dependencies.
    CHECK(!second.empty());
  }
}

TEST_CASE("seam: a buffer moved (rebind's patch): kernels, copies and fills that use it are patched") {
  FakeBuild f;
  ORCH_REQUIRE_OK(f.build(host_pipeline(), host_bindings(1000)));
  const Impl::Top& main = f.top("main");
  const uintptr_t old_b = f.buffer("b");
  int bi = -1;
  for (uint32_t i = 0; i < f.p->buffers()->size(); ++i)
    if (f.p->buffers()->Get(i)->name()->str() == "b") bi = static_cast<int>(i);
  REQUIRE(bi >= 0);
  const uintptr_t moved = 0x6600000000;
  f.x->buffers[bi].ptr = reinterpret_cast<void*>(moved);
  const size_t from = f.cuda.calls.size();
  ORCH_REQUIRE_OK(f.x->refresh(Impl::Scope::Everything));
  const std::vector<std::string> names = f.cuda.names_since(from);
  CHECK(count(names, "memcpy_node_set_params_1d") == 2);  // a -> b, b -> a
  CHECK(count(names, "memset_node_set_params") == 1);     // fill b
  CHECK(count(names, "kernel_node_set_params") >= 4);
  std::vector<uintptr_t> all;
  f.cuda.nodes_of(h(main.graph_template.get()), &all);
  for (uintptr_t n : all) {
    const FakeParams& k = f.cuda.node(n);
    CHECK(k.dst != old_b);
    CHECK(k.src != old_b);
    CHECK(std::find(k.args.begin(), k.args.end(), old_b) == k.args.end());
    CHECK(f.cuda.exec_node(h(main.exec.get()), n) == k);
  }
  check_built(f);
}

TEST_CASE("seam: set_param on a device graph patches it and the next launch uploads it once") {
  FakeBuild f;
  ORCH_REQUIRE_OK(f.build(orch::test::open_example("scheduler"), Bindings()));
  const Impl::Top& rounds = f.top("rounds");
  const size_t from = f.cuda.calls.size();
  ORCH_REQUIRE_OK(f.exec->set_param("batch", 1024u));
  std::vector<std::string> names = f.cuda.names_since(from);
  CHECK(count(names, "kernel_node_set_params") == 1);
  CHECK(count(names, "exec_kernel_node_set_params") == 1);
  CHECK(count(names, "upload") == 0);
  CHECK(rounds.upload_needed);
  const std::vector<uintptr_t> nodes = f.kernel_nodes(rounds, f.kernel("claim_and_run"));
  REQUIRE(nodes.size() == 1);
  CHECK(f.cuda.node(nodes[0]).args.at(1) == 1024);
  CHECK(f.cuda.exec_node(h(rounds.exec.get()), nodes[0]) == f.cuda.node(nodes[0]));

  const size_t before_launch = f.cuda.calls.size();
  ORCH_REQUIRE_OK(f.exec->launch(nullptr));
  names = f.cuda.names_since(before_launch);
  CHECK(names == std::vector<std::string>{"stream_is_capturing", "upload", "launch"});
  CHECK(f.cuda.calls[before_launch + 1].on == h(rounds.exec.get()));
  CHECK(f.cuda.calls[before_launch + 2].on == h(f.top("main").exec.get()));
  CHECK(f.exec->stats().device_graph_uploads == 1);
  CHECK_FALSE(rounds.upload_needed);
  const size_t second = f.cuda.calls.size();
  ORCH_REQUIRE_OK(f.exec->launch(nullptr));
  CHECK(f.cuda.names_since(second) == std::vector<std::string>{"stream_is_capturing", "launch"});
}

TEST_CASE(
    "seam: set_param that changes a collective builds, captures and instantiates its segment "
    "again") {
  FakeBuild f;
  Bindings b;
  b.param("n", 4096u);
  ORCH_REQUIRE_OK(f.build(orch::test::open_example("dp_step"), b, 2));
  const uintptr_t old_exec = h(f.top("main").exec.get());
  const uintptr_t old_graph = h(f.top("main").graph_template.get());
  const size_t from = f.cuda.calls.size();
  ORCH_REQUIRE_OK(f.exec->set_param("n", 8192u));
  const std::vector<std::string> names = f.cuda.names_since(from);
  CHECK(count(names, "graph_create") == 1);
  CHECK(count(names, "issue_collective") == 1);
  CHECK(count(names, "instantiate") == 1);
  CHECK(count(names, "upload") == 1);
  CHECK(count(names, "kernel_node_set_params") == 0);  // built anew, not patched
  CHECK(f.cuda.named("issue_collective").back()->params.bytes == 8192);
  CHECK(f.exec->stats().segments_rebuilt == 1);
  // The old graph and exec are gone once the new ones are in place.
  CHECK(h(f.top("main").exec.get()) != old_exec);
  bool destroyed_exec = false, destroyed_graph = false;
  for (size_t i = from; i < f.cuda.calls.size(); ++i) {
    destroyed_exec |= f.cuda.calls[i].name == "exec_destroy" && f.cuda.calls[i].on == old_exec;
    destroyed_graph |= f.cuda.calls[i].name == "graph_destroy" && f.cuda.calls[i].on == old_graph;
  }
  CHECK(destroyed_exec);
  CHECK(destroyed_graph);
  check_built(f);
}

namespace {

// What must be as it was after a failed set_param.
struct Snapshot {
  FakeState state;
  double param = 0;
  Executable::Stats stats;
  std::vector<bool> upload_needed, update_needed;
  std::vector<uintptr_t> execs, templates;
  size_t records = 0;
  static Snapshot of(FakeBuild& f, const char* param) {
    Snapshot s;
    s.state = f.cuda.state;
    s.param = f.param(param);
    s.stats = f.exec->stats();
    for (const Impl::Top& t : f.x->tops) {
      s.upload_needed.push_back(t.upload_needed);
      s.update_needed.push_back(t.update_needed);
      s.execs.push_back(h(t.exec.get()));
      s.templates.push_back(h(t.graph_template.get()));
    }
    s.records = f.x->records.size();
    return s;
  }
  void check_same(const Snapshot& o) const {
    CHECK(state == o.state);
    CHECK(param == o.param);
    CHECK(stats.nodes_patched_in_place == o.stats.nodes_patched_in_place);
    CHECK(stats.patches_refused == o.stats.patches_refused);
    CHECK(stats.graph_updates == o.stats.graph_updates);
    CHECK(stats.segments_rebuilt == o.stats.segments_rebuilt);
    CHECK(upload_needed == o.upload_needed);
    CHECK(update_needed == o.update_needed);
    CHECK(execs == o.execs);
    CHECK(templates == o.templates);
    CHECK(records == o.records);
  }
};

// Fails each call a successful set_param(name, value) makes, in turn, on a fresh build: every
// failure that set_param reports leaves the snapshot as it was (and the Executable usable:
// the same set_param then succeeds); a failure it absorbs (a refused in-place patch) still
// ends with every exec equal to its template. Returns how many calls failed the set_param.
template <class T>
size_t fail_each_call(const std::function<Status(FakeBuild&)>& build, const char* name, T value) {
  size_t calls = 0;
  {
    FakeBuild f;
    REQUIRE(build(f).ok());
    const size_t from = f.cuda.calls.size();
    REQUIRE(f.exec->set_param(name, value).ok());
    calls = f.cuda.calls.size() - from;
  }
  REQUIRE(calls > 0);
  size_t reported = 0;
  for (size_t k = 0; k < calls; ++k) {
    FakeBuild f;
    REQUIRE(build(f).ok());
    const Snapshot before = Snapshot::of(f, name);
    const size_t from = f.cuda.calls.size();
    CAPTURE(k);
    CAPTURE(f.cuda.calls.size() > from + k ? f.cuda.calls[from + k].name : std::string());
    f.cuda.fail_call(from + k, cudaErrorInvalidValue);
    const Status s = f.exec->set_param(name, value);
    if (!s.ok()) {
      ++reported;
      INFO("failed call " << f.cuda.calls[from + k].name << ": " << s.error().to_string());
      Snapshot::of(f, name).check_same(before);
      CHECK(s.error().message().find("refuses further use") == std::string::npos);
      f.cuda.clear_failures();
      ORCH_CHECK_OK(f.exec->set_param(name, value));
    }
    for (const Impl::Top& t : f.x->tops) {
      std::vector<uintptr_t> all;
      f.cuda.nodes_of(h(t.graph_template.get()), &all);
      for (uintptr_t n : all) CHECK(f.cuda.exec_node(h(t.exec.get()), n) == f.cuda.node(n));
    }
  }
  return reported;
}

}  // namespace

TEST_CASE("seam: undo: any CUDA call of a patch failing leaves the Executable as it was") {
  SUBCASE("kernels, copies and fills of a host graph") {
    auto build = [](FakeBuild& f) { return f.build(host_pipeline(), host_bindings(1000)); };
    CHECK(fail_each_call(build, "n", 2000u) > 0);
    CHECK(fail_each_call(build, "scale", 0.25f) > 0);
  }
  SUBCASE("a device graph") {
    auto build = [](FakeBuild& f) {
      return f.build(orch::test::open_example("scheduler"), Bindings());
    };
    CHECK(fail_each_call(build, "batch", 1024u) > 0);
  }
  SUBCASE("a family") {
    auto build = [](FakeBuild& f) { return f.build(orch::test::open_example("moe"), Bindings()); };
    CHECK(fail_each_call(build, "tokens", 2048u) > 0);
  }
  SUBCASE("the sample artifact: kernels, copies, fills, conditional bodies, a device graph, a collective") {
    auto build = [](FakeBuild& f) { return f.build(sample(), sample_bindings(), 2); };
    CHECK(fail_each_call(build, "n", 2048u) > 0);
    CHECK(fail_each_call(build, "tol", 0.5f) > 0);
  }
  SUBCASE("a segment rebuilt for its collective") {
    auto build = [](FakeBuild& f) {
      Bindings b;
      b.param("n", 4096u);
      return f.build(orch::test::open_example("dp_step"), b, 2);
    };
    CHECK(fail_each_call(build, "n", 8192u) > 0);
  }
}

TEST_CASE("seam: undo: a patch that cannot be undone leaves the Executable refusing further use") {
  FakeBuild f;
  ORCH_REQUIRE_OK(f.build(host_pipeline(), host_bindings(1000)));
  // The first exec patch is refused, the whole-graph update fails, and so does the undo's first
  // template call.
  f.cuda.fail_next("exec_kernel_node_set_params", cudaErrorGraphExecUpdateFailure);
  f.cuda.fail_next("exec_update", cudaErrorGraphExecUpdateFailure);
  size_t template_patches = 0;
  {
    FakeBuild probe;
    ORCH_REQUIRE_OK(probe.build(host_pipeline(), host_bindings(1000)));
    const size_t from = probe.cuda.calls.size();
    ORCH_REQUIRE_OK(probe.exec->set_param("scale", 3.0f));
    template_patches = count(probe.cuda.names_since(from), "kernel_node_set_params");
  }
  f.cuda.fail_next("kernel_node_set_params", cudaErrorInvalidValue,
                   static_cast<int>(template_patches));
  const Status s = f.exec->set_param("scale", 3.0f);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message().find("cannot update graph 'main' in place") != std::string::npos);
  CHECK(s.error().message().find("undoing the patches failed too") != std::string::npos);
  CHECK(s.error().message().find("so this Executable refuses further use") != std::string::npos);
  const size_t from = f.cuda.calls.size();
  const Status again = f.exec->set_param("scale", 1.0f);
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().message().find("instantiate the pipeline again") != std::string::npos);
  CHECK_FALSE(f.exec->launch(nullptr).ok());
  CHECK(f.cuda.calls.size() == from);  // refused before any CUDA call
}

TEST_CASE(
    "seam: building fails cleanly at any CUDA call, naming the node, and leaves nothing behind") {
  size_t calls = 0;
  {
    FakeBuild f;
    ORCH_REQUIRE_OK(f.build(orch::test::open_example("moe"), Bindings()));
    calls = f.cuda.calls.size();
  }
  size_t failed = 0;
  for (size_t k = 0; k < calls; ++k) {
    FakeBuild f;
    f.cuda.fail_call(k, cudaErrorInvalidValue);
    const Status s = f.build(orch::test::open_example("moe"), Bindings());
    const std::string name = f.cuda.calls[k].name;
    CAPTURE(k);
    CAPTURE(name);
    if (s.ok()) continue;
    ++failed;
    const std::string m = s.error().message();
    CHECK(s.error().cuda_error() == cudaErrorInvalidValue);
    if (name == "add_memset_node") CHECK(m.find("cudaGraphAddMemsetNode") != std::string::npos);
    if (name == "instantiate") CHECK(m.find("cannot instantiate graph '") != std::string::npos);
    if (name == "add_kernel_node") {
      CHECK(m.find("cuGraphAddNode (kernel)") != std::string::npos);
      CHECK(!s.error().where().empty());
    }
    // Everything made is freed with the Executable's state.
    f.failed.reset();
    CHECK(f.cuda.state.execs.empty());
    size_t graphs = 0, graph_destroys = 0, mallocs = 0, frees = 0;
    for (const FakeCall& c : f.cuda.calls) {
      graphs += c.name == "graph_create" && c.result == 0;
      graph_destroys += c.name == "graph_destroy";
      mallocs += c.name == "malloc" && c.result == 0;
      frees += c.name == "free";
    }
    CHECK(graphs == graph_destroys);
    CHECK(mallocs == frees);
  }
  CHECK(failed > calls / 2);
}
