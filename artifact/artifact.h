// pipeline.bin: the envelope around the FlatBuffers payload, the loader that checks every byte
// before anyone reads it, and a readable summary. docs/format.md describes the file.
//
// The runtime links this library, so it depends on FlatBuffers headers only (house rule).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "artifact/pipeline_generated.h"

namespace orch::artifact {

// Bump with every change to pipeline.fbs (artifact/golden_test.cpp fails until you do) and add
// the new version to docs/format.md's history.
constexpr uint32_t kFormatVersion = 9;

// The envelope, little-endian, 32 bytes, then the payload (so the payload is 8-byte aligned):
//   0  char[8]  magic "ORCHPIPE"
//   8  u32      format version
//   12 u32      header flags (0; reserved)
//   16 u64      payload size in bytes (the rest of the file, exactly)
//   24 u64      XXH64 (seed 0) of the payload
//   32 ...      FlatBuffers Pipeline with file identifier "ORCH"
constexpr char kMagic[8] = {'O', 'R', 'C', 'H', 'P', 'I', 'P', 'E'};
constexpr size_t kHeaderSize = 32;
constexpr size_t kPayloadAlignment = 8;

// Limits the validator enforces (docs/format.md lists every rule).
constexpr uint32_t kMaxGraphDepth = 64;              // nesting of conditional bodies
constexpr uint32_t kMaxExprLength = 4096;            // postfix instructions in one expression
constexpr uint64_t kMaxFireAndForgetLaunches = 120;  // per graph execution (CUDA's limit)
constexpr uint64_t kMaxTailLaunches = 255;           // pending tail launches (CUDA's limit)
constexpr uint32_t kMaxFamilySize = 65536;           // members of a graph family (the checker's)

// The largest pipeline.bin there can be: the header and a FlatBuffer under its 2 GiB limit.
// Readers refuse larger sizes before they allocate anything.
constexpr size_t kMaxFileSize = kHeaderSize + FLATBUFFERS_MAX_BUFFER_SIZE - 1;

// XXH64 with seed 0 (xxHash compiled inline, so nothing is linked).
uint64_t xxh64(const void* data, size_t size);

// The writer side: lowering builds the FlatBuffer (FinishPipelineBuffer) and wraps it.
std::string wrap_payload(const uint8_t* data, size_t size);

struct OpenResult {
  const orch::fb::Pipeline* pipeline = nullptr;  // points into the caller's bytes
  std::string error;                             // one line; empty when pipeline is set
  bool ok() const { return pipeline != nullptr; }
};

// Checks, in order: size, magic, format version, header flags, payload size against the file
// length, checksum, alignment of `data` in memory (8 bytes), the FlatBuffers verifier (file
// identifier, depth and table limits), then validate(). Any byte string gives a result; nothing
// throws and nothing is read out of bounds. `data` must outlive the returned pipeline.
OpenResult open_pipeline(const uint8_t* data, size_t size);

// The semantic checks on a verified payload of `payload_size` bytes: every index in range, every
// expression well formed, every node consistent with what the runtime will build. Returns the
// first problem as one line ("graph 'main' node 3: dependency 7 is not an earlier node"), or an
// empty string. open_pipeline() calls it; it must only be given a pipeline the FlatBuffers
// verifier accepted.
std::string validate(const orch::fb::Pipeline& pipeline, size_t payload_size);

// The memory plan's part of validate() (validate_plan.cpp): "" or the problem.
std::string memory_plan_problem(const orch::fb::Pipeline& pipeline);

// Why `path` cannot be an output file, or "" if it can. An output must be absent or a regular
// file (after following symbolic links), writable, and not the same file (device and inode, so
// also through links) as any of `inputs`: `-o /dev/null` as root would otherwise replace the
// device with a regular file, and `-o` onto the input would replace the pipeline's source.
std::string output_path_problem(const std::string& path, const std::vector<std::string>& inputs = {});

// Writes `bytes` to a temporary file in the destination's directory, fsyncs it, renames it over
// the destination and fsyncs the directory. The destination is `path`, or the file a symbolic
// link at `path` points to (the link stays). First refuses what output_path_problem() refuses,
// touching nothing. On failure the old file is untouched, the temporary file is removed,
// *error (if given) says why, and the result is false.
bool write_file_atomically(const std::string& path, const std::string& bytes, std::string* error,
                           const std::vector<std::string>& inputs = {});

// A whole file in 8-byte aligned memory (what open_pipeline() needs).
struct FileBytes {
  std::unique_ptr<uint64_t[]> storage;
  size_t size = 0;
  const uint8_t* data() const { return reinterpret_cast<const uint8_t*>(storage.get()); }
};

// Reads the regular file at `path`, at most `max_size` bytes of it. Anything else is refused
// with a reason and without reading: a directory, a FIFO or socket (never opened for reading,
// so nothing blocks), a device, a file larger than `max_size`. Never throws: running out of
// memory is an error too. On failure *error (one line, without the path: "cannot open: No
// such file or directory", "is a directory, not a file") says why and *out is empty.
bool read_file(const std::string& path, size_t max_size, FileBytes* out, std::string* error);

// What a node does, by kind: its op's body type (pipeline.fbs, OpBody) less NONE, which
// validate() refuses, so every op of a pipeline open_pipeline() accepted has one. Switches over
// it list every kind and no default, so a new kind is a compile error wherever it needs handling.
enum class NodeKind : uint8_t { Kernel, Memcpy, Memset, Empty, Conditional, Collective };

// The kind of a body type other than NONE (validate() checks the type before it asks).
constexpr NodeKind node_kind(orch::fb::OpBody type) {
  return static_cast<NodeKind>(static_cast<uint8_t>(type) - 1);
}
static_assert(node_kind(orch::fb::OpBody::KernelOp) == NodeKind::Kernel &&
                  node_kind(orch::fb::OpBody::MemcpyOp) == NodeKind::Memcpy &&
                  node_kind(orch::fb::OpBody::MemsetOp) == NodeKind::Memset &&
                  node_kind(orch::fb::OpBody::EmptyOp) == NodeKind::Empty &&
                  node_kind(orch::fb::OpBody::ConditionalOp) == NodeKind::Conditional &&
                  node_kind(orch::fb::OpBody::CollectiveOp) == NodeKind::Collective &&
                  orch::fb::OpBody::MAX == orch::fb::OpBody::CollectiveOp,
              "NodeKind is OpBody less NONE, in the same order");

// The kind of an op of a pipeline that open_pipeline() accepted (or of an unpacked op with a body).
inline NodeKind op_kind(const orch::fb::Op& op) { return node_kind(op.body_type()); }
inline NodeKind op_kind(const orch::fb::OpT& op) { return node_kind(op.body.type); }

// "Kernel", "Memcpy", ...: the body type's name without "Op".
const char* node_kind_name(NodeKind kind);

// The graphs an op holds: a conditional's bodies; none (nullptr) for every other kind. The one
// answer to "which kinds nest graphs" for the walks over nested graphs (the runtime's plan,
// orch-run's sites), so a kind added to NodeKind is reported here by -Werror=switch.
inline const flatbuffers::Vector<flatbuffers::Offset<orch::fb::Graph>>* nested_graphs(const orch::fb::Op& op) {
  switch (op_kind(op)) {
    case NodeKind::Conditional:
      return op.body_as_ConditionalOp() ? op.body_as_ConditionalOp()->bodies() : nullptr;
    case NodeKind::Kernel:
    case NodeKind::Memcpy:
    case NodeKind::Memset:
    case NodeKind::Empty:
    case NodeKind::Collective:
      return nullptr;
  }
  return nullptr;
}

// A node of a graph of a pipeline that open_pipeline() accepted: the op it runs (what it does,
// Pipeline.ops, shared by nodes that do the same thing) and the node itself (its statement and
// where its dependencies end).
struct NodeRef {
  const orch::fb::Op* op = nullptr;
  const orch::fb::Node* at = nullptr;
};

// Node `i` of graph `g`.
inline NodeRef node_ref(const orch::fb::Pipeline& p, const orch::fb::Graph& g, uint32_t i) {
  const orch::fb::Node* n = g.nodes()->Get(i);
  return {p.ops()->Get(n->op()), n};
}

// Where node `i`'s dependencies begin in g.deps() (and g.dep_kinds(), when present); they end at
// its deps_end().
inline uint32_t deps_begin(const orch::fb::Graph& g, uint32_t i) {
  return i == 0 ? 0 : g.nodes()->Get(i - 1)->deps_end();
}

// A readable multi-line summary of a pipeline that open_pipeline() accepted.
std::string describe_pipeline(const orch::fb::Pipeline& pipeline);

// An expression in infix form ("ceil_div(n, 256) * 2"); "<invalid expression>" if malformed.
std::string expr_to_string(const orch::fb::Expr* expr, const orch::fb::Pipeline& pipeline);

// Size in bytes of one element of `type` (bool is 1), or 0 for a value outside the enum.
size_t scalar_size(orch::fb::ScalarType type);

}  // namespace orch::artifact
