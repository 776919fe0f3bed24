// instantiate(): buffers, graphs built with explicit node calls, device graphs and families
// instantiated for device launch, segments instantiated and uploaded; launch(), set_param()
// and rebind(), which patch the executable graphs in place.
#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "runtime/src/internal.h"

namespace orch {

using rt::Value;
namespace fb = orch::fb;

namespace {

std::string str(const flatbuffers::String* s) { return s ? std::string(s->c_str(), s->size()) : std::string(); }

// One kernel launch's parameters as evaluated, comparable to decide whether to patch.
struct KernelCall {
  cudaKernel_t kernel = nullptr;
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned shared = 0;
  std::vector<uint64_t> slots;  // one 8-byte slot per argument, the value in its low bytes

  bool operator==(const KernelCall& o) const {
    return kernel == o.kernel && std::equal(grid, grid + 3, o.grid) && std::equal(block, block + 3, o.block) &&
           shared == o.shared && slots == o.slots;
  }
  // `ptrs` must live until CUDA has copied the arguments (the call that takes the params).
  cudaKernelNodeParams params(std::vector<void*>& ptrs) {
    ptrs.resize(slots.size());
    for (size_t i = 0; i < slots.size(); ++i) ptrs[i] = &slots[i];
    cudaKernelNodeParams p = {};
    p.func = reinterpret_cast<void*>(kernel);
    p.gridDim = dim3(grid[0], grid[1], grid[2]);
    p.blockDim = dim3(block[0], block[1], block[2]);
    p.sharedMemBytes = shared;
    p.kernelParams = ptrs.empty() ? nullptr : ptrs.data();
    p.extra = nullptr;
    return p;
  }
};

struct CopyCall {
  void* dst = nullptr;
  const void* src = nullptr;
  size_t bytes = 0;
  bool operator==(const CopyCall& o) const { return dst == o.dst && src == o.src && bytes == o.bytes; }
};

struct FillCall {
  cudaMemsetParams p = {};
  bool operator==(const FillCall& o) const {
    return p.dst == o.p.dst && p.value == o.p.value && p.elementSize == o.p.elementSize && p.width == o.p.width;
  }
};

}  // namespace

struct Executable::Impl {
  // Keeps the kernels loaded; destroyed last.
  std::shared_ptr<const Pipeline::Impl> pipeline;
  const fb::Pipeline* p = nullptr;

  Bindings bindings;  // what instantiate got, updated by set_param and rebind
  rt::Plan plan;

  struct BufferState {
    rt::DeviceMemory device_memory;  // runtime-allocated device buffer
    rt::HostMemory host_memory;      // runtime-allocated host buffer
    void* ptr = nullptr;             // what nodes use (device address; equals the host one under UVA)
    void* host = nullptr;            // for host buffers: the host pointer
    size_t capacity = 0;             // bytes available behind ptr
    bool owned = false;
  };
  std::vector<BufferState> buffers;

  // Device arrays of the execs of each family (per Pipeline.graphs index; empty otherwise).
  std::vector<rt::DeviceMemory> tables;

  struct Top {
    int graph = -1;   // Pipeline.graphs index
    int member = -1;  // family member, -1 otherwise
    bool device = false;
    rt::Graph graph_template;  // destroyed after the exec (declared first)
    rt::GraphExec exec;
    bool upload_needed = false;  // a device graph patched since its last upload
    bool update_needed = false;  // a patch was refused: cudaGraphExecUpdate from the template
  };
  std::vector<Top> tops;                  // device graphs (and family members) first, then segments
  std::vector<int> segments;              // indices into tops, launch order
  std::vector<int> top_of_graph;          // Pipeline.graphs index -> tops index (non-family device graphs)
  std::vector<std::vector<int>> members;  // Pipeline.graphs index -> tops of the family members
  std::vector<cudaGraphConditionalHandle> handles;
  std::vector<bool> handle_created;

  struct NodeRecord {
    int top = -1;
    const fb::Node* node = nullptr;
    cudaGraphNode_t handle = nullptr;
    KernelCall kernel;
    CopyCall copy;
    FillCall fill;
  };
  std::vector<NodeRecord> records;
  Executable::Stats stats;
  std::unordered_map<cudaGraphNode_t, size_t> record_of;

  // ---- helpers --------------------------------------------------------------------------

