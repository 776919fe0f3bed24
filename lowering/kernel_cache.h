// The on-disk cache of compiled kernel images. One file per image (a CUBIN for one arch, or
// the PTX), named by a 128-bit content hash of everything that determines it. A file is
// trusted only if its magic, length, checksum and embedded key all check out; anything else
// is a miss. Writes go to a temporary file in the same folder and are renamed into place, so
// readers (other threads, other orchc processes) never see half a file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace orch {

// XXH3-128 of `data` as 32 lowercase hex digits.
std::string hash128_hex(std::string_view data);

// The envelope of a cache file, the kernel cache's here and orchc's artifact cache's
// (tools/orchc/artifact_cache.cpp): an 8-byte magic, a u32 version, a u32 0, the payload's size
// (u64), the payload, and hash128_hex of the payload, integers little-endian. The payload is
// written with put_cache_u64 and put_cache_string (a u64 size, then the bytes).
std::string seal_cache_envelope(std::string_view magic, uint32_t version, std::string_view payload);
// The payload of `bytes`, or nullopt unless the magic, version, size and checksum all hold.
std::optional<std::string_view> open_cache_envelope(std::string_view bytes, std::string_view magic, uint32_t version);
void put_cache_u64(std::string& out, uint64_t v);
void put_cache_string(std::string& out, std::string_view s);
// Read at `at`, advancing it; false where the bytes run out.
bool get_cache_u64(std::string_view bytes, size_t& at, uint64_t& out);
bool get_cache_string(std::string_view bytes, size_t& at, std::string& out);

// Builds a key from fields; each field is length-prefixed, so ("ab","c") != ("a","bc").
class KeyBuilder {
 public:
  KeyBuilder& add(std::string_view field);
  KeyBuilder& add(uint64_t value);
  std::string hex() const { return hash128_hex(buffer_); }

 private:
  std::string buffer_;
};

struct CacheEntry {
  std::string lowered_name;
  std::string log;
  std::string image;  // CUBIN or PTX bytes
};

// The file's bytes for `key` and back; decode returns nullopt for anything malformed, and
// for a well-formed file written under another key.
std::string encode_cache_entry(const std::string& key, const CacheEntry& entry);
std::optional<CacheEntry> decode_cache_entry(const std::string& key, std::string_view bytes);

// <dir>/<first two hex digits>/<key>.okc
std::string cache_entry_path(const std::string& dir, const std::string& key);
std::optional<CacheEntry> read_cache_entry(const std::string& dir, const std::string& key);
// False when the entry could not be written (the cache is an optimization: callers go on).
bool write_cache_entry(const std::string& dir, const std::string& key, const CacheEntry& entry);

// A fingerprint of the files that `code` #includes, transitively: each resolved path and a
// hash of its contents. Quoted names resolve against the including file's folder, then
// `include_dirs`; angle names against `include_dirs`. Files under `toolkit_include_dir` are
// left out (the NVRTC version in the key pins them), as are names that resolve nowhere
// (NVRTC's built-in headers). Where the files read cannot all be known (`#include MACRO` or
// `#include_next`, which only the preprocessor resolves; includes nested past 32 levels or past
// 4096 files), *incomplete says why: then nothing that depends on those files may be cached.
std::string include_fingerprint(const std::string& code, const std::string& file_name,
                                const std::vector<std::string>& include_dirs,
                                const std::string& toolkit_include_dir, std::string* incomplete);

}  // namespace orch
