// Helpers shared by the validator (validate*.cpp) and describe.cpp; not the library's interface.
#pragma once

#include <string>

#include "artifact/pipeline_generated.h"
#include "expr/expr.h"

namespace orch::artifact::detail {

// Every enum in pipeline.fbs starts at 0, so one comparison with MAX checks a stored value.
template <class E>
bool in_range(E value) {
  return static_cast<unsigned>(value) <= static_cast<unsigned>(E::MAX);
}

// Elements of an optional vector: absent counts as empty.
template <class T>
uint32_t size_of(const flatbuffers::Vector<T>* v) {
  return v ? v->size() : 0;
}

// The verifier checks a vector's length field, not that its structs are aligned: a hostile file
// can start a vector of 8-byte structs 4 bytes off, and reading one is undefined behaviour.
template <class T>
bool structs_aligned(const flatbuffers::Vector<const T*>* v) {
  return v == nullptr || reinterpret_cast<uintptr_t>(v->Data()) % alignof(T) == 0;
}
// The verifier's 4-byte check suffices for these; a struct that gains an 8-byte field fails here
// and must be read only after structs_aligned, as ExprInstr and ArenaSlot are.
static_assert(alignof(fb::Node) <= 4 && alignof(fb::SourceLoc) <= 4 && alignof(fb::LaunchShape) <= 4 &&
                  alignof(fb::SlotPair) <= 4,
              "a struct vector needs structs_aligned before it is read");

// A name from the file made safe for a one-line message: control bytes become '?', and long
// names are cut, so a hostile file cannot forge extra lines or flood the terminal.
inline std::string printable(const flatbuffers::String* s, size_t limit = 80) {
  if (s == nullptr) return std::string();
  std::string out;
  const size_t n = s->size() < limit ? s->size() : limit;
  out.reserve(n + 3);
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(s->c_str()[i]);
    out.push_back(c < 0x20 || c == 0x7F ? '?' : static_cast<char>(c));
  }
  if (s->size() > limit) out += "...";
  return out;
}

// The language's spelling of a scalar type ("f32"), or "type#N" outside the enum.
inline std::string type_name(fb::ScalarType t) {
  if (!in_range(t)) return "type#" + std::to_string(static_cast<unsigned>(t));
  return expr::to_string(static_cast<expr::ScalarType>(t));  // one enum (expr_code.h)
}

}  // namespace orch::artifact::detail
