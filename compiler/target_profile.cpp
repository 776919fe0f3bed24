#include "compiler/target_profile.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <variant>

#include "support/file_observer.h"
#include "support/input_file.h"

namespace orch {

namespace {

namespace fs = std::filesystem;

using Member = std::variant<std::string TargetProfile::*, uint32_t TargetProfile::*,
                            uint64_t TargetProfile::*, bool TargetProfile::*,
                            uint32_t (TargetProfile::*)[3], uint64_t (TargetProfile::*)[3]>;

struct Field {
  const char* key;
  Member member;
  bool positive;  // 0 would make every launch or table invalid, so it is a typo
};

// Every field of TargetProfile, in the order the shipped profiles list them. All are required:
// a profile that forgot a key must not silently inherit another architecture's value.
const Field kFields[] = {
    {"name", &TargetProfile::name, false},
    {"arch", &TargetProfile::arch, false},
    {"compute_capability", &TargetProfile::compute_capability, true},
    {"max_threads_per_block", &TargetProfile::max_threads_per_block, true},
    {"max_block_dim", &TargetProfile::max_block_dim, true},
    {"max_grid_dim", &TargetProfile::max_grid_dim, true},
    {"max_shared_bytes_per_block", &TargetProfile::max_shared_bytes_per_block, false},
    {"max_shared_bytes_per_block_optin", &TargetProfile::max_shared_bytes_per_block_optin, false},
    {"max_sm_count", &TargetProfile::max_sm_count, true},
    {"max_threads_per_sm", &TargetProfile::max_threads_per_sm, true},
    {"max_blocks_per_sm", &TargetProfile::max_blocks_per_sm, true},
    {"max_shared_bytes_per_sm", &TargetProfile::max_shared_bytes_per_sm, true},
    {"reserved_shared_bytes_per_block", &TargetProfile::reserved_shared_bytes_per_block, false},
    {"shared_allocation_unit", &TargetProfile::shared_allocation_unit, true},
    {"max_registers_per_block", &TargetProfile::max_registers_per_block, true},
    {"max_registers_per_sm", &TargetProfile::max_registers_per_sm, true},
    {"register_allocation_unit", &TargetProfile::register_allocation_unit, true},
    {"register_file_partitions", &TargetProfile::register_file_partitions, true},
    {"max_cluster_size", &TargetProfile::max_cluster_size, true},
    {"max_fire_and_forget_launches", &TargetProfile::max_fire_and_forget_launches, false},
    {"max_tail_launches", &TargetProfile::max_tail_launches, false},
    {"max_self_tail_launches", &TargetProfile::max_self_tail_launches, false},
    {"max_switch_cases", &TargetProfile::max_switch_cases, true},
    {"supports_if", &TargetProfile::supports_if, false},
    {"supports_if_else", &TargetProfile::supports_if_else, false},
    {"supports_while", &TargetProfile::supports_while, false},
    {"supports_switch", &TargetProfile::supports_switch, false},
    {"supports_device_launch", &TargetProfile::supports_device_launch, false},
    {"programmatic_dependent_launch", &TargetProfile::programmatic_dependent_launch, false},
};

enum class Parsed { Ok, NotUnsigned, TooLarge };

// Plain decimal digits only: yaml-cpp's own conversions accept "-1" for unsigned types and
// quoted strings for numbers, and both would hide a mistake in a profile.
Parsed parse_unsigned(const YAML::Node& node, uint64_t max, uint64_t& out) {
  if (!node.IsScalar() || node.Tag() == "!") return Parsed::NotUnsigned;
  const std::string& s = node.Scalar();
  if (s.empty()) return Parsed::NotUnsigned;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return Parsed::NotUnsigned;
  errno = 0;
  unsigned long long v = std::strtoull(s.c_str(), nullptr, 10);
  if (errno == ERANGE || v > max) return Parsed::TooLarge;
  out = v;
  return Parsed::Ok;
}

bool parse_bool(const YAML::Node& node, bool& out) {
  if (!node.IsScalar() || node.Tag() == "!") return false;
  const std::string& s = node.Scalar();
  if (s == "true" || s == "True" || s == "TRUE") {
    out = true;
    return true;
  }
  if (s == "false" || s == "False" || s == "FALSE") {
    out = false;
    return true;
  }
  return false;
}

// "sm_90", "sm_90a", "sm_100f": the digits are the compute capability.
bool arch_digits(const std::string& arch, std::string& digits) {
  if (arch.rfind("sm_", 0) != 0) return false;
  size_t i = 3;
  while (i < arch.size() && std::isdigit(static_cast<unsigned char>(arch[i]))) ++i;
  digits = arch.substr(3, i - 3);
  if (digits.empty()) return false;
  return i == arch.size() || (i + 1 == arch.size() && (arch[i] == 'a' || arch[i] == 'f'));
}

class ProfileReader {
 public:
  ProfileReader(std::string origin, SourceRange where, DiagnosticEngine& diags)
      : origin_(std::move(origin)), where_(where), diags_(diags) {}