  std::string node_where(const fb::Node& n) const { return rt::where(*p, n.loc()); }
  std::string node_name(const fb::Node& n, const Top& t) const {
    std::string g = str(p->graphs()->Get(t.graph)->name());
    if (t.member >= 0) g += "[" + std::to_string(t.member) + "]";
    return "`" + str(n.what()) + "` in graph '" + g + "'";
  }
  Error node_error(ErrorCode c, const fb::Node& n, const Top& t, const std::string& msg) const {
    return Error(c, node_name(n, t) + ": " + msg, node_where(n));
  }
  Error node_cuda_error(cudaError_t e, const fb::Node& n, const Top& t, const std::string& what) const {
    (void)cudaGetLastError();
    return rt::cuda_error(e, node_name(n, t) + ": " + what, node_where(n));
  }

  // Evaluates an integer expression into [lo, hi].
  std::string eval_uint(const fb::Expr* e, const Top& t, uint64_t lo, uint64_t hi, uint64_t* out) const {
    Value v;
    std::string err = rt::evaluate(e, plan.env(t.member), &v);
    if (!err.empty()) return err;
    if (v.is_float) return "expected an integer, got a float";
    if (v.i < 0 || static_cast<uint64_t>(v.i) < lo || static_cast<uint64_t>(v.i) > hi)
      return std::to_string(v.i) + " is outside " + std::to_string(lo) + ".." + std::to_string(hi);
    *out = static_cast<uint64_t>(v.i);
    return {};
  }

  cudaGraphExec_t exec_of(int graph_index, const Top& t) const {
    if (graph_index < 0 || graph_index == t.graph) return t.exec.get();  // self
    if (static_cast<size_t>(graph_index) >= top_of_graph.size() || top_of_graph[graph_index] < 0) return nullptr;
    return tops[top_of_graph[graph_index]].exec.get();
  }

  Status compute_kernel(const fb::Node& n, const Top& t, KernelCall* out) const {
    const int k = n.kernel();
    const fb::Kernel* kernel = p->kernels()->Get(k);
    out->kernel = pipeline->kernels[k];
    static const char* const axis[] = {"x", "y", "z"};
    for (int d = 0; d < 3; ++d) {
      uint64_t v;
      std::string e = eval_uint(n.grid()->Get(d), t, 1, 0x7fffffffu, &v);
      if (!e.empty()) return node_error(ErrorCode::InvalidValue, n, t, std::string("grid ") + axis[d] + ": " + e);
      out->grid[d] = static_cast<unsigned>(v);
      e = eval_uint(n.block()->Get(d), t, 1, 1024, &v);
      if (!e.empty()) return node_error(ErrorCode::InvalidValue, n, t, std::string("block ") + axis[d] + ": " + e);
      out->block[d] = static_cast<unsigned>(v);
    }
    out->shared = 0;
    if (n.shared_bytes()) {
      uint64_t v;
      std::string e = eval_uint(n.shared_bytes(), t, 0, 0x7fffffffu, &v);
      if (!e.empty()) return node_error(ErrorCode::InvalidValue, n, t, "dynamic shared memory: " + e);
      out->shared = static_cast<unsigned>(v);
    }
    const uint32_t nargs = n.args() ? n.args()->size() : 0;
    out->slots.assign(nargs, 0);
    for (uint32_t i = 0; i < nargs; ++i) {
      const fb::KernelArg* a = n.args()->Get(i);
      const std::string pname = kernel->params() && i < kernel->params()->size()
                                    ? str(kernel->params()->Get(i)->name())
                                    : std::to_string(i);
      uint64_t& slot = out->slots[i];
      switch (a->kind()) {
        case fb::ArgKind::Value: {
          Value v;
          std::string e = rt::evaluate(a->value(), plan.env(t.member), &v);
          if (e.empty()) e = rt::encode_scalar(v, a->type(), /*truncate=*/true, &slot);
          if (!e.empty()) return node_error(ErrorCode::InvalidValue, n, t, "argument '" + pname + "': " + e);
          break;
        }
        case fb::ArgKind::Buffer:
          slot = reinterpret_cast<uint64_t>(buffers[a->ref()].ptr);
          break;
        case fb::ArgKind::CondHandle:
          if (a->ref() < 0 || static_cast<size_t>(a->ref()) >= handles.size() || !handle_created[a->ref()])
            return node_error(ErrorCode::InvalidArtifact, n, t,
                              "argument '" + pname + "' names conditional handle " + std::to_string(a->ref()) +
                                  ", which belongs to no graph being built");
          slot = static_cast<uint64_t>(handles[a->ref()]);
          break;
        case fb::ArgKind::GraphExec:
          slot = reinterpret_cast<uint64_t>(exec_of(a->ref(), t));
          break;
        case fb::ArgKind::GraphTable:
          slot = reinterpret_cast<uint64_t>(tables[a->ref()].get());
          break;
      }
    }
    return {};
  }

