// NVSHMEM for the kernel compiler: which kernels call NVSHMEM's device API, where NVSHMEM's
// headers and device library are, and what NVRTC needs to compile them. A kernel that calls
// NVSHMEM is compiled with -rdc and linked by nvJitLink against libnvshmem_device.a into a
// CUBIN (never PTX: the driver cannot resolve NVSHMEM's symbols in relocatable PTX); the
// runtime then calls nvshmemx_cumodule_init on the loaded module. docs/multi-gpu.md, "NVSHMEM",
// has the recipe and the pinned version. Pipelines that do not use NVSHMEM need none of this.
#pragma once

#include <cstdint>
#include <string>

namespace orch::nvshmem {

// Where NVSHMEM was looked for and what was found. `problem` empty: usable.
struct DeviceLibrary {
  std::string home;         // the folder holding include/ and lib/
  std::string from;         // how it was chosen: "--nvshmem", "ORCH_NVSHMEM_HOME", "NVSHMEM_HOME"
  std::string include_dir;  // home/include (nvshmem.h)
  std::string device_lib;   // home/lib/libnvshmem_device.a
  uint64_t device_lib_size = 0;
  int64_t device_lib_mtime = 0;
  std::string version;      // "3.4.5", from include/non_abi/nvshmem_version.h
  std::string problem;      // why it cannot be used: nothing set, a file missing
};

// `explicit_home` (orchc --nvshmem) if not empty, else $ORCH_NVSHMEM_HOME, else $NVSHMEM_HOME.
// Every path looked at is reported to the file observer (orchc's artifact cache).
DeviceLibrary find_device_library(const std::string& explicit_home);

// True if the code calls NVSHMEM: an identifier starting `nvshmem_` or `nvshmemx_`, or an
// #include of nvshmem.h / nvshmemx.h. A mention in a comment costs only a needless link.
bool mentions_nvshmem(const std::string& code);

// Put before a kernel's code when NVSHMEM is used (a `#line` directive after it keeps NVRTC's
// line numbers those of the file). NVSHMEM 3.4.5's headers name std::is_integral,
// std::is_signed and std::is_unsigned in code NVRTC compiles (non_abi/device/coll/reduce.cuh),
// which NVRTC has no <type_traits> for: they are cuda::std's here.
std::string nvrtc_prelude(const std::string& file_name);

// Put after a kernel's code when NVSHMEM is used. NVSHMEM's put-with-signal calls
// nvshmemi_transfer_put_signal<SCOPE>(..., uint64_t signal, ...), which libnvshmem_device.a
// defines for nvcc's uint64_t, `unsigned long`; under NVRTC 13.0 uint64_t is `unsigned long long`,
// another mangled name, and the link fails (`Undefined reference to
// _Z28nvshmemi_transfer_put_signalIL13threadgroup_t0EEvPvS1_mS1_y14nvshmemi_amo_tib`). This
// defines the `unsigned long long` one as a call of the library's. Written with both types
// spelled out, so that where uint64_t is `unsigned long` it is an overload nothing calls.
std::string nvrtc_postlude();

// NVRTC options an NVSHMEM kernel needs besides the usual: relocatable device code, NVSHMEM's
// headers, and -default-device (3.4.5's device_host/nvshmem_tensor.h has a constructor with
// no execution space, which NVRTC refuses as host code).
inline const char* const kNvrtcFlags[] = {"-rdc=true", "-default-device"};

}  // namespace orch::nvshmem
