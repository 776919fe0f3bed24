#include "lowering/ptx_entry.h"

#include <cctype>
#include <map>
#include <set>

namespace orch::lowering {

namespace {

bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$'; }
bool space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

// The text with comments and quoted strings (`.file 1 "a.cu"`) blanked to spaces, newlines kept:
// every search below runs on it, every edit on the text at the same offsets.
std::string code_only(const std::string& s) {
  std::string m = s;
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    if (s[i] == '/' && i + 1 < n && s[i + 1] == '/') {
      while (i < n && s[i] != '\n') m[i++] = ' ';
    } else if (s[i] == '/' && i + 1 < n && s[i + 1] == '*') {
      size_t end = s.find("*/", i + 2);
      end = end == std::string::npos ? n : end + 2;
      for (; i < end; ++i)
        if (s[i] != '\n') m[i] = ' ';
    } else if (s[i] == '"') {
      size_t end = s.find('"', i + 1);
      end = end == std::string::npos ? n : end + 1;
      for (; i < end; ++i)
        if (s[i] != '\n') m[i] = ' ';
    } else {
      ++i;
    }
  }
  return m;
}

size_t skip_space(const std::string& m, size_t i) {
  while (i < m.size() && space(m[i])) ++i;
  return i;
}

// Whether `word` occurs at `i` as a whole token (a directive or a name).
bool token_at(const std::string& m, size_t i, const std::string& word) {
  if (m.compare(i, word.size(), word) != 0) return false;
  const bool before_ok = i == 0 || !(name_char(m[i - 1]) || m[i - 1] == '.' || m[i - 1] == '%');
  const size_t after = i + word.size();
  const bool after_ok = after >= m.size() || !name_char(m[after]);
  return before_ok && after_ok;
}

bool mentions(const std::string& m, const std::string& name) {
  for (size_t i = m.find(name); i != std::string::npos; i = m.find(name, i + 1))
    if (token_at(m, i, name)) return true;
  return false;
}

// A prefix for the names the patch adds that no token of the module starts with.
std::string fresh_prefix(const std::string& m, const std::string& base) {
  for (int k = 0;; ++k) {
    std::string p = k ? base + std::to_string(k) + "_" : base;
    bool used = false;
    for (size_t i = m.find(p); i != std::string::npos && !used; i = m.find(p, i + 1)) {
      const char b = i ? m[i - 1] : ' ';
      used = !(name_char(b) || b == '.');  // `p` starts a token (a % register counts)
    }
    if (!used) return p;
  }
}

struct EntrySpan {
  size_t open_paren = 0, close_paren = 0;  // the parameter list
  size_t body_open = 0;                     // the `{` of the body
};

std::optional<EntrySpan> find_entry(const std::string& m, const std::string& entry, std::string* error) {
  for (size_t pos = m.find(".entry"); pos != std::string::npos; pos = m.find(".entry", pos + 1)) {
    if (!token_at(m, pos, ".entry")) continue;
    size_t n = skip_space(m, pos + 6);
    size_t e = n;
    while (e < m.size() && name_char(m[e])) ++e;
    if (m.compare(n, e - n, entry) != 0 || e - n != entry.size()) continue;
    EntrySpan s;
    s.open_paren = skip_space(m, e);
    if (s.open_paren >= m.size() || m[s.open_paren] != '(') {
      *error = "the entry " + entry + " in the PTX has no parameter list";
      return std::nullopt;
    }
    s.close_paren = m.find(')', s.open_paren);
    if (s.close_paren == std::string::npos) break;
    size_t q = m.find_first_of("{;", s.close_paren);
    if (q == std::string::npos) break;
    if (m[q] == ';') continue;  // a prototype, not the definition
    s.body_open = q;
    return s;
  }
  *error = "the PTX defines no entry " + entry;
  return std::nullopt;
}

// Where the first instruction of the body opening at `open` begins: past the declarations.
size_t first_instruction(const std::string& m, size_t open) {
  size_t line = open + 1;
  // Code on the `{` line itself: insert right after the brace.
  for (size_t i = line; i < m.size() && m[i] != '\n'; ++i)
    if (!space(m[i])) return line;
  static const char* const kDeclarations[] = {".reg", ".local", ".shared", ".param", ".const", ".global"};
  while (line < m.size()) {
    if (m[line] == '\n') {
      ++line;
      continue;
    }
    size_t end = m.find('\n', line);
    if (end == std::string::npos) end = m.size();
    size_t first = skip_space(m, line);
    bool declaration = first >= end;  // blank (or a comment, blanked)
    for (const char* d : kDeclarations) declaration = declaration || token_at(m, first, d);
    if (!declaration) return line;
    line = end + 1;
  }
  return m.size();
}

const char* ld_type(uint32_t size) {
  switch (size) {
    case 1: return "u8";
    case 2: return "u16";
    case 4: return "u32";
    default: return "u64";
  }
}

}  // namespace

