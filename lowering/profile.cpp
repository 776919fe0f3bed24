#include "lowering/profile.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

namespace orch::lowering {

namespace {

// Ordered: a profile read and written again keeps its params in their order.
using json = nlohmann::ordered_json;
using nlohmann::ordered_json;

std::string path_text(const JsonPath& path) {
  std::string s;
  for (const auto& p : path) {
    if (const auto* key = std::get_if<std::string>(&p)) s += (s.empty() ? "" : ".") + *key;
    else s += "[" + std::to_string(std::get<size_t>(p)) + "]";
  }
  return s.empty() ? "the document" : "`" + s + "`";
}

// What a value is, for "... is <this>; expected ...".
std::string kind_of(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    case json::value_t::number_integer: return "the negative number " + v.dump();
    case json::value_t::number_unsigned: return "the number " + v.dump();
    case json::value_t::number_float: return "the number " + v.dump();
    default: return "a " + std::string(v.type_name());
  }
}

class Reader {
 public:
  explicit Reader(ProfileError* error) : error_(error) {}

  bool fail(const JsonPath& at, const std::string& message) {
    if (error_) {
      error_->message = message;
      error_->offset = 0;
    }
    failed_at_ = at;
    return false;
  }
  const JsonPath& failed_at() const { return failed_at_; }

  // obj[key], or null (and, where required, an error) when absent.
  const json* member(const json& obj, const JsonPath& at, const char* key, bool required) {
    auto it = obj.find(key);
    if (it == obj.end()) {
      if (required) fail(at, (at.empty() ? "the profile" : path_text(at)) + " has no `" + key + "`");
      return nullptr;
    }
    return &*it;
  }

  bool object(const json& v, const JsonPath& at) {
    return v.is_object() || fail(at, path_text(at) + " is " + kind_of(v) + "; expected an object");
  }

  bool string(const json& obj, JsonPath at, const char* key, std::string* out, bool required) {
    const json* v = member(obj, at, key, required);
    if (!v) return !required;
    at.push_back(std::string(key));
    if (!v->is_string()) return fail(at, path_text(at) + " is " + kind_of(*v) + "; expected a string");
    *out = v->get<std::string>();
    return true;
  }

  // An unsigned integer from `lo` to `hi`; `range` says both bounds in the message (else the
  // one it broke: `hi` is then only the field's type's limit).
  bool uint(const json& v, const JsonPath& at, uint64_t* out, uint64_t lo, uint64_t hi, bool range) {
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
      return fail(at, path_text(at) + " is " + kind_of(v) + "; expected an unsigned integer");
    const uint64_t x = v.get<uint64_t>();
    if (x < lo || x > hi)
      return fail(at, path_text(at) + " is " + std::to_string(x) + "; expected " +
                          (range    ? "from " + std::to_string(lo) + " to " + std::to_string(hi)
                           : x < lo ? "at least " + std::to_string(lo)
                                    : "at most " + std::to_string(hi)));
    *out = x;
    return true;
  }

  template <class T>
  bool uint(const json& obj, JsonPath at, const char* key, T* out, bool required, uint64_t lo = 0,
            std::optional<uint64_t> hi = std::nullopt) {
    const json* v = member(obj, at, key, required);
    if (!v) return !required;
    at.push_back(std::string(key));
    uint64_t x = 0;
    if (!uint(*v, at, &x, lo, hi.value_or(std::numeric_limits<T>::max()), hi.has_value())) return false;
    *out = static_cast<T>(x);
    return true;
  }

  // Three unsigned integers, each at least 1.
  bool dims(const json& obj, JsonPath at, const char* key, uint32_t out[3]) {
    const json* v = member(obj, at, key, true);
    if (!v) return false;
    at.push_back(std::string(key));
    if (!v->is_array() || v->size() != 3)
      return fail(at, path_text(at) + " is " + (v->is_array() ? "an array of " + std::to_string(v->size()) : kind_of(*v)) +
                          "; expected an array of 3 unsigned integers (x, y, z)");
    for (size_t i = 0; i < 3; ++i) {
      JsonPath here = at;
      here.push_back(i);
      uint64_t x = 0;
      if (!uint((*v)[i], here, &x, 1, UINT32_MAX, false)) return false;
      out[i] = static_cast<uint32_t>(x);
    }
    return true;
  }

