// The CUDA seam of the runtime: every CUDA call the graph builder, the patcher, instantiation
// and launch make on graphs (and on the memory and streams that serve them) goes through
// GraphApi, so a test can put a recording fake in its place (runtime/tests/fake_graph_api.h)
// and check on the CPU what would be built and patched, as ninja's tests replace its
// DiskInterface. cuda_graph_api() is the one real implementation: each method is exactly one
// CUDA (or driver, or NCCL) call, so the calls, their order and their return codes are what the
// runtime made before the seam. Buffers, bindings checks, communicators and loading call CUDA
// directly: none of them holds a graph.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <utility>

#include "runtime/src/communicators.h"

namespace orch::rt {

class GraphApi {
 public:
  virtual ~GraphApi() = default;

  // cudaGetLastError: clears the thread's last error after a failed call.
  virtual cudaError_t get_last_error() = 0;

  // Memory and streams that serve the graphs (exec tables, the device status record, the
  // stream that captures collectives).
  virtual cudaError_t malloc(void** p, size_t bytes) = 0;
  virtual cudaError_t free(void* p) = 0;
  virtual cudaError_t memset_async(void* p, int value, size_t bytes, cudaStream_t s) = 0;
  virtual cudaError_t memcpy_async(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                                   cudaStream_t s) = 0;
  virtual cudaError_t stream_synchronize(cudaStream_t s) = 0;
  virtual cudaError_t stream_create_non_blocking(cudaStream_t* s) = 0;
  virtual cudaError_t stream_destroy(cudaStream_t s) = 0;
  virtual cudaError_t stream_is_capturing(cudaStream_t s, cudaStreamCaptureStatus* status) = 0;

  // Occupancy (whether a launch fits in one wave).
  virtual cudaError_t device_attribute(int* value, cudaDeviceAttr attr, int device) = 0;
  virtual cudaError_t occupancy(int* blocks, const void* kernel, int threads, size_t shared) = 0;

  // Building a template graph.
  virtual cudaError_t graph_create(cudaGraph_t* g) = 0;
  virtual cudaError_t graph_destroy(cudaGraph_t g) = 0;
  virtual cudaError_t conditional_handle_create(cudaGraphConditionalHandle* h, cudaGraph_t g,
                                                unsigned default_value, unsigned flags) = 0;
  // Whether add_kernel_node can be called: the driver's cuGraphAddNode (CUDA 12.3 or newer).
  virtual bool has_kernel_nodes() = 0;
  // The driver's cuGraphAddNode, for kernel nodes (executable_build.cpp says why the driver's).
  virtual CUresult add_kernel_node(CUgraphNode* node, CUgraph g, const CUgraphNode* deps,
                                   const CUgraphEdgeData* edges, size_t n,
                                   CUgraphNodeParams* params) = 0;
  virtual cudaError_t add_memcpy_node_1d(cudaGraphNode_t* node, cudaGraph_t g,
                                         const cudaGraphNode_t* deps, size_t n, void* dst,
                                         const void* src, size_t bytes) = 0;
  virtual cudaError_t add_memset_node(cudaGraphNode_t* node, cudaGraph_t g,
                                      const cudaGraphNode_t* deps, size_t n,
                                      const cudaMemsetParams* p) = 0;
  virtual cudaError_t add_empty_node(cudaGraphNode_t* node, cudaGraph_t g,
                                     const cudaGraphNode_t* deps, size_t n) = 0;
  // cudaGraphAddNode: the conditional nodes (params->conditional.phGraph_out gets the bodies).
  virtual cudaError_t add_node(cudaGraphNode_t* node, cudaGraph_t g, const cudaGraphNode_t* deps,
                               size_t n, cudaGraphNodeParams* params) = 0;

