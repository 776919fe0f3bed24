// orch::ranks: see orch/ranks.h.
#include "orch/ranks.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "runtime/src/nccl.h"

extern char** environ;

namespace orch::ranks {

namespace {

// A whole non-negative decimal number, or -1.
long parse_count(const char* s) {
  if (!s || !*s) return -1;
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s, &end, 10);
  if (errno != 0 || !end || *end != '\0' || v < 0 || v > (1 << 24)) return -1;
  return v;
}

struct Launcher {
  const char* rank;
  const char* size;
  const char* local;
};

constexpr Launcher kLaunchers[] = {
    {"ORCH_RANK", "ORCH_WORLD_SIZE", "ORCH_LOCAL_RANK"},
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
    {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
};

std::string errno_text() { return std::strerror(errno); }

}  // namespace

Result<Rank> from_environment(const std::function<const char*(const char*)>& lookup) {
  for (const Launcher& l : kLaunchers) {
    const char* r = lookup(l.rank);
    if (!r) continue;
    const char* n = lookup(l.size);
    const long rank = parse_count(r), size = parse_count(n);
    if (rank < 0)
      return Error(ErrorCode::InvalidValue, std::string(l.rank) + "='" + r + "' is not a rank (a whole number >= 0)");
    if (!n)
      return Error(ErrorCode::InvalidValue, std::string(l.rank) + " is set but " + l.size + " is not");
    if (size < 1)
      return Error(ErrorCode::InvalidValue, std::string(l.size) + "='" + n + "' is not a world size (a whole number >= 1)");
    if (rank >= size)
      return Error(ErrorCode::InvalidValue, std::string(l.rank) + "=" + r + " is not below " + l.size + "=" + n);
    Rank out;
    out.rank = static_cast<int>(rank);
    out.world_size = static_cast<int>(size);
    out.local_rank = out.rank;
    out.source = l.rank;
    if (const char* loc = lookup(l.local)) {
      const long local = parse_count(loc);
      if (local < 0)
        return Error(ErrorCode::InvalidValue, std::string(l.local) + "='" + loc + "' is not a local rank");
      out.local_rank = static_cast<int>(local);
    }
    return out;
  }
  return Rank{};
}

Result<Rank> from_environment() {
  return from_environment([](const char* name) { return static_cast<const char*>(std::getenv(name)); });
}

Status use_device(const Rank& r) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return Error(ErrorCode::NoDevice, std::string("no CUDA device: ") + cudaGetErrorString(e), {}, static_cast<int>(e));
  }
  // One visible GPU (CUDA_VISIBLE_DEVICES or the launcher bound one per process): that one.
  const int device = count == 1 ? 0 : r.local_rank;
  if (device >= count)
    return Error(ErrorCode::NoDevice, "rank " + std::to_string(r.rank) + " (local rank " + std::to_string(r.local_rank) +
                                          ") needs GPU " + std::to_string(r.local_rank) + ", but this host has " +
                                          std::to_string(count) + " (one GPU per rank)");
  e = cudaSetDevice(device);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return Error(ErrorCode::Cuda, "cudaSetDevice(" + std::to_string(device) + "): " + cudaGetErrorString(e), {},
                 static_cast<int>(e));
  }
  return {};
}

void default_nccl_environment() { setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0); }

Status write_unique_id(const std::string& path, const std::array<char, 128>& id) {
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Error(ErrorCode::Io, "cannot create '" + tmp + "': " + errno_text());
  size_t done = 0;
  while (done < id.size()) {
    ssize_t w = ::write(fd, id.data() + done, id.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      std::string why = errno_text();
      ::close(fd);
      ::unlink(tmp.c_str());
      return Error(ErrorCode::Io, "cannot write '" + tmp + "': " + why);
    }
    done += static_cast<size_t>(w);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    std::string why = errno_text();
    ::unlink(tmp.c_str());
    return Error(ErrorCode::Io, "cannot write '" + tmp + "': " + why);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string why = errno_text();
    ::unlink(tmp.c_str());
    return Error(ErrorCode::Io, "cannot rename '" + tmp + "' to '" + path + "': " + why);
  }
  return {};
}

