// libFuzzer entry point for the parser (built with -DORCH_FUZZ=ON; scripts/fuzz-parser runs
// it). Any byte string is a possible .orch file: parse_module and dump_ast must never crash,
// hang, leak or throw, whatever the input.
#include <cstddef>
#include <cstdint>
#include <string>

#include "grammar/parse.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  orch::SourceManager sources;
  orch::DiagnosticEngine diags;
  uint32_t file = sources.add("fuzz.orch", std::string(reinterpret_cast<const char*>(data), size));
  auto module = orch::parse_module(sources, file, diags);
  std::string dump = orch::dump_ast(*module, sources);
  // Rendering walks every diagnostic's range against the text: out-of-range positions show here.
  std::string text =
      orch::format_diagnostics(diags.sorted(), sources, orch::DiagnosticFormat::Text);
  (void)dump;
  (void)text;
  return 0;
}
