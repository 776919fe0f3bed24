// orchc's artifact cache: a compile whose inputs have not changed writes the artifact (and
// prints the diagnostics) that the same compile stored earlier, without parsing, checking,
// lowering or touching NVRTC. Keyed like ccache's manifest mode:
//   - the key: the .orch file's bytes, its path as given and the working folder, every option
//     that can change the artifact or the report, the profile's path and bytes (--profile), the environment variables orchc or the CUDA
//     libraries may read (CUDA*, NV*, ORCH_* but the caches' places and size, LD_LIBRARY_PATH,
//     LD_PRELOAD), orchc itself (its build id and every shared library it has loaded) and the
//     NVRTC and nvJitLink it would load;
//   - the entry: every fact the compile learned from the file system (support/file_observer.h:
//     the files it read and their bytes, the paths it looked for and did not find, the CUDA
//     toolkit it found), checked again before a hit is used.
// An entry is one file, <dir>/<2 hex digits>/<key>.oac, written to a temporary name and renamed,
// with a checksum over all of it (XXH3-128) and the artifact's own envelope checksum checked on
// every read: anything damaged, truncated or written under another key is a miss. The folder is
// kept under a size limit by deleting the least recently used entries after each store.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "support/file_observer.h"

namespace orch::orchc {

// ORCH_ARTIFACT_CACHE_DIR; else $ORCH_CACHE_DIR/artifacts; else $XDG_CACHE_HOME/orch/artifacts;
// else ~/.cache/orch/artifacts. Empty when none of them can be formed.
std::string default_artifact_cache_dir();

// ORCH_ARTIFACT_CACHE_SIZE (bytes, with an optional K, M or G suffix); default 1 GiB.
uint64_t default_artifact_cache_limit();

// One fact a compile learned: what `fact` of `path` was (for Contents, the XXH3-128 of the bytes).
struct FileRecord {
  FileFact fact;
  std::string path;
  std::string value;
  bool operator==(const FileRecord& o) const { return fact == o.fact && path == o.path && value == o.value; }
};

// What `fact` of `path` is now, in the form FileRecord::value has.
std::string current_value(FileFact fact, const std::string& path);

// Collects the facts of one compile while installed as the process's file observer.
class Recording : public FileObserver {
 public:
  Recording();
  ~Recording() override;
  Recording(const Recording&) = delete;
  Recording& operator=(const Recording&) = delete;
  void observe(FileFact fact, const std::string& path, std::string_view value) override;
  // The facts, each once, sorted by path; false when one fact was seen with two values (a file
  // changed while it was compiled) or the compile read what it cannot name (FileFact::
  // Incomplete): such a compile is not stored.
  bool records(std::vector<FileRecord>* out) const;

 private:
  mutable std::mutex mutex_;
  std::vector<FileRecord> records_;
  bool consistent_ = true;
};

// What identifies one compile apart from the files it reads.
struct CacheKeyParts {
  std::string input;                 // the .orch path as given
  std::string_view input_bytes;      // its contents
  std::vector<std::string> options;  // "name=value" for every option that can change the result
  // orchc --profile FILE: the path as given and the file's bytes, so that a compile with another
  // or an edited profile is never answered with this one's entry (empty path: no profile).
  std::string profile = {};
  std::string_view profile_bytes = {};
};

// The key (32 hex digits); empty when the toolchain cannot be identified (then nothing is cached).
std::string cache_key(const CacheKeyParts& parts);

struct CacheHit {
  std::string artifact;             // pipeline.bin's bytes
  std::string report;               // the diagnostics as printed
  std::vector<std::string> inputs;  // the files the compile read (never to be overwritten)
};

class ArtifactCache {
 public:
  ArtifactCache(std::string dir, uint64_t limit_bytes) : dir_(std::move(dir)), limit_(limit_bytes) {}
  const std::string& dir() const { return dir_; }

  // The stored result for `key` if there is one, intact, whose every fact still holds.
  std::optional<CacheHit> lookup(const std::string& key) const;

  // Stores a successful compile's result; false (and nothing changed) when it cannot.
  bool store(const std::string& key, const std::vector<FileRecord>& records, const std::string& report,
             const std::string& artifact) const;

  // The entry's file for `key` (tests corrupt it).
  std::string entry_path(const std::string& key) const;

 private:
  void evict() const;
  std::string dir_;
  uint64_t limit_;
};

// Entry bytes and back (decode: nullopt for anything malformed or stored under another key).
std::string encode_entry(const std::string& key, const std::vector<FileRecord>& records, const std::string& report,
                         const std::string& artifact);
struct DecodedEntry {
  std::vector<FileRecord> records;
  std::string report;
  std::string artifact;
};
std::optional<DecodedEntry> decode_entry(const std::string& key, std::string_view bytes);

}  // namespace orch::orchc
