// The runtime's own CPU time in Pipeline::load + instantiate (and set_param), with CUDA
// replaced by stubs that return at once: what orch adds on the host to the CUDA calls a
// hand-built graph makes too. Runs anywhere (no GPU, no driver); profile it with
//   valgrind --tool=callgrind build/bench/runtime_cpu_bench pipeline.bin 3
// The stubs below define every CUDA runtime function orch_runtime calls, so the linker takes
// none from cudart_static. They hand out distinct fake handles and report success; nothing
// runs, and device memory is host memory.
//   runtime_cpu_bench PIPELINE.bin [REPEATS] [PARAM=VALUE ...]
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "orch/runtime.h"

namespace {

std::atomic<uintptr_t> next_handle{0x1000};
template <class T>
T fake() {
  return reinterpret_cast<T>(next_handle.fetch_add(16));
}

}  // namespace

extern "C" {
cudaError_t CUDARTAPI cudaDeviceGetAttribute(int* value, enum cudaDeviceAttr attr, int) {
  *value = attr == cudaDevAttrComputeCapabilityMajor ? 9 : attr == cudaDevAttrMultiProcessorCount ? 132 : 0;
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int) {
  *event = fake<cudaEvent_t>();
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaEventDestroy(cudaEvent_t) { return cudaSuccess; }
cudaError_t CUDARTAPI cudaEventRecord(cudaEvent_t, cudaStream_t) { return cudaSuccess; }
cudaError_t CUDARTAPI cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned int) { return cudaSuccess; }
cudaError_t CUDARTAPI cudaSetDevice(int) { return cudaSuccess; }
cudaError_t CUDARTAPI cudaStreamGetDevice(cudaStream_t, int* device) {
  *device = 0;
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
cudaError_t CUDARTAPI cudaMalloc(void** p, size_t size) {
  *p = std::calloc(1, size ? size : 1);
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t CUDARTAPI cudaFree(void* p) {
  std::free(p);
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaHostAlloc(void** p, size_t size, unsigned int) { return cudaMalloc(p, size); }
cudaError_t CUDARTAPI cudaFreeHost(void* p) { return cudaFree(p); }
cudaError_t CUDARTAPI cudaHostGetDevicePointer(void** device, void* host, unsigned int) {
  *device = host;
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
// The driver's cuGraphAddNode (the runtime adds kernel nodes with it); no other entry point.
CUresult CUDAAPI stub_graph_add_node(CUgraphNode* node, CUgraph, const CUgraphNode*, const CUgraphEdgeData*, size_t,
                                     CUgraphNodeParams*) {
  *node = fake<CUgraphNode>();
  return CUDA_SUCCESS;
}
cudaError_t CUDARTAPI cudaGetDriverEntryPointByVersion(const char* symbol, void** fn, unsigned int, unsigned long long,
                                                       enum cudaDriverEntryPointQueryResult* status) {
  const bool add_node = std::strcmp(symbol, "cuGraphAddNode") == 0;
  *fn = add_node ? reinterpret_cast<void*>(&stub_graph_add_node) : nullptr;
  if (status) *status = add_node ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
  return cudaSuccess;
}
const char* CUDARTAPI cudaGetErrorName(cudaError_t) { return "cudaErrorStub"; }
const char* CUDARTAPI cudaGetErrorString(cudaError_t) { return "stub"; }
cudaError_t CUDARTAPI cudaGetLastError(void) { return cudaSuccess; }
cudaError_t CUDARTAPI cudaGraphAddChildGraphNode(cudaGraphNode_t* node, cudaGraph_t, const cudaGraphNode_t*, size_t,
                                                 cudaGraph_t) {
  *node = fake<cudaGraphNode_t>();
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaGraphAddEmptyNode(cudaGraphNode_t* node, cudaGraph_t, const cudaGraphNode_t*, size_t) {
  *node = fake<cudaGraphNode_t>();
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaGraphAddMemcpyNode1D(cudaGraphNode_t* node, cudaGraph_t, const cudaGraphNode_t*, size_t,
                                               void*, const void*, size_t, enum cudaMemcpyKind) {
  *node = fake<cudaGraphNode_t>();
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaGraphAddMemsetNode(cudaGraphNode_t* node, cudaGraph_t, const cudaGraphNode_t*, size_t,
                                             const struct cudaMemsetParams*) {
  *node = fake<cudaGraphNode_t>();
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaGraphAddNode(cudaGraphNode_t* node, cudaGraph_t, const cudaGraphNode_t*,
                                       const cudaGraphEdgeData*, size_t, struct cudaGraphNodeParams* params) {
  *node = fake<cudaGraphNode_t>();
  if (params->type == cudaGraphNodeTypeConditional) {
    static cudaGraph_t bodies[64];
    for (unsigned i = 0; i < params->conditional.size && i < 64; ++i) bodies[i] = fake<cudaGraph_t>();
    params->conditional.phGraph_out = bodies;
  }
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaGraphConditionalHandleCreate(cudaGraphConditionalHandle* h, cudaGraph_t, unsigned int,
                                                       unsigned int) {
  *h = static_cast<cudaGraphConditionalHandle>(next_handle.fetch_add(16));
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaGraphCreate(cudaGraph_t* g, unsigned int) {
  *g = fake<cudaGraph_t>();
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaGraphDestroy(cudaGraph_t) { return cudaSuccess; }
cudaError_t CUDARTAPI cudaGraphExecDestroy(cudaGraphExec_t) { return cudaSuccess; }
cudaError_t CUDARTAPI cudaGraphExecKernelNodeSetParams(cudaGraphExec_t, cudaGraphNode_t,
                                                       const struct cudaKernelNodeParams*) {
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaGraphExecMemcpyNodeSetParams1D(cudaGraphExec_t, cudaGraphNode_t, void*, const void*, size_t,
                                                         enum cudaMemcpyKind) {
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaGraphExecMemsetNodeSetParams(cudaGraphExec_t, cudaGraphNode_t,
                                                       const struct cudaMemsetParams*) {
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaGraphExecUpdate(cudaGraphExec_t, cudaGraph_t, cudaGraphExecUpdateResultInfo*) {
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaGraphInstantiateWithParams(cudaGraphExec_t* exec, cudaGraph_t,
                                                     cudaGraphInstantiateParams* params) {
  *exec = fake<cudaGraphExec_t>();
  params->result_out = cudaGraphInstantiateSuccess;
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaGraphKernelNodeSetParams(cudaGraphNode_t, const struct cudaKernelNodeParams*) {
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaGraphLaunch(cudaGraphExec_t, cudaStream_t) { return cudaSuccess; }
cudaError_t CUDARTAPI cudaGraphMemcpyNodeSetParams1D(cudaGraphNode_t, void*, const void*, size_t,
                                                     enum cudaMemcpyKind) {
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaGraphMemsetNodeSetParams(cudaGraphNode_t, const struct cudaMemsetParams*) {
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaGraphUpload(cudaGraphExec_t, cudaStream_t) { return cudaSuccess; }
cudaError_t CUDARTAPI cudaKernelSetAttributeForDevice(cudaKernel_t, enum cudaFuncAttribute, int, int) {
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaLibraryGetKernel(cudaKernel_t* k, cudaLibrary_t, const char*) {
  *k = fake<cudaKernel_t>();
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaLibraryGetGlobal(void**, size_t*, cudaLibrary_t, const char*) {
  return cudaErrorSymbolNotFound;  // no NVSHMEM state: the bench's pipelines do not use it
}
cudaError_t CUDARTAPI cudaLibraryLoadData(cudaLibrary_t* lib, const void*, enum cudaJitOption*, void**, unsigned int,
                                          enum cudaLibraryOption*, void**, unsigned int) {
  *lib = fake<cudaLibrary_t>();
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaLibraryUnload(cudaLibrary_t) { return cudaSuccess; }
// One wave for every launch of the benchmark's chain (the runtime asks before keeping a
// programmatic edge).
cudaError_t CUDARTAPI cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* n, const void*, int, size_t) {
  *n = 8;
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaMemcpy(void* dst, const void* src, size_t n, enum cudaMemcpyKind) {
  std::memcpy(dst, src, n);
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaMemcpyAsync(void* dst, const void* src, size_t n, enum cudaMemcpyKind, cudaStream_t) {
  std::memcpy(dst, src, n);
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaMemset(void* p, int v, size_t n) {
  std::memset(p, v, n);
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaMemsetAsync(void* p, int v, size_t n, cudaStream_t) { return cudaMemset(p, v, n); }
cudaError_t CUDARTAPI cudaPointerGetAttributes(struct cudaPointerAttributes* a, const void* p) {
  *a = {};
  a->type = cudaMemoryTypeDevice;
  a->devicePointer = const_cast<void*>(p);
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaStreamBeginCaptureToGraph(cudaStream_t, cudaGraph_t, const cudaGraphNode_t*,
                                                    const cudaGraphEdgeData*, size_t, enum cudaStreamCaptureMode) {
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaStreamUpdateCaptureDependencies(cudaStream_t, cudaGraphNode_t*, const cudaGraphEdgeData*,
                                                          size_t, unsigned int) {
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaGraphGetNodes(cudaGraph_t, cudaGraphNode_t*, size_t* count) {
  if (count) *count = 0;
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaGraphNodeGetType(cudaGraphNode_t, enum cudaGraphNodeType* type) {
  *type = cudaGraphNodeTypeKernel;
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaGraphKernelNodeSetAttribute(cudaGraphNode_t, cudaLaunchAttributeID,
                                                      const cudaLaunchAttributeValue*) {
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaDeviceGetStreamPriorityRange(int* least, int* greatest) {
  if (least) *least = 0;
  if (greatest) *greatest = -5;
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaStreamGetCaptureInfo(cudaStream_t, enum cudaStreamCaptureStatus* status,
                                               unsigned long long* id, cudaGraph_t* graph,
                                               const cudaGraphNode_t** deps, const cudaGraphEdgeData** edges,
                                               size_t* count) {
  static cudaGraphNode_t last = fake<cudaGraphNode_t>();  // what an NCCL call would have captured
  if (status) *status = cudaStreamCaptureStatusActive;
  if (id) *id = 1;
  if (graph) *graph = nullptr;
  if (deps) *deps = &last;
  if (edges) *edges = nullptr;
  if (count) *count = 1;
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int) {
  *s = fake<cudaStream_t>();
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
cudaError_t CUDARTAPI cudaStreamEndCapture(cudaStream_t, cudaGraph_t* g) {
  *g = fake<cudaGraph_t>();
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaStreamIsCapturing(cudaStream_t, enum cudaStreamCaptureStatus* status) {
  *status = cudaStreamCaptureStatusNone;
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaStreamQuery(cudaStream_t) { return cudaSuccess; }
cudaError_t CUDARTAPI cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
}  // extern "C"

namespace {

using Clock = std::chrono::steady_clock;
double us_since(Clock::time_point t) { return std::chrono::duration<double, std::micro>(Clock::now() - t).count(); }
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: runtime_cpu_bench PIPELINE.bin [REPEATS] [PARAM=VALUE ...]\n");
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (file.empty()) {
    std::fprintf(stderr, "runtime_cpu_bench: cannot read %s\n", argv[1]);
    return 1;
  }
  const int reps = argc > 2 ? std::max(1, std::atoi(argv[2])) : 20;
  orch::Bindings bindings;
  // PARAM=VALUE: set_param after each instantiate (an integer, or a float with a '.').
  std::vector<std::pair<std::string, orch::ScalarValue>> updates;
  for (int a = 3; a < argc; ++a) {
    const std::string s = argv[a];
    const size_t eq = s.find('=');
    if (eq == std::string::npos) continue;
    const std::string v = s.substr(eq + 1);
    updates.emplace_back(s.substr(0, eq), v.find('.') != std::string::npos
                                              ? orch::ScalarValue::of(std::atof(v.c_str()))
                                              : orch::ScalarValue::of(static_cast<int64_t>(std::atoll(v.c_str()))));
  }
  std::vector<double> load, inst, build, instantiate, upload, set_param;
  size_t nodes = 0;
  for (int r = 0; r < reps; ++r) {
    Clock::time_point t = Clock::now();
    auto p = orch::Pipeline::load_from_memory(file.data(), file.size());
    load.push_back(us_since(t));
    if (!p) {
      std::fprintf(stderr, "runtime_cpu_bench: %s\n", p.error().to_string().c_str());
      return 1;
    }
    t = Clock::now();
    auto x = (*p)->instantiate(bindings, nullptr);
    inst.push_back(us_since(t));
    if (!x) {
      std::fprintf(stderr, "runtime_cpu_bench: %s\n", x.error().to_string().c_str());
      return 1;
    }
    const auto times = (*x)->instantiate_times();
    build.push_back(times.build_s * 1e6);
    instantiate.push_back(times.instantiate_s * 1e6);
    upload.push_back(times.upload_s * 1e6);
    for (const auto& u : updates) {
      t = Clock::now();
      orch::Status s = (*x)->set_param_value(u.first, u.second);
      set_param.push_back(us_since(t));
      if (!s) {
        std::fprintf(stderr, "runtime_cpu_bench: set_param: %s\n", s.error().to_string().c_str());
        return 1;
      }
    }
    nodes = next_handle.load();  // only to keep the loop honest
  }
  (void)nodes;
  std::printf("runtime_cpu_bench %s (CUDA stubbed out), median of %d\n", argv[1], reps);
  std::printf("  Pipeline::load          %10.1f us\n", median(load));
  std::printf("  instantiate             %10.1f us  (building %.1f, instantiate %.1f, upload %.1f)\n", median(inst),
              median(build), median(instantiate), median(upload));
  if (!set_param.empty()) std::printf("  set_param               %10.1f us\n", median(set_param));
  return 0;
}
