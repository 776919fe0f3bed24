// A recording fake of the runtime's CUDA seam (runtime/src/graph_api.h), as ninja's tests
// replace its DiskInterface: every call is recorded (its name, the graph or exec it acts on,
// the node it makes or sets, the dependencies and the node's parameters), any call can be told
// to fail, and the fake keeps the state CUDA would hold (each template node's parameters, each
// executable graph's copy of them, which nodes each graph holds), so a test can check what was
// built and patched, and that a failed set_param left everything as it was. Handles are made-up
// numbers that never reach CUDA; nothing here needs a GPU.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "runtime/src/graph_api.h"

namespace orch::test {

// What a node does, as last added or set: comparable, so states can be compared.
struct FakeParams {
  std::string kind;  // "kernel", "memcpy", "memset", "empty", "conditional", "collective"
  // kernel
  uintptr_t kernel = 0;
  unsigned grid[3] = {0, 0, 0};
  unsigned block[3] = {0, 0, 0};
  unsigned shared = 0;
  std::vector<uint64_t> args;  // each argument's 8-byte slot
  // memcpy (dst, src, bytes), memset (dst, value, element_size, width), collective (dst: recv,
  // src: send, bytes: count, value: data type, element_size: reduce op, root, comm)
  uintptr_t dst = 0, src = 0;
  size_t bytes = 0;
  unsigned value = 0, element_size = 0;
  size_t width = 0, height = 0;
  int collective = -1, root = 0;
  uintptr_t comm = 0;
  // conditional
  int cond_type = -1;
  unsigned cond_size = 0;
  uint64_t cond_handle = 0;
  int priority = 0;  // kernel_node_set_priority

  bool operator==(const FakeParams& o) const {
    return kind == o.kind && kernel == o.kernel && std::equal(grid, grid + 3, o.grid) &&
           std::equal(block, block + 3, o.block) && shared == o.shared && args == o.args &&
           dst == o.dst && src == o.src && bytes == o.bytes && value == o.value &&
           element_size == o.element_size && width == o.width && height == o.height &&
           collective == o.collective && root == o.root && comm == o.comm &&
           cond_type == o.cond_type && cond_size == o.cond_size && cond_handle == o.cond_handle &&
           priority == o.priority;
  }
  bool operator!=(const FakeParams& o) const { return !(*this == o); }
};

struct FakeCall {
  std::string name;    // the GraphApi method
  uintptr_t on = 0;    // the graph, exec, stream or pointer it acts on
  uintptr_t node = 0;  // the node (or handle, exec, graph, pointer) it made or set
  std::vector<uintptr_t> deps;
  std::vector<int>
      edge_types;  // add_kernel_node with edge data: CUgraphDependencyType per dependency
  FakeParams params;
  std::vector<uint64_t> data;  // memcpy_async: the bytes copied, as 8-byte words
  unsigned flags = 0;          // instantiate: cudaGraphInstantiateFlags; handle create: flags
  unsigned default_value = 0;  // conditional_handle_create
  int result = 0;              // what it returned (cudaError_t, CUresult or the NCCL result)
};

// The state the fake holds for a comparison before and after a failed patch.
struct FakeState {
  std::map<uintptr_t, FakeParams> nodes;                        // template node -> params
  std::map<std::pair<uintptr_t, uintptr_t>, FakeParams> execs;  // (exec, node) -> params
  bool operator==(const FakeState& o) const { return nodes == o.nodes && execs == o.execs; }
};

class FakeGraphApi final : public rt::GraphApi {
 public:
  std::vector<FakeCall> calls;
  std::map<uintptr_t, std::vector<uintptr_t>> graph_nodes;  // graph -> its nodes, in order
  std::map<uintptr_t, std::vector<uintptr_t>> bodies;       // conditional node -> its body graphs
  std::map<uintptr_t, uintptr_t> graph_of_node;             // node -> the graph it is in
  std::map<uintptr_t, uintptr_t> graph_of_exec;             // exec -> the graph instantiated
  std::map<uintptr_t, unsigned> exec_flags;                 // exec -> instantiate flags
  FakeState state;
  std::map<uintptr_t, uint32_t> kernel_arg_count;  // how many argument slots each kernel takes
  int sm_count = 132;
  int blocks_per_sm = 8;
  bool kernel_nodes = true;  // has_kernel_nodes()

