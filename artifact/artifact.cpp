// The envelope (wrap and open) and the atomic file write. The semantic checks live in
// validate*.cpp, the summary in describe.cpp.
#include "artifact/artifact.h"
#include "expr/expr.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

// Header-only xxHash: the implementation is compiled into this file with static linkage and
// prefixed names, so orch_artifact links no library (and cannot clash with a linked libxxhash).
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace orch::artifact {

namespace {

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

uint32_t get_u32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Verifier limits. Nesting: Pipeline > Op > KernelArg > Expr, and Pipeline > Op > body Graph: ops
// are one vector and nodes name theirs by index (format 4), so conditionals nested however deep
// add no depth here (validate() holds them to kMaxGraphDepth). The rest is slack.
constexpr flatbuffers::uoffset_t kVerifierMaxDepth = 32;

// Every table the verifier visits costs the file at least 8 bytes (its vtable offset and the
// offset that points at it) unless sub-tables are shared, and sharing is how a small file makes
// the verifier walk an exponential tree. Allow 4x the honest maximum.
flatbuffers::uoffset_t verifier_max_tables(size_t payload_size) {
  const uint64_t limit = payload_size / 2 + 1024;
  return limit > 0x7FFFFFFFu ? 0x7FFFFFFFu : static_cast<flatbuffers::uoffset_t>(limit);
}

}  // namespace

uint64_t xxh64(const void* data, size_t size) { return XXH64(data, size, 0); }

std::string wrap_payload(const uint8_t* data, size_t size) {
  std::string out;
  out.reserve(kHeaderSize + size);
  out.append(kMagic, sizeof(kMagic));
  put_u32(out, kFormatVersion);
  put_u32(out, 0);  // header flags
  put_u64(out, size);
  put_u64(out, xxh64(data, size));
  if (size > 0) out.append(reinterpret_cast<const char*>(data), size);
  return out;
}

OpenResult open_pipeline(const uint8_t* data, size_t size) {
  OpenResult result;
  auto fail = [&](std::string message) {
    result.pipeline = nullptr;
    result.error = std::move(message);
    return result;
  };
  try {
    if (data == nullptr || size < kHeaderSize) {
      return fail("file too small to be an orch pipeline (" + std::to_string(size) +
                  " bytes; the header alone is " + std::to_string(kHeaderSize) + ")");
    }
    if (std::memcmp(data, kMagic, sizeof(kMagic)) != 0) {
      return fail("not an orch pipeline (bad magic)");
    }
    const uint32_t version = get_u32(data + 8);
    if (version != kFormatVersion) {
      return fail("pipeline.bin format version " + std::to_string(version) +
                  ", this runtime reads version " + std::to_string(kFormatVersion) +
                  "; recompile the pipeline with this orchc");
    }
    const uint32_t flags = get_u32(data + 12);
    if (flags != 0) {
      char hex[16];
      std::snprintf(hex, sizeof(hex), "0x%08x", flags);
      return fail(std::string("unsupported header flags ") + hex + " (format version " +
                  std::to_string(kFormatVersion) + " defines none)");
    }
    const uint64_t payload_size = get_u64(data + 16);
    const uint64_t actual = size - kHeaderSize;
    if (payload_size != actual) {
      return fail("payload size mismatch: the header says " + std::to_string(payload_size) +
                  " bytes, the file holds " + std::to_string(actual) +
                  " after the header (truncated or padded file)");
    }
    const uint8_t* payload = data + kHeaderSize;
    if (xxh64(payload, actual) != get_u64(data + 24)) {
      return fail("checksum mismatch: the file is corrupted");
    }
    if (actual >= FLATBUFFERS_MAX_BUFFER_SIZE) {
      return fail("payload of " + std::to_string(actual) +
                  " bytes exceeds the FlatBuffers limit of 2 GiB");
    }
    // FlatBuffers reads scalars in place; the verifier checks alignment relative to the payload,
    // so the payload itself must sit on an 8-byte boundary in memory.
    if (reinterpret_cast<uintptr_t>(payload) % kPayloadAlignment != 0) {
      return fail(
          "pipeline bytes must be 8-byte aligned in memory (load the file into aligned "
          "storage)");
    }
    if (actual < 8 || !fb::PipelineBufferHasIdentifier(payload)) {
      return fail("the payload is not an orch pipeline FlatBuffer (file identifier is not \"" +
                  std::string(fb::PipelineIdentifier()) + "\")");
    }
    flatbuffers::Verifier::Options options;
    options.max_depth = kVerifierMaxDepth;
    options.max_tables = verifier_max_tables(actual);
    options.check_alignment = true;
    flatbuffers::Verifier verifier(payload, actual, options);
    if (!fb::VerifyPipelineBuffer(verifier)) {
      return fail(
          "the payload is not a well-formed orch.fb.Pipeline (the FlatBuffers verifier "
          "rejected it: out-of-bounds offset, missing required field, or nested or "
          "shared too deeply)");
    }
    const fb::Pipeline* pipeline = fb::GetPipeline(payload);
    std::string error = validate(*pipeline, actual);
    if (!error.empty()) return fail(std::move(error));
    result.pipeline = pipeline;
    return result;
  } catch (const std::exception& e) {  // std::bad_alloc from building a message, at worst
    return fail(std::string("cannot open the pipeline: ") + e.what());
  }
}

size_t scalar_size(fb::ScalarType type) {
  const expr::ScalarType t = static_cast<expr::ScalarType>(type);  // one enum (expr_code.h)
  return expr::valid(t) ? expr::size_of(t) : 0;
}

const char* node_kind_name(NodeKind kind) {
  switch (kind) {
    case NodeKind::Kernel: return "Kernel";
    case NodeKind::Memcpy: return "Memcpy";
    case NodeKind::Memset: return "Memset";
    case NodeKind::Empty: return "Empty";
    case NodeKind::Conditional: return "Conditional";
    case NodeKind::Collective: return "Collective";
  }
  return "?";
}

// ---- atomic write ---------------------------------------------------------------------------

namespace {

std::string errno_text(const std::string& what, int err) {
  return what + ": " + std::strerror(err);
}

bool write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// What an st_mode is, for messages ("a directory"); "not a regular file" for anything else.
std::string file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// The file an output path names: itself, or where a symbolic link at it points (resolved in
// full, so a chain of links ends at the file). Empty, with *error set, if a link dangles.
std::string resolve_output(const std::string& path, std::string* error) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return path;
  char* real = ::realpath(path.c_str(), nullptr);
  if (!real) {
    *error = errno_text(path + " is a symbolic link that cannot be followed", errno);
    return "";
  }
  std::string out = real;
  std::free(real);
  return out;
}

}  // namespace

