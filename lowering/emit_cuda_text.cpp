// The ejector's text helpers: C++ identifiers and literals, NCCL's names for types and
// reductions, and a body's nodes in dependency order.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include "lowering/emit_cuda_internal.h"

namespace orch::eject {

// ---- names and text ---------------------------------------------------------------------

bool reserved_word(const std::string& s) {
  static const std::set<std::string> words = {
      // C++ keywords and alternative tokens
      "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break",
      "case", "catch", "char", "char8_t", "char16_t", "char32_t", "class", "compl", "concept",
      "const", "consteval", "constexpr", "constinit", "const_cast", "continue", "co_await",
      "co_return", "co_yield", "decltype", "default", "delete", "do", "double", "dynamic_cast",
      "else", "enum", "explicit", "export", "extern", "false", "float", "for", "friend", "goto",
      "if", "inline", "int", "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq",
      "nullptr", "operator", "or", "or_eq", "private", "protected", "public", "register",
      "reinterpret_cast", "requires", "return", "short", "signed", "sizeof", "static",
      "static_assert", "static_cast", "struct", "switch", "template", "this", "thread_local",
      "throw", "true", "try", "typedef", "typeid", "typename", "union", "unsigned", "using",
      "virtual", "void", "volatile", "wchar_t", "while", "xor", "xor_eq",
      // macros of the headers the file includes
      "assert", "errno", "stdin", "stdout", "stderr", "NULL", "EOF", "EXIT_SUCCESS", "EXIT_FAILURE",
      "RAND_MAX", "BUFSIZ", "FILENAME_MAX", "SEEK_SET", "SEEK_CUR", "SEEK_END",
      // CUDA built-ins that are macros or variables in device code
      "warpSize", "threadIdx", "blockIdx", "blockDim", "gridDim"};
  return words.count(s) > 0 || s.rfind("__", 0) == 0;
}

// A C++ identifier for an orch name: other characters become `_`, reserved words get a `_`.
std::string ident(const std::string& name) {
  std::string s;
  for (char c : name) s += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) s = "_" + s;
  if (reserved_word(s)) s += "_";
  return s;
}


// `dp_step` -> `DpStep`.
std::string camel(const std::string& name) {
  std::string out;
  bool up = true;
  for (char c : ident(name)) {
    if (c == '_') {
      up = true;
      continue;
    }
    out += up ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    up = false;
  }
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "P" + out;
  return out;
}

std::string c_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\%03o", c);
      out += buf;
    } else if (c == '?') {
      out += "\\?";  // no trigraphs, whatever the compiler's mode
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// Text safe inside a `//` comment: one line, no trailing backslash.
std::string comment_text(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  size_t b = s.find_first_not_of(' ');
  s = b == std::string::npos ? "" : s.substr(b);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\\')) s.pop_back();
  if (s.size() > 110) s = s.substr(0, 107) + "...";
  return s;
}

std::string double_literal(double d) {
  if (std::isnan(d)) return "NAN";
  if (std::isinf(d)) return d > 0 ? "HUGE_VAL" : "(-HUGE_VAL)";
  char buf[40];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  std::string s = buf;
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

std::string float_literal(double d) {
  float f = static_cast<float>(d);
  if (std::isnan(f)) return "NAN";
  if (std::isinf(f)) return f > 0 ? "HUGE_VALF" : "(-HUGE_VALF)";
  char buf[40];
  for (int precision = 1; precision <= 9; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, static_cast<double>(f));
    if (std::strtof(buf, nullptr) == f) break;
  }
  std::string s = buf;
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s + "f";
}

// A param's default (a value of its type) as an initializer of its C++ type.
std::string literal(const expr::Value& v, lir::ScalarType t) {
  switch (t) {
    case lir::ScalarType::F32:
      return float_literal(v.as_double());
    case lir::ScalarType::F64:
      return double_literal(v.as_double());
    case lir::ScalarType::F16:
      return "__half(" + float_literal(v.as_double()) + ")";
    case lir::ScalarType::BF16:
      return "__nv_bfloat16(" + float_literal(v.as_double()) + ")";
    default:
      return expr::literal(v);  // exact, with the type's suffix
  }
}

const char* nccl_type(lir::ScalarType t) {
  switch (t) {
    case lir::ScalarType::U8:
      return "ncclUint8";
    case lir::ScalarType::I8:
      return "ncclInt8";
    case lir::ScalarType::U32:
      return "ncclUint32";
    case lir::ScalarType::I32:
      return "ncclInt32";
    case lir::ScalarType::U64:
      return "ncclUint64";
    case lir::ScalarType::I64:
      return "ncclInt64";
    case lir::ScalarType::F16:
      return "ncclFloat16";
    case lir::ScalarType::BF16:
      return "ncclBfloat16";
    case lir::ScalarType::F32:
      return "ncclFloat32";
    case lir::ScalarType::F64:
      return "ncclFloat64";
    default:
      break;  // u16, i16 and bool are rejected by the checker (E0701)
  }
  return "ncclUint8";
}

const char* nccl_op(lir::ReduceOp op) {
  switch (op) {
    case lir::ReduceOp::None:
    case lir::ReduceOp::Sum: break;
    case lir::ReduceOp::Prod: return "ncclProd";
    case lir::ReduceOp::Min: return "ncclMin";
    case lir::ReduceOp::Max: return "ncclMax";
    case lir::ReduceOp::Avg: return "ncclAvg";
  }
  return "ncclSum";
}

// Node indices in an order that puts every dependency first: program order, unless a
// dependency says otherwise.
std::vector<int> topological_order(const lir::Body& r) {
  size_t n = r.nodes.size();
  std::vector<int> indegree(n, 0);
  std::vector<std::vector<int>> next(n);
  for (size_t to = 0; to < n; ++to)
    for (const lir::Dep& d : r.nodes[to].deps) {
      next[d.from].push_back(static_cast<int>(to));
      ++indegree[to];
    }
  std::set<int> ready;
  for (size_t i = 0; i < n; ++i)
    if (indegree[i] == 0) ready.insert(static_cast<int>(i));
  std::vector<int> order;
  while (!ready.empty()) {
    int i = *ready.begin();
    ready.erase(ready.begin());
    order.push_back(i);
    for (int j : next[i])
      if (--indegree[j] == 0) ready.insert(j);
  }
  for (size_t i = 0; i < n && order.size() < n; ++i)  // a cycle: cannot happen after checking
    if (std::find(order.begin(), order.end(), static_cast<int>(i)) == order.end())
      order.push_back(static_cast<int>(i));
  return order;
}

}  // namespace orch::eject
