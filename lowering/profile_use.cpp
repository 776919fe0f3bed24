#include "lowering/profile_use.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include "support/input_file.h"

namespace orch::lowering {

namespace {

// The range of byte `offset` of `text`, file `file`: its line and column, one byte long.
SourceRange range_at(uint32_t file, std::string_view text, size_t offset) {
  offset = std::min(offset, text.size());
  SourceRange r;
  r.file = file;
  r.begin.line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < offset; ++i)
    if (text[i] == '\n') {
      ++r.begin.line;
      line_start = i + 1;
    }
  r.begin.col = static_cast<uint32_t>(offset - line_start + 1);
  r.end = r.begin;
  r.end.col = r.begin.col + 1;
  return r;
}

SourceRange range_of(const SourceManager& sources, uint32_t file, const JsonPath& path) {
  const std::string& text = sources.file(file).text;
  return range_at(file, text, json_offset(text, path));
}

// The key a statement of the checked program has in a profile: its kernel's name. Asked before
// generate_kernels (the checked program, unroll_loops), where every kernel is the user's.
std::string kernel_key(const mir::Declarations& p, int kernel) {
  if (kernel < 0 || static_cast<size_t>(kernel) >= p.kernels.size()) return "";
  return p.kernels[static_cast<size_t>(kernel)].name;
}

void statements(const ir::Program& p, const ir::Region& r,
                std::set<std::tuple<uint32_t, uint32_t, uint32_t, std::string>>* out) {
  for (const ir::Node& n : r.nodes) {
    const int kernel = n.is<ir::KernelNode>() ? n.as<ir::KernelNode>().kernel : -1;
    if (n.loc.valid()) out->emplace(n.loc.file, n.loc.begin.line, n.loc.begin.col, kernel_key(p, kernel));
    for (const ir::Region& b : ir::bodies(n)) statements(p, b, out);
  }
}

std::string plural(uint64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

std::string format_ns(uint64_t ns) {
  char buf[48];
  if (ns < 1000) std::snprintf(buf, sizeof buf, "%llu ns", static_cast<unsigned long long>(ns));
  else if (ns < 1000000) std::snprintf(buf, sizeof buf, "%.2f us", static_cast<double>(ns) / 1e3);
  else std::snprintf(buf, sizeof buf, "%.2f ms", static_cast<double>(ns) / 1e6);
  return buf;
}

size_t BoundProfile::bind(const SourceManager& sources) {
  index_.clear();
  std::map<std::string, uint32_t> ids;  // a node's file: its id, 0 none
  auto id_of = [&](const std::string& file) -> uint32_t {
    auto it = ids.find(file);
    if (it != ids.end()) return it->second;
    uint32_t exact = 0, named = 0, same_name = 0;
    for (uint32_t id = 1; id < sources.count(); ++id) {
      if (id == file_) continue;
      const std::string& path = sources.path(id);
      if (path == file) exact = id;
      if (file_name(path) == file_name(file)) {
        named = id;
        ++same_name;
      }
    }
    const uint32_t id = exact ? exact : same_name == 1 ? named : 0;
    ids.emplace(file, id);
    return id;
  };
  for (size_t i = 0; i < p_.nodes.size(); ++i) {
    const ProfileNode& n = p_.nodes[i];
    if (const uint32_t id = id_of(n.file)) index_.emplace(std::make_tuple(id, n.line, n.column, n.kernel), i);
  }
  return index_.size();
}

const ProfileNode* BoundProfile::find(const SourceRange& loc, const std::string& kernel) const {
  if (!loc.valid()) return nullptr;
  auto it = index_.find(std::make_tuple(loc.file, loc.begin.line, loc.begin.col, kernel));
  return it == index_.end() ? nullptr : &p_.nodes[it->second];
}

std::optional<Profile> read_profile(const std::string& path, SourceManager& sources, DiagnosticEngine& diags,
                                    uint32_t* file) {
  InputFile in = read_input_file(path);
  if (in.status == InputFile::Status::TooLarge) {
    diags.error(DiagCode::E0005, {},
                "the profile `" + path + "` has " + std::to_string(in.size) + " bytes; orchc reads at most " +
                    std::to_string(kMaxInputBytes));
    return std::nullopt;
  }
  if (in.status != InputFile::Status::Ok) {
    diags.error(DiagCode::E0004, {}, "cannot read the profile `" + path + "`: " + in.error);
    return std::nullopt;
  }
  const uint32_t id = sources.add(path, in.text);
  if (file) *file = id;
  ProfileError e;
  std::optional<Profile> p = parse_profile(sources.file(id).text, &e);
  if (!p)
    diags.error(DiagCode::E0006, range_at(id, sources.file(id).text, e.offset), "invalid profile (orchc --profile): " + e.message);
  return p;
}

std::shared_ptr<const BoundProfile> match_profile(Profile profile, uint32_t file, const ir::Program& program,
                                                  const SourceManager& sources, DiagnosticEngine& diags) {
  const std::string ignored = "; the profile is ignored and every choice is made as without it";
  if (profile.pipeline != program.name) {
    diags.warning(DiagCode::W0006, range_of(sources, file, {std::string("pipeline"), std::string("name")}),
                  "this profile was measured on pipeline `" + profile.pipeline + "`, not `" + program.name + "`" +
                      ignored);
    return nullptr;
  }
  // Registers and residency are another architecture's on another compute capability.
  const std::string arch = "sm_" + std::to_string(profile.compute_capability);
  const bool targeted = std::find(program.targets.begin(), program.targets.end(), arch) != program.targets.end() ||
                        program.profile.compute_capability == profile.compute_capability;
  if (!targeted) {
    std::string targets;
    for (const std::string& t : program.targets) targets += (targets.empty() ? "" : ", ") + t;
    diags.warning(DiagCode::W0006, range_of(sources, file, {std::string("device"), std::string("compute_capability")}),
                  "this profile was measured on " + profile.device + " (" + arch + "), and the pipeline targets " +
                      (targets.empty() ? program.profile.name : targets) + ignored);
    return nullptr;
  }
  auto bound = std::make_shared<BoundProfile>(std::move(profile), file);
  bound->bind(sources);
  std::set<std::tuple<uint32_t, uint32_t, uint32_t, std::string>> keys;
  for (const ir::Graph& g : program.graphs) statements(program, g.body, &keys);
  size_t matched = 0;
  for (const auto& k : keys) matched += bound->find(SourceRange{std::get<0>(k), {std::get<1>(k), std::get<2>(k)}, {}},
                                                    std::get<3>(k)) != nullptr;
  if (matched == 0) {
    diags.warning(DiagCode::W0006, range_of(sources, file, {std::string("nodes")}),
                  "none of the profile's " + plural(bound->profile().nodes.size(), "node", "nodes") +
                      " is a statement of pipeline `" + program.name +
                      "` (the source changed since it was measured, or it is another pipeline's)" + ignored);
    return nullptr;
  }
  return bound;
}

std::shared_ptr<const BoundProfile> load_profile(const std::string& path, const ir::Program& program,
                                                 SourceManager& sources, DiagnosticEngine& diags) {
  uint32_t file = 0;
  std::optional<Profile> p = read_profile(path, sources, diags, &file);
  if (!p) return nullptr;
  return match_profile(std::move(*p), file, program, sources, diags);
}

LaunchShape measured_shape(const MeasuredLaunch& l, const Residency& r) {
  LaunchShape s;
  s.blocks = l.blocks();
  s.threads = l.threads();
  s.demand.registers = l.registers;
  s.demand.static_shared = l.static_shared_bytes;
  s.shared = l.dynamic_shared_bytes;
  s.resident = resident_blocks(r, s.threads, s.shared, s.demand, &s.limit);
  return s;
}

std::string Launch::says(const std::string& subject) const {
  if (!measured_shape) return subject + " has " + shape.describe(residency);
  const uint64_t per_sm = residency.sms ? shape.resident / residency.sms : 0;
  std::string s = "from the profile: " + subject;
  if (measured && measured->launch) {
    const MeasuredLaunch& l = *measured->launch;
    s += " ran " + plural(l.blocks(), "block", "blocks") + " of " + plural(l.threads(), "thread", "threads") + " (" +
         plural(l.registers, "register", "registers") + " per thread" +
         (l.shared_bytes() ? ", " + std::to_string(l.shared_bytes()) + " bytes of shared memory" : std::string()) + ")";
  } else {
    s += " moved " + plural(measured && measured->bytes ? *measured->bytes : 0, "byte", "bytes") + ": " +
         plural(shape.blocks.value_or(0), "block", "blocks") + " of " +
         plural(shape.threads.value_or(0), "thread", "threads") + " as a guarded copy";
  }
  return s + (shape.one_wave() ? ", within the " : ", more than the ") + std::to_string(shape.resident) +
         " such blocks " + (residency.arch.empty() ? "the GPU" : "an " + residency.arch) + " holds at once (" +
         std::to_string(residency.sms) + " SMs x " + std::to_string(per_sm) + ")";
}

Launch launch_of(const lir::Program& p, const lir::Node& n, const Residency& r, const ProfileUse& u) {
  Launch L;
  L.residency = r;
  const auto& k = std::get<lir::KernelNode>(n.op);
  const bool known = k.kernel >= 0 && static_cast<size_t>(k.kernel) < p.kernels.size();
  const bool user = known && !p.kernels[static_cast<size_t>(k.kernel)].generated;
  if (u.profile) L.measured = u.profile->find(n.loc, user ? p.kernels[static_cast<size_t>(k.kernel)].name : "");
  // A kernel orchc writes keeps its shape as written: the profile's launch at its statement may
  // be CUDA's own memset kernel or another variant of it.
  if (L.measured && L.measured->launch && user) {
    L.measured_shape = true;
    L.residency.sms = u.profile->profile().sms;
    L.residency.arch = u.profile->profile().device;
    L.shape = measured_shape(*L.measured->launch, L.residency);
    return L;
  }
  L.shape = launch_shape(p, k, r);
  return L;
}

Launch launch_of(const mir::Program& p, const mir::Node& n, const Residency& r, const ProfileUse& u) {
  Launch L;
  L.residency = r;
  const std::string kernel = kernel_key(p, n.is<mir::KernelNode>() ? n.as<mir::KernelNode>().kernel : -1);
  if (u.profile) L.measured = u.profile->find(n.loc, kernel);
  if (L.measured && L.measured->launch && !kernel.empty()) {
    L.measured_shape = true;
    L.residency.sms = u.profile->profile().sms;
    L.residency.arch = u.profile->profile().device;
    L.shape = measured_shape(*L.measured->launch, L.residency);
    return L;
  }
  L.shape = launch_shape(p, n, r);
  // A fill or copy the profile saw as a copy or memset: its elements, from the bytes it moved,
  // size the kernel of 256-thread blocks a guarded copy of it runs (launch_shape's model).
  const int dst = n.is<mir::FillNode>()   ? n.as<mir::FillNode>().dst
                  : n.is<mir::CopyNode>() ? n.as<mir::CopyNode>().dst
                                         : -1;
  if (L.measured && L.measured->bytes && dst >= 0 && static_cast<size_t>(dst) < p.buffers.size()) {
    const uint64_t element = expr::size_of(p.buffers[static_cast<size_t>(dst)].elem);
    const uint64_t elements = element ? *L.measured->bytes / element : 0;
    L.shape.blocks = (elements + 255) / 256;
    L.measured_shape = true;
  }
  return L;
}

}  // namespace orch::lowering
