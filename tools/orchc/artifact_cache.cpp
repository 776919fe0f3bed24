#include "tools/orchc/artifact_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "artifact/artifact.h"
#include "lowering/kernel_cache.h"
#include "support/input_file.h"
#ifdef ORCH_LAZY_TOOLKIT
#include "tools/orchc/toolkit_libs.h"
#endif

namespace orch::orchc {

namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = {'O', 'R', 'C', 'H', 'A', 'R', 'T', 'C'};
constexpr uint32_t kEntryVersion = 1;  // in the envelope lowering/kernel_cache.h seals
constexpr size_t kMaxEntry = size_t{1} << 31;
// Files the cache reads back to compare: the largest a compile may read (kernel sources'
// includes are read up to 1 GiB by the kernel cache).
constexpr size_t kMaxCompared = size_t{1} << 30;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

uint64_t get_le(std::string_view bytes, size_t at, int width) {
  uint64_t v = 0;
  for (int i = 0; i < width; ++i) v |= uint64_t(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
  return v;
}

// The artifact's own envelope (artifact/artifact.h): magic, payload size and XXH64.
bool artifact_intact(std::string_view a) {
  namespace art = orch::artifact;
  if (a.size() < art::kHeaderSize || std::memcmp(a.data(), art::kMagic, sizeof art::kMagic) != 0) return false;
  if (get_le(a, 16, 8) != a.size() - art::kHeaderSize) return false;
  return art::xxh64(a.data() + art::kHeaderSize, a.size() - art::kHeaderSize) == get_le(a, 24, 8);
}

std::string identity_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return path + " absent";
  return path + " " + std::to_string(st.st_size) + " " + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec) + " " + std::to_string(st.st_ino) + " " + std::to_string(st.st_dev);
}

// orchc itself: the main program's GNU build id (or, without one, its file's identity) and the
// identity of every shared library loaded now (the C++ runtime, ANTLR, yaml-cpp, ...).
std::string self_identity() {
  struct State {
    std::string out;
    bool main_done = false;
  } state;
  ::dl_iterate_phdr(
      [](struct dl_phdr_info* info, size_t, void* data) -> int {
        State& s = *static_cast<State*>(data);
        if (!s.main_done) {
          s.main_done = true;
          std::string id;
          for (int i = 0; i < info->dlpi_phnum && id.empty(); ++i) {
            const ElfW(Phdr)& ph = info->dlpi_phdr[i];
            if (ph.p_type != PT_NOTE) continue;
            const char* p = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
            const char* end = p + ph.p_memsz;
            while (p + sizeof(ElfW(Nhdr)) <= end) {
              const auto* nh = reinterpret_cast<const ElfW(Nhdr)*>(p);
              const char* name = p + sizeof(ElfW(Nhdr));
              const char* desc = name + ((nh->n_namesz + 3) & ~3u);
              if (desc + nh->n_descsz > end) break;
              if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
                static const char hex[] = "0123456789abcdef";
                for (unsigned k = 0; k < nh->n_descsz; ++k) {
                  const unsigned char b = static_cast<unsigned char>(desc[k]);
                  id += hex[b >> 4];
                  id += hex[b & 15];
                }
                break;
              }
              p = desc + ((nh->n_descsz + 3) & ~3u);
            }
          }
          s.out += "build-id " + (id.empty() ? identity_of("/proc/self/exe") : id) + "\n";
          return 0;
        }
        if (info->dlpi_name && info->dlpi_name[0]) s.out += identity_of(info->dlpi_name) + "\n";
        return 0;
      },
      &state);
  return state.out;
}

bool write_atomically(const fs::path& final_path, const std::string& bytes) {
  static std::atomic<uint64_t> counter{0};
  const fs::path temp = final_path.parent_path() / ("." + final_path.filename().string() + ".tmp." +
                                                    std::to_string(::getpid()) + "." +
                                                    std::to_string(counter.fetch_add(1)));
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  const char* p = bytes.data();
  size_t left = bytes.size();
  bool ok = true;
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ok = false;
      break;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  ok = ::close(fd) == 0 && ok;
  if (ok) ok = ::rename(temp.c_str(), final_path.c_str()) == 0;
  if (!ok) ::unlink(temp.c_str());
  return ok;
}

}  // namespace