  // Call number `index` (counting from the first call the fake got, 0 first) returns `e` and
  // does nothing else.
  void fail_call(size_t index, int e = cudaErrorInvalidValue) { fail_at_[index] = e; }
  // The next call named `name` (after `skip` more of them) fails the same way.
  void fail_next(const std::string& name, int e = cudaErrorInvalidValue, int skip = 0) {
    fail_named_.push_back({name, skip, e});
  }
  void clear_failures() {
    fail_at_.clear();
    fail_named_.clear();
  }

  // The calls named `name`, in order.
  std::vector<const FakeCall*> named(const std::string& name) const {
    std::vector<const FakeCall*> out;
    for (const FakeCall& c : calls)
      if (c.name == name) out.push_back(&c);
    return out;
  }
  // The calls since `from`, but get_last_error (which every failure makes).
  std::vector<std::string> names_since(size_t from) const {
    std::vector<std::string> out;
    for (size_t i = from; i < calls.size(); ++i)
      if (calls[i].name != "get_last_error") out.push_back(calls[i].name);
    return out;
  }
  // The executable graph's view of `node` (an empty FakeParams when it has none).
  FakeParams exec_node(uintptr_t exec, uintptr_t node) const {
    auto it = state.execs.find({exec, node});
    return it == state.execs.end() ? FakeParams{} : it->second;
  }
  const FakeParams& node(uintptr_t n) const { return state.nodes.at(n); }

  // ---- GraphApi ----------------------------------------------------------------------------

  cudaError_t get_last_error() override {
    record("get_last_error");
    return cudaSuccess;
  }
  cudaError_t malloc(void** p, size_t bytes) override {
    FakeCall& c = record("malloc");
    c.params.bytes = bytes;
    if (failing(c)) return fail(c);
    *p = reinterpret_cast<void*>(c.node = make(bytes));
    return cudaSuccess;
  }
  cudaError_t free(void* p) override { return simple("free", p); }
  cudaError_t memset_async(void* p, int value, size_t bytes, cudaStream_t) override {
    FakeCall& c = record("memset_async", p);
    c.params.value = static_cast<unsigned>(value);
    c.params.bytes = bytes;
    return failing(c) ? fail(c) : cudaSuccess;
  }
  cudaError_t memcpy_async(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                           cudaStream_t) override {
    FakeCall& c = record("memcpy_async", dst);
    c.params.bytes = bytes;
    if (failing(c)) return fail(c);
    if (kind == cudaMemcpyHostToDevice) {  // the source is host memory: keep what was copied
      c.data.resize((bytes + 7) / 8);
      std::memcpy(c.data.data(), src, bytes);
    }
    return cudaSuccess;
  }
  cudaError_t stream_synchronize(cudaStream_t s) override {
    return simple("stream_synchronize", s);
  }
  cudaError_t stream_create_non_blocking(cudaStream_t* s) override {
    FakeCall& c = record("stream_create_non_blocking");
    if (failing(c)) return fail(c);
    *s = reinterpret_cast<cudaStream_t>(c.node = make());
    return cudaSuccess;
  }
  cudaError_t stream_destroy(cudaStream_t s) override { return simple("stream_destroy", s); }
  cudaError_t stream_is_capturing(cudaStream_t s, cudaStreamCaptureStatus* status) override {
    FakeCall& c = record("stream_is_capturing", s);
    if (failing(c)) return fail(c);
    *status = cudaStreamCaptureStatusNone;
    return cudaSuccess;
  }
  cudaError_t device_attribute(int* value, cudaDeviceAttr attr, int) override {
    FakeCall& c = record("device_attribute");
    if (failing(c)) return fail(c);
    *value = attr == cudaDevAttrMultiProcessorCount ? sm_count : 0;
    return cudaSuccess;
  }
  cudaError_t occupancy(int* blocks, const void* kernel, int, size_t) override {
    FakeCall& c = record("occupancy", kernel);
    if (failing(c)) return fail(c);
    *blocks = blocks_per_sm;
    return cudaSuccess;
  }