Result<std::array<char, 128>> read_unique_id(const std::string& path, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    std::ifstream in(path, std::ios::binary);
    if (in) {
      std::array<char, 128> id{};
      in.read(id.data(), static_cast<std::streamsize>(id.size()));
      if (in.gcount() == static_cast<std::streamsize>(id.size()) && in.peek() == std::char_traits<char>::eof())
        return id;
      return Error(ErrorCode::InvalidValue, "'" + path + "' does not hold a 128-byte NCCL unique id");
    }
    if (std::chrono::steady_clock::now() > deadline)
      return Error(ErrorCode::Io, "no NCCL unique id appeared at '" + path + "' within " +
                                      std::to_string(timeout.count() / 1000) +
                                      " s (rank 0 writes it; is the path on a file system every rank sees?)");
    std::this_thread::sleep_for(pause);
    if (pause < std::chrono::milliseconds(50)) pause *= 2;
  }
}

Result<std::array<char, 128>> share_unique_id(const std::string& path, int rank, std::chrono::milliseconds timeout) {
  if (rank != 0) return read_unique_id(path, timeout);
  Result<std::array<char, 128>> id = nccl_unique_id();
  if (!id.ok()) return id;
  Status s = write_unique_id(path, *id);
  if (!s.ok()) return s.error();
  return id;
}

std::string Exit::describe() const {
  std::string s = "rank " + std::to_string(rank) + ": ";
  if (exit_code >= 0) s += "exit " + std::to_string(exit_code);
  else if (signal) s += "killed by signal " + std::to_string(signal);
  else s += "did not start";
  if (timed_out) s += " after the timeout";
  else if (killed) s += " (stopped because another rank failed)";
  return s;
}

