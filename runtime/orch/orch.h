/* orch's runtime as a C API, for other languages. The same calls as orch/runtime.h:
 *
 *   orch_pipeline* p; orch_error* err = orch_pipeline_load("saxpy.bin", &p);
 *   if (err) { fprintf(stderr, "%s\n", orch_error_message(err)); orch_error_destroy(err); }
 *   orch_bindings* b = orch_bindings_create();
 *   orch_bindings_param_u32(b, "n", 4096);
 *   orch_executable* x; err = orch_instantiate(p, b, stream, &x);
 *   err = orch_launch(x, stream);
 *
 * The rules, the same for every function:
 *  - Every call that can fail returns NULL on success or an orch_error the caller destroys
 *    with orch_error_destroy (ignoring one leaks it). Nothing is thrown or aborted.
 *  - Handles are checked, never trusted: a NULL handle, a destroyed one, or one of another
 *    type (an orch_bindings* cast to orch_executable*) is ORCH_ERROR_INVALID_ARGUMENT naming
 *    the function and the argument ("orch_launch: `exec` is not a live orch_executable
 *    (destroyed already, or never one)"). Handles are ids, not addresses, and an id is never
 *    reused, so a stale handle can never reach another object.
 *  - Every string and pointer orch reads (a name, a path, bytes, a unique id) and every `out`
 *    must be non-NULL, else ORCH_ERROR_INVALID_ARGUMENT. Pointers orch only hands to CUDA or
 *    NCCL (a bound buffer, a communicator) are checked by the call that uses them, as in C++.
 *  - An `out` argument that is not NULL is set to NULL (a struct: zeroed) first, so it is NULL
 *    after any error.
 *  - *_destroy accepts anything: NULL, a live handle (destroyed), and a handle destroyed
 *    already or never valid (nothing happens). Destroying twice is harmless.
 *  - Accessors that return a value, for a NULL or dead handle or a NULL name, return a neutral
 *    value: NULL pointers, "" strings (orch_error_message of a dead error says so instead),
 *    -1 for rank, world size and device, 0 for orch_error_cuda and sizes; orch_error_code
 *    returns ORCH_OK for NULL (no error) and ORCH_ERROR_INVALID_ARGUMENT for a dead handle.
 *  - Out of memory is ORCH_ERROR_OUT_OF_MEMORY (an orch_error that needs no memory itself);
 *    orch_bindings_create returns NULL then.
 * Threads: as in runtime.h. An orch_pipeline may be shared between threads; an orch_bindings
 * or orch_executable is used by one thread at a time. A handle destroyed by one thread while
 * another is inside a call with it stays alive until that call returns. */
#ifndef ORCH_ORCH_H
#define ORCH_ORCH_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct orch_pipeline orch_pipeline;
typedef struct orch_bindings orch_bindings;
typedef struct orch_executable orch_executable;
typedef struct orch_error orch_error;
typedef struct orch_artifact orch_artifact;

/* Error codes: the values of orch::ErrorCode. */
enum {
  ORCH_OK = 0,
  ORCH_ERROR_INVALID_ARGUMENT = 1,
  ORCH_ERROR_IO = 2,
  ORCH_ERROR_INVALID_ARTIFACT = 3,
  ORCH_ERROR_NO_DEVICE = 4,
  ORCH_ERROR_NO_KERNEL_IMAGE = 5,
  ORCH_ERROR_CUDA = 6,
  ORCH_ERROR_UNKNOWN_NAME = 7,
  ORCH_ERROR_UNBOUND = 8,
  ORCH_ERROR_INVALID_VALUE = 9,
  ORCH_ERROR_BIND_CHECK_FAILED = 10,
  ORCH_ERROR_BUFFER_TOO_SMALL = 11,
  ORCH_ERROR_UNSUPPORTED = 12,
  ORCH_ERROR_NCCL = 13,
  ORCH_ERROR_RANK_MISMATCH = 14,
  ORCH_ERROR_OUT_OF_MEMORY = 15,
  ORCH_ERROR_CONTEXT_LOST = 16,
  ORCH_ERROR_BUFFERS_OVERLAP = 17,
  ORCH_ERROR_DEVICE = 18  /* a kernel orchc wrote met an error on the GPU (orch_device_status) */
};

