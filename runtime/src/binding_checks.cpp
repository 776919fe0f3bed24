#include "runtime/src/binding_checks.h"

#include <algorithm>
#include <cstdio>

#include "artifact/expr_code.h"
#include "runtime/src/driver.h"
#include "runtime/src/internal.h"

namespace orch::rt {

namespace {

std::string hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string name_of(const fb::Buffer& b) { return b.name() ? b.name()->str() : std::string(); }

// A driver error while asking about memory: sticky ones mean the context is gone.
bool sticky(CUresult r) { return is_sticky(static_cast<cudaError_t>(r)); }

// How the bound range was found to lie inside memory CUDA knows, or why not.
struct RangeCheck {
  bool inside = false;
  bool known = false;   // base and size below were read from the driver
  uint64_t base = 0, size = 0;
  CUresult sticky_error = CUDA_SUCCESS;
};

// Host memory (pinned, registered): the CPU's last byte must be host memory CUDA knows, at the
// matching device address (a runtime query, which succeeds for any pointer), then the driver's
// range of the allocation or registration, where it gives one, must hold all of it.
RangeCheck check_host_range(uint64_t dev, uint64_t bytes, void* host_ptr) {
  RangeCheck out;
  const uint64_t last = dev + bytes - 1;
  cudaPointerAttributes end_attr = {};
  char* host_last = static_cast<char*>(host_ptr) + (bytes - 1);
  cudaError_t e = cudaPointerGetAttributes(&end_attr, host_last);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    if (is_sticky(e)) out.sticky_error = static_cast<CUresult>(e);
    return out;
  }
  if (end_attr.type != cudaMemoryTypeHost || reinterpret_cast<uint64_t>(end_attr.devicePointer) != last) return out;
  const Driver& d = driver();
  CUdeviceptr start = 0;
  size_t size = 0;
  if (d.pointer_get_attribute && d.pointer_get_attribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, dev) == CUDA_SUCCESS &&
      d.pointer_get_attribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, dev) == CUDA_SUCCESS && size > 0) {
    out.known = true;
    out.base = start;
    out.size = size;
    out.inside = range_inside(dev, bytes, start, size);
    return out;
  }
  // Both ends are host memory CUDA maps at consecutive device addresses; the driver says no more.
  out.inside = true;
  return out;
}

// Device and managed memory: the allocation that holds the first byte; else the first and the
// last byte in one allocation; else the pieces of a virtual-memory mapping, one after another.
RangeCheck check_device_range(uint64_t dev, uint64_t bytes) {
  RangeCheck out;
  const Driver& d = driver();
  const uint64_t last = dev + bytes - 1;  // bytes > 0, no overflow (checked by the caller)
  auto note = [&](CUresult r) {
    if (sticky(r) && out.sticky_error == CUDA_SUCCESS) out.sticky_error = r;
    return r == CUDA_SUCCESS;
  };
  if (d.mem_get_address_range) {
    CUdeviceptr base = 0;
    size_t size = 0;
    if (note(d.mem_get_address_range(&base, &size, dev))) {
      out.known = true;
      out.base = base;
      out.size = size;
      if (range_inside(dev, bytes, base, size)) {
        out.inside = true;
        return out;
      }
    }
  }
  if (!d.pointer_get_attribute) return out;
  {
    unsigned long long first_id = 0, last_id = 0;
    if (note(d.pointer_get_attribute(&first_id, CU_POINTER_ATTRIBUTE_BUFFER_ID, dev)) &&
        note(d.pointer_get_attribute(&last_id, CU_POINTER_ATTRIBUTE_BUFFER_ID, last)) && first_id == last_id &&
        first_id != 0) {
      out.inside = true;
      return out;
    }
  }
  // A reservation (cuMemAddressReserve) mapped by several pieces (cuMemMap): each piece must
  // start where the last ended, all inside the reservation. Only for such mappings: memory from
  // cudaMalloc (which legacy IPC can share) or from a pool is one allocation, and the one after
  // it is another's.
  // (8 zeroed bytes for each answer, whatever width the driver writes: a boolean, a handle.)
  uint64_t ipc = 0, pool = 0;
  if (note(d.pointer_get_attribute(&ipc, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, dev)) && ipc) return out;
  if (note(d.pointer_get_attribute(&pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, dev)) && pool) return out;
  CUdeviceptr start = 0;
  size_t size = 0;
  if (d.mem_get_address_range && note(d.pointer_get_attribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, dev)) &&
      note(d.pointer_get_attribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, dev)) && range_inside(dev, bytes, start, size)) {
    uint64_t at = dev;
    for (int piece = 0; piece < 65536; ++piece) {
      CUdeviceptr base = 0;
      size_t psize = 0;
      if (!note(d.mem_get_address_range(&base, &psize, at)) || psize == 0 || base > at || at - base >= psize) break;
      const uint64_t end = base + psize;  // the byte after this piece
      if (end > last) {
        out.inside = true;
        return out;
      }
      at = end;
    }
  }
  return out;
}

}  // namespace

