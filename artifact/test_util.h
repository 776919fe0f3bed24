// Helpers shared by the artifact tests.
#pragma once

#include <memory>
#include <string>

#include "artifact/artifact.h"
#include "artifact/sample_pipeline.h"

namespace orch::artifact::test {

inline const uint8_t* bytes(const std::string& s) {
  return reinterpret_cast<const uint8_t*>(s.data());
}

// std::string's heap storage is 16-byte aligned, which open_pipeline() needs.
inline OpenResult open(const std::string& file) { return open_pipeline(bytes(file), file.size()); }

inline std::string wrap(const std::string& payload) {
  return wrap_payload(bytes(payload), payload.size());
}

// The sample as a mutable object tree, for building broken variants.
inline std::unique_ptr<fb::PipelineT> sample_tree() {
  const std::string payload = sample_payload();
  return std::unique_ptr<fb::PipelineT>(fb::GetPipeline(payload.data())->UnPack());
}

// Packs, wraps and opens a tree; returns the error ("" when it opens).
inline std::string open_error(const fb::PipelineT& tree) {
  const std::string file = wrap(pack_payload(tree));
  return open(file).error;
}

}  // namespace orch::artifact::test
