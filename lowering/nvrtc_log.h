// NVRTC's compile log to orch diagnostics. NVRTC (EDG underneath) writes
//   file(LINE): error: message            also `warning #177-D:`, `catastrophic error:`, `note`
//             more detail lines
//     <the source line, indented by two>
//     <a caret line: `^` under the column>
//             detected during instantiation of "..." at line N [of file]
// The caret gives the column; the line maps back through KernelSource's origin.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lowering/kernel_compiler.h"
#include "support/diagnostics.h"

namespace orch {

struct NvrtcLogNote {
  std::string file;
  uint32_t line = 0;
  uint32_t col = 0;  // 0: unknown
  std::string text;
};

struct NvrtcLogMessage {
  std::string file;
  uint32_t line = 0;
  uint32_t col = 0;  // 0: no caret line followed
  Severity severity = Severity::Error;
  std::string number;  // "177-D" from `warning #177-D:`; empty if none
  std::string text;    // the message, detail lines joined with "; "
  std::vector<NvrtcLogNote> notes;
};

// Every located message of the log, in order; `note` messages and `detected during` lines
// attach to the message before them. Lines that fit no pattern are skipped.
std::vector<NvrtcLogMessage> parse_nvrtc_log(std::string_view log);

// Where NVRTC's line/col in `source` lies in the orch sources (see KernelSource::origin),
// spanning the identifier that starts there, or one character.
SourceRange map_kernel_location(const KernelSource& source, uint32_t line, uint32_t col);

// Diagnostics for one kernel's messages: errors as E0901, warnings as W0901. Messages in other
// files (headers) or in NVRTC's name-expression map are reported at the kernel's origin.
std::vector<Diagnostic> nvrtc_log_diagnostics(const std::vector<NvrtcLogMessage>& messages,
                                              const KernelSource& source, bool errors,
                                              bool warnings);

}  // namespace orch