std::string output_path_problem(const std::string& path, const std::vector<std::string>& inputs) {
  if (path.empty()) return "cannot write a file with an empty name";
  if (path.back() == '/') return "cannot write " + path + ": the path names a directory";
  std::string error;
  const std::string target = resolve_output(path, &error);
  if (target.empty()) return "cannot write " + error;
  struct stat st {};
  if (::stat(target.c_str(), &st) != 0) {
    if (errno == ENOENT) return "";  // a new file
    return errno_text("cannot write " + path, errno);
  }
  if (!S_ISREG(st.st_mode))
    return "refusing to write " + path + ": it is " + file_kind(st.st_mode) +
           "; the output must be a regular file";
  for (const std::string& in : inputs) {
    struct stat is {};
    if (::stat(in.c_str(), &is) == 0 && is.st_dev == st.st_dev && is.st_ino == st.st_ino)
      return "refusing to write " + path + ": it is the input " + in +
             (in == path ? "" : " (the same file under another name)");
  }
  if (::access(target.c_str(), W_OK) != 0)
    return errno_text("cannot write " + path, errno);
  return "";
}

bool write_file_atomically(const std::string& path, const std::string& bytes, std::string* error,
                           const std::vector<std::string>& inputs) {
  auto fail = [&](const std::string& message) {
    if (error) *error = message;
    return false;
  };
  if (std::string problem = output_path_problem(path, inputs); !problem.empty()) return fail(problem);
  std::string resolve_error;
  const std::string target = resolve_output(path, &resolve_error);
  if (target.empty()) return fail("cannot write " + resolve_error);
  const size_t slash = target.rfind('/');
  const std::string dir =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : target.substr(0, slash));
  const std::string base = slash == std::string::npos ? target : target.substr(slash + 1);
  if (base.empty()) return fail("cannot write " + path + ": the path names a directory");

  // O_EXCL on a name unique to this process and call; open() applies the umask, unlike mkstemp.
  static std::atomic<unsigned> counter{0};
  std::string temp;
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    temp = (dir == "/" ? "" : dir) + "/." + base + ".tmp." + std::to_string(::getpid()) + "." +
           std::to_string(counter.fetch_add(1));
    fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) {
      return fail(errno_text("cannot create a temporary file in " + dir, errno));
    }
  }
  if (fd < 0) return fail("cannot create a temporary file in " + dir + ": every name is taken");

  auto abandon = [&](const std::string& message) {
    if (fd >= 0) ::close(fd);
    ::unlink(temp.c_str());
    return fail(message);
  };
  if (!write_all(fd, bytes.data(), bytes.size())) {
    return abandon(errno_text("cannot write " + temp, errno));
  }
  if (::fsync(fd) != 0) return abandon(errno_text("cannot sync " + temp, errno));
  const int closed = ::close(fd);
  fd = -1;
  if (closed != 0) return abandon(errno_text("cannot close " + temp, errno));
  // Checked again just before the rename: the destination may have changed while writing.
  if (std::string problem = output_path_problem(target, inputs); !problem.empty()) return abandon(problem);
  if (::rename(temp.c_str(), target.c_str()) != 0) {
    return abandon(errno_text("cannot rename " + temp + " to " + target, errno));
  }
  // Make the rename itself durable. A failure here leaves the new file in place, so it is not an
  // error the caller could act on.
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
  return true;
}

