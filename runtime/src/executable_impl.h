// An Executable's state (Executable::Impl) and the calls its parts make on each other. The
// runtime's Executable is split by concept, one file each:
//   executable_build.cpp        the graph builder: evaluates each node and adds it (and
//                               conditional handles, bodies, captured collectives)
//   executable_patch.cpp        the patcher: set_param and rebind re-evaluate, patch what
//                               changed, and undo everything on failure
//   executable_instantiate.cpp  Pipeline::instantiate: bindings, buffers, communicators, then
//                               building, instantiating and uploading every top-level graph
//   executable_buffers.cpp      buffers: bound (checked), allocated, the memory plan's arena
//   executable_launch.cpp       launch, the device status record, accessors
// Every CUDA call on graphs goes through `cuda` (graph_api.h), so the builder and the patcher
// run on the CPU against a fake in the tests (runtime/tests/fake_graph_api.h).
#pragma once

#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>

#include "orch/observe.h"
#include "runtime/src/arena.h"
#include "runtime/src/binding_checks.h"
#include "runtime/src/communicators.h"
#include "runtime/src/graph_api.h"
#include "runtime/src/internal.h"

namespace orch {

namespace rt {

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

// Whether `op` is a kernel with a graph argument set after instantiation (KernelArg.late).
inline bool has_late_argument(const fb::Op& op) {
  const fb::KernelOp* k = op.body_as_KernelOp();
  if (!k || !k->args()) return false;
  for (const fb::KernelArg* a : *k->args())
    if (a->late()) return true;
  return false;
}

}  // namespace rt

struct Executable::Impl {
  using NodeRef = artifact::NodeRef;
  using KernelCall = rt::KernelCall;
  using CopyCall = rt::CopyCall;
  using FillCall = rt::FillCall;
  using CollectiveCall = rt::CollectiveCall;
  using ObservedPhase = rt::ObservedPhase;

  static std::string str(const flatbuffers::String* s) {
    return s ? std::string(s->c_str(), s->size()) : std::string();
  }

  // Every CUDA call on graphs (graph_api.h); a test puts a fake here before building.
  rt::GraphApi* cuda = &rt::cuda_graph_api();

  // Keeps the kernels loaded; destroyed last.
  std::shared_ptr<const Pipeline::Impl> pipeline;
  const fb::Pipeline* p = nullptr;

  // The communicators (NCCL, when the pipeline uses it), destroyed after every graph that
  // holds their captured work (members are destroyed in reverse order).
  rt::Communicators comms;
  rt::ApiStream side_stream;  // captures collectives; uploads rebuilt segments

  Bindings bindings;  // what instantiate got, updated by set_param and rebind
  rt::Plan plan;

  // NVSHMEM, where the pipeline uses it: outlives the symmetric buffers below (members are
  // destroyed in reverse order), which it freed before it can finalise.
  std::shared_ptr<rt::nvshmem::Session> nvshmem;

  struct BufferState {
    rt::DeviceMemory device_memory;  // runtime-allocated device buffer
    rt::HostMemory host_memory;      // runtime-allocated host buffer
    rt::nvshmem::SymmetricMemory symmetric_memory;  // runtime-allocated on NVSHMEM's symmetric heap
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
  std::vector<rt::ApiDeviceMemory> tables;

  // The device status record (fb::DeviceError): four u32, code, site, detail, count, where
  // generated kernels report errors they meet on the GPU; zeroed at instantiate.
  rt::ApiDeviceMemory status;
  static constexpr size_t kStatusBytes = 4 * sizeof(uint32_t);

  struct Top {
    int graph = -1;   // Pipeline.graphs index
    int member = -1;  // family member, -1 otherwise
    bool device = false;
    rt::ApiGraph graph_template;  // destroyed after the exec (declared first)
    rt::ApiGraphExec exec;
    bool upload_needed = false;  // a device graph patched since its last upload
    bool update_needed = false;  // a patch was refused: cudaGraphExecUpdate from the template
    bool node_priority = false;  // instantiated with node priorities (a high-priority collective)
  };
  std::vector<Top> tops;                  // device graphs (and family members) first, in device_order, then segments
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
  void index_records();

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

  // ---- errors naming a node -------------------------------------------------------------

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
    (void)cuda->get_last_error();
    return rt::cuda_error(e, node_name(n, t) + ": " + what, node_where(n));
  }

