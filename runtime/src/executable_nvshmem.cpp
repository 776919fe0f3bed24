// NVSHMEM at instantiate (runtime/src/nvshmem.h), for a pipeline with symmetric buffers or
// kernels that call NVSHMEM: this process joins the process-wide Session (started over the
// pipeline's NCCL communicator, or the application's own NVSHMEM), the pipeline's modules get
// NVSHMEM's device state, and the symmetric buffers come from the symmetric heap, zeroed on every
// PE before any PE's kernel can write into a peer's copy. Every step is collective: every rank
// of the communicator instantiates the same pipeline at once, which the ranks checked before
// (Communicators::agree: the same pipeline, symmetric buffers of the same sizes). CUDA through
// the seam (graph_api.h), so that seam_nvshmem_test.cpp runs this against fakes of CUDA and
// NVSHMEM.
#include "runtime/src/executable_impl.h"

namespace orch {

Status Executable::Impl::join_nvshmem(cudaStream_t stream) {
  const rt::nvshmem::Api& api = *pipeline->nvshmem;
  const int comm = comms.first_open();
  const fb::Pipeline& pl = *p;
  auto share = [&](rt::nvshmem::UniqueId* id) -> Status {
    if (comm < 0)
      return Error(ErrorCode::Unbound,
                   "pipeline '" + pipeline->name +
                       "' uses NVSHMEM, which is not initialised in this process, and no comm is bound with an NCCL "
                       "communicator to start it over (Bindings::comm with an ncclComm_t, or comm_from_unique_id; or "
                       "initialise NVSHMEM in the application first, PE r as rank r)");
    return comms.broadcast(static_cast<size_t>(comm), id, sizeof *id, stream,
                           "NVSHMEM: sharing rank 0's unique id over comm '" + str(pl.comms()->Get(comm)->name()) + "'");
  };
  Result<std::shared_ptr<rt::nvshmem::Session>> joined =
      rt::nvshmem::Session::join(api, static_cast<int>(plan.rank), static_cast<int>(plan.world_size), share);
  if (!joined.ok()) return joined.error();
  nvshmem = std::move(joined.value());
  return pipeline->init_nvshmem_libraries(*nvshmem);
}

Status Executable::Impl::allocate_symmetric(cudaStream_t stream) {
  const rt::nvshmem::Api& api = nvshmem->api();
  const uint32_t n = p->buffers() ? p->buffers()->size() : 0;
  for (uint32_t i = 0; i < n; ++i) {
    const fb::Buffer* b = p->buffers()->Get(i);
    if (!b->symmetric()) continue;
    const size_t bytes = plan.buffers[i].bytes;
    // nvshmem_malloc(0) gives no pointer; the granule keeps NCCL's vector reads inside too.
    const size_t allocated = rt::allocation_bytes(bytes == 0 ? 1 : bytes);
    void* ptr = api.malloc(allocated);  // collective: every PE asks for the same size, in order
    if (!ptr)
      return Error(ErrorCode::Nvshmem,
                   "buffer '" + str(b->name()) + "': nvshmem_malloc(" + std::to_string(allocated) +
                       ") failed: NVSHMEM's symmetric heap has no room for it (NVSHMEM_SYMMETRIC_SIZE sets its size)",
                   rt::where(*p, b->loc()));
    BufferState& state = buffers[i];
    state.symmetric_memory = rt::nvshmem::SymmetricMemory(nvshmem, ptr);
    state.ptr = ptr;
    state.capacity = bytes;
    state.owned = true;  // the runtime's memory: it cannot grow (replan)
    cudaError_t e = cuda->memset_async(ptr, 0, allocated, stream);
    if (e != cudaSuccess) {
      (void)cuda->get_last_error();
      return rt::cuda_error(e, "buffer '" + str(b->name()) + "': cannot zero it", rt::where(*p, b->loc()));
    }
  }
  cudaError_t e = cuda->stream_synchronize(stream);
  if (e != cudaSuccess) {
    (void)cuda->get_last_error();
    return rt::cuda_error(e, "instantiate: waiting for the symmetric buffers to be zeroed");
  }
  // Every PE's buffers are zero before any PE goes on to launch a kernel that writes a peer's.
  api.barrier_all();
  return {};
}

}  // namespace orch
