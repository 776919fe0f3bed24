// A light look at a kernel's CUDA source text, for what the checker can tell without compiling
// it: where the kernel's `__global__` function is, and whether it launches kernels from the
// device (CUDA dynamic parallelism). Not a C++ parser: comments and string literals are masked,
// then names and brackets are matched. The compiled PTX (lowering/inspect_ptx.cpp) is the
// authority; this only finds what is certain in the text, so it reports no false positives.
#pragma once

#include <cstddef>
#include <string>

namespace orch {

struct KernelSourceScan {
  static constexpr size_t npos = std::string::npos;
  size_t signature = npos;  // offset of the kernel's name in its `__global__` definition
  size_t launch = npos;     // first `<<<` or cudaLaunchDevice* call inside that function's body
  size_t launch_length = 0;
  // `<<<` or a device-side launch call anywhere in the code outside comments and strings: in
  // helpers the kernel may call, in other kernels of the file, or in host code.
  bool mentions_launch = false;
};

// `entry` is the kernel's name or NVRTC name expression ("scale", "ns::scale<float>").
KernelSourceScan scan_kernel_source(const std::string& code, const std::string& entry);

}  // namespace orch
