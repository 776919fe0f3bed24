// orch-lsp: the language server for .orch files, over stdin and stdout (docs/editors.md).
// Reads flags and runs lsp/'s server; everything else is in the library.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "lsp/kernel_compile.h"
#include "lsp/stdio_loop.h"

int main(int argc, char** argv) {
  CLI::App app{"orch-lsp: the orch language server (LSP over stdin and stdout)", "orch-lsp"};
  orch::lsp::ServerOptions options;
  bool no_compile = false, stdio = false;
  app.add_flag("--stdio", stdio, "talk LSP over stdin and stdout (the only transport; accepted for clients that pass it)");
  app.add_option("--debounce-ms", options.debounce_ms,
                 "check a changed document this long after the last change (default 15)")
      ->check(CLI::Range(0, 10000));
  app.add_flag("--no-compile-on-save", no_compile, "do not compile the kernels when a document is saved");
  app.add_option("--target", options.analysis.target_override, "target profile name (sm_90) or .yaml path, as orchc --target");
  app.add_option("--targets-dir", options.analysis.targets_dir, "folder of target profiles, as orchc --targets-dir");
  std::string cache_dir;
  app.add_option("--kernel-cache-dir", cache_dir, "kernel cache for compile on save (default: orchc's)");
  app.add_flag("--verbose", options.verbose, "log each check and compile, with its time, on stderr");
  app.set_version_flag("--version", "orch-lsp 0.1.0");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  options.compile_on_save = !no_compile;
  options.compile_kernels = orch::lsp::kernel_compiler(cache_dir);
  std::ios::sync_with_stdio(false);
  int code = 2;
  try {
    code = orch::lsp::serve(std::cin, std::cout, options);
  } catch (const std::exception& e) {
    std::cerr << "orch-lsp: internal error: " << e.what() << "\n";
  }
  std::cout.flush();
  // The input reader may still be blocked in a read (a client that sent `exit` and keeps its
  // pipe open): leave without running static destructors under it.
  std::fflush(nullptr);
  std::_Exit(code);
}