/* The size of an NCCL unique id (ncclUniqueId). */
#define ORCH_NCCL_UNIQUE_ID_BYTES 128

int orch_error_code(const orch_error* error);
/* The message alone, and "file:line:col" (empty when no statement is involved). */
const char* orch_error_message(const orch_error* error);
const char* orch_error_where(const orch_error* error);
/* The cudaError_t of a failed CUDA call, else 0. */
int orch_error_cuda(const orch_error* error);
void orch_error_destroy(orch_error* error);

orch_error* orch_pipeline_load(const char* path, orch_pipeline** out);
/* The bytes are copied. */
orch_error* orch_pipeline_load_from_memory(const void* bytes, size_t size, orch_pipeline** out);
const char* orch_pipeline_name(const orch_pipeline* pipeline);
/* What was loaded ("sm_90 CUBIN", Pipeline::image) and the CUDA device it was loaded for (-1 for
 * a dead handle). */
const char* orch_pipeline_image(const orch_pipeline* pipeline);
int orch_pipeline_device(const orch_pipeline* pipeline);
void orch_pipeline_destroy(orch_pipeline* pipeline);

/* An artifact verified and described without a GPU (nothing is loaded on a device): for tools and
 * language bindings that show a pipeline's params, buffers, comms and graphs before, or without,
 * running it. Verified as orch_pipeline_load verifies (ORCH_ERROR_INVALID_ARTIFACT, ORCH_ERROR_IO).
 * The bytes are copied. */
orch_error* orch_artifact_open(const void* bytes, size_t size, orch_artifact** out);
orch_error* orch_artifact_read(const char* path, orch_artifact** out);
const char* orch_artifact_name(const orch_artifact* artifact);
/* The description as one JSON object, owned by the artifact (lives until it is destroyed):
 *   {"name", "compiler_version", "source_files": [..], "targets": [..],
 *    "params":  [{"name", "type", "default" (text, or null), "where"}],
 *    "buffers": [{"name", "type", "element_size", "count" (an expression's text, "1" for a
 *                 scalar), "scalar", "host", "where"}],
 *    "comms":   [{"name"}],
 *    "graphs":  [{"name", "main", "device", "family_size", "segment"}],
 *    "kernels": [{"name", "archs": [..], "ptx_arch", "generated", "where"}]}
 * Types are the language's names ("f32"); "where" is "file:line:col" or "". */
const char* orch_artifact_describe(const orch_artifact* artifact);
/* Checks `bindings` against the pipeline as orch_instantiate does before it touches CUDA: param
 * names, types and ranges, unbound params and comms, the bind checks, and the bound buffers'
 * names and sizes (ORCH_ERROR_BUFFER_TOO_SMALL, naming the buffer's declaration). Pointers are
 * not looked at. Needs no GPU. */
orch_error* orch_artifact_check(const orch_artifact* artifact, const orch_bindings* bindings);
void orch_artifact_destroy(orch_artifact* artifact);

orch_bindings* orch_bindings_create(void);
void orch_bindings_destroy(orch_bindings* bindings);
/* The binding calls check their arguments now; the names and values against the pipeline are
 * checked at orch_instantiate, as in C++. */
orch_error* orch_bindings_param_u32(orch_bindings* b, const char* name, uint32_t value);
orch_error* orch_bindings_param_i32(orch_bindings* b, const char* name, int32_t value);
orch_error* orch_bindings_param_u64(orch_bindings* b, const char* name, uint64_t value);
orch_error* orch_bindings_param_i64(orch_bindings* b, const char* name, int64_t value);
orch_error* orch_bindings_param_f32(orch_bindings* b, const char* name, float value);
orch_error* orch_bindings_param_f64(orch_bindings* b, const char* name, double value);
/* Memory the application owns (Bindings::buffer: inside one allocation, host memory for a
 * `host` buffer). */
