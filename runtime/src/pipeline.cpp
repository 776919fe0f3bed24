// Errors, bindings, and Pipeline::load: verify the artifact, pick an image per kernel for the
// current device, load the images as CUDA libraries and look the kernels up.
#include <cstring>
#include <map>
#include <new>
#include <vector>

#include "runtime/src/driver.h"
#include "runtime/src/internal.h"
#include "runtime/src/nccl.h"

namespace orch {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::Ok: return "Ok";
    case ErrorCode::InvalidArgument: return "InvalidArgument";
    case ErrorCode::Io: return "Io";
    case ErrorCode::InvalidArtifact: return "InvalidArtifact";
    case ErrorCode::NoDevice: return "NoDevice";
    case ErrorCode::NoKernelImage: return "NoKernelImage";
    case ErrorCode::Cuda: return "Cuda";
    case ErrorCode::UnknownName: return "UnknownName";
    case ErrorCode::Unbound: return "Unbound";
    case ErrorCode::InvalidValue: return "InvalidValue";
    case ErrorCode::BindCheckFailed: return "BindCheckFailed";
    case ErrorCode::BufferTooSmall: return "BufferTooSmall";
    case ErrorCode::Unsupported: return "Unsupported";
    case ErrorCode::Nccl: return "Nccl";
    case ErrorCode::RankMismatch: return "RankMismatch";
    case ErrorCode::OutOfMemory: return "OutOfMemory";
    case ErrorCode::ContextLost: return "ContextLost";
    case ErrorCode::BuffersOverlap: return "BuffersOverlap";
    case ErrorCode::DeviceError: return "DeviceError";
    case ErrorCode::Nvshmem: return "Nvshmem";
  }
  return "Unknown";
}

std::string Error::one_line(std::string s) {
  bool clean = true;
  for (char c : s) clean = clean && !(static_cast<unsigned char>(c) < 0x20 || c == 0x7f);
  if (clean) return s;
  static const char* const kHex = "0123456789abcdef";
  std::string out;
  out.reserve(s.size() + 8);
  for (char c : s) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (u < 0x20 || u == 0x7f) out += std::string("\\x") + kHex[u >> 4] + kHex[u & 15];
    else out += c;
  }
  return out;
}

std::string Error::to_string() const {
  if (ok()) return "ok";
  return (where_.empty() ? std::string() : where_ + ": ") + "error: " + message_;
}

// The setters cannot return an error: running out of memory marks the bindings incomplete,
// which instantiate() reports.
Bindings& Bindings::set_param(std::string_view name, ScalarValue value) {
  try {
    for (Param& p : params_)
      if (p.name == name) {
        p.value = value;
        return *this;
      }
    params_.push_back({std::string(name), value});
  } catch (const std::exception&) {
    incomplete_ = true;
  }
  return *this;
}

Bindings& Bindings::buffer(std::string_view name, void* device_ptr, size_t bytes) {
  try {
    for (Buffer& b : buffers_)
      if (b.name == name) {
        b.ptr = device_ptr;
        b.bytes = bytes;
        return *this;
      }
    buffers_.push_back({std::string(name), device_ptr, bytes});
  } catch (const std::exception&) {
    incomplete_ = true;
  }
  return *this;
}

Bindings& Bindings::allow_overlap(std::string_view a, std::string_view b) {
  try {
    overlaps_.emplace_back(std::string(a), std::string(b));
  } catch (const std::exception&) {
    incomplete_ = true;
  }
  return *this;
}

Bindings& Bindings::comm(std::string_view name, void* nccl_comm, int rank, int world_size) {
  try {
    Comm c;
    c.name = std::string(name);
    c.handle = nccl_comm;
    c.rank = rank;
    c.world_size = world_size;
    for (Comm& old : comms_)
      if (old.name == name) {
        old = c;
        return *this;
      }
    comms_.push_back(std::move(c));
  } catch (const std::exception&) {
    incomplete_ = true;
  }
  return *this;
}

