// instantiate(): buffers, graphs built with explicit node calls, device graphs and families
// instantiated for device launch, segments instantiated and uploaded; launch(), set_param()
// and rebind(), which patch the executable graphs in place.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <tuple>
#include <thread>
#include <unordered_map>

#include "orch/observe.h"
#include "runtime/src/arena.h"
#include "runtime/src/binding_checks.h"
#include "runtime/src/communicators.h"
#include "runtime/src/driver.h"
#include "runtime/src/internal.h"
#include "runtime/src/loop_order.h"

namespace orch {

using rt::CollectiveCall;
using rt::Value;

namespace {

std::string str(const flatbuffers::String* s) { return s ? std::string(s->c_str(), s->size()) : std::string(); }

// A kernel's argument slots: in place for the few arguments most kernels take, so recording a
// node allocates nothing (a 1,000-node graph would otherwise make 1,000 small allocations).
class Slots {
 public:
  static constexpr uint32_t kInPlace = 6;
  Slots() = default;
  Slots(const Slots& o) { *this = o; }
  Slots(Slots&& o) noexcept { *this = std::move(o); }
  Slots& operator=(const Slots& o) {
    if (this != &o) {
      assign(o.n_, 0);
      std::copy(o.data(), o.data() + o.n_, data());
    }
    return *this;
  }
  Slots& operator=(Slots&& o) noexcept {
    if (this != &o) {
      std::copy(o.in_place_, o.in_place_ + kInPlace, in_place_);
      heap_ = std::move(o.heap_);
      heap_size_ = o.heap_size_;
      n_ = o.n_;
      o.heap_size_ = o.n_ = 0;
    }
    return *this;
  }
  // n slots, each `value`.
  void assign(uint32_t n, uint64_t value) {
    if (n > kInPlace && n > heap_size_) {
      heap_.reset(new uint64_t[n]);
      heap_size_ = n;
    }
    n_ = n;
    std::fill(data(), data() + n, value);
  }
  uint32_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  uint64_t* data() { return n_ > kInPlace ? heap_.get() : in_place_; }
  const uint64_t* data() const { return n_ > kInPlace ? heap_.get() : in_place_; }
  uint64_t& operator[](size_t i) { return data()[i]; }
  bool operator==(const Slots& o) const { return n_ == o.n_ && std::equal(data(), data() + n_, o.data()); }

 private:
  uint64_t in_place_[kInPlace] = {};
  std::unique_ptr<uint64_t[]> heap_;
  uint32_t heap_size_ = 0;
  uint32_t n_ = 0;
};

// One kernel launch's parameters as evaluated, comparable to decide whether to patch.
struct KernelCall {
  cudaKernel_t kernel = nullptr;
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned shared = 0;
  Slots slots;  // one 8-byte slot per argument, the value in its low bytes

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

using artifact::NodeRef;

// Every collective node of the top-level graphs (the validator allows them nowhere else).
std::vector<NodeRef> collectives_of(const fb::Pipeline& p) {
  std::vector<NodeRef> out;
  if (!p.graphs()) return out;
  for (const fb::Graph* g : *p.graphs())
    for (uint32_t i = 0; i < (g->nodes() ? g->nodes()->size() : 0); ++i) {
      const NodeRef n = artifact::node_ref(p, *g, i);
      if (n.op->kind() == fb::NodeKind::Collective) out.push_back(n);
    }
  return out;
}

inline cudaError_t destroy_stream(cudaStream_t s) { return cudaStreamDestroy(s); }
using StreamOwner = rt::Owner<cudaStream_t, destroy_stream>;

// The observation hook (orch/observe.h): a phase of one top-level graph, told on every path.
struct ObservedPhase {
  Observer* o;
  Phase phase;
  int graph, member;
  bool ok = false;
  ObservedPhase(Phase p, int g, int m) : o(observer()), phase(p), graph(g), member(m) {
    if (o) o->phase_begin(phase, graph, member);
  }
  ~ObservedPhase() {
    if (o) o->phase_end(phase, graph, member, ok);
  }
};

}  // namespace

struct Executable::Impl {
  // Keeps the kernels loaded; destroyed last.
  std::shared_ptr<const Pipeline::Impl> pipeline;
  const fb::Pipeline* p = nullptr;

  // The communicators (NCCL, when the pipeline uses it), destroyed after every graph that
  // holds their captured work (members are destroyed in reverse order).
  rt::Communicators comms;
  StreamOwner side_stream;       // captures collectives; uploads rebuilt segments

  Bindings bindings;  // what instantiate got, updated by set_param and rebind
  rt::Plan plan;

  struct BufferState {
    rt::DeviceMemory device_memory;  // runtime-allocated device buffer
    rt::HostMemory host_memory;      // runtime-allocated host buffer
    void* ptr = nullptr;             // what nodes use (device address; equals the host one under UVA)
    void* host = nullptr;            // for host buffers: the host pointer
    size_t capacity = 0;             // bytes available behind ptr
    bool owned = false;
    bool in_arena = false;  // at its place in `arena` (the memory plan), which owns the memory
  };
  std::vector<BufferState> buffers;
  // The memory plan's arena: the buffers that share it, laid out with the bound sizes.
  rt::DeviceMemory arena;
  rt::ArenaPlacement arena_place;
  // Per buffer: some node may write it (overlap checks); worked out when two bound buffers
  // first share memory, since it walks every node.
  mutable std::vector<bool> written;
  mutable bool written_known = false;
  const std::vector<bool>& written_flags() const {
    if (!written_known) {
      written = rt::written_buffers(*p);
      written_known = true;
    }
    return written;
  }

  // Device arrays of the execs of each family (per Pipeline.graphs index; empty otherwise).
  std::vector<rt::DeviceMemory> tables;

  // The device status record (fb::DeviceError): four u32, code, site, detail, count, where
  // generated kernels report errors they meet on the GPU; zeroed at instantiate.
  rt::DeviceMemory status;
  static constexpr size_t kStatusBytes = 4 * sizeof(uint32_t);

  struct Top {
    int graph = -1;   // Pipeline.graphs index
    int member = -1;  // family member, -1 otherwise
    bool device = false;
    rt::Graph graph_template;  // destroyed after the exec (declared first)
    rt::GraphExec exec;
    bool upload_needed = false;  // a device graph patched since its last upload
    bool update_needed = false;  // a patch was refused: cudaGraphExecUpdate from the template
    bool node_priority = false;  // instantiated with node priorities (a high-priority collective)
  };
  std::vector<Top> tops;                  // device graphs (and family members) first, then segments
  std::vector<int> segments;              // indices into tops, launch order
  std::vector<int> top_of_graph;          // Pipeline.graphs index -> tops index (non-family device graphs)
  std::vector<std::vector<int>> members;  // Pipeline.graphs index -> tops of the family members
  std::vector<cudaGraphConditionalHandle> handles;
  std::vector<bool> handle_created;

