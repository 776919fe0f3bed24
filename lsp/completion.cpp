// Completion from the text itself: a small scanner (no parser, so it works in the half-typed
// statement being completed) finds the declarations and the words before the cursor.
#include <algorithm>
#include <cctype>
#include <iterator>
#include <set>

#include "lsp/analysis.h"

namespace orch::lsp {

namespace {

struct Token {
  std::string text;
  bool word = false;
  int braces = 0;  // `{` depth before the token
  int parens = 0;  // `(` depth before the token
  bool line_start = false;  // first token of its line
};

struct Scan {
  std::vector<Token> tokens;  // before the cursor, without the word being typed
  bool in_literal = false;    // the cursor is in a comment, a string or a source block
};

bool word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Tokens of text[0, end), masking comments, strings and `"""` blocks.
Scan scan(const std::string& text, size_t end) {
  Scan s;
  int braces = 0, parens = 0;
  bool line_start = true;
  size_t i = 0;
  while (i < end) {
    char c = text[i];
    if (c == '\n') {
      line_start = true;
      ++i;
      continue;
    }
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
      continue;
    }
    auto skip_to = [&](const std::string& close, size_t from) {
      size_t at = text.find(close, from);
      if (at == std::string::npos || at + close.size() > end) {
        s.in_literal = true;
        i = end;
        return false;
      }
      for (size_t k = i; k < at; ++k)
        if (text[k] == '\n') line_start = true;
      i = at + close.size();
      return true;
    };
    if (text.compare(i, 2, "//") == 0) {
      size_t nl = text.find('\n', i);
      if (nl == std::string::npos || nl >= end) {
        s.in_literal = true;
        break;
      }
      i = nl;
      continue;
    }
    if (text.compare(i, 2, "/*") == 0) {
      if (!skip_to("*/", i + 2)) break;
      continue;
    }
    if (text.compare(i, 3, "\"\"\"") == 0) {
      if (!skip_to("\"\"\"", i + 3)) break;
      s.tokens.push_back({"\"\"\"", false, braces, parens, false});
      line_start = false;
      continue;
    }
    if (c == '"') {
      size_t k = i + 1;
      while (k < end && text[k] != '"' && text[k] != '\n') k += text[k] == '\\' ? 2 : 1;
      if (k >= end) {
        s.in_literal = true;
        break;
      }
      s.tokens.push_back({"\"", false, braces, parens, line_start});
      line_start = false;
      i = k + 1;
      continue;
    }
    Token t;
    t.braces = braces;
    t.parens = parens;
    t.line_start = line_start;
    line_start = false;
    if (word_char(c)) {
      size_t k = i;
      while (k < end && word_char(text[k])) ++k;
      t.text = text.substr(i, k - i);
      t.word = true;
      i = k;
    } else {
      // The operators completion cares about; any other character is a token of its own.
      static const char* ops[] = {"<<<", ">>>", "->", nullptr};
      size_t len = 1;
      for (const char** op = ops; *op; ++op)
        if (text.compare(i, std::char_traits<char>::length(*op), *op) == 0) {
          len = std::char_traits<char>::length(*op);
          break;
        }
      t.text = text.substr(i, len);
      i += len;
      if (t.text == "{") ++braces;
      if (t.text == "}") braces = std::max(0, braces - 1);
      if (t.text == "(") ++parens;
      if (t.text == ")") parens = std::max(0, parens - 1);
    }
    s.tokens.push_back(std::move(t));
  }
  // The word under the cursor is what the user is typing: the editor filters by it.
  if (!s.in_literal && !s.tokens.empty() && s.tokens.back().word && end > 0 && word_char(text[end - 1]))
    s.tokens.pop_back();
  return s;
}

struct Declared {
  std::string name, kind, detail;  // kind: param, buffer, scalar, comm, kernel, graph, device graph
};

// Declarations, found by their keyword at the top level (the scanner of the whole text).
std::vector<Declared> declarations(const std::string& text) {
  Scan s = scan(text, text.size());
  std::vector<Declared> out;
  const auto& t = s.tokens;
  for (size_t i = 0; i + 1 < t.size(); ++i) {
    if (t[i].braces != 0 || t[i].parens != 0 || !t[i].word || !t[i + 1].word) continue;
    if (i > 0 && t[i - 1].text == ":") continue;  // `g: graph` in a kernel's parameters
    const std::string& k = t[i].text;
    const std::string& name = t[i + 1].text;
    if (k == "param" || k == "buffer") {
      std::string type = i + 3 < t.size() && t[i + 2].text == ":" ? t[i + 3].text : "";
      bool array = i + 4 < t.size() && t[i + 4].text == "[";
      out.push_back({name, k == "buffer" && !array ? "scalar" : k, type + (array ? "[]" : "")});
    } else if (k == "comm") {
      out.push_back({name, k, "comm"});
    } else if (k == "kernel") {
      out.push_back({name, k, "kernel"});
    } else if (k == "graph") {
      bool device = false;
      for (size_t j = i + 2; j < t.size() && t[j].text != "{" && j < i + 12; ++j) device |= t[j].text == "device";
      out.push_back({name, device ? "device graph" : "graph", device ? "device graph" : "graph"});
    }
  }
  return out;
}

const char* kTypes[] = {"u8", "u16", "u32", "u64", "i8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64", "bool"};

// A `symmetric` buffer attribute at the top level (after a buffer's `]`, its scalar type or
// another attribute): the pipeline uses NVSHMEM, and `my_pe` and `n_pes` mean something
// (docs/language.md, `buffer`).
bool declares_symmetric(const std::string& text) {
  Scan s = scan(text, text.size());
  const auto& t = s.tokens;
  for (size_t i = 1; i < t.size(); ++i) {
    if (t[i].braces != 0 || t[i].parens != 0 || t[i].text != "symmetric") continue;
    const std::string& before = t[i - 1].text;
    if (before == "]" || before == "host" || before == "keep" ||
        std::find(std::begin(kTypes), std::end(kTypes), before) != std::end(kTypes))
      return true;
  }
  return false;
}

const char* kDeclKeywords[] = {"pipeline", "target", "param", "buffer", "comm", "kernel", "graph"};
const char* kStmtKeywords[] = {"copy", "fill", "if", "while", "switch", "call", "launch",
                               "allreduce", "broadcast", "allgather", "reduce_scatter",
                               "put", "get", "signal", "wait", "quiet", "barrier"};
const char* kReduceOps[] = {"sum", "prod", "min", "max", "avg"};
const char* kLaunchModes[] = {"tail", "fire_and_forget", "sibling"};
const char* kKernelClauses[] = {"launches", "entry", "from", "source", "cost"};

}  // namespace

