// orch_artifact_write_sample DIR: writes DIR/sample.bin (the sample pipeline.bin) and
// DIR/sample.payload (its bare FlatBuffer), the seed corpus of scripts/fuzz-artifact.
#include <cstdio>
#include <string>

#include "artifact/sample_pipeline.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: orch_artifact_write_sample DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  const std::string files[][2] = {{dir + "/sample.bin", orch::artifact::sample_artifact()},
                                  {dir + "/sample.payload", orch::artifact::sample_payload()}};
  for (const auto& file : files) {
    std::string error;
    if (!orch::artifact::write_file_atomically(file[0], file[1], &error)) {
      std::fprintf(stderr, "orch_artifact_write_sample: %s\n", error.c_str());
      return 1;
    }
  }
  return 0;
}
