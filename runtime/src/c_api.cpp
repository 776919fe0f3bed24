// The C API: thin wrappers that hold the C++ objects and turn Errors into orch_error*.
#include "orch/orch.h"

#include <cstring>
#include <new>

#include "orch/runtime.h"

struct orch_error {
  orch::Error error;
};
struct orch_pipeline {
  std::unique_ptr<orch::Pipeline> pipeline;
};
struct orch_bindings {
  orch::Bindings bindings;
};
struct orch_executable {
  std::unique_ptr<orch::Executable> exec;
};

namespace {

orch_error* wrap(const orch::Error& e) {
  if (e.ok()) return nullptr;
  return new (std::nothrow) orch_error{e};
}
orch_error* wrap(const orch::Status& s) { return wrap(s.error()); }
orch_error* invalid(const char* what) {
  return wrap(orch::Error(orch::ErrorCode::InvalidArgument, what));
}

template <class T>
orch_error* set_param(orch_executable* x, const char* name, T v) {
  if (!x || !name) return invalid("orch_set_param: null executable or name");
  return wrap(x->exec->set_param(name, v));
}

}  // namespace

extern "C" {

int orch_error_code(const orch_error* e) { return e ? static_cast<int>(e->error.code()) : ORCH_OK; }
const char* orch_error_message(const orch_error* e) { return e ? e->error.message().c_str() : ""; }
const char* orch_error_where(const orch_error* e) { return e ? e->error.where().c_str() : ""; }
int orch_error_cuda(const orch_error* e) { return e ? e->error.cuda_error() : 0; }
void orch_error_destroy(orch_error* e) { delete e; }

orch_error* orch_pipeline_load(const char* path, orch_pipeline** out) {
  if (!path || !out) return invalid("orch_pipeline_load: null path or out");
  *out = nullptr;
  auto r = orch::Pipeline::load(path);
  if (!r.ok()) return wrap(r.error());
  *out = new (std::nothrow) orch_pipeline{std::move(r.value())};
  return nullptr;
}

orch_error* orch_pipeline_load_from_memory(const void* bytes, size_t size, orch_pipeline** out) {
  if (!out) return invalid("orch_pipeline_load_from_memory: null out");
  *out = nullptr;
  auto r = orch::Pipeline::load_from_memory(bytes, size);
  if (!r.ok()) return wrap(r.error());
  *out = new (std::nothrow) orch_pipeline{std::move(r.value())};
  return nullptr;
}

const char* orch_pipeline_name(const orch_pipeline* p) { return p ? p->pipeline->name().c_str() : ""; }
void orch_pipeline_destroy(orch_pipeline* p) { delete p; }

orch_bindings* orch_bindings_create(void) { return new (std::nothrow) orch_bindings{}; }
void orch_bindings_destroy(orch_bindings* b) { delete b; }
void orch_bindings_param_u32(orch_bindings* b, const char* n, uint32_t v) { if (b && n) b->bindings.param(n, v); }
void orch_bindings_param_i32(orch_bindings* b, const char* n, int32_t v) { if (b && n) b->bindings.param(n, v); }
void orch_bindings_param_u64(orch_bindings* b, const char* n, uint64_t v) { if (b && n) b->bindings.param(n, v); }
void orch_bindings_param_i64(orch_bindings* b, const char* n, int64_t v) { if (b && n) b->bindings.param(n, v); }
void orch_bindings_param_f32(orch_bindings* b, const char* n, float v) { if (b && n) b->bindings.param(n, v); }
void orch_bindings_param_f64(orch_bindings* b, const char* n, double v) { if (b && n) b->bindings.param(n, v); }
void orch_bindings_buffer(orch_bindings* b, const char* n, void* ptr, size_t bytes) {
  if (b && n) b->bindings.buffer(n, ptr, bytes);
}
void orch_bindings_comm(orch_bindings* b, const char* n, void* comm, int rank, int world_size) {
  if (b && n) b->bindings.comm(n, comm, rank, world_size);
}
void orch_bindings_comm_from_unique_id(orch_bindings* b, const char* n, const void* id, int rank, int world_size) {
  if (b && n) b->bindings.comm_from_unique_id(n, id, rank, world_size);
}

orch_error* orch_nccl_unique_id(void* out) {
  if (!out) return invalid("orch_nccl_unique_id: null out");
  auto r = orch::nccl_unique_id();
  if (!r.ok()) return wrap(r.error());
  std::memcpy(out, r->data(), r->size());
  return nullptr;
}

orch_error* orch_instantiate(const orch_pipeline* p, const orch_bindings* b, cudaStream_t stream,
                             orch_executable** out) {
  if (!p || !out) return invalid("orch_instantiate: null pipeline or out");
  *out = nullptr;
  static const orch::Bindings none;
  auto r = p->pipeline->instantiate(b ? b->bindings : none, stream);
  if (!r.ok()) return wrap(r.error());
  *out = new (std::nothrow) orch_executable{std::move(r.value())};
  return nullptr;
}

orch_error* orch_launch(orch_executable* x, cudaStream_t stream) {
  if (!x) return invalid("orch_launch: null executable");
  return wrap(x->exec->launch(stream));
}

orch_error* orch_device_status(const orch_executable* x) {
  if (!x) return invalid("orch_device_status: null executable");
  return wrap(x->exec->device_status());
}

orch_error* orch_clear_device_status(orch_executable* x) {
  if (!x) return invalid("orch_clear_device_status: null executable");
  return wrap(x->exec->clear_device_status());
}

orch_error* orch_set_param_u32(orch_executable* x, const char* n, uint32_t v) { return set_param(x, n, v); }
orch_error* orch_set_param_i32(orch_executable* x, const char* n, int32_t v) { return set_param(x, n, v); }
orch_error* orch_set_param_u64(orch_executable* x, const char* n, uint64_t v) { return set_param(x, n, v); }
orch_error* orch_set_param_i64(orch_executable* x, const char* n, int64_t v) { return set_param(x, n, v); }
orch_error* orch_set_param_f32(orch_executable* x, const char* n, float v) { return set_param(x, n, v); }
orch_error* orch_set_param_f64(orch_executable* x, const char* n, double v) { return set_param(x, n, v); }

orch_error* orch_rebind(orch_executable* x, const char* n, void* ptr, size_t bytes) {
  if (!x || !n) return invalid("orch_rebind: null executable or name");
  return wrap(x->exec->rebind(n, ptr, bytes));
}

void* orch_executable_buffer(const orch_executable* x, const char* n) {
  return x && n ? x->exec->buffer(n) : nullptr;
}
void* orch_executable_comm(const orch_executable* x, const char* n) { return x && n ? x->exec->comm(n) : nullptr; }
int orch_executable_rank(const orch_executable* x) { return x ? x->exec->rank() : 0; }
int orch_executable_world_size(const orch_executable* x) { return x ? x->exec->world_size() : 1; }
void orch_executable_destroy(orch_executable* x) { delete x; }

}  // extern "C"
