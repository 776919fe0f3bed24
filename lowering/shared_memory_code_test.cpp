// CompileOptions::shared_memory_code (orchc --shared-memory-code): which of nvcc's code a unit
// that touches shared memory takes. NVRTC, nvcc and nvJitLink run for real (no GPU needed); the
// nvcc cases skip where no nvcc is found. What each mode's code costs on a GPU is measured by
// bench/moe_ab.py, not here.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "lowering/shared_memory_test_kernels.h"
#include "lowering/inspect_ptx.h"
#include "lowering/kernel_compiler.h"

namespace orch {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "orch_smc_XXXXXX").string();
    if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// The nvcc these tests compare with: $ORCH_NVCC, else $CUDA_HOME's, else /usr/local/cuda's; empty if none.
std::string test_nvcc() {
  const char* given = std::getenv("ORCH_NVCC");
  const char* home = std::getenv("CUDA_HOME");
  std::string p = given && *given ? given : home && *home ? std::string(home) + "/bin/nvcc" : "/usr/local/cuda/bin/nvcc";
  return access(p.c_str(), X_OK) == 0 ? p : std::string();
}

// nvcc's CUBIN of `code` for sm_90 (`nvcc -cubin FLAGS`), as a by-hand build compiles it.
std::string nvcc_cubin(const std::string& nvcc, const std::string& code, const std::string& flags) {
  TempDir dir;
  std::ofstream(dir.path() + "/k.cu", std::ios::binary) << code;
  const std::string cmd = "'" + nvcc + "' -cubin -arch=sm_90 -std=c++17 " + flags + " '" + dir.path() + "/k.cu' -o '" +
                          dir.path() + "/k.cubin' 2>&1";
  REQUIRE_MESSAGE(std::system(cmd.c_str()) == 0, cmd);
  return read_file(dir.path() + "/k.cubin");
}

// The bytes of the ELF section `name` (".text.expert_ffn": a kernel's SASS); empty if none.
std::string elf_section(const std::string& elf, const std::string& name) {
  auto u16 = [&](size_t at) { return uint64_t(uint8_t(elf[at])) | uint64_t(uint8_t(elf[at + 1])) << 8; };
  auto u32 = [&](size_t at) { return u16(at) | u16(at + 2) << 16; };
  auto u64 = [&](size_t at) { return u32(at) | u32(at + 4) << 32; };
  if (elf.size() < 64 || elf.compare(0, 4, "\x7f" "ELF") != 0) return {};
  const uint64_t shoff = u64(0x28), entsize = u16(0x3a), count = u16(0x3c), strndx = u16(0x3e);
  if (shoff + count * entsize > elf.size() || strndx >= count) return {};
  const uint64_t strtab = u64(shoff + strndx * entsize + 0x18);
  for (uint64_t i = 0; i < count; ++i) {
    const size_t sh = shoff + i * entsize;
    const uint64_t name_at = strtab + u32(sh), off = u64(sh + 0x18), size = u64(sh + 0x20);
    if (name_at >= elf.size() || off + size > elf.size()) continue;
    if (std::strncmp(elf.c_str() + name_at, name.c_str(), elf.size() - name_at) == 0) return elf.substr(off, size);
  }
  return {};
}

int elf_type(const std::string& image) {
  return image.size() > 17 ? static_cast<unsigned char>(image[16]) | (image[17] << 8) : -1;
}

KernelSource plain(std::string name, std::string code) {
  KernelSource s;
  s.name = name;
  s.file_name = name + ".cu";
  s.code = std::move(code);
  return s;
}

CompileOptions in_mode(SharedMemoryCode mode) {
  CompileOptions o;
  o.archs = {"sm_90"};
  o.use_cache = false;
  o.shared_memory_code = mode;
  return o;
}

constexpr SharedMemoryCode kModes[] = {SharedMemoryCode::whole_program, SharedMemoryCode::relocatable,
                                       SharedMemoryCode::relocatable_whole_ptx};

// The MoE expert kernel of bench/real_workloads.py, as in kernel_compiler_test.cpp: nvcc's
// whole-program PTX loads the even rows of xs in pairs (xs 16-byte aligned), its -rdc PTX one
// float at a time (xs 4-byte aligned).
const char* const kExpert = orch::lowering::test::kExpertFfn;

