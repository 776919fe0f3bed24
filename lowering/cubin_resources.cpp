#include "lowering/cubin_resources.h"

#include <cstring>
#include <vector>

namespace orch::lowering {

namespace {

// ELF64 (System V gABI) and the NVIDIA sections ptxas writes. The .nv.info attribute codes
// (EIATTR_*) are those cuobjdump -elf names; each was checked against the driver's view of the
// same kernel on an H200 (lowering/cubin_resources_test.cpp).
constexpr uint32_t kShtSymtab = 2;
constexpr uint32_t kShtNvInfo = 0x70000000;  // SHT_LOPROC: .nv.info and .nv.info.<kernel>
constexpr uint8_t kEiattrMaxThreads = 0x05;     // u32[3], __launch_bounds__ (.maxntid)
constexpr uint8_t kEiattrRegcount = 0x2f;       // u32 symbol, u32 registers
constexpr uint8_t kEiattrCtaPerCluster = 0x3d;  // u32[3], __cluster_dims__ (.reqnctapercluster)
// Entry formats: no value, a byte, a half-word, or a u16 size and that many bytes.
constexpr uint8_t kEifmtNval = 1, kEifmtBval = 2, kEifmtHval = 3, kEifmtSval = 4;
// Where a CUBIN's kernels address the driver's reserved shared memory (the module references
// .nv.reservedSmem.offset0: sm_90 and newer), each kernel's .nv.shared section starts with it.
// .nv.reservedSmem.cap says how large it is where ptxas writes it (sm_100); sm_90's CUBINs do
// not, and there it is 1024 bytes (CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK on an
// H200; the section was 1024 bytes larger than CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES).
constexpr uint64_t kDefaultReservedShared = 1024;

struct Section {
  std::string name;
  uint32_t type = 0, link = 0, info = 0;
  uint64_t offset = 0, size = 0;
};

struct Symbol {
  std::string name;
  uint64_t value = 0;
};

class Reader {
 public:
  explicit Reader(std::string_view b) : b_(b) {}

  bool run(std::map<std::string, KernelResources>* out) {
    if (b_.size() < 64 || std::memcmp(b_.data(), "\x7f" "ELF", 4) != 0) return fail("not an ELF image");
    if (u8(4) != 2 || u8(5) != 1) return fail("not a 64-bit little-endian ELF image");
    const uint64_t shoff = u64(0x28);
    const uint16_t shentsize = u16(0x3a), shnum = u16(0x3c), shstrndx = u16(0x3e);
    if (shentsize < 64 || !within(shoff, uint64_t{shentsize} * shnum)) return fail("section headers outside the image");
    if (shstrndx >= shnum) return fail("no section name table");
    sections_.resize(shnum);
    for (uint16_t i = 0; i < shnum; ++i) {
      const uint64_t h = shoff + uint64_t{i} * shentsize;
      Section& s = sections_[i];
      s.type = u32(h + 4);
      s.offset = u64(h + 24);
      s.size = u64(h + 32);
      s.link = u32(h + 40);
      s.info = u32(h + 44);
      name_offsets_.push_back(u32(h));
      if (s.type != 8 /* SHT_NOBITS */ && !within(s.offset, s.size)) return fail("a section outside the image");
    }
    const Section& names = sections_[shstrndx];
    for (uint16_t i = 0; i < shnum; ++i)
      if (!string_at(names, name_offsets_[i], &sections_[i].name)) return fail("a section name outside its table");
    if (!read_symbols()) return false;

    bool addresses_reserved = false;
    std::optional<uint64_t> reserved_cap;
    for (const Symbol& s : symbols_) {
      if (s.name == ".nv.reservedSmem.offset0") addresses_reserved = true;
      if (s.name == ".nv.reservedSmem.cap") reserved_cap = s.value;
    }
    const uint64_t reserved = addresses_reserved ? reserved_cap.value_or(kDefaultReservedShared) : 0;

    // Kernels: function symbols with a .nv.info.<name> section (device functions have none).
    std::map<uint32_t, std::string> kernel_of_text;  // .text section index -> kernel
    for (const Section& s : sections_) {
      if (s.type != kShtNvInfo || s.name.rfind(".nv.info.", 0) != 0) continue;
      const std::string kernel = s.name.substr(9);
      (*out)[kernel];
      kernel_of_text[s.info] = kernel;
    }
    for (const Section& s : sections_) {
      if (s.type != kShtNvInfo || s.name.rfind(".nv.info", 0) != 0) continue;
      const bool global = s.name == ".nv.info";
      const std::string kernel = global ? "" : s.name.substr(9);
      uint64_t p = s.offset;
      const uint64_t end = s.offset + s.size;
      while (p + 4 <= end) {
        const uint8_t format = u8(p), attribute = u8(p + 1);
        // Every format but SVAL keeps its value (if any) in the entry's last two bytes.
        uint64_t value = p + 2, size = 2;
        if (format == kEifmtSval) {
          size = u16(p + 2);
          value = p + 4;
        } else if (format != kEifmtNval && format != kEifmtBval && format != kEifmtHval) {
          return fail("an attribute of unknown format in " + s.name);
        }
        if (value + size > end) return fail("an attribute past the end of " + s.name);
        if (format == kEifmtSval) {
          if (attribute == kEiattrRegcount && size >= 8) {
            const uint32_t sym = u32(value);
            if (sym < symbols_.size() && out->count(symbols_[sym].name))
              (*out)[symbols_[sym].name].registers = u32(value + 4);
          } else if (!global && attribute == kEiattrMaxThreads && size >= 12) {
            const uint64_t t = uint64_t{u32(value)} * u32(value + 4) * u32(value + 8);
            (*out)[kernel].max_threads = t > 0xffffffffu ? 0xffffffffu : static_cast<uint32_t>(t);
          } else if (!global && attribute == kEiattrCtaPerCluster && size >= 12) {
            for (int d = 0; d < 3; ++d) (*out)[kernel].cluster[d] = u32(value + 4 * d);
          }
        }
        p = value + size;
      }
    }
    for (const Section& s : sections_) {
      if (s.name.rfind(".nv.shared.", 0) != 0) continue;
      auto k = kernel_of_text.find(s.info);
      if (k == kernel_of_text.end()) continue;  // .nv.shared.reserved.N and module-scope shared
      (*out)[k->second].static_shared = s.size > reserved ? s.size - reserved : 0;
    }
    // sm_50 to sm_6x CUBINs keep the register count in the kernel's .text section header.
    for (auto& [text, kernel] : kernel_of_text)
      if ((*out)[kernel].registers == 0 && text < sections_.size())
        (*out)[kernel].registers = sections_[text].info >> 24;
    return true;
  }