  bool node(const json& v, const JsonPath& at, ProfileNode* n) {
    if (!object(v, at)) return false;
    if (!string(v, at, "file", &n->file, true) || !uint(v, at, "line", &n->line, true, 1) ||
        !uint(v, at, "column", &n->column, true, 1) || !string(v, at, "kernel", &n->kernel, true) ||
        !string(v, at, "what", &n->what, false) || !uint(v, at, "launches", &n->launches, true) ||
        !uint(v, at, "median_ns", &n->median_ns, true) || !uint(v, at, "min_ns", &n->min_ns, true))
      return false;
    if (n->file.empty()) return fail(at_key(at, "file"), path_text(at_key(at, "file")) + " is empty; expected a path");
    if (n->min_ns > n->median_ns)
      return fail(at_key(at, "min_ns"), path_text(at_key(at, "min_ns")) + " is " + std::to_string(n->min_ns) +
                                            ", more than the median " + std::to_string(n->median_ns));
    const bool has_launch = v.contains("grid") || v.contains("block") || v.contains("registers");
    if (has_launch) {
      MeasuredLaunch l;
      if (!dims(v, at, "grid", l.grid) || !dims(v, at, "block", l.block) ||
          !uint(v, at, "registers", &l.registers, true, 0, 255) ||
          !uint(v, at, "static_shared_bytes", &l.static_shared_bytes, false) ||
          !uint(v, at, "dynamic_shared_bytes", &l.dynamic_shared_bytes, false))
        return false;
      n->launch = l;
    }
    if (v.contains("bytes")) {
      uint64_t b = 0;
      if (!uint(v, at, "bytes", &b, true)) return false;
      n->bytes = b;
    }
    return true;
  }

  static JsonPath at_key(JsonPath at, const char* key) {
    at.push_back(std::string(key));
    return at;
  }

  bool document(const json& doc, Profile* p) {
    const JsonPath root;
    if (!doc.is_object()) return fail(root, "the profile is " + kind_of(doc) + "; expected a JSON object");
    std::string format;
    if (!string(doc, root, "format", &format, true)) return false;
    if (format != Profile::kFormat)
      return fail(at_key(root, "format"), "`format` is \"" + format + "\"; expected \"" + Profile::kFormat + "\"");
    const json* version = member(doc, root, "version", true);
    if (!version) return false;
    if (!version->is_number_unsigned() || version->get<uint64_t>() != Profile::kVersion)
      return fail(at_key(root, "version"), "`version` is " + (version->is_number_unsigned() ? version->dump() : kind_of(*version)) +
                                               "; this orchc reads version " + std::to_string(Profile::kVersion) +
                                               " (measure again with the orch-run of this build)");
    // The GPU.
    const json* device = member(doc, root, "device", true);
    const JsonPath d = at_key(root, "device");
    if (!device || !object(*device, d)) return false;
    if (!string(*device, d, "name", &p->device, true) || !uint(*device, d, "sms", &p->sms, true, 1) ||
        !uint(*device, d, "compute_capability", &p->compute_capability, true, 10, 1000) ||
        !string(*device, d, "driver", &p->driver, false) ||
        !uint(*device, d, "cuda_driver_version", &p->cuda_driver_version, false))
      return false;
    if (!string(doc, root, "date", &p->date, false)) return false;
    // The artifact.
    const json* pipeline = member(doc, root, "pipeline", true);
    const JsonPath a = at_key(root, "pipeline");
    if (!pipeline || !object(*pipeline, a)) return false;
    if (!string(*pipeline, a, "name", &p->pipeline, true) ||
        !string(*pipeline, a, "compiler_version", &p->compiler_version, false) ||
        !string(*pipeline, a, "artifact_checksum", &p->artifact_checksum, false))
      return false;
    if (const json* sources = member(*pipeline, a, "sources", false)) {
      const JsonPath s = at_key(a, "sources");
      if (!sources->is_array()) return fail(s, path_text(s) + " is " + kind_of(*sources) + "; expected an array of paths");
      for (size_t i = 0; i < sources->size(); ++i) {
        JsonPath here = s;
        here.push_back(i);
        if (!(*sources)[i].is_string()) return fail(here, path_text(here) + " is " + kind_of((*sources)[i]) + "; expected a path");
        p->sources.push_back((*sources)[i].get<std::string>());
      }
    }
    // The run.
    if (const json* params = member(doc, root, "params", false)) {
      const JsonPath s = at_key(root, "params");
      if (!object(*params, s)) return false;
      for (auto it = params->begin(); it != params->end(); ++it) {
        const JsonPath here = at_key(s, it.key().c_str());
        const json& v = it.value();
        if (v.is_number_unsigned()) p->params.emplace_back(it.key(), v.get<uint64_t>());
        else if (v.is_number_integer()) p->params.emplace_back(it.key(), v.get<int64_t>());
        else if (v.is_number_float()) p->params.emplace_back(it.key(), v.get<double>());
        else if (v.is_boolean()) p->params.emplace_back(it.key(), v.get<bool>());
        else if (v.is_string()) p->params.emplace_back(it.key(), v.get<std::string>());
        else return fail(here, path_text(here) + " is " + kind_of(v) + "; expected a number, a boolean or a string");
      }
    }
    if (!uint(doc, root, "pipeline_launches", &p->pipeline_launches, false)) return false;
    const json* nodes = member(doc, root, "nodes", true);
    const JsonPath ns = at_key(root, "nodes");
    if (!nodes) return false;
    if (!nodes->is_array()) return fail(ns, "`nodes` is " + kind_of(*nodes) + "; expected an array");
    std::map<std::tuple<std::string, uint32_t, uint32_t, std::string>, size_t> seen;
    for (size_t i = 0; i < nodes->size(); ++i) {
      JsonPath here = ns;
      here.push_back(i);
      ProfileNode n;
      if (!node((*nodes)[i], here, &n)) return false;
      auto [it, inserted] = seen.emplace(std::make_tuple(n.file, n.line, n.column, n.kernel), i);
      if (!inserted)
        return fail(here, path_text(here) + " has the key of `nodes[" + std::to_string(it->second) + "]` (" + n.file +
                              ":" + std::to_string(n.line) + ":" + std::to_string(n.column) +
                              (n.kernel.empty() ? "" : ", kernel `" + n.kernel + "`") + "): a statement has one node");
      p->nodes.push_back(std::move(n));
    }
    return true;
  }

