// The kernel compiler: kernel source (inline `source """..."""` or a `from` .cu file) to GPU
// images with NVRTC, one CUBIN per target arch plus PTX for the newest, linked against the
// device runtime (cudadevrt) with nvJitLink where a kernel launches graphs or sets
// conditionals, and against NVSHMEM's device library where it calls NVSHMEM (lowering/nvshmem.h).
// Compiled images are cached on disk by a content hash. NVRTC and nvJitLink stay behind this
// header: nothing here includes their headers, and nothing needs a GPU.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lowering/ptx_entry.h"
#include "support/diagnostics.h"
#include "support/source.h"

namespace orch {

// One kernel of a translation unit: the function `entry` names, as compiled, or with `patch`
// put at its PTX entry (lowering/ptx_entry.h: the wait that lets a programmatic edge enter it,
// an unrolled loop's guard).
struct KernelEntry {
  std::string name;   // the orch kernel name, for messages
  std::string entry;  // name expression: "scale<float>" or "scale"; empty means `name`
  lowering::PtxEntryPatch patch;
  // The guard's translation unit, defining `patch.guard` (extern "C" __device__): compiled with
  // -rdc for the same target and joined to the module (renamed where the user's code has the
  // name already: CompiledKernel::symbols says what the kernel is called).
  std::string guard_code;