  Status compute_copy(const fb::Node& n, const Top& t, CopyCall* out) const {
    const rt::BufferSize& s = plan.buffers[n.src()];
    const rt::BufferSize& d = plan.buffers[n.dst()];
    if (s.bytes > d.bytes)
      return node_error(ErrorCode::InvalidValue, n, t,
                        "copies " + std::to_string(s.bytes) + " bytes into a buffer of " + std::to_string(d.bytes));
    out->dst = buffers[n.dst()].ptr;
    out->src = buffers[n.src()].ptr;
    out->bytes = s.bytes;
    return {};
  }

  Status compute_fill(const fb::Node& n, const Top& t, FillCall* out) const {
    const unsigned es = n.memset_element_size();
    const uint64_t bytes = plan.buffers[n.dst()].bytes;
    if (es == 0 || bytes % es != 0)
      return node_error(ErrorCode::InvalidArtifact, n, t, "memset element size " + std::to_string(es) +
                                                               " does not divide " + std::to_string(bytes) + " bytes");
    out->p = {};
    out->p.dst = buffers[n.dst()].ptr;
    out->p.pitch = 0;
    out->p.value = n.memset_value();
    out->p.elementSize = es;
    out->p.width = bytes / es;
    out->p.height = 1;
    return {};
  }

  // ---- building -------------------------------------------------------------------------

  Status build(cudaGraph_t g, const fb::Graph& graph, int top) {
    Top& t = tops[top];
    const uint32_t count = graph.nodes() ? graph.nodes()->size() : 0;
    std::vector<cudaGraphNode_t> made(count, nullptr);
    std::vector<cudaGraphNode_t> deps;
    for (uint32_t i = 0; i < count; ++i) {
      const fb::Node& n = *graph.nodes()->Get(i);
      deps.clear();
      if (n.deps())
        for (uint32_t d : *n.deps()) deps.push_back(made[d]);
      const cudaGraphNode_t* dp = deps.empty() ? nullptr : deps.data();
      NodeRecord rec;
      rec.top = top;
      rec.node = &n;
      cudaError_t e = cudaSuccess;
      switch (n.kind()) {
        case fb::NodeKind::Kernel: {
          Status s = compute_kernel(n, t, &rec.kernel);
          if (!s.ok()) return s;
          s = pipeline->allow_shared_bytes(n.kernel(), rec.kernel.shared);
          if (!s.ok()) return s;
          std::vector<void*> ptrs;
          cudaKernelNodeParams kp = rec.kernel.params(ptrs);
          e = cudaGraphAddKernelNode(&made[i], g, dp, deps.size(), &kp);
          if (e != cudaSuccess) return node_cuda_error(e, n, t, "cudaGraphAddKernelNode");
          break;
        }
        case fb::NodeKind::Memcpy: {
          Status s = compute_copy(n, t, &rec.copy);
          if (!s.ok()) return s;
          e = cudaGraphAddMemcpyNode1D(&made[i], g, dp, deps.size(), rec.copy.dst, rec.copy.src, rec.copy.bytes,
                                       cudaMemcpyDefault);
          if (e != cudaSuccess) return node_cuda_error(e, n, t, "cudaGraphAddMemcpyNode1D");
          break;
        }
        case fb::NodeKind::Memset: {
          Status s = compute_fill(n, t, &rec.fill);
          if (!s.ok()) return s;
          e = cudaGraphAddMemsetNode(&made[i], g, dp, deps.size(), &rec.fill.p);
          if (e != cudaSuccess) return node_cuda_error(e, n, t, "cudaGraphAddMemsetNode");
          break;
        }
        case fb::NodeKind::Empty:
          e = cudaGraphAddEmptyNode(&made[i], g, dp, deps.size());
          if (e != cudaSuccess) return node_cuda_error(e, n, t, "cudaGraphAddEmptyNode");
          break;
        case fb::NodeKind::Conditional: {
          const int h = n.handle();
          if (h < 0 || static_cast<size_t>(h) >= handles.size() || !handle_created[h])
            return node_error(ErrorCode::InvalidArtifact, n, t, "conditional handle " + std::to_string(h) +
                                                                    " belongs to no graph being built");
          const uint32_t nbodies = n.bodies() ? n.bodies()->size() : 0;
          cudaGraphNodeParams cp = {};
          cp.type = cudaGraphNodeTypeConditional;
          cp.conditional.handle = handles[h];
          cp.conditional.type = n.conditional() == fb::ConditionalType::If      ? cudaGraphCondTypeIf
                                : n.conditional() == fb::ConditionalType::While ? cudaGraphCondTypeWhile
                                                                                : cudaGraphCondTypeSwitch;
          cp.conditional.size = nbodies;
          e = cudaGraphAddNode(&made[i], g, dp, nullptr, deps.size(), &cp);
          if (e != cudaSuccess) return node_cuda_error(e, n, t, "cudaGraphAddNode (conditional)");
          // The body graphs belong to the node; fill them in place.
          std::vector<cudaGraph_t> bodies(cp.conditional.phGraph_out, cp.conditional.phGraph_out + nbodies);
          for (uint32_t b = 0; b < nbodies; ++b) {
            Status s = build(bodies[b], *n.bodies()->Get(b), top);
            if (!s.ok()) return s;
          }
          break;
        }
        case fb::NodeKind::Collective:
          return node_error(ErrorCode::Unsupported, n, t, "collectives need NCCL support (not built yet)");
      }
      rec.handle = made[i];
      record_of[made[i]] = records.size();
      records.push_back(std::move(rec));
    }
    return {};
  }

