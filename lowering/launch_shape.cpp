#include "lowering/launch_shape.h"

#include <algorithm>

namespace orch::lowering {

namespace {

// The value of `code` with every param at its default (and the family index at `member`, where
// given); nullopt when a leaf is not known before the launch (a device scalar, the rank, a param
// without a default) or it does not fit in u64.
template <class DefaultOf>
std::optional<uint64_t> at_defaults(const std::vector<expr::Instr>& code, DefaultOf&& default_of,
                                    std::optional<uint32_t> member = std::nullopt) {
  if (code.empty()) return std::nullopt;
  expr::Evaluation v = expr::evaluate(code, [&](const expr::Instr& in) -> std::optional<expr::Value> {
    if (in.kind == expr::InstrKind::Param) return default_of(in.ref);
    if (in.kind == expr::InstrKind::FamilyIndex && member) return expr::Value::of_uint(in.type, *member);
    return std::nullopt;
  });
  if (!v.known()) return std::nullopt;
  if (expr::is_float(v.type)) return std::nullopt;
  if (expr::is_signed(v.type) && static_cast<int64_t>(v.value.u64()) < 0) return std::nullopt;
  return v.value.u64();
}

std::optional<uint64_t> product(std::optional<uint64_t> a, std::optional<uint64_t> b, std::optional<uint64_t> c) {
  if (!a || !b || !c) return std::nullopt;
  const unsigned __int128 p = static_cast<unsigned __int128>(*a) * *b * *c;
  if (p > UINT64_MAX) return std::nullopt;
  return static_cast<uint64_t>(p);
}

}  // namespace

// The most blocks of `threads` threads, `shared` bytes of dynamic shared memory and `demand`
// one SM holds at once (cudaOccupancyMaxActiveBlocksPerMultiprocessor's rules, cuda_occupancy.h:
// threads in whole warps; shared memory with the driver's reserve, in allocation units;
// registers per warp in allocation units, each of the SM's partitions holding the warps its
// share fits), times the SMs; `limit` names the bound that decided.
uint64_t resident_blocks(const Residency& r, std::optional<uint64_t> threads, uint64_t shared,
                         const BlockDemand& demand, const char** limit) {
  *limit = "";
  if (!r.sms || !threads || *threads == 0 || !r.blocks_per_sm) return 0;
  const uint64_t warps = (*threads + 31) / 32;
  uint64_t per_sm = r.blocks_per_sm;
  *limit = "blocks";
  auto bound = [&](uint64_t n, const char* why) {
    if (n < per_sm) per_sm = n, *limit = why;
  };
  bound(r.threads_per_sm / (warps * 32), "threads");
  const uint64_t unit = std::max<uint32_t>(r.shared_allocation_unit, 1);
  const uint64_t taken = shared + demand.static_shared + r.reserved_shared_per_block;
  if (taken > 0 && r.shared_per_sm) bound(r.shared_per_sm / ((taken + unit - 1) / unit * unit), "shared memory");
  if (demand.registers && r.registers_per_sm && r.registers.partitions) {
    const uint64_t au = std::max<uint32_t>(r.registers.allocation_unit, 1);
    const uint64_t per_warp = (uint64_t{demand.registers} * 32 + au - 1) / au * au;
    const uint64_t warps_per_sm = (r.registers_per_sm / r.registers.partitions / per_warp) * r.registers.partitions;
    bound(warps_per_sm / warps, "registers");
  }
  return per_sm * r.sms;
}

Residency residency_of(const TargetProfile& profile) {
  Residency r;
  r.arch = profile.name;
  r.sms = profile.max_sm_count;
  r.threads_per_sm = profile.max_threads_per_sm;
  r.blocks_per_sm = profile.max_blocks_per_sm;
  r.shared_per_sm = profile.max_shared_bytes_per_sm;
  r.reserved_shared_per_block = profile.reserved_shared_bytes_per_block;
  r.shared_allocation_unit = profile.shared_allocation_unit;
  r.registers_per_sm = profile.max_registers_per_sm;
  r.registers.per_block = profile.max_registers_per_block;
  r.registers.allocation_unit = profile.register_allocation_unit;
  r.registers.partitions = profile.register_file_partitions;
  return r;
}

std::string LaunchShape::describe(const Residency& r) const {
  const std::string of = threads ? " of " + std::to_string(*threads) + " thread" + (*threads == 1 ? "" : "s") : "";
  const uint64_t per_sm = r.sms ? resident / r.sms : 0;
  const std::string l = limit;
  std::string by;
  if (l == "registers") by = ": its " + std::to_string(demand.registers) + " registers per thread";
  if (l == "shared memory")
    by = ": its " + std::to_string(demand.static_shared + shared) + " bytes of shared memory per block";
  const std::string holds = std::to_string(resident) + " such blocks an " + r.arch + " holds at once (" +
                            std::to_string(r.sms) + " SMs x " + std::to_string(per_sm) + by + ")";
  if (!blocks) return "a grid known only when it runs, of blocks" + of + (resident ? " (at most " + holds + ")" : "");
  std::string s = std::to_string(*blocks) + " block" + (*blocks == 1 ? "" : "s") + of;
  if (!resident) return s + " (the target's residency is not known)";
  return s + (*blocks <= resident ? ", within the " : ", more than the ") + holds;
}

std::optional<uint64_t> value_at_defaults(const lir::Program& p, const lir::Expr& e, std::optional<uint32_t> member) {
  auto default_of = [&](int32_t ref) -> std::optional<expr::Value> {
    if (ref < 0 || static_cast<size_t>(ref) >= p.params.size()) return std::nullopt;
    return p.params[static_cast<size_t>(ref)].default_value;
  };
  return at_defaults(e.code, default_of, member);
}

LaunchShape launch_shape(const lir::Program& p, const lir::KernelNode& k, const Residency& r) {
  auto at = [&](const lir::Expr& e) { return value_at_defaults(p, e); };
  LaunchShape s;
  s.blocks = product(at(k.grid[0]), at(k.grid[1]), at(k.grid[2]));
  s.threads = product(at(k.block[0]), at(k.block[1]), at(k.block[2]));
  const std::optional<uint64_t> shared = k.shared_bytes.code.empty() ? std::optional<uint64_t>(0) : at(k.shared_bytes);
  const BlockDemand demand = k.kernel >= 0 && static_cast<size_t>(k.kernel) < p.kernels.size()
                                 ? p.kernels[static_cast<size_t>(k.kernel)].demand
                                 : BlockDemand{};
  // Unknown dynamic shared memory: the rest bounds the residency from above all the same.
  s.demand = demand;
  s.shared = shared.value_or(0);
  s.resident = resident_blocks(r, s.threads, s.shared, demand, &s.limit);
  return s;
}

LaunchShape launch_shape(const mir::Program& p, const mir::Node& n, const Residency& r) {
  auto default_of = [&](int32_t ref) -> std::optional<expr::Value> {
    if (ref < 0 || static_cast<size_t>(ref) >= p.params.size()) return std::nullopt;
    return p.params[static_cast<size_t>(ref)].default_evaluated;
  };
  auto eval = [&](const mir::Expr& e) { return at_defaults(mir::to_postfix(e), default_of); };
  LaunchShape s;
  switch (n.kind()) {
    case mir::NodeKind::Kernel: {
      const mir::KernelNode& k = n.as<mir::KernelNode>();
      s.blocks = product(eval(k.grid[0]), eval(k.grid[1]), eval(k.grid[2]));
      s.threads = product(eval(k.block[0]), eval(k.block[1]), eval(k.block[2]));
      std::optional<uint64_t> shared = eval(k.shared_bytes);
      s.shared = shared.value_or(0);
      s.resident = resident_blocks(r, s.threads, s.shared, {}, &s.limit);
      return s;
    }
    case mir::NodeKind::Fill:
    case mir::NodeKind::Copy: {
      const int dst = n.is<mir::FillNode>() ? n.as<mir::FillNode>().dst : n.as<mir::CopyNode>().dst;
      const mir::Buffer& b = p.buffers[static_cast<size_t>(dst)];
      std::optional<uint64_t> elements = b.count ? eval(*b.count) : std::optional<uint64_t>(1);
      s.threads = 256;
      if (elements) s.blocks = (*elements + 255) / 256;
      s.resident = resident_blocks(r, s.threads, 0, {}, &s.limit);
      return s;
    }
    case mir::NodeKind::ScalarUpdate:
    case mir::NodeKind::SetCondition:
    case mir::NodeKind::LaunchGraph:
    case mir::NodeKind::If:
    case mir::NodeKind::While:
    case mir::NodeKind::Switch:
    case mir::NodeKind::Collective:
    case mir::NodeKind::Shmem:  // one block (generate_nvshmem_kernels.cpp)
      break;
  }
  s.blocks = 1;
  s.threads = 1;
  s.resident = resident_blocks(r, s.threads, 0, {}, &s.limit);
  return s;
}

}  // namespace orch::lowering
