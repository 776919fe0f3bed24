#include "lowering/inspect_ptx.h"

#include <cctype>
#include <cstdlib>

namespace orch::lowering {

namespace {

bool word_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '$' ||
         c == '%';
}

// PTX as tokens: names and directives (`.entry`, `%rd1`, `_Z4deepPf$1`), numbers, and single
// punctuation characters. Comments and quoted strings (`.file 1 "a.cu"`) are dropped.
std::vector<std::string> tokenize(const std::string& s) {
  std::vector<std::string> out;
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    char c = s[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (c == '/' && i + 1 < n && s[i + 1] == '/') {
      while (i < n && s[i] != '\n') ++i;
    } else if (c == '/' && i + 1 < n && s[i + 1] == '*') {
      size_t end = s.find("*/", i + 2);
      i = end == std::string::npos ? n : end + 2;
    } else if (c == '"') {
      size_t end = s.find('"', i + 1);
      i = end == std::string::npos ? n : end + 1;
    } else if (word_char(c)) {
      size_t j = i;
      while (j < n && word_char(s[j])) ++j;
      out.push_back(s.substr(i, j - i));
      i = j;
    } else {
      out.push_back(std::string(1, c));
      ++i;
    }
  }
  return out;
}

// The index just past the bracket closing the one at `open`.
size_t skip_balanced(const std::vector<std::string>& t, size_t open, const char* o, const char* c) {
  int depth = 0;
  for (size_t k = open; k < t.size(); ++k) {
    if (t[k] == o) ++depth;
    if (t[k] == c && --depth == 0) return k + 1;
  }
  return t.size();
}

// One parameter's tokens: `.param .u64 k_param_0`, `.param .align 8 .b8 k_param_1[16]`.
PtxParam parse_param(const std::vector<std::string>& t, size_t from, size_t to) {
  PtxParam p;
  uint32_t bits = 0, count = 1, align = 0;
  for (size_t k = from; k < to; ++k) {
    const std::string& x = t[k];
    if (!p.text.empty() && x != "[" && x != "]" && t[k - 1] != "[") p.text += ' ';
    p.text += x;
    if (x == ".align" && k + 1 < to) {
      align = static_cast<uint32_t>(std::strtoul(t[k + 1].c_str(), nullptr, 10));
    } else if (x.size() >= 3 && x[0] == '.' &&
               std::string("usfb").find(x[1]) != std::string::npos &&
               std::isdigit(static_cast<unsigned char>(x[2])) && bits == 0) {
      p.kind = x[1];
      bits = static_cast<uint32_t>(std::strtoul(x.c_str() + 2, nullptr, 10));
    } else if (x == "[" && k + 1 < to) {
      count = static_cast<uint32_t>(std::strtoul(t[k + 1].c_str(), nullptr, 10));
    }
  }
  p.size = bits / 8 * count;
  p.align = align ? align : (count > 1 ? bits / 8 : p.size);
  return p;
}

}  // namespace

PtxModule parse_ptx(const std::string& ptx) {
  PtxModule m;
  const std::vector<std::string> t = tokenize(ptx);
  size_t i = 0;
  while (i < t.size()) {
    if (t[i] == "{") {  // an initializer at file scope
      i = skip_balanced(t, i, "{", "}");
      continue;
    }
    if (t[i] != ".entry" && t[i] != ".func") {
      ++i;
      continue;
    }
    const bool entry = t[i] == ".entry";
    ++i;
    if (!entry && i < t.size() && t[i] == "(") i = skip_balanced(t, i, "(", ")");  // return value
    if (i >= t.size()) break;
    const std::string name = t[i++];
    std::vector<PtxParam> params;
    if (i < t.size() && t[i] == "(") {
      size_t close = skip_balanced(t, i, "(", ")");
      size_t start = i + 1;
      int depth = 0;
      for (size_t k = i + 1; k + 1 < close; ++k) {
        if (t[k] == "(" || t[k] == "[") ++depth;
        if (t[k] == ")" || t[k] == "]") --depth;
        if (depth == 0 && t[k] == ",") {
          params.push_back(parse_param(t, start, k));
          start = k + 1;
        }
      }
      if (start < close - 1) params.push_back(parse_param(t, start, close - 1));
      i = close;
    }
    while (i < t.size() && t[i] != "{" && t[i] != ";" && t[i] != ".entry" && t[i] != ".func") ++i;
    PtxFunction& f = m.functions[name];
    f.entry = f.entry || entry;
    if (!f.defined) f.params = params;
    if (i >= t.size() || t[i] != "{") continue;
    f.defined = true;
    f.params = params;
    size_t end = skip_balanced(t, i, "{", "}");
    for (size_t k = i; k < end; ++k) {
      if (t[k] != "call" && t[k].rfind("call.", 0) != 0) continue;
      size_t c = k + 1;
      if (c < end && t[c] == "(") {  // return values, then a comma
        c = skip_balanced(t, c, "(", ")");
        if (c < end && t[c] == ",") ++c;
      }
      if (c < end && !t[c].empty() && t[c][0] != '%') f.calls.insert(t[c]);
    }
    i = end;
  }
  return m;
}

