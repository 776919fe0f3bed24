// orch's runtime: load a compiled pipeline (pipeline.bin), bind its params, buffers and
// communicators, build and instantiate its CUDA graphs, and launch them with one call.
//
//   auto pipeline = orch::Pipeline::load("jacobi.bin");          // verify, load kernels
//   if (!pipeline) { std::cerr << pipeline.error().to_string(); return 1; }
//   orch::Bindings b;
//   b.param("n", 4096u).buffer("u_host", ptr, bytes);
//   auto exec = (*pipeline)->instantiate(b, stream);             // build, instantiate, upload
//   exec.value()->launch(stream);                                // one call per run
//   exec.value()->set_param("tol", 1e-7f);                       // patched in place
//
// Depends on the CUDA runtime (linked statically) and nothing else; NCCL is not linked: a
// pipeline with collectives loads it at instantiate() (see docs/multi-gpu.md).
// Every failure is a value (Error), never an exception or an abort: bad input of any kind
// (a file, bytes, sizes, names, pointers), CUDA and NCCL failures, and host memory running out
// (OutOfMemory) are all returned. An error caused by a node or declaration names the .orch
// statement it came from (Error::where()). The one exception orch raises is BadResultAccess,
// from Result::value() on a Result that holds an error: a bug in the calling code (see Result).
//
// Memory the application binds is checked against what the CUDA driver knows of it: the bound
// size must lie inside one allocation (BufferTooSmall otherwise), a `host` buffer needs memory
// the CPU can address, and buffers must not overlap unless the pipeline only reads them or the
// application says so (Bindings::allow_overlap). docs/runtime.md states the whole contract.
//
// After a kernel faults (an illegal address, a trap, ...) the CUDA context is lost for the
// whole process: every later call fails with ContextLost, which says so; nothing recovers but
// a new process.
//
// Threads. A Pipeline is immutable once loaded: one Pipeline may be shared by any number of
// threads, and instantiate() may run on several threads at once. Bindings, Executable, Result
// and Error are plain objects with no internal locking: give each thread its own, or
// synchronize yourself. An Executable's methods (launch, set_param, rebind, buffer) must not
// run concurrently with each other; launches of one Executable are ordered by CUDA anyway (one
// executable graph runs one instance at a time). Two Executables of the same Pipeline are
// independent and may be used from different threads.
//
// Devices. A Pipeline is loaded for the device current at load(); instantiate and launch on
// that device (the runtime checks and refuses another one).
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace orch {

enum class ErrorCode {
  Ok = 0,
  InvalidArgument,   // a null pointer, a bad size, an Executable used wrongly
  Io,                // the file could not be read
  InvalidArtifact,   // the bytes are not a pipeline this runtime accepts (open_pipeline's line)
  NoDevice,          // no usable CUDA device or driver
  NoKernelImage,     // neither a CUBIN for this GPU nor PTX it can JIT
  Cuda,              // a CUDA call failed (cuda_error() holds the cudaError_t)
  UnknownName,       // a binding names no param, buffer or comm of the pipeline
  Unbound,           // a param without default, or a comm, was not bound
  InvalidValue,      // a value does not fit its type, or an expression cannot be evaluated
  BindCheckFailed,   // one of the pipeline's bind checks is false for the bound values
  BufferTooSmall,    // a bound buffer is smaller than its declared size
  Unsupported,       // the pipeline needs something this runtime cannot do yet
  Nccl,              // NCCL could not be loaded, or an NCCL call failed
  RankMismatch,      // ranks disagree: another rank runs a different pipeline, or failed
  OutOfMemory,       // host memory ran out (the call changed nothing)
  ContextLost,       // a sticky CUDA error: a kernel faulted, the process's CUDA context is unusable
  BuffersOverlap,    // two bound buffers overlap where the pipeline writes one of them
  DeviceError,       // a kernel orchc wrote met an error on the GPU (Executable::device_status)
  Nvshmem,           // NVSHMEM could not be loaded or started, or an NVSHMEM call failed
};

// The name of a code ("BindCheckFailed").
const char* error_code_name(ErrorCode code);


class Error {
 public:
  Error() = default;  // no error
  // A message is one line: control characters in it (a caller's name holding a newline, echoed
  // back) are written as escapes ("\n", "\x01").
  Error(ErrorCode code, std::string message, std::string where = {}, int cuda_error = 0)
      : code_(code), message_(one_line(std::move(message))), where_(one_line(std::move(where))),
        cuda_error_(cuda_error) {}

  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "jacobi.orch:27:5" when a node or declaration is involved, else empty.
  const std::string& where() const { return where_; }
  // The cudaError_t of a failed CUDA call (code() == Cuda, NoDevice or ContextLost), else 0.
  int cuda_error() const { return cuda_error_; }
  bool ok() const { return code_ == ErrorCode::Ok; }
  // "where: error: message" (or "error: message" without a location).
  std::string to_string() const;

 private:
  static std::string one_line(std::string s);
  ErrorCode code_ = ErrorCode::Ok;
  std::string message_;
  std::string where_;
  int cuda_error_ = 0;
};

// An error of a CUDA call the application made itself (a cudaError_t value), as orch reports
// its own: ContextLost with what that means (a kernel faulted; no later CUDA call in this process
// succeeds) for the sticky errors, else Cuda; `what` says which call.
Error cuda_error(int cuda_error, const std::string& what);


// Success, or an Error.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error e) : error_(std::move(e)) {}  // NOLINT: implicit on purpose
  bool ok() const { return error_.ok(); }
  explicit operator bool() const { return ok(); }
  const Error& error() const { return error_; }

 private:
  Error error_;
};

