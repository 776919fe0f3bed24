// What a compilation learned from the file system, told as it happens to an observer that the
// driver may install: orchc's artifact cache records it, and replays a compile only while every
// fact still holds (tools/orchc/artifact_cache.h). The places that read inputs (the .orch file,
// `from` kernel sources, target profiles, the headers kernel sources include) or look for them
// (search folders, the CUDA toolkit) report here; without an observer this costs one load.
#pragma once

#include <atomic>
#include <string>
#include <string_view>

namespace orch {

enum class FileFact : unsigned char {
  Contents,     // a file read whole; the value is its bytes
  Readable,     // "0": a regular file that could not be read (Contents tells of one that could)
  RegularFile,  // "1" or "0": std::filesystem::is_regular_file(path)
  Directory,    // "1" or "0": std::filesystem::is_directory(path)
  Exists,       // "1" or "0": std::filesystem::exists(path)
  Canonical,    // std::filesystem::weakly_canonical(path), or the path itself where that fails
  SizeAndTime,  // "<size> <mtime ticks>" of a file (file_size, last_write_time), "" when absent
  // Not a fact about one file: the compile read something it cannot name (an `#include` of a
  // macro, includes nested past what is followed); the value says what. Nothing that depends
  // on the files read may be cached.
  Incomplete,
};

class FileObserver {
 public:
  virtual ~FileObserver() = default;
  // Called from any thread (kernels compile in parallel).
  virtual void observe(FileFact fact, const std::string& path, std::string_view value) = 0;
};

// The process's observer, or null (the default).
FileObserver* file_observer();
void set_file_observer(FileObserver* observer);

inline void observe_file(FileFact fact, const std::string& path, std::string_view value) {
  if (FileObserver* o = file_observer()) o->observe(fact, path, value);
}
inline void observe_file_flag(FileFact fact, const std::string& path, bool value) {
  if (FileObserver* o = file_observer()) o->observe(fact, path, value ? "1" : "0");
}

}  // namespace orch