std::string default_artifact_cache_dir() {
  if (!env("ORCH_ARTIFACT_CACHE_DIR").empty()) return env("ORCH_ARTIFACT_CACHE_DIR");
  if (!env("ORCH_CACHE_DIR").empty()) return (fs::path(env("ORCH_CACHE_DIR")) / "artifacts").string();
  const std::string xdg = env("XDG_CACHE_HOME");
  if (!xdg.empty() && xdg.front() == '/') return (fs::path(xdg) / "orch" / "artifacts").string();
  const std::string home = env("HOME");
  if (!home.empty()) return (fs::path(home) / ".cache" / "orch" / "artifacts").string();
  return {};
}

uint64_t default_artifact_cache_limit() {
  constexpr uint64_t kDefault = uint64_t{1} << 30;
  const std::string v = env("ORCH_ARTIFACT_CACHE_SIZE");
  if (v.empty()) return kDefault;
  char* end = nullptr;
  errno = 0;
  const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
  if (errno != 0 || end == v.c_str()) return kDefault;
  const std::string unit = end;
  const uint64_t scale = unit.empty() ? 1
                         : unit == "K" || unit == "k" ? uint64_t{1} << 10
                         : unit == "M" || unit == "m" ? uint64_t{1} << 20
                         : unit == "G" || unit == "g" ? uint64_t{1} << 30
                                                      : 0;
  if (scale == 0 || n > UINT64_MAX / scale) return kDefault;
  return n * scale;
}

// ---- facts ----------------------------------------------------------------------------------

std::string current_value(FileFact fact, const std::string& path) {
  std::error_code ec;
  switch (fact) {
    case FileFact::Contents: {
      InputFile in = read_input_file(path, kMaxCompared);
      // A file no longer readable gets a value no hash can have.
      return in.status == InputFile::Status::Ok ? hash128_hex(in.text) : std::string("unreadable");
    }
    case FileFact::Readable:
      return read_input_file(path, kMaxCompared).status == InputFile::Status::Ok ? "1" : "0";
    case FileFact::RegularFile: return fs::is_regular_file(path, ec) ? "1" : "0";
    case FileFact::Directory: return fs::is_directory(path, ec) ? "1" : "0";
    case FileFact::Exists: return fs::exists(path, ec) ? "1" : "0";
    case FileFact::Canonical: {
      fs::path c = fs::weakly_canonical(path, ec);
      return ec ? path : c.string();
    }
    case FileFact::Incomplete: return "?";  // never stored (Recording::observe)
    case FileFact::SizeAndTime: {
      const uint64_t size = fs::file_size(path, ec);
      std::error_code ec2;
      const auto mtime = fs::last_write_time(path, ec2);
      const int64_t ticks = ec2 ? 0 : static_cast<int64_t>(mtime.time_since_epoch().count());
      return std::to_string(size) + " " + std::to_string(ticks);
    }
  }
  return "?";
}

Recording::Recording() { set_file_observer(this); }
Recording::~Recording() {
  if (file_observer() == this) set_file_observer(nullptr);
}

void Recording::observe(FileFact fact, const std::string& path, std::string_view value) {
  std::string v = fact == FileFact::Contents ? hash128_hex(value) : std::string(value);
  std::lock_guard<std::mutex> lock(mutex_);
  if (fact == FileFact::Incomplete) {  // what the compile read is not all known: store nothing
    consistent_ = false;
    return;
  }
  for (const FileRecord& r : records_)
    if (r.fact == fact && r.path == path) {
      if (r.value != v) consistent_ = false;
      return;
    }
  records_.push_back({fact, path, std::move(v)});
}

