// Instantiation: Pipeline::instantiate checks the device and the stream, opens the
// communicators, resolves params and buffers (executable_buffers.cpp), then builds every
// top-level graph (executable_build.cpp) in the order CUDA needs: device graphs and family
// members first, in the artifact's device_order, instantiated for device launch, their execs
// handed to the kernels that launch them (at build time where the callee came first; the late
// arguments, a self exec or a cycle's, patched after), then the host segments, which see every
// exec; each instantiated and uploaded. Apart from the builder and the patcher, which it calls.
#include <chrono>

#include "runtime/src/executable_impl.h"

namespace orch {

using artifact::NodeRef;

namespace {

// Every collective node of the top-level graphs (the validator allows them nowhere else).
std::vector<NodeRef> collectives_of(const fb::Pipeline& p) {
  std::vector<NodeRef> out;
  if (!p.graphs()) return out;
  for (const fb::Graph* g : *p.graphs())
    for (uint32_t i = 0; i < (g->nodes() ? g->nodes()->size() : 0); ++i) {
      const NodeRef n = artifact::node_ref(p, *g, i);
      if (artifact::op_kind(*n.op) == artifact::NodeKind::Collective) out.push_back(n);
    }
  return out;
}

using Clock = std::chrono::steady_clock;

// Adds the time since `*since` to `*total` and restarts `*since`.
void lap(Clock::time_point* since, double* total) {
  const Clock::time_point now = Clock::now();
  *total += std::chrono::duration<double>(now - *since).count();
  *since = now;
}

}  // namespace

Result<std::unique_ptr<Executable>> Pipeline::instantiate(const Bindings& bindings, cudaStream_t stream) const {
  return rt::guarded([&]() -> Result<std::unique_ptr<Executable>> {
  if (bindings.incomplete())
    return Error(ErrorCode::OutOfMemory, "out of memory while the bindings were made: some binding was lost");
  auto x = std::make_unique<Executable::Impl>();
  x->pipeline = impl_;
  x->p = impl_->fb;
  const fb::Pipeline& p = *impl_->fb;
  Status s = x->check_device();
  if (!s.ok()) return s.error();
  s = x->check_not_capturing(stream, "instantiate");
  if (!s.ok()) return s.error();

  // Communicators (NCCL is loaded only where one is bound or asked for), then params, bind
  // checks and buffers. With communicators, every rank then learns whether the others run the
  // same pipeline and got this far, so no rank is left waiting in a collective.
  const std::vector<NodeRef> collectives = collectives_of(p);
  Bindings resolved = bindings;
  Status local = x->comms.open(p, resolved, collectives, impl_->device, impl_->name);
  if (!local.ok() && !x->comms.any()) return local.error();
  auto prepare = [&]() -> Status {
    Result<rt::Plan> plan = rt::make_plan(p, resolved);
    if (!plan.ok()) return plan.error();
    x->plan = std::move(plan.value());
    x->bindings = resolved;
    // Buffers: the application's, checked (their overlaps too), then the others allocated
    // here (zero-filled), so nothing is allocated for bindings that are refused.
    const uint32_t nbuffers = p.buffers() ? p.buffers()->size() : 0;
    x->buffers.resize(nbuffers);
    std::vector<bool> bound_here(nbuffers, false);
    for (uint32_t i = 0; i < nbuffers; ++i) {
      const Bindings::Buffer* bound = nullptr;
      for (const Bindings::Buffer& b : resolved.buffers())
        if (b.name == p.buffers()->Get(i)->name()->string_view()) bound = &b;
      if (!bound) continue;
      Status st = x->bind_buffer(i, bound->ptr, bound->bytes, &x->buffers[i]);
      if (!st.ok()) return st;
      bound_here[i] = true;
    }
    Status st = x->check_overlaps(x->plan, resolved);
    if (!st.ok()) return st;
    st = x->allocate_arena(bound_here, stream);
    if (!st.ok()) return st;
    for (uint32_t i = 0; i < nbuffers; ++i) {
      // Symmetric buffers come later, from NVSHMEM, once the ranks agree on their sizes.
      if (bound_here[i] || x->buffers[i].in_arena || p.buffers()->Get(i)->symmetric()) continue;
      st = x->allocate_buffer(i, &x->buffers[i], stream);
      if (!st.ok()) return st;
    }
    return {};
  };
  if (local.ok()) local = prepare();
  s = x->comms.agree(p, impl_->name, local, stream, local.ok() ? rt::symmetric_sizes_hash(p, x->plan) : 0);
  if (!s.ok()) return s.error();
  // NVSHMEM: each step collective, so the ranks agree after each one that can fail alone.
  if (impl_->nvshmem) {
    s = x->comms.agree(p, impl_->name, x->join_nvshmem(stream), stream);
    if (!s.ok()) return s.error();
    s = x->comms.agree(p, impl_->name, x->allocate_symmetric(stream), stream);
    if (!s.ok()) return s.error();
  }
  s = x->comms.agree(p, impl_->name, x->build_all(stream), stream);
  if (!s.ok()) return s.error();
  bool frees_something = !collectives.empty();
  for (const auto& b : x->buffers) frees_something |= b.owned;
  frees_something |= static_cast<bool>(x->arena);
  for (const auto& t : x->tables) frees_something |= static_cast<bool>(t);
  for (const auto& t : x->tops) frees_something |= t.device;
  frees_something |= static_cast<bool>(x->status);
  if (frees_something) {
    cudaError_t e = cudaEventCreateWithFlags(x->done.out(), cudaEventDisableTiming);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return rt::cuda_error(e, "instantiate: cannot create the event that marks a launch's end");
    }
  }
  // Count what happens after instantiate, but for the edges it decided.
  const Executable::Stats built = x->stats;
  x->stats = Executable::Stats();
  x->stats.programmatic_edges = built.programmatic_edges;
  x->stats.programmatic_edges_made_full = built.programmatic_edges_made_full;
  return std::make_unique<Executable>(std::move(x));
  });
}

