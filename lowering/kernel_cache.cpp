#include "lowering/kernel_cache.h"

#include "support/file_observer.h"
#include "support/input_file.h"

#include <unistd.h>
#include <xxhash.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <thread>

namespace orch {

namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = {'O', 'R', 'C', 'H', 'K', 'R', 'N', '1'};
// 2: the checksum is hash128_hex (seal_cache_envelope), no longer 16 raw bytes.
constexpr uint32_t kFormatVersion = 2;
constexpr size_t kEnvelopeHeader = 8 + 4 + 4 + 8;
constexpr size_t kEnvelopeChecksum = 32;  // hash128_hex
constexpr uint64_t kMaxFileSize = uint64_t(1) << 30;  // no real image comes near a GiB

uint64_t get_le(std::string_view bytes, size_t at, int width) {
  uint64_t v = 0;
  for (int i = 0; i < width; ++i) v |= uint64_t(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
  return v;
}
void put_le(std::string& out, uint64_t v, int width) {
  for (int i = 0; i < width; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// A regular file only, opened without blocking (support/input_file.h): a cache entry or a header
// that is a FIFO or a device is a miss, never a hang.
bool read_file(const fs::path& path, std::string& out) {
  InputFile in = read_regular_file(path.string(), kMaxFileSize);
  if (in.status != InputFile::Status::Ok) return false;
  out = std::move(in.text);
  return true;
}

// The names in `#include "x"` and `#include <x>` lines; `quoted` tells which form each was.
// The `#include`s of `code` (name, quoted); *computed set when one names no file literally
// (`#include MACRO`, `#include_next`), which the fingerprint cannot follow.
void scan_includes(const std::string& code, std::vector<std::pair<std::string, bool>>& out, bool* computed) {
  size_t pos = 0;
  while (pos < code.size()) {
    size_t end = code.find('\n', pos);
    if (end == std::string::npos) end = code.size();
    size_t i = pos;
    auto blank = [&](size_t k) { return k < end && (code[k] == ' ' || code[k] == '\t'); };
    while (blank(i)) ++i;
    if (i < end && code[i] == '#') {
      ++i;
      while (blank(i)) ++i;
      if (code.compare(i, 7, "include") == 0) {
        i += 7;
        if (code.compare(i, 5, "_next") == 0) *computed = true;
        while (blank(i)) ++i;
        if (i < end && (code[i] == '"' || code[i] == '<')) {
          char close = code[i] == '"' ? '"' : '>';
          size_t name_end = code.find(close, i + 1);
          if (name_end != std::string::npos && name_end < end)
            out.emplace_back(code.substr(i + 1, name_end - i - 1), close == '"');
          else
            *computed = true;
        } else if (i < end) {
          *computed = true;  // a macro that expands to the name
        }
      }
    }
    pos = end + 1;
  }
}

}  // namespace

std::string hash128_hex(std::string_view data) {
  XXH128_hash_t h = XXH3_128bits(data.data(), data.size());
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return buf;
}

KeyBuilder& KeyBuilder::add(std::string_view field) {
  put_cache_string(buffer_, field);
  return *this;
}

KeyBuilder& KeyBuilder::add(uint64_t value) {
  put_cache_u64(buffer_, value);
  return *this;
}

void put_cache_u64(std::string& out, uint64_t v) { put_le(out, v, 8); }

void put_cache_string(std::string& out, std::string_view s) {
  put_cache_u64(out, s.size());
  out.append(s.data(), s.size());
}

bool get_cache_u64(std::string_view bytes, size_t& at, uint64_t& out) {
  if (at > bytes.size() || bytes.size() - at < 8) return false;
  out = get_le(bytes, at, 8);
  at += 8;
  return true;
}

bool get_cache_string(std::string_view bytes, size_t& at, std::string& out) {
  uint64_t n = 0;
  if (!get_cache_u64(bytes, at, n) || n > bytes.size() - at) return false;
  out.assign(bytes.data() + at, n);
  at += n;
  return true;
}

std::string seal_cache_envelope(std::string_view magic, uint32_t version, std::string_view payload) {
  std::string out(magic.substr(0, 8));
  out.resize(8, '\0');
  put_le(out, version, 4);
  put_le(out, 0, 4);
  put_le(out, payload.size(), 8);
  out.append(payload.data(), payload.size());
  out += hash128_hex(payload);
  return out;
}

std::optional<std::string_view> open_cache_envelope(std::string_view bytes, std::string_view magic, uint32_t version) {
  if (magic.size() != 8 || bytes.size() < kEnvelopeHeader + kEnvelopeChecksum) return std::nullopt;
  if (bytes.substr(0, 8) != magic) return std::nullopt;
  if (get_le(bytes, 8, 4) != version || get_le(bytes, 12, 4) != 0) return std::nullopt;
  const uint64_t size = get_le(bytes, 16, 8);
  if (size != bytes.size() - kEnvelopeHeader - kEnvelopeChecksum) return std::nullopt;
  const std::string_view payload = bytes.substr(kEnvelopeHeader, size);
  if (hash128_hex(payload) != bytes.substr(kEnvelopeHeader + size)) return std::nullopt;
  return payload;
}

std::string encode_cache_entry(const std::string& key, const CacheEntry& entry) {
  std::string payload;
  put_cache_string(payload, key);
  put_cache_string(payload, entry.lowered_name);
  put_cache_string(payload, entry.log);
  put_cache_string(payload, entry.image);
  return seal_cache_envelope(std::string_view(kMagic, sizeof kMagic), kFormatVersion, payload);
}

std::optional<CacheEntry> decode_cache_entry(const std::string& key, std::string_view bytes) {
  const std::optional<std::string_view> payload =
      open_cache_envelope(bytes, std::string_view(kMagic, sizeof kMagic), kFormatVersion);
  if (!payload) return std::nullopt;
  size_t at = 0;
  std::string stored_key;
  CacheEntry entry;
  if (!get_cache_string(*payload, at, stored_key) || !get_cache_string(*payload, at, entry.lowered_name) ||
      !get_cache_string(*payload, at, entry.log) || !get_cache_string(*payload, at, entry.image) ||
      at != payload->size())
    return std::nullopt;
  if (stored_key != key) return std::nullopt;
  return entry;
}

std::string cache_entry_path(const std::string& dir, const std::string& key) {
  return (fs::path(dir) / key.substr(0, 2) / (key + ".okc")).string();
}

std::optional<CacheEntry> read_cache_entry(const std::string& dir, const std::string& key) {
  std::string bytes;
  if (!read_file(cache_entry_path(dir, key), bytes)) return std::nullopt;
  return decode_cache_entry(key, bytes);
}

bool write_cache_entry(const std::string& dir, const std::string& key, const CacheEntry& entry) {
  fs::path final_path = cache_entry_path(dir, key);
  std::error_code ec;
  fs::create_directories(final_path.parent_path(), ec);
  if (ec) return false;
  // Unique per process, thread and call, so concurrent writers never share a temp file.
  static std::atomic<uint64_t> counter{0};
  char suffix[96];
  std::snprintf(suffix, sizeof suffix, ".tmp.%ld.%zx.%llu", static_cast<long>(::getpid()),
                std::hash<std::thread::id>()(std::this_thread::get_id()),
                static_cast<unsigned long long>(counter.fetch_add(1)));
  fs::path temp = final_path.parent_path() / ("." + key + suffix);
  std::string bytes = encode_cache_entry(key, entry);
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) return false;
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      fs::remove(temp, ec);
      return false;
    }
  }
  fs::rename(temp, final_path, ec);
  if (ec) {
    fs::remove(temp, ec);
    return false;
  }
  return true;
}