  std::optional<TargetProfile> read(const std::string& text) {
    std::vector<YAML::Node> docs;
    try {
      docs = YAML::LoadAll(text);
    } catch (const YAML::Exception& e) {
      std::ostringstream msg;
      msg << "invalid YAML";
      if (!e.mark.is_null())
        msg << " at line " << e.mark.line + 1 << ", column " << e.mark.column + 1;
      msg << ": " << e.msg;
      error(msg.str());
      return std::nullopt;
    }
    if (docs.empty() || (docs.size() == 1 && docs[0].IsNull())) {
      error("is empty");
      return std::nullopt;
    }
    if (docs.size() > 1) {
      error("holds " + std::to_string(docs.size()) + " YAML documents; expected one");
      return std::nullopt;
    }
    try {
      return read_root(docs[0]);
    } catch (const YAML::Exception& e) {
      // Node accessors should not throw on the shapes checked above; stay safe regardless.
      error(std::string("invalid YAML: ") + e.msg);
      return std::nullopt;
    }
  }

 private:
  void error(const std::string& detail) {
    diags_.error(DiagCode::E0111, where_, "target profile " + origin_ + ": " + detail);
    ok_ = false;
  }
  void key_error(const std::string& key, const std::string& detail) {
    error("key '" + key + "' " + detail);
  }

  std::optional<TargetProfile> read_root(const YAML::Node& root) {
    if (!root.IsMap()) {
      error("must be a mapping of keys to values");
      return std::nullopt;
    }
    TargetProfile p;
    std::set<std::string> seen;
    for (const auto& kv : root) {
      if (!kv.first.IsScalar()) {
        error("every key must be a plain name");
        continue;
      }
      const std::string key = kv.first.Scalar();
      if (key == "peaks") {
        if (!seen.insert(key).second) {
          key_error(key, "is given more than once");
          continue;
        }
        read_peaks(kv.second, p);
        continue;
      }
      const Field* field = nullptr;
      for (const Field& f : kFields)
        if (key == f.key) field = &f;
      if (!field) {
        error("unknown key '" + key + "'");
        continue;
      }
      if (!seen.insert(key).second) {
        key_error(key, "is given more than once");
        continue;
      }
      read_field(*field, kv.second, p);
    }
    for (const Field& f : kFields)
      if (!seen.count(f.key)) error(std::string("missing required key '") + f.key + "'");
    if (!ok_) return std::nullopt;
    check_consistency(p);
    if (!ok_) return std::nullopt;
    return p;
  }