  // Collectives, captured into a graph on a stream (relaxed mode).
  virtual cudaError_t begin_capture_to_graph(cudaStream_t s, cudaGraph_t g) = 0;
  virtual cudaError_t set_capture_dependencies(cudaStream_t s, const cudaGraphNode_t* deps,
                                               size_t n) = 0;
  virtual cudaError_t capture_info(cudaStream_t s, cudaStreamCaptureStatus* status,
                                   const cudaGraphNode_t** last, size_t* n) = 0;
  virtual cudaError_t end_capture(cudaStream_t s, cudaGraph_t* g) = 0;
  // Priorities for NCCL's kernels (a high-priority collective): the nodes of `g` (`nodes` null:
  // the count alone), a node's type, the device's priority range, a kernel node's priority.
  virtual cudaError_t graph_get_nodes(cudaGraph_t g, cudaGraphNode_t* nodes, size_t* n) = 0;
  virtual cudaError_t node_get_type(cudaGraphNode_t node, cudaGraphNodeType* type) = 0;
  virtual cudaError_t stream_priority_range(int* least, int* greatest) = 0;
  virtual cudaError_t kernel_node_set_priority(cudaGraphNode_t node, int priority) = 0;
  // The NCCL call of `c` on `s` (Communicators::issue).
  virtual nccl::Result issue_collective(const Communicators& comms, const CollectiveCall& c,
                                        cudaStream_t s) = 0;

  // Instantiation and launch.
  virtual cudaError_t instantiate(cudaGraphExec_t* exec, cudaGraph_t g,
                                  cudaGraphInstantiateParams* params) = 0;
  virtual cudaError_t exec_destroy(cudaGraphExec_t exec) = 0;
  virtual cudaError_t upload(cudaGraphExec_t exec, cudaStream_t s) = 0;
  virtual cudaError_t launch(cudaGraphExec_t exec, cudaStream_t s) = 0;

  // Patching: a template node, then the same node of an executable graph; or a whole update.
  virtual cudaError_t kernel_node_set_params(cudaGraphNode_t node,
                                             const cudaKernelNodeParams* p) = 0;
  virtual cudaError_t exec_kernel_node_set_params(cudaGraphExec_t exec, cudaGraphNode_t node,
                                                  const cudaKernelNodeParams* p) = 0;
  virtual cudaError_t memcpy_node_set_params_1d(cudaGraphNode_t node, void* dst, const void* src,
                                                size_t bytes) = 0;
  virtual cudaError_t exec_memcpy_node_set_params_1d(cudaGraphExec_t exec, cudaGraphNode_t node,
                                                     void* dst, const void* src, size_t bytes) = 0;
  virtual cudaError_t memset_node_set_params(cudaGraphNode_t node, const cudaMemsetParams* p) = 0;
  virtual cudaError_t exec_memset_node_set_params(cudaGraphExec_t exec, cudaGraphNode_t node,
                                                  const cudaMemsetParams* p) = 0;
  virtual cudaError_t exec_update(cudaGraphExec_t exec, cudaGraph_t g,
                                  cudaGraphExecUpdateResultInfo* info) = 0;
};

// The real one: the CUDA runtime (and the driver's cuGraphAddNode, and NCCL through the
// communicators). Stateless; one for the process.
GraphApi& cuda_graph_api();

// An owner (cuda_owners.h) for a handle made through a GraphApi, freed through the same one: a
// fake's handles never reach CUDA.
template <class Handle, cudaError_t (GraphApi::*Destroy)(Handle)>
class ApiOwner {
 public:
  ApiOwner() = default;
  ~ApiOwner() { reset(); }
  ApiOwner(ApiOwner&& o) noexcept : api_(o.api_), h_(std::exchange(o.h_, Handle{})) {}
  ApiOwner& operator=(ApiOwner&& o) noexcept {
    if (this != &o) {
      reset();
      api_ = o.api_;
      h_ = std::exchange(o.h_, Handle{});
    }
    return *this;
  }
  ApiOwner(const ApiOwner&) = delete;
  ApiOwner& operator=(const ApiOwner&) = delete;

  Handle get() const { return h_; }
  explicit operator bool() const { return h_ != Handle{}; }
  // For the call (through `api`) that creates the handle: frees the old one first.
  Handle* out(GraphApi& api) {
    reset();
    api_ = &api;
    return &h_;
  }
  Handle release() { return std::exchange(h_, Handle{}); }
  void reset() {
    if (h_ != Handle{}) (void)(api_->*Destroy)(h_);
    h_ = Handle{};
  }

 private:
  GraphApi* api_ = nullptr;
  Handle h_{};
};

using ApiGraph = ApiOwner<cudaGraph_t, &GraphApi::graph_destroy>;         // a template graph
using ApiGraphExec = ApiOwner<cudaGraphExec_t, &GraphApi::exec_destroy>;  // an instantiated graph
using ApiDeviceMemory = ApiOwner<void*, &GraphApi::free>;                 // malloc
using ApiStream = ApiOwner<cudaStream_t, &GraphApi::stream_destroy>;

}  // namespace orch::rt
