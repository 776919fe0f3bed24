// The C API: thin wrappers over the C++ objects, with one rule for every argument.
//
// Handles are ids, never addresses: a registry maps each live handle to its object, and an id
// is never given out twice (64-bit serials), so a NULL, destroyed, foreign or made-up handle is
// recognized and never dereferenced: destroying twice does nothing, and using a destroyed
// handle is an error, not a crash. The registry holds shared owners, so an object a call is
// using stays alive until the call returns even if another thread destroys its handle.
// Nothing escapes the boundary: every exception becomes an orch_error (out of memory, at worst
// a preallocated one that needs no memory).
#include "orch/orch.h"

#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>

#include "artifact/artifact.h"
#include "artifact/expr_code.h"
#include "orch/runtime.h"
#include "runtime/src/binding_checks.h"
#include "runtime/src/internal.h"
#include "runtime/src/plan.h"

namespace orch {
// An artifact verified on the host, with its description (orch_artifact_*): no device involved.
struct ArtifactInfo {
  std::unique_ptr<uint64_t[]> storage;  // the bytes, 8-byte aligned
  const fb::Pipeline* fb = nullptr;     // points into storage
  std::string name;
  std::string description;  // JSON
};
}  // namespace orch

namespace {

enum class Kind : uintptr_t { Error = 1, Pipeline = 2, Bindings = 3, Executable = 4, Artifact = 5 };
constexpr uintptr_t kKindBits = 3;

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Error: return "orch_error";
    case Kind::Pipeline: return "orch_pipeline";
    case Kind::Bindings: return "orch_bindings";
    case Kind::Executable: return "orch_executable";
    case Kind::Artifact: return "orch_artifact";
  }
  return "orch handle";
}

template <class T>
struct KindOf;
template <>
struct KindOf<orch::Error> {
  static constexpr Kind value = Kind::Error;
};
template <>
struct KindOf<orch::Pipeline> {
  static constexpr Kind value = Kind::Pipeline;
};
template <>
struct KindOf<orch::Bindings> {
  static constexpr Kind value = Kind::Bindings;
};
template <>
struct KindOf<orch::Executable> {
  static constexpr Kind value = Kind::Executable;
};
template <>
struct KindOf<orch::ArtifactInfo> {
  static constexpr Kind value = Kind::Artifact;
};

// The out-of-memory error: a handle that is always live and never freed, for when even an
// error cannot be allocated. Serial 0, which the registry never hands out.
constexpr uintptr_t kOutOfMemoryHandle = static_cast<uintptr_t>(Kind::Error);
const orch::Error& out_of_memory_error() {
  static const orch::Error* e = new orch::Error(orch::ErrorCode::OutOfMemory, "out of memory");
  return *e;
}

class Registry {
 public:
  template <class T>
  uintptr_t add(std::shared_ptr<T> object) {  // may throw std::bad_alloc
    std::lock_guard<std::mutex> lock(mutex_);
    const uintptr_t handle = (++serial_ << kKindBits) | static_cast<uintptr_t>(KindOf<T>::value);
    objects_.emplace(handle, std::move(object));
    return handle;
  }

  // The live object of type T behind `handle`, or null.
  template <class T>
  std::shared_ptr<T> find(const void* handle) {
    const uintptr_t h = reinterpret_cast<uintptr_t>(handle);
    if ((h & ((uintptr_t(1) << kKindBits) - 1)) != static_cast<uintptr_t>(KindOf<T>::value)) return nullptr;
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = objects_.find(h);
    return it == objects_.end() ? nullptr : std::static_pointer_cast<T>(it->second);
  }

  // Drops a live handle of type T; false when it is none.
  template <class T>
  bool remove(const void* handle) {
    const uintptr_t h = reinterpret_cast<uintptr_t>(handle);
    if ((h & ((uintptr_t(1) << kKindBits) - 1)) != static_cast<uintptr_t>(KindOf<T>::value)) return false;
    std::shared_ptr<void> object;  // destroyed after the lock is released
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = objects_.find(h);
      if (it == objects_.end()) return false;
      object = std::move(it->second);
      objects_.erase(it);
    }
    return true;
  }

 private:
  std::mutex mutex_;
  uintptr_t serial_ = 0;
  std::unordered_map<uintptr_t, std::shared_ptr<void>> objects_;
};

