// Reading the files a compilation is given (the .orch file, `from "file.cu"` kernel sources)
// without trusting them: only regular files, and only up to a size limit, so that a FIFO, a
// device such as /dev/zero or a directory gives a clear error instead of a hang or an
// exhausted memory.
#pragma once

#include <cstddef>
#include <string>

namespace orch {

// The largest input file orchc reads (docs/diagnostics.md, E0005). The parser also limits the
// tokens of one file (kMaxTokens in grammar/parse.h), which is what bounds its memory; this
// bounds the reading itself and what NVRTC is handed, far above any real pipeline or kernel.
constexpr size_t kMaxInputBytes = size_t{16} << 20;

struct InputFile {
  enum class Status { Ok, CannotRead, TooLarge };
  Status status = Status::CannotRead;
  std::string text;   // the contents when Ok
  std::string error;  // why not, one line without the path ("it is a directory")
  size_t size = 0;    // the size seen when TooLarge
};

// Refuses anything but a regular file (after following symbolic links) without opening it,
// opens without blocking, and reads at most `max_bytes`, even from a file whose size the file
// system does not know in advance (/proc).
// An input of the compile: what it read is told to the file observer (support/file_observer.h).
InputFile read_input_file(const std::string& path, size_t max_bytes = kMaxInputBytes);
// The same checks and reading for a file that is not an input (a cache entry): not observed.
InputFile read_regular_file(const std::string& path, size_t max_bytes = kMaxInputBytes);

// "a directory", "a FIFO (named pipe)", "a character device", ... for an st_mode.
std::string describe_file_type(unsigned mode);

}  // namespace orch