 private:
  ProfileError* error_;
  JsonPath failed_at_;
};

ordered_json value_json(const ProfileValue& v) {
  if (const auto* u = std::get_if<uint64_t>(&v)) return *u;
  if (const auto* i = std::get_if<int64_t>(&v)) return *i;
  if (const auto* b = std::get_if<bool>(&v)) return *b;
  if (const auto* text = std::get_if<std::string>(&v)) return *text;
  const double d = std::get<double>(v);
  // JSON has no infinities or NaN: those are written as text.
  if (std::isfinite(d)) return d;
  return std::isnan(d) ? "nan" : d > 0 ? "inf" : "-inf";
}

ordered_json node_json(const ProfileNode& n) {
  ordered_json j;
  j["file"] = n.file;
  j["line"] = n.line;
  j["column"] = n.column;
  j["kernel"] = n.kernel;
  j["what"] = n.what;
  j["launches"] = n.launches;
  j["median_ns"] = n.median_ns;
  j["min_ns"] = n.min_ns;
  if (n.launch) {
    const MeasuredLaunch& l = *n.launch;
    j["grid"] = {l.grid[0], l.grid[1], l.grid[2]};
    j["block"] = {l.block[0], l.block[1], l.block[2]};
    j["registers"] = l.registers;
    j["static_shared_bytes"] = l.static_shared_bytes;
    j["dynamic_shared_bytes"] = l.dynamic_shared_bytes;
  }
  if (n.bytes) j["bytes"] = *n.bytes;
  return j;
}

}  // namespace

std::string profile_json(const Profile& p) {
  ordered_json device;
  device["name"] = p.device;
  device["sms"] = p.sms;
  device["compute_capability"] = p.compute_capability;
  if (!p.driver.empty()) device["driver"] = p.driver;
  if (p.cuda_driver_version) device["cuda_driver_version"] = p.cuda_driver_version;
  ordered_json pipeline;
  pipeline["name"] = p.pipeline;
  if (!p.compiler_version.empty()) pipeline["compiler_version"] = p.compiler_version;
  pipeline["sources"] = p.sources;
  if (!p.artifact_checksum.empty()) pipeline["artifact_checksum"] = p.artifact_checksum;
  ordered_json params = ordered_json::object();
  for (const auto& [name, value] : p.params) params[name] = value_json(value);
  // Replacement of invalid UTF-8 (a name CUDA reports) keeps the document valid JSON.
  auto dump = [](const ordered_json& j) { return j.dump(-1, ' ', false, ordered_json::error_handler_t::replace); };
  std::string s = "{\n";
  s += "  \"format\": " + dump(Profile::kFormat) + ",\n";
  s += "  \"version\": " + std::to_string(Profile::kVersion) + ",\n";
  s += "  \"device\": " + dump(device) + ",\n";
  if (!p.date.empty()) s += "  \"date\": " + dump(p.date) + ",\n";
  s += "  \"pipeline\": " + dump(pipeline) + ",\n";
  s += "  \"params\": " + dump(params) + ",\n";
  s += "  \"pipeline_launches\": " + std::to_string(p.pipeline_launches) + ",\n";
  s += "  \"nodes\": [";
  for (size_t i = 0; i < p.nodes.size(); ++i) s += std::string(i ? "," : "") + "\n    " + dump(node_json(p.nodes[i]));
  s += p.nodes.empty() ? "]\n" : "\n  ]\n";
  s += "}\n";
  return s;
}