// Never destroyed: handles the application still holds at exit stay valid until the end, and
// no destructor runs CUDA calls while the process is being torn down.
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

orch_error* as_error_handle(uintptr_t h) { return reinterpret_cast<orch_error*>(h); }

orch_error* oom() { return as_error_handle(kOutOfMemoryHandle); }

orch_error* wrap(const orch::Error& e) {
  if (e.ok()) return nullptr;
  try {
    return as_error_handle(registry().add(std::make_shared<orch::Error>(e)));
  } catch (...) {
    return oom();
  }
}
orch_error* wrap(const orch::Status& s) { return wrap(s.error()); }

orch_error* invalid(const char* function, const std::string& what) {
  try {
    return wrap(orch::Error(orch::ErrorCode::InvalidArgument, std::string(function) + ": " + what));
  } catch (...) {
    return oom();
  }
}

// The live object behind `handle`, or null with *error set: "`exec` is NULL" or "`exec` is not
// a live orch_executable (destroyed already, or never one)".
template <class T>
std::shared_ptr<T> need(const char* function, const char* arg, const void* handle, orch_error** error) {
  if (!handle) {
    *error = invalid(function, std::string("`") + arg + "` is NULL");
    return nullptr;
  }
  std::shared_ptr<T> object = registry().find<T>(handle);
  if (!object)
    *error = invalid(function, std::string("`") + arg + "` is not a live " + kind_name(KindOf<T>::value) +
                                   " (destroyed already, or never one)");
  return object;
}

// A live Error behind an orch_error handle (the preallocated one included), or null.
const orch::Error* error_of(const orch_error* e, std::shared_ptr<orch::Error>* keep) {
  if (reinterpret_cast<uintptr_t>(e) == kOutOfMemoryHandle) return &out_of_memory_error();
  *keep = registry().find<orch::Error>(e);
  return keep->get();
}

// Runs a call's body; anything thrown becomes the out-of-memory error (the only exception the
// runtime's own calls could let through is std::bad_alloc from building strings here).
template <class F>
orch_error* boundary(F&& f) noexcept {
  try {
    return f();
  } catch (...) {
    return oom();
  }
}

template <class T>
orch_error* set_param(const char* function, orch_executable* x, const char* name, T v) {
  return boundary([&]() -> orch_error* {
    orch_error* err = nullptr;
    auto exec = need<orch::Executable>(function, "exec", x, &err);
    if (!exec) return err;
    if (!name) return invalid(function, "`name` is NULL");
    return wrap(exec->set_param(name, v));
  });
}

template <class T>
orch_error* bind_param(const char* function, orch_bindings* b, const char* name, T v) {
  return boundary([&]() -> orch_error* {
    orch_error* err = nullptr;
    auto bindings = need<orch::Bindings>(function, "bindings", b, &err);
    if (!bindings) return err;
    if (!name) return invalid(function, "`name` is NULL");
    bindings->param(name, v);
    return bindings->incomplete() ? oom() : nullptr;
  });
}

// ---- the artifact's description as JSON (the runtime links no JSON library) ----------------

void json_string(std::string& out, const char* s, size_t n) {
  static const char kHex[] = "0123456789abcdef";
  out += '"';
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7F) {
      out += "\\u00";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);  // UTF-8 passes through; a reader replaces invalid bytes
    }
  }
  out += '"';
}
void json_string(std::string& out, const std::string& s) { json_string(out, s.data(), s.size()); }
void json_string(std::string& out, const flatbuffers::String* s) {
  if (s) json_string(out, s->c_str(), s->size());
  else json_string(out, "", 0);
}