Result<std::vector<Exit>> spawn(int world_size, const std::vector<std::string>& argv, const SpawnOptions& options) {
  if (world_size < 1) return Error(ErrorCode::InvalidArgument, "spawn: world size " + std::to_string(world_size));
  if (argv.empty()) return Error(ErrorCode::InvalidArgument, "spawn: no program");

  std::string tmpl = (std::filesystem::temp_directory_path() / "orch-ranks-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) return Error(ErrorCode::Io, "cannot create a folder for the NCCL unique id: " + errno_text());
  const std::string dir = tmpl;
  const std::string id_file = dir + "/nccl-id";
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } cleanup{dir};

  // Everything the children need is built before fork: the parent may have threads (CUDA's),
  // so a child calls only async-signal-safe functions (dup2, execve, write, _exit).
  std::vector<std::string> names = {"ORCH_RANK", "ORCH_WORLD_SIZE", "ORCH_LOCAL_RANK", "ORCH_NCCL_ID_FILE"};
  for (const auto& kv : options.env) names.push_back(kv.first);
  std::vector<std::string> base;
  bool has_nvls = false;
  for (char** e = environ; e && *e; ++e) {
    std::string kv = *e;
    const std::string key = kv.substr(0, kv.find('='));
    if (key == "NCCL_NVLS_ENABLE") has_nvls = true;
    if (std::find(names.begin(), names.end(), key) == names.end()) base.push_back(kv);
  }
  if (!has_nvls) base.push_back("NCCL_NVLS_ENABLE=0");
  for (const auto& kv : options.env) base.push_back(kv.first + "=" + kv.second);
  base.push_back("ORCH_WORLD_SIZE=" + std::to_string(world_size));
  base.push_back("ORCH_NCCL_ID_FILE=" + id_file);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  std::vector<Exit> exits(world_size);
  std::vector<pid_t> pids(world_size, -1);
  auto stop_all = [&](int sig) {
    for (int r = 0; r < world_size; ++r)
      if (pids[r] > 0) ::kill(pids[r], sig);
  };
  for (int r = 0; r < world_size; ++r) {
    exits[r].rank = r;
    std::vector<std::string> env = base;
    env.push_back("ORCH_RANK=" + std::to_string(r));
    env.push_back("ORCH_LOCAL_RANK=" + std::to_string(r));
    std::vector<char*> envp;
    for (std::string& kv : env) envp.push_back(kv.data());
    envp.push_back(nullptr);
    int log_fd = -1;
    if (!options.log_dir.empty()) {
      exits[r].log = options.log_dir + "/rank" + std::to_string(r) + ".log";
      log_fd = ::open(exits[r].log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (log_fd < 0) {
        std::string why = errno_text();
        stop_all(SIGKILL);
        for (int k = 0; k < r; ++k) (void)::waitpid(pids[k], nullptr, 0);
        return Error(ErrorCode::Io, "cannot create '" + exits[r].log + "': " + why);
      }
    }
    const std::string exec_failed = "orch::ranks::spawn: cannot run " + argv[0] + "\n";
    pid_t pid = ::fork();
    if (pid == 0) {
      if (log_fd >= 0) {
        ::dup2(log_fd, 1);
        ::dup2(log_fd, 2);
      }
      ::execve(args[0], args.data(), envp.data());
      ssize_t ignored = ::write(2, exec_failed.data(), exec_failed.size());
      (void)ignored;
      ::_exit(127);
    }
    if (log_fd >= 0) ::close(log_fd);
    if (pid < 0) {
      std::string why = errno_text();
      stop_all(SIGKILL);
      for (int k = 0; k < r; ++k) (void)::waitpid(pids[k], nullptr, 0);
      return Error(ErrorCode::Io, "cannot start rank " + std::to_string(r) + ": fork: " + why);
    }
    pids[r] = pid;
  }

  const auto start = std::chrono::steady_clock::now();
  const bool bounded = options.timeout.count() > 0;
  bool stopping = false, timed_out = false;
  auto stop_deadline = start;
  int alive = world_size;
  while (alive > 0) {
    bool reaped = false;
    for (int r = 0; r < world_size; ++r) {
      if (pids[r] <= 0) continue;
      int status = 0;
      pid_t w = ::waitpid(pids[r], &status, WNOHANG);
      if (w == 0) continue;
      if (w < 0 && errno == EINTR) continue;
      reaped = true;
      pids[r] = -1;
      --alive;
      if (w > 0 && WIFEXITED(status)) exits[r].exit_code = WEXITSTATUS(status);
      else if (w > 0 && WIFSIGNALED(status)) exits[r].signal = WTERMSIG(status);
      if (stopping) {
        exits[r].timed_out = timed_out;
        exits[r].killed = !timed_out && !exits[r].ok();
      }
      if (!exits[r].ok() && !stopping) {  // the others would wait for it in a collective
        stopping = true;
        stop_all(SIGTERM);
        stop_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      }
    }
    const auto now = std::chrono::steady_clock::now();
    if (!stopping && bounded && now - start > options.timeout) {
      stopping = timed_out = true;
      stop_all(SIGTERM);
      stop_deadline = now + std::chrono::seconds(5);
    }
    if (stopping && now > stop_deadline) stop_all(SIGKILL);
    if (!reaped && alive > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return exits;
}

Result<std::vector<std::vector<double>>> allgather(void* nccl_comm, const std::vector<double>& mine,
                                                   cudaStream_t stream) {
  Result<const rt::nccl::Api*> api = rt::nccl::api();
  if (!api.ok()) return api.error();
  const rt::nccl::Api& nccl = **api;
  int world = 0;
  rt::nccl::Result r = nccl.CommCount(nccl_comm, &world);
  if (r != rt::nccl::kSuccess) return rt::nccl::error(nccl, r, "ncclCommCount", nccl_comm);
  const size_t n = mine.size();
  std::vector<double> flat(n * static_cast<size_t>(world));
  std::vector<std::vector<double>> out(static_cast<size_t>(world));
  if (n == 0) return out;
  void* dev = nullptr;
  cudaError_t e = cudaMalloc(&dev, (flat.size() + n) * sizeof(double));
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return Error(ErrorCode::Cuda, std::string("allgather: cudaMalloc: ") + cudaGetErrorString(e), {}, static_cast<int>(e));
  }
  double* send = static_cast<double*>(dev);
  double* recv = send + n;
  e = cudaMemcpyAsync(send, mine.data(), n * sizeof(double), cudaMemcpyHostToDevice, stream);
  if (e == cudaSuccess) {
    r = nccl.AllGather(send, recv, n, rt::nccl::kFloat64, nccl_comm, stream);
    if (r == rt::nccl::kSuccess) {
      e = cudaMemcpyAsync(flat.data(), recv, flat.size() * sizeof(double), cudaMemcpyDeviceToHost, stream);
      if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
    }
  }
  (void)cudaFree(dev);
  if (r != rt::nccl::kSuccess) return rt::nccl::error(nccl, r, "allgather: ncclAllGather", nccl_comm);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return Error(ErrorCode::Cuda, std::string("allgather: ") + cudaGetErrorString(e), {}, static_cast<int>(e));
  }
  for (size_t k = 0; k < out.size(); ++k) out[k].assign(flat.begin() + k * n, flat.begin() + (k + 1) * n);
  return out;
}

}  // namespace orch::ranks