  struct NodeRecord {
    int top = -1;
    NodeRef node;
    cudaGraphNode_t handle = nullptr;
    KernelCall kernel;
    CopyCall copy;
    FillCall fill;
    CollectiveCall collective;
  };
  std::vector<NodeRecord> records;
  Executable::Stats stats;
  int sm_count = -1;  // this GPU's, once one_wave() asked (0: unknown)
  std::map<std::tuple<cudaKernel_t, uint64_t, unsigned>, int> blocks_per_sm;  // one_wave(); -1: unknown
  std::optional<std::pair<std::tuple<cudaKernel_t, uint64_t, unsigned>, int>> last_occupancy;
  std::vector<uint32_t> observe_path;  // build(): the node being made (orch/observe.h NodeSite)
  Executable::InstantiateTimes times;  // instantiate()'s phases (build_all)
  // Node handle -> index in `records`, for patches and error messages; built on first use
  // after the records change (instantiate itself needs it only to name a failing node).
  std::unordered_map<cudaGraphNode_t, size_t> record_index;
  bool record_index_stale = true;
  const std::unordered_map<cudaGraphNode_t, size_t>& record_of() {
    if (record_index_stale) index_records();
    return record_index;
  }

  // Recorded after each launch where destroying the Executable under a running launch would
  // free what it uses (memory the runtime allocated, device-launched graphs, communicators):
  // the destructor waits for it. CUDA itself frees an executable graph only once its launches
  // have finished, so a pipeline with none of these needs no event.
  rt::Event done;
  bool launched = false;  // `done` has been recorded
  // A host graph holds a WHILE node: launches go one after another with other such launches on
  // the device (loop_order.h says why).
  bool has_loops = false;
  // Set when a failed patch could not be undone: the graphs may hold a mix of old and new
  // values, so every later launch, set_param and rebind returns this instead.
  Error broken;

  // ---- helpers --------------------------------------------------------------------------

  std::string node_where(const NodeRef& n) const { return rt::where(*p, &n.at->loc()); }
  std::string node_name(const NodeRef& n, const Top& t) const {
    std::string g = str(p->graphs()->Get(t.graph)->name());
    if (t.member >= 0) g += "[" + std::to_string(t.member) + "]";
    return "`" + str(n.op->what()) + "` in graph '" + g + "'";
  }
  Error node_error(ErrorCode c, const NodeRef& n, const Top& t, const std::string& msg) const {
    return Error(c, node_name(n, t) + ": " + msg, node_where(n));
  }
  Error node_cuda_error(cudaError_t e, const NodeRef& n, const Top& t, const std::string& what) const {
    (void)cudaGetLastError();
    return rt::cuda_error(e, node_name(n, t) + ": " + what, node_where(n));
  }