std::string include_fingerprint(const std::string& code, const std::string& file_name,
                                const std::vector<std::string>& include_dirs,
                                const std::string& toolkit_include_dir, std::string* incomplete) {
  incomplete->clear();
  KeyBuilder key;
  std::set<std::string> seen;
  std::error_code ec;
  fs::path toolkit =
      toolkit_include_dir.empty() ? fs::path() : fs::weakly_canonical(toolkit_include_dir, ec);
  auto under_toolkit = [&](const fs::path& p) {
    if (toolkit.empty()) return false;
    auto rel = p.lexically_relative(toolkit);
    return !rel.empty() && *rel.begin() != "..";
  };
  // Depth-first over the include graph; bounded so a pathological tree cannot stall us.
  std::function<void(const std::string&, const fs::path&, int)> visit =
      [&](const std::string& text, const fs::path& dir, int depth) {
        if (depth > 32 || seen.size() > 4096) {
          if (incomplete->empty())
            *incomplete = depth > 32 ? "includes nested deeper than 32 levels" : "more than 4096 included files";
          return;
        }
        std::vector<std::pair<std::string, bool>> names;
        bool computed = false;
        scan_includes(text, names, &computed);
        if (computed && incomplete->empty())
          *incomplete = "an #include whose file only the preprocessor knows (`#include MACRO`, `#include_next`)";
        for (const auto& [name, quoted] : names) {
          std::vector<fs::path> candidates;
          if (quoted) candidates.push_back(dir / name);
          for (const std::string& d : include_dirs) candidates.push_back(fs::path(d) / name);
          // Each look reported to the file observer (orchc's artifact cache replays a compile
          // only while the same includes resolve to the same bytes).
          for (const fs::path& c : candidates) {
            std::error_code e;
            if (!fs::is_regular_file(c, e)) {
              observe_file_flag(FileFact::RegularFile, c.string(), false);
              continue;
            }
            observe_file_flag(FileFact::RegularFile, c.string(), true);
            fs::path canonical = fs::weakly_canonical(c, e);
            if (e) canonical = c;
            observe_file(FileFact::Canonical, c.string(), canonical.string());
            if (under_toolkit(canonical)) break;
            if (!seen.insert(canonical.string()).second) break;
            std::string contents;
            key.add(canonical.string());
            if (read_file(canonical, contents)) {
              observe_file(FileFact::Contents, canonical.string(), contents);
              key.add(hash128_hex(contents));
              visit(contents, canonical.parent_path(), depth + 1);
            } else {
              observe_file_flag(FileFact::Readable, canonical.string(), false);
              key.add("<unreadable>");
            }
            break;
          }
        }
      };
  visit(code, fs::path(file_name).parent_path(), 0);
  return key.hex();
}

}  // namespace orch
