// orch-inspect pipeline.bin: prints what a compiled pipeline holds. A file the runtime would
// refuse gets one line on stderr, "orch-inspect: FILE: <why>", and exit code 1; usage errors
// exit 2.
#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "artifact/artifact.h"

namespace {

// Reads the whole file into 8-byte aligned storage (FlatBuffers reads scalars in place).
bool read_file(const std::string& path, std::vector<uint64_t>* storage, size_t* size,
               std::string* error) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    *error = std::string("cannot open: ") + std::strerror(errno);
    return false;
  }
  std::string bytes;
  char chunk[65536];
  size_t n;
  while ((n = std::fread(chunk, 1, sizeof(chunk), f)) > 0) bytes.append(chunk, n);
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (failed) {
    *error = std::string("cannot read: ") + std::strerror(err);
    return false;
  }
  storage->assign((bytes.size() + 7) / 8, 0);
  if (!bytes.empty()) std::memcpy(storage->data(), bytes.data(), bytes.size());
  *size = bytes.size();
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Prints what a compiled orch pipeline (pipeline.bin) holds, after checking it "
      "exactly as the runtime does.",
      "orch-inspect"};
  std::string path;
  app.add_option("file", path, "the pipeline.bin to inspect")->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }

  try {
    std::vector<uint64_t> storage;
    size_t size = 0;
    std::string error;
    if (!read_file(path, &storage, &size, &error)) {
      std::cerr << "orch-inspect: " << path << ": " << error << "\n";
      return 1;
    }
    const auto result =
        orch::artifact::open_pipeline(reinterpret_cast<const uint8_t*>(storage.data()), size);
    if (!result.ok()) {
      std::cerr << "orch-inspect: " << path << ": " << result.error << "\n";
      return 1;
    }
    std::cout << orch::artifact::describe_pipeline(*result.pipeline);
    std::cout.flush();
    return std::cout ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "orch-inspect: " << path << ": " << e.what() << "\n";
    return 1;
  }
}
