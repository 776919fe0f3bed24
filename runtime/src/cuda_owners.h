// Owners for every CUDA handle the runtime creates: each frees its handle once, in its
// destructor, and moves but never copies. A graph being built (Graph) and an executable graph
// (GraphExec) are different types, so one cannot be launched or destroyed as the other.
// Conditional handles have no destroy call: they live as long as the graph they were created
// on, so they are stored next to their Graph. Destructors cannot report errors; they ignore
// them (the handle is gone either way).
#pragma once

#include <cuda_runtime_api.h>

#include <utility>

namespace orch::rt {

template <class Handle, cudaError_t (*Destroy)(Handle)>
class Owner {
 public:
  Owner() = default;
  explicit Owner(Handle h) : h_(h) {}
  ~Owner() { reset(); }
  Owner(Owner&& o) noexcept : h_(std::exchange(o.h_, Handle{})) {}
  Owner& operator=(Owner&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, Handle{});
    }
    return *this;
  }
  Owner(const Owner&) = delete;
  Owner& operator=(const Owner&) = delete;

  Handle get() const { return h_; }
  explicit operator bool() const { return h_ != Handle{}; }
  // For the CUDA call that creates the handle: frees the old one first.
  Handle* out() {
    reset();
    return &h_;
  }
  // Gives the handle up without freeing it.
  Handle release() { return std::exchange(h_, Handle{}); }
  void reset() {
    if (h_ != Handle{}) (void)Destroy(h_);
    h_ = Handle{};
  }

 private:
  Handle h_{};
};

inline cudaError_t destroy_library(cudaLibrary_t h) { return cudaLibraryUnload(h); }
inline cudaError_t destroy_graph(cudaGraph_t h) { return cudaGraphDestroy(h); }
inline cudaError_t destroy_graph_exec(cudaGraphExec_t h) { return cudaGraphExecDestroy(h); }
inline cudaError_t free_device(void* p) { return cudaFree(p); }
inline cudaError_t free_host(void* p) { return cudaFreeHost(p); }
inline cudaError_t destroy_event(cudaEvent_t e) { return cudaEventDestroy(e); }

using Library = Owner<cudaLibrary_t, destroy_library>;
using Graph = Owner<cudaGraph_t, destroy_graph>;          // a graph being built (the template)
using GraphExec = Owner<cudaGraphExec_t, destroy_graph_exec>;  // an instantiated graph
using DeviceMemory = Owner<void*, free_device>;           // cudaMalloc
using HostMemory = Owner<void*, free_host>;               // cudaHostAlloc (pinned, mapped)
using Event = Owner<cudaEvent_t, destroy_event>;

}  // namespace orch::rt
