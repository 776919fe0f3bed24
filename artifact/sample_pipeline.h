// A small but complete pipeline, built deterministically with FlatBufferBuilder: the golden
// artifact, the fixture every artifact test starts from, and the fuzzer's seed.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "artifact/artifact.h"

namespace orch::artifact {

// The FlatBuffers payload (file identifier "ORCH"), byte-for-byte the same on every call.
std::string sample_payload();

// sample_payload() in its envelope: the bytes of a valid pipeline.bin.
std::string sample_artifact();

// Serializes an object-API tree the way lowering would (identifier "ORCH", no envelope).
std::string pack_payload(const orch::fb::PipelineT& pipeline);

// Editing an unpacked pipeline node by node (tests, and the bench's edited artifacts). A node is
// a struct naming its op in p.ops and ending its dependencies in g.deps (format 4); these keep
// both consistent.

// The op node `index` of `g` runs, made its own first (copied, where other nodes share it), so
// that changing it changes this node alone.
orch::fb::OpT& own_op(orch::fb::PipelineT& p, orch::fb::GraphT& g, uint32_t index);

// The body of an unpacked op, which must be of kind T (fb::KernelOpT, fb::MemcpyOpT, ...).
template <class T>
T& body_of(orch::fb::OpT& op) {
  if (op.body.type != orch::fb::OpBodyUnionTraits<T>::enum_value)
    throw std::logic_error(std::string("the op is a ") + orch::fb::EnumNameOpBody(op.body.type) + ", not a " +
                           orch::fb::EnumNameOpBody(orch::fb::OpBodyUnionTraits<T>::enum_value));
  return *static_cast<T*>(op.body.value);
}

// A new unpacked op with `body` (fb::KernelOpT, fb::EmptyOpT, ...).
template <class T>
std::unique_ptr<orch::fb::OpT> make_op(T body, std::string what = {}) {
  auto op = std::make_unique<orch::fb::OpT>();
  op->what = std::move(what);
  op->body.Set(std::move(body));
  return op;
}

// The op node `index` of `g` runs, shared or not.
const orch::fb::OpT& op_of(const orch::fb::PipelineT& p, const orch::fb::GraphT& g, uint32_t index);

// Node `index`'s dependencies, in order.
std::vector<uint32_t> deps_of(const orch::fb::GraphT& g, uint32_t index);

// Replaces node `index`'s dependencies; `kinds` is one per dependency, or empty for all Full.
// g.dep_kinds is kept one per entry of g.deps (or empty while every edge is Full).
void set_deps(orch::fb::GraphT& g, uint32_t index, const std::vector<uint32_t>& deps,
              const std::vector<orch::fb::EdgeKind>& kinds = {});

// Sets node `index`'s source location, op index, or end of dependencies. These change the one
// field and nothing else: set_op may name an op that does not exist, set_deps_end may break the
// graph's dependency layout (for files the validator must refuse; set_deps keeps it whole).
void set_loc(orch::fb::GraphT& g, uint32_t index, const orch::fb::SourceLoc& loc);
void set_op(orch::fb::GraphT& g, uint32_t index, uint32_t op);
void set_deps_end(orch::fb::GraphT& g, uint32_t index, uint32_t end);

// Appends a node that runs `op` (appended to p.ops) after `deps`; returns its index in g.
uint32_t add_node(orch::fb::PipelineT& p, orch::fb::GraphT& g, std::unique_ptr<orch::fb::OpT> op,
                  const std::vector<uint32_t>& deps = {}, const orch::fb::SourceLoc& loc = {});
// Appends a node that runs p.ops[op], an op already there (shared with the nodes that run it).
uint32_t add_node(orch::fb::GraphT& g, uint32_t op, const std::vector<uint32_t>& deps = {},
                  const orch::fb::SourceLoc& loc = {});

// Removes node `index` of `g` (nodes after it move down; dependencies on it must be gone).
void remove_node(orch::fb::GraphT& g, uint32_t index);

// Removes the ops no node runs any more (after nodes were removed), renumbering the rest.
void drop_unused_ops(orch::fb::PipelineT& p);

}  // namespace orch::artifact