  cudaError_t graph_create(cudaGraph_t* g) override {
    FakeCall& c = record("graph_create");
    if (failing(c)) return fail(c);
    c.node = make();
    graph_nodes[c.node];
    *g = reinterpret_cast<cudaGraph_t>(c.node);
    return cudaSuccess;
  }
  cudaError_t graph_destroy(cudaGraph_t g) override {
    record("graph_destroy", g);
    forget_graph(reinterpret_cast<uintptr_t>(g));
    return cudaSuccess;
  }
  cudaError_t conditional_handle_create(cudaGraphConditionalHandle* h, cudaGraph_t g,
                                        unsigned default_value, unsigned flags) override {
    FakeCall& c = record("conditional_handle_create", g);
    c.default_value = default_value;
    c.flags = flags;
    if (failing(c)) return fail(c);
    *h = static_cast<cudaGraphConditionalHandle>(c.node = make());
    return cudaSuccess;
  }
  bool has_kernel_nodes() override { return kernel_nodes; }
  CUresult add_kernel_node(CUgraphNode* node, CUgraph g, const CUgraphNode* deps,
                           const CUgraphEdgeData* edges, size_t n, CUgraphNodeParams* p) override {
    FakeCall& c = record("add_kernel_node", g);
    for (size_t i = 0; i < n; ++i) {
      c.deps.push_back(reinterpret_cast<uintptr_t>(deps[i]));
      if (edges) c.edge_types.push_back(edges[i].type);
    }
    c.params = kernel_params(reinterpret_cast<uintptr_t>(p->kernel.kern),
                             {p->kernel.gridDimX, p->kernel.gridDimY, p->kernel.gridDimZ},
                             {p->kernel.blockDimX, p->kernel.blockDimY, p->kernel.blockDimZ},
                             p->kernel.sharedMemBytes, p->kernel.kernelParams);
    if (failing(c)) return static_cast<CUresult>(fail(c));
    *node = reinterpret_cast<CUgraphNode>(add(c, reinterpret_cast<uintptr_t>(g)));
    return CUDA_SUCCESS;
  }
  cudaError_t add_memcpy_node_1d(cudaGraphNode_t* node, cudaGraph_t g, const cudaGraphNode_t* deps,
                                 size_t n, void* dst, const void* src, size_t bytes) override {
    FakeCall& c = record("add_memcpy_node_1d", g);
    take_deps(c, deps, n);
    c.params = copy_params(dst, src, bytes);
    if (failing(c)) return fail(c);
    *node = reinterpret_cast<cudaGraphNode_t>(add(c, reinterpret_cast<uintptr_t>(g)));
    return cudaSuccess;
  }
  cudaError_t add_memset_node(cudaGraphNode_t* node, cudaGraph_t g, const cudaGraphNode_t* deps,
                              size_t n, const cudaMemsetParams* p) override {
    FakeCall& c = record("add_memset_node", g);
    take_deps(c, deps, n);
    c.params = fill_params(p);
    if (failing(c)) return fail(c);
    *node = reinterpret_cast<cudaGraphNode_t>(add(c, reinterpret_cast<uintptr_t>(g)));
    return cudaSuccess;
  }
  cudaError_t add_empty_node(cudaGraphNode_t* node, cudaGraph_t g, const cudaGraphNode_t* deps,
                             size_t n) override {
    FakeCall& c = record("add_empty_node", g);
    take_deps(c, deps, n);
    c.params.kind = "empty";
    if (failing(c)) return fail(c);
    *node = reinterpret_cast<cudaGraphNode_t>(add(c, reinterpret_cast<uintptr_t>(g)));
    return cudaSuccess;
  }
  cudaError_t add_node(cudaGraphNode_t* node, cudaGraph_t g, const cudaGraphNode_t* deps, size_t n,
                       cudaGraphNodeParams* p) override {
    FakeCall& c = record("add_node", g);
    take_deps(c, deps, n);
    if (p->type == cudaGraphNodeTypeConditional) {
      c.params.kind = "conditional";
      c.params.cond_type = static_cast<int>(p->conditional.type);
      c.params.cond_size = p->conditional.size;
      c.params.cond_handle = static_cast<uint64_t>(p->conditional.handle);
    } else {
      c.params.kind = "other";
    }
    if (failing(c)) return fail(c);
    const uintptr_t made = add(c, reinterpret_cast<uintptr_t>(g));
    if (p->type == cudaGraphNodeTypeConditional) {
      std::vector<cudaGraph_t>& out = body_arrays_.emplace_back();
      for (unsigned i = 0; i < p->conditional.size; ++i) {
        const uintptr_t body = make();
        graph_nodes[body];
        bodies[made].push_back(body);
        out.push_back(reinterpret_cast<cudaGraph_t>(body));
      }
      p->conditional.phGraph_out = out.data();  // CUDA's array, owned by the node
    }
    *node = reinterpret_cast<cudaGraphNode_t>(made);
    return cudaSuccess;
  }