orch_error* orch_bindings_buffer(orch_bindings* b, const char* name, void* device_ptr, size_t bytes);
/* Accepts an overlap of buffers `a` and `b` (Bindings::allow_overlap). */
orch_error* orch_bindings_allow_overlap(orch_bindings* bindings, const char* a, const char* b);
/* An ncclComm_t the application made; rank and world_size are checked against it (pass -1 and -1
 * to take them from the communicator). */
orch_error* orch_bindings_comm(orch_bindings* b, const char* name, void* nccl_comm, int rank, int world_size);
/* orch makes the communicator at orch_instantiate (ncclCommInitRank) from the 128 bytes of a
 * unique id (orch_nccl_unique_id on one rank, shared with the others) and destroys it with the
 * executable. */
orch_error* orch_bindings_comm_from_unique_id(orch_bindings* b, const char* name, const void* unique_id, int rank,
                                              int world_size);
/* Writes a fresh NCCL unique id (ORCH_NCCL_UNIQUE_ID_BYTES bytes) to `out`. Loads NCCL. */
orch_error* orch_nccl_unique_id(void* out);

/* `bindings` is required (an empty orch_bindings_create() for none). */
orch_error* orch_instantiate(const orch_pipeline* pipeline, const orch_bindings* bindings, cudaStream_t stream,
                             orch_executable** out);
orch_error* orch_launch(orch_executable* exec, cudaStream_t stream);
/* After the launch stream has finished: the first error orchc's kernels met on the GPU (a device
 * graph launch that failed), ORCH_ERROR_DEVICE; kept until orch_clear_device_status. */
orch_error* orch_device_status(const orch_executable* exec);
orch_error* orch_clear_device_status(orch_executable* exec);
orch_error* orch_set_param_u32(orch_executable* exec, const char* name, uint32_t value);
orch_error* orch_set_param_i32(orch_executable* exec, const char* name, int32_t value);
orch_error* orch_set_param_u64(orch_executable* exec, const char* name, uint64_t value);
orch_error* orch_set_param_i64(orch_executable* exec, const char* name, int64_t value);
orch_error* orch_set_param_f32(orch_executable* exec, const char* name, float value);
orch_error* orch_set_param_f64(orch_executable* exec, const char* name, double value);
orch_error* orch_rebind(orch_executable* exec, const char* name, void* device_ptr, size_t bytes);
/* The pointer of a buffer (see Executable::buffer), NULL for an unknown name. */
void* orch_executable_buffer(const orch_executable* exec, const char* name);
/* Its size as declared (count times element size; Executable::buffer_bytes), 0 for an unknown
 * name. */
size_t orch_executable_buffer_bytes(const orch_executable* exec, const char* name);
/* What set_param and rebind did so far (Executable::Stats). */
typedef struct orch_stats {
  size_t nodes_patched_in_place;
  size_t patches_refused;
  size_t graph_updates;
  size_t device_graph_uploads;
  size_t segments_rebuilt;
} orch_stats;
/* `out` is zeroed first. */
orch_error* orch_executable_stats(const orch_executable* exec, orch_stats* out);
/* The ncclComm_t in use for comm `name`, NULL for an unknown or unbound name. */
void* orch_executable_comm(const orch_executable* exec, const char* name);
/* This process's rank and the world size (0 and 1 without comms; -1 for a dead handle). */
int orch_executable_rank(const orch_executable* exec);
int orch_executable_world_size(const orch_executable* exec);
/* Waits for the executable's last launch to finish, then frees it (see runtime.h). */
void orch_executable_destroy(orch_executable* exec);

/* Helpers for language bindings, which share memory and streams with other CUDA libraries. */
/* Makes `stream` wait for the work queued on `producer` so far (an event recorded on `producer`,
 * waited for on `stream`); nothing when they are the same stream. */
orch_error* orch_stream_wait(cudaStream_t stream, cudaStream_t producer);
/* What CUDA knows of the memory at `ptr` (cudaPointerGetAttributes): *type is a
 * cudaMemoryType (0 unregistered, 1 host, 2 device, 3 managed) and *device the device it
 * belongs to (-1 when none). Both outs are set first (to 0 and -1). */
orch_error* orch_memory_info(const void* ptr, int* type, int* device);

#ifdef __cplusplus
}
#endif

#endif /* ORCH_ORCH_H */
