// The CUDA toolkit as the kernel compiler uses it (kernel_compiler.cpp): finding it (NVRTC's
// headers, cudadevrt, nvcc and ptxas) and running nvcc and ptxas for the units NVRTC compiles
// worse (shared memory: kernel_toolchain.cpp says why). Internal to lowering/.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace orch::toolchain {

namespace fs = std::filesystem;

struct Toolkit {
  std::string root;
  std::string include_dir;  // empty if not found: NVRTC's built-in headers still work
  std::vector<std::string> include_dirs;  // include_dir, then its cccl/ where there is one
  std::string cudadevrt;    // empty if not found
  uint64_t cudadevrt_size = 0;
  int64_t cudadevrt_mtime = 0;
  // The toolkit's nvcc (or $ORCH_NVCC's), for kernels that use shared memory (see nvcc_ptx);
  // empty if not found or turned off (ORCH_NVCC=off).
  std::string nvcc, ptxas;  // ptxas: beside nvcc; both or neither
  uint64_t nvcc_size = 0, ptxas_size = 0;
  int64_t nvcc_mtime = 0, ptxas_mtime = 0;
  int nvrtc_major = 0, nvrtc_minor = 0;
  unsigned link_major = 0, link_minor = 0;
  std::vector<int> archs;  // NVRTC's supported sm numbers
  std::string problem;     // why nothing can compile, if something is badly wrong
};

// What one NVRTC compile to PTX gave, shared by the jobs of one compile_kernels call: every
// patched variant of a kernel (one per unrolled copy) starts from the same PTX, and every
// guard of a loop from the same guard module.
struct PtxResult {
  bool compiled = false;
  std::string log, ptx, failure;
  std::vector<std::string> lowered;  // per name expression
};

std::string env(const char* name);
bool is_dir(const fs::path& p);
Toolkit probe_toolkit();
// "sm_90" -> 90, "sm_90a" -> 90 with suffix "a"; false if not of that shape.
bool parse_arch(const std::string& arch, int* number, std::string* suffix);
// Kernels that call these need -rdc and cudadevrt. Scanned as identifiers, so a mention in a
// comment costs only a needless link; device-side `<<<` launches need the same.
bool mentions_device_runtime(const std::string& code);
inline bool mentions_shared_memory(const std::string& ptx) { return ptx.find(".shared") != std::string::npos; }

// Runs argv (argv[0] a path), stdout and stderr into `log_path`; its exit status, -1 where it
// could not start or ran past `timeout_s` (then it is killed).
int run_process(const std::vector<std::string>& args, const std::string& log_path, int timeout_s);
std::string read_whole(const fs::path& path);
// The PTX's `.version` line ("9.0"), empty if none.
std::string ptx_version(const std::string& ptx);
// `.entry NAME(` in the PTX, NAME whole.
bool has_entry(const std::string& ptx, const std::string& name);
// nvcc's PTX of `code` for the virtual arch `varch`, as NVRTC compiled it: -std=c++17, the same
// include folders, -rdc=true where `rdc`; each name expression instantiated the way
// nvrtcAddNameExpression does (its address taken, here by a host-side variable after the
// code). `file_name` names the code for __FILE__ and messages (#line), as NVRTC's does.
PtxResult nvcc_ptx(const std::string& nvcc, const std::string& code, const std::string& file_name,
                   const std::vector<std::string>& exprs, const std::vector<std::string>& include_dirs,
                   const std::string& varch, bool rdc);
// ptxas's CUBIN of `ptx` for `arch` ("sm_90"), whole program (not -c): what NVRTC makes of a unit
// without -rdc, and nvcc's -cubin. nvJitLink compiles PTX as relocatable code (ptxas -c), which
// can cost registers (the SGEMM of bench/real_workloads.py: 48 whole, 74 relocatable).
std::optional<std::string> ptxas_cubin(const std::string& ptxas, const std::string& ptx, const std::string& arch,
                                       std::string* failure);
// "sm_90a" -> "compute_90a"; a "compute_" arch stays.
std::string virtual_arch(const std::string& arch);

}  // namespace orch::toolchain
