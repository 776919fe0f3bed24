#include "lowering/nvshmem.h"

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "support/file_observer.h"

namespace orch::nvshmem {

namespace fs = std::filesystem;

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

bool regular_file(const fs::path& p) {
  std::error_code ec;
  const bool is = fs::is_regular_file(p, ec);
  observe_file_flag(FileFact::RegularFile, p.string(), is);
  return is;
}

// "3.4.5" from the NVSHMEM_VENDOR_{MAJOR,MINOR,PATCH}_VERSION defines; empty if unreadable.
std::string read_version(const fs::path& header) {
  std::ifstream in(header);
  if (!in) return {};
  std::stringstream text;
  text << in.rdbuf();
  const std::string s = text.str();
  observe_file(FileFact::Contents, header.string(), s);
  std::string parts[3];
  const char* names[3] = {"MAJOR", "MINOR", "PATCH"};
  for (int i = 0; i < 3; ++i) {
    std::smatch m;
    const std::regex re(std::string("#define\\s+NVSHMEM_VENDOR_") + names[i] + "_VERSION\\s+([0-9]+)");
    if (!std::regex_search(s, m, re)) return {};
    parts[i] = m[1];
  }
  return parts[0] + "." + parts[1] + "." + parts[2];
}

}  // namespace

DeviceLibrary find_device_library(const std::string& explicit_home) {
  DeviceLibrary d;
  if (!explicit_home.empty()) {
    d.home = explicit_home;
    d.from = "--nvshmem";
  } else if (!env("ORCH_NVSHMEM_HOME").empty()) {
    d.home = env("ORCH_NVSHMEM_HOME");
    d.from = "ORCH_NVSHMEM_HOME";
  } else if (!env("NVSHMEM_HOME").empty()) {
    d.home = env("NVSHMEM_HOME");
    d.from = "NVSHMEM_HOME";
  } else {
    d.problem = "NVSHMEM was not found: set ORCH_NVSHMEM_HOME (or NVSHMEM_HOME, or orchc --nvshmem) "
                "to the folder that holds include/nvshmem.h and lib/libnvshmem_device.a (the "
                "nvidia-nvshmem-cu13 3.4.5 wheel's nvidia/nvshmem)";
    return d;
  }
  const fs::path home(d.home);
  const fs::path header = home / "include" / "nvshmem.h";
  const fs::path lib = home / "lib" / "libnvshmem_device.a";
  std::string missing;
  if (!regular_file(header)) missing = header.string();
  if (!regular_file(lib)) missing += (missing.empty() ? "" : " and ") + lib.string();
  if (!missing.empty()) {
    d.problem = "NVSHMEM at '" + d.home + "' (" + d.from + ") is incomplete: " + missing +
                " not found; it needs include/nvshmem.h and lib/libnvshmem_device.a";
    return d;
  }
  d.include_dir = (home / "include").string();
  d.device_lib = lib.string();
  std::error_code ec;
  d.device_lib_size = fs::file_size(lib, ec);
  auto mtime = fs::last_write_time(lib, ec);
  if (!ec) d.device_lib_mtime = static_cast<int64_t>(mtime.time_since_epoch().count());
  observe_file(FileFact::SizeAndTime, d.device_lib,
               std::to_string(d.device_lib_size) + " " + std::to_string(d.device_lib_mtime));
  d.version = read_version(home / "include" / "non_abi" / "nvshmem_version.h");
  if (d.version.empty())
    d.problem = "NVSHMEM at '" + d.home + "' (" + d.from +
                ") has no readable include/non_abi/nvshmem_version.h: its version is unknown";
  return d;
}

bool mentions_nvshmem(const std::string& code) {
  auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t i = 0; i < code.size();) {
    if (!ident(code[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < code.size() && ident(code[j])) ++j;
    // An identifier (not the tail of one): nvshmem_..., nvshmemx_...; `nvshmem.h` reads as the
    // identifier `nvshmem` followed by '.'.
    if (code.compare(i, 7, "nvshmem") == 0) {
      const std::string word = code.substr(i, j - i);
      if (word.rfind("nvshmem_", 0) == 0 || word.rfind("nvshmemx_", 0) == 0) return true;
      if ((word == "nvshmem" || word == "nvshmemx") && code.compare(j, 2, ".h") == 0) return true;
    }
    i = j;
  }
  return false;
}

std::string nvrtc_prelude(const std::string& file_name) {
  std::string quoted;
  for (char c : file_name) {
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += c;
  }
  return "#include <cuda/std/type_traits>\n"
         "namespace std { using cuda::std::is_integral; using cuda::std::is_signed; "
         "using cuda::std::is_unsigned; }\n"
         "#line 1 \"" + quoted + "\"\n";
}

std::string nvrtc_postlude() {
  return "\n#ifdef _NVSHMEMI_TRANSFER_H_\n"
         "template <threadgroup_t SCOPE>\n"
         "__device__ void nvshmemi_transfer_put_signal(void*, void*, size_t, void*, unsigned long, nvshmemi_amo_t, "
         "int, bool);\n"
         "template <threadgroup_t SCOPE>\n"
         "__device__ void nvshmemi_transfer_put_signal(void* rptr, void* lptr, size_t bytes, void* sig_addr,\n"
         "    unsigned long long signal, nvshmemi_amo_t sig_op, int pe, bool is_nbi) {\n"
         "  nvshmemi_transfer_put_signal<SCOPE>(rptr, lptr, bytes, sig_addr, static_cast<unsigned long>(signal), "
         "sig_op, pe, is_nbi);\n"
         "}\n"
         "#endif\n";
}

}  // namespace orch::nvshmem
