// NVRTC and nvJitLink, loaded when orchc first calls them instead of when it starts. The two
// libraries are about 200 MB of code and 340,000 relocations: loading them was most of a warm
// orchc's time (about 35 ms of 40 on the 2-core development machine), and a compile that the
// artifact cache answers, a --check or an --emit never calls them. toolkit_libs.cpp defines
// every NVRTC and nvJitLink function orch_lowering calls, each forwarding to the library loaded
// with dlopen on first use; linked with --as-needed, orchc then does not need either library
// to start (a test checks its dynamic section).
//
// Where a library is loaded from: the first folder of LD_LIBRARY_PATH that holds it, else the
// folder orchc was linked against (where CMake found the CUDA toolkit), else wherever the
// dynamic loader finds it by name (ld.so.cache, the system folders).
#pragma once

#include <string>

namespace orch::orchc {

enum class ToolkitLib { Nvrtc, NvJitLink };

// What identifies the library orchc uses: its real path, size, modification time, inode and
// device, for the artifact cache's key. Found without loading the library when it is in
// LD_LIBRARY_PATH or the folder orchc was linked against; otherwise the library is loaded and
// asked where it came from. Empty when it cannot be found at all.
std::string toolkit_library_identity(ToolkitLib lib);

// False when the library was loaded from some file other than the one
// toolkit_library_identity() names (then a cache entry would describe the wrong library).
bool toolkit_library_consistent(ToolkitLib lib);

}  // namespace orch::orchc
