// What a compiled kernel asks of each block it runs, read from its CUBIN (the ELF image the
// driver loads), so that launches the driver would refuse at instantiate are refused before:
// registers per thread, static shared memory, the `__launch_bounds__` thread count and the
// `__cluster_dims__` cluster shape. The same numbers the driver reports through
// cuFuncGetAttribute (NUM_REGS, SHARED_SIZE_BYTES, MAX_THREADS_PER_BLOCK, REQUIRED_CLUSTER_*),
// measured on an H200 (lowering/cubin_resources_test.cpp). CUDA-free: a reader of the ELF
// sections ptxas writes (.nv.info attributes, .nv.shared.<kernel>), bounds-checked, so a
// corrupted image is an error, never a crash.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace orch::lowering {

struct KernelResources {
  uint32_t registers = 0;      // per thread
  uint64_t static_shared = 0;  // bytes of __shared__ variables, without the driver's reserved part
  uint32_t max_threads = 0;    // __launch_bounds__ (x * y * z of .maxntid); 0: none
  uint32_t cluster[3] = {0, 0, 0};  // __cluster_dims__; all 0: none
  bool has_cluster() const { return cluster[0] != 0; }
  uint64_t cluster_size() const {
    return has_cluster() ? uint64_t{cluster[0]} * cluster[1] * cluster[2] : 1;
  }
};

// What a launch of a compiled kernel takes of an SM per block, the most of its archs' images
// (check_compiled_kernels records it on lir::Kernel::demand; launch_shape counts it).
// registers 0: not compiled yet, not counted.
struct BlockDemand {
  uint32_t registers = 0;
  uint64_t static_shared = 0;
};

// Every kernel (entry function) of the image by symbol; nullopt and `error` when it is not a
// 64-bit little-endian ELF image whose sections and attributes are within its bytes.
std::optional<std::map<std::string, KernelResources>> read_cubin_resources(std::string_view elf,
                                                                           std::string* error);

// A block's register file (target profile: max_registers_per_block, register_allocation_unit,
// register_file_partitions).
struct RegisterFile {
  uint32_t per_block = 65536;
  uint32_t allocation_unit = 256;  // registers, per warp
  uint32_t partitions = 4;
};

// The most threads a block of a kernel using `registers` per thread may have, in whole warps
// (what cuFuncGetAttribute(MAX_THREADS_PER_BLOCK) reports before `__launch_bounds__` and the
// 1024 limit): each warp takes registers * 32 rounded up to the allocation unit, and each of
// the SM's partitions holds the warps its share of the registers fits.
uint32_t max_threads_for_registers(uint32_t registers, const RegisterFile& rf);

}  // namespace orch::lowering