  cudaError_t begin_capture_to_graph(cudaStream_t s, cudaGraph_t g) override {
    FakeCall& c = record("begin_capture_to_graph", s);
    c.node = reinterpret_cast<uintptr_t>(g);
    if (failing(c)) return fail(c);
    capture_graph_ = c.node;
    return cudaSuccess;
  }
  cudaError_t set_capture_dependencies(cudaStream_t s, const cudaGraphNode_t* deps,
                                       size_t n) override {
    FakeCall& c = record("set_capture_dependencies", s);
    take_deps(c, deps, n);
    if (failing(c)) return fail(c);
    capture_deps_ = c.deps;
    return cudaSuccess;
  }
  cudaError_t capture_info(cudaStream_t s, cudaStreamCaptureStatus* status,
                           const cudaGraphNode_t** last, size_t* n) override {
    FakeCall& c = record("capture_info", s);
    if (failing(c)) return fail(c);
    *status = capture_graph_ ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
    *last = capture_last_.data();
    *n = capture_last_.size();
    return cudaSuccess;
  }
  cudaError_t end_capture(cudaStream_t s, cudaGraph_t* g) override {
    FakeCall& c = record("end_capture", s);
    capture_graph_ = 0;
    if (failing(c)) return fail(c);
    *g = nullptr;
    return cudaSuccess;
  }
  // A captured collective's node stands for NCCL's kernels: its type is kernel.
  cudaError_t graph_get_nodes(cudaGraph_t g, cudaGraphNode_t* nodes, size_t* n) override {
    FakeCall& c = record("graph_get_nodes", g);
    if (failing(c)) return fail(c);
    const std::vector<uintptr_t>& all = graph_nodes[reinterpret_cast<uintptr_t>(g)];
    if (nodes)
      for (size_t i = 0; i < all.size() && i < *n; ++i) nodes[i] = reinterpret_cast<cudaGraphNode_t>(all[i]);
    *n = nodes ? std::min(*n, all.size()) : all.size();
    return cudaSuccess;
  }
  cudaError_t node_get_type(cudaGraphNode_t node, cudaGraphNodeType* type) override {
    FakeCall& c = record("node_get_type", static_cast<void*>(nullptr), node);
    if (failing(c)) return fail(c);
    const std::string& kind = state.nodes[c.node].kind;
    *type = kind == "kernel" || kind == "collective" ? cudaGraphNodeTypeKernel
            : kind == "memcpy"                       ? cudaGraphNodeTypeMemcpy
            : kind == "memset"                       ? cudaGraphNodeTypeMemset
            : kind == "conditional"                  ? cudaGraphNodeTypeConditional
                                                     : cudaGraphNodeTypeEmpty;
    return cudaSuccess;
  }
  cudaError_t stream_priority_range(int* least, int* greatest) override {
    FakeCall& c = record("stream_priority_range");
    if (failing(c)) return fail(c);
    *least = 0;
    *greatest = greatest_priority;
    return cudaSuccess;
  }
  cudaError_t kernel_node_set_priority(cudaGraphNode_t node, int priority) override {
    FakeCall& c = record("kernel_node_set_priority", static_cast<void*>(nullptr), node);
    c.params = state.nodes[c.node];
    c.params.priority = priority;
    return set(c, 0);
  }
  int greatest_priority = -5;  // stream_priority_range() (an H200's)

  // The collective becomes one node of the graph being captured, after the capture's
  // dependencies (NCCL would put its kernels there).
  rt::nccl::Result issue_collective(const rt::Communicators&, const rt::CollectiveCall& k,
                                    cudaStream_t s) override {
    FakeCall& c = record("issue_collective", s);
    c.deps = capture_deps_;
    c.params.kind = "collective";
    c.params.collective = static_cast<int>(k.kind);
    c.params.src = reinterpret_cast<uintptr_t>(k.send);
    c.params.dst = reinterpret_cast<uintptr_t>(k.recv);
    c.params.bytes = k.count;
    c.params.value = static_cast<unsigned>(k.type);
    c.params.element_size = static_cast<unsigned>(k.op);
    c.params.root = k.root;
    c.params.comm = reinterpret_cast<uintptr_t>(k.comm);
    if (failing(c)) return static_cast<rt::nccl::Result>(fail(c));
    const uintptr_t made = add(c, capture_graph_);
    capture_last_.assign(1, reinterpret_cast<cudaGraphNode_t>(made));
    return rt::nccl::kSuccess;
  }