// Thrown by Result::value() (and by * and ->) on a Result that holds an error. Reading a value
// that is not there is a bug in the calling code, not a runtime condition, so it is loud rather
// than silent: the exception carries the Error the Result held, and uncaught it ends the program
// with that error's text. (std::expected::value() does the same.) Check ok() first. Built
// without exceptions (-fno-exceptions), the same misuse prints the text to stderr and calls
// std::abort(): a program without exceptions has no other way to stop before using a value it
// does not have.
class BadResultAccess : public std::logic_error {
 public:
  explicit BadResultAccess(const Error& e)
      : std::logic_error("orch::Result::value() called on an error: " + e.to_string()), error_(e) {}
  const Error& error() const noexcept { return error_; }

 private:
  Error error_;
};

// A value or an Error. value(), operator* and operator-> on a Result that holds an error throw
// BadResultAccess (above); error() never throws.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT
  Result(Error error) : v_(std::move(error)) {}  // NOLINT
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & {
    check();
    return *std::get_if<0>(&v_);
  }
  const T& value() const& {
    check();
    return *std::get_if<0>(&v_);
  }
  T&& value() && {
    check();
    return std::move(*std::get_if<0>(&v_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  // The error; an Ok Error when the Result holds a value.
  const Error& error() const {
    static const Error none;
    return ok() ? none : *std::get_if<1>(&v_);
  }

 private:
  void check() const {
    if (ok()) return;
#if defined(__cpp_exceptions) || defined(__EXCEPTIONS)
    throw BadResultAccess(*std::get_if<1>(&v_));
#else
    const Error& e = *std::get_if<1>(&v_);
    std::fprintf(stderr, "orch::Result::value() called on an error: %s\n", e.to_string().c_str());
    std::abort();
#endif
  }
  std::variant<T, Error> v_;
};

// A scalar as the application gave it; converted to the param's declared type (with a range
// check) when bound.
struct ScalarValue {
  enum class Kind : uint8_t { Int, Uint, Float } kind = Kind::Int;
  int64_t i = 0;
  uint64_t u = 0;
  double f = 0;

  template <class T>
  static ScalarValue of(T v) {
    static_assert(std::is_arithmetic_v<T>, "params are numbers");
    ScalarValue s;
    if constexpr (std::is_floating_point_v<T>) {
      s.kind = Kind::Float;
      s.f = static_cast<double>(v);
    } else if constexpr (std::is_signed_v<T>) {
      s.kind = Kind::Int;
      s.i = static_cast<int64_t>(v);
    } else {
      s.kind = Kind::Uint;
      s.u = static_cast<uint64_t>(v);
    }
    return s;
  }
};

// What the application binds. Names are checked against the pipeline at instantiate(): an
// unknown name is an error, so a typo never goes unnoticed. Binding a name again replaces it.
class Bindings {
 public:
  // A param by name: any integer or floating-point C++ type (u32, i32, u64, i64, f32, f64,
  // bool). The value must fit the param's declared type exactly (no silent truncation).
  template <class T>
  Bindings& param(std::string_view name, T value) {
    return set_param(name, ScalarValue::of(value));
  }
  Bindings& set_param(std::string_view name, ScalarValue value);

  // A buffer the application owns, `bytes` bytes from `device_ptr`: at least the declared count
  // times the element size, and inside one allocation the CUDA driver knows (cudaMalloc,
  // cudaMallocAsync, cudaMallocManaged, the virtual memory API, cudaHostAlloc, cudaHostRegister):
  // instantiate() asks the driver where the allocation ends and refuses a size past it. A `host`
  // buffer needs memory the CPU can address too (pinned, registered or managed; device memory
  // is refused). The memory must stay valid while an Executable uses it.
  Bindings& buffer(std::string_view name, void* device_ptr, size_t bytes);

  // Bound buffers must not overlap (BuffersOverlap), except two that the pipeline only reads.
  // This accepts an overlap of `a` and `b` (in either order) that the application intends,
  // e.g. an in-place update whose kernels are written for it. Names are checked at
  // instantiate().
  Bindings& allow_overlap(std::string_view a, std::string_view b);

  // An NCCL communicator the application made (an ncclComm_t, passed as void* so this header
  // needs no NCCL), with this process's rank and the world size. instantiate() asks the
  // communicator (ncclCommUserRank, ncclCommCount, ncclCommCuDevice) and refuses a rank or size
  // that differs, or a communicator of another device. `rank` and `world_size` in the
  // pipeline's expressions come from the bound communicator (its first comm, if it has more).
  // The communicator must outlive the Executable; orch never destroys it.
  Bindings& comm(std::string_view name, void* nccl_comm, int rank, int world_size);
  // The same, with rank and world size read from the communicator.
  Bindings& comm(std::string_view name, void* nccl_comm) { return comm(name, nccl_comm, -1, -1); }
  // Asks orch to make the communicator: instantiate() calls ncclCommInitRank with these 128
  // bytes (an ncclUniqueId, from orch::nccl_unique_id() on one rank, shared with the others),
  // and the Executable owns and destroys it. Every rank of the world must instantiate at once:
  // ncclCommInitRank waits for all of them. One id makes one communicator: a second instantiate
  // needs a fresh id (NCCL's bootstrap waits forever on a used one, NVIDIA/nccl#1038).
  Bindings& comm_from_unique_id(std::string_view name, const void* unique_id, int rank, int world_size);

  struct Param {
    std::string name;
    ScalarValue value;
  };
  struct Buffer {
    std::string name;
    void* ptr = nullptr;
    size_t bytes = 0;
  };
  struct Comm {
    std::string name;
    void* handle = nullptr;  // the application's ncclComm_t
    int rank = 0;            // -1 (with world_size -1): read from the communicator
    int world_size = 1;
    bool from_unique_id = false;  // orch makes the communicator from unique_id
    std::array<char, 128> unique_id{};
  };
  const std::vector<Param>& params() const { return params_; }
  const std::vector<Buffer>& buffers() const { return buffers_; }
  const std::vector<Comm>& comms() const { return comms_; }
  const std::vector<std::pair<std::string, std::string>>& allowed_overlaps() const { return overlaps_; }
  // True when host memory ran out while these bindings were being made: a binding was lost,
  // and instantiate() returns OutOfMemory rather than run without it.
  bool incomplete() const { return incomplete_; }

 private:
  std::vector<Param> params_;
  std::vector<Buffer> buffers_;
  std::vector<Comm> comms_;
  std::vector<std::pair<std::string, std::string>> overlaps_;
  bool incomplete_ = false;
};

class Executable;

// The bytes of a fresh ncclUniqueId (ncclGetUniqueId), for Bindings::comm_from_unique_id: one
// rank makes it and sends it to the others (a file, a socket, MPI_Bcast). Loads NCCL, so an
// application needs neither NCCL's header nor its library at link time.
Result<std::array<char, 128>> nccl_unique_id();
// The NCCL orch loads ($ORCH_NCCL_LIBRARY, else libnccl.so.2, else libnccl.so): "2.28.9 from
// libnccl.so.2", or why it cannot be loaded.
Result<std::string> nccl_version();

struct LoadOptions {
  // Ignore the CUBINs and JIT-compile the PTX (what a GPU newer than every image gets).
  bool force_ptx = false;
};

// A loaded pipeline: the verified artifact and its kernels, loaded for the current device.
class Pipeline {
 public:
  // Reads the file, verifies it (artifact::open_pipeline), picks the CUBIN whose arch equals
  // the current device's (sm_90 on an H100) or JIT-compiles the PTX, and loads the kernels.
  // Only a regular file is read: a directory, FIFO, socket or device is an Io error (a FIFO is
  // never opened for reading, so nothing blocks), as is a file larger than
  // artifact::kMaxFileSize. A PTX that does not compile is a Cuda error whose message holds
  // the JIT compiler's log.
  static Result<std::unique_ptr<Pipeline>> load(const std::string& path, LoadOptions options = {});
  // The same from bytes in memory; they are copied, so the caller may free them afterwards.
  // `size` is checked before anything is allocated or read: more than artifact::kMaxFileSize
  // is InvalidArtifact, null `bytes` InvalidArgument.
  static Result<std::unique_ptr<Pipeline>> load_from_memory(const void* bytes, size_t size,
                                                            LoadOptions options = {});
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // Resolves params (bound, else the default), runs every bind check, sizes the buffers,
  // allocates the unbound ones (zero-filled), builds every graph with explicit node calls,
  // instantiates device graphs (and each member of a family) for device launch, then the
  // segments, and uploads them on `stream`. Returns once `stream` has finished the uploads.
  // With collectives: loads NCCL, makes or checks the communicators, compares the pipeline's
  // collective hash with every other rank (RankMismatch when one runs a different pipeline or
  // fails to instantiate), and records each collective into a child graph node by stream
  // capture. Every rank of a communicator must call instantiate() at the same time. Refused
  // (Unsupported) before anything touches `stream` when `stream` is being captured.
  // With NVSHMEM (symmetric buffers, kernels that call it): starts NVSHMEM over the
  // communicator (PE r is rank r; one start per process, shared by its Executables; or the
  // application's own NVSHMEM), then allocates the symmetric buffers from its heap. Both are
  // collective, and so is freeing them: every rank destroys such Executables in the same order
  // (docs/multi-gpu.md, "NVSHMEM").
  Result<std::unique_ptr<Executable>> instantiate(const Bindings& bindings, cudaStream_t stream) const;

  const std::string& name() const;
  // What was loaded: "sm_90 CUBIN" or "compute_90 PTX (JIT)".
  const std::string& image() const;
  int device() const;

  struct Impl;

 private:
  explicit Pipeline(std::shared_ptr<const Impl> impl);
  static Result<std::unique_ptr<Pipeline>> load_storage(std::unique_ptr<uint64_t[]> storage, size_t size,
                                                        LoadOptions options);
  std::shared_ptr<const Impl> impl_;
};

// An instantiated pipeline: owns its executable graphs, conditional handles (with their
// graphs), device-launch exec tables and the buffers the runtime allocated. It keeps the
// kernels loaded, so it may outlive its Pipeline. Destroying it while a launch is still running
// on the GPU is safe: the destructor first waits for the last launch to finish (so the memory
// it frees is no longer in use); a launch that never finishes therefore blocks the destructor,
// and the only way to stop a kernel that hangs is to end the process (see docs/runtime.md,
// "Watchdogs"). Destroying it while another thread is inside one of its methods is a data race.
class Executable {
 public:
  ~Executable();
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;

  // Launches the segments in order on `stream` (re-uploading device graphs that set_param or
  // rebind changed first). Asynchronous, like cudaGraphLaunch: errors on the GPU show up in
  // device_status() once the stream has finished. Refused (Unsupported) before anything touches
  // the stream when `stream` is being captured (cudaStreamBeginCapture): a graph launch cannot
  // be captured, and the application's capture stays intact.
  Status launch(cudaStream_t stream);

  // Device-side errors. Work launched from the GPU cannot return an error to the host: a
  // device-side cudaGraphLaunch that fails (the graph is still running, too many pending
  // launches) tells only the launching thread, and the launched work is simply missing. The
  // kernels orchc writes (the launchers of `launch` statements, and expression evaluation)
  // report such errors in a small record in device memory that this Executable owns: the first
  // error wins, later ones are only counted. Call device_status() after the stream that ran
  // launch() has finished (cudaStreamSynchronize): it copies the record to the host and returns
  // DeviceError naming the statement (where(): its .orch place), what went wrong and how many
  // reports there were, or Ok. The record keeps the error until clear_device_status(). A user
  // kernel's own cudaGraphLaunch is not covered: check its return value there.
  Status device_status() const;
  Status clear_device_status();

  // Changes a param and patches every node whose values depend on it in place
  // (cudaGraphExec*SetParams, in conditional bodies and device graphs too), falling back to
  // cudaGraphExecUpdate only where a patch is refused. Bind checks run again, and buffer sizes
  // are re-evaluated: a runtime-allocated buffer cannot grow (instantiate again for that), and
  // a bound one must still be large enough (and not overlap another). Takes effect at the next
  // launch. On error nothing changes: the graphs, param_as_double() and stats() keep their old
  // values (a patch CUDA accepted is undone; where even the undo fails, the Executable refuses
  // every later launch, set_param and rebind rather than run a half-patched graph). Do not call
  // while a launch of this Executable may be running on the GPU if the patch must not race with
  // it (CUDA's rule: patches affect future launches only).
  template <class T>
  Status set_param(std::string_view name, T value) {
    return set_param_value(name, ScalarValue::of(value));
  }
  Status set_param_value(std::string_view name, ScalarValue value);

  // Points buffer `name` at other memory (checked as Bindings::buffer checks it, overlaps with
  // the other buffers included) and patches every node that uses it; on error nothing changes.
  // A buffer the runtime had allocated is freed; the new one stays the application's.
  Status rebind(std::string_view name, void* device_ptr, size_t bytes);

  // The pointer of a buffer (runtime-allocated or bound). For a `host` buffer, the host
  // pointer, which the CPU may read and write (and which is also its device address under
  // unified addressing); never a device-only pointer. nullptr for an unknown name. A buffer the
  // memory plan put in the arena holds its data only while a launch uses it: after the launch
  // its bytes may be another buffer's (declare it `keep`, or bind it, to read it afterwards).
  void* buffer(std::string_view name) const;
  // Bytes of the buffer as declared (count times element size), 0 for an unknown name.
  size_t buffer_bytes(std::string_view name) const;

  // The params' current values, for tests and tools (as f64 / i64).
  Result<double> param_as_double(std::string_view name) const;

  // The ncclComm_t in use for comm `name` (the bound one, or the one orch made), nullptr for
  // an unknown name or an unbound comm. An application may run its own NCCL calls on it.
  void* comm(std::string_view name) const;
  // This process's rank and the world size (0 and 1 for a pipeline without comms).
  int rank() const;
  int world_size() const;

  // What set_param and rebind did so far: nodes patched in place (cudaGraphExec*SetParams),
  // patches CUDA refused, whole-graph cudaGraphExecUpdate fallbacks, device-graph re-uploads,
  // and segments built and instantiated again because a collective in them changed (NCCL's
  // work is recorded by capture, so a new size or buffer means a new capture).
  struct Stats {
    size_t nodes_patched_in_place = 0;
    size_t patches_refused = 0;
    size_t graph_updates = 0;
    size_t device_graph_uploads = 0;
    size_t segments_rebuilt = 0;
    // instantiate(): the programmatic edges of the artifact made, and those made full instead
    // because one of their launches, with the bound params on this GPU, runs in more than one
    // wave (orchc decided at the params' defaults on the arch's largest device).
    size_t programmatic_edges = 0;
    size_t programmatic_edges_made_full = 0;
  };
  Stats stats() const;

  // Device memory the runtime allocated for the buffers the application did not bind. Buffers
  // that the memory plan lets share (docs/performance.md, "Memory: the memory plan") live in one arena:
  // arena_bytes for arena_buffers buffers that would take arena_buffer_bytes allocated one by
  // one. device_bytes is all of it, the arena counted once (host buffers not included).
  struct MemoryUse {
    size_t device_bytes = 0;
    size_t arena_bytes = 0;
    size_t arena_buffers = 0;
    size_t arena_buffer_bytes = 0;
  };
  MemoryUse memory_use() const;

  // Where instantiate() spent its time, in seconds of the host clock: building the graphs
  // (evaluating every node and adding it with the explicit node calls, conditional handles and
  // captured collectives included), cudaGraphInstantiate, and the uploads (cudaGraphUpload of
  // every graph, then waiting for them). The rest of instantiate() (bindings, buffers,
  // communicators) is what remains of its whole time. orch-run --timing prints them.
  struct InstantiateTimes {
    double build_s = 0;
    double instantiate_s = 0;
    double upload_s = 0;
  };
  InstantiateTimes instantiate_times() const;

  struct Impl;
  explicit Executable(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace orch
