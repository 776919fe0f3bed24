// orch-inspect pipeline.bin: prints what a compiled pipeline holds. A file the runtime would
// refuse gets one line on stderr, "orch-inspect: FILE: <why>", and exit code 1; usage errors
// exit 2.
#include <CLI/CLI.hpp>
#include <iostream>
#include <string>

#include "artifact/artifact.h"

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
    // The runtime's reader: regular files only (a FIFO is never opened), at most the size the
    // runtime loads.
    orch::artifact::FileBytes file;
    std::string error;
    if (!orch::artifact::read_file(path, orch::artifact::kMaxFileSize, &file, &error)) {
      std::cerr << "orch-inspect: " << path << ": " << error << "\n";
      return 1;
    }
    const auto result = orch::artifact::open_pipeline(file.data(), file.size);
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