std::string PtxEntryPatch::describe() const {
  std::string s = wait ? "wait" : "";
  if (!guard.empty()) {
    s += std::string(s.empty() ? "" : " ") + "guard " + guard + "(";
    for (size_t i = 0; i < extra_params.size(); ++i)
      s += (i ? ", " : "") + std::to_string(extra_params[i]);
    s += ")";
  }
  if (wait) s += " launch_dependents";
  return s;
}

std::optional<std::string> patch_ptx_entry(const std::string& ptx, const std::string& entry,
                                           const PtxEntryPatch& patch, std::string* error) {
  for (uint32_t size : patch.extra_params) {
    if (size != 1 && size != 2 && size != 4 && size != 8) {
      *error = "an appended parameter of " + std::to_string(size) + " bytes (1, 2, 4 or 8 only)";
      return std::nullopt;
    }
  }
  if (!patch.extra_params.empty() && patch.guard.empty()) {
    *error = "appended parameters without a guard to pass them to";
    return std::nullopt;
  }
  const std::string m = code_only(ptx);
  std::optional<EntrySpan> span = find_entry(m, entry, error);
  if (!span) return std::nullopt;
  if (patch.empty()) return ptx;

  // Names nothing in the module uses: parameters, the call's arguments, registers.
  const std::string pn = fresh_prefix(m, "orch_");
  const std::string rn = fresh_prefix(m, "%orch_");
  std::vector<std::string> params;
  for (size_t i = 0; i < patch.extra_params.size(); ++i) params.push_back(pn + "param_" + std::to_string(i));

  std::string block = "\t// orch: " + patch.describe() + "\n";
  // The trigger right after the wait, or after the guard where there is one (kPdlTrigger in
  // lowering/codegen.h says why).
  const std::string trigger = patch.wait ? "\tgriddepcontrol.launch_dependents;\n" : "";
  if (patch.wait) block += "\tgriddepcontrol.wait;\n";
  if (patch.guard.empty()) {
    block += trigger;
  } else {
    const size_t n = patch.extra_params.size();
    block += "\t{\n";
    block += "\t.reg .pred " + rn + "run;\n\t.reg .b32 " + rn + "go;\n\t.reg .b16 " + rn + "h;\n";
    if (n) block += "\t.reg .b64 " + rn + "a<" + std::to_string(n) + ">;\n";
    for (size_t i = 0; i < n; ++i) block += "\t.param .b64 " + pn + "arg" + std::to_string(i) + ";\n";
    block += "\t.param .b32 " + pn + "ret;\n";
    std::string args;
    for (size_t i = 0; i < n; ++i) {
      const std::string a = rn + "a" + std::to_string(i);
      const uint32_t size = patch.extra_params[i];
      if (size <= 2) {
        block += std::string("\tld.param.") + ld_type(size) + " " + rn + "h, [" + params[i] + "];\n";
        block += "\tcvt.u64.u16 " + a + ", " + rn + "h;\n";
      } else if (size == 4) {
        block += "\tld.param.u32 " + rn + "go, [" + params[i] + "];\n";
        block += "\tcvt.u64.u32 " + a + ", " + rn + "go;\n";
      } else {
        block += "\tld.param.u64 " + a + ", [" + params[i] + "];\n";
      }
      block += "\tst.param.b64 [" + pn + "arg" + std::to_string(i) + "], " + a + ";\n";
      args += (i ? ", " : "") + pn + "arg" + std::to_string(i);
    }
    block += "\tcall.uni (" + pn + "ret), " + patch.guard + (n ? ", (" + args + ")" : "") + ";\n";
    block += "\tld.param.b32 " + rn + "go, [" + pn + "ret];\n";
    // The guard returns thread 0's decision (or, following, every thread's): the warp
    // reconverges (thread 0 may come back last, from a spin) over the lanes it has, (1 << lanes)
    // - 1 where shl clamps a shift of 32 or more to give 0, then the block ORs the decision and
    // leaves whole unless it is go. Here in the kernel, not in the callee, where synccheck
    // reported every warp divergent at the barrier.
    block += "\t.reg .pred " + rn + "go_p;\n\t.reg .b32 " + rn + "t<4>;\n";
    block += "\tmov.u32 " + rn + "t0, %tid.z;\n\tmov.u32 " + rn + "t1, %ntid.y;\n\tmov.u32 " + rn + "t2, %tid.y;\n";
    block += "\tmad.lo.u32 " + rn + "t0, " + rn + "t0, " + rn + "t1, " + rn + "t2;\n";
    block += "\tmov.u32 " + rn + "t2, %ntid.x;\n\tmov.u32 " + rn + "t3, %tid.x;\n";
    block += "\tmad.lo.u32 " + rn + "t0, " + rn + "t0, " + rn + "t2, " + rn + "t3;\n";  // linear thread index
    block += "\tmul.lo.u32 " + rn + "t2, " + rn + "t2, " + rn + "t1;\n\tmov.u32 " + rn + "t1, %ntid.z;\n";
    block += "\tmul.lo.u32 " + rn + "t2, " + rn + "t2, " + rn + "t1;\n";  // threads in the block
    block += "\tand.b32 " + rn + "t0, " + rn + "t0, -32;\n\tsub.u32 " + rn + "t2, " + rn + "t2, " + rn + "t0;\n";
    block += "\tshl.b32 " + rn + "t2, 1, " + rn + "t2;\n\tsub.u32 " + rn + "t2, " + rn + "t2, 1;\n";
    block += "\tbar.warp.sync " + rn + "t2;\n";
    block += "\tsetp.ne.b32 " + rn + "go_p, " + rn + "go, 0;\n";
    block += "\tbar.red.or.pred " + rn + "run, 0, " + rn + "go_p;\n";
    block += "\t@!" + rn + "run exit;\n";
    block += trigger;
    block += "\t}\n";
  }

  std::string out = ptx;
  // The later edit first, so the earlier offset still holds.
  out.insert(first_instruction(m, span->body_open), block);
  if (!params.empty()) {
    std::string decls;
    for (size_t i = 0; i < params.size(); ++i)
      // Untyped bits (.b32, not .u32): a float argument is a 4-byte float as much as an integer.
      decls += std::string(i ? ",\n" : "") + "\t.param .b" + std::to_string(8 * patch.extra_params[i]) + " " + params[i];
    size_t last = span->close_paren;
    while (last > span->open_paren && space(m[last - 1])) --last;
    if (last == span->open_paren + 1) out.insert(last, "\n" + decls + "\n");
    else out.insert(last, ",\n" + decls);
  }
  return out;
}