  // A launch shape is most often one integer constant, which validate() proved a value of its
  // type: taken as it is when in [lo, hi] (true); anything else goes the general way (false),
  // for its value or its message. Every kernel node has six or seven, evaluated at
  // instantiate and at every set_param.
  static bool constant_uint(const fb::Expr* e, uint64_t lo, uint64_t hi, uint64_t* out) {
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

  // Evaluates an integer expression into [lo, hi].
  std::string eval_uint(const fb::Expr* e, const Top& t, uint64_t lo, uint64_t hi, uint64_t* out) const {
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

  cudaGraphExec_t exec_of(int graph_index, const Top& t) const {
    if (graph_index < 0 || graph_index == t.graph) return t.exec.get();  // self
    if (static_cast<size_t>(graph_index) >= top_of_graph.size() || top_of_graph[graph_index] < 0) return nullptr;
    return tops[top_of_graph[graph_index]].exec.get();
  }

  Status compute_kernel(const NodeRef& at, const Top& t, KernelCall* out) const {
    const fb::Op& n = *at.op;
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
  Status kernel_args(const NodeRef& at, const Top& t, KernelCall* out) const {
    const fb::Op& n = *at.op;
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
        case fb::ArgKind::GraphExec:
          slot = reinterpret_cast<uint64_t>(exec_of(a->ref(), t));
          break;
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

  Status compute_copy(const NodeRef& at, const Top& t, CopyCall* out) const {
    const fb::Op& n = *at.op;
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

  Status compute_fill(const NodeRef& at, const Top& t, FillCall* out) const {
    const fb::Op& n = *at.op;
    const unsigned es = n.memset_element_size();
    const uint64_t bytes = plan.buffers[n.dst()].bytes;
    if (es == 0 || bytes % es != 0)
      return node_error(ErrorCode::InvalidArtifact, at, t, "memset element size " + std::to_string(es) +
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

  Status compute_collective(const NodeRef& at, const Top& t, CollectiveCall* out) const {
    const fb::Op& n = *at.op;
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
  Status begin_capture(const NodeRef& at, const Top& t, cudaGraph_t g) {
    if (!side_stream) {
      cudaError_t e = cudaStreamCreateWithFlags(side_stream.out(), cudaStreamNonBlocking);
      if (e != cudaSuccess) return node_cuda_error(e, at, t, "cannot create the stream that captures collectives");
    }
    cudaError_t e =
        cudaStreamBeginCaptureToGraph(side_stream.get(), g, nullptr, nullptr, 0, cudaStreamCaptureModeRelaxed);
    if (e != cudaSuccess) return node_cuda_error(e, at, t, "cudaStreamBeginCaptureToGraph");
    return {};
  }

  // Ends the capture begin_capture started (on success or on an error: the stream must leave
  // capture mode either way). The graph stays the caller's.
  cudaError_t end_capture() {
    cudaGraph_t g = nullptr;
    cudaError_t e = cudaStreamEndCapture(side_stream.get(), &g);
    if (e != cudaSuccess) (void)cudaGetLastError();
    return e;
  }

  // The NCCL call of collective `c`, captured after `deps`; its last nodes (what a node that
  // depends on the collective waits for) into `ends`.
  Status capture(const NodeRef& at, Top& t, const CollectiveCall& c, std::vector<cudaGraphNode_t>& deps,
                 std::vector<cudaGraphNode_t>* ends) {
    cudaStream_t cs = side_stream.get();
    cudaError_t e = cudaStreamUpdateCaptureDependencies(cs, deps.empty() ? nullptr : deps.data(), nullptr,
                                                        deps.size(), cudaStreamSetCaptureDependencies);
    if (e != cudaSuccess) return node_cuda_error(e, at, t, "cudaStreamUpdateCaptureDependencies");
    // NCCL's kernels for a high-priority collective: the nodes its capture adds.
    std::vector<cudaGraphNode_t> before;
    cudaGraph_t captured = nullptr;
    if (at.op->high_priority()) {
      cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
      e = cudaStreamGetCaptureInfo(cs, &st, nullptr, &captured, nullptr, nullptr, nullptr);
      if (e != cudaSuccess) return node_cuda_error(e, at, t, "cudaStreamGetCaptureInfo");
      if (Status s = graph_nodes(captured, &before); !s.ok()) return s;
    }
    rt::nccl::Result r = comms.issue(c, cs);
    const std::string call = std::string(rt::nccl_function(c.kind)) + " of " + std::to_string(c.count) + " elements";
    if (r != rt::nccl::kSuccess) {
      (void)cudaGetLastError();
      return Error(ErrorCode::Nccl, node_name(at, t) + ": " + call + ": " + comms.describe(r, c.comm), node_where(at));
    }
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    const cudaGraphNode_t* last = nullptr;
    size_t nlast = 0;
    e = cudaStreamGetCaptureInfo(cs, &status, nullptr, nullptr, &last, nullptr, &nlast);
    if (e != cudaSuccess) return node_cuda_error(e, at, t, "capturing " + call + ": cudaStreamGetCaptureInfo");
    if (status != cudaStreamCaptureStatusActive || nlast == 0)
      return node_cuda_error(cudaErrorStreamCaptureInvalidated, at, t, "capturing " + call + ": no work was captured");
    ends->assign(last, last + nlast);
    if (at.op->high_priority()) {
      // Kernels may run beside this collective (lowering/prioritize_collectives.cpp): NCCL's
      // kernels first on the SMs, else a large kernel beside it takes every SM that frees up.
      if (Status s = prioritize_new_kernels(at, t, captured, std::move(before)); !s.ok()) return s;
    }
    return {};
  }

  // Sets the greatest priority on the kernel nodes of `g` that are not in `before`, and marks
  // `t` for instantiation with node priorities.
  Status prioritize_new_kernels(const NodeRef& at, Top& t, cudaGraph_t g, std::vector<cudaGraphNode_t> before) {
    if (greatest_priority > 0) {
      int least = 0;
      cudaError_t e = cudaDeviceGetStreamPriorityRange(&least, &greatest_priority);
      if (e != cudaSuccess) return node_cuda_error(e, at, t, "cudaDeviceGetStreamPriorityRange");
    }
    std::vector<cudaGraphNode_t> after;
    if (Status s = graph_nodes(g, &after); !s.ok()) return s;
    std::sort(before.begin(), before.end());
    for (cudaGraphNode_t n : after) {
      if (std::binary_search(before.begin(), before.end(), n)) continue;
      cudaGraphNodeType type = cudaGraphNodeTypeEmpty;
      cudaError_t e = cudaGraphNodeGetType(n, &type);
      if (e != cudaSuccess) return node_cuda_error(e, at, t, "cudaGraphNodeGetType");
      if (type != cudaGraphNodeTypeKernel) continue;
      cudaLaunchAttributeValue v = {};
      v.priority = greatest_priority;
      e = cudaGraphKernelNodeSetAttribute(n, cudaLaunchAttributePriority, &v);
      if (e != cudaSuccess) return node_cuda_error(e, at, t, "cudaGraphKernelNodeSetAttribute (priority)");
      t.node_priority = true;
    }
    return {};
  }

  static Status graph_nodes(cudaGraph_t g, std::vector<cudaGraphNode_t>* out) {
    size_t n = 0;
    cudaError_t e = cudaGraphGetNodes(g, nullptr, &n);
    if (e == cudaSuccess) {
      out->resize(n);
      e = cudaGraphGetNodes(g, out->data(), &n);
      out->resize(n);
    }
    if (e != cudaSuccess) return rt::cuda_error(e, "cudaGraphGetNodes");
    return {};
  }
  int greatest_priority = 1;  // the device's greatest stream priority; 1: not asked yet

  // ---- building -------------------------------------------------------------------------

  // CUDA's edge data for the dependencies graph.deps()[first, end), in order, when any of them
  // is programmatic (Graph.dep_kinds); false when every edge is full, which needs no edge data.
  static bool programmatic_edges(const flatbuffers::Vector<fb::EdgeKind>* kinds, uint32_t first, uint32_t end,
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

  // Whether every block of launch `k` is resident at once on this GPU (one wave): the driver's
  // occupancy for its kernel, block and shared memory, times the SMs, cached per kernel and
  // shape. orchc made an edge programmatic only between launches that fit in one wave at the
  // params' defaults on the arch's largest device; the bound params or a smaller GPU (an H100
  // PCIe has 114 SMs, not 132) may make one run in several waves, where a programmatic edge
  // measured slower than a full one (docs/performance.md, "On real kernels"). A full edge orders
  // at least as much, and a kernel that waits at entry then waits for nothing. Where the driver
  // cannot say, orchc's choice stands.
  bool one_wave(const KernelCall& k) {
    const uint64_t blocks = uint64_t{k.grid[0]} * k.grid[1] * k.grid[2];
    const uint64_t threads = uint64_t{k.block[0]} * k.block[1] * k.block[2];
    if (sm_count < 0) {
      const int dev = pipeline->device;
      if (cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
        (void)cudaGetLastError();
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
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, reinterpret_cast<const void*>(k.kernel),
                                                          static_cast<int>(threads), k.shared) != cudaSuccess) {
          (void)cudaGetLastError();
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

  // Every kernel node, with its edge data when some edge is programmatic (`edges`, else null).
  // Through the driver's cuGraphAddNode with the library's CUkernel rather than
  // cudaGraphAddKernelNode / cudaGraphAddNode with the cudaKernel_t: on a 1,000-kernel chain,
  // building, instantiating and uploading took 0.91-0.93 of the time that way (launch_bench row
  // s4 against s; H200 and H100, driver 580.159.04, 2026-11-23), the runtime API's call costing
  // more per node, and one call takes both kinds of edge.
  // `add_node`: the driver's cuGraphAddNode (rt::driver(), looked up once per build); `np` is
  // the build's node parameters, zeroed once, of type kernel: this sets the launch's fields and
  // adds the node (a 1,000-kernel graph adds 1,000 of them).
  static CUresult add_kernel_node(rt::Driver::GraphAddNode add_node, CUgraphNodeParams& np, cudaGraph_t g,
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
    return add_node(out, g, deps.empty() ? nullptr : deps.data(), edges, deps.size(), &np);
  }
  [[gnu::noinline]] Error kernel_node_error(CUresult r, const NodeRef& at, const Top& t) const {
    return rt::driver_call_error(r, node_name(at, t) + ": cuGraphAddNode (kernel)", node_where(at));
  }

  // Builds `graph` into `g` for tops[top]. A kernel's launch depends on its op and the top
  // only, so a node whose op an earlier node of this build ran copies that node's record
  // (`kernel_of_op`: op -> record, shared with the bodies' builds; made by the outermost call).
  Status build(cudaGraph_t g, const fb::Graph& graph, int top, std::vector<int32_t>* kernel_of_op = nullptr) {
    std::vector<int32_t> own;
    if (!kernel_of_op) {
      own.assign(p->ops() ? p->ops()->size() : 0, -1);
      kernel_of_op = &own;
    }
    Top& t = tops[top];
    const rt::Driver::GraphAddNode add_node = rt::driver().graph_add_node;
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
      collectives |= ops->Get(nodes->Get(i)->op())->kind() == fb::NodeKind::Collective;
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
      if (n.kind() == fb::NodeKind::Collective && last_collective >= 0 &&
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
      const fb::NodeKind kind = n.kind();
      int32_t* same = kind == fb::NodeKind::Kernel ? &(*kernel_of_op)[at.at->op()] : nullptr;
      if (same && *same >= 0) records.push_back(records[static_cast<size_t>(*same)]);
      else records.emplace_back();
      NodeRecord* rec = &records[r];
      rec->top = top;
      rec->node = at;
      cudaError_t e = cudaSuccess;
      switch (kind) {
        case fb::NodeKind::Kernel: {
          if (*same < 0) {
            if (Status s = compute_kernel(at, t, &rec->kernel); !s.ok()) return s;
            *same = static_cast<int32_t>(r);
          }
          if (rec->kernel.shared > Pipeline::Impl::kDefaultSharedBytes)
            if (Status s = pipeline->allow_shared_bytes(n.kernel(), rec->kernel.shared); !s.ok()) return s;
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
          if (!add_node)
            return node_error(ErrorCode::Unsupported, at, t,
                              "the CUDA driver has no cuGraphAddNode with edge data (CUDA 12.3 or newer)");
          if (const CUresult r = add_kernel_node(add_node, np, g, deps, programmatic ? edges.data() : nullptr, kp, &made[i]);
              r != CUDA_SUCCESS)
            return kernel_node_error(r, at, t);
          break;
        }
        case fb::NodeKind::Memcpy: {
          Status s = compute_copy(at, t, &rec->copy);
          if (!s.ok()) return s;
          e = cudaGraphAddMemcpyNode1D(&made[i], g, dp, deps.size(), rec->copy.dst, rec->copy.src, rec->copy.bytes,
                                       cudaMemcpyDefault);
          if (e != cudaSuccess) return node_cuda_error(e, at, t, "cudaGraphAddMemcpyNode1D");
          break;
        }
        case fb::NodeKind::Memset: {
          Status s = compute_fill(at, t, &rec->fill);
          if (!s.ok()) return s;
          e = cudaGraphAddMemsetNode(&made[i], g, dp, deps.size(), &rec->fill.p);
          if (e != cudaSuccess) return node_cuda_error(e, at, t, "cudaGraphAddMemsetNode");
          break;
        }
        case fb::NodeKind::Empty:
          e = cudaGraphAddEmptyNode(&made[i], g, dp, deps.size());
          if (e != cudaSuccess) return node_cuda_error(e, at, t, "cudaGraphAddEmptyNode");
          break;
        case fb::NodeKind::Conditional: {
          const int h = n.handle();
          if (h < 0 || static_cast<size_t>(h) >= handles.size() || !handle_created[h])
            return node_error(ErrorCode::InvalidArtifact, at, t, "conditional handle " + std::to_string(h) +
                                                                    " belongs to no graph being built");
          const uint32_t nbodies = n.bodies() ? n.bodies()->size() : 0;
          cudaGraphNodeParams cp = {};
          cp.type = cudaGraphNodeTypeConditional;
          cp.conditional.handle = handles[h];
          cp.conditional.type = n.conditional() == fb::ConditionalType::If      ? cudaGraphCondTypeIf
                                : n.conditional() == fb::ConditionalType::While ? cudaGraphCondTypeWhile
                                                                                : cudaGraphCondTypeSwitch;
          cp.conditional.size = nbodies;
          has_loops |= !t.device && cp.conditional.type == cudaGraphCondTypeWhile;
          e = cudaGraphAddNode(&made[i], g, dp, nullptr, deps.size(), &cp);
          if (e != cudaSuccess) return node_cuda_error(e, at, t, "cudaGraphAddNode (conditional)");
          // The body graphs belong to the node; fill them in place.
          std::vector<cudaGraph_t> bodies(cp.conditional.phGraph_out, cp.conditional.phGraph_out + nbodies);
          for (uint32_t b = 0; b < nbodies; ++b) {
            observe_path.push_back(b);
            Status s = build(bodies[b], *n.bodies()->Get(b), top, kernel_of_op);
            observe_path.pop_back();
            if (!s.ok()) return s;
          }
          break;
        }
        case fb::NodeKind::Collective: {
          Status s = compute_collective(at, t, &rec->collective);
          if (!s.ok()) return s;
          s = capture(at, t, rec->collective, deps, &ends[i]);
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

  Status instantiate_top(int top, cudaStream_t stream) {
    Top& t = tops[top];
    cudaGraphInstantiateParams ip = {};
    ip.flags = t.device ? cudaGraphInstantiateFlagDeviceLaunch : 0;
    // Set only on segments holding a high-priority collective (prioritize_new_kernels).
    if (t.node_priority) ip.flags |= cudaGraphInstantiateFlagUseNodePriority;
    ip.uploadStream = stream;
    ObservedPhase observed(Phase::Instantiate, t.graph, t.member);
    cudaError_t e = cudaGraphInstantiateWithParams(t.exec.out(), t.graph_template.get(), &ip);
    if (e != cudaSuccess || ip.result_out != cudaGraphInstantiateSuccess) {
      (void)cudaGetLastError();
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

  // Conditional handles of host graph `top`, created on its (new) template.
  Status create_handles(int top) {
    const Top& t = tops[top];
    const uint32_t nhandles = p->handles() ? p->handles()->size() : 0;
    for (uint32_t h = 0; h < nhandles; ++h) {
      const fb::ConditionalHandle* ch = p->handles()->Get(h);
      if (ch->graph() != t.graph) continue;
      cudaError_t e = cudaGraphConditionalHandleCreate(&handles[h], t.graph_template.get(), ch->default_value(),
                                                       ch->set_default() ? cudaGraphCondAssignDefault : 0);
      if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return rt::cuda_error(e, "cannot create conditional handle " + std::to_string(h) + " of graph '" +
                                     str(p->graphs()->Get(t.graph)->name()) + "'");
      }
      handle_created[h] = true;
    }
    return {};
  }

  void index_records() {
    record_index.clear();
    record_index.reserve(records.size());
    for (size_t r = 0; r < records.size(); ++r) record_index[records[r].handle] = r;
    record_index_stale = false;
  }

  // What rebuild_top replaced, kept until the refresh it belongs to has succeeded.
  struct Rebuilt {
    int top = -1;
    rt::Graph graph_template;  // destroyed after the exec (declared first)
    rt::GraphExec exec;
    std::vector<NodeRecord> records;
    std::vector<cudaGraphConditionalHandle> handles;
    bool update_needed = false;
  };

  // Puts back what rebuild_top replaced; the new template, exec and records go.
  void restore(Rebuilt& old) {
    Top& t = tops[old.top];
    const int top = old.top;
    records.erase(std::remove_if(records.begin(), records.end(), [&](const NodeRecord& r) { return r.top == top; }),
                  records.end());
    t.exec = std::move(old.exec);
    t.graph_template = std::move(old.graph_template);
    t.update_needed = old.update_needed;
    for (NodeRecord& r : old.records) records.push_back(std::move(r));
    old.records.clear();
    handles = old.handles;
    index_records();
  }

  // Builds host segment `top` again from the current plan (capturing its collectives anew),
  // instantiates and uploads it, and replaces the old exec, which goes to `*saved` (CUDA frees
  // an exec once any launch of it in flight has finished). On failure the old exec stays.
  Status rebuild_top(int top, Rebuilt* saved) {
    Top& t = tops[top];
    Rebuilt old;
    old.top = top;
    old.graph_template = std::move(t.graph_template);
    old.exec = std::move(t.exec);
    old.update_needed = t.update_needed;
    old.handles = handles;
    std::vector<NodeRecord> kept;
    for (NodeRecord& r : records) (r.top == top ? old.records : kept).push_back(std::move(r));
    records = std::move(kept);
    auto fail = [&](Status s) {
      restore(old);
      return s;
    };
    cudaError_t e = cudaGraphCreate(t.graph_template.out(), 0);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return fail(rt::cuda_error(e, "cudaGraphCreate"));
    }
    Status s = create_handles(top);
    if (s.ok()) {
      ObservedPhase observed(Phase::Build, t.graph, t.member);
      s = build(t.graph_template.get(), *p->graphs()->Get(t.graph), top);
      observed.ok = s.ok();
    }
    if (!s.ok()) return fail(s);
    index_records();
    s = instantiate_top(top, side_stream.get());
    if (s.ok()) {
      ObservedPhase observed(Phase::Upload, t.graph, t.member);
      e = cudaGraphUpload(t.exec.get(), side_stream.get());
      if (e == cudaSuccess) e = cudaStreamSynchronize(side_stream.get());
      observed.ok = e == cudaSuccess;
      if (e != cudaSuccess) {
        (void)cudaGetLastError();
        s = rt::cuda_error(e, "cannot upload graph '" + str(p->graphs()->Get(t.graph)->name()) + "'");
      }
    }
    if (!s.ok()) return fail(s);
    t.update_needed = false;
    ++stats.segments_rebuilt;
    *saved = std::move(old);
    return {};
  }

  // Sets a node's parameters in the template and, with `exec`, in the executable graph; the
  // template's call first. Returns the template's error; *exec_error gets the exec's.
  cudaError_t set_node(NodeRecord& rec, const KernelCall* k, const CopyCall* c, const FillCall* f,
                       cudaGraphExec_t exec, cudaError_t* exec_error) {
    cudaError_t e = cudaSuccess, x = cudaSuccess;
    if (k) {
      std::vector<void*> ptrs;
      KernelCall call = *k;
      cudaKernelNodeParams kp = call.params(ptrs);
      e = cudaGraphKernelNodeSetParams(rec.handle, &kp);
      if (e == cudaSuccess && exec) x = cudaGraphExecKernelNodeSetParams(exec, rec.handle, &kp);
    } else if (c) {
      e = cudaGraphMemcpyNodeSetParams1D(rec.handle, c->dst, c->src, c->bytes, cudaMemcpyDefault);
      if (e == cudaSuccess && exec)
        x = cudaGraphExecMemcpyNodeSetParams1D(exec, rec.handle, c->dst, c->src, c->bytes, cudaMemcpyDefault);
    } else if (f) {
      e = cudaGraphMemsetNodeSetParams(rec.handle, &f->p);
      if (e == cudaSuccess && exec) x = cudaGraphExecMemsetNodeSetParams(exec, rec.handle, &f->p);
    }
    *exec_error = x;
    return e;
  }

  // Re-evaluates every node of the tops selected by `which` and patches the ones whose values
  // changed: the template node, then the executable node in place; a refused in-place patch
  // marks the top for a whole-graph cudaGraphExecUpdate. A transaction: everything that can
  // fail without touching a graph (evaluation, shared memory limits) comes first, and a CUDA
  // failure after the first patch undoes every patch, rebuild and update done so far, so that
  // on error the graphs, the records and the stats are as they were. Where even the undo fails,
  // `broken` is set.
  template <class Which>
  Status refresh(Which which) {
    struct Change {
      cudaGraphNode_t node;
      int top;
      KernelCall kernel;
      CopyCall copy;
      FillCall fill;
    };
    std::vector<Change> changes;
    // Segments whose collectives changed: NCCL's captured work cannot be patched from outside,
    // so these are built, captured and instantiated again (their other changes included).
    std::vector<bool> rebuild(tops.size(), false);
    for (size_t r = 0; r < records.size(); ++r) {
      NodeRecord& rec = records[r];
      if (!which(rec.top)) continue;
      const Top& t = tops[rec.top];
      Change c;
      c.node = rec.handle;
      c.top = rec.top;
      switch (rec.node.op->kind()) {
        case fb::NodeKind::Kernel: {
          Status s = compute_kernel(rec.node, t, &c.kernel);
          if (!s.ok()) return s;
          if (!(c.kernel == rec.kernel)) changes.push_back(std::move(c));
          break;
        }
        case fb::NodeKind::Memcpy: {
          Status s = compute_copy(rec.node, t, &c.copy);
          if (!s.ok()) return s;
          if (!(c.copy == rec.copy)) changes.push_back(std::move(c));
          break;
        }
        case fb::NodeKind::Memset: {
          Status s = compute_fill(rec.node, t, &c.fill);
          if (!s.ok()) return s;
          if (!(c.fill == rec.fill)) changes.push_back(std::move(c));
          break;
        }
        case fb::NodeKind::Collective: {
          CollectiveCall call;
          Status s = compute_collective(rec.node, t, &call);
          if (!s.ok()) return s;
          if (!(call == rec.collective)) rebuild[rec.top] = true;
          break;
        }
        default: break;
      }
    }
    // Kernel attributes for more dynamic shared memory: may fail, and patch nothing.
    for (const Change& c : changes) {
      if (rebuild[c.top]) continue;
      const NodeRecord& rec = records[record_of().at(c.node)];
      if (rec.node.op->kind() != fb::NodeKind::Kernel) continue;
      Status s = pipeline->allow_shared_bytes(rec.node.op->kernel(), c.kernel.shared);
      if (!s.ok()) return s;
    }

    // What undo needs.
    const Executable::Stats stats_before = stats;
    std::vector<std::pair<bool, bool>> flags_before;  // per top: upload_needed, update_needed
    for (const Top& t : tops) flags_before.emplace_back(t.upload_needed, t.update_needed);
    struct Applied {
      cudaGraphNode_t node;
      KernelCall kernel;  // the old values
      CopyCall copy;
      FillCall fill;
      bool exec_patched = false;
    };
    std::vector<Applied> applied;
    std::vector<Rebuilt> rebuilt;
    std::vector<bool> updated(tops.size(), false);
    auto undo = [&](Status failure) -> Status {
      Status undo_error;
      auto note = [&](cudaError_t e, const std::string& what) {
        if (e == cudaSuccess) return;
        (void)cudaGetLastError();
        if (undo_error.ok()) undo_error = rt::cuda_error(e, what);
      };
      for (auto it = applied.rbegin(); it != applied.rend(); ++it) {
        NodeRecord& rec = records[record_of().at(it->node)];
        Top& t = tops[rec.top];
        const fb::NodeKind kind = rec.node.op->kind();
        cudaError_t x = cudaSuccess;
        cudaError_t e = set_node(rec, kind == fb::NodeKind::Kernel ? &it->kernel : nullptr,
                                 kind == fb::NodeKind::Memcpy ? &it->copy : nullptr,
                                 kind == fb::NodeKind::Memset ? &it->fill : nullptr,
                                 it->exec_patched ? t.exec.get() : nullptr, &x);
        note(e, "undoing a patch of " + node_name(rec.node, t));
        note(x, "undoing a patch of " + node_name(rec.node, t));
        rec.kernel = std::move(it->kernel);
        rec.copy = it->copy;
        rec.fill = it->fill;
      }
      for (size_t i = 0; i < tops.size(); ++i) {
        if (!updated[i]) continue;
        cudaGraphExecUpdateResultInfo info = {};
        note(cudaGraphExecUpdate(tops[i].exec.get(), tops[i].graph_template.get(), &info),
             "undoing the update of graph '" + str(p->graphs()->Get(tops[i].graph)->name()) + "'");
      }
      for (auto it = rebuilt.rbegin(); it != rebuilt.rend(); ++it) restore(*it);
      stats = stats_before;
      for (size_t i = 0; i < tops.size() && i < flags_before.size(); ++i) {
        tops[i].upload_needed = flags_before[i].first;
        tops[i].update_needed = flags_before[i].second;
      }
      if (undo_error.ok()) return failure;
      const Error& u = undo_error.error();
      broken = Error(u.code(),
                     "this Executable's graphs may hold a half-applied set_param or rebind, which could not be "
                     "undone (" + u.message() + "); instantiate the pipeline again",
                     {}, u.cuda_error());
      const Error& f = failure.error();
      if (f.code() == ErrorCode::ContextLost) return failure;
      return Error(f.code(), f.message() + "; undoing the patches failed too (" + u.message() +
                                 "), so this Executable refuses further use",
                   f.where(), f.cuda_error());
    };

    // Rebuilds first (they reorder the records), then patches, then whole-graph updates.
    for (size_t i = 0; i < tops.size(); ++i) {
      if (!rebuild[i]) continue;
      Rebuilt r;
      Status s = rebuild_top(static_cast<int>(i), &r);
      if (!s.ok()) return undo(s);
      rebuilt.push_back(std::move(r));
    }
    for (Change& c : changes) {
      if (rebuild[c.top]) continue;  // built again from the new plan: its old nodes are gone
      NodeRecord& rec = records[record_of().at(c.node)];
      Top& t = tops[rec.top];
      const NodeRef& at = rec.node;
      const fb::NodeKind kind = at.op->kind();
      cudaError_t x = cudaSuccess;
      cudaError_t e = set_node(rec, kind == fb::NodeKind::Kernel ? &c.kernel : nullptr,
                               kind == fb::NodeKind::Memcpy ? &c.copy : nullptr,
                               kind == fb::NodeKind::Memset ? &c.fill : nullptr, t.exec.get(), &x);
      if (e != cudaSuccess) return undo(node_cuda_error(e, at, t, "cannot set the node's parameters"));
      Applied a;
      a.node = c.node;
      a.kernel = std::move(rec.kernel);
      a.copy = rec.copy;
      a.fill = rec.fill;
      a.exec_patched = t.exec && x == cudaSuccess;
      switch (kind) {
        case fb::NodeKind::Kernel: rec.kernel = std::move(c.kernel); break;
        case fb::NodeKind::Memcpy: rec.copy = c.copy; break;
        case fb::NodeKind::Memset: rec.fill = c.fill; break;
        default: break;
      }
      applied.push_back(std::move(a));
      if (x != cudaSuccess) {
        (void)cudaGetLastError();
        // A sticky error is no refusal: the context is gone, and the update would fail too.
        if (rt::is_sticky(x)) return undo(node_cuda_error(x, at, t, "cannot patch the executable graph"));
        t.update_needed = true;  // refused in place: the whole graph is updated below
        ++stats.patches_refused;
      } else if (t.exec) {
        ++stats.nodes_patched_in_place;
      }
      if (t.device) t.upload_needed = true;
    }
    for (size_t i = 0; i < tops.size(); ++i) {
      Top& t = tops[i];
      if (!t.update_needed || !t.exec) continue;
      cudaGraphExecUpdateResultInfo info = {};
      cudaError_t e = cudaGraphExecUpdate(t.exec.get(), t.graph_template.get(), &info);
      if (e != cudaSuccess) {  // not performed: the exec is unchanged
        (void)cudaGetLastError();
        std::string w;
        std::string what = "cannot update graph '" + str(p->graphs()->Get(t.graph)->name()) + "' in place (result " +
                           std::to_string(static_cast<int>(info.result)) + ")";
        const auto& index = record_of();
        auto it = info.errorNode ? index.find(info.errorNode) : index.end();
        if (it != index.end()) {
          what += " at " + node_name(records[it->second].node, t);
          w = node_where(records[it->second].node);
        }
        return undo(rt::cuda_error(e, what, w));
      }
      updated[i] = true;
      t.update_needed = false;
      ++stats.graph_updates;
      if (t.device) t.upload_needed = true;
    }
    return {};
  }

  // ---- buffers --------------------------------------------------------------------------

  // Points buffer `i` at the application's memory, checked (binding_checks.cpp).
  Status bind_buffer(uint32_t i, void* ptr, size_t bytes, BufferState* out) const {
    rt::BoundMemory mem;
    Status s = rt::check_bound_memory(*p, i, ptr, bytes, &mem);
    if (!s.ok()) return s;
    out->ptr = mem.device;
    out->host = p->buffers()->Get(i)->host() ? mem.host : nullptr;
    out->capacity = bytes;
    out->owned = false;
    return {};
  }

  // No two buffers may share memory where the pipeline writes one of them, unless allowed.
  // `replaced` >= 0: buffer `replaced` at `ptr` instead (a rebind being checked).
  Status check_overlaps(const rt::Plan& with, const Bindings& b, int replaced = -1, void* ptr = nullptr) const {
    std::vector<rt::Span> spans(buffers.size());
    for (size_t i = 0; i < buffers.size() && i < with.buffers.size(); ++i) {
      void* at = static_cast<int>(i) == replaced ? ptr : buffers[i].ptr;
      // Buffers of the arena share bytes by the plan, which proved them never in use together.
      spans[i] = {reinterpret_cast<uint64_t>(at), at ? with.buffers[i].bytes : 0,
                  static_cast<int>(i) != replaced && buffers[i].in_arena};
    }
    return rt::check_overlaps(*p, spans, [this]() -> const std::vector<bool>& { return written_flags(); }, b);
  }

  // Refused before anything touches a stream the application is capturing: a graph launch
  // cannot be captured, and a failed capture call would invalidate the application's capture.
  static Status check_not_capturing(cudaStream_t stream, const char* call) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    cudaError_t e = cudaStreamIsCapturing(stream, &status);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return rt::cuda_error(e, std::string(call) + ": cannot ask whether the stream is being captured");
    }
    if (status == cudaStreamCaptureStatusNone) return {};
    return Error(ErrorCode::Unsupported,
                 std::string(call) + ": the stream is being captured (cudaStreamBeginCapture" +
                     (status == cudaStreamCaptureStatusInvalidated ? ", a capture already invalidated" : "") +
                     "); CUDA cannot capture the launch of a graph (cudaErrorStreamCaptureUnsupported), so orch "
                     "did nothing and left the capture as it was: call it on a stream outside the capture");
  }

  Status allocate_buffer(uint32_t i, BufferState* out, cudaStream_t stream) const {
    const fb::Buffer* b = p->buffers()->Get(i);
    const size_t bytes = plan.buffers[i].bytes;
    const size_t allocated = rt::allocation_bytes(bytes);
    const std::string w = rt::where(*p, b->loc());
    cudaError_t e;
    if (b->host()) {
      e = cudaHostAlloc(out->host_memory.out(), allocated, cudaHostAllocMapped);
      if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return rt::cuda_error(e, "buffer '" + str(b->name()) + "': cannot allocate " + std::to_string(bytes) +
                                     " bytes of pinned host memory", w);
      }
      std::memset(out->host_memory.get(), 0, allocated);
      e = cudaHostGetDevicePointer(&out->ptr, out->host_memory.get(), 0);
      if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return rt::cuda_error(e, "buffer '" + str(b->name()) + "': cannot map the host memory", w);
      }
      out->host = out->host_memory.get();
    } else {
      e = cudaMalloc(out->device_memory.out(), allocated);
      if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return rt::cuda_error(e, "buffer '" + str(b->name()) + "': cannot allocate " + std::to_string(bytes) +
                                     " bytes of device memory", w);
      }
      // On the instantiate stream, which instantiate() waits for before it returns.
      e = cudaMemsetAsync(out->device_memory.get(), 0, allocated, stream);
      if (e != cudaSuccess) return rt::cuda_error(e, "buffer '" + str(b->name()) + "': cannot zero it", w);
      out->ptr = out->device_memory.get();
    }
    out->capacity = bytes;
    out->owned = true;
    return {};
  }

  // The buffers of the memory plan that are not bound, in one arena (zero-filled, as every
  // buffer the runtime allocates is); the others are allocated one by one after this.
  Status allocate_arena(const std::vector<bool>& bound, cudaStream_t stream) {
    Result<rt::ArenaPlacement> place = rt::place_arena(*p, plan, bound);
    if (!place.ok()) return place.error();
    arena_place = std::move(place.value());
    if (arena_place.buffers == 0) return {};
    const uint64_t allocated = rt::allocation_bytes(arena_place.bytes);
    cudaError_t e = cudaMalloc(arena.out(), allocated);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return rt::cuda_error(e, "cannot allocate the memory plan's arena of " + std::to_string(arena_place.bytes) +
                                   " bytes (" + std::to_string(arena_place.buffers) + " buffers)");
    }
    e = cudaMemsetAsync(arena.get(), 0, allocated, stream);
    if (e != cudaSuccess) return rt::cuda_error(e, "cannot zero the memory plan's arena");
    for (size_t i = 0; i < buffers.size() && i < arena_place.offset.size(); ++i) {
      if (arena_place.offset[i] < 0) continue;
      BufferState& b = buffers[i];
      b.ptr = static_cast<char*>(arena.get()) + arena_place.offset[i];
      b.capacity = plan.buffers[i].bytes;
      b.owned = true;  // the runtime's memory: it cannot grow (replan)
      b.in_arena = true;
    }
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

namespace {
Status build_all(Executable::Impl& x, cudaStream_t stream);
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
  s = Executable::Impl::check_not_capturing(stream, "instantiate");
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
      if (bound_here[i] || x->buffers[i].in_arena) continue;
      st = x->allocate_buffer(i, &x->buffers[i], stream);
      if (!st.ok()) return st;
    }
    return {};
  };
  if (local.ok()) local = prepare();
  s = x->comms.agree(p, impl_->name, local, stream);
  if (!s.ok()) return s.error();
  s = x->comms.agree(p, impl_->name, build_all(*x, stream), stream);
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

namespace {

using Clock = std::chrono::steady_clock;

// Adds the time since `*since` to `*total` and restarts `*since`.
void lap(Clock::time_point* since, double* total) {
  const Clock::time_point now = Clock::now();
  *total += std::chrono::duration<double>(now - *since).count();
  *since = now;
}

// Everything after the buffers: exec tables, templates and handles, device graphs, segments.
Status build_all(Executable::Impl& xr, cudaStream_t stream) {
  Executable::Impl* x = &xr;
  const fb::Pipeline& p = *x->p;
  Status s;
  // Everything until the first cudaGraphInstantiate counts as building.
  Executable::InstantiateTimes& times = x->times;
  Clock::time_point clock = Clock::now();

  // The device status record, which generated kernels take as an argument; only pipelines
  // with such kernels have one (a launch then needs its end marked before the record is freed).
  bool needs_status = false;
  if (const auto* kernels = p.kernels())
    for (const fb::Kernel* k : *kernels)
      if (k->params())
        for (const fb::KernelParam* kp : *k->params()) needs_status |= kp->kind() == fb::KernelParamKind::Status;
  if (needs_status) {
    cudaError_t e = cudaMalloc(x->status.out(), Executable::Impl::kStatusBytes);
    if (e == cudaSuccess) e = cudaMemsetAsync(x->status.get(), 0, Executable::Impl::kStatusBytes, stream);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return rt::cuda_error(e, "cannot allocate the device status record");
    }
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
  for (size_t t = 0; t < x->tops.size(); ++t) {
    cudaError_t e = cudaGraphCreate(x->tops[t].graph_template.out(), 0);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return rt::cuda_error(e, "cudaGraphCreate");
    }
    if (x->tops[t].device) continue;
    s = x->create_handles(static_cast<int>(t));
    if (!s.ok()) return s;
  }

  // Device graphs: build, instantiate for device launch, then give kernels the execs they
  // launch (their own for a self tail launch) and fill the family tables, then upload.
  auto is_device = [&](int top) { return x->tops[top].device; };
  for (size_t t = 0; t < x->tops.size(); ++t) {
    if (!x->tops[t].device) continue;
    {
      ObservedPhase observed(Phase::Build, x->tops[t].graph, x->tops[t].member);
      s = x->build(x->tops[t].graph_template.get(), *p.graphs()->Get(x->tops[t].graph), static_cast<int>(t));
      observed.ok = s.ok();
    }
    if (!s.ok()) return s.error();
    lap(&clock, &times.build_s);
    s = x->instantiate_top(static_cast<int>(t), stream);
    if (!s.ok()) return s.error();
    lap(&clock, &times.instantiate_s);
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
  lap(&clock, &times.build_s);
  for (auto& t : x->tops) {
    if (!t.device) continue;
    ObservedPhase observed(Phase::Upload, t.graph, t.member);
    cudaError_t e = cudaGraphUpload(t.exec.get(), stream);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return rt::cuda_error(e, "cannot upload device graph '" + str(p.graphs()->Get(t.graph)->name()) + "'");
    }
    observed.ok = true;
    t.upload_needed = false;
  }
  lap(&clock, &times.upload_s);

  // The segments, which now see every device exec.
  for (int t : x->segments) {
    {
      ObservedPhase observed(Phase::Build, x->tops[t].graph, x->tops[t].member);
      s = x->build(x->tops[t].graph_template.get(), *p.graphs()->Get(x->tops[t].graph), t);
      observed.ok = s.ok();
    }
    if (!s.ok()) return s.error();
    lap(&clock, &times.build_s);
    s = x->instantiate_top(t, stream);
    if (!s.ok()) return s.error();
    lap(&clock, &times.instantiate_s);
    ObservedPhase observed(Phase::Upload, x->tops[t].graph, x->tops[t].member);
    cudaError_t e = cudaGraphUpload(x->tops[t].exec.get(), stream);
    observed.ok = e == cudaSuccess;
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return rt::cuda_error(e, "cannot upload graph '" + str(p.graphs()->Get(x->tops[t].graph)->name()) + "'");
    }
    lap(&clock, &times.upload_s);
  }
  cudaError_t e = cudaStreamSynchronize(stream);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return rt::cuda_error(e, "instantiate: waiting for the uploads");
  }
  lap(&clock, &times.upload_s);
  return {};
}

}  // namespace

// ---- Executable -------------------------------------------------------------------------

Executable::Executable(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Executable::~Executable() {
  // The memory freed below may still be in use by a launch: wait for the last one. (After a
  // fault this returns the sticky error at once; nothing is left running to wait for.)
  if (impl_ && impl_->launched && impl_->done) {
    (void)cudaEventSynchronize(impl_->done.get());
    (void)cudaGetLastError();
  }
}

Status Executable::launch(cudaStream_t stream) {
  return rt::guarded([&]() -> Status {
    Impl& x = *impl_;
    if (!x.broken.ok()) return x.broken;
    Status st = Impl::check_not_capturing(stream, "launch");
    if (!st.ok()) return st;
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
    auto launch_segments = [&]() -> Status {
      for (int s : x.segments) {
        ObservedPhase observed(Phase::Launch, x.tops[s].graph, x.tops[s].member);
        cudaError_t e = cudaGraphLaunch(x.tops[s].exec.get(), stream);
        observed.ok = e == cudaSuccess;
        if (e != cudaSuccess) {
          (void)cudaGetLastError();
          return rt::cuda_error(e, "cannot launch graph '" + str(x.p->graphs()->Get(x.tops[s].graph)->name()) + "'");
        }
      }
      return {};
    };
    st = x.has_loops ? rt::launch_after_other_loops(stream, launch_segments) : launch_segments();
    if (!st.ok()) return st;
    // Marks the end of this launch, for the destructor and for rebind's freeing.
    if (x.done) {
      cudaError_t e = cudaEventRecord(x.done.get(), stream);
      if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return rt::cuda_error(e, "launch: cannot record the event that marks the launch's end");
      }
      x.launched = true;
    }
    return {};
  });
}

Status Executable::set_param_value(std::string_view name, ScalarValue value) {
  return rt::guarded([&]() -> Status {
    Impl& x = *impl_;
    if (!x.broken.ok()) return x.broken;
    Bindings next = x.bindings;
    next.set_param(name, value);
    if (next.incomplete()) return rt::out_of_memory();
    Result<rt::Plan> plan = x.replan(next);
    if (!plan.ok()) return plan.error();
    Status s = x.check_overlaps(*plan, next);  // new sizes may make bound buffers overlap
    if (!s.ok()) return s;
    rt::Plan old = std::move(x.plan);
    x.plan = std::move(plan.value());
    s = x.refresh([](int) { return true; });
    if (!s.ok()) {
      x.plan = std::move(old);  // refresh undid its patches (or marked the Executable broken)
      return s;
    }
    x.bindings = std::move(next);
    return {};
  });
}

Status Executable::rebind(std::string_view name, void* device_ptr, size_t bytes) {
  return rt::guarded([&]() -> Status {
    Impl& x = *impl_;
    if (!x.broken.ok()) return x.broken;
    const int i = x.buffer_index(name);
    if (i < 0)
      return Error(ErrorCode::UnknownName,
                   "pipeline '" + x.pipeline->name + "' has no buffer '" + std::string(name) + "'");
    Bindings next = x.bindings;
    next.buffer(name, device_ptr, bytes);
    if (next.incomplete()) return rt::out_of_memory();
    Result<rt::Plan> plan = x.replan(next);
    if (!plan.ok()) return plan.error();
    Impl::BufferState fresh;
    Status s = x.bind_buffer(static_cast<uint32_t>(i), device_ptr, bytes, &fresh);
    if (!s.ok()) return s;
    s = x.check_overlaps(*plan, next, i, fresh.ptr);
    if (!s.ok()) return s;
    Impl::BufferState old = std::move(x.buffers[i]);
    rt::Plan old_plan = std::move(x.plan);
    x.buffers[i] = std::move(fresh);
    x.plan = std::move(plan.value());
    s = x.refresh([](int) { return true; });
    if (!s.ok()) {  // refresh undid its patches (or marked the Executable broken)
      x.buffers[i] = std::move(old);
      x.plan = std::move(old_plan);
      return s;
    }
    x.bindings = std::move(next);
    // Memory the runtime had allocated is freed once no launch uses it any more.
    if (old.owned && x.launched && x.done) {
      cudaError_t e = cudaEventSynchronize(x.done.get());
      if (e != cudaSuccess) {
        (void)cudaGetLastError();
        // Not freed: a launch may still use it (leaked rather than freed under the GPU).
        (void)old.device_memory.release();
        (void)old.host_memory.release();
      }
    }
    return {};  // `old` frees memory the runtime had allocated
  });
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

Executable::MemoryUse Executable::memory_use() const {
  const Impl& x = *impl_;
  MemoryUse m;
  for (size_t i = 0; i < x.buffers.size() && i < x.plan.buffers.size(); ++i) {
    const Impl::BufferState& b = x.buffers[i];
    if (b.in_arena) {
      ++m.arena_buffers;
      m.arena_buffer_bytes += x.plan.buffers[i].bytes;
    } else if (b.owned && !b.host) {
      m.device_bytes += b.capacity;
    }
  }
  if (x.arena) m.arena_bytes = x.arena_place.bytes;
  m.device_bytes += m.arena_bytes;
  return m;
}
Executable::InstantiateTimes Executable::instantiate_times() const { return impl_->times; }

Status Executable::device_status() const {
  const Impl& x = *impl_;
  uint32_t r[4] = {0, 0, 0, 0};
  // No kernel of this pipeline can report anything; a fault that lost the context still shows.
  if (!x.status) return rt::context_status();
  cudaError_t e = cudaMemcpy(r, x.status.get(), sizeof r, cudaMemcpyDeviceToHost);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return rt::cuda_error(e, "cannot read the device status record");
  }
  const uint32_t code = r[0], site = r[1], detail = r[2], count = r[3];
  if (code == 0) return {};
  std::string what = "a kernel orchc wrote", where;
  const auto* sites = x.p->status_sites();
  if (sites && site < sites->size()) {
    const fb::StatusSite* s = sites->Get(site);
    if (s->what() && s->what()->size() > 0) what = "`" + str(s->what()) + "`";
    where = rt::where(*x.p, s->loc());
  }
  std::string message;
  switch (static_cast<fb::DeviceError>(code)) {
    case fb::DeviceError::LaunchFailed: {
      const cudaError_t c = static_cast<cudaError_t>(detail);
      message = what + ": the device graph launch failed on the GPU: " + cudaGetErrorName(c) + " (" +
                cudaGetErrorString(c) + "); the graph did not run";
      break;
    }
    case fb::DeviceError::MemberOutOfRange:
      message = what + ": family index " + std::to_string(detail) + " is outside the family; nothing was launched";
      break;
    case fb::DeviceError::Expression: {
      // The device reports expr::ErrorKind (orch_error_code in expr/ops.h, asserted equal).
      const bool known = detail > 0 && detail <= static_cast<uint32_t>(expr::ErrorKind::Invalid);
      message = what + ": the expression could not be evaluated on the GPU: " +
                (known ? std::string(expr::to_string(static_cast<expr::ErrorKind>(detail)))
                       : "error " + std::to_string(detail)) +
                " (the loop, branch or update it decides did not run)";
      break;
    }
    default:
      message = what + ": device error " + std::to_string(code) + " (detail " + std::to_string(detail) + ")";
      break;
  }
  if (count > 1) message += "; " + std::to_string(count - 1) + " more device error(s) after it";
  return Error(ErrorCode::DeviceError, message, where);
}

Status Executable::clear_device_status() {
  if (!impl_->status) return {};
  cudaError_t e = cudaMemset(impl_->status.get(), 0, Impl::kStatusBytes);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return rt::cuda_error(e, "cannot clear the device status record");
  }
  return {};
}

void* Executable::comm(std::string_view name) const {
  const int i = rt::comm_index(*impl_->p, name);
  return i < 0 ? nullptr : impl_->comms.handle(static_cast<size_t>(i));
}

int Executable::rank() const { return static_cast<int>(impl_->plan.rank); }
int Executable::world_size() const { return static_cast<int>(impl_->plan.world_size); }

Result<double> Executable::param_as_double(std::string_view name) const {
  return rt::guarded([&]() -> Result<double> {
    const fb::Pipeline& p = *impl_->p;
    const uint32_t n = p.params() ? p.params()->size() : 0;
    for (uint32_t i = 0; i < n; ++i)
      if (p.params()->Get(i)->name()->string_view() == name) return impl_->plan.params[i].as_double();
    return Error(ErrorCode::UnknownName,
                 "pipeline '" + impl_->pipeline->name + "' has no param '" + std::string(name) + "'");
  });
}

}  // namespace orch