bool Recording::records(std::vector<FileRecord>* out) const {
  std::lock_guard<std::mutex> lock(mutex_);
  *out = records_;
  // Kernels compile in parallel, so the order seen varies: sorted, an entry's bytes do not.
  std::sort(out->begin(), out->end(), [](const FileRecord& a, const FileRecord& b) {
    return a.path != b.path ? a.path < b.path : a.fact < b.fact;
  });
  return consistent_;
}

// ---- keys and entries -----------------------------------------------------------------------

std::string cache_key(const CacheKeyParts& parts) {
  KeyBuilder key;
  key.add("orch artifact cache 1");
  key.add(self_identity());
#ifdef ORCH_LAZY_TOOLKIT
  for (ToolkitLib lib : {ToolkitLib::Nvrtc, ToolkitLib::NvJitLink}) {
    const std::string id = toolkit_library_identity(lib);
    if (id.empty()) return {};
    key.add(id);
  }
#endif
  char cwd[4096];
  if (!::getcwd(cwd, sizeof cwd)) return {};
  key.add(cwd);
  // The environment orchc and the CUDA libraries may read, sorted; not where the caches are
  // or how large they may grow, which does not change what a compile makes.
  std::vector<std::string> vars;
  for (char** e = environ; e && *e; ++e) {
    const std::string_view v = *e;
    bool cache_location = false;
    for (std::string_view name : {"ORCH_CACHE_DIR=", "ORCH_ARTIFACT_CACHE_DIR=", "ORCH_ARTIFACT_CACHE_SIZE="})
      cache_location |= v.substr(0, name.size()) == name;
    if (cache_location) continue;
    for (std::string_view prefix : {"CUDA", "NV", "ORCH_", "LD_LIBRARY_PATH=", "LD_PRELOAD="})
      if (v.substr(0, prefix.size()) == prefix) {
        vars.emplace_back(v);
        break;
      }
  }
  std::sort(vars.begin(), vars.end());
  key.add(uint64_t{vars.size()});
  for (const std::string& v : vars) key.add(v);
  key.add(parts.input);
  key.add(hash128_hex(parts.input_bytes));
  key.add(uint64_t{parts.options.size()});
  for (const std::string& o : parts.options) key.add(o);
  if (!parts.profile.empty()) {
    key.add("profile");
    key.add(parts.profile);
    key.add(hash128_hex(parts.profile_bytes));
  }
  return key.hex();
}

std::string encode_entry(const std::string& key, const std::vector<FileRecord>& records, const std::string& report,
                         const std::string& artifact) {
  std::string payload;
  put_cache_string(payload, key);
  put_cache_u64(payload, records.size());
  for (const FileRecord& r : records) {
    payload.push_back(static_cast<char>(r.fact));
    put_cache_string(payload, r.path);
    put_cache_string(payload, r.value);
  }
  put_cache_string(payload, report);
  put_cache_string(payload, artifact);
  return seal_cache_envelope(std::string_view(kMagic, sizeof kMagic), kEntryVersion, payload);
}

std::optional<DecodedEntry> decode_entry(const std::string& key, std::string_view bytes) {
  const std::optional<std::string_view> opened =
      open_cache_envelope(bytes, std::string_view(kMagic, sizeof kMagic), kEntryVersion);
  if (!opened) return std::nullopt;
  const std::string_view payload = *opened;
  size_t at = 0;
  std::string stored_key;
  if (!get_cache_string(payload, at, stored_key) || stored_key != key) return std::nullopt;
  uint64_t n = 0;
  if (!get_cache_u64(payload, at, n) || n > payload.size()) return std::nullopt;
  DecodedEntry entry;
  entry.records.reserve(n);
  for (uint64_t i = 0; i < n; ++i) {
    if (at >= payload.size()) return std::nullopt;
    const unsigned fact = static_cast<unsigned char>(payload[at++]);
    if (fact > static_cast<unsigned>(FileFact::SizeAndTime)) return std::nullopt;
    FileRecord r{static_cast<FileFact>(fact), {}, {}};
    if (!get_cache_string(payload, at, r.path) || !get_cache_string(payload, at, r.value)) return std::nullopt;
    entry.records.push_back(std::move(r));
  }
  if (!get_cache_string(payload, at, entry.report) || !get_cache_string(payload, at, entry.artifact) ||
      at != payload.size())
    return std::nullopt;
  if (!artifact_intact(entry.artifact)) return std::nullopt;
  return entry;
}