  // ---- the builder (executable_build.cpp) -----------------------------------------------

  // What one node does with the current plan, buffers and handles; errors name the node.
  Status compute_kernel(const NodeRef& at, const Top& t, KernelCall* out) const;
  Status kernel_args(const NodeRef& at, const Top& t, KernelCall* out) const;
  Status compute_copy(const NodeRef& at, const Top& t, CopyCall* out) const;
  Status compute_fill(const NodeRef& at, const Top& t, FillCall* out) const;
  Status compute_collective(const NodeRef& at, const Top& t, CollectiveCall* out) const;
  std::string eval_uint(const fb::Expr* e, const Top& t, uint64_t lo, uint64_t hi, uint64_t* out) const;
  cudaGraphExec_t exec_of(int graph_index, const Top& t) const;
  bool one_wave(const KernelCall& k);
  Error kernel_node_error(CUresult r, const NodeRef& at, const Top& t) const;
  // Builds `graph` into `g` for tops[top] (kernel_of_op: see the definition).
  Status build(cudaGraph_t g, const fb::Graph& graph, int top, std::vector<int32_t>* kernel_of_op = nullptr);
  // Conditional handles of host graph `top`, created on its (new) template.
  Status create_handles(int top);
  // Collectives: one capture session per graph build.
  Status begin_capture(const NodeRef& at, const Top& t, cudaGraph_t g);
  cudaError_t end_capture();
  Status capture(const NodeRef& at, Top& t, cudaGraph_t g, const CollectiveCall& c,
                 std::vector<cudaGraphNode_t>& deps, std::vector<cudaGraphNode_t>* ends);
  // The greatest priority on the kernel nodes of `g` not in `before` (NCCL's, for `at`).
  Status prioritize_new_kernels(const NodeRef& at, Top& t, cudaGraph_t g, std::vector<cudaGraphNode_t> before);
  Status graph_nodes(const NodeRef& at, const Top& t, cudaGraph_t g, std::vector<cudaGraphNode_t>* out);
  int greatest_priority = 1;  // the device's greatest stream priority; 1: not asked yet

  // ---- instantiation (executable_instantiate.cpp) ---------------------------------------

  // Everything after the buffers: exec tables, templates and handles, device graphs, segments.
  Status build_all(cudaStream_t stream);
  Status instantiate_top(int top, cudaStream_t stream);
  Status check_device() const;
  // Refused before anything touches a stream the application is capturing.
  Status check_not_capturing(cudaStream_t stream, const char* call) const;

  // ---- the patcher (executable_patch.cpp) -----------------------------------------------

  // What rebuild_top replaced, kept until the refresh it belongs to has succeeded.
  struct Rebuilt {
    int top = -1;
    rt::ApiGraph graph_template;  // destroyed after the exec (declared first)
    rt::ApiGraphExec exec;
    std::vector<NodeRecord> records;
    std::vector<cudaGraphConditionalHandle> handles;
    bool update_needed = false;
  };
  void restore(Rebuilt& old);
  Status rebuild_top(int top, Rebuilt* saved);
  cudaError_t set_node(NodeRecord& rec, const KernelCall* k, const CopyCall* c, const FillCall* f,
                       cudaGraphExec_t exec, cudaError_t* exec_error);
  // What refresh() re-evaluates: every node, or (at instantiate, once every device graph is
  // instantiated) only the kernel nodes of device graphs with a late graph argument
  // (KernelArg.late), built with a null exec there.
  enum class Scope { Everything, LateArguments };
  Status refresh(Scope scope);

  // ---- buffers (executable_buffers.cpp) -------------------------------------------------

  Status bind_buffer(uint32_t i, void* ptr, size_t bytes, BufferState* out) const;
  Status check_overlaps(const rt::Plan& with, const Bindings& b, int replaced = -1, void* ptr = nullptr) const;
  Status allocate_buffer(uint32_t i, BufferState* out, cudaStream_t stream) const;
  Status allocate_arena(const std::vector<bool>& bound, cudaStream_t stream);
  // executable_nvshmem.cpp: join NVSHMEM and initialise the pipeline's modules; then allocate
  // the symmetric buffers (collective calls: the ranks agree between the two).
  Status join_nvshmem(cudaStream_t stream);
  Status allocate_symmetric(cudaStream_t stream);
  int buffer_index(std::string_view name) const;
  Result<rt::Plan> replan(const Bindings& next) const;
};

}  // namespace orch