  bool operator==(const KernelEntry& o) const {
    return name == o.name && entry == o.entry && patch == o.patch && guard_code == o.guard_code;
  }
};

// One translation unit: its code is compiled once, into one module (one image per arch), which
// holds every kernel in `entries`. So the kernels of one source share its `__device__`,
// `__constant__` and `__managed__` objects, as they would built by nvcc, whatever orchc does at
// their entries: an entry with a patch is patched in place where nothing needs the function
// unpatched, else it is a copy of the function under a name of its own in the same module.
struct KernelSource {
  std::string name;       // for messages: the orch kernel, or the kernels, it holds
  std::string code;       // the verbatim source text (not dedented: columns map 1:1)
  std::string file_name;  // given to NVRTC; quoted #includes resolve from its directory
  // The kernels it must hold. Empty: one, `name` as compiled.
  std::vector<KernelEntry> entries;
  // The caller knows from `cond`/`graph` parameters; the code is also scanned for device
  // runtime calls, since a whole .cu file needs -rdc once any kernel in it uses them.
  bool uses_device_runtime = false;
  // Likewise for NVSHMEM's device API (nvshmem_*, nvshmemx_*, <nvshmem.h>): -rdc, NVSHMEM's
  // headers, a CUBIN linked with libnvshmem_device.a and no PTX (lowering/nvshmem.h).
  bool uses_nvshmem = false;
  // Where the code came from, to map NVRTC's `file(LINE)` back: for inline sources the .orch
  // file, the line and column of the code's first character; for a `from` file the .cu file
  // registered in the SourceManager, line 1, column 1. `origin` also locates whole-kernel
  // errors (a link failure, an unparsable log), so it should span the kernel declaration.
  SourceRange origin;
  uint32_t first_line_in_origin = 1;
  uint32_t first_col_in_origin = 1;
  std::vector<std::string> include_dirs;
  // Code that joins several kernels (the module of generated kernels): from `first_line` of
  // the code on, messages map to `origin` as a whole, the statement that kernel implements.
  // Sorted by first_line; when set, it replaces the line arithmetic above.
  struct Segment {
    uint32_t first_line = 1;
    SourceRange origin;
  };
  std::vector<Segment> segments;
};

struct KernelImage {
  std::string arch;   // "sm_90"
  std::string cubin;  // ELF bytes, ready for cudaLibraryLoadData
  bool from_cache = false;
};

struct CompiledKernel {
  std::string name;
  // The symbol to look up for each of KernelSource::entries, in order (one when it was empty):
  // "scale", "_Z5scaleIfEvjT_PS0_", or a patched copy's own name.
  std::vector<std::string> symbols;
  std::string lowered_name;         // symbols[0]
  std::vector<KernelImage> cubins;  // in CompileOptions::archs order
  std::string ptx;                  // for ptx_arch, so GPUs newer than every CUBIN can JIT
  std::string ptx_arch;             // "compute_90"
  // Device-runtime kernels: the CUBINs are fully linked with cudadevrt (nvJitLink), but the
  // PTX is the relocatable -rdc output and still names cudadevrt's symbols. nvJitLink cannot
  // emit linked PTX: its -ptx output needs every input as LTO-IR, and libcudadevrt.a holds
  // only CUBINs. Measured on an H200, driver 580: cudaLibraryLoadData JITs this PTX as it is
  // and the driver resolves the device runtime itself (countdown's step ran its WHILE loop to
  // the end, lazy and eager loading alike); linking it with libcudadevrt.a through cuLink*
  // first works too. ptx_relocatable says which kind of PTX a loader holds. (The PTX that
  // SharedMemoryCode::relocatable takes is -rdc output too, but names nothing outside its unit
  // but what whole-program PTX names, so it loads as any PTX and leaves this false.)
  bool device_runtime = false;
  bool ptx_relocatable = false;
  // Calls NVSHMEM: CUBINs only (no PTX), linked with NVSHMEM's device library of this version
  // ("3.4.5"), which the host library the runtime loads must match exactly.
  bool nvshmem = false;
  std::string nvshmem_version;
  std::string log;            // NVRTC and nvJitLink logs, as they came
  // Which of nvcc's code a unit that touches shared memory took, and why, where
  // SharedMemoryCode::automatic chose ("relocatable-whole-ptx: ..."); empty otherwise.
  std::string code_choice;
  unsigned cache_hits = 0;    // images (CUBINs and the PTX) read from the cache
  unsigned cache_misses = 0;  // images compiled while a cache was in use
};

// What a translation unit that touches shared memory is compiled to where nvcc gives its PTX
// (CompileOptions::use_nvcc). Units that touch no shared memory, and units where NVRTC's PTX is
// kept, compile the same in every mode; so do device-runtime units, whose PTX is nvcc's -rdc
// code linked by nvJitLink in every mode.
enum class SharedMemoryCode {
  // The default: per unit, relocatable_whole_ptx where its PTX has a loop of multiply-adds on
  // shared-memory loads, whole_program otherwise (auto_shared_memory_code).
  automatic,
  // nvcc's whole-program PTX, compiled whole by ptxas (what `nvcc -cubin` makes).
  whole_program,
  // nvcc's relocatable PTX (-rdc=true), linked by nvJitLink (ptxas -c): what `nvcc -rdc=true`
  // and nvlink make, the code of the by-hand binaries of bench/.
  relocatable,
  // nvcc's whole-program PTX, linked by nvJitLink (ptxas -c): the PTX of the first, compiled as
  // the second is.
  relocatable_whole_ptx,
};
// "auto", "whole-program", "relocatable", "relocatable-whole-ptx": orchc's --shared-memory-code
// values.
const char* to_string(SharedMemoryCode code);
// The mode a --shared-memory-code value names; false for anything else.
bool parse_shared_memory_code(const std::string& text, SharedMemoryCode* out);

// What `automatic` compiles a unit to, from nvcc's whole-program PTX of it, and why in a phrase
// (printed with the lowered program: --print-passes). Compiled whole, ptxas schedules a loop's shared-memory loads one at a time,
// each consumed before the next issues; linked by nvJitLink (ptxas -c), the same PTX keeps
// several in flight (docs/performance.md, "MoE against by hand": the MoE expert kernel 1.27x
// and the SGEMM 1.42x faster). Where no loop feeds multiply-adds from shared memory (the heat
// solver's reductions), the whole-program code was as fast or faster (2.3% at 1024^2), so it stays.
SharedMemoryCode auto_shared_memory_code(const std::string& ptx, std::string* why);

struct CompileOptions {
  std::vector<std::string> archs;  // {"sm_80", "sm_90"}; PTX is made for the newest
  std::string cache_dir;           // empty: no cache; default_kernel_cache_dir() for the usual
  bool use_cache = true;           // false: neither read nor write the cache
  unsigned jobs = 0;               // worker threads; 0: hardware concurrency
  std::vector<std::string> extra_flags;  // more NVRTC options, e.g. "-lineinfo"
  // A translation unit whose code uses shared memory takes its PTX from the toolkit's nvcc
  // ($ORCH_NVCC; "off": none) where nvcc runs: NVRTC 13.0 addresses shared memory with 64-bit
  // pointers, nvcc with 32-bit ones, and its code can be much better (kernel_toolchain.cpp,
  // nvcc_ptx). NVRTC still compiles the unit first (diagnostics, lowered names), and its PTX is
  // used where nvcc is missing or fails. Not with extra_flags. false: NVRTC's PTX always.
  bool use_nvcc = true;
  // Which of nvcc's code such a unit takes (docs/performance.md, "MoE against by hand").
  SharedMemoryCode shared_memory_code = SharedMemoryCode::automatic;
  // NVSHMEM's folder (include/nvshmem.h, lib/libnvshmem_device.a) for kernels that call it;
  // empty: $ORCH_NVSHMEM_HOME, else $NVSHMEM_HOME. Looked for only when a kernel needs it.
  std::string nvshmem_home;
};

// One result per source, in order; nullopt where the kernel failed (its diagnostics say why).
// Diagnostics come out in kernel order whatever `jobs` is: E0901/W0901 from NVRTC's log at the
// line and column they name, E0902 for link failures, E0111 for an unusable arch list, E0904
// where a kernel calls NVSHMEM and NVSHMEM is not found.
std::vector<std::optional<CompiledKernel>> compile_kernels(const std::vector<KernelSource>& sources,
                                                           const CompileOptions& options,
                                                           DiagnosticEngine& diags);

// $ORCH_CACHE_DIR, else $XDG_CACHE_HOME/orch/kernels, else ~/.cache/orch/kernels; empty when
// none of them can be formed (no HOME).
std::string default_kernel_cache_dir();

}  // namespace orch