  Status instantiate_top(int top, cudaStream_t stream) {
    Top& t = tops[top];
    cudaGraphInstantiateParams ip = {};
    ip.flags = t.device ? cudaGraphInstantiateFlagDeviceLaunch : 0;
    ip.uploadStream = stream;
    cudaError_t e = cudaGraphInstantiateWithParams(t.exec.out(), t.graph_template.get(), &ip);
    if (e != cudaSuccess || ip.result_out != cudaGraphInstantiateSuccess) {
      (void)cudaGetLastError();
      std::string g = str(p->graphs()->Get(t.graph)->name());
      if (t.member >= 0) g += "[" + std::to_string(t.member) + "]";
      std::string what = "cannot instantiate graph '" + g + "'" + (t.device ? " for device launch" : "") +
                         " (result " + std::to_string(static_cast<int>(ip.result_out)) + ")";
      std::string w;
      auto it = ip.errNode_out ? record_of.find(ip.errNode_out) : record_of.end();
      if (it != record_of.end()) {
        what += " at " + node_name(*records[it->second].node, t);
        w = node_where(*records[it->second].node);
      }
      return rt::cuda_error(e != cudaSuccess ? e : cudaErrorInvalidValue, what, w);
    }
    return {};
  }

  // Re-evaluates every node of the tops selected by `which` and patches the ones whose values
  // changed: the template node, then the executable node in place; a refused in-place patch
  // marks the top for a whole-graph cudaGraphExecUpdate. Evaluates everything before the first
  // CUDA call, so an evaluation error changes nothing.
  template <class Which>
  Status refresh(Which which) {
    struct Change {
      size_t record;
      KernelCall kernel;
      CopyCall copy;
      FillCall fill;
    };
    std::vector<Change> changes;
    for (size_t r = 0; r < records.size(); ++r) {
      NodeRecord& rec = records[r];
      if (!which(rec.top)) continue;
      const Top& t = tops[rec.top];
      Change c;
      c.record = r;
      switch (rec.node->kind()) {
        case fb::NodeKind::Kernel: {
          Status s = compute_kernel(*rec.node, t, &c.kernel);
          if (!s.ok()) return s;
          if (!(c.kernel == rec.kernel)) changes.push_back(std::move(c));
          break;
        }
        case fb::NodeKind::Memcpy: {
          Status s = compute_copy(*rec.node, t, &c.copy);
          if (!s.ok()) return s;
          if (!(c.copy == rec.copy)) changes.push_back(std::move(c));
          break;
        }
        case fb::NodeKind::Memset: {
          Status s = compute_fill(*rec.node, t, &c.fill);
          if (!s.ok()) return s;
          if (!(c.fill == rec.fill)) changes.push_back(std::move(c));
          break;
        }
        default: break;
      }
    }
    for (Change& c : changes) {
      NodeRecord& rec = records[c.record];
      Top& t = tops[rec.top];
      const fb::Node& n = *rec.node;
      cudaError_t e = cudaSuccess, x = cudaSuccess;
      switch (n.kind()) {
        case fb::NodeKind::Kernel: {
          Status s = pipeline->allow_shared_bytes(n.kernel(), c.kernel.shared);
          if (!s.ok()) return s;
          std::vector<void*> ptrs;
          cudaKernelNodeParams kp = c.kernel.params(ptrs);
          e = cudaGraphKernelNodeSetParams(rec.handle, &kp);
          if (e == cudaSuccess && t.exec) x = cudaGraphExecKernelNodeSetParams(t.exec.get(), rec.handle, &kp);
          rec.kernel = std::move(c.kernel);
          break;
        }
        case fb::NodeKind::Memcpy:
          e = cudaGraphMemcpyNodeSetParams1D(rec.handle, c.copy.dst, c.copy.src, c.copy.bytes, cudaMemcpyDefault);
          if (e == cudaSuccess && t.exec)
            x = cudaGraphExecMemcpyNodeSetParams1D(t.exec.get(), rec.handle, c.copy.dst, c.copy.src, c.copy.bytes,
                                                   cudaMemcpyDefault);
          rec.copy = c.copy;
          break;
        case fb::NodeKind::Memset:
          e = cudaGraphMemsetNodeSetParams(rec.handle, &c.fill.p);
          if (e == cudaSuccess && t.exec) x = cudaGraphExecMemsetNodeSetParams(t.exec.get(), rec.handle, &c.fill.p);
          rec.fill = c.fill;
          break;
        default: break;
      }
      if (e != cudaSuccess) return node_cuda_error(e, n, t, "cannot set the node's parameters");
      if (x != cudaSuccess) {
        (void)cudaGetLastError();  // refused in place: update the whole graph below
        t.update_needed = true;
        ++stats.patches_refused;
      } else if (t.exec) {
        ++stats.nodes_patched_in_place;
      }
      if (t.device) t.upload_needed = true;
    }
    for (Top& t : tops) {
      if (!t.update_needed || !t.exec) continue;
      cudaGraphExecUpdateResultInfo info = {};
      cudaError_t e = cudaGraphExecUpdate(t.exec.get(), t.graph_template.get(), &info);
      if (e != cudaSuccess) {
        (void)cudaGetLastError();
        std::string w;
        std::string what = "cannot update graph '" + str(p->graphs()->Get(t.graph)->name()) + "' in place (result " +
                           std::to_string(static_cast<int>(info.result)) + ")";
        auto it = info.errorNode ? record_of.find(info.errorNode) : record_of.end();
        if (it != record_of.end()) {
          what += " at " + node_name(*records[it->second].node, t);
          w = node_where(*records[it->second].node);
        }
        return rt::cuda_error(e, what, w);
      }
      t.update_needed = false;
      ++stats.graph_updates;
      if (t.device) t.upload_needed = true;
    }
    return {};
  }