std::optional<Profile> parse_profile(std::string_view text, ProfileError* error) {
  json doc;
  try {
    doc = json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    if (error) {
      // nlohmann's message starts "[json.exception.parse_error.101] parse error at line 3,
      // column 7: ..."; the place is given separately, so keep what follows it.
      std::string m = e.what();
      const size_t colon = m.find(": ", m.find("parse error"));
      if (colon != std::string::npos) m = m.substr(colon + 2);
      error->message = "not valid JSON: " + m;
      error->offset = e.byte > 0 ? e.byte - 1 : 0;
    }
    return std::nullopt;
  } catch (const json::exception& e) {
    if (error) *error = {std::string("not valid JSON: ") + e.what(), 0};
    return std::nullopt;
  }
  Profile p;
  Reader r(error);
  if (!r.document(doc, &p)) {
    if (error) error->offset = json_offset(text, r.failed_at());
    return std::nullopt;
  }
  return p;
}

namespace {

// A scanner over text already known to be valid JSON: no checks, no recursion.
class Scanner {
 public:
  explicit Scanner(std::string_view t) : t_(t) {}
  size_t at() const { return i_; }
  void ws() {
    while (i_ < t_.size() && (t_[i_] == ' ' || t_[i_] == '\t' || t_[i_] == '\n' || t_[i_] == '\r')) ++i_;
  }
  char peek() {
    ws();
    return i_ < t_.size() ? t_[i_] : '\0';
  }
  void take() { ++i_; }
  void seek(size_t i) { i_ = i; }
  // A string starting at the quote; returns its raw text (escapes kept: keys compare raw).
  std::string_view string() {
    const size_t start = ++i_;
    while (i_ < t_.size() && t_[i_] != '"') i_ += t_[i_] == '\\' ? 2 : 1;
    const std::string_view s = t_.substr(start, std::min(i_, t_.size()) - start);
    ++i_;
    return s;
  }
  // Skips one value (iteratively, counting brackets outside strings).
  void skip() {
    ws();
    int depth = 0;
    do {
      if (i_ >= t_.size()) return;
      const char c = t_[i_];
      if (c == '"') {
        string();
      } else if (c == '{' || c == '[') {
        ++depth;
        ++i_;
      } else if (c == '}' || c == ']') {
        --depth;
        ++i_;
      } else if (depth == 0) {  // a scalar at the top: up to a delimiter
        while (i_ < t_.size() && t_[i_] != ',' && t_[i_] != '}' && t_[i_] != ']' && t_[i_] != ' ' && t_[i_] != '\n' &&
               t_[i_] != '\t' && t_[i_] != '\r')
          ++i_;
        return;
      } else {
        ++i_;
      }
    } while (depth > 0);
  }

 private:
  std::string_view t_;
  size_t i_ = 0;
};

// The raw text of a key as JSON writes it: escapes for the characters that need one.
std::string raw_key(const std::string& key) {
  const std::string quoted = json(key).dump();
  return quoted.substr(1, quoted.size() - 2);
}

}  // namespace

size_t json_offset(std::string_view text, const JsonPath& path) {
  Scanner s(text);
  s.ws();
  size_t found = s.at();
  for (const auto& step : path) {
    const char open = s.peek();
    if (const auto* key = std::get_if<std::string>(&step)) {
      if (open != '{') return found;
      s.take();
      const std::string want = raw_key(*key);
      bool hit = false;
      // The last member of that name: nlohmann keeps the last of duplicate keys.
      size_t last = 0;
      while (s.peek() == '"') {
        const std::string_view k = s.string();
        s.peek();  // the colon
        s.take();
        s.ws();
        if (k == want) {
          hit = true;
          last = s.at();
        }
        s.skip();
        if (s.peek() == ',') s.take();
      }
      if (!hit) return found;
      s.seek(last);
      found = last;
    } else {
      if (open != '[') return found;
      s.take();
      const size_t index = std::get<size_t>(step);
      size_t n = 0;
      while (s.peek() != ']' && s.peek() != '\0') {
        if (n == index) break;
        s.skip();
        if (s.peek() == ',') s.take();
        ++n;
      }
      if (n != index || s.peek() == ']' || s.peek() == '\0') return found;
      found = s.at();
    }
  }
  return found;
}

std::string_view file_name(std::string_view path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

}  // namespace orch::lowering
