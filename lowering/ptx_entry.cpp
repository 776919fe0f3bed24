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
    if (guard_per_thread) s += " per thread";
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
    block += "\t.reg .pred " + rn + "go_p;\n";
    block += "\tsetp.ne.b32 " + rn + "go_p, " + rn + "go, 0;\n";
  }
  if (!patch.guard.empty() && patch.guard_per_thread) {
    // Every thread holds the decision, the same everywhere: each leaves on its own.
    block += "\t@!" + rn + "go_p exit;\n";
    block += trigger;
    block += "\t}\n";
  } else if (!patch.guard.empty()) {
    // The guard returns thread 0's decision (or, following, every thread's): the warp
    // reconverges (thread 0 may come back last, from a spin) over the lanes it has, (1 << lanes)
    // - 1 where shl clamps a shift of 32 or more to give 0, then the block ORs the decision and
    // leaves whole unless it is go. Here in the kernel, not in the callee, where synccheck
    // reported every warp divergent at the barrier.
    block += "\t.reg .b32 " + rn + "t<4>;\n";
    block += "\tmov.u32 " + rn + "t0, %tid.z;\n\tmov.u32 " + rn + "t1, %ntid.y;\n\tmov.u32 " + rn + "t2, %tid.y;\n";
    block += "\tmad.lo.u32 " + rn + "t0, " + rn + "t0, " + rn + "t1, " + rn + "t2;\n";
    block += "\tmov.u32 " + rn + "t2, %ntid.x;\n\tmov.u32 " + rn + "t3, %tid.x;\n";
    block += "\tmad.lo.u32 " + rn + "t0, " + rn + "t0, " + rn + "t2, " + rn + "t3;\n";  // linear thread index
    block += "\tmul.lo.u32 " + rn + "t2, " + rn + "t2, " + rn + "t1;\n\tmov.u32 " + rn + "t1, %ntid.z;\n";
    block += "\tmul.lo.u32 " + rn + "t2, " + rn + "t2, " + rn + "t1;\n";  // threads in the block
    block += "\tand.b32 " + rn + "t0, " + rn + "t0, -32;\n\tsub.u32 " + rn + "t2, " + rn + "t2, " + rn + "t0;\n";
    block += "\tshl.b32 " + rn + "t2, 1, " + rn + "t2;\n\tsub.u32 " + rn + "t2, " + rn + "t2, 1;\n";
    block += "\tbar.warp.sync " + rn + "t2;\n";
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

namespace {

// Whether the token m[i, j) names a symbol (a function, variable, parameter or label): not a
// directive or type (.u32), a register (%r1), a number, nor an instruction's opcode (add.s32,
// ret; the first word of a statement, after any @predicate).
bool symbol_token(const std::string& m, size_t i, size_t j) {
  if (std::isdigit(static_cast<unsigned char>(m[i]))) return false;
  if (i > 0 && (m[i - 1] == '.' || m[i - 1] == '%')) return false;
  if (j < m.size() && m[j] == '.') return false;  // an opcode with its modifiers
  if (j < m.size() && m[j] == ':') return true;   // a label's definition
  // What comes before, past blanks (newlines too: a call's operands go on lines of their own)
  // and a predicate guard (@%p1, @!%p1): a statement's end, a block's edge or a label, or a line
  // ended without a `,` or `(` (a .loc directive has no `;`), puts the token first: an opcode.
  bool newline = false;
  auto back = [&](size_t k) {
    for (; k > 0 && space(m[k - 1]); --k)
      if (m[k - 1] == '\n') newline = true;
    return k;
  };
  size_t k = back(i);
  size_t g = k;
  while (g > 0 && (name_char(m[g - 1]) || m[g - 1] == '%' || m[g - 1] == '!')) --g;
  if (g > 0 && g < k && m[g - 1] == '@') k = back(g - 1);
  if (k == 0) return false;
  const char c = m[k - 1];
  if (c == ';' || c == '{' || c == '}' || c == ':') return false;
  return !newline || c == ',' || c == '(';
}

// Calls `f(begin, end)` for every symbol token of the code mask `m`, in order.
template <class F>
void each_symbol_token(const std::string& m, F&& f) {
  for (size_t i = 0; i < m.size();) {
    if (!name_char(m[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < m.size() && name_char(m[j])) ++j;
    if (symbol_token(m, i, j)) f(i, j);
    i = j;
  }
}

// Every symbol token of the code mask `m`.
std::set<std::string> name_tokens(const std::string& m) {
  std::set<std::string> out;
  each_symbol_token(m, [&](size_t i, size_t j) { out.insert(m.substr(i, j - i)); });
  return out;
}

// `text` with each name token (by its code mask `m`, same offsets) that `rename` gives a new
// name replaced by it; comments and strings stay as they were.
template <class F>
std::string rename_tokens(const std::string& text, const std::string& m, F&& rename) {
  std::string out;
  size_t copied = 0;
  each_symbol_token(m, [&](size_t i, size_t j) {
    std::string to = rename(m.substr(i, j - i));
    if (to.empty()) return;
    out += text.substr(copied, i - copied) + to;
    copied = j;
  });
  return out + text.substr(copied);
}

std::string fresh_name(const std::set<std::string>& taken, const std::string& base) {
  if (!taken.count(base)) return base;
  for (int k = 1;; ++k)
    if (!taken.count(base + "_" + std::to_string(k))) return base + "_" + std::to_string(k);
}

std::string trimmed(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && space(s[b])) ++b;
  while (e > b && space(s[e - 1])) --e;
  return s.substr(b, e - b);
}

}  // namespace

std::string fresh_ptx_name(const std::string& ptx, const std::string& base) {
  return fresh_name(name_tokens(code_only(ptx)), base);
}

std::optional<std::string> merge_ptx_modules(const std::string& ptx, const std::string& extra_in,
                                             std::string* error, std::map<std::string, std::string>* renamed) {
  const std::string m = code_only(ptx);
  const std::vector<Statement> mine = statements(m);
  std::string target, extra_target;
  const size_t cut = header_end(mine, m, &target);
  std::map<std::string, std::string> mine_defined;  // name -> its text (code only), for definitions
  std::set<std::string> mine_names;
  for (const Statement& s : mine) {
    if (s.name.empty()) continue;
    mine_names.insert(s.name);
    if (s.defines) mine_defined[s.name] = trimmed(m.substr(s.begin, s.end - s.begin));
  }
  std::set<std::string> taken = name_tokens(m);
  for (const std::string& t : name_tokens(code_only(extra_in))) taken.insert(t);
  // Renames until nothing changes: a helper identical but for a call to a renamed symbol is
  // different once that call is renamed.
  std::map<std::string, std::string> renames;
  std::string extra = extra_in;
  for (;;) {
    const std::string x = code_only(extra);
    const std::vector<Statement> theirs = statements(x);
    header_end(theirs, x, &extra_target);
    bool changed = false;
    for (const Statement& s : theirs) {
      if (s.name.empty() || !s.defines || !mine_names.count(s.name)) continue;
      auto same = mine_defined.find(s.name);
      if (same != mine_defined.end() && same->second == trimmed(x.substr(s.begin, s.end - s.begin))) continue;
      const std::string to = fresh_name(taken, s.name);
      taken.insert(to);
      renames[s.name] = to;
      changed = true;
    }
    if (!changed) break;
    std::map<std::string, std::string> step;
    for (const Statement& s : theirs)
      if (renames.count(s.name) && mine_names.count(s.name)) step[s.name] = renames[s.name];
    extra = rename_tokens(extra, x, [&](const std::string& t) {
      auto it = step.find(t);
      return it == step.end() ? std::string() : it->second;
    });
  }
  // What the original names became, through every round (a -> a_1 only ever once).
  if (renamed) *renamed = renames;
  if (target.empty() || target != extra_target) {
    *error = "cannot join PTX for .target " + (extra_target.empty() ? "(none)" : extra_target) +
             " to PTX for .target " + (target.empty() ? "(none)" : target);
    return std::nullopt;
  }
  const std::string x = code_only(extra);
  const std::vector<Statement> theirs = statements(x);
  const size_t extra_cut = header_end(theirs, x, &extra_target);
  std::string joined;
  for (const Statement& s : theirs) {
    if (s.end <= extra_cut) continue;
    // .file and .section (debug information) belong to the module that made them.
    if (s.name.empty()) continue;
    // Declared or defined alike in `ptx` already (renamed definitions have fresh names).
    if (mine_names.count(s.name)) continue;
    joined += extra.substr(s.begin, s.end - s.begin) + "\n\n";
  }
  std::string out = ptx.substr(0, cut);
  out += "\n\n// orch: code orchc joined to this module\n" + joined + "// orch: the module's own code\n";
  out += ptx.substr(cut);
  return out;
}

std::optional<std::string> clone_ptx_entry(const std::string& ptx, const std::string& entry, const std::string& clone,
                                           std::string* error) {
  const std::string m = code_only(ptx);
  if (!find_entry(m, entry, error)) return std::nullopt;
  for (const Statement& s : statements(m)) {
    if (!s.function || !s.defines || s.name != entry) continue;
    const std::string text = ptx.substr(s.begin, s.end - s.begin);
    const std::string tm = m.substr(s.begin, s.end - s.begin);
    // The parameters: the names in the list after the entry's name.
    const size_t open = tm.find('(', tm.find(entry)), close = tm.find(')', open);
    std::set<std::string> params;
    if (open != std::string::npos && close != std::string::npos)
      params = name_tokens(tm.substr(open + 1, close - open - 1));
    std::string copy = rename_tokens(text, tm, [&](const std::string& t) -> std::string {
      if (t == entry) return clone;
      if (params.count(t)) return t.rfind(entry, 0) == 0 ? clone + t.substr(entry.size()) : clone + "_" + t;
      if (t.rfind("$L__", 0) == 0) return t + "_" + clone;  // labels: the copy's own
      return {};
    });
    return ptx.substr(0, s.end) + "\n\n// orch: a copy of " + entry + "\n" + copy + ptx.substr(s.end);
  }
  *error = "the PTX defines no entry " + entry;
  return std::nullopt;
}

}  // namespace orch::lowering