  // ---- buffers --------------------------------------------------------------------------

  // Points buffer `i` at the application's memory.
  Status bind_buffer(uint32_t i, void* ptr, size_t bytes, BufferState* out) const {
    const fb::Buffer* b = p->buffers()->Get(i);
    cudaPointerAttributes attr = {};
    cudaError_t e = cudaPointerGetAttributes(&attr, ptr);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return rt::cuda_error(e, "buffer '" + str(b->name()) + "': cannot query the bound pointer", rt::where(*p, b->loc()));
    }
    if (attr.type == cudaMemoryTypeUnregistered)
      return Error(ErrorCode::InvalidArgument,
                   "buffer '" + str(b->name()) + "' is bound to memory CUDA does not know (pageable host memory?); "
                   "bind device memory, or pinned memory from cudaHostAlloc(cudaHostAllocMapped)",
                   rt::where(*p, b->loc()));
    out->ptr = attr.devicePointer ? attr.devicePointer : ptr;
    out->host = b->host() ? ptr : nullptr;
    out->capacity = bytes;
    out->owned = false;
    return {};
  }

  Status allocate_buffer(uint32_t i, BufferState* out, cudaStream_t stream) const {
    const fb::Buffer* b = p->buffers()->Get(i);
    const size_t bytes = plan.buffers[i].bytes;
    const std::string w = rt::where(*p, b->loc());
    cudaError_t e;
    if (b->host()) {
      e = cudaHostAlloc(out->host_memory.out(), bytes, cudaHostAllocMapped);
      if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return rt::cuda_error(e, "buffer '" + str(b->name()) + "': cannot allocate " + std::to_string(bytes) +
                                     " bytes of pinned host memory", w);
      }
      std::memset(out->host_memory.get(), 0, bytes);
      e = cudaHostGetDevicePointer(&out->ptr, out->host_memory.get(), 0);
      if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return rt::cuda_error(e, "buffer '" + str(b->name()) + "': cannot map the host memory", w);
      }
      out->host = out->host_memory.get();
    } else {
      e = cudaMalloc(out->device_memory.out(), bytes);
      if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return rt::cuda_error(e, "buffer '" + str(b->name()) + "': cannot allocate " + std::to_string(bytes) +
                                     " bytes of device memory", w);
      }
      // On the instantiate stream, which instantiate() waits for before it returns.
      e = cudaMemsetAsync(out->device_memory.get(), 0, bytes, stream);
      if (e != cudaSuccess) return rt::cuda_error(e, "buffer '" + str(b->name()) + "': cannot zero it", w);
      out->ptr = out->device_memory.get();
    }
    out->capacity = bytes;
    out->owned = true;
    return {};
  }

  int buffer_index(std::string_view name) const {
    const uint32_t n = p->buffers() ? p->buffers()->size() : 0;
    for (uint32_t i = 0; i < n; ++i)
      if (p->buffers()->Get(i)->name()->string_view() == name) return static_cast<int>(i);
    return -1;
  }

  // A new plan from `next`, checked against the buffers this Executable already holds.
  Result<rt::Plan> replan(const Bindings& next) const {
    Result<rt::Plan> r = rt::make_plan(*p, next);
    if (!r.ok()) return r;
    for (size_t i = 0; i < buffers.size(); ++i)
      if (buffers[i].owned && r->buffers[i].bytes > buffers[i].capacity)
        return Error(ErrorCode::Unsupported,
                     "buffer '" + str(p->buffers()->Get(i)->name()) + "' would grow from " +
                         std::to_string(buffers[i].capacity) + " to " + std::to_string(r->buffers[i].bytes) +
                         " bytes; the runtime allocated it, so instantiate again (or bind it yourself)",
                     rt::where(*p, p->buffers()->Get(i)->loc()));
    return r;
  }

  Status check_device() const {
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
};