  void read_field(const Field& f, const YAML::Node& node, TargetProfile& p) {
    const std::string key = f.key;
    if (auto* m = std::get_if<std::string TargetProfile::*>(&f.member)) {
      if (!node.IsScalar() || node.Scalar().empty())
        return key_error(key, "must be a non-empty string");
      p.*(*m) = node.Scalar();
    } else if (auto* m = std::get_if<uint32_t TargetProfile::*>(&f.member)) {
      uint64_t v = 0;
      if (read_unsigned(key, node, std::numeric_limits<uint32_t>::max(), f.positive, v))
        p.*(*m) = static_cast<uint32_t>(v);
    } else if (auto* m = std::get_if<uint64_t TargetProfile::*>(&f.member)) {
      uint64_t v = 0;
      if (read_unsigned(key, node, std::numeric_limits<uint64_t>::max(), f.positive, v))
        p.*(*m) = v;
    } else if (auto* m = std::get_if<bool TargetProfile::*>(&f.member)) {
      if (!parse_bool(node, p.*(*m))) key_error(key, "must be true or false");
    } else if (auto* m = std::get_if<uint32_t(TargetProfile::*)[3]>(&f.member)) {
      uint64_t v[3];
      if (read_triple(key, node, std::numeric_limits<uint32_t>::max(), f.positive, v))
        for (int i = 0; i < 3; ++i) (p.*(*m))[i] = static_cast<uint32_t>(v[i]);
    } else if (auto* m = std::get_if<uint64_t(TargetProfile::*)[3]>(&f.member)) {
      uint64_t v[3];
      if (read_triple(key, node, std::numeric_limits<uint64_t>::max(), f.positive, v))
        for (int i = 0; i < 3; ++i) (p.*(*m))[i] = v[i];
    }
  }

  // peaks: a list of {match, dram_bytes_per_s, f16/f32/f64_flops_per_s, source}, every key
  // required, numbers positive.
  void read_peaks(const YAML::Node& node, TargetProfile& p) {
    if (!node.IsSequence()) return key_error("peaks", "must be a list of devices");
    static const char* const kKeys[] = {"match", "dram_bytes_per_s", "f16_flops_per_s", "f32_flops_per_s",
                                        "f64_flops_per_s", "source"};
    for (size_t i = 0; i < node.size(); ++i) {
      const std::string at = "peaks[" + std::to_string(i) + "]";
      const YAML::Node& entry = node[i];
      if (!entry.IsMap()) {
        key_error(at, "must be a mapping of keys to values");
        continue;
      }
      DevicePeaks d;
      std::set<std::string> seen;
      bool ok = true;
      for (const auto& kv : entry) {
        const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : std::string();
        if (std::find(std::begin(kKeys), std::end(kKeys), key) == std::end(kKeys)) {
          key_error(at, "has an unknown key '" + key + "'");
          ok = false;
          continue;
        }
        if (!seen.insert(key).second) {
          key_error(at + "." + key, "is given more than once");
          ok = false;
          continue;
        }
        if (key == "match" || key == "source") {
          if (!kv.second.IsScalar() || kv.second.Scalar().empty()) {
            key_error(at + "." + key, "must be a non-empty string");
            ok = false;
          } else {
            (key == "match" ? d.match : d.source) = kv.second.Scalar();
          }
          continue;
        }
        uint64_t v = 0;
        if (!read_unsigned(at + "." + key, kv.second, std::numeric_limits<uint64_t>::max(), true, v)) {
          ok = false;
          continue;
        }
        (key == "dram_bytes_per_s"  ? d.dram_bytes_per_s
         : key == "f16_flops_per_s" ? d.f16_flops_per_s
         : key == "f32_flops_per_s" ? d.f32_flops_per_s
                                    : d.f64_flops_per_s) = v;
      }
      for (const char* k : kKeys)
        if (!seen.count(k)) {
          key_error(at, std::string("is missing '") + k + "'");
          ok = false;
        }
      if (!ok) continue;
      for (const DevicePeaks& other : p.peaks)
        if (other.match == d.match) {
          key_error(at + ".match", "'" + d.match + "' is listed twice");
          ok = false;
        }
      if (ok) p.peaks.push_back(std::move(d));
    }
  }