namespace {

// A top-level statement of a module: a function (declared or defined), a variable, or a
// directive (.version, .target, .address_size, .file, ...).
struct Statement {
  size_t begin = 0, end = 0;  // [begin, end) of the text
  std::string name;           // the function or variable it declares; empty for a directive
  bool function = false;
  bool defines = false;  // a function with a body, or a variable that is not .extern
};

std::vector<Statement> statements(const std::string& m) {
  std::vector<Statement> out;
  size_t i = skip_space(m, 0);
  while (i < m.size()) {
    Statement s;
    s.begin = i;
    // Directives without a terminator end at their line: .version, .target, .address_size, .file.
    bool line_directive = false;
    for (const char* d : {".version", ".target", ".address_size", ".file", ".loc", ".section"})
      line_directive = line_directive || token_at(m, i, d);
    if (line_directive && !token_at(m, i, ".section")) {
      size_t end = m.find('\n', i);
      s.end = end == std::string::npos ? m.size() : end;
      out.push_back(s);
      i = skip_space(m, s.end);
      continue;
    }
    int depth = 0;
    size_t j = i;
    bool braces = false;
    for (; j < m.size(); ++j) {
      char c = m[j];
      if (c == '{' || c == '(' || c == '[') {
        depth++;
        braces = braces || c == '{';
      } else if (c == '}' || c == ')' || c == ']') {
        --depth;
        if (c == '}' && depth == 0) {
          size_t k = skip_space(m, j + 1);
          j = k < m.size() && m[k] == ';' ? k + 1 : j + 1;
          break;
        }
      } else if (c == ';' && depth == 0) {
        ++j;
        break;
      }
    }
    s.end = j;
    // The header: up to the first `{` or `=` (a body or an initializer).
    const std::string text = m.substr(s.begin, s.end - s.begin);
    size_t head_end = text.find_first_of("{=");
    const std::string head = text.substr(0, head_end);
    size_t f = std::string::npos;
    for (const char* kw : {".func", ".entry"})
      for (size_t p = head.find(kw); p != std::string::npos && f == std::string::npos; p = head.find(kw, p + 1))
        if (token_at(head, p, kw)) f = p + std::string(kw).size();
    if (f != std::string::npos) {
      s.function = true;
      size_t k = skip_space(head, f);
      if (k < head.size() && head[k] == '(') k = skip_space(head, head.find(')', k) + 1);  // return value
      size_t e = k;
      while (e < head.size() && name_char(head[e])) ++e;
      s.name = head.substr(k, e - k);
      s.defines = braces;
    } else if (!token_at(head, 0, ".section")) {
      // A variable: the name before its `[`, `=` or `;`, after the state space and type.
      size_t e = head.find_first_of("[;");
      if (e == std::string::npos) e = head.size();
      while (e > 0 && space(head[e - 1])) --e;
      size_t b = e;
      while (b > 0 && name_char(head[b - 1])) --b;
      s.name = head.substr(b, e - b);
      s.defines = !mentions(head, ".extern");
    }
    out.push_back(s);
    i = skip_space(m, s.end);
  }
  return out;
}

// The end of the header (.version, .target, .address_size) and the .target's arch.
size_t header_end(const std::vector<Statement>& st, const std::string& m, std::string* target) {
  size_t end = 0;
  for (const Statement& s : st) {
    if (!s.name.empty() || s.function) break;
    if (token_at(m, s.begin, ".target")) {
      size_t a = skip_space(m, s.begin + 7), e = a;
      while (e < m.size() && name_char(m[e])) ++e;
      *target = m.substr(a, e - a);
    }
    if (token_at(m, s.begin, ".version") || token_at(m, s.begin, ".target") ||
        token_at(m, s.begin, ".address_size"))
      end = s.end;
  }
  return end;
}

}  // namespace

