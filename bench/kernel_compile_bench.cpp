// Kernel compile times for the examples' kernels: cold (no cache) and warm (a
// second run over a filled cache), with one worker and with N. Usage:
//   kernel_compile_bench [--arch sm_80,sm_90,sm_100] [--jobs N] [--repeat R] [--examples DIR]
//                        [--dump DIR]
// --dump writes each image (NAME.ARCH.cubin, NAME.compute_NN.ptx) and manifest.txt (name,
// lowered name, PTX relocatable 0/1 per line) to DIR instead of timing, for checks on a GPU.
// Kernel sources are found the simple way: the text between `source """` and `"""`, or the
// file named by `from "..."`, after each `kernel NAME(` in the .orch files.
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "lowering/kernel_compiler.h"

namespace fs = std::filesystem;
using orch::CompileOptions;
using orch::KernelSource;

namespace {

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::vector<KernelSource> kernels_of(const fs::path& orch_path) {
  std::vector<KernelSource> out;
  std::string text = read_file(orch_path);
  for (size_t at = text.find("kernel "); at != std::string::npos;
       at = text.find("kernel ", at + 1)) {
    if (at > 0 && text[at - 1] != '\n') continue;
    size_t paren = text.find('(', at);
    size_t close = text.find(')', paren);
    if (paren == std::string::npos || close == std::string::npos) break;
    KernelSource k;
    k.name = text.substr(at + 7, paren - at - 7);
    std::string params = text.substr(paren, close - paren);
    k.uses_device_runtime =
        params.find(": cond") != std::string::npos || params.find(": graph") != std::string::npos;
    size_t src = text.find("source \"\"\"", close);
    size_t from = text.find("from \"", close);
    size_t next = text.find("\nkernel ", close);
    if (from != std::string::npos && (src == std::string::npos || from < src) &&
        (next == std::string::npos || from < next)) {
      size_t name_end = text.find('"', from + 6);
      fs::path cu = orch_path.parent_path() / text.substr(from + 6, name_end - from - 6);
      k.file_name = cu.string();
      k.code = read_file(cu);
    } else if (src != std::string::npos) {
      size_t begin = src + 10, end = text.find("\"\"\"", begin);
      k.file_name = orch_path.filename().string();
      k.code = text.substr(begin, end - begin);
    } else {
      continue;
    }
    out.push_back(std::move(k));
  }
  return out;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> archs = {"sm_80", "sm_90", "sm_100"};
  unsigned jobs = std::max(1u, std::thread::hardware_concurrency());
  int repeat = 3;
  std::string examples = ORCH_EXAMPLES_DIR;
  std::string dump;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--arch")
      archs = split(argv[i + 1]);
    else if (flag == "--jobs")
      jobs = static_cast<unsigned>(std::max(1, std::atoi(argv[i + 1])));
    else if (flag == "--repeat")
      repeat = std::max(1, std::atoi(argv[i + 1]));
    else if (flag == "--examples")
      examples = argv[i + 1];
    else if (flag == "--dump")
      dump = argv[i + 1];
    else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return 2;
    }
  }

  std::vector<KernelSource> sources;
  for (const char* f :
       {"saxpy.orch", "branch.orch", "countdown.orch", "jacobi.orch", "moe.orch", "scheduler.orch"})
    for (KernelSource& k : kernels_of(fs::path(examples) / f))
      sources.push_back(std::move(k));
  size_t device_runtime = 0;
  for (const KernelSource& k : sources) device_runtime += k.uses_device_runtime;
  std::string arch_list;
  for (const std::string& a : archs) arch_list += (arch_list.empty() ? "" : ",") + a;
  std::printf("%zu kernels (%zu declared device-runtime), archs %s + PTX, %u hardware threads\n",
              sources.size(), device_runtime, arch_list.c_str(),
              std::thread::hardware_concurrency());

  if (!dump.empty()) {
    CompileOptions o;
    o.archs = archs;
    o.use_cache = false;
    orch::DiagnosticEngine diags;
    auto out = orch::compile_kernels(sources, o, diags);
    orch::SourceManager sm;
    std::fprintf(stderr, "%s",
                 orch::format_diagnostics(diags.all(), sm, orch::DiagnosticFormat::Text).c_str());
    fs::create_directories(dump);
    std::ofstream manifest(fs::path(dump) / "manifest.txt");
    for (const auto& k : out) {
      if (!k) return 1;
      for (const orch::KernelImage& img : k->cubins)
        std::ofstream(fs::path(dump) / (k->name + "." + img.arch + ".cubin"), std::ios::binary)
            << img.cubin;
      std::ofstream(fs::path(dump) / (k->name + "." + k->ptx_arch + ".ptx"), std::ios::binary)
          << k->ptx;
      manifest << k->name << " " << k->lowered_name << " " << k->ptx_arch << " "
               << k->ptx_relocatable << "\n";
    }
    return manifest ? 0 : 1;
  }

  std::string cache_root = (fs::temp_directory_path() / "orch_kernel_bench_XXXXXX").string();
  if (!mkdtemp(cache_root.data())) {
    std::perror("mkdtemp");
    return 1;
  }

  // Seconds of the fastest of `repeat` runs; `fresh_cache` empties the cache before each.
  auto time_run = [&](unsigned j, bool cache, bool fresh_cache, unsigned* hits) {
    double best = 1e30;
    for (int r = 0; r < repeat; ++r) {
      if (fresh_cache) {
        std::error_code ec;
        fs::remove_all(fs::path(cache_root) / "kernels", ec);
      }
      CompileOptions o;
      o.archs = archs;
      o.jobs = j;
      o.use_cache = cache;
      o.cache_dir = (fs::path(cache_root) / "kernels").string();
      orch::DiagnosticEngine diags;
      auto t0 = std::chrono::steady_clock::now();
      auto out = orch::compile_kernels(sources, o, diags);
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (diags.has_errors()) {
        orch::SourceManager sm;
        std::fprintf(
            stderr, "%s",
            orch::format_diagnostics(diags.all(), sm, orch::DiagnosticFormat::Text).c_str());
        std::exit(1);
      }
      *hits = 0;
      for (const auto& k : out) *hits += k ? k->cache_hits : 0;
      best = std::min(best, s);
    }
    return best;
  };

  struct Row {
    std::string mode;
    unsigned jobs;
    double seconds;
    unsigned hits;
  };
  std::vector<Row> rows;
  unsigned hits = 0;
  rows.push_back({"cold, no cache", 1, time_run(1, false, false, &hits), hits});
  rows.push_back({"cold, no cache", jobs, time_run(jobs, false, false, &hits), hits});
  rows.push_back({"cold, filling the cache", jobs, time_run(jobs, true, true, &hits), hits});
  rows.push_back({"warm cache", 1, time_run(1, true, false, &hits), hits});
  rows.push_back({"warm cache", jobs, time_run(jobs, true, false, &hits), hits});

  size_t images = sources.size() * (archs.size() + 1);
  std::printf("best of %d runs; %zu images per run (CUBINs + PTX)\n\n", repeat, images);
  std::printf("| %-24s | %4s | %9s | %13s | %10s |\n", "mode", "jobs", "seconds", "vs cold jobs=1",
              "cache hits");
  std::printf("|%s|%s|%s|%s|%s|\n", std::string(26, '-').c_str(), std::string(6, '-').c_str(),
              std::string(11, '-').c_str(), std::string(16, '-').c_str(),
              std::string(12, '-').c_str());
  for (const Row& r : rows)
    std::printf("| %-24s | %4u | %9.4f | %13.1fx | %10u |\n", r.mode.c_str(), r.jobs, r.seconds,
                rows[0].seconds / r.seconds, r.hits);
  std::printf("\nparallel speedup, cold: %.2fx with %u jobs; warm over cold (jobs=%u): %.0fx\n",
              rows[0].seconds / rows[1].seconds, jobs, jobs, rows[1].seconds / rows[4].seconds);

  std::error_code ec;
  fs::remove_all(cache_root, ec);
  return 0;
}
