#include "artifact/arena.h"

#include <algorithm>
#include <numeric>

namespace orch::artifact {

namespace {

// a + b, or false when it does not fit.
bool add(uint64_t a, uint64_t b, uint64_t* out) {
  if (a > UINT64_MAX - b) return false;
  *out = a + b;
  return true;
}

// `v` rounded up to a multiple of `alignment` (a power of two), or false past 64 bits.
bool align_up(uint64_t v, uint64_t alignment, uint64_t* out) {
  uint64_t t;
  if (!add(v, alignment - 1, &t)) return false;
  *out = t & ~(alignment - 1);
  return true;
}

}  // namespace

ArenaLayout pack_arena(const std::vector<uint64_t>& bytes, const std::vector<SlotPair>& conflicts,
                       uint64_t alignment) {
  ArenaLayout out;
  const size_t n = bytes.size();
  out.offsets.assign(n, 0);
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    out.error = "the arena's alignment " + std::to_string(alignment) + " is not a power of two";
    return out;
  }
  std::vector<std::vector<uint32_t>> neighbours(n);
  for (const SlotPair& c : conflicts) {
    if (c.first >= n || c.second >= n || c.first == c.second) continue;  // the validator refuses these
    neighbours[c.first].push_back(c.second);
    neighbours[c.second].push_back(c.first);
  }
  // Largest first (ties by index): the big ones decide the arena's size, small ones fill gaps.
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return bytes[a] > bytes[b]; });
  std::vector<bool> placed(n, false);
  std::vector<std::pair<uint64_t, uint64_t>> busy;  // [begin, end) of placed neighbours
  for (uint32_t i : order) {
    placed[i] = true;
    if (bytes[i] == 0) continue;
    busy.clear();
    for (uint32_t j : neighbours[i])
      if (placed[j] && bytes[j] > 0) busy.emplace_back(out.offsets[j], out.offsets[j] + bytes[j]);
    std::sort(busy.begin(), busy.end());
    uint64_t at = 0, end = 0;
    for (const auto& [b, e] : busy) {
      if (!add(at, bytes[i], &end)) break;
      if (end <= b) break;  // fits in the gap before this neighbour
      if (e > at && !align_up(e, alignment, &at)) {
        out.error = "the arena's size does not fit in 64 bits";
        return out;
      }
    }
    if (!add(at, bytes[i], &end)) {
      out.error = "the arena's size does not fit in 64 bits";
      return out;
    }
    out.offsets[i] = at;
    out.bytes = std::max(out.bytes, end);
  }
  return out;
}

std::string check_arena(const std::vector<uint64_t>& bytes, const std::vector<uint64_t>& offsets,
                        const std::vector<SlotPair>& conflicts, uint64_t arena_bytes, uint64_t alignment) {
  if (bytes.size() != offsets.size()) return "the layout has " + std::to_string(offsets.size()) +
                                             " offsets for " + std::to_string(bytes.size()) + " buffers";
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    return "alignment " + std::to_string(alignment) + " is not a power of two";
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (offsets[i] % alignment != 0)
      return "slot " + std::to_string(i) + " is at offset " + std::to_string(offsets[i]) + ", not a multiple of " +
             std::to_string(alignment);
    if (offsets[i] > arena_bytes || bytes[i] > arena_bytes - offsets[i])
      return "slot " + std::to_string(i) + " (" + std::to_string(bytes[i]) + " bytes at " + std::to_string(offsets[i]) +
             ") ends past the arena's " + std::to_string(arena_bytes) + " bytes";
  }
  for (const SlotPair& c : conflicts) {
    if (c.first >= bytes.size() || c.second >= bytes.size())
      return "a conflict names slot " + std::to_string(std::max(c.first, c.second)) + " of " +
             std::to_string(bytes.size());
    const uint64_t a = offsets[c.first], b = offsets[c.second];
    // Both lie inside the arena (above), so the ends do not overflow.
    if (bytes[c.first] > 0 && bytes[c.second] > 0 && a < b + bytes[c.second] && b < a + bytes[c.first])
      return "slots " + std::to_string(c.first) + " and " + std::to_string(c.second) +
             " may be in use at the same time but share bytes";
  }
  return "";
}

}  // namespace orch::artifact