Bindings& Bindings::comm_from_unique_id(std::string_view name, const void* unique_id, int rank, int world_size) {
  try {
    Comm c;
    c.name = std::string(name);
    c.rank = rank;
    c.world_size = world_size;
    c.from_unique_id = true;
    // A null id stays all zeros, which instantiate() refuses.
    if (unique_id) std::memcpy(c.unique_id.data(), unique_id, c.unique_id.size());
    for (Comm& old : comms_)
      if (old.name == name) {
        old = c;
        return *this;
      }
    comms_.push_back(std::move(c));
  } catch (const std::exception&) {
    incomplete_ = true;
  }
  return *this;
}

Result<std::array<char, 128>> nccl_unique_id() {
  return rt::guarded([&]() -> Result<std::array<char, 128>> {
    Result<const rt::nccl::Api*> api = rt::nccl::api();
    if (!api.ok()) return api.error();
    rt::nccl::UniqueId id = {};
    rt::nccl::Result r = (*api)->GetUniqueId(&id);
    if (r != rt::nccl::kSuccess) return rt::nccl::error(**api, r, "ncclGetUniqueId");
    std::array<char, 128> out{};
    static_assert(sizeof(id.internal) == 128, "ncclUniqueId is 128 bytes");
    std::memcpy(out.data(), id.internal, out.size());
    return out;
  });
}

Result<std::string> nccl_version() {
  return rt::guarded([&]() -> Result<std::string> {
    Result<const rt::nccl::Api*> api = rt::nccl::api();
    if (!api.ok()) return api.error();
    return (*api)->version_string() + " from " + (*api)->path;
  });
}


Status Pipeline::Impl::allow_shared_bytes(int kernel, unsigned bytes) const {
  if (bytes <= kDefaultSharedBytes) return {};
  std::lock_guard<std::mutex> lock(attribute_mutex);
  if (shared_bytes_allowed[kernel] >= bytes) return {};
  cudaError_t e = cudaKernelSetAttributeForDevice(kernels[kernel], cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                  static_cast<int>(bytes), device);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    const fb::Kernel* k = fb->kernels()->Get(kernel);
    return rt::cuda_error(e, "kernel '" + std::string(k->name()->c_str()) + "' cannot use " +
                                 std::to_string(bytes) + " bytes of dynamic shared memory",
                          rt::where(*fb, k->loc()));
  }
  shared_bytes_allowed[kernel] = bytes;
  return {};
}

