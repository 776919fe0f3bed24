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

// Blocks of `threads` threads and `shared` bytes one SM holds at once, times the SMs.
uint64_t resident_blocks(const Residency& r, std::optional<uint64_t> threads, std::optional<uint64_t> shared) {
  if (!r.sms || !threads || *threads == 0) return 0;
  // Threads are allocated to a block in whole warps.
  const uint64_t warps = (*threads + 31) / 32;
  uint64_t per_sm = std::min<uint64_t>(r.blocks_per_sm, r.threads_per_sm / (warps * 32));
  if (shared && *shared > 0 && r.shared_per_sm) per_sm = std::min<uint64_t>(per_sm, r.shared_per_sm / *shared);
  return per_sm * r.sms;
}

}  // namespace

Residency residency_of(const TargetProfile& profile) {
  Residency r;
  r.arch = profile.name;
  r.sms = profile.max_sm_count;
  r.threads_per_sm = profile.max_threads_per_sm;
  r.blocks_per_sm = profile.max_blocks_per_sm;
  r.shared_per_sm = profile.max_shared_bytes_per_sm;
  return r;
}

std::string LaunchShape::describe(const Residency& r) const {
  const std::string of = threads ? " of " + std::to_string(*threads) + " thread" + (*threads == 1 ? "" : "s") : "";
  const uint64_t per_sm = r.sms ? resident / r.sms : 0;
  const std::string holds = std::to_string(resident) + " such blocks an " + r.arch + " holds at once (" +
                            std::to_string(r.sms) + " SMs x " + std::to_string(per_sm) + ")";
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
  // Unknown shared memory: the threads alone bound the residency from above all the same.
  s.resident = resident_blocks(r, s.threads, shared ? shared : std::optional<uint64_t>(0));
  return s;
}

LaunchShape launch_shape(const ir::Program& p, const ir::Node& n, const Residency& r) {
  auto default_of = [&](int32_t ref) -> std::optional<expr::Value> {
    if (ref < 0 || static_cast<size_t>(ref) >= p.params.size()) return std::nullopt;
    return p.params[static_cast<size_t>(ref)].default_evaluated;
  };
  auto eval = [&](const ir::Expr& e) { return at_defaults(ir::to_postfix(e), default_of); };
  LaunchShape s;
  switch (n.kind) {
    case ir::NodeKind::Kernel: {
      s.blocks = product(eval(n.grid[0]), eval(n.grid[1]), eval(n.grid[2]));
      s.threads = product(eval(n.block[0]), eval(n.block[1]), eval(n.block[2]));
      std::optional<uint64_t> shared = eval(n.shared_bytes);
      s.resident = resident_blocks(r, s.threads, shared ? shared : std::optional<uint64_t>(0));
      return s;
    }
    case ir::NodeKind::Fill:
    case ir::NodeKind::Copy: {
      const ir::Buffer& b = p.buffers[static_cast<size_t>(n.dst)];
      std::optional<uint64_t> elements = b.count ? eval(*b.count) : std::optional<uint64_t>(1);
      s.threads = 256;
      if (elements) s.blocks = (*elements + 255) / 256;
      s.resident = resident_blocks(r, s.threads, 0);
      return s;
    }
    default:
      s.blocks = 1;
      s.threads = 1;
      s.resident = resident_blocks(r, s.threads, 0);
      return s;
  }
}

}  // namespace orch::lowering
