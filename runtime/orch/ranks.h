// Running a pipeline on several ranks (one process per GPU): the small pieces that orch-run,
// the multi-GPU tests and the collective benchmark share. Library orch::ranks (POSIX; links
// orch::runtime, no MPI, no NCCL at link time).
//
//   // the parent: one process per GPU, each this program again with ORCH_RANK etc. set
//   auto exits = orch::ranks::spawn(2, {"/proc/self/exe", "--my-flags"});
//   // each rank (also under mpirun or srun, from the launcher's environment):
//   auto me = orch::ranks::from_environment();
//   orch::ranks::use_device(*me);                                   // cudaSetDevice(local rank)
//   auto id = orch::ranks::share_unique_id(id_file, me->rank, 60s); // rank 0 writes, others read
//   bindings.comm_from_unique_id("world", id->data(), me->rank, me->world_size);
//
// NVLink multicast (NVLS) stays off unless asked for: spawn() and default_nccl_environment()
// set NCCL_NVLS_ENABLE=0 where it is not set.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "orch/runtime.h"

namespace orch::ranks {

struct Rank {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;  // this process's index among the ranks on its host: picks its GPU
  // The variable the rank came from ("ORCH_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
  // "SLURM_PROCID"), or empty when no launcher set one (a single rank).
  std::string source;
};

// This process's rank from its launcher's environment, first match wins:
//   ORCH_RANK, ORCH_WORLD_SIZE, ORCH_LOCAL_RANK              (spawn(), orch-run --ranks)
//   OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK                 (Open MPI's mpirun)
//   PMI_RANK, PMI_SIZE, MPI_LOCALRANKID                      (MPICH / Intel MPI hydra, srun --mpi=pmi2)
//   SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID                (srun)
// Without a local-rank variable the local rank is the rank (one host). A malformed value or a
// rank outside the size is an error; no variables at all is rank 0 of 1.
Result<Rank> from_environment();
// The same with a lookup of one's own (tests): returns the value or nullptr.
Result<Rank> from_environment(const std::function<const char*(const char*)>& lookup);

// Makes the GPU of `r` current: cudaSetDevice(local_rank), or device 0 where the process sees
// one GPU only (CUDA_VISIBLE_DEVICES, or a launcher that binds one GPU per process). An error
// when it sees several but fewer than local ranks (NCCL cannot put two ranks of one
// communicator on one GPU).
Status use_device(const Rank& r);

// Sets NCCL_NVLS_ENABLE=0 unless the variable is set (export NCCL_NVLS_ENABLE=1 to opt in).
void default_nccl_environment();

// The 128 bytes of an NCCL unique id in a file. write: atomically (a temporary file in the same
// folder, then rename), mode 0600. read: waits up to `timeout` for the file to appear whole.
Status write_unique_id(const std::string& path, const std::array<char, 128>& id);
Result<std::array<char, 128>> read_unique_id(const std::string& path, std::chrono::milliseconds timeout);
// Rank 0 makes an id (orch::nccl_unique_id) and writes it; every other rank reads it. The
// path must be one all ranks see (a shared file system across hosts); a stale file from an
// earlier run must be removed first (spawn() uses a fresh folder each time).
Result<std::array<char, 128>> share_unique_id(const std::string& path, int rank, std::chrono::milliseconds timeout);

struct SpawnOptions {
  std::chrono::seconds timeout{0};  // 0: wait for ever
  std::string log_dir;              // empty: the children inherit stdout and stderr; else
                                    // each writes log_dir/rank<N>.log
  std::vector<std::pair<std::string, std::string>> env;  // more variables for every child
};

struct Exit {
  int rank = 0;
  int exit_code = -1;  // -1: killed by a signal or never started
  int signal = 0;
  bool timed_out = false;
  bool killed = false;  // stopped by spawn() because another rank failed
  std::string log;      // the log file, if SpawnOptions::log_dir was given
  bool ok() const { return exit_code == 0; }
  std::string describe() const;  // "rank 1: exit 3", "rank 0: killed by signal 9 after the timeout"
};

// Starts `world_size` processes running `argv` (argv[0] a program path; "/proc/self/exe" runs
// this program again), each with ORCH_RANK, ORCH_WORLD_SIZE, ORCH_LOCAL_RANK (= rank),
// ORCH_NCCL_ID_FILE (a path in a fresh private folder, removed afterwards) and
// NCCL_NVLS_ENABLE=0 unless set, then waits for all of them. When one fails or the timeout
// passes, the others are stopped (SIGTERM, then SIGKILL), since they would wait in a
// collective for ever. Only the processes it started are signalled. Children exec a fresh
// program, so the caller may have used CUDA already.
Result<std::vector<Exit>> spawn(int world_size, const std::vector<std::string>& argv, const SpawnOptions& options = {});

// Every rank's `mine` on every rank, through an NCCL allgather on `nccl_comm` (an ncclComm_t)
// and `stream`: all[r] holds rank r's values. Every rank passes the same count. For figures
// that rank 0 prints.
Result<std::vector<std::vector<double>>> allgather(void* nccl_comm, const std::vector<double>& mine,
                                                   cudaStream_t stream);

}  // namespace orch::ranks