// ---- reading --------------------------------------------------------------------------------

namespace {

// Why a file of this st_mode is not read: "is a directory, not a file", ...
std::string not_readable(mode_t mode) {
  if (S_ISDIR(mode)) return "is a directory, not a file";
  const std::string kind = file_kind(mode);
  return kind.rfind("not ", 0) == 0 ? "is " + kind : "is " + kind + ", not a regular file";
}

// Aligned storage for `bytes` bytes and the rest of their last word, or null when memory runs
// out. Not cleared: read_file() zeroes what follows the bytes it read (clearing all of it first
// would write every byte twice).
std::unique_ptr<uint64_t[]> allocate_words(size_t bytes) {
  const size_t words = bytes / 8 + 1;
  return std::unique_ptr<uint64_t[]>(new (std::nothrow) uint64_t[words]);
}

}  // namespace

bool read_file(const std::string& path, size_t max_size, FileBytes* out, std::string* error) {
  out->storage.reset();
  out->size = 0;
  auto fail = [&](const std::string& message) {
    out->storage.reset();
    out->size = 0;
    if (error) *error = message;
    return false;
  };
  try {
    // The kind first, from the name: opening a device can have effects, and a FIFO would
    // wait for a writer.
    struct stat st = {};
    if (::stat(path.c_str(), &st) != 0) return fail(errno_text("cannot open", errno));
    if (!S_ISREG(st.st_mode)) return fail(not_readable(st.st_mode));
    // O_NONBLOCK: should the name now be a FIFO (replaced since stat), open does not wait.
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) return fail(errno_text("cannot open", errno));
    struct Closer {
      int fd;
      ~Closer() { ::close(fd); }
    } closer{fd};
    if (::fstat(fd, &st) != 0) return fail(errno_text("cannot read", errno));
    if (!S_ISREG(st.st_mode)) return fail(not_readable(st.st_mode));
    const auto too_large = [&](uint64_t n) {
      return fail((n > max_size ? "is " + std::to_string(n) + " bytes" : std::string("grows while it is read")) +
                  ", larger than the " + std::to_string(max_size) + " bytes it may have");
    };
    if (st.st_size < 0) return fail("cannot read: negative size");
    if (static_cast<uint64_t>(st.st_size) > max_size) return too_large(static_cast<uint64_t>(st.st_size));
    // The size stat gives, and more if the file has more (some files report 0).
    size_t capacity = static_cast<size_t>(st.st_size) > 0 ? static_cast<size_t>(st.st_size) : 4096;
    if (capacity > max_size) capacity = max_size;
    std::unique_ptr<uint64_t[]> buf = allocate_words(capacity);
    if (!buf) return fail("out of memory: cannot hold " + std::to_string(capacity) + " bytes");
    size_t size = 0;
    for (;;) {
      if (size == capacity) {
        // Full: one more byte means the file is longer than stat said.
        char probe;
        ssize_t n;
        do n = ::read(fd, &probe, 1);
        while (n < 0 && errno == EINTR);
        if (n < 0) return fail(errno_text("cannot read", errno));
        if (n == 0) break;
        if (capacity >= max_size) return too_large(static_cast<uint64_t>(capacity) + 1);
        const size_t grown = capacity > max_size / 2 ? max_size : capacity * 2;
        std::unique_ptr<uint64_t[]> bigger = allocate_words(grown);
        if (!bigger) return fail("out of memory: cannot hold " + std::to_string(grown) + " bytes");
        std::memcpy(bigger.get(), buf.get(), size);
        reinterpret_cast<char*>(bigger.get())[size++] = probe;
        buf = std::move(bigger);
        capacity = grown;
        continue;
      }
      ssize_t n;
      do n = ::read(fd, reinterpret_cast<char*>(buf.get()) + size, capacity - size);
      while (n < 0 && errno == EINTR);
      if (n < 0) return fail(errno_text("cannot read", errno));
      if (n == 0) break;
      size += static_cast<size_t>(n);
    }
    // Zero from the end of the bytes to the end of the storage (capacity / 8 + 1 words).
    std::memset(reinterpret_cast<char*>(buf.get()) + size, 0, (capacity / 8 + 1) * 8 - size);
    out->storage = std::move(buf);
    out->size = size;
    return true;
  } catch (const std::exception&) {  // std::bad_alloc from a message
    out->storage.reset();
    out->size = 0;
    return false;
  }
}

}  // namespace orch::artifact