// ---- instantiate ------------------------------------------------------------------------

Result<std::unique_ptr<Executable>> Pipeline::instantiate(const Bindings& bindings, cudaStream_t stream) const {
  auto x = std::make_unique<Executable::Impl>();
  x->pipeline = impl_;
  x->p = impl_->fb;
  const fb::Pipeline& p = *impl_->fb;
  Status s = x->check_device();
  if (!s.ok()) return s.error();

  if (const fb::Node* c = rt::find_collective(p))
    return Error(ErrorCode::Unsupported,
                 "collectives need NCCL support (not built yet): `" + str(c->what()) + "` cannot run in this runtime",
                 rt::where(p, c->loc()));

  Result<rt::Plan> plan = rt::make_plan(p, bindings);
  if (!plan.ok()) return plan.error();
  x->plan = std::move(plan.value());
  x->bindings = bindings;

  // Buffers: the application's, checked, or allocated here (zero-filled).
  const uint32_t nbuffers = p.buffers() ? p.buffers()->size() : 0;
  x->buffers.resize(nbuffers);
  for (uint32_t i = 0; i < nbuffers; ++i) {
    const Bindings::Buffer* bound = nullptr;
    for (const Bindings::Buffer& b : bindings.buffers())
      if (b.name == p.buffers()->Get(i)->name()->string_view()) bound = &b;
    s = bound ? x->bind_buffer(i, bound->ptr, bound->bytes, &x->buffers[i]) : x->allocate_buffer(i, &x->buffers[i], stream);
    if (!s.ok()) return s.error();
  }

  // Family exec tables, allocated now so kernels that take them can be built.
  const uint32_t ngraphs = p.graphs() ? p.graphs()->size() : 0;
  x->tables.resize(ngraphs);
  x->top_of_graph.assign(ngraphs, -1);
  x->members.resize(ngraphs);
  for (uint32_t g = 0; g < ngraphs; ++g) {
    const fb::Graph* graph = p.graphs()->Get(g);
    if (!graph->device() || graph->family_size() == 0) continue;
    cudaError_t e = cudaMalloc(x->tables[g].out(), graph->family_size() * sizeof(cudaGraphExec_t));
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return rt::cuda_error(e, "cannot allocate the exec table of family '" + str(graph->name()) + "'");
    }
  }

  // The top-level graphs: device graphs and family members first, then the segments.
  for (uint32_t g = 0; g < ngraphs; ++g) {
    const fb::Graph* graph = p.graphs()->Get(g);
    if (!graph->device()) continue;
    const uint32_t n = graph->family_size() > 0 ? graph->family_size() : 1;
    for (uint32_t m = 0; m < n; ++m) {
      Executable::Impl::Top t;
      t.graph = static_cast<int>(g);
      t.member = graph->family_size() > 0 ? static_cast<int>(m) : -1;
      t.device = true;
      if (t.member >= 0) x->members[g].push_back(static_cast<int>(x->tops.size()));
      else x->top_of_graph[g] = static_cast<int>(x->tops.size());
      x->tops.push_back(std::move(t));
    }
  }
  std::vector<int> segment_graphs;
  if (p.segments() && p.segments()->size() > 0)
    for (int g : *p.segments()) segment_graphs.push_back(g);
  else
    segment_graphs.push_back(p.main_graph());
  for (int g : segment_graphs) {
    if (g < 0 || static_cast<uint32_t>(g) >= ngraphs || p.graphs()->Get(g)->device())
      return Error(ErrorCode::InvalidArtifact, "segment " + std::to_string(g) + " is not a host graph");
    Executable::Impl::Top t;
    t.graph = g;
    x->segments.push_back(static_cast<int>(x->tops.size()));
    x->top_of_graph[g] = static_cast<int>(x->tops.size());
    x->tops.push_back(std::move(t));
  }

  // Template graphs, and the conditional handles of each (created on the top-level graph).
  const uint32_t nhandles = p.handles() ? p.handles()->size() : 0;
  x->handles.assign(nhandles, 0);
  x->handle_created.assign(nhandles, false);
  for (auto& t : x->tops) {
    cudaError_t e = cudaGraphCreate(t.graph_template.out(), 0);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return rt::cuda_error(e, "cudaGraphCreate");
    }
    if (t.device) continue;
    for (uint32_t h = 0; h < nhandles; ++h) {
      const fb::ConditionalHandle* ch = p.handles()->Get(h);
      if (ch->graph() != t.graph) continue;
      e = cudaGraphConditionalHandleCreate(&x->handles[h], t.graph_template.get(), ch->default_value(),
                                           ch->set_default() ? cudaGraphCondAssignDefault : 0);
      if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return rt::cuda_error(e, "cannot create conditional handle " + std::to_string(h) + " of graph '" +
                                     str(p.graphs()->Get(t.graph)->name()) + "'");
      }
      x->handle_created[h] = true;
    }
  }

  // Device graphs: build, instantiate for device launch, then give kernels the execs they
  // launch (their own for a self tail launch) and fill the family tables, then upload.
  auto is_device = [&](int top) { return x->tops[top].device; };
  for (size_t t = 0; t < x->tops.size(); ++t) {
    if (!x->tops[t].device) continue;
    s = x->build(x->tops[t].graph_template.get(), *p.graphs()->Get(x->tops[t].graph), static_cast<int>(t));
    if (!s.ok()) return s.error();
    s = x->instantiate_top(static_cast<int>(t), stream);
    if (!s.ok()) return s.error();
  }
  for (uint32_t g = 0; g < ngraphs; ++g) {
    if (x->members[g].empty()) continue;
    std::vector<cudaGraphExec_t> execs;
    for (int t : x->members[g]) execs.push_back(x->tops[t].exec.get());
    cudaError_t e = cudaMemcpyAsync(x->tables[g].get(), execs.data(), execs.size() * sizeof(cudaGraphExec_t),
                                    cudaMemcpyHostToDevice, stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream);  // `execs` is about to go
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return rt::cuda_error(e, "cannot fill the exec table of family '" + str(p.graphs()->Get(g)->name()) + "'");
    }
  }
  s = x->refresh(is_device);
  if (!s.ok()) return s.error();
  for (auto& t : x->tops) {
    if (!t.device) continue;
    cudaError_t e = cudaGraphUpload(t.exec.get(), stream);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return rt::cuda_error(e, "cannot upload device graph '" + str(p.graphs()->Get(t.graph)->name()) + "'");
    }
    t.upload_needed = false;
  }

  // The segments, which now see every device exec.
  for (int t : x->segments) {
    s = x->build(x->tops[t].graph_template.get(), *p.graphs()->Get(x->tops[t].graph), t);
    if (!s.ok()) return s.error();
    s = x->instantiate_top(t, stream);
    if (!s.ok()) return s.error();
    cudaError_t e = cudaGraphUpload(x->tops[t].exec.get(), stream);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return rt::cuda_error(e, "cannot upload graph '" + str(p.graphs()->Get(x->tops[t].graph)->name()) + "'");
    }
  }
  cudaError_t e = cudaStreamSynchronize(stream);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return rt::cuda_error(e, "instantiate: waiting for the uploads");
  }
  x->stats = Executable::Stats();  // count what happens after instantiate
  return std::make_unique<Executable>(std::move(x));
}

