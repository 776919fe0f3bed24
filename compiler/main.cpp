// orchc: reads flags and calls the libraries. Exit codes: 0 clean, 1 the pipeline has
// errors, 2 usage or internal error.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "compiler/check.h"
#include "compiler/emit.h"
#include "grammar/parse.h"

namespace {

int run(int argc, char** argv) {
  CLI::App app{"orchc: compile orch pipelines to CUDA graphs", "orchc"};
  std::string input, emit, target, targets_dir, format = "text", color = "auto", output;
  bool check_only = false;
  app.add_option("input", input, "the .orch file")->required();
  app.add_flag("--check", check_only, "check the pipeline and exit (no GPU needed)");
  app.add_option("--emit", emit, "print a view instead of compiling: ast, dot or yaml")
      ->check(CLI::IsMember({"ast", "dot", "yaml"}));
  app.add_option("--target", target, "target profile name (sm_90) or a .yaml profile path");
  app.add_option("--targets-dir", targets_dir, "folder of target profiles");
  app.add_option("--diagnostics-format", format, "text, json or sarif")
      ->check(CLI::IsMember({"text", "json", "sarif"}));
  app.add_option("--color", color, "color text diagnostics: auto, always or never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  app.add_option("-o,--output", output, "write the compiled pipeline here");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }

  orch::SourceManager sources;
  orch::DiagnosticEngine diags;
  orch::CheckOptions options;
  options.target_override = target;
  options.targets_dir = targets_dir;
  orch::CheckResult result = orch::check_file(input, sources, options, diags);

  orch::DiagnosticFormat fmt = format == "json"    ? orch::DiagnosticFormat::Json
                               : format == "sarif" ? orch::DiagnosticFormat::Sarif
                                                   : orch::DiagnosticFormat::Text;
  bool use_color = color == "always" || (color == "auto" && isatty(STDERR_FILENO));
  std::string report = orch::format_diagnostics(diags.sorted(), sources, fmt,
                                                fmt == orch::DiagnosticFormat::Text && use_color);
  // Machine-readable reports go to stdout unless stdout carries an emitted view.
  if (fmt != orch::DiagnosticFormat::Text && emit.empty()) std::cout << report;
  else std::cerr << report;

  if (!emit.empty()) {
    if (emit == "ast" && result.module) std::cout << orch::dump_ast(*result.module, sources);
    else if (emit == "dot" && result.program) std::cout << orch::emit_dot(*result.program, sources);
    else if (emit == "yaml" && result.program) std::cout << orch::emit_yaml(*result.program, sources);
  }
  if (diags.has_errors()) return 1;
  if (!output.empty() && !check_only) {
    std::cerr << "orchc: writing pipeline.bin is not available in this build yet; use --check\n";
    return 2;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "orchc: internal error: " << e.what() << "\n";
  } catch (...) {
    std::cerr << "orchc: internal error\n";
  }
  return 2;
}