// Everything after the buffers: exec tables, templates and handles, device graphs, segments.
Status Executable::Impl::build_all(cudaStream_t stream) {
  Status s;
  // Everything until the first cudaGraphInstantiate counts as building.
    Clock::time_point clock = Clock::now();

  // The device status record, which generated kernels take as an argument; only pipelines
  // with such kernels have one (a launch then needs its end marked before the record is freed).
  bool needs_status = false;
  if (const auto* kernels = p->kernels())
    for (const fb::Kernel* k : *kernels)
      if (k->params())
        for (const fb::KernelParam* kp : *k->params()) needs_status |= kp->kind() == fb::KernelParamKind::Status;
  if (needs_status) {
    cudaError_t e = cuda->malloc(status.out(*cuda), kStatusBytes);
    if (e == cudaSuccess) e = cuda->memset_async(status.get(), 0, kStatusBytes, stream);
    if (e != cudaSuccess) {
      (void)cuda->get_last_error();
      return rt::cuda_error(e, "cannot allocate the device status record");
    }
  }

  // Family exec tables, allocated now so kernels that take them can be built.
  const uint32_t ngraphs = p->graphs() ? p->graphs()->size() : 0;
  tables.resize(ngraphs);
  top_of_graph.assign(ngraphs, -1);
  members.resize(ngraphs);
  for (uint32_t g = 0; g < ngraphs; ++g) {
    const fb::Graph* graph = p->graphs()->Get(g);
    if (!graph->device() || graph->family_size() == 0) continue;
    cudaError_t e = cuda->malloc(tables[g].out(*cuda), graph->family_size() * sizeof(cudaGraphExec_t));
    if (e != cudaSuccess) {
      (void)cuda->get_last_error();
      return rt::cuda_error(e, "cannot allocate the exec table of family '" + str(graph->name()) + "'");
    }
  }

  // The top-level graphs: device graphs and family members first, in the artifact's
  // device_order (orchc's: a graph before the kernels that take its exec, validate() proved it
  // holds every device graph once), then the segments.
  std::vector<int> device_order;
  if (const auto* order = p->device_order()) device_order.assign(order->begin(), order->end());
  for (int g : device_order) {
    const fb::Graph* graph = p->graphs()->Get(g);
    const uint32_t n = graph->family_size() > 0 ? graph->family_size() : 1;
    for (uint32_t m = 0; m < n; ++m) {
      Top t;
      t.graph = static_cast<int>(g);
      t.member = graph->family_size() > 0 ? static_cast<int>(m) : -1;
      t.device = true;
      if (t.member >= 0) members[g].push_back(static_cast<int>(tops.size()));
      else top_of_graph[g] = static_cast<int>(tops.size());
      tops.push_back(std::move(t));
    }
  }
  std::vector<int> segment_graphs;
  if (p->segments() && p->segments()->size() > 0)
    for (int g : *p->segments()) segment_graphs.push_back(g);
  else
    segment_graphs.push_back(p->main_graph());
  for (int g : segment_graphs) {
    if (g < 0 || static_cast<uint32_t>(g) >= ngraphs || p->graphs()->Get(g)->device())
      return Error(ErrorCode::InvalidArtifact, "segment " + std::to_string(g) + " is not a host graph");
    Top t;
    t.graph = g;
    segments.push_back(static_cast<int>(tops.size()));
    top_of_graph[g] = static_cast<int>(tops.size());
    tops.push_back(std::move(t));
  }

  // Template graphs, and the conditional handles of each (created on the top-level graph).
  const uint32_t nhandles = p->handles() ? p->handles()->size() : 0;
  handles.assign(nhandles, 0);
  handle_created.assign(nhandles, false);
  for (size_t t = 0; t < tops.size(); ++t) {
    cudaError_t e = cuda->graph_create(tops[t].graph_template.out(*cuda));
    if (e != cudaSuccess) {
      (void)cuda->get_last_error();
      return rt::cuda_error(e, "cudaGraphCreate");
    }
    if (tops[t].device) continue;
    s = create_handles(static_cast<int>(t));
    if (!s.ok()) return s;
  }

  // Device graphs in that order: build (an exec argument of a graph earlier in the order is set
  // now; a late one, of the graph itself or a later one, is null) and instantiate for device
  // launch; then fill the family tables, set the late arguments, and upload.
  for (size_t t = 0; t < tops.size(); ++t) {
    if (!tops[t].device) continue;
    {
      ObservedPhase observed(Phase::Build, tops[t].graph, tops[t].member);
      s = build(tops[t].graph_template.get(), *p->graphs()->Get(tops[t].graph), static_cast<int>(t));
      observed.ok = s.ok();
    }
    if (!s.ok()) return s.error();
    lap(&clock, &times.build_s);
    s = instantiate_top(static_cast<int>(t), stream);
    if (!s.ok()) return s.error();
    lap(&clock, &times.instantiate_s);
  }
  for (uint32_t g = 0; g < ngraphs; ++g) {
    if (members[g].empty()) continue;
    std::vector<cudaGraphExec_t> execs;
    for (int t : members[g]) execs.push_back(tops[t].exec.get());
    cudaError_t e = cuda->memcpy_async(tables[g].get(), execs.data(), execs.size() * sizeof(cudaGraphExec_t),
                                       cudaMemcpyHostToDevice, stream);
    if (e == cudaSuccess) e = cuda->stream_synchronize(stream);  // `execs` is about to go
    if (e != cudaSuccess) {
      (void)cuda->get_last_error();
      return rt::cuda_error(e, "cannot fill the exec table of family '" + str(p->graphs()->Get(g)->name()) + "'");
    }
  }
  s = refresh(Scope::LateArguments);
  if (!s.ok()) return s.error();
  lap(&clock, &times.build_s);
  for (auto& t : tops) {
    if (!t.device) continue;
    ObservedPhase observed(Phase::Upload, t.graph, t.member);
    cudaError_t e = cuda->upload(t.exec.get(), stream);
    if (e != cudaSuccess) {
      (void)cuda->get_last_error();
      return rt::cuda_error(e, "cannot upload device graph '" + str(p->graphs()->Get(t.graph)->name()) + "'");
    }
    observed.ok = true;
    t.upload_needed = false;
  }
  lap(&clock, &times.upload_s);

  // The segments, which now see every device exec.
  for (int t : segments) {
    {
      ObservedPhase observed(Phase::Build, tops[t].graph, tops[t].member);
      s = build(tops[t].graph_template.get(), *p->graphs()->Get(tops[t].graph), t);
      observed.ok = s.ok();
    }
    if (!s.ok()) return s.error();
    lap(&clock, &times.build_s);
    s = instantiate_top(t, stream);
    if (!s.ok()) return s.error();
    lap(&clock, &times.instantiate_s);
    ObservedPhase observed(Phase::Upload, tops[t].graph, tops[t].member);
    cudaError_t e = cuda->upload(tops[t].exec.get(), stream);
    observed.ok = e == cudaSuccess;
    if (e != cudaSuccess) {
      (void)cuda->get_last_error();
      return rt::cuda_error(e, "cannot upload graph '" + str(p->graphs()->Get(tops[t].graph)->name()) + "'");
    }
    lap(&clock, &times.upload_s);
  }
  cudaError_t e = cuda->stream_synchronize(stream);
  if (e != cudaSuccess) {
    (void)cuda->get_last_error();
    return rt::cuda_error(e, "instantiate: waiting for the uploads");
  }
  lap(&clock, &times.upload_s);
  return {};
}