// ---- Executable -------------------------------------------------------------------------

Executable::Executable(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Executable::~Executable() = default;

Status Executable::launch(cudaStream_t stream) {
  Impl& x = *impl_;
  for (auto& t : x.tops) {
    if (!t.device || !t.upload_needed) continue;
    cudaError_t e = cudaGraphUpload(t.exec.get(), stream);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return rt::cuda_error(e, "cannot upload device graph '" + str(x.p->graphs()->Get(t.graph)->name()) + "'");
    }
    t.upload_needed = false;
    ++x.stats.device_graph_uploads;
  }
  for (int s : x.segments) {
    cudaError_t e = cudaGraphLaunch(x.tops[s].exec.get(), stream);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return rt::cuda_error(e, "cannot launch graph '" + str(x.p->graphs()->Get(x.tops[s].graph)->name()) + "'");
    }
  }
  return {};
}

Status Executable::set_param_value(std::string_view name, ScalarValue value) {
  Impl& x = *impl_;
  Bindings next = x.bindings;
  next.set_param(name, value);
  Result<rt::Plan> plan = x.replan(next);
  if (!plan.ok()) return plan.error();
  rt::Plan old = std::move(x.plan);
  x.plan = std::move(plan.value());
  Status s = x.refresh([](int) { return true; });
  if (!s.ok()) {
    if (s.error().code() != ErrorCode::Cuda) x.plan = std::move(old);  // nothing was patched
    return s;
  }
  x.bindings = std::move(next);
  return {};
}

