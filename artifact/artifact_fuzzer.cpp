// libFuzzer target for the loader. Each input is tried two ways:
//   (a) as a whole pipeline.bin, raw: exercises the envelope checks;
//   (b) as a payload wrapped in a valid envelope (correct size and checksum): reaches the
//       FlatBuffers verifier, validate() and, on success, describe_pipeline().
// Any crash, sanitizer report, leak, or an error that is empty or longer than one line fails.
// scripts/fuzz-artifact builds and runs it, seeded with the sample artifact and its payload.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "artifact/artifact.h"

namespace {

void check(const orch::artifact::OpenResult& r) {
  if (r.ok()) {
    const std::string text = orch::artifact::describe_pipeline(*r.pipeline);
    if (text.empty()) __builtin_trap();
  } else if (r.error.empty() || r.error.find('\n') != std::string::npos) {
    __builtin_trap();
  }
}

// open_pipeline() needs 8-byte aligned bytes, as a file read into memory would be.
orch::artifact::OpenResult open_aligned(const uint8_t* data, size_t size,
                                        std::vector<uint64_t>* storage) {
  storage->assign(size / 8 + 1, 0);
  if (size > 0) std::memcpy(storage->data(), data, size);
  return orch::artifact::open_pipeline(reinterpret_cast<const uint8_t*>(storage->data()), size);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint64_t> storage;
  check(open_aligned(data, size, &storage));
  const std::string file = orch::artifact::wrap_payload(data, size);
  check(open_aligned(reinterpret_cast<const uint8_t*>(file.data()), file.size(), &storage));
  return 0;
}