template <class T>
uint32_t count_of(const flatbuffers::Vector<T>* v) {
  return v ? v->size() : 0;
}

void json_strings(std::string& out, const flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>* v) {
  out += '[';
  for (uint32_t i = 0; i < count_of(v); ++i) {
    if (i) out += ", ";
    json_string(out, v->Get(i));
  }
  out += ']';
}

std::string type_name(orch::fb::ScalarType t) {
  if (static_cast<unsigned>(t) > static_cast<unsigned>(orch::fb::ScalarType::MAX))  // validate() refuses it
    return "type#" + std::to_string(static_cast<unsigned>(t));
  return orch::expr::to_string(orch::artifact::to_expr(t));
}

// Called on a pipeline open_pipeline() accepted, so every index and enum is in range.
std::string describe_json(const orch::fb::Pipeline& p) {
  namespace fb = orch::fb;
  std::string o = "{\"name\": ";
  json_string(o, p.name());
  o += ", \"compiler_version\": ";
  json_string(o, p.compiler_version());
  o += ", \"source_files\": ";
  json_strings(o, p.source_files());
  o += ", \"targets\": ";
  json_strings(o, p.targets());
  o += ",\n \"params\": [";
  for (uint32_t i = 0; i < count_of(p.params()); ++i) {
    const fb::Param* q = p.params()->Get(i);
    o += i ? ",\n  " : "\n  ";
    o += "{\"name\": ";
    json_string(o, q->name());
    o += ", \"type\": ";
    json_string(o, type_name(q->type()));
    o += ", \"default\": ";
    if (q->has_default()) json_string(o, orch::artifact::default_of(*q).to_string());
    else o += "null";
    o += ", \"where\": ";
    json_string(o, orch::rt::where(p, q->loc()));
    o += '}';
  }
  o += "],\n \"buffers\": [";
  // Which buffers the graphs write: the rule the overlap check uses (binding_checks.h), so a
  // binding layer refuses read-only memory for exactly these.
  const std::vector<bool> written = orch::rt::written_buffers(p);
  for (uint32_t i = 0; i < count_of(p.buffers()); ++i) {
    const fb::Buffer* b = p.buffers()->Get(i);
    o += i ? ",\n  " : "\n  ";
    o += "{\"name\": ";
    json_string(o, b->name());
    o += ", \"type\": ";
    json_string(o, type_name(b->type()));
    o += ", \"element_size\": " + std::to_string(orch::artifact::scalar_size(b->type()));
    o += ", \"count\": ";
    json_string(o, b->count() ? orch::artifact::expr_to_string(b->count(), p) : std::string("1"));
    o += std::string(", \"scalar\": ") + (b->count() ? "false" : "true");
    o += std::string(", \"host\": ") + (b->host() ? "true" : "false");
    o += std::string(", \"written\": ") + (i < written.size() && written[i] ? "true" : "false");
    o += ", \"where\": ";
    json_string(o, orch::rt::where(p, b->loc()));
    o += '}';
  }
  o += "],\n \"comms\": [";
  for (uint32_t i = 0; i < count_of(p.comms()); ++i) {
    o += i ? ", " : "";
    o += "{\"name\": ";
    json_string(o, p.comms()->Get(i)->name());
    o += '}';
  }
  o += "],\n \"graphs\": [";
  for (uint32_t i = 0; i < count_of(p.graphs()); ++i) {
    const fb::Graph* g = p.graphs()->Get(i);
    bool segment = p.segments() ? false : static_cast<int>(i) == p.main_graph();
    for (uint32_t k = 0; k < count_of(p.segments()); ++k) segment = segment || p.segments()->Get(k) == static_cast<int>(i);
    o += i ? ",\n  " : "\n  ";
    o += "{\"name\": ";
    json_string(o, g->name());
    o += std::string(", \"main\": ") + (static_cast<int>(i) == p.main_graph() ? "true" : "false");
    o += std::string(", \"device\": ") + (g->device() ? "true" : "false");
    o += ", \"family_size\": " + std::to_string(g->family_size());
    o += std::string(", \"segment\": ") + (segment ? "true" : "false");
    o += '}';
  }
  o += "],\n \"kernels\": [";
  for (uint32_t i = 0; i < count_of(p.kernels()); ++i) {
    const fb::Kernel* k = p.kernels()->Get(i);
    o += i ? ",\n  " : "\n  ";
    o += "{\"name\": ";
    json_string(o, k->name());
    o += ", \"archs\": [";
    for (uint32_t m = 0; m < count_of(k->images()); ++m) {
      if (m) o += ", ";
      json_string(o, k->images()->Get(m)->arch());
    }
    o += "], \"ptx_arch\": ";
    json_string(o, k->ptx_arch());
    o += std::string(", \"generated\": ") + (k->generated() ? "true" : "false");
    o += ", \"where\": ";
    json_string(o, orch::rt::where(p, k->loc()));
    o += '}';
  }
  o += "]}\n";
  return o;
}