  bool read_unsigned(const std::string& key, const YAML::Node& node, uint64_t max, bool positive,
                     uint64_t& out) {
    switch (parse_unsigned(node, max, out)) {
      case Parsed::NotUnsigned:
        key_error(key, "must be an unsigned integer");
        return false;
      case Parsed::TooLarge:
        key_error(key, "must be an unsigned integer no larger than " + std::to_string(max));
        return false;
      case Parsed::Ok:
        break;
    }
    if (positive && out == 0) {
      key_error(key, "must be greater than 0");
      return false;
    }
    return true;
  }

  bool read_triple(const std::string& key, const YAML::Node& node, uint64_t max, bool positive,
                   uint64_t out[3]) {
    const std::string what =
        "must be a list of 3 unsigned integers no larger than " + std::to_string(max);
    if (!node.IsSequence() || node.size() != 3) {
      key_error(key, "must be a list of 3 unsigned integers");
      return false;
    }
    for (size_t i = 0; i < 3; ++i) {
      switch (parse_unsigned(node[i], max, out[i])) {
        case Parsed::NotUnsigned:
          key_error(key, "must be a list of 3 unsigned integers");
          return false;
        case Parsed::TooLarge:
          key_error(key, what);
          return false;
        case Parsed::Ok:
          break;
      }
      if (positive && out[i] == 0) {
        key_error(key, "must not contain 0");
        return false;
      }
    }
    return true;
  }

  // Relations between keys that a typo would break.
  void check_consistency(const TargetProfile& p) {
    const struct {
      const char* key;
      uint32_t value, cuda;
    } launch_limits[] = {
        {"max_fire_and_forget_launches", p.max_fire_and_forget_launches,
         kCudaMaxFireAndForgetLaunches},
        {"max_tail_launches", p.max_tail_launches, kCudaMaxTailLaunches},
        {"max_self_tail_launches", p.max_self_tail_launches, kCudaMaxSelfTailLaunches},
    };
    for (const auto& l : launch_limits)
      if (l.value > l.cuda)
        key_error(l.key, "is " + std::to_string(l.value) + ", above CUDA's limit of " +
                             std::to_string(l.cuda) + " per graph execution");
    std::string digits;
    if (!arch_digits(p.arch, digits)) {
      key_error("arch", "must look like 'sm_90' (got '" + p.arch + "')");
    } else if (digits != std::to_string(p.compute_capability)) {
      key_error("compute_capability",
                "is " + std::to_string(p.compute_capability) + " but 'arch' is '" + p.arch + "'");
    } else if (p.programmatic_dependent_launch && p.compute_capability < 90) {
      // griddepcontrol (PTX ISA 7.8) needs sm_90: a profile claiming it below would make orchc
      // emit code that does not compile for its arch.
      key_error("programmatic_dependent_launch",
                "is true but compute capability " + std::to_string(p.compute_capability) +
                    " has no programmatic dependent launch (it needs 90 or newer)");
    }
    if (p.max_shared_bytes_per_block_optin < p.max_shared_bytes_per_block)
      key_error("max_shared_bytes_per_block_optin", "is smaller than 'max_shared_bytes_per_block'");
    for (int i = 0; i < 3; ++i) {
      if (p.max_block_dim[i] > p.max_threads_per_block) {
        key_error("max_block_dim", "has a dimension larger than 'max_threads_per_block'");
        break;
      }
    }
  }