bool range_inside(uint64_t ptr, uint64_t bytes, uint64_t base, uint64_t size) {
  if (ptr < base) return false;
  const uint64_t offset = ptr - base;
  return offset <= size && bytes <= size - offset;
}

Status check_bound_memory(const fb::Pipeline& p, uint32_t index, void* ptr, size_t bytes, BoundMemory* out) {
  const fb::Buffer& b = *p.buffers()->Get(index);
  const std::string name = "buffer '" + name_of(b) + "'";
  const std::string w = where(p, b.loc());
  // CUDA requires every access aligned to its size: memory off by a few bytes faults in the
  // first kernel that touches it (and loses the context), so it is refused here.
  const uint64_t align = expr::valid(artifact::to_expr(b.type())) ? expr::size_of(artifact::to_expr(b.type())) : 1;
  if (align > 1 && reinterpret_cast<uintptr_t>(ptr) % align != 0)
    return Error(ErrorCode::InvalidArgument,
                 name + " is bound at " + hex(reinterpret_cast<uint64_t>(ptr)) + ", which is not a multiple of " +
                     std::to_string(align) + " bytes, its element size: the kernels' accesses would be misaligned; "
                     "bind memory aligned to at least " + std::to_string(align) + " bytes",
                 w);
  cudaPointerAttributes attr = {};
  cudaError_t e = cudaPointerGetAttributes(&attr, ptr);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return cuda_error(e, name + ": cannot query the bound pointer", w);
  }
  if (attr.type == cudaMemoryTypeUnregistered) {
    // After a kernel fault CUDA knows no memory at all: say that, not that the memory is wrong.
    if (Status lost = context_status(); !lost.ok()) return lost.error();
    return Error(ErrorCode::InvalidArgument,
                 name + " is bound to memory CUDA does not know (pageable host memory?); "
                        "bind device memory, or pinned memory from cudaHostAlloc(cudaHostAllocMapped)",
                 w);
  }
  if (!attr.devicePointer)
    return Error(ErrorCode::InvalidArgument,
                 name + " is bound to host memory the device cannot address; map it "
                        "(cudaHostAllocMapped, cudaHostRegisterMapped)",
                 w);
  const bool cpu_addressable =
      (attr.type == cudaMemoryTypeHost || attr.type == cudaMemoryTypeManaged) && attr.hostPointer != nullptr;
  if (b.host() && !cpu_addressable)
    return Error(ErrorCode::InvalidArgument,
                 name + " is declared `host` (the CPU reads and writes it through Executable::buffer), but it is "
                        "bound to device memory at " + hex(reinterpret_cast<uint64_t>(ptr)) +
                        "; bind pinned (cudaHostAlloc), registered (cudaHostRegister) or managed "
                        "(cudaMallocManaged) memory",
                 w);

  const uint64_t dev = reinterpret_cast<uint64_t>(attr.devicePointer);
  if (bytes > 0) {
    if (dev + bytes < dev)
      return Error(ErrorCode::InvalidArgument,
                   name + " is bound to " + std::to_string(bytes) + " bytes at " + hex(dev) +
                       ", past the end of the address space",
                   w);
    RangeCheck r = attr.type == cudaMemoryTypeHost && attr.hostPointer ? check_host_range(dev, bytes, attr.hostPointer)
                                                                      : check_device_range(dev, bytes);
    if (r.sticky_error != CUDA_SUCCESS)
      return cuda_error(static_cast<cudaError_t>(r.sticky_error), name + ": asking the driver about the bound memory");
    if (!r.inside) {
      std::string where_it_ends;
      if (r.known && range_inside(dev, 1, r.base, r.size))
        where_it_ends = "; the allocation there is " + std::to_string(r.size) + " bytes from " + hex(r.base) +
                        ", so it ends " + std::to_string(r.base + r.size - dev) + " bytes after the bound address";
      else
        where_it_ends = "; the driver knows no single allocation that holds all of them";
      return Error(ErrorCode::InvalidArgument,
                   name + " is bound to " + std::to_string(bytes) + " bytes at " + hex(dev) + where_it_ends +
                       " (bind the size of the memory you have)",
                   w);
    }
  }
  out->device = attr.devicePointer;
  out->host = cpu_addressable ? attr.hostPointer : nullptr;
  return {};
}

