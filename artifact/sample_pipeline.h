// A small but complete pipeline, built deterministically with FlatBufferBuilder: the golden
// artifact, the fixture every artifact test starts from, and the fuzzer's seed.
#pragma once

#include <string>

#include "artifact/artifact.h"

namespace orch::artifact {

// The FlatBuffers payload (file identifier "ORCH"), byte-for-byte the same on every call.
std::string sample_payload();

// sample_payload() in its envelope: the bytes of a valid pipeline.bin.
std::string sample_artifact();

// Serializes an object-API tree the way lowering would (identifier "ORCH", no envelope).
std::string pack_payload(const orch::fb::PipelineT& pipeline);

}  // namespace orch::artifact