  std::string origin_;
  SourceRange where_;
  DiagnosticEngine& diags_;
  bool ok_ = true;
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// Names of the *.yaml files in the search dirs, sorted and without repeats.
std::vector<std::string> known_targets(const std::vector<std::string>& dirs) {
  std::set<std::string> names;
  for (const std::string& dir : dirs) {
    std::error_code ec;
    fs::directory_iterator it(dir, ec), end;
    for (; !ec && it != end; it.increment(ec)) {
      const fs::path& p = it->path();
      if (p.extension() == ".yaml" && is_file(p)) names.insert(p.stem().string());
    }
  }
  return {names.begin(), names.end()};
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i];
  return out;
}

std::optional<TargetProfile> load_file(const std::string& path, SourceRange where,
                                       DiagnosticEngine& diags) {
  if (!is_file(path)) {
    std::error_code ec;
    bool exists = fs::exists(path, ec);
    diags.error(DiagCode::E0111, where,
                "target profile " + path + ": " + (exists ? "is not a file" : "no such file"));
    return std::nullopt;
  }
  // A profile is a page of YAML: 1 MiB is far more than any needs.
  InputFile in = read_input_file(path, size_t{1} << 20);
  if (in.status != InputFile::Status::Ok) {
    diags.error(DiagCode::E0111, where,
                "target profile " + path + ": cannot be read (" +
                    (in.status == InputFile::Status::TooLarge
                         ? std::to_string(in.size) + " bytes, more than a profile can be"
                         : in.error) +
                    ")");
    return std::nullopt;
  }
  return parse_target_profile(in.text, path, where, diags);
}

}  // namespace

const DevicePeaks* find_device_peaks(const TargetProfile& profile, const std::string& device_name) {
  const DevicePeaks* best = nullptr;
  for (const DevicePeaks& d : profile.peaks)
    if (device_name.find(d.match) != std::string::npos && (!best || d.match.size() > best->match.size())) best = &d;
  return best;
}

std::vector<std::string> target_search_dirs(const std::string& explicit_dir) {
  std::vector<std::string> dirs;
  auto add = [&](const std::string& d) {
    if (!d.empty() && std::find(dirs.begin(), dirs.end(), d) == dirs.end()) dirs.push_back(d);
  };
  add(explicit_dir);
  if (const char* env = std::getenv("ORCH_TARGETS_DIR")) add(env);
#ifdef ORCH_INSTALL_TARGETS_DIR
  add(ORCH_INSTALL_TARGETS_DIR);
#endif
#ifdef ORCH_SOURCE_TARGETS_DIR
  add(ORCH_SOURCE_TARGETS_DIR);
#endif
  return dirs;
}

std::optional<TargetProfile> parse_target_profile(const std::string& yaml_text,
                                                  const std::string& origin, SourceRange where,
                                                  DiagnosticEngine& diags) {
  return ProfileReader(origin, where, diags).read(yaml_text);
}

std::optional<TargetProfile> load_target_profile(const std::string& name_or_path,
                                                 const std::vector<std::string>& search_dirs,
                                                 SourceRange where, DiagnosticEngine& diags) {
  if (ends_with(name_or_path, ".yaml")) return load_file(name_or_path, where, diags);

  // A name never holds a path separator, so `../x` cannot reach outside the search dirs.
  if (!name_or_path.empty() && name_or_path.find('/') == std::string::npos) {
    for (const std::string& dir : search_dirs) {
      fs::path candidate = fs::path(dir) / (name_or_path + ".yaml");
      if (!is_file(candidate)) {
        observe_file_flag(FileFact::RegularFile, candidate.string(), false);
        continue;
      }
      size_t errors_before = diags.error_count();
      auto profile = load_file(candidate.string(), where, diags);
      if (profile && profile->name != name_or_path) {
        diags.error(DiagCode::E0111, where,
                    "target profile " + candidate.string() + ": key 'name' is '" + profile->name +
                        "' but the file is named '" + name_or_path + ".yaml'");
        return std::nullopt;
      }
      if (!profile && diags.error_count() == errors_before)
        diags.error(DiagCode::E0111, where, "target profile " + candidate.string() + ": cannot be read");
      return profile;
    }
  }
  std::vector<std::string> known = known_targets(search_dirs);
  std::string message = "unknown target '" + name_or_path + "'";
  if (known.empty())
    message += "; no target profiles found in " +
               (search_dirs.empty() ? std::string("any directory") : join(search_dirs));
  else
    message += "; known targets: " + join(known);
  diags.error(DiagCode::E0111, where, message);
  return std::nullopt;
}

}  // namespace orch