std::vector<CompletionItem> complete(const std::string& text, size_t offset, const Analysis* a) {
  offset = std::min(offset, text.size());
  Scan s = scan(text, offset);
  if (s.in_literal) return {};
  std::vector<Declared> decls = declarations(text);
  const bool symmetric = declares_symmetric(text);
  std::vector<CompletionItem> out;
  std::set<std::string> seen;
  auto add = [&](const std::string& label, CompletionKind kind, const std::string& detail) {
    if (seen.insert(label).second) out.push_back({label, detail, kind});
  };
  auto keywords = [&](const auto& list) {
    for (const char* k : list) add(k, CompletionKind::Keyword, "keyword");
  };
  auto names = [&](std::initializer_list<const char*> kinds) {
    for (const Declared& d : decls)
      for (const char* k : kinds)
        if (d.kind == k) {
          std::string detail = d.kind + (d.detail.empty() || d.detail == d.kind ? "" : ": " + d.detail);
          // The checked signature where the analysis has the kernel.
          if (a && a->module() && d.kind == "kernel") {
            int id = a->index().lookup(d.name);
            if (id >= 0 && a->index().declarations()[id].kind == SymbolKind::Kernel) {
              // The declaration's text up to its parameter list's end, on one line.
              std::string sig = source_text(a->sources(), a->index().declarations()[id].loc);
              size_t end = std::min(sig.find(')'), sig.find('\n'));
              detail = end == std::string::npos ? sig : sig.substr(0, sig[end] == ')' ? end + 1 : end);
            }
          }
          CompletionKind ck = d.kind == "kernel" ? CompletionKind::Function
                              : d.kind == "param" ? CompletionKind::Constant
                              : d.kind == "comm" ? CompletionKind::Struct
                              : d.kind == "graph" || d.kind == "device graph" ? CompletionKind::Module
                                                                               : CompletionKind::Variable;
          add(d.name, ck, detail);
        }
  };
  auto expression = [&](bool buffers) {
    names({"param", "scalar"});
    if (buffers) names({"buffer", "graph", "device graph"});
    for (const char* f : {"min", "max", "ceil_div"}) add(f, CompletionKind::Function, "function");
    for (const char* b : {"rank", "world_size"}) add(b, CompletionKind::Constant, "built-in param");
    if (symmetric)
      for (const char* b : {"my_pe", "n_pes"}) add(b, CompletionKind::Constant, "built-in param (NVSHMEM)");
  };

  const std::vector<Token>& t = s.tokens;
  // The tokens of the statement being written: those after the last line start.
  size_t first = t.size();
  while (first > 0 && !t[first - 1].line_start) --first;
  if (first > 0) --first;
  const bool fresh_line = t.empty() || offset == 0 || [&] {
    size_t k = offset;
    while (k > 0 && word_char(text[k - 1])) --k;
    while (k > 0 && (text[k - 1] == ' ' || text[k - 1] == '\t')) --k;
    return k == 0 || text[k - 1] == '\n' || text[k - 1] == '{' || text[k - 1] == '}' || text[k - 1] == ';';
  }();
  const Token* prev = t.empty() ? nullptr : &t.back();
  const Token* prev2 = t.size() >= 2 ? &t[t.size() - 2] : nullptr;
  const std::string p1 = prev ? prev->text : "", p2 = prev2 ? prev2->text : "";
  const std::string head = first < t.size() && !fresh_line ? t[first].text : "";
  const int braces = [&] {
    int b = prev ? prev->braces : 0;
    if (p1 == "{") ++b;
    if (p1 == "}") b = std::max(0, b - 1);
    return b;
  }();

  if (braces == 0) {
    if (fresh_line) {
      keywords(kDeclKeywords);
      if (prev && (p1 == ")" || p1 == "\"" || p1 == "\"\"\"")) keywords(kKernelClauses);
      return out;
    }
    if (p1 == ":" && (head == "param" || head == "buffer")) {
      keywords(kTypes);
      return out;
    }
    if (p1 == ":" || p1 == "in" || p1 == "out" || p1 == "inout") {  // a kernel parameter's type
      keywords(kTypes);
      if (p1 == ":") for (const char* k : {"in", "out", "inout", "cond", "graph"}) add(k, CompletionKind::Keyword, "keyword");
      return out;
    }
    if (p1 == ")") {
      keywords(kKernelClauses);
      return out;
    }
    if (p1 == "=" || p1 == "[" || p1 == "(" || p1 == "*" || p1 == "+" || p1 == "-" || p1 == "/" || p1 == "<" || p1 == ">") {
      names({"param"});
      add("world_size", CompletionKind::Constant, "built-in param");
      if (symmetric) add("n_pes", CompletionKind::Constant, "built-in param (NVSHMEM)");
      return out;
    }
    return out;
  }
  // In a graph body.
  if (fresh_line) {
    keywords(kStmtKeywords);
    names({"kernel", "scalar"});
    if (p1 == "}" ) for (const char* k : {"else", "case", "default"}) add(k, CompletionKind::Keyword, "keyword");
    return out;
  }
  if (p1 == "copy" || p1 == "->" || p1 == "fill" || p1 == "broadcast" || p1 == "allgather") {
    names({"buffer", "scalar"});
    return out;
  }
  if (p1 == "allreduce" || p1 == "reduce_scatter") {
    for (const char* k : kReduceOps) add(k, CompletionKind::Keyword, "reduction");
    return out;
  }
  if ((p2 == "allreduce" || p2 == "reduce_scatter") && prev && prev->word) {
    names({"buffer", "scalar"});
    return out;
  }
  if (p1 == "on") {
    names({"comm"});
    return out;
  }
  if (p1 == "call") {
    names({"graph"});
    return out;
  }
  if (p1 == "launch") {
    names({"device graph"});
    return out;
  }
  if ((p2 == "launch" && prev && prev->word) || (p1 == "]" && head == "launch")) {
    keywords(kLaunchModes);
    return out;
  }
  if (p1 == "while") {
    add("kernel", CompletionKind::Keyword, "keyword");
    expression(false);
    return out;
  }
  if (p1 == "else") {
    add("if", CompletionKind::Keyword, "keyword");
    return out;
  }
  // Launch arguments take buffers and graphs; shapes, conditions and values take scalars.
  const bool in_args = prev && prev->parens > 0 && head.size() && t.size() > first &&
                       std::any_of(t.begin() + static_cast<long>(first), t.end(), [](const Token& x) { return x.text == ">>>"; });
  if (p1 == "<<<" || p1 == "(" || p1 == "," || p1 == "=" || p1 == "if" || p1 == "switch" || p1 == "case" ||
      (prev && !prev->word && p1 != ")" && p1 != "]" && p1 != ">>>" && p1 != "\"")) {
    expression(in_args);
    if (in_args) {
      add("self", CompletionKind::Keyword, "the graph being executed");
      add("cond", CompletionKind::Keyword, "the enclosing `while kernel`'s condition");
    }
    return out;
  }
  return out;
}

}  // namespace orch::lsp
