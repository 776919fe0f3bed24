// NVSHMEM through dlopen/dlsym: see nvshmem.h.
#include "runtime/src/nvshmem.h"

#include <memory>
#include <mutex>
#include <string>

#include "runtime/src/shared_library.h"

namespace orch::rt::nvshmem {

namespace {

const dynlib::Kind kNvshmem{ErrorCode::Nvshmem, "NVSHMEM", "NVSHMEM host library"};

void find_symbols(dynlib::Symbols& s, Api& api) {
  s.require("nvshmemx_vendor_get_version_info", &api.vendor_get_version_info);
  s.require("nvshmemx_get_uniqueid", &api.get_uniqueid);
  s.require("nvshmemx_set_attr_uniqueid_args", &api.set_attr_uniqueid_args);
  s.require("nvshmemx_hostlib_init_attr", &api.hostlib_init_attr);
  s.require("nvshmemx_hostlib_finalize", &api.hostlib_finalize);
  s.require("nvshmem_my_pe", &api.my_pe);
  s.require("nvshmem_n_pes", &api.n_pes);
  s.require("nvshmem_malloc", &api.malloc);
  s.require("nvshmem_free", &api.free);
  s.require("nvshmem_barrier_all", &api.barrier_all);
  s.require("nvshmemx_culibrary_init", &api.culibrary_init);
  s.require("nvshmemx_cumodule_init", &api.cumodule_init);
  s.require("nvshmemx_culibrary_finalize", &api.culibrary_finalize);
  s.require("nvshmemx_init_status", &api.init_status);
}

Status read_version(Api& api) {
  api.vendor_get_version_info(&api.major, &api.minor, &api.patch);
  return {};
}

}  // namespace

std::string Api::version_string() const {
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

orch::Result<const Api*> open(const std::string& path) {
  return dynlib::load_once<Api>(kNvshmem, path, find_symbols, read_version);
}

orch::Result<const Api*> api(const std::string& version) {
  const char* env = dynlib::path_from_env("ORCH_NVSHMEM_LIBRARY");
  const bool from_env = env != nullptr;
  orch::Result<const Api*> r = open(from_env ? std::string(env) : std::string("libnvshmem_host.so.3"));
  if (!r.ok()) {
    return Error(ErrorCode::Nvshmem,
                 "the pipeline needs NVSHMEM, which could not be loaded: " + r.error().message() +
                     (from_env ? " (the path comes from ORCH_NVSHMEM_LIBRARY)"
                               : ". Install NVSHMEM " + (version.empty() ? std::string("3.4.5") : version) +
                                     " (libnvshmem_host.so.3; pip: nvidia-nvshmem-cu13), put its lib folder on "
                                     "LD_LIBRARY_PATH, or set ORCH_NVSHMEM_LIBRARY to the library's path"));
  }
  if (!version.empty() && (*r)->version_string() != version)
    return Error(ErrorCode::Nvshmem,
                 "NVSHMEM from '" + (*r)->path + "' is version " + (*r)->version_string() +
                     ", but the pipeline's kernels were linked with NVSHMEM " + version +
                     "'s device library; the two must be the same release (set ORCH_NVSHMEM_LIBRARY to "
                     "NVSHMEM " + version + "'s libnvshmem_host.so.3, or compile with that NVSHMEM)");
  return r;
}

namespace {

// The process's Session while some Executable holds it, and how many initialisations there were.
struct Sessions {
  std::mutex mutex;
  std::weak_ptr<Session> current;
  std::shared_ptr<Session> started;  // the session orch started, kept to the end of the process
  uint64_t initialisations = 0;
};
Sessions& sessions() {
  static auto* s = new Sessions();  // never destroyed: a Session may end during exit
  return *s;
}

std::string pe_text(int rank, int world) { return "PE " + std::to_string(rank) + " of " + std::to_string(world); }

}  // namespace

orch::Result<std::shared_ptr<Session>> Session::join(const Api& api, int rank, int world_size,
                                                     const std::function<orch::Status(UniqueId*)>& share) {
  if (world_size < 1 || rank < 0 || rank >= world_size)
    return Error(ErrorCode::InvalidValue, "NVSHMEM: rank " + std::to_string(rank) + " is not within world size " +
                                              std::to_string(world_size));
  Sessions& all = sessions();
  std::lock_guard<std::mutex> lock(all.mutex);
  if (std::shared_ptr<Session> s = all.current.lock()) {
    if (s->api_ != &api)
      return Error(ErrorCode::Nvshmem, "NVSHMEM is already in use in this process from '" + s->api_->path +
                                           "', not '" + api.path + "'");
    if (s->rank_ != rank || s->world_size_ != world_size)
      return Error(ErrorCode::Nvshmem,
                   "NVSHMEM already runs in this process as " + pe_text(s->rank_, s->world_size_) +
                       ", but this pipeline's communicator makes it " + pe_text(rank, world_size) +
                       " (one process is one PE: every pipeline in it that uses NVSHMEM must run over the same ranks)");
    return s;
  }
  std::shared_ptr<Session> s(new Session());
  s->api_ = &api;
  s->rank_ = rank;
  s->world_size_ = world_size;
  if (api.init_status() >= kStatusIsInitialized) {
    // The application's NVSHMEM: used as it is, and left for the application to finalise.
    const int pe = api.my_pe(), pes = api.n_pes();
    if (pe != rank || pes != world_size)
      return Error(ErrorCode::Nvshmem, "the application initialised NVSHMEM as " + pe_text(pe, pes) +
                                           ", but the pipeline's communicator makes this process " +
                                           pe_text(rank, world_size) + "; PE r must be the communicator's rank r");
  } else {
    UniqueId id;
    if (rank == 0 && api.get_uniqueid(&id) != 0)
      return Error(ErrorCode::Nvshmem, "nvshmemx_get_uniqueid failed");
    orch::Status shared = share(&id);
    if (!shared.ok()) return shared.error();
    InitAttr attr;
    if (api.set_attr_uniqueid_args(rank, world_size, &id, &attr) != 0)
      return Error(ErrorCode::Nvshmem, "nvshmemx_set_attr_uniqueid_args(" + pe_text(rank, world_size) + ") failed");
    if (api.hostlib_init_attr(kInitWithUniqueId, &attr) != 0)
      return Error(ErrorCode::Nvshmem, "nvshmemx_hostlib_init_attr(" + pe_text(rank, world_size) +
                                           ") failed (NVSHMEM_DEBUG=INFO says why)");
    s->owned_ = true;
    const int pe = api.my_pe(), pes = api.n_pes();
    if (pe != rank || pes != world_size) {
      api.hostlib_finalize();
      return Error(ErrorCode::Nvshmem, "NVSHMEM started as " + pe_text(pe, pes) + " where " +
                                           pe_text(rank, world_size) + " was asked for");
    }
  }
  s->generation_ = ++all.initialisations;
  all.current = s;
  s->registered_ = true;
  if (s->owned_) all.started = s;
  return s;
}

void Session::end_for_tests() {
  std::shared_ptr<Session> last;
  {
    std::lock_guard<std::mutex> lock(sessions().mutex);
    last = std::move(sessions().started);
  }
  // `last` ends here, outside the lock, where no other holder remains.
}

Session::~Session() {
  // A session orch started ends only through end_for_tests (Sessions::started holds it until
  // then); a join() that failed undid its own work.
  if (registered_ && owned_) api_->hostlib_finalize();
}

}  // namespace orch::rt::nvshmem