Pipeline::Pipeline(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
Pipeline::~Pipeline() = default;
const std::string& Pipeline::name() const { return impl_->name; }
const std::string& Pipeline::image() const { return impl_->image; }
int Pipeline::device() const { return impl_->device; }

namespace {

// The JIT's log as one line: ptxas writes one message per line.
std::string one_line(std::string log) {
  while (!log.empty() && (log.back() == '\n' || log.back() == ' ')) log.pop_back();
  std::string out;
  for (char c : log) {
    if (c == '\n') out += "; ";
    else if (c != '\r') out += c;
  }
  return out;
}

// A failed load of a kernel's image. For PTX, the JIT's log says what is wrong with it; when the
// library loader left it empty (it may compile later, lazily), the driver's JIT is asked.
Error load_error(cudaError_t e, const std::string& what, const std::string& where, const std::string& ptx,
                 const char* log) {
  std::string text = what;
  if (!ptx.empty() && !rt::is_sticky(e)) {
    std::string jit = log && log[0] ? std::string(log) : std::string();
    if (jit.empty()) {
      (void)cudaFree(nullptr);  // the driver's JIT needs the device's context current
      (void)cudaGetLastError();
      jit = rt::jit_log(ptx.c_str(), ptx.size() + 1);
    }
    text += " (JIT log: " + one_line(jit) + ")";
  }
  return rt::cuda_error(e, text, where);
}

}  // namespace

// Everything after the bytes are in storage the Pipeline will own.
Result<std::unique_ptr<Pipeline>> Pipeline::load_storage(std::unique_ptr<uint64_t[]> storage, size_t size,
                                                         LoadOptions options) {
  auto impl = std::make_shared<Impl>();
  impl->size = size;
  impl->storage = std::move(storage);
  artifact::OpenResult open = artifact::open_pipeline(reinterpret_cast<const uint8_t*>(impl->storage.get()), size);
  if (!open.ok()) return Error(ErrorCode::InvalidArtifact, open.error);
  const fb::Pipeline& p = *open.pipeline;
  impl->fb = open.pipeline;
  impl->name = p.name()->str();
  // NVSHMEM (symmetric buffers; kernels linked with its device library): its host library now,
  // before any device work, so that a missing or mismatched one is said at load.
  if (rt::uses_nvshmem(p)) {
    Result<const rt::nvshmem::Api*> api = rt::nvshmem::api(p.nvshmem_version() ? p.nvshmem_version()->str() : "");
    if (!api.ok()) return Error(api.error().code(), "pipeline '" + impl->name + "': " + api.error().message());
    impl->nvshmem = *api;
  }

  // The device: everything here fails with cudaErrorInsufficientDriver where there is none.
  cudaError_t e = cudaGetDevice(&impl->device);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return rt::no_device_error(e);
  }
  int major = 0, minor = 0;
  if ((e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, impl->device)) != cudaSuccess ||
      (e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, impl->device)) != cudaSuccess)
    return rt::cuda_error(e, "cannot read the device's compute capability");
  impl->arch = major * 10 + minor;
  const std::string sm = "sm_" + std::to_string(impl->arch);

  const uint32_t nkernels = p.kernels() ? p.kernels()->size() : 0;
  impl->kernels.assign(nkernels, nullptr);
  impl->shared_bytes_allowed.assign(nkernels, 0);
  // Kernels from one .cu file share one image, and generated kernels share a module: load each
  // distinct image once.
  std::map<std::pair<uint64_t, size_t>, size_t> loaded;
  const uint32_t nmodules = p.modules() ? p.modules()->size() : 0;
  std::vector<int64_t> module_library(nmodules, -1);
  bool any_cubin = false, any_ptx = false;
  std::string ptx_arch;
  std::vector<std::string> library_ptx;  // per library: its PTX, or empty for a CUBIN
  // Loads the code for this device out of `images` (a CUBIN for it) or `ptx` (JIT), for the
  // kernel named in messages (`in_module` says where its code is, if not its own); returns the
  // index of the library holding it.
  auto load_code = [&](const flatbuffers::Vector<flatbuffers::Offset<fb::KernelImage>>* images,
                       const flatbuffers::Vector<uint8_t>* ptx_bytes, const flatbuffers::String* ptx_arch_name,
                       const std::string& kname, const std::string& kwhere,
                       const std::string& in_module) -> Result<size_t> {
    const uint8_t* data = nullptr;
    size_t data_size = 0;
    std::string ptx;  // NUL-terminated copy for the JIT
    if (!options.force_ptx && images)
      for (const fb::KernelImage* img : *images)
        if (img->arch()->str() == sm) {
          data = img->cubin()->data();
          data_size = img->cubin()->size();
        }
    if (data) {
      any_cubin = true;
    } else {
      std::string have;
      if (images)
        for (const fb::KernelImage* img : *images) have += (have.empty() ? "" : ", ") + img->arch()->str();
      if (!ptx_bytes || ptx_bytes->size() == 0 || !ptx_arch_name)
        return Error(ErrorCode::NoKernelImage,
                     "kernel '" + kname + "'" + in_module + " has no CUBIN for this GPU (" + sm +
                         "; the pipeline has " + (have.empty() ? "none" : have) +
                         ") and no PTX to JIT; recompile with --arch " + sm,
                     kwhere);
      const std::string pa = ptx_arch_name->str();  // "compute_90"
      int ptx_cc = 0;
      if (pa.rfind("compute_", 0) == 0) ptx_cc = std::atoi(pa.c_str() + 8);
      if (ptx_cc == 0 || ptx_cc > impl->arch)
        return Error(ErrorCode::NoKernelImage,
                     "kernel '" + kname + "'" + in_module + " has no CUBIN for this GPU (" + sm +
                         "; the pipeline has " + (have.empty() ? "none" : have) + ") and its PTX is for " +
                         pa + ", newer than the GPU; recompile with --arch " + sm,
                     kwhere);
      ptx.assign(reinterpret_cast<const char*>(ptx_bytes->data()), ptx_bytes->size());
      data = reinterpret_cast<const uint8_t*>(ptx.c_str());
      data_size = ptx.size() + 1;
      any_ptx = true;
      ptx_arch = pa;
    }
    auto key = std::make_pair(artifact::xxh64(data, data_size), data_size);
    auto it = loaded.find(key);
    if (it != loaded.end()) return it->second;
    rt::Library lib;
    // PTX gets the JIT's logs, which live as long as the library in case the JIT runs after
    // this call returns; a CUBIN is not compiled, and loads without options (and allocations).
    constexpr size_t kLog = 8192;
    char* error_log = nullptr;
    cudaJitOption opts[4];
    void* values[4];
    unsigned nopts = 0;
    if (!ptx.empty()) {
      std::unique_ptr<char[]> logs(new char[2 * kLog]());
      error_log = logs.get();
      char* info_log = logs.get() + kLog;
      opts[0] = cudaJitErrorLogBuffer, opts[1] = cudaJitErrorLogBufferSizeBytes;
      opts[2] = cudaJitInfoLogBuffer, opts[3] = cudaJitInfoLogBufferSizeBytes;
      values[0] = error_log, values[1] = reinterpret_cast<void*>(static_cast<uintptr_t>(kLog - 1));
      values[2] = info_log, values[3] = reinterpret_cast<void*>(static_cast<uintptr_t>(kLog - 1));
      nopts = 4;
      impl->jit_logs.push_back(std::move(logs));
    }
    cudaError_t le = cudaLibraryLoadData(lib.out(), data, nopts ? opts : nullptr, nopts ? values : nullptr, nopts,
                                         nullptr, nullptr, 0);
    if (le != cudaSuccess) {
      (void)cudaGetLastError();
      return load_error(le,
                        "cannot load the " + std::string(ptx.empty() ? "CUBIN" : "PTX") + " of kernel '" +
                            kname + "'" + in_module,
                        kwhere, ptx, error_log);
    }
    const size_t lib_index = impl->libraries.size();
    impl->libraries.push_back(std::move(lib));
    loaded.emplace(key, lib_index);
    library_ptx.push_back(ptx);
    return lib_index;
  };
  for (uint32_t k = 0; k < nkernels; ++k) {
    const fb::Kernel* kernel = p.kernels()->Get(k);
    const std::string kname = kernel->name()->str();
    const std::string kwhere = rt::where(p, kernel->loc());
    size_t lib_index = 0;
    const int m = kernel->in_module();
    if (m >= 0 && static_cast<uint32_t>(m) < nmodules) {
      // The validator proved the index; a module is loaded once, for its first kernel.
      if (module_library[m] < 0) {
        const fb::Module* mod = p.modules()->Get(m);
        Result<size_t> r = load_code(mod->images(), mod->ptx(), mod->ptx_arch(), kname, kwhere,
                                     " (in module " + std::to_string(m) + ")");
        if (!r.ok()) return r.error();
        module_library[m] = static_cast<int64_t>(*r);
      }
      lib_index = static_cast<size_t>(module_library[m]);
    } else {
      Result<size_t> r = load_code(kernel->images(), kernel->ptx(), kernel->ptx_arch(), kname, kwhere, "");
      if (!r.ok()) return r.error();
      lib_index = *r;
    }
    e = cudaLibraryGetKernel(&impl->kernels[k], impl->libraries[lib_index].get(), kernel->lowered_name()->c_str());
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      if (e == cudaErrorSymbolNotFound || e == cudaErrorInvalidDeviceFunction)
        return rt::cuda_error(e, "kernel '" + kname + "': symbol '" + kernel->lowered_name()->str() +
                                     "' is not in its image",
                              kwhere);
      // Loading may be lazy: a PTX that does not compile can fail here rather than above.
      return load_error(e, "cannot load kernel '" + kname + "' (symbol '" + kernel->lowered_name()->str() + "')",
                        kwhere, library_ptx[lib_index], nullptr);
    }
  }
  // Which libraries hold NVSHMEM's device state, for nvshmemx_culibrary_init at instantiate.
  impl->nvshmem_libraries.assign(impl->libraries.size(), false);
  if (impl->nvshmem)
    for (size_t i = 0; i < impl->libraries.size(); ++i) {
      void* state = nullptr;
      size_t bytes = 0;
      e = cudaLibraryGetGlobal(&state, &bytes, impl->libraries[i].get(), rt::nvshmem::kDeviceStateSymbol);
      if (e == cudaSuccess) {
        impl->nvshmem_libraries[i] = true;
      } else {
        (void)cudaGetLastError();
        if (e != cudaErrorSymbolNotFound && e != cudaErrorInvalidSymbol)
          return rt::cuda_error(e, std::string("cannot look for NVSHMEM's device state (") +
                                       rt::nvshmem::kDeviceStateSymbol + ") in the pipeline's code");
      }
    }
  impl->image = any_cubin && any_ptx ? sm + " CUBIN + " + ptx_arch + " PTX (JIT)"
                : any_ptx            ? ptx_arch + " PTX (JIT)"
                                     : sm + " CUBIN";
  return std::unique_ptr<Pipeline>(new Pipeline(std::move(impl)));
}