  cudaError_t instantiate(cudaGraphExec_t* exec, cudaGraph_t g,
                          cudaGraphInstantiateParams* p) override {
    FakeCall& c = record("instantiate", g);
    c.flags = static_cast<unsigned>(p->flags);
    if (failing(c)) {
      p->result_out = cudaGraphInstantiateError;
      return fail(c);
    }
    c.node = make();
    graph_of_exec[c.node] = reinterpret_cast<uintptr_t>(g);
    exec_flags[c.node] = c.flags;
    copy_into_exec(c.node, reinterpret_cast<uintptr_t>(g));
    p->result_out = cudaGraphInstantiateSuccess;
    *exec = reinterpret_cast<cudaGraphExec_t>(c.node);
    return cudaSuccess;
  }
  cudaError_t exec_destroy(cudaGraphExec_t exec) override {
    record("exec_destroy", exec);
    const uintptr_t e = reinterpret_cast<uintptr_t>(exec);
    for (auto it = state.execs.begin(); it != state.execs.end();)
      it = it->first.first == e ? state.execs.erase(it) : std::next(it);
    return cudaSuccess;
  }
  cudaError_t upload(cudaGraphExec_t exec, cudaStream_t) override { return simple("upload", exec); }
  cudaError_t launch(cudaGraphExec_t exec, cudaStream_t) override { return simple("launch", exec); }

  cudaError_t kernel_node_set_params(cudaGraphNode_t node, const cudaKernelNodeParams* p) override {
    FakeCall& c = record("kernel_node_set_params", static_cast<void*>(nullptr), node);
    c.params = kernel_params(p);
    return set(c, 0);
  }
  cudaError_t exec_kernel_node_set_params(cudaGraphExec_t exec, cudaGraphNode_t node,
                                          const cudaKernelNodeParams* p) override {
    FakeCall& c = record("exec_kernel_node_set_params", exec, node);
    c.params = kernel_params(p);
    return set(c, c.on);
  }
  cudaError_t memcpy_node_set_params_1d(cudaGraphNode_t node, void* dst, const void* src,
                                        size_t bytes) override {
    FakeCall& c = record("memcpy_node_set_params_1d", static_cast<void*>(nullptr), node);
    c.params = copy_params(dst, src, bytes);
    return set(c, 0);
  }
  cudaError_t exec_memcpy_node_set_params_1d(cudaGraphExec_t exec, cudaGraphNode_t node, void* dst,
                                             const void* src, size_t bytes) override {
    FakeCall& c = record("exec_memcpy_node_set_params_1d", exec, node);
    c.params = copy_params(dst, src, bytes);
    return set(c, c.on);
  }
  cudaError_t memset_node_set_params(cudaGraphNode_t node, const cudaMemsetParams* p) override {
    FakeCall& c = record("memset_node_set_params", static_cast<void*>(nullptr), node);
    c.params = fill_params(p);
    return set(c, 0);
  }
  cudaError_t exec_memset_node_set_params(cudaGraphExec_t exec, cudaGraphNode_t node,
                                          const cudaMemsetParams* p) override {
    FakeCall& c = record("exec_memset_node_set_params", exec, node);
    c.params = fill_params(p);
    return set(c, c.on);
  }
  cudaError_t exec_update(cudaGraphExec_t exec, cudaGraph_t g,
                          cudaGraphExecUpdateResultInfo* info) override {
    FakeCall& c = record("exec_update", exec);
    c.node = reinterpret_cast<uintptr_t>(g);
    if (failing(c)) {
      info->result = cudaGraphExecUpdateError;
      return fail(c);
    }
    copy_into_exec(c.on, c.node);
    info->result = cudaGraphExecUpdateSuccess;
    return cudaSuccess;
  }

  // Every node of graph `g` and of its conditional bodies, depth first.
  void nodes_of(uintptr_t g, std::vector<uintptr_t>* out) const {
    auto it = graph_nodes.find(g);
    if (it == graph_nodes.end()) return;
    for (uintptr_t n : it->second) {
      out->push_back(n);
      auto b = bodies.find(n);
      if (b != bodies.end())
        for (uintptr_t body : b->second) nodes_of(body, out);
    }
  }