std::string ArtifactCache::entry_path(const std::string& key) const {
  return (fs::path(dir_) / key.substr(0, 2) / (key + ".oac")).string();
}

std::optional<CacheHit> ArtifactCache::lookup(const std::string& key) const {
  if (dir_.empty() || key.size() < 2) return std::nullopt;
  const std::string path = entry_path(key);
  InputFile in = read_input_file(path, kMaxEntry);
  if (in.status != InputFile::Status::Ok) return std::nullopt;
  std::optional<DecodedEntry> entry = decode_entry(key, in.text);
  if (!entry) return std::nullopt;
  CacheHit hit;
  for (const FileRecord& r : entry->records) {
    if (current_value(r.fact, r.path) != r.value) return std::nullopt;
    if (r.fact == FileFact::Contents) hit.inputs.push_back(r.path);
  }
  // Recently used: eviction goes by modification time.
  ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);
  hit.artifact = std::move(entry->artifact);
  hit.report = std::move(entry->report);
  return hit;
}

bool ArtifactCache::store(const std::string& key, const std::vector<FileRecord>& records, const std::string& report,
                          const std::string& artifact) const {
  if (dir_.empty() || key.size() < 2) return false;
  const fs::path path = entry_path(key);
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec) return false;
  if (!write_atomically(path, encode_entry(key, records, report, artifact))) return false;
  evict();
  return true;
}

// Deletes the least recently used entries until the folder holds at most 3/4 of the limit
// (so that it is not scanned again after every store), and temporary files an interrupted
// store left more than an hour ago.
void ArtifactCache::evict() const {
  struct Entry {
    std::string path;
    uint64_t bytes;
    int64_t mtime;
  };
  std::vector<Entry> entries;
  uint64_t total = 0;
  const int64_t now = static_cast<int64_t>(::time(nullptr));
  DIR* top = ::opendir(dir_.c_str());
  if (!top) return;
  while (dirent* d = ::readdir(top)) {
    const std::string sub = d->d_name;
    if (sub.size() != 2 || !std::isxdigit(static_cast<unsigned char>(sub[0])) ||
        !std::isxdigit(static_cast<unsigned char>(sub[1])))
      continue;
    const std::string subdir = dir_ + "/" + sub;
    DIR* dd = ::opendir(subdir.c_str());
    if (!dd) continue;
    while (dirent* f = ::readdir(dd)) {
      const std::string name = f->d_name;
      const bool entry = name.size() > 4 && name.compare(name.size() - 4, 4, ".oac") == 0 && name[0] != '.';
      const bool temp = name.size() > 1 && name[0] == '.' && name.find(".oac.tmp.") != std::string::npos;
      if (!entry && !temp) continue;
      const std::string p = subdir + "/" + name;
      struct stat st {};
      if (::lstat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      if (temp) {
        if (now - st.st_mtim.tv_sec > 3600) ::unlink(p.c_str());
        continue;
      }
      entries.push_back({p, static_cast<uint64_t>(st.st_size), static_cast<int64_t>(st.st_mtim.tv_sec)});
      total += static_cast<uint64_t>(st.st_size);
    }
    ::closedir(dd);
  }
  ::closedir(top);
  if (total <= limit_) return;
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.mtime < b.mtime; });
  for (const Entry& e : entries) {
    if (total <= limit_ / 4 * 3) break;
    if (::unlink(e.path.c_str()) == 0) total -= e.bytes;
  }
}

}  // namespace orch::orchc