// Verifies `size` bytes in `storage` and makes the artifact handle.
orch_error* open_artifact(std::unique_ptr<uint64_t[]> storage, size_t size, const std::string& prefix,
                          orch_artifact** out) {
  auto info = std::make_shared<orch::ArtifactInfo>();
  info->storage = std::move(storage);
  orch::artifact::OpenResult open =
      orch::artifact::open_pipeline(reinterpret_cast<const uint8_t*>(info->storage.get()), size);
  if (!open.ok()) return wrap(orch::Error(orch::ErrorCode::InvalidArtifact, prefix + open.error));
  info->fb = open.pipeline;
  info->name = open.pipeline->name()->str();
  info->description = describe_json(*open.pipeline);
  *out = reinterpret_cast<orch_artifact*>(registry().add(std::move(info)));
  return nullptr;
}

}  // namespace

extern "C" {

int orch_error_code(const orch_error* e) {
  if (!e) return ORCH_OK;
  try {
    std::shared_ptr<orch::Error> keep;
    const orch::Error* error = error_of(e, &keep);
    return error ? static_cast<int>(error->code()) : ORCH_ERROR_INVALID_ARGUMENT;
  } catch (...) {
    return ORCH_ERROR_INVALID_ARGUMENT;
  }
}

const char* orch_error_message(const orch_error* e) {
  if (!e) return "";
  try {
    std::shared_ptr<orch::Error> keep;
    const orch::Error* error = error_of(e, &keep);
    // The string lives in the registry's object until orch_error_destroy.
    return error ? error->message().c_str() : "not a live orch_error (destroyed already, or never one)";
  } catch (...) {
    return "";
  }
}

const char* orch_error_where(const orch_error* e) {
  if (!e) return "";
  try {
    std::shared_ptr<orch::Error> keep;
    const orch::Error* error = error_of(e, &keep);
    return error ? error->where().c_str() : "";
  } catch (...) {
    return "";
  }
}

int orch_error_cuda(const orch_error* e) {
  if (!e) return 0;
  try {
    std::shared_ptr<orch::Error> keep;
    const orch::Error* error = error_of(e, &keep);
    return error ? error->cuda_error() : 0;
  } catch (...) {
    return 0;
  }
}

void orch_error_destroy(orch_error* e) {
  if (reinterpret_cast<uintptr_t>(e) == kOutOfMemoryHandle) return;  // never freed
  try {
    (void)registry().remove<orch::Error>(e);
  } catch (...) {
  }
}

orch_error* orch_pipeline_load(const char* path, orch_pipeline** out) {
  return boundary([&]() -> orch_error* {
    if (out) *out = nullptr;
    if (!path) return invalid("orch_pipeline_load", "`path` is NULL");
    if (!out) return invalid("orch_pipeline_load", "`out` is NULL");
    auto r = orch::Pipeline::load(path);
    if (!r.ok()) return wrap(r.error());
    std::shared_ptr<orch::Pipeline> p(std::move(r.value()));
    *out = reinterpret_cast<orch_pipeline*>(registry().add(std::move(p)));
    return nullptr;
  });
}

orch_error* orch_pipeline_load_from_memory(const void* bytes, size_t size, orch_pipeline** out) {
  return boundary([&]() -> orch_error* {
    if (out) *out = nullptr;
    if (!bytes) return invalid("orch_pipeline_load_from_memory", "`bytes` is NULL");
    if (!out) return invalid("orch_pipeline_load_from_memory", "`out` is NULL");
    auto r = orch::Pipeline::load_from_memory(bytes, size);
    if (!r.ok()) return wrap(r.error());
    std::shared_ptr<orch::Pipeline> p(std::move(r.value()));
    *out = reinterpret_cast<orch_pipeline*>(registry().add(std::move(p)));
    return nullptr;
  });
}

const char* orch_pipeline_name(const orch_pipeline* p) {
  try {
    auto pipeline = registry().find<orch::Pipeline>(p);
    return pipeline ? pipeline->name().c_str() : "";  // lives as long as the pipeline
  } catch (...) {
    return "";
  }
}

const char* orch_pipeline_image(const orch_pipeline* p) {
  try {
    auto pipeline = registry().find<orch::Pipeline>(p);
    return pipeline ? pipeline->image().c_str() : "";  // lives as long as the pipeline
  } catch (...) {
    return "";
  }
}

int orch_pipeline_device(const orch_pipeline* p) {
  try {
    auto pipeline = registry().find<orch::Pipeline>(p);
    return pipeline ? pipeline->device() : -1;
  } catch (...) {
    return -1;
  }
}

void orch_pipeline_destroy(orch_pipeline* p) {
  try {
    (void)registry().remove<orch::Pipeline>(p);
  } catch (...) {
  }
}

orch_error* orch_artifact_open(const void* bytes, size_t size, orch_artifact** out) {
  return boundary([&]() -> orch_error* {
    if (out) *out = nullptr;
    if (!bytes) return invalid("orch_artifact_open", "`bytes` is NULL");
    if (!out) return invalid("orch_artifact_open", "`out` is NULL");
    // Checked before anything is allocated or read, as load_from_memory does.
    if (size > orch::artifact::kMaxFileSize)
      return wrap(orch::Error(orch::ErrorCode::InvalidArtifact,
                              "a pipeline of " + std::to_string(size) + " bytes is larger than any pipeline.bin can be (" +
                                  std::to_string(orch::artifact::kMaxFileSize) + " bytes)"));
    std::unique_ptr<uint64_t[]> storage(new (std::nothrow) uint64_t[size / 8 + 1]());
    if (!storage) return oom();
    if (size) std::memcpy(storage.get(), bytes, size);
    return open_artifact(std::move(storage), size, "", out);
  });
}

orch_error* orch_artifact_read(const char* path, orch_artifact** out) {
  return boundary([&]() -> orch_error* {
    if (out) *out = nullptr;
    if (!path) return invalid("orch_artifact_read", "`path` is NULL");
    if (!out) return invalid("orch_artifact_read", "`out` is NULL");
    orch::artifact::FileBytes file;
    std::string why;
    if (!orch::artifact::read_file(path, orch::artifact::kMaxFileSize, &file, &why))
      return wrap(orch::Error(why.rfind("out of memory", 0) == 0 ? orch::ErrorCode::OutOfMemory : orch::ErrorCode::Io,
                              std::string(path) + ": " + (why.empty() ? std::string("cannot read") : why)));
    return open_artifact(std::move(file.storage), file.size, std::string(path) + ": ", out);
  });
}

const char* orch_artifact_name(const orch_artifact* a) {
  try {
    auto info = registry().find<orch::ArtifactInfo>(a);
    return info ? info->name.c_str() : "";
  } catch (...) {
    return "";
  }
}

const char* orch_artifact_describe(const orch_artifact* a) {
  try {
    auto info = registry().find<orch::ArtifactInfo>(a);
    return info ? info->description.c_str() : "";
  } catch (...) {
    return "";
  }
}

orch_error* orch_artifact_check(const orch_artifact* a, const orch_bindings* b) {
  return boundary([&]() -> orch_error* {
    orch_error* err = nullptr;
    auto info = need<orch::ArtifactInfo>("orch_artifact_check", "artifact", a, &err);
    if (!info) return err;
    auto bindings = need<orch::Bindings>("orch_artifact_check", "bindings", b, &err);
    if (!bindings) return err;
    if (bindings->incomplete()) return oom();
    auto plan = orch::rt::make_plan(*info->fb, *bindings);
    return plan.ok() ? nullptr : wrap(plan.error());
  });
}

void orch_artifact_destroy(orch_artifact* a) {
  try {
    (void)registry().remove<orch::ArtifactInfo>(a);
  } catch (...) {
  }
}

orch_bindings* orch_bindings_create(void) {
  try {
    return reinterpret_cast<orch_bindings*>(registry().add(std::make_shared<orch::Bindings>()));
  } catch (...) {
    return nullptr;
  }
}

void orch_bindings_destroy(orch_bindings* b) {
  try {
    (void)registry().remove<orch::Bindings>(b);
  } catch (...) {
  }
}

orch_error* orch_bindings_param_u32(orch_bindings* b, const char* n, uint32_t v) {
  return bind_param("orch_bindings_param_u32", b, n, v);
}
orch_error* orch_bindings_param_i32(orch_bindings* b, const char* n, int32_t v) {
  return bind_param("orch_bindings_param_i32", b, n, v);
}
orch_error* orch_bindings_param_u64(orch_bindings* b, const char* n, uint64_t v) {
  return bind_param("orch_bindings_param_u64", b, n, v);
}
orch_error* orch_bindings_param_i64(orch_bindings* b, const char* n, int64_t v) {
  return bind_param("orch_bindings_param_i64", b, n, v);
}
orch_error* orch_bindings_param_f32(orch_bindings* b, const char* n, float v) {
  return bind_param("orch_bindings_param_f32", b, n, v);
}
orch_error* orch_bindings_param_f64(orch_bindings* b, const char* n, double v) {
  return bind_param("orch_bindings_param_f64", b, n, v);
}

orch_error* orch_bindings_buffer(orch_bindings* b, const char* n, void* ptr, size_t bytes) {
  return boundary([&]() -> orch_error* {
    orch_error* err = nullptr;
    auto bindings = need<orch::Bindings>("orch_bindings_buffer", "bindings", b, &err);
    if (!bindings) return err;
    if (!n) return invalid("orch_bindings_buffer", "`name` is NULL");
    bindings->buffer(n, ptr, bytes);  // the pointer itself is checked at orch_instantiate
    return bindings->incomplete() ? oom() : nullptr;
  });
}

orch_error* orch_bindings_allow_overlap(orch_bindings* b, const char* a, const char* c) {
  return boundary([&]() -> orch_error* {
    orch_error* err = nullptr;
    auto bindings = need<orch::Bindings>("orch_bindings_allow_overlap", "bindings", b, &err);
    if (!bindings) return err;
    if (!a || !c) return invalid("orch_bindings_allow_overlap", std::string("`") + (a ? "b" : "a") + "` is NULL");
    bindings->allow_overlap(a, c);
    return bindings->incomplete() ? oom() : nullptr;
  });
}

orch_error* orch_bindings_comm(orch_bindings* b, const char* n, void* comm, int rank, int world_size) {
  return boundary([&]() -> orch_error* {
    orch_error* err = nullptr;
    auto bindings = need<orch::Bindings>("orch_bindings_comm", "bindings", b, &err);
    if (!bindings) return err;
    if (!n) return invalid("orch_bindings_comm", "`name` is NULL");
    bindings->comm(n, comm, rank, world_size);  // the communicator is checked at orch_instantiate
    return bindings->incomplete() ? oom() : nullptr;
  });
}

orch_error* orch_bindings_comm_from_unique_id(orch_bindings* b, const char* n, const void* id, int rank,
                                              int world_size) {
  return boundary([&]() -> orch_error* {
    orch_error* err = nullptr;
    auto bindings = need<orch::Bindings>("orch_bindings_comm_from_unique_id", "bindings", b, &err);
    if (!bindings) return err;
    if (!n) return invalid("orch_bindings_comm_from_unique_id", "`name` is NULL");
    if (!id) return invalid("orch_bindings_comm_from_unique_id", "`unique_id` is NULL");
    bindings->comm_from_unique_id(n, id, rank, world_size);
    return bindings->incomplete() ? oom() : nullptr;
  });
}

orch_error* orch_nccl_unique_id(void* out) {
  return boundary([&]() -> orch_error* {
    if (!out) return invalid("orch_nccl_unique_id", "`out` is NULL");
    auto r = orch::nccl_unique_id();
    if (!r.ok()) return wrap(r.error());
    std::memcpy(out, r->data(), r->size());
    return nullptr;
  });
}

orch_error* orch_instantiate(const orch_pipeline* p, const orch_bindings* b, cudaStream_t stream,
                             orch_executable** out) {
  return boundary([&]() -> orch_error* {
    if (out) *out = nullptr;
    orch_error* err = nullptr;
    auto pipeline = need<orch::Pipeline>("orch_instantiate", "pipeline", p, &err);
    if (!pipeline) return err;
    auto bindings = need<orch::Bindings>("orch_instantiate", "bindings", b, &err);
    if (!bindings) return err;
    if (!out) return invalid("orch_instantiate", "`out` is NULL");
    auto r = pipeline->instantiate(*bindings, stream);
    if (!r.ok()) return wrap(r.error());
    std::shared_ptr<orch::Executable> x(std::move(r.value()));
    *out = reinterpret_cast<orch_executable*>(registry().add(std::move(x)));
    return nullptr;
  });
}

orch_error* orch_launch(orch_executable* x, cudaStream_t stream) {
  return boundary([&]() -> orch_error* {
    orch_error* err = nullptr;
    auto exec = need<orch::Executable>("orch_launch", "exec", x, &err);
    if (!exec) return err;
    return wrap(exec->launch(stream));
  });
}

orch_error* orch_device_status(const orch_executable* x) {
  return boundary([&]() -> orch_error* {
    orch_error* err = nullptr;
    auto exec = need<orch::Executable>("orch_device_status", "exec", x, &err);
    if (!exec) return err;
    return wrap(exec->device_status());
  });
}

orch_error* orch_clear_device_status(orch_executable* x) {
  return boundary([&]() -> orch_error* {
    orch_error* err = nullptr;
    auto exec = need<orch::Executable>("orch_clear_device_status", "exec", x, &err);
    if (!exec) return err;
    return wrap(exec->clear_device_status());
  });
}

orch_error* orch_set_param_u32(orch_executable* x, const char* n, uint32_t v) {
  return set_param("orch_set_param_u32", x, n, v);
}
orch_error* orch_set_param_i32(orch_executable* x, const char* n, int32_t v) {
  return set_param("orch_set_param_i32", x, n, v);
}
orch_error* orch_set_param_u64(orch_executable* x, const char* n, uint64_t v) {
  return set_param("orch_set_param_u64", x, n, v);
}
orch_error* orch_set_param_i64(orch_executable* x, const char* n, int64_t v) {
  return set_param("orch_set_param_i64", x, n, v);
}
orch_error* orch_set_param_f32(orch_executable* x, const char* n, float v) {
  return set_param("orch_set_param_f32", x, n, v);
}
orch_error* orch_set_param_f64(orch_executable* x, const char* n, double v) {
  return set_param("orch_set_param_f64", x, n, v);
}

orch_error* orch_rebind(orch_executable* x, const char* n, void* ptr, size_t bytes) {
  return boundary([&]() -> orch_error* {
    orch_error* err = nullptr;
    auto exec = need<orch::Executable>("orch_rebind", "exec", x, &err);
    if (!exec) return err;
    if (!n) return invalid("orch_rebind", "`name` is NULL");
    return wrap(exec->rebind(n, ptr, bytes));
  });
}

void* orch_executable_buffer(const orch_executable* x, const char* n) {
  try {
    auto exec = registry().find<orch::Executable>(x);
    return exec && n ? exec->buffer(n) : nullptr;
  } catch (...) {
    return nullptr;
  }
}

size_t orch_executable_buffer_bytes(const orch_executable* x, const char* n) {
  try {
    auto exec = registry().find<orch::Executable>(x);
    return exec && n ? exec->buffer_bytes(n) : 0;
  } catch (...) {
    return 0;
  }
}

orch_error* orch_executable_stats(const orch_executable* x, orch_stats* out) {
  return boundary([&]() -> orch_error* {
    if (out) *out = orch_stats{};
    orch_error* err = nullptr;
    auto exec = need<orch::Executable>("orch_executable_stats", "exec", x, &err);
    if (!exec) return err;
    if (!out) return invalid("orch_executable_stats", "`out` is NULL");
    const orch::Executable::Stats s = exec->stats();
    *out = orch_stats{s.nodes_patched_in_place, s.patches_refused, s.graph_updates, s.device_graph_uploads,
                      s.segments_rebuilt};
    return nullptr;
  });
}

void* orch_executable_comm(const orch_executable* x, const char* n) {
  try {
    auto exec = registry().find<orch::Executable>(x);
    return exec && n ? exec->comm(n) : nullptr;
  } catch (...) {
    return nullptr;
  }
}

int orch_executable_rank(const orch_executable* x) {
  try {
    auto exec = registry().find<orch::Executable>(x);
    return exec ? exec->rank() : -1;
  } catch (...) {
    return -1;
  }
}

int orch_executable_world_size(const orch_executable* x) {
  try {
    auto exec = registry().find<orch::Executable>(x);
    return exec ? exec->world_size() : -1;
  } catch (...) {
    return -1;
  }
}

void orch_executable_destroy(orch_executable* x) {
  try {
    (void)registry().remove<orch::Executable>(x);
  } catch (...) {
  }
}

orch_error* orch_stream_wait(cudaStream_t stream, cudaStream_t producer) {
  return boundary([&]() -> orch_error* {
    if (stream == producer) return nullptr;
    cudaEvent_t event = nullptr;
    cudaError_t e = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return wrap(e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice ? orch::rt::no_device_error(e)
                                                                              : orch::rt::cuda_error(e, "cudaEventCreate"));
    }
    e = cudaEventRecord(event, producer);
    const char* what = "cudaEventRecord on the producer's stream";
    if (e == cudaSuccess) {
      e = cudaStreamWaitEvent(stream, event, 0);
      what = "cudaStreamWaitEvent";
    }
    (void)cudaEventDestroy(event);  // released once the wait is done
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return wrap(orch::rt::cuda_error(e, what));
    }
    return nullptr;
  });
}

orch_error* orch_memory_info(const void* ptr, int* type, int* device) {
  return boundary([&]() -> orch_error* {
    if (type) *type = 0;
    if (device) *device = -1;
    if (!type) return invalid("orch_memory_info", "`type` is NULL");
    if (!device) return invalid("orch_memory_info", "`device` is NULL");
    cudaPointerAttributes attr{};
    cudaError_t e = cudaPointerGetAttributes(&attr, ptr);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return wrap(e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice
                      ? orch::rt::no_device_error(e)
                      : orch::rt::cuda_error(e, "cudaPointerGetAttributes"));
    }
    *type = static_cast<int>(attr.type);
    *device = attr.type == cudaMemoryTypeUnregistered ? -1 : attr.device;
    return nullptr;
  });
}

}  // extern "C"