 private:
  template <class P = void*>
  FakeCall& record(const char* name, P on = nullptr, cudaGraphNode_t node = nullptr) {
    FakeCall& c = calls.emplace_back();
    c.name = name;
    c.on = reinterpret_cast<uintptr_t>(on);
    c.node = reinterpret_cast<uintptr_t>(node);
    return c;
  }
  bool failing(FakeCall& c) {
    const size_t index = calls.size() - 1;
    if (auto it = fail_at_.find(index); it != fail_at_.end()) {
      c.result = it->second;
      return true;
    }
    for (auto it = fail_named_.begin(); it != fail_named_.end(); ++it) {
      if (it->name != c.name) continue;
      if (it->skip-- > 0) continue;
      c.result = it->error;
      fail_named_.erase(it);
      return true;
    }
    return false;
  }
  cudaError_t fail(const FakeCall& c) { return static_cast<cudaError_t>(c.result); }
  template <class P>
  cudaError_t simple(const char* name, P on) {
    FakeCall& c = record(name, on);
    return failing(c) ? fail(c) : cudaSuccess;
  }
  uintptr_t make(size_t bytes = 16) {
    const uintptr_t h = next_;
    next_ += ((bytes + 0xfff) & ~uintptr_t{0xfff}) + 0x1000;
    return h;
  }
  template <class N>
  void take_deps(FakeCall& c, const N* deps, size_t n) {
    for (size_t i = 0; i < n; ++i) c.deps.push_back(reinterpret_cast<uintptr_t>(deps[i]));
  }
  uintptr_t add(FakeCall& c, uintptr_t g) {
    c.node = make();
    graph_nodes[g].push_back(c.node);
    graph_of_node[c.node] = g;
    state.nodes[c.node] = c.params;
    return c.node;
  }
  cudaError_t set(FakeCall& c, uintptr_t exec) {
    if (failing(c)) return fail(c);
    if (exec)
      state.execs[{exec, c.node}] = c.params;
    else
      state.nodes[c.node] = c.params;
    return cudaSuccess;
  }
  void copy_into_exec(uintptr_t exec, uintptr_t g) {
    std::vector<uintptr_t> all;
    nodes_of(g, &all);
    for (uintptr_t n : all) state.execs[{exec, n}] = state.nodes[n];
  }
  void forget_graph(uintptr_t g) {
    std::vector<uintptr_t> all;
    nodes_of(g, &all);
    for (uintptr_t n : all) {
      state.nodes.erase(n);
      graph_of_node.erase(n);
    }
    graph_nodes.erase(g);
  }
  FakeParams kernel_params(uintptr_t kernel, std::vector<unsigned> grid,
                           std::vector<unsigned> block, unsigned shared, void** args) const {
    FakeParams p;
    p.kind = "kernel";
    p.kernel = kernel;
    for (int d = 0; d < 3; ++d) {
      p.grid[d] = grid[d];
      p.block[d] = block[d];
    }
    p.shared = shared;
    auto n = kernel_arg_count.find(kernel);
    for (uint32_t i = 0; args && n != kernel_arg_count.end() && i < n->second; ++i) {
      uint64_t slot;
      std::memcpy(&slot, args[i], sizeof slot);
      p.args.push_back(slot);
    }
    return p;
  }
  FakeParams kernel_params(const cudaKernelNodeParams* k) const {
    return kernel_params(
        reinterpret_cast<uintptr_t>(k->func), {k->gridDim.x, k->gridDim.y, k->gridDim.z},
        {k->blockDim.x, k->blockDim.y, k->blockDim.z}, k->sharedMemBytes, k->kernelParams);
  }
  static FakeParams copy_params(void* dst, const void* src, size_t bytes) {
    FakeParams p;
    p.kind = "memcpy";
    p.dst = reinterpret_cast<uintptr_t>(dst);
    p.src = reinterpret_cast<uintptr_t>(src);
    p.bytes = bytes;
    return p;
  }
  static FakeParams fill_params(const cudaMemsetParams* m) {
    FakeParams p;
    p.kind = "memset";
    p.dst = reinterpret_cast<uintptr_t>(m->dst);
    p.value = m->value;
    p.element_size = m->elementSize;
    p.width = m->width;
    p.height = m->height;
    return p;
  }

  struct NamedFailure {
    std::string name;
    int skip;
    int error;
  };
  std::map<size_t, int> fail_at_;
  std::vector<NamedFailure> fail_named_;
  uintptr_t next_ = 0x100000;
  std::deque<std::vector<cudaGraph_t>> body_arrays_;
  uintptr_t capture_graph_ = 0;
  std::vector<uintptr_t> capture_deps_;
  std::vector<cudaGraphNode_t> capture_last_;
};

}  // namespace orch::test
