// Checks on memory the application binds: that the driver knows it, that the bound size lies
// inside one allocation, that a `host` buffer is memory the CPU can address, and that buffers
// do not overlap where the pipeline writes one of them. The CPU-only parts (range arithmetic,
// what the pipeline writes, the overlap rule) are separate so tests without a GPU reach them.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "artifact/pipeline_generated.h"
#include "orch/runtime.h"

namespace orch::rt {

namespace fb = orch::fb;

// What the driver says about bound memory.
struct BoundMemory {
  void* device = nullptr;  // the address kernels use
  void* host = nullptr;    // the address the CPU uses; null when the CPU cannot address it
};

// Checks `bytes` bytes at `ptr` bound to buffer `index` of `p`: memory CUDA knows, that the
// device can address, lying inside one allocation (the driver's allocation ranges), and for a
// `host` buffer memory the CPU can address. Errors name the buffer's declaration.
Status check_bound_memory(const fb::Pipeline& p, uint32_t index, void* ptr, size_t bytes, BoundMemory* out);

// True when [ptr, ptr + bytes) lies inside [base, base + size), without overflow.
bool range_inside(uint64_t ptr, uint64_t bytes, uint64_t base, uint64_t size);

// Per buffer: true when some node may write it (a kernel argument whose parameter is not `in`,
// a copy's or fill's destination, a collective's destination), in any graph or body.
std::vector<bool> written_buffers(const fb::Pipeline& p);

// The memory buffer `i` occupies: `bytes` (its declared size) from `begin`; bytes == 0: none.
struct Span {
  uint64_t begin = 0;
  uint64_t bytes = 0;
  bool arena = false;  // placed in the memory plan's arena: shares bytes with others there by design
};

// BuffersOverlap for the first two spans that share a byte where at least one of the two is
// written and the application did not allow the pair (Bindings::allow_overlap); UnknownName for
// an allowed pair that names no buffer. Spans are per Pipeline.buffers. Two spans both in the
// arena are not compared: the memory plan proved them never in use at the same time, and the
// runtime checked the layout against its conflicts (runtime/src/arena.h).
Status check_overlaps(const fb::Pipeline& p, const std::vector<Span>& spans, const std::vector<bool>& written,
                      const Bindings& bindings);
// The same, asking for the written flags only when two spans share a byte: most bindings share
// none, and written_buffers() walks every node.
Status check_overlaps(const fb::Pipeline& p, const std::vector<Span>& spans,
                      const std::function<const std::vector<bool>&()>& written, const Bindings& bindings);

}  // namespace orch::rt