std::optional<std::string> merge_ptx_modules(const std::string& ptx, const std::string& extra,
                                             std::string* error) {
  const std::string m = code_only(ptx), x = code_only(extra);
  const std::vector<Statement> mine = statements(m), theirs = statements(x);
  std::string target, extra_target;
  const size_t cut = header_end(mine, m, &target);
  const size_t extra_cut = header_end(theirs, x, &extra_target);
  if (target.empty() || target != extra_target) {
    *error = "cannot join PTX for .target " + (extra_target.empty() ? "(none)" : extra_target) +
             " to PTX for .target " + (target.empty() ? "(none)" : target);
    return std::nullopt;
  }
  std::set<std::string> names;
  for (const Statement& s : mine)
    if (!s.name.empty()) names.insert(s.name);
  std::string joined;
  for (const Statement& s : theirs) {
    if (s.end <= extra_cut) continue;
    if (s.name.empty()) {
      // .file and .section (debug information) belong to the module that made them.
      continue;
    }
    if (names.count(s.name)) {
      if (!s.defines) continue;  // `ptx` declares or defines it already
      *error = "the PTX of the kernel and orchc's code both define the symbol " + s.name;
      return std::nullopt;
    }
    joined += extra.substr(s.begin, s.end - s.begin) + "\n\n";
  }
  std::string out = ptx.substr(0, cut);
  out += "\n\n// orch: code orchc joined to this module\n" + joined + "// orch: the module's own code\n";
  out += ptx.substr(cut);
  return out;
}

}  // namespace orch::lowering