TEST_CASE("--shared-memory-code names its four modes and nothing else; auto is the default") {
  for (SharedMemoryCode m : {SharedMemoryCode::automatic, SharedMemoryCode::whole_program,
                             SharedMemoryCode::relocatable, SharedMemoryCode::relocatable_whole_ptx}) {
    SharedMemoryCode back = SharedMemoryCode::whole_program;
    CHECK(parse_shared_memory_code(to_string(m), &back));
    CHECK(back == m);
  }
  SharedMemoryCode untouched = SharedMemoryCode::relocatable;
  CHECK_FALSE(parse_shared_memory_code("rdc", &untouched));
  CHECK_FALSE(parse_shared_memory_code("", &untouched));
  CHECK(untouched == SharedMemoryCode::relocatable);
  CHECK(std::string(to_string(SharedMemoryCode::automatic)) == "auto");
  CHECK(CompileOptions{}.shared_memory_code == SharedMemoryCode::automatic);
}

TEST_CASE("each shared-memory mode gives the expert kernel the code nvcc gives it in that mode") {
  const std::string nvcc = test_nvcc();
  if (nvcc.empty()) {
    MESSAGE("SKIPPED: no nvcc (set ORCH_NVCC or CUDA_HOME)");
    return;
  }
  std::map<SharedMemoryCode, CompiledKernel> got;
  for (SharedMemoryCode m : kModes) {
    DiagnosticEngine diags;
    auto out = compile_kernels({plain("expert_ffn", kExpert)}, in_mode(m), diags);
    REQUIRE(out[0].has_value());
    CHECK(diags.all().empty());
    CHECK(elf_type(out[0]->cubins[0].cubin) == 2);  // linked, loadable as it is
    CHECK_FALSE(out[0]->ptx_relocatable);           // its PTX names nothing outside the unit
    got[m] = std::move(*out[0]);
  }
  const std::string& whole_ptx = got[SharedMemoryCode::whole_program].ptx;
  const std::string& rdc_ptx = got[SharedMemoryCode::relocatable].ptx;
  // The PTX: whole-program's pairs its loads, -rdc's does not; relocatable-whole-ptx keeps the
  // whole-program PTX.
  CHECK(whole_ptx.find(".extern .shared .align 16 .b8 xs[]") != std::string::npos);
  CHECK(whole_ptx.find("ld.shared.v2.f32") != std::string::npos);
  CHECK(rdc_ptx.find(".extern .shared .align 4 .b8 xs[]") != std::string::npos);
  CHECK(rdc_ptx.find("ld.shared.v2.f32") == std::string::npos);
  CHECK(got[SharedMemoryCode::relocatable_whole_ptx].ptx == whole_ptx);

  // The SASS: whole-program's is `nvcc -cubin`'s, relocatable's `nvcc -rdc=true -cubin`'s (the
  // by-hand binary's code: nvlink does not change a kernel that calls nothing).
  auto sass = [](const CompiledKernel& k) { return elf_section(k.cubins[0].cubin, ".text.expert_ffn"); };
  const std::string by_hand_whole = elf_section(nvcc_cubin(nvcc, kExpert, ""), ".text.expert_ffn");
  const std::string by_hand_rdc = elf_section(nvcc_cubin(nvcc, kExpert, "-rdc=true"), ".text.expert_ffn");
  REQUIRE_FALSE(by_hand_whole.empty());
  REQUIRE_FALSE(by_hand_rdc.empty());
  CHECK(by_hand_whole != by_hand_rdc);
  CHECK(sass(got[SharedMemoryCode::whole_program]) == by_hand_whole);
  CHECK(sass(got[SharedMemoryCode::relocatable]) == by_hand_rdc);
  // ptxas -c on the whole-program PTX: code of its own, neither of the two.
  const std::string mixed = sass(got[SharedMemoryCode::relocatable_whole_ptx]);
  CHECK_FALSE(mixed.empty());
  CHECK(mixed != by_hand_whole);
}

