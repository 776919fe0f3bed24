// The real GraphApi (graph_api.h): one CUDA call per method, return codes handed back as they
// are (the callers check each one, as they did when they called CUDA themselves).
#include "runtime/src/graph_api.h"

#include "runtime/src/driver.h"

namespace orch::rt {

namespace {

class CudaGraphApi final : public GraphApi {
 public:
  cudaError_t get_last_error() override { return cudaGetLastError(); }

  cudaError_t malloc(void** p, size_t bytes) override { return cudaMalloc(p, bytes); }
  cudaError_t free(void* p) override { return cudaFree(p); }
  cudaError_t memset_async(void* p, int value, size_t bytes, cudaStream_t s) override {
    return cudaMemsetAsync(p, value, bytes, s);
  }
  cudaError_t memcpy_async(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                           cudaStream_t s) override {
    return cudaMemcpyAsync(dst, src, bytes, kind, s);
  }
  cudaError_t stream_synchronize(cudaStream_t s) override { return cudaStreamSynchronize(s); }
  cudaError_t stream_create_non_blocking(cudaStream_t* s) override {
    return cudaStreamCreateWithFlags(s, cudaStreamNonBlocking);
  }
  cudaError_t stream_destroy(cudaStream_t s) override { return cudaStreamDestroy(s); }
  cudaError_t stream_is_capturing(cudaStream_t s, cudaStreamCaptureStatus* status) override {
    return cudaStreamIsCapturing(s, status);
  }

  cudaError_t device_attribute(int* value, cudaDeviceAttr attr, int device) override {
    return cudaDeviceGetAttribute(value, attr, device);
  }
  cudaError_t occupancy(int* blocks, const void* kernel, int threads, size_t shared) override {
    return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, kernel, threads, shared);
  }

  cudaError_t graph_create(cudaGraph_t* g) override { return cudaGraphCreate(g, 0); }
  cudaError_t graph_destroy(cudaGraph_t g) override { return cudaGraphDestroy(g); }
  cudaError_t conditional_handle_create(cudaGraphConditionalHandle* h, cudaGraph_t g,
                                        unsigned default_value, unsigned flags) override {
    return cudaGraphConditionalHandleCreate(h, g, default_value, flags);
  }
  bool has_kernel_nodes() override { return driver().graph_add_node != nullptr; }
  CUresult add_kernel_node(CUgraphNode* node, CUgraph g, const CUgraphNode* deps,
                           const CUgraphEdgeData* edges, size_t n,
                           CUgraphNodeParams* params) override {
    return driver().graph_add_node(node, g, deps, edges, n, params);
  }
  cudaError_t add_memcpy_node_1d(cudaGraphNode_t* node, cudaGraph_t g, const cudaGraphNode_t* deps,
                                 size_t n, void* dst, const void* src, size_t bytes) override {
    return cudaGraphAddMemcpyNode1D(node, g, deps, n, dst, src, bytes, cudaMemcpyDefault);
  }
  cudaError_t add_memset_node(cudaGraphNode_t* node, cudaGraph_t g, const cudaGraphNode_t* deps,
                              size_t n, const cudaMemsetParams* p) override {
    return cudaGraphAddMemsetNode(node, g, deps, n, p);
  }
  cudaError_t add_empty_node(cudaGraphNode_t* node, cudaGraph_t g, const cudaGraphNode_t* deps,
                             size_t n) override {
    return cudaGraphAddEmptyNode(node, g, deps, n);
  }
  cudaError_t add_node(cudaGraphNode_t* node, cudaGraph_t g, const cudaGraphNode_t* deps, size_t n,
                       cudaGraphNodeParams* params) override {
    return cudaGraphAddNode(node, g, deps, nullptr, n, params);
  }