  std::string error;

 private:
  bool fail(std::string m) {
    error = std::move(m);
    return false;
  }
  bool within(uint64_t offset, uint64_t size) const {
    return offset <= b_.size() && size <= b_.size() - offset;
  }
  // Reads past the end answer 0; callers check `within` for whatever they walk.
  uint8_t u8(uint64_t at) const { return at < b_.size() ? static_cast<uint8_t>(b_[at]) : 0; }
  uint16_t u16(uint64_t at) const { return static_cast<uint16_t>(u8(at) | u8(at + 1) << 8); }
  uint32_t u32(uint64_t at) const { return u16(at) | static_cast<uint32_t>(u16(at + 2)) << 16; }
  uint64_t u64(uint64_t at) const { return u32(at) | static_cast<uint64_t>(u32(at + 4)) << 32; }

  bool string_at(const Section& table, uint64_t offset, std::string* out) const {
    if (offset >= table.size) return false;
    const uint64_t start = table.offset + offset, end = table.offset + table.size;
    uint64_t p = start;
    while (p < end && b_[p] != '\0') ++p;
    if (p == end) return false;
    *out = std::string(b_.substr(start, p - start));
    return true;
  }

  bool read_symbols() {
    for (const Section& s : sections_) {
      if (s.type != kShtSymtab) continue;
      if (s.link >= sections_.size()) return fail("a symbol table without its names");
      const Section& names = sections_[s.link];
      for (uint64_t p = s.offset; p + 24 <= s.offset + s.size; p += 24) {
        Symbol sym;
        if (!string_at(names, u32(p), &sym.name)) return fail("a symbol name outside its table");
        sym.value = u64(p + 8);
        symbols_.push_back(std::move(sym));
      }
      return true;
    }
    return fail("no symbol table");
  }

  std::string_view b_;
  std::vector<Section> sections_;
  std::vector<uint32_t> name_offsets_;
  std::vector<Symbol> symbols_;
};

}  // namespace

std::optional<std::map<std::string, KernelResources>> read_cubin_resources(std::string_view elf,
                                                                           std::string* error) {
  std::map<std::string, KernelResources> out;
  Reader r(elf);
  if (!r.run(&out)) {
    if (error) *error = r.error;
    return std::nullopt;
  }
  return out;
}

uint32_t max_threads_for_registers(uint32_t registers, const RegisterFile& rf) {
  if (registers == 0 || rf.allocation_unit == 0 || rf.partitions == 0) return UINT32_MAX;
  const uint64_t unit = rf.allocation_unit;
  const uint64_t per_warp = (uint64_t{registers} * 32 + unit - 1) / unit * unit;
  const uint64_t warps = rf.partitions * (uint64_t{rf.per_block} / rf.partitions / per_warp);
  return static_cast<uint32_t>(warps * 32);
}

}  // namespace orch::lowering