TEST_CASE("units without shared memory, and device-runtime units, compile the same in every mode") {
  if (test_nvcc().empty()) {
    MESSAGE("SKIPPED: no nvcc (set ORCH_NVCC or CUDA_HOME)");
    return;
  }
  const std::string scale = R"(extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
)";
  // Shared memory and a device graph launch: nvcc's -rdc PTX, linked by nvJitLink, in every mode.
  const std::string route = R"(extern "C" __global__ void route(const int* expert_of, int* counts, cudaGraphExec_t g) {
  __shared__ int hist[8];
  if (threadIdx.x < 8) hist[threadIdx.x] = 0;
  __syncthreads();
  atomicAdd(&hist[expert_of[threadIdx.x] & 7], 1);
  __syncthreads();
  if (threadIdx.x < 8) counts[threadIdx.x] = hist[threadIdx.x];
  if (threadIdx.x == 0 && hist[0] > 0) cudaGraphLaunch(g, cudaStreamGraphFireAndForget);
}
)";
  KernelSource r = plain("route", route);
  r.uses_device_runtime = true;
  std::vector<std::optional<CompiledKernel>> first;
  for (SharedMemoryCode m : kModes) {
    DiagnosticEngine diags;
    auto out = compile_kernels({plain("scale", scale), r}, in_mode(m), diags);
    CHECK(diags.all().empty());
    REQUIRE(out[0].has_value());
    REQUIRE(out[1].has_value());
    if (first.empty()) {
      first = std::move(out);
      CHECK(first[1]->ptx_relocatable);
      continue;
    }
    INFO("mode " << to_string(m));
    for (size_t i = 0; i < 2; ++i) {
      CHECK(out[i]->ptx == first[i]->ptx);
      CHECK(out[i]->cubins[0].cubin == first[i]->cubins[0].cubin);
      CHECK(out[i]->symbols == first[i]->symbols);
    }
  }
}

TEST_CASE("the shared-memory mode is part of the kernel cache key") {
  if (test_nvcc().empty()) {
    MESSAGE("SKIPPED: no nvcc (set ORCH_NVCC or CUDA_HOME)");
    return;
  }
  TempDir dir;
  const std::vector<KernelSource> sources = {plain("expert_ffn", kExpert)};
  auto compile = [&](SharedMemoryCode m) {
    CompileOptions o = in_mode(m);
    o.use_cache = true;
    o.cache_dir = dir.path();
    DiagnosticEngine diags;
    auto out = compile_kernels(sources, o, diags);
    CHECK_FALSE(diags.has_errors());
    REQUIRE(out[0].has_value());
    return std::move(*out[0]);
  };
  std::vector<CompiledKernel> cold;
  for (SharedMemoryCode m : kModes) {
    cold.push_back(compile(m));
    INFO("mode " << to_string(m));
    CHECK(cold.back().cache_misses == 2);  // the CUBIN and the PTX: no other mode's images
    CHECK(cold.back().cache_hits == 0);
  }
  CHECK(cold[0].cubins[0].cubin != cold[1].cubins[0].cubin);
  CHECK(cold[0].cubins[0].cubin != cold[2].cubins[0].cubin);
  CHECK(cold[1].cubins[0].cubin != cold[2].cubins[0].cubin);
  for (size_t i = 0; i < 3; ++i) {
    CompiledKernel warm = compile(kModes[i]);
    INFO("mode " << to_string(kModes[i]));
    CHECK(warm.cache_hits == 2);
    CHECK(warm.cubins[0].cubin == cold[i].cubins[0].cubin);
    CHECK(warm.ptx == cold[i].ptx);
  }
}

// ---- auto: relocatable-whole-ptx where a loop does multiply-adds on shared-memory loads --------

// A loop with a forward branch inside, a predicated backward branch, an integer mad (addressing,
// not counted), and a .func whose labels are its own.
const char* const kLoopPtx = R"(
.visible .entry k(
	.param .u32 k_param_0
)
{
	mov.u32 	%r1, 0;
$L__BB0_1:
	ld.shared.f32 	%f1, [%r2];
	ld.shared.v2.f32 	{%f2, %f3}, [%r3];
	fma.rn.f32 	%f4, %f1, %f2, %f4;
	mad.lo.s32 	%r5, %r1, 4, %r2;
	@%p1 bra 	$L__BB0_3;
	fma.rn.f32 	%f4, %f1, %f3, %f4;
$L__BB0_3:
	add.s32 	%r1, %r1, 1;
	setp.lt.u32 	%p2, %r1, 16;
	@%p2 bra.uni 	$L__BB0_1;
	ret;
}
.func  (.param .b32 func_retval0) f(
	.param .b32 f_param_0
)
{
$L__BB1_1:
	ld.global.f32 	%f1, [%rd1];
	fma.rn.f32 	%f2, %f1, %f1, %f2;
	@%p1 bra 	$L__BB1_1;
	bra.uni 	$L__BB0_1;
	ret;
}
)";