Status Executable::Impl::instantiate_top(int top, cudaStream_t stream) {
  Top& t = tops[top];
  cudaGraphInstantiateParams ip = {};
  ip.flags = t.device ? cudaGraphInstantiateFlagDeviceLaunch : 0;
  // Set only on segments holding a high-priority collective (prioritize_new_kernels).
  if (t.node_priority) ip.flags |= cudaGraphInstantiateFlagUseNodePriority;
  ip.uploadStream = stream;
  ObservedPhase observed(Phase::Instantiate, t.graph, t.member);
  cudaError_t e = cuda->instantiate(t.exec.out(*cuda), t.graph_template.get(), &ip);
  if (e != cudaSuccess || ip.result_out != cudaGraphInstantiateSuccess) {
    (void)cuda->get_last_error();
    std::string g = str(p->graphs()->Get(t.graph)->name());
    if (t.member >= 0) g += "[" + std::to_string(t.member) + "]";
    std::string what = "cannot instantiate graph '" + g + "'" + (t.device ? " for device launch" : "") +
                       " (result " + std::to_string(static_cast<int>(ip.result_out)) + ")";
    std::string w;
    const auto& index = record_of();
    auto it = ip.errNode_out ? index.find(ip.errNode_out) : index.end();
    if (it != index.end()) {
      what += " at " + node_name(records[it->second].node, t);
      w = node_where(records[it->second].node);
    }
    return rt::cuda_error(e != cudaSuccess ? e : cudaErrorInvalidValue, what, w);
  }
  observed.ok = true;
  return {};
}

