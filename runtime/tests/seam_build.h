// The seam tests' builder (seam_test.cpp, seam_undo_test.cpp): an Executable made as
// instantiate() makes it after its buffers (Impl::build_all), against the recording fake of the
// CUDA seam (fake_graph_api.h), with made-up buffer addresses and kernel handles; and the checks
// that every top-level graph is what the artifact says.
#pragma once

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

namespace orch::test::seam {

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

inline uintptr_t u(const void* p) { return reinterpret_cast<uintptr_t>(p); }
template <class H>
uintptr_t h(H handle) {
  return reinterpret_cast<uintptr_t>(handle);
}

inline uint64_t f32_slot(float v) {
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

inline OpenedExample compiled(const std::string& name, const std::string& source) {
  std::string log;
  const std::string path = orch::test::compile_source(name, source, &log);
  INFO(log);
  REQUIRE(!path.empty());
  return orch::test::open_artifact(path);
}

// The golden sample artifact (artifact/sample_pipeline.cpp), opened as the runtime opens a file:
// it has every node kind, an empty node and a programmatic edge among them, two segments and a
// device graph.
inline OpenedExample sample() {
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

inline Bindings sample_bindings() {
  Bindings b;
  b.param("n", 1024u).param("mode", 1);
  return b;
}

// Every kind of host node: kernels, a copy, fills, an if/else, a while loop, a switch.
inline const char* const kHostPipeline = R"(pipeline seam_host
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

inline OpenedExample host_pipeline() { return compiled("seam_host", kHostPipeline); }

inline Bindings host_bindings(unsigned n = 1000) {
  Bindings b;
  b.param("n", n);
  return b;
}

// Checks graph `g` (the fake's) against artifact graph `graph`, node by node, recursing into
// conditional bodies: the kind, the dependencies, and the parameters each kind takes from the
// artifact and the plan (kernel, buffer arguments; copy and fill addresses and sizes; a
// conditional's handle, type and bodies; a collective's buffers and count).
inline void check_graph(FakeBuild& f, uintptr_t g, const fb::Graph& graph, const Impl::Top& t,
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
inline void check_built(FakeBuild& f) {
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

inline size_t count(const std::vector<std::string>& names, const std::string& name) {
  return static_cast<size_t>(std::count(names.begin(), names.end(), name));
}

}  // namespace orch::test::seam