TEST_CASE("ptx_shared_memory_loop counts a loop's multiply-adds and shared loads") {
  const std::optional<lowering::PtxSharedLoop> loop = lowering::ptx_shared_memory_loop(kLoopPtx);
  REQUIRE(loop.has_value());
  CHECK(loop->function == "k");
  CHECK(loop->label == "$L__BB0_1");
  CHECK(loop->fmas == 2);          // not the integer mad.lo
  CHECK(loop->shared_loads == 2);  // f's loop loads global memory; its branch to k's label is not a loop of f
  std::string why;
  CHECK(auto_shared_memory_code(kLoopPtx, &why) == SharedMemoryCode::whole_program);
  CHECK(why == "loop $L__BB0_1 of k: 2 multiply-adds on 2 shared-memory loads (under 16 on 8)");

  // No loop at all, and a loop of shared loads without arithmetic (a copy, a reduction's tree).
  CHECK_FALSE(lowering::ptx_shared_memory_loop("").has_value());
  const std::string copy_loop = ".entry c()\n{\n$L__BB0_1:\n\tld.shared.u32 \t%r1, [%r2];\n\tst.global.u32 \t[%rd1], %r1;\n"
                                "\t@%p1 bra \t$L__BB0_1;\n}\n";
  CHECK_FALSE(lowering::ptx_shared_memory_loop(copy_loop).has_value());
  CHECK(auto_shared_memory_code(copy_loop, &why) == SharedMemoryCode::whole_program);
  CHECK(why == "no loop does multiply-adds on shared-memory loads");

  // 16 multiply-adds on 8 shared loads (ld.volatile.shared and ldmatrix count): relocated.
  std::string big = ".entry g()\n{\n$L__BB0_7:\n";
  for (int i = 0; i < 6; ++i) big += "\tld.shared.f32 \t%f1, [%r2];\n";
  big += "\tld.volatile.shared.f32 \t%f1, [%r2];\n\tldmatrix.sync.aligned.m8n8.x4.shared.b16 \t{%r1, %r2, %r3, %r4}, [%r5];\n";
  for (int i = 0; i < 16; ++i) big += "\tfma.rn.f32 \t%f3, %f1, %f2, %f3;\n";
  big += "\t@%p1 bra \t$L__BB0_7;\n}\n";
  CHECK(auto_shared_memory_code(big, &why) == SharedMemoryCode::relocatable_whole_ptx);
  CHECK(why == "loop $L__BB0_7 of g: 16 multiply-adds on 8 shared-memory loads");
}

const char* const kSgemm = orch::lowering::test::kSgemm;
const char* const kMaxChange = orch::lowering::test::kMaxChange;

TEST_CASE("auto: the expert kernel and the SGEMM take relocatable-whole-ptx code, the reduction whole-program code") {
  if (test_nvcc().empty()) {
    MESSAGE("SKIPPED: no nvcc (set ORCH_NVCC or CUDA_HOME)");
    return;
  }
  TempDir dir;
  struct Unit {
    const char* name;
    const char* code;
    SharedMemoryCode want;
    const char* why;
  };
  for (const Unit& u : {Unit{"expert_ffn", kExpert, SharedMemoryCode::relocatable_whole_ptx,
                             "relocatable-whole-ptx: loop $L__BB0_"},
                        Unit{"sgemm", kSgemm, SharedMemoryCode::relocatable_whole_ptx,
                             "relocatable-whole-ptx: loop $L__BB0_2 of sgemm: 256 multiply-adds on 128 shared-memory loads"},
                        Unit{"max_change", kMaxChange, SharedMemoryCode::whole_program,
                             "whole-program: no loop does multiply-adds on shared-memory loads"}}) {
    INFO("unit " << std::string(u.name));
    auto compile = [&](SharedMemoryCode m, bool cache) {
      CompileOptions o = in_mode(m);
      o.use_cache = cache;
      o.cache_dir = cache ? dir.path() : "";
      DiagnosticEngine diags;
      auto out = compile_kernels({plain(u.name, u.code)}, o, diags);
      CHECK_FALSE(diags.has_errors());
      REQUIRE(out[0].has_value());
      return std::move(*out[0]);
    };
    const CompiledKernel chosen = compile(SharedMemoryCode::automatic, true);
    const CompiledKernel want = compile(u.want, false);
    CHECK(chosen.cubins[0].cubin == want.cubins[0].cubin);
    CHECK(chosen.ptx == want.ptx);
    INFO("code_choice: " << chosen.code_choice);
    CHECK(chosen.code_choice.rfind(u.why, 0) == 0);
    CHECK(want.code_choice.empty());  // a mode asked for is not a choice
    // A cache hit compiles nothing and says the same.
    const CompiledKernel warm = compile(SharedMemoryCode::automatic, true);
    CHECK(warm.cache_hits == 2);
    CHECK(warm.cubins[0].cubin == chosen.cubins[0].cubin);
    CHECK(warm.code_choice == chosen.code_choice);
  }
}

}  // namespace
}  // namespace orch