Status Executable::Impl::check_device() const {
  int dev = -1;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return rt::no_device_error(e);
  }
  if (dev != pipeline->device)
    return Error(ErrorCode::InvalidArgument, "pipeline '" + pipeline->name + "' was loaded on device " +
                                                 std::to_string(pipeline->device) + ", but device " +
                                                 std::to_string(dev) + " is current");
  return {};
}

// Refused before anything touches a stream the application is capturing: a graph launch
// cannot be captured, and a failed capture call would invalidate the application's capture.
Status Executable::Impl::check_not_capturing(cudaStream_t stream, const char* call) const {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaError_t e = cuda->stream_is_capturing(stream, &status);
  if (e != cudaSuccess) {
    (void)cuda->get_last_error();
    return rt::cuda_error(e, std::string(call) + ": cannot ask whether the stream is being captured");
  }
  if (status == cudaStreamCaptureStatusNone) return {};
  return Error(ErrorCode::Unsupported,
               std::string(call) + ": the stream is being captured (cudaStreamBeginCapture" +
                   (status == cudaStreamCaptureStatusInvalidated ? ", a capture already invalidated" : "") +
                   "); CUDA cannot capture the launch of a graph (cudaErrorStreamCaptureUnsupported), so orch "
                   "did nothing and left the capture as it was: call it on a stream outside the capture");
}

}  // namespace orch