Pipeline::Impl::~Impl() {
  // Only while NVSHMEM still runs: an application that started it may have finalised it.
  if (!nvshmem || nvshmem_generation == 0 || nvshmem->init_status() < rt::nvshmem::kStatusIsInitialized) return;
  for (size_t i = 0; i < libraries.size() && i < nvshmem_libraries.size(); ++i)
    if (nvshmem_libraries[i]) (void)nvshmem->culibrary_finalize(libraries[i].get());
}

Status Pipeline::Impl::init_nvshmem_libraries(const rt::nvshmem::Session& session) const {
  std::lock_guard<std::mutex> lock(nvshmem_mutex);
  if (nvshmem_generation == session.generation()) return {};
  for (size_t i = 0; i < libraries.size() && i < nvshmem_libraries.size(); ++i) {
    if (!nvshmem_libraries[i]) continue;
    if (session.api().culibrary_init(libraries[i].get()) != 0)
      return Error(ErrorCode::Nvshmem, "pipeline '" + name + "': nvshmemx_culibrary_init failed on the code of its " +
                                           "kernels that call NVSHMEM (NVSHMEM_DEBUG=INFO says why)");
  }
  nvshmem_generation = session.generation();
  return {};
}

Result<std::unique_ptr<Pipeline>> Pipeline::load(const std::string& path, LoadOptions options) {
  return rt::guarded([&]() -> Result<std::unique_ptr<Pipeline>> {
    artifact::FileBytes file;
    std::string why;
    if (!artifact::read_file(path, artifact::kMaxFileSize, &file, &why))
      return Error(why.rfind("out of memory", 0) == 0 ? ErrorCode::OutOfMemory : ErrorCode::Io,
                   path + ": " + (why.empty() ? std::string("cannot read") : why));
    auto r = load_storage(std::move(file.storage), file.size, options);
    if (!r.ok()) {
      const Error& e = r.error();
      return Error(e.code(), path + ": " + e.message(), e.where(), e.cuda_error());
    }
    return r;
  });
}

Result<std::unique_ptr<Pipeline>> Pipeline::load_from_memory(const void* bytes, size_t size, LoadOptions options) {
  return rt::guarded([&]() -> Result<std::unique_ptr<Pipeline>> {
    if (bytes == nullptr) return Error(ErrorCode::InvalidArgument, "null pipeline bytes");
    // Checked before anything is allocated or read.
    if (size > artifact::kMaxFileSize)
      return Error(ErrorCode::InvalidArtifact, "a pipeline of " + std::to_string(size) +
                                                   " bytes is larger than any pipeline.bin can be (" +
                                                   std::to_string(artifact::kMaxFileSize) + " bytes)");
    // 8-byte aligned, zero after the bytes to the end of the last word. Only that word is
    // zeroed: clearing the whole buffer first would write every byte twice.
    std::unique_ptr<uint64_t[]> storage(new (std::nothrow) uint64_t[size / 8 + 1]);
    if (!storage)
      return Error(ErrorCode::OutOfMemory, "out of memory: cannot copy " + std::to_string(size) + " bytes of pipeline");
    storage[size / 8] = 0;
    if (size) std::memcpy(storage.get(), bytes, size);
    return load_storage(std::move(storage), size, options);
  });
}

}  // namespace orch
