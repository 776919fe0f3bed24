// The graph builder: evaluates each node of an artifact graph with the current plan (launch
// shape, arguments, copy and fill sizes, a collective's NCCL call) and adds it to a CUDA graph
// being built, with its dependencies: kernels through the driver's cuGraphAddNode, copies,
// fills, empty nodes, conditional nodes with their bodies built recursively, collectives
// captured from NCCL. It records what each node was built with (Impl::records), which the
// patcher compares against. Every CUDA call goes through Impl::cuda (graph_api.h), so the
// tests build every node kind against a recording fake.
#include <algorithm>

#include "runtime/src/driver.h"
#include "runtime/src/executable_impl.h"

namespace orch {

using rt::Value;

namespace {

// A launch shape is most often one integer constant, which validate() proved a value of its
// type: taken as it is when in [lo, hi] (true); anything else goes the general way (false),
// for its value or its message. Every kernel node has six or seven, evaluated at
// instantiate and at every set_param.
bool constant_uint(const fb::Expr* e, uint64_t lo, uint64_t hi, uint64_t* out) {
  static_assert(fb::ScalarType::U8 == fb::ScalarType(0) && fb::ScalarType::U64 == fb::ScalarType(3) &&
                    fb::ScalarType::I8 == fb::ScalarType(4) && fb::ScalarType::I64 == fb::ScalarType(7),
                "the integer types are the first eight, unsigned first");
  const auto* code = e ? e->code() : nullptr;
  if (!code || code->size() != 1) return false;
  const fb::ExprInstr* in = code->Get(0);
  const unsigned type = static_cast<unsigned>(in->type());
  if (in->op() != fb::ExprOp::ConstInt || type > static_cast<unsigned>(fb::ScalarType::I64) ||
      (in->i() < 0 && type > static_cast<unsigned>(fb::ScalarType::U64)))
    return false;
  const uint64_t v = static_cast<uint64_t>(in->i());
  if (v < lo || v > hi) return false;
  *out = v;
  return true;
}

}  // namespace

// Evaluates an integer expression into [lo, hi].
std::string Executable::Impl::eval_uint(const fb::Expr* e, const Top& t, uint64_t lo, uint64_t hi, uint64_t* out) const {
  if (constant_uint(e, lo, hi, out)) return {};
  Value v;
  std::string err = rt::evaluate(e, plan.env(t.member), &v);
  if (!err.empty()) return err;
  if (v.is_float()) return "expected an integer, got a float";
  if (v.negative() || v.magnitude() < lo || v.magnitude() > hi)
    return v.to_string() + " is outside " + std::to_string(lo) + ".." + std::to_string(hi);
  *out = v.magnitude();
  return {};
}

cudaGraphExec_t Executable::Impl::exec_of(int graph_index, const Top& t) const {
  if (graph_index < 0 || graph_index == t.graph) return t.exec.get();  // self
  if (static_cast<size_t>(graph_index) >= top_of_graph.size() || top_of_graph[graph_index] < 0) return nullptr;
  return tops[top_of_graph[graph_index]].exec.get();
}

Status Executable::Impl::compute_kernel(const NodeRef& at, const Top& t, KernelCall* out) const {
  const fb::KernelOp& n = *at.op->body_as_KernelOp();
  const int k = n.kernel();
  out->kernel = pipeline->kernels[k];
  static const char* const axis[] = {"x", "y", "z"};
  if (const fb::LaunchShape* l = n.launch()) {
    // Constants (validate() proved that grid, block and shared_bytes are absent), checked
    // as evaluated expressions are, with the same messages.
    const uint32_t grid[3] = {l->grid_x(), l->grid_y(), l->grid_z()};
    const uint32_t block[3] = {l->block_x(), l->block_y(), l->block_z()};
    for (int d = 0; d < 3; ++d) {
      if (grid[d] < 1 || grid[d] > 0x7fffffffu)
        return node_error(ErrorCode::InvalidValue, at, t,
                          std::string("grid ") + axis[d] + ": " + std::to_string(grid[d]) + " is outside 1..2147483647");
      if (block[d] < 1 || block[d] > 1024)
        return node_error(ErrorCode::InvalidValue, at, t,
                          std::string("block ") + axis[d] + ": " + std::to_string(block[d]) + " is outside 1..1024");
      out->grid[d] = grid[d];
      out->block[d] = block[d];
    }
    if (l->shared_bytes() > 0x7fffffffu)
      return node_error(ErrorCode::InvalidValue, at, t,
                        "dynamic shared memory: " + std::to_string(l->shared_bytes()) + " is outside 0..2147483647");
    out->shared = l->shared_bytes();
    return kernel_args(at, t, out);
  }
  const auto* grid = n.grid();
  const auto* block = n.block();
  for (int d = 0; d < 3; ++d) {
    uint64_t v;
    if (!constant_uint(grid->Get(d), 1, 0x7fffffffu, &v)) {
      std::string e = eval_uint(grid->Get(d), t, 1, 0x7fffffffu, &v);
      if (!e.empty()) return node_error(ErrorCode::InvalidValue, at, t, std::string("grid ") + axis[d] + ": " + e);
    }
    out->grid[d] = static_cast<unsigned>(v);
    if (!constant_uint(block->Get(d), 1, 1024, &v)) {
      std::string e = eval_uint(block->Get(d), t, 1, 1024, &v);
      if (!e.empty()) return node_error(ErrorCode::InvalidValue, at, t, std::string("block ") + axis[d] + ": " + e);
    }
    out->block[d] = static_cast<unsigned>(v);
  }
  out->shared = 0;
  if (const fb::Expr* shared = n.shared_bytes()) {
    uint64_t v;
    if (!constant_uint(shared, 0, 0x7fffffffu, &v)) {
      std::string e = eval_uint(shared, t, 0, 0x7fffffffu, &v);
      if (!e.empty()) return node_error(ErrorCode::InvalidValue, at, t, "dynamic shared memory: " + e);
    }
    out->shared = static_cast<unsigned>(v);
  }
  return kernel_args(at, t, out);
}

// The argument slots of kernel node `n`.
Status Executable::Impl::kernel_args(const NodeRef& at, const Top& t, KernelCall* out) const {
  const fb::KernelOp& n = *at.op->body_as_KernelOp();
  const auto* args = n.args();
  const uint32_t nargs = args ? args->size() : 0;
  out->slots.assign(nargs, 0);
  for (uint32_t i = 0; i < nargs; ++i) {
    const fb::KernelArg* a = args->Get(i);
    // Named only in errors: built then, not for every argument of every node.
    auto pname = [&] {
      const fb::Kernel* kernel = p->kernels()->Get(n.kernel());
      return kernel->params() && i < kernel->params()->size() ? str(kernel->params()->Get(i)->name())
                                                              : std::to_string(i);
    };
    uint64_t& slot = out->slots[i];
    switch (a->kind()) {
      case fb::ArgKind::Value: {
        Value v;
        std::string e = rt::evaluate(a->value(), plan.env(t.member), &v);
        if (e.empty()) e = rt::encode_scalar(v, a->type(), &slot);
        if (!e.empty()) return node_error(ErrorCode::InvalidValue, at, t, "argument '" + pname() + "': " + e);
        break;
      }
      case fb::ArgKind::Buffer:
        slot = reinterpret_cast<uint64_t>(buffers[a->ref()].ptr);
        break;
      case fb::ArgKind::CondHandle:
        if (a->ref() < 0 || static_cast<size_t>(a->ref()) >= handles.size() || !handle_created[a->ref()])
          return node_error(ErrorCode::InvalidArtifact, at, t,
                            "argument '" + pname() + "' names conditional handle " + std::to_string(a->ref()) +
                                ", which belongs to no graph being built");
        slot = static_cast<uint64_t>(handles[a->ref()]);
        break;
      case fb::ArgKind::GraphExec: {
        const cudaGraphExec_t exec = exec_of(a->ref(), t);
        // validate() proved an argument not marked late names a graph instantiated before this
        // one (device_order); a late one is null until refresh(Scope::LateArguments) sets it.
        if (!exec && !a->late())
          return node_error(ErrorCode::InvalidArtifact, at, t,
                            "argument '" + pname() + "' names a graph not instantiated yet, but is not marked late");
        slot = reinterpret_cast<uint64_t>(exec);
        break;
      }
      case fb::ArgKind::GraphTable:
        slot = reinterpret_cast<uint64_t>(tables[a->ref()].get());
        break;
      case fb::ArgKind::Status:
        slot = reinterpret_cast<uint64_t>(status.get());
        break;
    }
  }
  return {};
}

Status Executable::Impl::compute_copy(const NodeRef& at, const Top& t, CopyCall* out) const {
  const fb::MemcpyOp& n = *at.op->body_as_MemcpyOp();
  const rt::BufferSize& s = plan.buffers[n.src()];
  const rt::BufferSize& d = plan.buffers[n.dst()];
  if (s.bytes > d.bytes)
    return node_error(ErrorCode::InvalidValue, at, t,
                      "copies " + std::to_string(s.bytes) + " bytes into a buffer of " + std::to_string(d.bytes));
  out->dst = buffers[n.dst()].ptr;
  out->src = buffers[n.src()].ptr;
  out->bytes = s.bytes;
  return {};
}

Status Executable::Impl::compute_fill(const NodeRef& at, const Top& t, FillCall* out) const {
  const fb::MemsetOp& n = *at.op->body_as_MemsetOp();
  const unsigned es = n.element_size();
  const uint64_t bytes = plan.buffers[n.dst()].bytes;
  if (es == 0 || bytes % es != 0)
    return node_error(ErrorCode::InvalidArtifact, at, t, "memset element size " + std::to_string(es) +
                                                             " does not divide " + std::to_string(bytes) + " bytes");
  out->p = {};
  out->p.dst = buffers[n.dst()].ptr;
  out->p.pitch = 0;
  out->p.value = n.value();
  out->p.elementSize = es;
  out->p.width = bytes / es;
  out->p.height = 1;
  return {};
}

Status Executable::Impl::compute_collective(const NodeRef& at, const Top& t, CollectiveCall* out) const {
  const fb::CollectiveOp& n = *at.op->body_as_CollectiveOp();
  const fb::Buffer* src = p->buffers()->Get(n.src());
  const fb::Buffer* dst = p->buffers()->Get(n.dst());
  const uint64_t sc = plan.buffers[n.src()].count, dc = plan.buffers[n.dst()].count;
  const int comm_world = comms.world_size(static_cast<size_t>(n.comm()));
  const uint64_t world = static_cast<uint64_t>(comm_world > 0 ? comm_world : 1);
  if (src->type() != dst->type())
    return node_error(ErrorCode::InvalidArtifact, at, t, "source and destination element types differ");
  if (!rt::nccl_type(src->type(), &out->type))
    return node_error(ErrorCode::Unsupported, at, t,
                      std::string("NCCL has no ") + rt::scalar_type_name(src->type()) + " type");
  out->kind = n.collective();
  out->op = rt::nccl_op(n.reduce_op());
  out->send = buffers[n.src()].ptr;
  out->recv = buffers[n.dst()].ptr;
  out->root = 0;
  out->comm = comms.handle(static_cast<size_t>(n.comm()));
  if (!out->comm)
    return node_error(ErrorCode::Unbound, at, t,
                      "comm '" + str(p->comms()->Get(n.comm())->name()) + "' has no NCCL communicator");
  auto too_small = [&](const fb::Buffer* b, uint64_t have, uint64_t need) {
    return node_error(ErrorCode::InvalidValue, at, t,
                      "buffer '" + str(b->name()) + "' has " + std::to_string(have) + " elements; " +
                          rt::nccl_function(n.collective()) + " on " + std::to_string(world) + " ranks needs " +
                          std::to_string(need));
  };
  switch (n.collective()) {
    case fb::CollectiveKind::AllReduce:
    case fb::CollectiveKind::Broadcast:
      out->count = sc;
      if (dc < sc) return too_small(dst, dc, sc);
      break;
    case fb::CollectiveKind::AllGather:
      out->count = sc;
      if (dc / world < sc) return too_small(dst, dc, sc * world);
      break;
    case fb::CollectiveKind::ReduceScatter:
      out->count = dc;
      if (sc / world < dc) return too_small(src, sc, dc * world);
      break;
  }
  if (n.collective() == fb::CollectiveKind::Broadcast) {
    Value v;
    std::string e = rt::evaluate(n.root(), plan.env(t.member), &v);
    if (e.empty() && v.is_float()) e = "expected an integer, got a float";
    if (e.empty() && (v.negative() || v.magnitude() >= world))
      e = "rank " + v.to_string() + " is outside 0.." + std::to_string(world - 1);
    if (!e.empty()) return node_error(ErrorCode::InvalidValue, at, t, "broadcast root: " + e);
    out->root = static_cast<int>(v.magnitude());
  }
  return {};
}

// The collectives of a segment are recorded by stream capture straight into the segment's
// graph, in one capture session for the whole build (relaxed mode: NCCL may set up
// connections on the first use of an algorithm, which allocates). build() adds the other
// nodes to that graph itself (CUDA allows any operation but removal on a graph being captured
// into) and, before each NCCL call, sets the stream's capture dependencies to the node's: so
// NCCL's nodes sit in the segment graph as a stream capture of the whole step would put them,
// with no child graph node around each (those cost 2.7-3.7% of a step of small allreduces on
// two H200s, bench/collective_bench). One session matters: capturing each call into the graph
// in a session of its own fails at the second collective with NCCL 2.28.3 ("dependency
// created on uncaptured work in another stream": NCCL's internal stream remembers the earlier
// capture).
Status Executable::Impl::begin_capture(const NodeRef& at, const Top& t, cudaGraph_t g) {
  if (!side_stream) {
    cudaError_t e = cuda->stream_create_non_blocking(side_stream.out(*cuda));
    if (e != cudaSuccess) return node_cuda_error(e, at, t, "cannot create the stream that captures collectives");
  }
  cudaError_t e = cuda->begin_capture_to_graph(side_stream.get(), g);
  if (e != cudaSuccess) return node_cuda_error(e, at, t, "cudaStreamBeginCaptureToGraph");
  return {};
}

// Ends the capture begin_capture started (on success or on an error: the stream must leave
// capture mode either way). The graph stays the caller's.
cudaError_t Executable::Impl::end_capture() {
  cudaGraph_t g = nullptr;
  cudaError_t e = cuda->end_capture(side_stream.get(), &g);
  if (e != cudaSuccess) (void)cuda->get_last_error();
  return e;
}

// The NCCL call of collective `c`, captured after `deps`; its last nodes (what a node that
// depends on the collective waits for) into `ends`.
Status Executable::Impl::capture(const NodeRef& at, Top& t, cudaGraph_t g, const CollectiveCall& c,
                                 std::vector<cudaGraphNode_t>& deps, std::vector<cudaGraphNode_t>* ends) {
  cudaStream_t cs = side_stream.get();
  cudaError_t e = cuda->set_capture_dependencies(cs, deps.empty() ? nullptr : deps.data(), deps.size());
  if (e != cudaSuccess) return node_cuda_error(e, at, t, "cudaStreamUpdateCaptureDependencies");
  // A high-priority collective's kernels are the kernel nodes its capture adds to `g`.
  std::vector<cudaGraphNode_t> before;
  if (at.op->body_as_CollectiveOp()->high_priority()) {
    if (Status s = graph_nodes(at, t, g, &before); !s.ok()) return s;
  }
  rt::nccl::Result r = cuda->issue_collective(comms, c, cs);
  const std::string call = std::string(rt::nccl_function(c.kind)) + " of " + std::to_string(c.count) + " elements";
  if (r != rt::nccl::kSuccess) {
    (void)cuda->get_last_error();
    return Error(ErrorCode::Nccl, node_name(at, t) + ": " + call + ": " + comms.describe(r, c.comm), node_where(at));
  }
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaGraphNode_t* last = nullptr;
  size_t nlast = 0;
  e = cuda->capture_info(cs, &status, &last, &nlast);
  if (e != cudaSuccess) return node_cuda_error(e, at, t, "capturing " + call + ": cudaStreamGetCaptureInfo");
  if (status != cudaStreamCaptureStatusActive || nlast == 0)
    return node_cuda_error(cudaErrorStreamCaptureInvalidated, at, t, "capturing " + call + ": no work was captured");
  ends->assign(last, last + nlast);
  if (at.op->body_as_CollectiveOp()->high_priority()) {
    // Kernels may run beside this collective (lowering/prioritize_collectives.cpp): NCCL's
    // kernels first on the SMs, else a large kernel beside it takes every SM that frees up.
    if (Status s = prioritize_new_kernels(at, t, g, std::move(before)); !s.ok()) return s;
  }
  return {};
}

Status Executable::Impl::prioritize_new_kernels(const NodeRef& at, Top& t, cudaGraph_t g,
                                                std::vector<cudaGraphNode_t> before) {
  if (greatest_priority > 0) {
    int least = 0;
    cudaError_t e = cuda->stream_priority_range(&least, &greatest_priority);
    if (e != cudaSuccess) return node_cuda_error(e, at, t, "cudaDeviceGetStreamPriorityRange");
  }
  std::vector<cudaGraphNode_t> after;
  if (Status s = graph_nodes(at, t, g, &after); !s.ok()) return s;
  std::sort(before.begin(), before.end());
  for (cudaGraphNode_t n : after) {
    if (std::binary_search(before.begin(), before.end(), n)) continue;
    cudaGraphNodeType type = cudaGraphNodeTypeEmpty;
    cudaError_t e = cuda->node_get_type(n, &type);
    if (e != cudaSuccess) return node_cuda_error(e, at, t, "cudaGraphNodeGetType");
    if (type != cudaGraphNodeTypeKernel) continue;
    e = cuda->kernel_node_set_priority(n, greatest_priority);
    if (e != cudaSuccess) return node_cuda_error(e, at, t, "cudaGraphKernelNodeSetAttribute (priority)");
    t.node_priority = true;
  }
  return {};
}

Status Executable::Impl::graph_nodes(const NodeRef& at, const Top& t, cudaGraph_t g,
                                     std::vector<cudaGraphNode_t>* out) {
  size_t n = 0;
  cudaError_t e = cuda->graph_get_nodes(g, nullptr, &n);
  if (e == cudaSuccess) {
    out->resize(n);
    e = cuda->graph_get_nodes(g, out->data(), &n);
    out->resize(n);
  }
  if (e != cudaSuccess) return node_cuda_error(e, at, t, "cudaGraphGetNodes");
  return {};
}

// ---- building -------------------------------------------------------------------------

namespace {

// CUDA's edge data for the dependencies graph.deps()[first, end), in order, when any of them
// is programmatic (Graph.dep_kinds); false when every edge is full, which needs no edge data.
bool programmatic_edges(const flatbuffers::Vector<fb::EdgeKind>* kinds, uint32_t first, uint32_t end,
                               std::vector<CUgraphEdgeData>* out) {
  if (!kinds || kinds->size() < end) return false;
  bool any = false;
  out->resize(end - first);
  for (uint32_t j = first; j < end; ++j) {
    CUgraphEdgeData& e = (*out)[j - first];
    e = CUgraphEdgeData{};
    if (kinds->Get(j) != fb::EdgeKind::Programmatic) continue;
    e.from_port = CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC;
    e.type = CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC;
    any = true;
  }
  return any;
}

}  // namespace

// Whether every block of launch `k` is resident at once on this GPU (one wave): the driver's
// occupancy for its kernel, block and shared memory, times the SMs, cached per kernel and
// shape. orchc made an edge programmatic only between launches that fit in one wave at the
// params' defaults on the arch's largest device; the bound params or a smaller GPU (an H100
// PCIe has 114 SMs, not 132) may make one run in several waves, where a programmatic edge
// measured slower than a full one (docs/performance.md, "On real kernels"). A full edge orders
// at least as much, and a kernel that waits at entry then waits for nothing. Where the driver
// cannot say, orchc's choice stands.
bool Executable::Impl::one_wave(const KernelCall& k) {
  const uint64_t blocks = uint64_t{k.grid[0]} * k.grid[1] * k.grid[2];
  const uint64_t threads = uint64_t{k.block[0]} * k.block[1] * k.block[2];
  if (sm_count < 0) {
    const int dev = pipeline->device;
    if (cuda->device_attribute(&sm_count, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
      (void)cuda->get_last_error();
      sm_count = 0;
    }
  }
  if (sm_count == 0 || threads == 0 || threads > 1024) return true;
  const std::tuple<cudaKernel_t, uint64_t, unsigned> key{k.kernel, threads, k.shared};
  // A chain launches one kernel and shape again and again: the last answer first.
  if (!(last_occupancy && last_occupancy->first == key)) {
    auto it = blocks_per_sm.find(key);
    if (it == blocks_per_sm.end()) {
      int n = 0;
      if (cuda->occupancy(&n, reinterpret_cast<const void*>(k.kernel), static_cast<int>(threads), k.shared) !=
          cudaSuccess) {
        (void)cuda->get_last_error();
        n = -1;
      }
      it = blocks_per_sm.emplace(key, n).first;
    }
    last_occupancy = *it;
  }
  const int per_sm = last_occupancy->second;
  if (per_sm < 0) return true;
  return blocks <= static_cast<uint64_t>(per_sm) * static_cast<uint64_t>(sm_count);
}

namespace {

// Every kernel node, with its edge data when some edge is programmatic (`edges`, else null).
// Through the driver's cuGraphAddNode with the library's CUkernel rather than
// cudaGraphAddKernelNode / cudaGraphAddNode with the cudaKernel_t: on a 1,000-kernel chain,
// building, instantiating and uploading took 0.91-0.93 of the time that way (launch_bench row
// s4 against s; H200 and H100, driver 580.159.04, 2026-11-23), the runtime API's call costing
// more per node, and one call takes both kinds of edge.
// `cuda`: add_kernel_node is the driver's cuGraphAddNode (graph_api.cpp); `np` is
// the build's node parameters, zeroed once, of type kernel: this sets the launch's fields and
// adds the node (a 1,000-kernel graph adds 1,000 of them).
CUresult add_kernel_node(rt::GraphApi& cuda, CUgraphNodeParams& np, cudaGraph_t g,
                         const std::vector<cudaGraphNode_t>& deps, const CUgraphEdgeData* edges,
                         const cudaKernelNodeParams& kp, cudaGraphNode_t* out) {
  np.kernel.kern = reinterpret_cast<CUkernel>(kp.func);  // the library's kernel in the current context
  np.kernel.gridDimX = kp.gridDim.x;
  np.kernel.gridDimY = kp.gridDim.y;
  np.kernel.gridDimZ = kp.gridDim.z;
  np.kernel.blockDimX = kp.blockDim.x;
  np.kernel.blockDimY = kp.blockDim.y;
  np.kernel.blockDimZ = kp.blockDim.z;
  np.kernel.sharedMemBytes = kp.sharedMemBytes;
  np.kernel.kernelParams = kp.kernelParams;
  return cuda.add_kernel_node(out, g, deps.empty() ? nullptr : deps.data(), edges, deps.size(), &np);
}

}  // namespace
[[gnu::noinline]] Error Executable::Impl::kernel_node_error(CUresult r, const NodeRef& at, const Top& t) const {
  return rt::driver_call_error(r, node_name(at, t) + ": cuGraphAddNode (kernel)", node_where(at));
}

// Builds `graph` into `g` for tops[top]. A kernel's launch depends on its op and the top
// only, so a node whose op an earlier node of this build ran copies that node's record
// (`kernel_of_op`: op -> record, shared with the bodies' builds; made by the outermost call).
Status Executable::Impl::build(cudaGraph_t g, const fb::Graph& graph, int top, std::vector<int32_t>* kernel_of_op) {
  std::vector<int32_t> own;
  if (!kernel_of_op) {
    own.assign(p->ops() ? p->ops()->size() : 0, -1);
    kernel_of_op = &own;
  }
  Top& t = tops[top];
  const bool has_kernel_nodes = cuda->has_kernel_nodes();  // the driver's entry point, looked up once
  CUgraphNodeParams np = {};  // func, ctx and extra stay null (add_kernel_node)
  np.type = CU_GRAPH_NODE_TYPE_KERNEL;
  const uint32_t count = graph.nodes() ? graph.nodes()->size() : 0;
  std::vector<cudaGraphNode_t> made(count, nullptr);
  // A collective's last captured nodes (NCCL's work may end in several), which its
  // dependents wait for; made[] holds the first of them.
  std::vector<std::vector<cudaGraphNode_t>> ends(count);
  std::vector<size_t> rec_at(count, SIZE_MAX);  // node -> its index in `records`
  std::vector<int8_t> one_wave_at(count, -1);   // node -> one_wave() of its launch, once asked
  auto fits = [&](uint32_t node) {
    if (one_wave_at[node] < 0) one_wave_at[node] = one_wave(records[rec_at[node]].kernel) ? 1 : 0;
    return one_wave_at[node] == 1;
  };
  std::vector<cudaGraphNode_t> deps;
  std::vector<CUgraphEdgeData> edges;
  std::vector<void*> ptrs;
  records.reserve(records.size() + count);
  // NCCL needs every rank to issue its collectives in one order, and two branches of a CUDA
  // graph that nothing orders may run in either order (or at once): each collective waits
  // for the one before it in the graph's node order, which every rank shares.
  int last_collective = -1;
  const auto* nodes = graph.nodes();
  const auto* graph_deps = graph.deps();
  const auto* ops = p->ops();
  const auto* dep_kinds = graph.dep_kinds();
  // Collectives are top-level nodes of host graphs only (the checker's E0401, E0703).
  bool collectives = false;
  for (uint32_t i = 0; i < count; ++i)
    collectives |= artifact::op_kind(*ops->Get(nodes->Get(i)->op())) == artifact::NodeKind::Collective;
  if (collectives) {
    if (Status s = begin_capture(NodeRef{ops->Get(nodes->Get(0)->op()), nodes->Get(0)}, t, g); !s.ok()) return s;
  }
  struct CaptureEnd {  // the stream leaves capture mode on every way out
    Impl* x;
    bool on;
    ~CaptureEnd() {
      if (on) (void)x->end_capture();
    }
  } capture_end{this, collectives};
  uint32_t first = 0;  // where node i's dependencies begin in graph_deps
  for (uint32_t i = 0; i < count; ++i) {
    const NodeRef at{ops->Get(nodes->Get(i)->op()), nodes->Get(i)};
    const fb::Op& n = *at.op;
    const uint32_t deps_end = at.at->deps_end();
    // A dependency on a collective is one on each of its last nodes; edge data (programmatic
    // edges) joins kernels only, so the dependencies keep their order and count there.
    deps.clear();
    for (uint32_t j = first; j < deps_end; ++j) {
      const uint32_t from = graph_deps->Get(j);
      if (ends[from].empty()) deps.push_back(made[from]);
      else deps.insert(deps.end(), ends[from].begin(), ends[from].end());
    }
    if (artifact::op_kind(n) == artifact::NodeKind::Collective && last_collective >= 0 &&
        !rt::depends_on(graph, i, static_cast<uint32_t>(last_collective))) {
      for (cudaGraphNode_t d : ends[last_collective])
        if (std::find(deps.begin(), deps.end(), d) == deps.end()) deps.push_back(d);
    }
    const cudaGraphNode_t* dp = deps.empty() ? nullptr : deps.data();
    // The observer hears which artifact node the CUDA nodes made until node_end belong to.
    struct ObservedNode {
      Observer* o;
      NodeSite site;
      std::vector<uint32_t>& path;
      const cudaGraphNode_t& made;
      ~ObservedNode() {
        if (o) o->node_end(site, made);
        path.pop_back();
      }
    };
    observe_path.push_back(i);
    ObservedNode observed{observer(), NodeSite{t.graph, t.member, &observe_path}, observe_path, made[i]};
    if (observed.o) observed.o->node_begin(observed.site);
    // Recorded in place (a node's record is a few hundred bytes); on an error the caller
    // drops the records of the graph being built. Bodies add records: `rec` is taken again
    // after them.
    // A kernel whose op an earlier node of this build ran starts as a copy of that record.
    const size_t r = records.size();
    rec_at[i] = r;
    const artifact::NodeKind kind = artifact::op_kind(n);
    int32_t* same = kind == artifact::NodeKind::Kernel ? &(*kernel_of_op)[at.at->op()] : nullptr;
    if (same && *same >= 0) records.push_back(records[static_cast<size_t>(*same)]);
    else records.emplace_back();
    NodeRecord* rec = &records[r];
    rec->top = top;
    rec->node = at;
    cudaError_t e = cudaSuccess;
    switch (kind) {
      case artifact::NodeKind::Kernel: {
        if (*same < 0) {
          if (Status s = compute_kernel(at, t, &rec->kernel); !s.ok()) return s;
          *same = static_cast<int32_t>(r);
        }
        if (rec->kernel.shared > Pipeline::Impl::kDefaultSharedBytes)
          if (Status s = pipeline->allow_shared_bytes(n.body_as_KernelOp()->kernel(), rec->kernel.shared); !s.ok())
            return s;
        const cudaKernelNodeParams kp = rec->kernel.params(ptrs);
        // Some edge may be programmatic (validate() proved both ends kernels and this kernel
        // waiting at entry).
        bool programmatic = programmatic_edges(dep_kinds, first, deps_end, &edges);
        if (programmatic) {
          // Each one only where both launches fit in one wave here (one_wave).
          programmatic = false;
          const bool here = fits(i);
          for (uint32_t j = first; j < deps_end; ++j) {
            CUgraphEdgeData& edge = edges[j - first];
            if (edge.type != CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC) continue;
            ++stats.programmatic_edges;
            const uint32_t from = graph_deps->Get(j);
            if (here && from < count && rec_at[from] < records.size() && fits(from)) {
              programmatic = true;
              continue;
            }
            edge = CUgraphEdgeData{};
            ++stats.programmatic_edges_made_full;
          }
        }
        if (programmatic && pipeline->arch < 90)
          return node_error(ErrorCode::Unsupported, at, t,
                            "has a programmatic edge, which needs compute capability 9.0 or newer; this GPU is "
                            "sm_" + std::to_string(pipeline->arch));
        if (!has_kernel_nodes)
          return node_error(ErrorCode::Unsupported, at, t,
                            "the CUDA driver has no cuGraphAddNode with edge data (CUDA 12.3 or newer)");
        if (const CUresult r = add_kernel_node(*cuda, np, g, deps, programmatic ? edges.data() : nullptr, kp, &made[i]);
            r != CUDA_SUCCESS)
          return kernel_node_error(r, at, t);
        break;
      }
      case artifact::NodeKind::Memcpy: {
        Status s = compute_copy(at, t, &rec->copy);
        if (!s.ok()) return s;
        e = cuda->add_memcpy_node_1d(&made[i], g, dp, deps.size(), rec->copy.dst, rec->copy.src, rec->copy.bytes);
        if (e != cudaSuccess) return node_cuda_error(e, at, t, "cudaGraphAddMemcpyNode1D");
        break;
      }
      case artifact::NodeKind::Memset: {
        Status s = compute_fill(at, t, &rec->fill);
        if (!s.ok()) return s;
        e = cuda->add_memset_node(&made[i], g, dp, deps.size(), &rec->fill.p);
        if (e != cudaSuccess) return node_cuda_error(e, at, t, "cudaGraphAddMemsetNode");
        break;
      }
      case artifact::NodeKind::Empty:
        e = cuda->add_empty_node(&made[i], g, dp, deps.size());
        if (e != cudaSuccess) return node_cuda_error(e, at, t, "cudaGraphAddEmptyNode");
        break;
      case artifact::NodeKind::Conditional: {
        const fb::ConditionalOp& cond = *n.body_as_ConditionalOp();
        const int h = cond.handle();
        if (h < 0 || static_cast<size_t>(h) >= handles.size() || !handle_created[h])
          return node_error(ErrorCode::InvalidArtifact, at, t, "conditional handle " + std::to_string(h) +
                                                                  " belongs to no graph being built");
        const uint32_t nbodies = cond.bodies() ? cond.bodies()->size() : 0;
        cudaGraphNodeParams cp = {};
        cp.type = cudaGraphNodeTypeConditional;
        cp.conditional.handle = handles[h];
        cp.conditional.type = cond.type() == fb::ConditionalType::If      ? cudaGraphCondTypeIf
                              : cond.type() == fb::ConditionalType::While ? cudaGraphCondTypeWhile
                                                                          : cudaGraphCondTypeSwitch;
        cp.conditional.size = nbodies;
        has_loops |= !t.device && cp.conditional.type == cudaGraphCondTypeWhile;
        e = cuda->add_node(&made[i], g, dp, deps.size(), &cp);
        if (e != cudaSuccess) return node_cuda_error(e, at, t, "cudaGraphAddNode (conditional)");
        // The body graphs belong to the node; fill them in place.
        std::vector<cudaGraph_t> bodies(cp.conditional.phGraph_out, cp.conditional.phGraph_out + nbodies);
        for (uint32_t b = 0; b < nbodies; ++b) {
          observe_path.push_back(b);
          Status s = build(bodies[b], *cond.bodies()->Get(b), top, kernel_of_op);
          observe_path.pop_back();
          if (!s.ok()) return s;
        }
        break;
      }
      case artifact::NodeKind::Collective: {
        Status s = compute_collective(at, t, &rec->collective);
        if (!s.ok()) return s;
        s = capture(at, t, g, rec->collective, deps, &ends[i]);
        if (!s.ok()) return s;
        made[i] = ends[i].front();
        last_collective = static_cast<int>(i);
        break;
      }
    }
    rec = &records[r];
    rec->handle = made[i];
    record_index_stale = true;
    first = deps_end;
  }
  if (collectives) {
    capture_end.on = false;
    if (cudaError_t e = end_capture(); e != cudaSuccess)
      return node_cuda_error(e, NodeRef{ops->Get(nodes->Get(0)->op()), nodes->Get(0)}, t,
                             "cudaStreamEndCapture (the collectives' capture)");
  }
  return {};
}

// Conditional handles of host graph `top`, created on its (new) template.
Status Executable::Impl::create_handles(int top) {
  const Top& t = tops[top];
  const uint32_t nhandles = p->handles() ? p->handles()->size() : 0;
  for (uint32_t h = 0; h < nhandles; ++h) {
    const fb::ConditionalHandle* ch = p->handles()->Get(h);
    if (ch->graph() != t.graph) continue;
    cudaError_t e = cuda->conditional_handle_create(&handles[h], t.graph_template.get(), ch->default_value(),
                                                     ch->set_default() ? cudaGraphCondAssignDefault : 0);
    if (e != cudaSuccess) {
      (void)cuda->get_last_error();
      return rt::cuda_error(e, "cannot create conditional handle " + std::to_string(h) + " of graph '" +
                                   str(p->graphs()->Get(t.graph)->name()) + "'");
    }
    handle_created[h] = true;
  }
  return {};
}

void Executable::Impl::index_records() {
  record_index.clear();
  record_index.reserve(records.size());
  for (size_t r = 0; r < records.size(); ++r) record_index[records[r].handle] = r;
  record_index_stale = false;
}

}  // namespace orch