Status Executable::rebind(std::string_view name, void* device_ptr, size_t bytes) {
  Impl& x = *impl_;
  const int i = x.buffer_index(name);
  if (i < 0)
    return Error(ErrorCode::UnknownName, "pipeline '" + x.pipeline->name + "' has no buffer '" + std::string(name) + "'");
  Bindings next = x.bindings;
  next.buffer(name, device_ptr, bytes);
  Result<rt::Plan> plan = x.replan(next);
  if (!plan.ok()) return plan.error();
  Impl::BufferState fresh;
  Status s = x.bind_buffer(static_cast<uint32_t>(i), device_ptr, bytes, &fresh);
  if (!s.ok()) return s;
  Impl::BufferState old = std::move(x.buffers[i]);
  rt::Plan old_plan = std::move(x.plan);
  x.buffers[i] = std::move(fresh);
  x.plan = std::move(plan.value());
  s = x.refresh([](int) { return true; });
  if (!s.ok()) {
    if (s.error().code() != ErrorCode::Cuda) {  // nothing was patched: put everything back
      x.buffers[i] = std::move(old);
      x.plan = std::move(old_plan);
    }
    return s;
  }
  x.bindings = std::move(next);
  return {};  // `old` frees memory the runtime had allocated
}

void* Executable::buffer(std::string_view name) const {
  const int i = impl_->buffer_index(name);
  if (i < 0) return nullptr;
  const Impl::BufferState& b = impl_->buffers[i];
  return b.host ? b.host : b.ptr;
}

size_t Executable::buffer_bytes(std::string_view name) const {
  const int i = impl_->buffer_index(name);
  return i < 0 ? 0 : impl_->plan.buffers[i].bytes;
}

Executable::Stats Executable::stats() const { return impl_->stats; }

Result<double> Executable::param_as_double(std::string_view name) const {
  const fb::Pipeline& p = *impl_->p;
  const uint32_t n = p.params() ? p.params()->size() : 0;
  for (uint32_t i = 0; i < n; ++i)
    if (p.params()->Get(i)->name()->string_view() == name) return impl_->plan.params[i].as_double();
  return Error(ErrorCode::UnknownName, "pipeline '" + impl_->pipeline->name + "' has no param '" + std::string(name) + "'");
}

}  // namespace orch
