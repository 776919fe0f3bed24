// Buffers: the application's bound memory, checked (binding_checks.cpp), and the memory the
// runtime allocates for the others, zero-filled (alone, or in the memory plan's arena). Also
// the plan for new bindings (a runtime-allocated buffer cannot grow) and what the buffers took.
// Apart from the graphs: allocation calls CUDA directly, and the builder sees only `ptr`.
#include <cstring>

#include "runtime/src/binding_checks.h"
#include "runtime/src/executable_impl.h"

namespace orch {

// Points buffer `i` at the application's memory, checked (binding_checks.cpp).
Status Executable::Impl::bind_buffer(uint32_t i, void* ptr, size_t bytes, BufferState* out) const {
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
Status Executable::Impl::check_overlaps(const rt::Plan& with, const Bindings& b, int replaced, void* ptr) const {
  std::vector<rt::Span> spans(buffers.size());
  for (size_t i = 0; i < buffers.size() && i < with.buffers.size(); ++i) {
    void* at = static_cast<int>(i) == replaced ? ptr : buffers[i].ptr;
    // Buffers of the arena share bytes by the plan, which proved them never in use together.
    spans[i] = {reinterpret_cast<uint64_t>(at), at ? with.buffers[i].bytes : 0,
                static_cast<int>(i) != replaced && buffers[i].in_arena};
  }
  return rt::check_overlaps(*p, spans, [this]() -> const std::vector<bool>& { return written_flags(); }, b);
}

Status Executable::Impl::allocate_buffer(uint32_t i, BufferState* out, cudaStream_t stream) const {
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
Status Executable::Impl::allocate_arena(const std::vector<bool>& bound, cudaStream_t stream) {
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

int Executable::Impl::buffer_index(std::string_view name) const {
  const uint32_t n = p->buffers() ? p->buffers()->size() : 0;
  for (uint32_t i = 0; i < n; ++i)
    if (p->buffers()->Get(i)->name()->string_view() == name) return static_cast<int>(i);
  return -1;
}

// A new plan from `next`, checked against the buffers this Executable already holds.
Result<rt::Plan> Executable::Impl::replan(const Bindings& next) const {
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

}  // namespace orch