  cudaError_t begin_capture_to_graph(cudaStream_t s, cudaGraph_t g) override {
    return cudaStreamBeginCaptureToGraph(s, g, nullptr, nullptr, 0, cudaStreamCaptureModeRelaxed);
  }
  cudaError_t set_capture_dependencies(cudaStream_t s, const cudaGraphNode_t* deps,
                                       size_t n) override {
    return cudaStreamUpdateCaptureDependencies(s, const_cast<cudaGraphNode_t*>(deps), nullptr, n,
                                               cudaStreamSetCaptureDependencies);
  }
  cudaError_t capture_info(cudaStream_t s, cudaStreamCaptureStatus* status,
                           const cudaGraphNode_t** last, size_t* n) override {
    return cudaStreamGetCaptureInfo(s, status, nullptr, nullptr, last, nullptr, n);
  }
  cudaError_t end_capture(cudaStream_t s, cudaGraph_t* g) override {
    return cudaStreamEndCapture(s, g);
  }
  cudaError_t graph_get_nodes(cudaGraph_t g, cudaGraphNode_t* nodes, size_t* n) override {
    return cudaGraphGetNodes(g, nodes, n);
  }
  cudaError_t node_get_type(cudaGraphNode_t node, cudaGraphNodeType* type) override {
    return cudaGraphNodeGetType(node, type);
  }
  cudaError_t stream_priority_range(int* least, int* greatest) override {
    return cudaDeviceGetStreamPriorityRange(least, greatest);
  }
  cudaError_t kernel_node_set_priority(cudaGraphNode_t node, int priority) override {
    cudaLaunchAttributeValue v = {};
    v.priority = priority;
    return cudaGraphKernelNodeSetAttribute(node, cudaLaunchAttributePriority, &v);
  }
  nccl::Result issue_collective(const Communicators& comms, const CollectiveCall& c,
                                cudaStream_t s) override {
    return comms.issue(c, s);
  }

  cudaError_t instantiate(cudaGraphExec_t* exec, cudaGraph_t g,
                          cudaGraphInstantiateParams* params) override {
    return cudaGraphInstantiateWithParams(exec, g, params);
  }
  cudaError_t exec_destroy(cudaGraphExec_t exec) override { return cudaGraphExecDestroy(exec); }
  cudaError_t upload(cudaGraphExec_t exec, cudaStream_t s) override {
    return cudaGraphUpload(exec, s);
  }
  cudaError_t launch(cudaGraphExec_t exec, cudaStream_t s) override {
    return cudaGraphLaunch(exec, s);
  }

  cudaError_t kernel_node_set_params(cudaGraphNode_t node, const cudaKernelNodeParams* p) override {
    return cudaGraphKernelNodeSetParams(node, p);
  }
  cudaError_t exec_kernel_node_set_params(cudaGraphExec_t exec, cudaGraphNode_t node,
                                          const cudaKernelNodeParams* p) override {
    return cudaGraphExecKernelNodeSetParams(exec, node, p);
  }
  cudaError_t memcpy_node_set_params_1d(cudaGraphNode_t node, void* dst, const void* src,
                                        size_t bytes) override {
    return cudaGraphMemcpyNodeSetParams1D(node, dst, src, bytes, cudaMemcpyDefault);
  }
  cudaError_t exec_memcpy_node_set_params_1d(cudaGraphExec_t exec, cudaGraphNode_t node, void* dst,
                                             const void* src, size_t bytes) override {
    return cudaGraphExecMemcpyNodeSetParams1D(exec, node, dst, src, bytes, cudaMemcpyDefault);
  }
  cudaError_t memset_node_set_params(cudaGraphNode_t node, const cudaMemsetParams* p) override {
    return cudaGraphMemsetNodeSetParams(node, p);
  }
  cudaError_t exec_memset_node_set_params(cudaGraphExec_t exec, cudaGraphNode_t node,
                                          const cudaMemsetParams* p) override {
    return cudaGraphExecMemsetNodeSetParams(exec, node, p);
  }
  cudaError_t exec_update(cudaGraphExec_t exec, cudaGraph_t g,
                          cudaGraphExecUpdateResultInfo* info) override {
    return cudaGraphExecUpdate(exec, g, info);
  }
};

}  // namespace

GraphApi& cuda_graph_api() {
  static CudaGraphApi api;
  return api;
}

}  // namespace orch::rt