bool ptx_reaches(const PtxModule& m, const std::string& function,
                 const std::set<std::string>& targets) {
  std::set<std::string> seen{function};
  std::vector<std::string> stack{function};
  while (!stack.empty()) {
    std::string f = stack.back();
    stack.pop_back();
    if (targets.count(f)) return true;
    auto it = m.functions.find(f);
    if (it == m.functions.end()) continue;
    for (const std::string& callee : it->second.calls)
      if (seen.insert(callee).second) stack.push_back(callee);
  }
  return false;
}

const std::set<std::string>& ptx_kernel_launch_calls() {
  static const std::set<std::string> names = {"cudaLaunchDevice",
                                              "cudaLaunchDeviceV2",
                                              "cudaLaunchDevice_ptsz",
                                              "cudaLaunchDeviceV2_ptsz",
                                              "__cudaCDP2LaunchDevice",
                                              "__cudaCDP2LaunchDeviceV2",
                                              "__cudaCDP2LaunchDevice_ptsz",
                                              "__cudaCDP2LaunchDeviceV2_ptsz"};
  return names;
}

const std::set<std::string>& ptx_graph_launch_calls() {
  static const std::set<std::string> names = {"cudaGraphLaunch", "cudaGraphLaunch_ptsz"};
  return names;
}

namespace {

// The opcode of one PTX line, without its predicate ("@%p1 bra $L__BB0_2;" -> "bra"); empty for
// labels, directives, braces and blank lines. `rest` gets what follows the opcode.
std::string ptx_opcode(const std::string& line, std::string* rest) {
  size_t i = line.find_first_not_of(" \t");
  if (i == std::string::npos) return {};
  if (line[i] == '@') {
    i = line.find_first_of(" \t", i);
    if (i == std::string::npos) return {};
    i = line.find_first_not_of(" \t", i);
    if (i == std::string::npos) return {};
  }
  if (!std::isalpha(static_cast<unsigned char>(line[i]))) return {};
  size_t end = line.find_first_of(" \t;", i);
  if (end == std::string::npos) end = line.size();
  if (rest) *rest = line.substr(end);
  return line.substr(i, end - i);
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

std::optional<PtxSharedLoop> ptx_shared_memory_loop(const std::string& ptx) {
  std::vector<std::string> lines;
  for (size_t at = 0; at <= ptx.size();) {
    size_t end = ptx.find('\n', at);
    if (end == std::string::npos) end = ptx.size();
    lines.push_back(ptx.substr(at, end - at));
    at = end + 1;
  }
  std::optional<PtxSharedLoop> best;
  std::string function;
  std::map<std::string, size_t> labels;  // of the function so far, by line
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    const size_t entry = line.find(".entry "), func = line.find(".func ");
    if (entry != std::string::npos || func != std::string::npos) {
      std::vector<std::string> t = tokenize(line);
      for (size_t k = 0; k + 1 < t.size(); ++k)
        if (t[k] == ".entry" || t[k] == ".func") {
          size_t name = k + 1;
          if (t[name] == "(") name = skip_balanced(t, name, "(", ")");  // .func (.reg .b32 r) f(...)
          function = name < t.size() ? t[name] : std::string();
          break;
        }
      labels.clear();
      continue;
    }
    const size_t first = line.find_first_not_of(" \t");
    if (first != std::string::npos && line[first] == '$') {
      const size_t colon = line.find(':', first);
      if (colon != std::string::npos) labels[line.substr(first, colon - first)] = i;
      continue;
    }
    std::string rest;
    const std::string op = ptx_opcode(line, &rest);
    if (op != "bra" && op != "bra.uni") continue;
    const size_t dollar = rest.find('$');
    if (dollar == std::string::npos) continue;
    size_t stop = rest.find_first_of(" \t;", dollar);
    auto target = labels.find(rest.substr(dollar, stop == std::string::npos ? std::string::npos : stop - dollar));
    if (target == labels.end()) continue;  // a forward branch
    PtxSharedLoop loop{function, target->first, 0, 0};
    for (size_t k = target->second + 1; k < i; ++k) {
      const std::string o = ptx_opcode(lines[k], nullptr);
      if (starts_with(o, "fma.") || (starts_with(o, "mad.") && o.find(".f") != std::string::npos)) ++loop.fmas;
      if ((starts_with(o, "ld.") && o.find(".shared") != std::string::npos) || starts_with(o, "ldmatrix"))
        ++loop.shared_loads;
    }
    if (loop.fmas && loop.shared_loads && (!best || loop.fmas > best->fmas)) best = loop;
  }
  return best;
}

}  // namespace orch::lowering