namespace {

void collect_writes(const fb::Pipeline& p, const fb::Graph* g, std::vector<bool>& written, int depth) {
  if (!g->nodes() || depth > 256) return;
  auto mark = [&](int b) {
    if (b >= 0 && static_cast<size_t>(b) < written.size()) written[b] = true;
  };
  for (const fb::Node* at : *g->nodes()) {
    const fb::Op* op = p.ops()->Get(at->op());
    switch (artifact::op_kind(*op)) {
      case artifact::NodeKind::Kernel: {
        const fb::KernelOp* n = op->body_as_KernelOp();
        const fb::Kernel* k =
            n->kernel() >= 0 && p.kernels() && static_cast<uint32_t>(n->kernel()) < p.kernels()->size()
                ? p.kernels()->Get(n->kernel())
                : nullptr;
        if (!n->args()) break;
        for (uint32_t i = 0; i < n->args()->size(); ++i) {
          const fb::KernelArg* a = n->args()->Get(i);
          if (a->kind() != fb::ArgKind::Buffer) continue;
          const bool read_only = k && k->params() && i < k->params()->size() &&
                                 k->params()->Get(i)->access() == fb::Access::In;
          if (!read_only) mark(a->ref());
        }
        break;
      }
      case artifact::NodeKind::Memcpy:
        mark(op->body_as_MemcpyOp()->dst());
        break;
      case artifact::NodeKind::Memset:
        mark(op->body_as_MemsetOp()->dst());
        break;
      case artifact::NodeKind::Collective:
        mark(op->body_as_CollectiveOp()->dst());
        break;
      case artifact::NodeKind::Empty:
        break;
      case artifact::NodeKind::Conditional:  // writes nothing itself; its bodies do
        if (const auto* bodies = op->body_as_ConditionalOp()->bodies())
          for (const fb::Graph* b : *bodies) collect_writes(p, b, written, depth + 1);
        break;
    }
  }
}

int buffer_named(const fb::Pipeline& p, const std::string& name) {
  const uint32_t n = p.buffers() ? p.buffers()->size() : 0;
  for (uint32_t i = 0; i < n; ++i)
    if (p.buffers()->Get(i)->name()->string_view() == name) return static_cast<int>(i);
  return -1;
}

}  // namespace

std::vector<bool> written_buffers(const fb::Pipeline& p) {
  std::vector<bool> written(p.buffers() ? p.buffers()->size() : 0, false);
  if (p.graphs())
    for (const fb::Graph* g : *p.graphs()) collect_writes(p, g, written, 0);
  return written;
}

Status check_overlaps(const fb::Pipeline& p, const std::vector<Span>& spans, const std::vector<bool>& written,
                      const Bindings& bindings) {
  return check_overlaps(p, spans, [&]() -> const std::vector<bool>& { return written; }, bindings);
}

Status check_overlaps(const fb::Pipeline& p, const std::vector<Span>& spans,
                      const std::function<const std::vector<bool>&()>& written_flags, const Bindings& bindings) {
  const size_t n = spans.size();
  std::vector<std::pair<int, int>> allowed;
  for (const auto& [a, b] : bindings.allowed_overlaps()) {
    const int ia = buffer_named(p, a), ib = buffer_named(p, b);
    for (const std::string* s : {&a, &b})
      if (buffer_named(p, *s) < 0)
        return Error(ErrorCode::UnknownName, "allow_overlap(\"" + a + "\", \"" + b + "\"): pipeline '" +
                                                 p.name()->str() + "' has no buffer '" + *s + "'");
    allowed.emplace_back(std::min(ia, ib), std::max(ia, ib));
  }
  std::vector<size_t> order;
  for (size_t i = 0; i < n; ++i)
    if (spans[i].bytes > 0) order.push_back(i);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return spans[a].begin < spans[b].begin; });
  for (size_t x = 0; x < order.size(); ++x) {
    const Span& s = spans[order[x]];
    const uint64_t end = s.begin + s.bytes;  // spans come from real allocations: no overflow
    for (size_t y = x + 1; y < order.size() && spans[order[y]].begin < end; ++y) {
      const size_t i = order[x], j = order[y];
      if (spans[i].arena && spans[j].arena) continue;
      const std::vector<bool>& written = written_flags();
      const bool wi = i < written.size() && written[i], wj = j < written.size() && written[j];
      if (!wi && !wj) continue;  // both only read: sharing memory is harmless
      const std::pair<int, int> key(static_cast<int>(std::min(i, j)), static_cast<int>(std::max(i, j)));
      if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
      const fb::Buffer& bi = *p.buffers()->Get(key.first);
      const fb::Buffer& bj = *p.buffers()->Get(key.second);
      const Span& si = spans[key.first];
      const Span& sj = spans[key.second];
      const uint64_t common =
          std::min(si.begin + si.bytes, sj.begin + sj.bytes) - std::max(si.begin, sj.begin);
      const bool first_written = key.first == static_cast<int>(i) ? wi : wj;
      const fb::Buffer& writer = first_written ? bi : bj;
      const std::string ni = name_of(bi), nj = name_of(bj);
      return Error(ErrorCode::BuffersOverlap,
                   "buffers '" + ni + "' (" + std::to_string(si.bytes) + " bytes at " + hex(si.begin) + ") and '" + nj +
                       "' (" + std::to_string(sj.bytes) + " bytes at " + hex(sj.begin) + ") share " +
                       std::to_string(common) + " bytes, and the pipeline writes '" + name_of(writer) +
                       "'; bind separate memory, or Bindings::allow_overlap(\"" + ni + "\", \"" + nj +
                       "\") if the overlap is meant",
                   where(p, writer.loc()));
    }
  }
  return {};
}

}  // namespace orch::rt
