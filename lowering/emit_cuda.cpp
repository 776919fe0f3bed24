// `orchc --emit=cuda`: the lowered program as one standalone C++/CUDA file. The host code
// mirrors what the runtime does with an artifact (artifact/pipeline.fbs says how each node is
// built), written out as explicit CUDA runtime calls a person can read, edit and keep.
#include "lowering/emit_cuda.h"

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

#include "lowering/codegen.h"
#include "lowering/lir.h"

namespace orch {

namespace {

using lowering::cuda_type;

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

// Hands out identifiers unique within one scope (a struct's members).
class Names {
 public:
  // Names the kernel sources #define are taken too: a member `p.N` must survive `#define N 64`.
  explicit Names(const std::set<std::string>* macros = nullptr) : macros_(macros) {}
  std::string take(const std::string& wanted) {
    std::string s = ident(wanted);
    if (macros_ && macros_->count(s)) s += "_";
    std::string candidate = s;
    for (int i = 2; used_.count(candidate); ++i) candidate = s + "_" + std::to_string(i);
    used_.insert(candidate);
    return candidate;
  }

 private:
  const std::set<std::string>* macros_;
  std::set<std::string> used_;
};

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

// ---- the emitter ------------------------------------------------------------------------

class Emitter {
 public:
  Emitter(const lir::Program& p, const SourceManager& sources) : p_(p), sources_(sources) {}

  std::string run() {
    name_things();
    header();
    kernels();
    host_helpers();
    structs();
    allocate();
    bind_checks();
    graph_builders();
    build();
    launch_and_destroy();
    main_function();
    return out_;
  }

 private:
  // ---- output ----
  void line(const std::string& s = "") {
    if (s.empty()) {
      out_ += "\n";
      return;
    }
    out_ += std::string(indent_ * 2, ' ') + s + "\n";
  }
  void open(const std::string& s) {
    line(s);
    ++indent_;
  }
  void close(const std::string& s = "}") {
    --indent_;
    line(s);
    if (indent_ == 0) resolve_unused();
  }

  // Functions take (p, b, out) whatever their body uses: a marker line becomes `(void)x;` for
  // each parameter the finished body does not mention, so the file compiles without warnings.
  static constexpr const char* kUnused = "@@orch-unused@@";
  void unused_guard() { line(kUnused); }
  void resolve_unused() {
    size_t mark = out_.rfind(kUnused);
    if (mark == std::string::npos) return;
    size_t begin = out_.rfind('\n', mark) + 1;
    size_t end = out_.find('\n', mark) + 1;
    std::string indent = out_.substr(begin, mark - begin);
    std::string body = out_.substr(end);
    auto used = [&](const std::string& name) {
      for (const char* after : {".", "->"}) {
        std::string needle = name + after;
        for (size_t i = body.find(needle); i != std::string::npos; i = body.find(needle, i + 1))
          if (i == 0 ||
              !(std::isalnum(static_cast<unsigned char>(body[i - 1])) || body[i - 1] == '_'))
            return true;
      }
      return false;
    };
    std::string guard;
    size_t header = out_.rfind('\n', begin - 2);
    std::string signature = out_.substr(header + 1, begin - header - 1);
    for (const char* name : {"p", "b"}) {
      bool declared = signature.find(std::string("& ") + name + ",") != std::string::npos ||
                      signature.find(std::string("& ") + name + ")") != std::string::npos ||
                      signature.find(std::string("* ") + name + ")") != std::string::npos;
      if (declared && !used(name)) guard += indent + "(void)" + name + ";\n";
    }
    out_.replace(begin, end - begin, guard);
  }

  // ---- source positions ----
  std::string at(const SourceRange& r) const {
    if (!r.valid()) return p_.file != 0 ? sources_.path(p_.file) : "<unknown>";
    return sources_.describe(r);
  }
  // The statement as the user wrote it (its first line).
  std::string statement(const SourceRange& r) const {
    if (!r.valid()) return "";
    // An excerpt: a generated pipeline may put thousands of statements on one long line.
    SourceManager::Excerpt ex = sources_.line_excerpt(r.file, r.begin.line, r.begin.col, 200);
    return comment_text((ex.cut_before ? "..." : "") + std::string(ex.text) +
                        (ex.cut_after ? "..." : ""));
  }
  // "file:line:col: what", as a C string literal for ORCH_CHECK.
  std::string where(const SourceRange& r, const std::string& what) const {
    return c_string(at(r) + ": " + what);
  }
  void node_comment(const lir::Node& n) {
    std::string text = statement(n.loc);
    line("// " + at(n.loc) + (text.empty() ? "" : "  " + text));
    for (auto it = n.call_stack.rbegin(); it != n.call_stack.rend(); ++it)
      line("//   inlined by `" + statement(*it) + "` at " + at(*it));
    if (const auto* k = std::get_if<lir::KernelNode>(&n.op); k && p_.kernels[k->kernel].generated)
      line("//   runs " + p_.kernels[k->kernel].name + ", a kernel orchc wrote (above)");
  }

  // ---- naming ----
  void name_things() {
    for (const lir::Kernel& k : p_.kernels) {
      std::istringstream in(k.source);
      for (std::string l; std::getline(in, l);) {
        size_t hash = l.find_first_not_of(" \t");
        if (hash == std::string::npos || l[hash] != '#') continue;
        std::istringstream words(l.substr(hash + 1));
        std::string directive, name;
        words >> directive;
        if (directive != "define") continue;
        words >> name;
        name = name.substr(0, name.find('('));
        if (!name.empty()) macros_.insert(name);
      }
    }
    type_ = camel(p_.name);
    fn_ = ident(p_.name);
    for (const lir::Param& x : p_.params) param_names_.push_back(param_scope_.take(x.name));
    for (const lir::Comm& c : p_.comms) comm_names_.push_back(param_scope_.take(c.name));
    if (!p_.comms.empty() || p_.uses_rank) {
      rank_ = param_scope_.take("rank");
      world_size_ = param_scope_.take("world_size");
    }
    for (const lir::Buffer& b : p_.buffers) buffer_names_.push_back(buffer_scope_.take(b.name));
    for (size_t i = 0; i < p_.buffers.size(); ++i)
      host_names_.push_back(p_.buffers[i].host ? buffer_scope_.take(p_.buffers[i].name + "_hostptr")
                                               : "");
    graph_names_.resize(p_.graphs.size());
    for (size_t g = 0; g < p_.graphs.size(); ++g)
      if (built(static_cast<int>(g))) graph_names_[g] = graph_scope_.take(p_.graphs[g].name);
    for (size_t g = 0; g < p_.graphs.size(); ++g)
      if (built(static_cast<int>(g)))
        exec_names_.push_back(graph_scope_.take(graph_names_[g] + "_exec"));
      else
        exec_names_.push_back("");
    table_names_.resize(p_.graphs.size());
    patch_names_.resize(p_.graphs.size());
    for (size_t g = 0; g < p_.graphs.size(); ++g)
      if (p_.graphs[g].device && p_.graphs[g].family_size > 0)
        table_names_[g] = graph_scope_.take(graph_names_[g] + "_table");

    // Device graphs in an order where every graph a kernel takes as a `graph` argument is
    // instantiated first; arguments naming a graph not ready yet (`self`, or a cycle) are set
    // on the executable graph after instantiation.
    std::vector<int> state(p_.graphs.size(), 0);
    std::function<void(int)> visit = [&](int g) {
      state[g] = 1;
      for (int t : graph_args(p_.graphs[g].body))
        if (t != g && p_.graphs[t].device && state[t] == 0) visit(t);
      state[g] = 2;
      device_order_.push_back(g);
    };
    for (size_t g = 0; g < p_.graphs.size(); ++g)
      if (p_.graphs[g].device && state[g] == 0) visit(static_cast<int>(g));
    std::set<int> ready;
    late_nodes_.resize(p_.graphs.size());
    for (int g : device_order_) {
      collect_late(p_.graphs[g].body, g, ready);
      ready.insert(g);
      if (!late_nodes_[g].empty()) patch_names_[g] = graph_scope_.take(graph_names_[g] + "_patch");
    }

    // Generated kernels of the graphs built here (graphs only ever inlined by `call` have their
    // own copies, unused).
    for (size_t g = 0; g < p_.graphs.size(); ++g)
      if (built(static_cast<int>(g)))
        lir::for_each_node(p_.graphs[g].body, [&](const lir::Node& n) {
          if (const auto* k = std::get_if<lir::KernelNode>(&n.op)) used_kernels_.insert(k->kernel);
        });
    for (int k : used_kernels_)
      for (const lir::KernelParam& q : p_.kernels[k].params)
        uses_status_ |= q.kind == lir::KernelParamKind::Status;

    // Which conditional each handle belongs to, for comments and error locations.
    handle_nodes_.assign(p_.handles.size(), nullptr);
    for (int s : p_.segments) find_handles(p_.graphs[s].body);
  }

  bool built(int g) const {
    return p_.graphs[g].device ||
           std::find(p_.segments.begin(), p_.segments.end(), g) != p_.segments.end();
  }

  // Graphs taken as single `graph` arguments by the kernels of a region (recursively).
  std::vector<int> graph_args(const lir::Body& r) const {
    std::vector<int> out;
    lir::for_each_node(r, [&](const lir::Node& n) {
      if (const auto* k = std::get_if<lir::KernelNode>(&n.op))
        for (const lir::KernelArg& a : k->args)
          if (a.kind == lir::ArgKind::GraphExec && a.ref >= 0) out.push_back(a.ref);
    });
    return out;
  }

  bool is_late(const lir::Node& n, int graph, const std::set<int>& ready) const {
    const auto* k = std::get_if<lir::KernelNode>(&n.op);
    if (!k) return false;
    for (const lir::KernelArg& a : k->args)
      if (a.kind == lir::ArgKind::GraphExec && (a.ref == graph || !ready.count(a.ref))) return true;
    return false;
  }

  void collect_late(const lir::Body& r, int graph, const std::set<int>& ready) {
    lir::for_each_node(r, [&](const lir::Node& n) {
      if (is_late(n, graph, ready)) late_nodes_[graph].push_back(&n);
    });
  }

  void find_handles(const lir::Body& r) {
    lir::for_each_node(r, [&](const lir::Node& n) {
      const auto* c = std::get_if<lir::ConditionalNode>(&n.op);
      if (c && c->handle >= 0 && static_cast<size_t>(c->handle) < handle_nodes_.size())
        handle_nodes_[c->handle] = &n;
    });
  }

  bool has_collectives() const { return !p_.comms.empty(); }

  std::string params_type() const { return type_ + "Params"; }
  std::string buffers_type() const { return type_ + "Buffers"; }
  std::string graphs_type() const { return type_ + "Graphs"; }

  // ---- host expressions ----
  // Printed by expr/ (the same code the generated kernels use, from the preamble), so the host
  // computes exactly what the runtime's evaluator computes, or fails with the same error.
  std::string leaf_code(const expr::Instr& in) const {
    switch (in.kind) {
      case expr::InstrKind::Param: {
        std::string name = "p." + param_names_[in.ref];
        if (in.type == lir::ScalarType::F16) return "__half2float(" + name + ")";
        if (in.type == lir::ScalarType::BF16) return "__bfloat162float(" + name + ")";
        return name;
      }
      case expr::InstrKind::FamilyIndex:
        return in_family_ ? "static_cast<unsigned>(member)" : "0u";
      case expr::InstrKind::Rank:
        return rank_.empty() ? "0u" : "static_cast<unsigned>(p." + rank_ + ")";
      case expr::InstrKind::WorldSize:
        return world_size_.empty() ? "1u" : "static_cast<unsigned>(p." + world_size_ + ")";
      case expr::InstrKind::DeviceScalar:  // never in host expressions
      case expr::InstrKind::Const:
      case expr::InstrKind::Operator:  // printed by to_source itself
        break;
    }
    return "0";
  }

  // Emits a line that evaluates `e` converted to `t` (as the runtime converts values) and
  // returns from the function on an error; returns the C++ that holds the value.
  std::string eval(const lir::Expr& e, lir::ScalarType t, const std::string& where) {
    std::string var = "orch_x" + std::to_string(evals_++);
    std::string code = expr::print(e.code, [&](const expr::Instr& in) { return leaf_code(in); });
    line("ORCH_EVAL(" + var + ", " + expr::type_code(t) + ", " + where + ", " +
         expr::print_convert(code, e.type(), t) + ");");
    return var + ".v";
  }

  // A value argument of a kernel orchc wrote: the storage of type t (f16 and bf16 as bits).
  std::string generated_arg(const lir::Expr& e, lir::ScalarType t, const std::string& where) {
    return "orch_to_storage<" + std::string(expr::type_code(t)) + ">(" + eval(e, t, where) + ")";
  }

  // `e` as a value of C++ type cuda_type(t); a plain param of that very type is written as it is.
  std::string host_as(const lir::Expr& e, lir::ScalarType t, const std::string& where) {
    if (const expr::Instr* leaf = e.leaf();
        leaf && leaf->kind == expr::InstrKind::Param && p_.params[leaf->ref].type == t)
      return "p." + param_names_[leaf->ref];
    std::string v = eval(e, t, where);
    if (t == lir::ScalarType::F16) return "__float2half(" + v + ")";  // exact: v is an f16
    if (t == lir::ScalarType::BF16) return "__float2bfloat16(" + v + ")";
    return v;
  }

  std::string dim(const lir::Expr& e, const std::string& where) {
    if (const expr::Instr* leaf = e.leaf(); leaf && leaf->kind == expr::InstrKind::Const &&
                                            !leaf->value.is_float() && !leaf->value.negative() &&
                                            leaf->value.magnitude() <= UINT32_MAX)
      return leaf->value.to_string();
    return eval(e, lir::ScalarType::U32, where);
  }

  // Elements of a buffer, as a size_t expression (may emit the line that computes it).
  std::string count_of(int buffer, const std::string& where) {
    const lir::Buffer& b = p_.buffers[buffer];
    if (!b.count) return "1";
    if (const expr::Instr* leaf = b.count->leaf();
        leaf && leaf->kind == expr::InstrKind::Const && !leaf->value.is_float())
      return leaf->value.to_string();
    return "static_cast<size_t>(" + eval(*b.count, lir::ScalarType::U64, where) + ")";
  }
  std::string bytes_of(int buffer, const std::string& where) {
    return count_of(buffer, where) + " * sizeof(" + cuda_type(p_.buffers[buffer].elem) + ")";
  }

  // ---- sections ----
  void header() {
    std::string path = sources_.path(p_.file);
    std::string base = path.substr(path.find_last_of('/') + 1);
    std::string stem = base.substr(0, base.find_last_of('.'));
    std::string arch = p_.targets.empty() ? "sm_90" : p_.targets.front();
    line("// " + comment_text("Pipeline `" + p_.name + "`, ejected from " + path +
                              " by `orchc --emit=cuda`."));
    line("//");
    line("// One standalone file: every kernel's source, then host code that builds the same CUDA");
    line("// graph as the orch runtime with plain CUDA runtime calls. It no longer needs orch.");
    line("//");
    line("//   nvcc -arch=" + arch + " -rdc=true " + stem + ".cu -lcudadevrt" +
         (has_collectives() ? " -lnccl" : "") + " -o " + stem);
    line("//");
    line("//   ./" + stem + " --in DIR --out DIR --launches N   (main: a harness, at the end of the file)");
    line("//");
    line("// Build with -DORCH_EJECT_NO_MAIN to use it as a library: allocate_" + fn_ +
         "() (or your own");
    line("// buffers), build_" + fn_ + "(), then launch_" + fn_ + "() as often as you like.");
    line(
        "// Comments name the .orch statement every node came from; errors print its "
        "file:line:col.");
    line();
    line("#include <cuda_runtime.h>");
    line("#include <cuda_fp16.h>");
    line("#include <cuda_bf16.h>");
    if (has_collectives()) line("#include <nccl.h>");
    line();
    line("#include <cmath>");
    line("#include <cstdint>");
    line("#include <cstdio>");
    line("#include <cstring>");
    line();
    line("// ==== Expression helpers (orch's expr/ops.h): every operator, checked, on the host and");
    line("// the device; printed expressions call them and get a value or an error code.");
    if (uses_status_) {
      line("// The device status record orchc's kernels report errors to (first, so that expr/'s");
      line("// no-op orch_expr_error steps aside for its macro).");
      out_ += lowering::kDeviceStatusPreamble;
    }
    out_ += expr::preamble();
    line();
  }

  void kernels() {
    line(
        "// ==== Kernels "
        "==========================================================================");
    // Generated kernels start with expr/'s preamble, which the file holds once (above).
    std::vector<std::string> generated_bodies(p_.kernels.size());
    for (size_t i = 0; i < p_.kernels.size(); ++i) {
      const lir::Kernel& k = p_.kernels[i];
      if (!k.generated || !used_kernels_.count(static_cast<int>(i))) continue;
      size_t cut = k.source.find("extern \"C\"");
      if (cut == std::string::npos) cut = 0;
      generated_bodies[i] = k.source.substr(cut);
    }

    // User kernels: each `from` file once, each distinct inline source once.
    std::map<std::string, std::vector<size_t>> by_text;  // source text -> kernels
    std::vector<std::string> order;
    for (size_t i = 0; i < p_.kernels.size(); ++i) {
      const lir::Kernel& k = p_.kernels[i];
      if (k.generated) continue;
      auto [it, inserted] = by_text.emplace(k.source, std::vector<size_t>{});
      if (inserted) order.push_back(k.source);
      it->second.push_back(i);
    }
    for (const std::string& text : order) {
      const std::vector<size_t>& ks = by_text[text];
      const lir::Kernel& first = p_.kernels[ks.front()];
      std::string names;
      for (size_t i : ks) names += (names.empty() ? "" : ", ") + p_.kernels[i].name;
      line();
      if (!first.inline_source && !first.source_path.empty()) {
        line("// ---- " + comment_text(first.source_path) + " (kernel" +
             (ks.size() > 1 ? "s " : " ") + names + ")");
      } else {
        SourceRange where;
        where.file = first.source_file;
        where.begin = {first.source_first_line, first.source_first_col};
        line("// ---- kernel " + names + ": inline source at " +
             (first.source_file ? at(where) : at(first.loc)));
      }
      out_ += text;
      if (!text.empty() && text.back() != '\n') out_ += "\n";
    }

    bool any_generated = false;
    for (size_t i = 0; i < p_.kernels.size(); ++i)
      any_generated |= p_.kernels[i].generated && used_kernels_.count(static_cast<int>(i));
    if (any_generated) {
      line();
      line("// ---- kernels orchc wrote: conditions, scalar updates, fills and graph launches");
      for (size_t i = 0; i < p_.kernels.size(); ++i) {
        const lir::Kernel& k = p_.kernels[i];
        if (!k.generated || !used_kernels_.count(static_cast<int>(i))) continue;
        line();
        line("// " + generated_role(k) + " (" + at(k.loc) + ")");
        out_ += generated_bodies[i];
        if (!generated_bodies[i].empty() && generated_bodies[i].back() != '\n') out_ += "\n";
      }
    }
    line();
  }

  std::string generated_role(const lir::Kernel& k) const {
    std::string s = statement(k.loc);
    if (k.name.rfind("orch_condition_", 0) == 0)
      return k.name + ": evaluates the condition of `" + s + "`";
    if (k.name.rfind("orch_update_", 0) == 0) return k.name + ": device scalar update `" + s + "`";
    if (k.name.rfind("orch_fill_", 0) == 0)
      return k.name + ": `" + s + "` (no memset pattern does it)";
    if (k.name.rfind("orch_launch_", 0) == 0) return k.name + ": `" + s + "` from the GPU";
    return k.name + ": `" + s + "`";
  }

  void host_helpers() {
    line(
        "// ==== Host side "
        "========================================================================");
    line();
    line("// Size, launch-shape and argument expressions: a value, or the error is printed and the");
    line("// function returns (as the orch runtime refuses the values).");
    line("#define ORCH_EVAL(var, type, where, ...)                                               \\");
    line("  const orch_v<type> var = (__VA_ARGS__);                                              \\");
    line("  if (var.e) {                                                                         \\");
    line("    std::fprintf(stderr, \"%s: error: %s\\n\", where, orch_error_text(var.e));            \\");
    line("    return cudaErrorInvalidValue;                                                      \\");
    line("  }");
    line();
    line(
        "// Every CUDA call is checked: a failure prints the .orch statement it builds and "
        "returns.");
    line(
        "#define ORCH_CHECK(call, where)                                                          "
        "\\");
    line(
        "  do {                                                                                   "
        "\\");
    line(
        "    cudaError_t orch_err_ = (call);                                                      "
        "\\");
    line(
        "    if (orch_err_ != cudaSuccess) {                                                      "
        "\\");
    line(
        "      std::fprintf(stderr, \"%s: %s failed: %s (%s)\\n\", where, #call,                   "
        "\\");
    line(
        "                   cudaGetErrorName(orch_err_), cudaGetErrorString(orch_err_));         "
        "\\");
    line(
        "      return orch_err_;                                                                  "
        "\\");
    line(
        "    }                                                                                    "
        "\\");
    line("  } while (0)");
    line("// Passes on an error that was already reported.");
    line("#define ORCH_TRY(call)                          \\");
    line("  do {                                          \\");
    line("    cudaError_t orch_err_ = (call);             \\");
    line("    if (orch_err_ != cudaSuccess) return orch_err_; \\");
    line("  } while (0)");
    if (has_collectives()) {
      line(
          "#define ORCH_NCCL_CHECK(call, where)                                                    "
          " \\");
      line(
          "  do {                                                                                  "
          " \\");
      line(
          "    ncclResult_t orch_nccl_ = (call);                                                   "
          " \\");
      line(
          "    if (orch_nccl_ != ncclSuccess) {                                                    "
          " \\");
      line(
          "      std::fprintf(stderr, \"%s: %s failed: %s\\n\", where, #call,                      "
          "  \\");
      line(
          "                   ncclGetErrorString(orch_nccl_));                                     "
          " \\");
      line(
          "      return cudaErrorUnknown;                                                          "
          " \\");
      line(
          "    }                                                                                   "
          " \\");
      line("  } while (0)");
    }
    line();
  }

  void structs() {
    // Params
    line("// Host-set values (the .orch `param`s, with their defaults).");
    open("struct " + params_type() + " {");
    for (size_t i = 0; i < p_.params.size(); ++i) {
      const lir::Param& x = p_.params[i];
      std::string init = x.default_value ? literal(*x.default_value, x.type) : "{}";
      std::string what = "param " + x.name + ": " + expr::to_string(x.type);
      if (!x.default_text.empty())
        what += " = " + x.default_text;
      else
        what += "  (no default: set it)";
      line(std::string(cuda_type(x.type)) + " " + param_names_[i] + " = " + init + ";  // " +
           comment_text(what + "  (" + at(x.loc) + ")"));
    }
    for (size_t i = 0; i < p_.comms.size(); ++i)
      line("ncclComm_t " + comm_names_[i] + " = nullptr;  // comm " + p_.comms[i].name +
           ": an NCCL communicator you create (" + at(p_.comms[i].loc) + ")");
    if (!rank_.empty()) {
      line("int " + rank_ + " = 0;        // this process's rank in the communicator");
      line("int " + world_size_ + " = 1;  // the communicator's size");
    }
    close("};");
    line();

    // Buffers
    line("// Device pointers of every buffer: allocate_" + fn_ +
         "() fills them, or point them at your own memory.");
    open("struct " + buffers_type() + " {");
    for (size_t i = 0; i < p_.buffers.size(); ++i) {
      const lir::Buffer& b = p_.buffers[i];
      std::string type = std::string(cuda_type(b.elem)) + "*";
      std::string what = "buffer " + b.name + ": " + expr::to_string(b.elem) +
                         (b.count ? "[" + b.count->text + "]" : "") +
                         (b.host ? " host" : "");
      std::string note = b.is_scalar() ? ", a device scalar" : "";
      if (b.host) note = ", pinned mapped host memory (device address)";
      line(type + " " + buffer_names_[i] + " = nullptr;  // " +
           comment_text(what + note + "  (" + at(b.loc) + ")"));
      if (b.host)
        line(type + " " + host_names_[i] + " = nullptr;  // the same memory at its host address");
    }
    close("};");
    line();

    // Graphs
    line("// The CUDA graphs and executable graphs build_" + fn_ + "() makes; destroy_" + fn_ +
         "() releases them.");
    open("struct " + graphs_type() + " {");
    for (int g : device_order_) {
      const lir::Graph& x = p_.graphs[g];
      std::string n = graph_names_[g];
      if (x.family_size > 0) {
        std::string size = std::to_string(x.family_size);
        line("// graph " + x.name + "[" + x.family_index + ": " + size +
             "] device: one graph per member, instantiated for device launch");
        line("cudaGraph_t " + n + "[" + size + "] = {};");
        line("cudaGraphExec_t " + exec_names_[g] + "[" + size + "] = {};");
        line("cudaGraphExec_t* " + table_names_[g] + " = nullptr;  // device array of " +
             exec_names_[g] + ", for graph[" + size + "] arguments");
        if (!patch_names_[g].empty())
          line("cudaGraphNode_t " + patch_names_[g] + "[" + size + "][" +
               std::to_string(late_nodes_[g].size()) +
               "] = {};  // kernel nodes whose graph arguments are set after instantiation");
      } else {
        line("// graph " + x.name + " device: instantiated for device launch");
        line("cudaGraph_t " + n + " = nullptr;");
        line("cudaGraphExec_t " + exec_names_[g] + " = nullptr;");
        if (!patch_names_[g].empty())
          line("cudaGraphNode_t " + patch_names_[g] + "[1][" +
               std::to_string(late_nodes_[g].size()) +
               "] = {};  // kernel nodes whose graph arguments are set after instantiation");
      }
    }
    if (p_.segments.size() > 1)
      line(
          "// host graphs, launched in this order (main is split where one executable graph cannot "
          "hold it all)");
    else
      line("// the host graph");
    for (int s : p_.segments) {
      line("cudaGraph_t " + graph_names_[s] + " = nullptr;");
      line("cudaGraphExec_t " + exec_names_[s] + " = nullptr;");
    }
    if (uses_status_)
      line("OrchDeviceStatus* orch_status = nullptr;  // device memory: where orchc's kernels "
           "report errors (device_status_" + fn_ + "())");
    close("};");
    line();
  }

  void allocate() {
    bool any_device = false, any_host = false;
    for (const lir::Buffer& b : p_.buffers) (b.host ? any_host : any_device) = true;
    if (any_device) alloc_device_helper();
    if (any_host) alloc_mapped_helper();
    allocate_function();
  }

  void alloc_device_helper() {
    open(
        "static cudaError_t orch_alloc_device(void** ptr, unsigned long long count, size_t element, "
        "const char* where) {");
    line("if (count < 1 || count > SIZE_MAX / element) {");
    line("  std::fprintf(stderr, \"%s: error: size %llu is not positive or too large\\n\", where, count);");
    line("  return cudaErrorInvalidValue;");
    line("}");
    line("size_t bytes = static_cast<size_t>(count) * element;");
    line("ORCH_CHECK(cudaMalloc(ptr, bytes), where);");
    line("ORCH_CHECK(cudaMemset(*ptr, 0, bytes), where);");
    line("return cudaSuccess;");
    close();
    line();
  }

  void alloc_mapped_helper() {
    open(
        "static cudaError_t orch_alloc_mapped(void** device, void** host, unsigned long long count, "
        "size_t element,");
    line("                                     const char* where) {");
    line("if (count < 1 || count > SIZE_MAX / element) {");
    line("  std::fprintf(stderr, \"%s: error: size %llu is not positive or too large\\n\", where, count);");
    line("  return cudaErrorInvalidValue;");
    line("}");
    line("size_t bytes = static_cast<size_t>(count) * element;");
    line("ORCH_CHECK(cudaHostAlloc(host, bytes, cudaHostAllocMapped), where);");
    line("std::memset(*host, 0, bytes);");
    line("ORCH_CHECK(cudaHostGetDevicePointer(device, *host, 0), where);");
    line("return cudaSuccess;");
    close();
    line();
  }

  void allocate_function() {
    const std::string n = std::to_string(p_.buffers.size());
    line("// Elements of every buffer (in declaration order), computed from the params; a device");
    line("// scalar has one.");
    open("cudaError_t buffer_counts_" + fn_ + "(const " + params_type() +
         "& p, unsigned long long* count) {");
    unused_guard();
    if (p_.buffers.empty()) line("(void)count;");
    for (size_t i = 0; i < p_.buffers.size(); ++i) {
      const lir::Buffer& b = p_.buffers[i];
      line("count[" + std::to_string(i) + "] = " +
           count_of(static_cast<int>(i), where(b.loc, "buffer " + b.name)) + ";");
    }
    line("return cudaSuccess;");
    close();
    line();
    line("// Allocates every buffer, sized with the params, and zeroes it.");
    open("cudaError_t allocate_" + fn_ + "(const " + params_type() + "& p, " + buffers_type() +
         "* b) {");
    if (p_.buffers.empty()) line("(void)b;");
    line("unsigned long long count[" + std::string(p_.buffers.empty() ? "1" : n) + "] = {};");
    line("ORCH_TRY(buffer_counts_" + fn_ + "(p, count));");
    for (size_t i = 0; i < p_.buffers.size(); ++i) {
      const lir::Buffer& b = p_.buffers[i];
      std::string w = where(b.loc, "buffer " + b.name);
      std::string count = "count[" + std::to_string(i) + "]";
      std::string size = "sizeof(" + std::string(cuda_type(b.elem)) + ")";
      if (b.host)
        line("ORCH_TRY(orch_alloc_mapped((void**)&b->" + buffer_names_[i] + ", (void**)&b->" +
             host_names_[i] + ", " + count + ", " + size + ", " + w + "));");
      else
        line("ORCH_TRY(orch_alloc_device((void**)&b->" + buffer_names_[i] + ", " + count + ", " +
             size + ", " + w + "));");
    }
    line("return cudaSuccess;");
    close();
    line();
    line("// Frees what allocate_" + fn_ + "() allocated.");
    open("void free_" + fn_ + "(" + buffers_type() + "* b) {");
    if (p_.buffers.empty()) line("(void)b;");
    for (size_t i = 0; i < p_.buffers.size(); ++i) {
      if (p_.buffers[i].host)
        line("if (b->" + host_names_[i] + ") cudaFreeHost(b->" + host_names_[i] + ");");
      else
        line("if (b->" + buffer_names_[i] + ") cudaFree(b->" + buffer_names_[i] + ");");
    }
    line("*b = " + buffers_type() + "{};");
    close();
    line();
  }

  void bind_checks() {
    line("// What the compiler proved with the defaults, checked again with the params you set.");
    open("static cudaError_t orch_check_params(const " + params_type() + "& p) {");
    unused_guard();
    for (const lir::BindCheck& c : p_.bind_checks) {
      if (c.always_holds) continue;  // true whatever the params: nothing to check
      // A check that uses a family's index holds for every member.
      if (c.family_size > 0) {
        open("for (int member = 0; member < " + std::to_string(c.family_size) + "; ++member) {");
        in_family_ = true;
      }
      std::string holds = eval(c.condition, lir::ScalarType::Bool,
                               c_string(at(c.loc) + ": " + c.code + " (" + c.message + ")"));
      open("if (!" + holds + ") {");
      line("std::fprintf(stderr, \"%s\\n\", " +
           c_string(at(c.loc) + ": error[" + c.code + "]: " + c.message + " (" +
                    c.condition.text + ")") +
           ");");
      line("return cudaErrorInvalidValue;");
      close();
      if (c.family_size > 0) {
        in_family_ = false;
        close();
      }
    }
    line("return cudaSuccess;");
    close();
    line();
  }

  // ---- graph bodies ----
  struct Scope {
    int graph = -1;         // top-level graph being built
    std::string graph_var;  // the cudaGraph_t variable of this region
    int depth = 0;
    bool device = false;
  };

  void graph_builders() {
    for (int g : device_order_) {
      device_builder(g);
      if (!late_nodes_[g].empty()) patcher(g);
    }
    for (int s : p_.segments) host_builder(s);
  }

  std::string member_index(int g) const { return p_.graphs[g].family_size > 0 ? "[member]" : ""; }

  void device_builder(int g) {
    const lir::Graph& x = p_.graphs[g];
    bool family = x.family_size > 0;
    in_family_ = family;
    line("// graph " + x.name +
         (family ? "[" + x.family_index + ": " + std::to_string(x.family_size) + "]" : "") +
         " device  (" + at(x.loc) + ")");
    if (family)
      line("// One member of the family; `member` is the family index `" + x.family_index +
           "`, a constant in each member's graph.");
    open("static cudaError_t orch_build_" + graph_names_[g] + "(const " + params_type() +
         "& p, const " + buffers_type() + "& b, " + graphs_type() + "* out" +
         (family ? ", int member" : "") + ") {");
    unused_guard();
    std::string gw = where(x.loc, "graph " + x.name);
    line("cudaGraph_t graph = nullptr;");
    line("ORCH_CHECK(cudaGraphCreate(&graph, 0), " + gw + ");");
    line("out->" + graph_names_[g] + member_index(g) + " = graph;");
    Scope s;
    s.graph = g;
    s.graph_var = "graph";
    s.device = true;
    region(x.body, s);
    line("// Instantiated for launch from the GPU; uploaded once every device graph is ready.");
    line("ORCH_CHECK(cudaGraphInstantiateWithFlags(&out->" + exec_names_[g] + member_index(g) +
         ", graph, cudaGraphInstantiateFlagDeviceLaunch), " + gw + ");");
    line("return cudaSuccess;");
    close();
    line();
    in_family_ = false;
  }

  void patcher(int g) {
    const lir::Graph& x = p_.graphs[g];
    bool family = x.family_size > 0;
    in_family_ = family;
    line("// Graph arguments of " + x.name +
         " that name a graph instantiated after it (or itself):");
    line("// set on the executable graph now that every exec exists.");
    open("static cudaError_t orch_patch_" + graph_names_[g] + "(const " + params_type() +
         "& p, const " + buffers_type() + "& b, " + graphs_type() + "* out" +
         (family ? ", int member" : "") + ") {");
    unused_guard();
    Scope s;
    s.graph = g;
    s.device = true;
    patching_ = true;
    for (size_t k = 0; k < late_nodes_[g].size(); ++k) {
      const lir::Node& n = *late_nodes_[g][k];
      node_comment(n);
      open("{");
      kernel_params(n, std::get<lir::KernelNode>(n.op), s);
      line("ORCH_CHECK(cudaGraphExecKernelNodeSetParams(out->" + exec_names_[g] + member_index(g) +
           ", out->" + patch_names_[g] + "[" + (family ? "member" : "0") + "][" +
           std::to_string(k) + "], &kernel), " + where(n.loc, n.what) + ");");
      close();
    }
    patching_ = false;
    line("return cudaSuccess;");
    close();
    line();
    in_family_ = false;
  }

  void host_builder(int g) {
    const lir::Graph& x = p_.graphs[g];
    line("// graph " + x.name + "  (" + at(x.loc) + ")");
    open("static cudaError_t orch_build_" + graph_names_[g] + "(const " + params_type() +
         "& p, const " + buffers_type() + "& b, " + graphs_type() + "* out) {");
    unused_guard();
    std::string gw = where(x.loc, "graph " + x.name);
    line("cudaGraph_t graph = nullptr;");
    line("ORCH_CHECK(cudaGraphCreate(&graph, 0), " + gw + ");");
    line("out->" + graph_names_[g] + " = graph;");
    std::vector<size_t> handles;
    for (size_t h = 0; h < p_.handles.size(); ++h)
      if (p_.handles[h].graph == g) handles.push_back(h);
    if (!handles.empty()) {
      line(
          "// Conditional handles: the GPU sets them (cudaGraphSetConditional) before their node "
          "runs.");
      line("cudaGraphConditionalHandle handle[" + std::to_string(p_.handles.size()) + "] = {};");
      for (size_t h : handles) {
        const lir::ConditionalHandle& ch = p_.handles[h];
        const lir::Node* n = handle_nodes_[h];
        SourceRange loc = n ? n->loc : x.loc;
        std::string what = n ? n->what : "handle " + std::to_string(h);
        if (ch.set_default)
          line("// handle " + std::to_string(h) + ": `" + comment_text(what) + "`, reset to " +
               std::to_string(ch.default_value) + " at every launch (the body runs at least once)");
        else
          line("// handle " + std::to_string(h) + ": `" + comment_text(what) + "`");
        line("ORCH_CHECK(cudaGraphConditionalHandleCreate(&handle[" + std::to_string(h) +
             "], graph, " + std::to_string(ch.default_value) + ", " +
             (ch.set_default ? "cudaGraphCondAssignDefault" : "0") + "), " + where(loc, what) +
             ");");
      }
    }
    Scope s;
    s.graph = g;
    s.graph_var = "graph";
    region(x.body, s);
    line("ORCH_CHECK(cudaGraphInstantiateWithFlags(&out->" + exec_names_[g] + ", graph, 0), " + gw +
         ");");
    line("ORCH_CHECK(cudaGraphUpload(out->" + exec_names_[g] + ", 0), " + gw + ");");
    line("return cudaSuccess;");
    close();
    line();
  }

  void region(const lir::Body& r, const Scope& s) {
    std::string nodes = s.depth == 0 ? "node" : "node" + std::to_string(s.depth);
    if (r.nodes.empty()) {
      line("// (empty)");
      return;
    }
    line("cudaGraphNode_t " + nodes + "[" + std::to_string(r.nodes.size()) + "] = {};");
    // Collectives are top-level nodes of host graphs only. Their NCCL work is recorded by stream
    // capture straight into this graph, in one capture session (the runtime does the same:
    // runtime/src/executable.cpp, begin_capture), with the other nodes added beside it.
    const bool collectives = std::any_of(r.nodes.begin(), r.nodes.end(), [](const lir::Node& n) {
      return std::holds_alternative<lir::CollectiveNode>(n.op);
    });
    if (collectives) {
      line("cudaStream_t capture = nullptr;");
      line("ORCH_CHECK(cudaStreamCreateWithFlags(&capture, cudaStreamNonBlocking), \"the stream that captures NCCL's work\");");
      line("ORCH_CHECK(cudaStreamBeginCaptureToGraph(capture, " + s.graph_var +
           ", nullptr, nullptr, 0, cudaStreamCaptureModeThreadLocal), \"capturing NCCL's work\");");
    }
    for (int i : topological_order(r)) {
      const lir::Node& n = r.nodes[i];
      line();
      node_comment(n);
      open("{");
      std::string dep_args = "nullptr, 0";
      std::map<int, bool> d;  // dependency -> programmatic
      for (const lir::Dep& dep : n.deps) d[static_cast<int>(dep.from)] |= dep.kind == lir::DepKind::Programmatic;
      bool programmatic = false;
      if (!d.empty()) {
        std::string list;
        for (const auto& [j, prog] : d) {
          list += (list.empty() ? "" : ", ") + nodes + "[" + std::to_string(j) + "]";
          programmatic |= prog;
        }
        line("const cudaGraphNode_t deps[] = {" + list + "};  // must finish first");
        dep_args = "deps, " + std::to_string(d.size());
      }
      if (programmatic) {
        // The kernel waits at entry (griddepcontrol.wait), so it may start as soon as the
        // kernels of its programmatic edges have all started: their launch latency is hidden.
        line("cudaGraphEdgeData edges[" + std::to_string(d.size()) + "] = {};  // programmatic edges:");
        size_t k = 0;
        for (const auto& [j, prog] : d) {
          if (prog) {
            line("edges[" + std::to_string(k) + "].from_port = cudaGraphKernelNodePortProgrammatic;");
            line("edges[" + std::to_string(k) + "].type = cudaGraphDependencyTypeProgrammatic;");
          }
          ++k;
        }
      }
      node(n, s, nodes + "[" + std::to_string(i) + "]", dep_args, programmatic);
      close();
    }
    if (collectives) {
      line("cudaGraph_t captured = nullptr;  // the same graph");
      line("const cudaError_t ended = cudaStreamEndCapture(capture, &captured);");
      line("cudaStreamDestroy(capture);");
      line("ORCH_CHECK(ended, \"capturing NCCL's work\");");
    }
  }

  void node(const lir::Node& n, const Scope& s, const std::string& slot, const std::string& deps,
            bool programmatic = false) {
    std::string w = where(n.loc, n.what);
    std::string g = s.graph_var;
    std::visit(
        lir::overloaded{
            [&](const lir::KernelNode& k) {
              kernel_params(n, k, s);
              if (programmatic) {
                // Edge data goes only through cudaGraphAddNode.
                line("cudaGraphNodeParams node_params = {};");
                line("node_params.type = cudaGraphNodeTypeKernel;");
                line("node_params.kernel.func = kernel.func;");
                line("node_params.kernel.gridDim = kernel.gridDim;");
                line("node_params.kernel.blockDim = kernel.blockDim;");
                line("node_params.kernel.sharedMemBytes = kernel.sharedMemBytes;");
                line("node_params.kernel.kernelParams = kernel.kernelParams;");
                line("ORCH_CHECK(cudaGraphAddNode(&" + slot + ", " + g + ", deps, edges, " +
                     deps.substr(deps.find(',') + 2) + ", &node_params), " + w + ");");
              } else {
                line("ORCH_CHECK(cudaGraphAddKernelNode(&" + slot + ", " + g + ", " + deps + ", &kernel), " + w + ");");
              }
              auto& late = late_nodes_[s.graph];
              auto it = std::find(late.begin(), late.end(), &n);
              if (s.device && it != late.end())
                line("out->" + patch_names_[s.graph] + "[" + (in_family_ ? "member" : "0") + "][" +
                     std::to_string(it - late.begin()) + "] = " + slot + ";");
            },
            [&](const lir::MemcpyNode& m) {
              line("ORCH_CHECK(cudaGraphAddMemcpyNode1D(&" + slot + ", " + g + ", " + deps + ", b." +
                   buffer_names_[m.dst] + ", b." + buffer_names_[m.src] + ", " + bytes_of(m.src, w) +
                   ", cudaMemcpyDefault), " + w + ");");
            },
            [&](const lir::MemsetNode& m) {
              uint32_t elem = expr::size_of(p_.buffers[m.dst].elem);
              uint32_t per = elem / m.element_size;
              char value[16];
              std::snprintf(value, sizeof value, "0x%x", m.value);
              line("cudaMemsetParams fill = {};");
              line("fill.dst = b." + buffer_names_[m.dst] + ";");
              line("fill.value = " + std::string(value) + "u;  // the fill value's bytes, " +
                   std::to_string(m.element_size) + "-byte pattern");
              line("fill.elementSize = " + std::to_string(m.element_size) + ";");
              line("fill.width = " + count_of(m.dst, w) + (per > 1 ? " * " + std::to_string(per) : "") +
                   ";  // elements of the pattern");
              line("fill.height = 1;");
              line("ORCH_CHECK(cudaGraphAddMemsetNode(&" + slot + ", " + g + ", " + deps + ", &fill), " +
                   w + ");");
            },
            [&](const lir::EmptyNode&) {
              // Not expected after lowering; an empty node keeps the dependencies.
              line("// (" + n.what + ": nothing to do here)");
              line("ORCH_CHECK(cudaGraphAddEmptyNode(&" + slot + ", " + g + ", " + deps + "), " + w + ");");
            },
            [&](const lir::ConditionalNode& c) { conditional(c, s, slot, deps, w); },
            [&](const lir::CollectiveNode& c) { collective(c, s, slot, deps, w); },
        },
        n.op);
  }

  void kernel_params(const lir::Node& n, const lir::KernelNode& kn, const Scope& s) {
    const lir::Kernel& k = p_.kernels[kn.kernel];
    const std::string w = where(n.loc, n.what);
    std::vector<std::string> pointers;
    for (size_t i = 0; i < kn.args.size(); ++i) {
      const lir::KernelArg& a = kn.args[i];
      const lir::KernelParam& q = k.params[i];
      std::string var = "arg" + std::to_string(i);
      switch (a.kind) {
        case lir::ArgKind::Value:
          line(std::string(k.generated ? expr::storage_type(q.elem) : cuda_type(q.elem)) + " " + var + " = " +
               (k.generated ? generated_arg(a.value, q.elem, w) : host_as(a.value, q.elem, w)) +
               ";  // " + comment_text(q.name + " = " + a.value.text));
          pointers.push_back("&" + var);
          break;
        case lir::ArgKind::Buffer:
          pointers.push_back("(void*)&b." + buffer_names_[a.ref]);
          break;
        case lir::ArgKind::CondHandle:
          pointers.push_back("&handle[" + std::to_string(a.ref) + "]");
          break;
        case lir::ArgKind::GraphExec: {
          const lir::Graph& t = p_.graphs[a.ref];
          std::string exec = "out->" + exec_names_[a.ref] + (t.family_size > 0 ? "[member]" : "");
          bool late =
              s.device && (a.ref == s.graph ||
                           std::find(device_order_.begin(), device_order_.end(), a.ref) >
                               std::find(device_order_.begin(), device_order_.end(), s.graph));
          if (late && !patching_)
            line("cudaGraphExec_t " + var + " = nullptr;  // " + q.name + " = " +
                 (a.self ? "self" : t.name) + ": set by orch_patch_" + graph_names_[s.graph] +
                 "() after instantiation");
          else
            line("cudaGraphExec_t " + var + " = " + exec + ";  // " + q.name + " = " +
                 (a.self ? "self" : t.name));
          pointers.push_back("&" + var);
          break;
        }
        case lir::ArgKind::GraphTable:
          pointers.push_back("(void*)&out->" + table_names_[a.ref]);
          break;
        case lir::ArgKind::Status:
          pointers.push_back("(void*)&out->orch_status");
          break;
      }
    }
    if (!pointers.empty()) {
      std::string list;
      for (const std::string& x : pointers) list += (list.empty() ? "" : ", ") + x;
      line("void* args[] = {" + list + "};");
    }
    line("cudaKernelNodeParams kernel = {};");
    // `::`: the kernel, whatever the locals here are called.
    std::string entry = k.entry.empty() ? k.name : k.entry;
    line("kernel.func = (void*)&" + (entry.rfind("::", 0) == 0 ? "" : std::string("::")) + entry +
         ";");
    std::string grid[3], block[3];
    for (int d = 0; d < 3; ++d) {
      grid[d] = dim(kn.grid[d], w);
      block[d] = dim(kn.block[d], w);
    }
    std::string shared = dim(kn.shared_bytes, w);
    line("kernel.gridDim = dim3(" + grid[0] + ", " + grid[1] + ", " + grid[2] + ");");
    line("kernel.blockDim = dim3(" + block[0] + ", " + block[1] + ", " + block[2] + ");");
    line("kernel.sharedMemBytes = " + shared + ";");
    line(std::string("kernel.kernelParams = ") + (pointers.empty() ? "nullptr;" : "args;"));
  }

  void conditional(const lir::ConditionalNode& n, const Scope& s, const std::string& slot,
                   const std::string& deps, const std::string& w) {
    std::string cond = "cond" + (s.depth ? std::to_string(s.depth) : "");
    const char* type = n.type == lir::ConditionalType::If      ? "cudaGraphCondTypeIf"
                       : n.type == lir::ConditionalType::While ? "cudaGraphCondTypeWhile"
                                                               : "cudaGraphCondTypeSwitch";
    line("cudaGraphNodeParams " + cond + " = {};");
    line(cond + ".type = cudaGraphNodeTypeConditional;");
    line(cond + ".conditional.handle = handle[" + std::to_string(n.handle) + "];");
    line(cond + ".conditional.type = " + type + ";");
    line(cond + ".conditional.size = " + std::to_string(n.bodies.size()) + ";");
    line("ORCH_CHECK(cudaGraphAddNode(&" + slot + ", " + s.graph_var + ", " +
         (deps == "nullptr, 0"
              ? "nullptr, nullptr, 0"
              : deps.substr(0, deps.find(',')) + ", nullptr" + deps.substr(deps.find(','))) +
         ", &" + cond + "), " + w + ");");
    for (size_t i = 0; i < n.bodies.size(); ++i) {
      std::string what;
      switch (n.type) {
        case lir::ConditionalType::While:
          what = n.set_by_kernel
                     ? "the loop body, run until its kernel sets the handle to 0"
                     : "the loop body, run while the condition holds (it ends by evaluating it again)";
          break;
        case lir::ConditionalType::If:
          what = i == 0 ? "then: run when the condition is non-zero" : "else: run when it is zero";
          break;
        case lir::ConditionalType::Switch:
          what = i < n.cases.size()
                     ? "case " + n.cases[i].to_string() + " (body " + std::to_string(i) + ")"
                     : "default (body " + std::to_string(i) + "): any other value";
          break;
      }
      line("// " + what);
      open("{");
      Scope inner = s;
      inner.depth = s.depth + 1;
      inner.graph_var = "body" + std::to_string(inner.depth);
      line("cudaGraph_t " + inner.graph_var + " = " + cond + ".conditional.phGraph_out[" +
           std::to_string(i) + "];");
      region(n.bodies[i], inner);
      close();
    }
  }

  void collective(const lir::CollectiveNode& n, const Scope& s, const std::string& slot,
                  const std::string& deps, const std::string& w) {
    const lir::Buffer& src = p_.buffers[n.src];
    std::string type = nccl_type(src.elem);
    std::string comm = "p." + comm_names_[n.comm];
    std::string send = "b." + buffer_names_[n.src], recv = "b." + buffer_names_[n.dst];
    const std::string src_count = count_of(n.src, w), dst_count = count_of(n.dst, w);
    const std::string root = n.root ? "static_cast<int>(" + eval(*n.root, lir::ScalarType::U32, w) + ")" : "0";
    std::string call;
    switch (n.kind) {
      case lir::CollectiveKind::AllReduce:
        call = "ncclAllReduce(" + send + ", " + recv + ", " + src_count + ", " + type + ", " +
               nccl_op(n.op) + ", " + comm + ", capture)";
        break;
      case lir::CollectiveKind::Broadcast:
        call = "ncclBroadcast(" + send + ", " + recv + ", " + src_count + ", " + type + ", " +
               root + ", " +
               comm + ", capture)";
        break;
      case lir::CollectiveKind::AllGather:
        call = "ncclAllGather(" + send + ", " + recv + ", " + src_count + ", " + type + ", " +
               comm + ", capture)";
        break;
      case lir::CollectiveKind::ReduceScatter:
        call = "ncclReduceScatter(" + send + ", " + recv + ", " + dst_count + ", " + type +
               ", " + nccl_op(n.op) + ", " + comm + ", capture)";
        break;
    }
    // Captured after the node's dependencies; what depends on it waits for NCCL's last nodes
    // (joined by an empty node where there are several).
    const bool none = deps.rfind("nullptr", 0) == 0;
    const std::string count = deps.substr(deps.find(',') + 2);
    line("ORCH_CHECK(cudaStreamUpdateCaptureDependencies(capture, " +
         std::string(none ? "nullptr" : "const_cast<cudaGraphNode_t*>(deps)") + ", nullptr, " + count +
         ", cudaStreamSetCaptureDependencies), " + w + ");");
    line("ORCH_NCCL_CHECK(" + call + ", " + w + ");");
    line("cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;");
    line("const cudaGraphNode_t* last = nullptr;");
    line("size_t nlast = 0;");
    line("ORCH_CHECK(cudaStreamGetCaptureInfo(capture, &status, nullptr, nullptr, &last, nullptr, &nlast), " + w +
         ");");
    line("if (status != cudaStreamCaptureStatusActive || nlast == 0) ORCH_CHECK(cudaErrorStreamCaptureInvalidated, " +
         w + ");");
    line("if (nlast == 1) " + slot + " = last[0];");
    line("else ORCH_CHECK(cudaGraphAddEmptyNode(&" + slot + ", " + s.graph_var + ", last, nlast), " + w + ");");
  }

  void build() {
    line(
        "// Builds every graph of the pipeline with the given params and buffers: the device "
        "graphs");
    line(
        "// (instantiated for device launch and uploaded), then the host graph(s), instantiated "
        "and");
    line(
        "// uploaded. On failure the error is printed with the .orch statement and returned; call");
    line("// destroy_" + fn_ + "() either way.");
    open("cudaError_t build_" + fn_ + "(const " + params_type() + "& p, const " + buffers_type() +
         "& b, " + graphs_type() + "* out) {");
    line("ORCH_TRY(orch_check_params(p));");
    if (uses_status_) {
      line("// The record orchc's kernels report device-side errors in (the first one wins).");
      line("ORCH_CHECK(cudaMalloc(&out->orch_status, sizeof(OrchDeviceStatus)), " +
           where(p_.graphs[p_.main_graph].loc, "device status") + ");");
      line("ORCH_CHECK(cudaMemset(out->orch_status, 0, sizeof(OrchDeviceStatus)), " +
           where(p_.graphs[p_.main_graph].loc, "device status") + ");");
    }
    bool any_family = false;
    for (int g : device_order_) any_family |= p_.graphs[g].family_size > 0;
    if (any_family) {
      line(
          "// Tables of family execs, for kernels that take a whole family (graph[N] parameters).");
      for (int g : device_order_) {
        const lir::Graph& x = p_.graphs[g];
        if (x.family_size == 0) continue;
        line("ORCH_CHECK(cudaMalloc(&out->" + table_names_[g] + ", sizeof(out->" + exec_names_[g] +
             ")), " + where(x.loc, "graph " + x.name) + ");");
      }
    }
    if (!device_order_.empty()) {
      line("// Device graphs, each after the graphs its kernels take as arguments.");
      for (int g : device_order_) {
        const lir::Graph& x = p_.graphs[g];
        if (x.family_size > 0)
          line("for (int member = 0; member < " + std::to_string(x.family_size) +
               "; ++member) ORCH_TRY(orch_build_" + graph_names_[g] + "(p, b, out, member));");
        else
          line("ORCH_TRY(orch_build_" + graph_names_[g] + "(p, b, out));");
      }
      for (int g : device_order_) {
        if (late_nodes_[g].empty()) continue;
        const lir::Graph& x = p_.graphs[g];
        if (x.family_size > 0)
          line("for (int member = 0; member < " + std::to_string(x.family_size) +
               "; ++member) ORCH_TRY(orch_patch_" + graph_names_[g] + "(p, b, out, member));");
        else
          line("ORCH_TRY(orch_patch_" + graph_names_[g] + "(p, b, out));");
      }
      for (int g : device_order_) {
        const lir::Graph& x = p_.graphs[g];
        if (x.family_size == 0) continue;
        line("ORCH_CHECK(cudaMemcpy(out->" + table_names_[g] + ", out->" + exec_names_[g] +
             ", sizeof(out->" + exec_names_[g] + "), cudaMemcpyHostToDevice), " +
             where(x.loc, "graph " + x.name) + ");");
      }
      for (int g : device_order_) {
        const lir::Graph& x = p_.graphs[g];
        std::string w = where(x.loc, "graph " + x.name);
        if (x.family_size > 0)
          line("for (int member = 0; member < " + std::to_string(x.family_size) +
               "; ++member) ORCH_CHECK(cudaGraphUpload(out->" + exec_names_[g] + "[member], 0), " +
               w + ");");
        else
          line("ORCH_CHECK(cudaGraphUpload(out->" + exec_names_[g] + ", 0), " + w + ");");
      }
    }
    line(p_.segments.size() > 1 ? "// Host graphs, launched one after another."
                                : "// The host graph.");
    for (int s : p_.segments) line("ORCH_TRY(orch_build_" + graph_names_[s] + "(p, b, out));");
    line("return cudaSuccess;");
    close();
    line();
  }

  void launch_and_destroy() {
    line("// One run of the pipeline: the host graph" +
         std::string(p_.segments.size() > 1 ? "s in order" : "") + " on `stream`.");
    open("cudaError_t launch_" + fn_ + "(const " + graphs_type() + "& g, cudaStream_t stream) {");
    for (int s : p_.segments)
      line("ORCH_CHECK(cudaGraphLaunch(g." + exec_names_[s] + ", stream), " +
           where(p_.graphs[s].loc, "graph " + p_.graphs[s].name) + ");");
    line("return cudaSuccess;");
    close();
    line();
    open("void destroy_" + fn_ + "(" + graphs_type() + "* g) {");
    for (int s : p_.segments) {
      line("if (g->" + exec_names_[s] + ") cudaGraphExecDestroy(g->" + exec_names_[s] + ");");
      line("if (g->" + graph_names_[s] + ") cudaGraphDestroy(g->" + graph_names_[s] + ");");
    }
    for (int d : device_order_) {
      const lir::Graph& x = p_.graphs[d];
      if (x.family_size > 0) {
        open("for (unsigned i = 0; i < " + std::to_string(x.family_size) + "; ++i) {");
        line("if (g->" + exec_names_[d] + "[i]) cudaGraphExecDestroy(g->" + exec_names_[d] +
             "[i]);");
        line("if (g->" + graph_names_[d] + "[i]) cudaGraphDestroy(g->" + graph_names_[d] + "[i]);");
        close();
        line("if (g->" + table_names_[d] + ") cudaFree(g->" + table_names_[d] + ");");
      } else {
        line("if (g->" + exec_names_[d] + ") cudaGraphExecDestroy(g->" + exec_names_[d] + ");");
        line("if (g->" + graph_names_[d] + ") cudaGraphDestroy(g->" + graph_names_[d] + ");");
      }
    }
    if (uses_status_) line("if (g->orch_status) cudaFree(g->orch_status);");
    line("*g = " + graphs_type() + "{};");
    close();
    line();
    if (!uses_status_) return;
    line("// After the stream has finished: the first error orchc's kernels met on the GPU (a device");
    line("// graph launch that failed, a family index out of range), printed with its .orch place.");
    open("cudaError_t device_status_" + fn_ + "(const " + graphs_type() + "& g) {");
    std::string sites;
    for (const lir::StatusSite& x : p_.status_sites)
      sites += (sites.empty() ? "" : ", ") + c_string(at(x.loc) + ": " + x.what);
    line("static const char* const sites[] = {" + sites + "};");
    line("static const char* const kinds[] = {\"no error\", \"device graph launch failed\", "
         "\"family index out of range\", \"expression error\"};");
    line("OrchDeviceStatus s = {};");
    line("cudaError_t e = cudaMemcpy(&s, g.orch_status, sizeof s, cudaMemcpyDeviceToHost);");
    line("if (e != cudaSuccess) return e;");
    line("if (s.code == 0) return cudaSuccess;");
    line("const char* kind = s.code < 4 ? kinds[s.code] : \"unknown device error\";");
    line("const char* site = s.site < sizeof sites / sizeof sites[0] ? sites[s.site] : \"<unknown site>\";");
    line("if (s.code == 1)");
    line("  std::fprintf(stderr, \"%s: error: %s: %s (%u report(s))\\n\", site, kind, "
         "cudaGetErrorName(static_cast<cudaError_t>(s.detail)), s.count);");
    line("else");
    line("  std::fprintf(stderr, \"%s: error: %s: %u (%u report(s))\\n\", site, kind, s.detail, "
         "s.count);");
    line("return cudaErrorLaunchFailure;");
    close();
    line();
  }

  // How main parses a param's value: integers exactly (decimal, 0x hex), floats rounded to
  // nearest, bool as 0, 1, true or false.
  std::string param_parser(const lir::Param& x, const std::string& member) const {
    switch (x.type) {
      case lir::ScalarType::F16:
        return "orch_parse_real(value, &d) && ((p->" + member + " = __float2half(static_cast<float>(d))), true)";
      case lir::ScalarType::BF16:
        return "orch_parse_real(value, &d) && ((p->" + member +
               " = __float2bfloat16(static_cast<float>(d))), true)";
      case lir::ScalarType::F32:
        return "orch_parse_real(value, &d) && ((p->" + member + " = static_cast<float>(d)), true)";
      case lir::ScalarType::F64:
        return "orch_parse_real(value, &p->" + member + ")";
      case lir::ScalarType::Bool:
        return "orch_parse_bool(value, &p->" + member + ")";
      default:
        return "orch_parse_int(value, &p->" + member + ")";
    }
  }

  // main(): a harness that runs the graph on given inputs and writes every buffer, so that the
  // ejected program can be compared with the orch runtime (orch-run --fill NAME=file:PATH
  // --warmup 0 --repeat N --dump NAME=PATH does the same).
  void main_function() {
    const size_t n = p_.buffers.size();
    const std::string arrays = std::to_string(n == 0 ? 1 : n);
    line("#ifndef ORCH_EJECT_NO_MAIN");
    line("// A harness for the graph:");
    line("//");
    line("//   ./" + fn_ + " [--param NAME=VALUE]... [--in DIR] [--out DIR] [--launches N]");
    line("//");
    line("// sets the params given (the rest keep their defaults), allocates every buffer zeroed, fills");
    line("// each from DIR/<buffer>.bin of --in where that file exists (its size must be the buffer's),");
    line("// builds the graphs, launches them N times (default 1) and waits, then writes every buffer");
    line("// to DIR/<buffer>.bin of --out. Exit 0 on success, 1 on an error, 2 on a usage error.");
    line("#include <cerrno>");
    line("#include <cstdlib>");
    line("#include <limits>");
    line("#include <string>");
    line("#include <vector>");
    line();
    std::string names, sizes, hosts;
    for (size_t i = 0; i < n; ++i) {
      names += (i ? ", " : "") + c_string(p_.buffers[i].name);
      sizes += (i ? ", " : "") + std::string("sizeof(") + cuda_type(p_.buffers[i].elem) + ")";
      hosts += (i ? ", " : "") + std::string(p_.buffers[i].host ? "true" : "false");
    }
    line("static const int orch_buffers = " + std::to_string(n) + ";");
    line("static const char* const orch_buffer_name[] = {" + (n ? names : "nullptr") + "};");
    line("static const size_t orch_element_size[] = {" + (n ? sizes : "0") + "};");
    line();
    open("template <class T> static bool orch_parse_int(const char* s, T* out) {");
    line("char* end = nullptr;");
    line("errno = 0;");
    open("if (std::numeric_limits<T>::is_signed) {");
    line("long long v = std::strtoll(s, &end, 0);");
    line("if (errno || end == s || *end || v < static_cast<long long>(std::numeric_limits<T>::min()) ||");
    line("    v > static_cast<long long>(std::numeric_limits<T>::max()))");
    line("  return false;");
    line("*out = static_cast<T>(v);");
    close("} else {");
    ++indent_;
    line("if (*s == '-') return false;");
    line("unsigned long long v = std::strtoull(s, &end, 0);");
    line("if (errno || end == s || *end || v > static_cast<unsigned long long>(std::numeric_limits<T>::max()))");
    line("  return false;");
    line("*out = static_cast<T>(v);");
    close();
    line("return true;");
    close();
    open("template <class T> static bool orch_parse_real(const char* s, T* out) {");
    line("char* end = nullptr;");
    line("errno = 0;");
    line("double v = std::strtod(s, &end);");
    line("if (errno || end == s || *end) return false;");
    line("*out = static_cast<T>(v);");
    line("return true;");
    close();
    open("template <class T> static bool orch_parse_bool(const char* s, T* out) {");
    line("if (!std::strcmp(s, \"1\") || !std::strcmp(s, \"true\")) *out = true;");
    line("else if (!std::strcmp(s, \"0\") || !std::strcmp(s, \"false\")) *out = false;");
    line("else return false;");
    line("return true;");
    close();
    line();
    line("// Sets param `name` from text; false for an unknown name or a value its type cannot hold.");
    open("static bool orch_set_param(" + params_type() + "* p, const char* name, const char* value) {");
    bool rounded = false;  // a param parsed through a double
    for (const lir::Param& x : p_.params)
      rounded |= x.type == lir::ScalarType::F16 || x.type == lir::ScalarType::BF16 ||
                 x.type == lir::ScalarType::F32;
    if (rounded) line("double d = 0;");
    line("(void)p;");
    line("(void)name;");
    line("(void)value;");
    for (size_t i = 0; i < p_.params.size(); ++i)
      line("if (!std::strcmp(name, " + c_string(p_.params[i].name) + ")) return " +
           param_parser(p_.params[i], param_names_[i]) + ";");
    line("return false;");
    close();
    line();
    open("static int orch_usage(const char* self, const std::string& why) {");
    line("std::fprintf(stderr, \"%s: %s\\nusage: %s [--param NAME=VALUE]... [--in DIR] [--out DIR] "
         "[--launches N]\\n\", self, why.c_str(), self);");
    line("return 2;");
    close();
    line();
    line("// The bytes of a file; false with errno set when it cannot be read (ENOENT: there is none).");
    open("static bool orch_read_file(const std::string& path, std::vector<unsigned char>* out) {");
    line("std::FILE* f = std::fopen(path.c_str(), \"rb\");");
    line("if (!f) return false;");
    line("unsigned char chunk[65536];");
    line("size_t got = 0;");
    line("while ((got = std::fread(chunk, 1, sizeof chunk, f)) > 0) out->insert(out->end(), chunk, chunk + got);");
    line("const bool ok = !std::ferror(f);");
    line("std::fclose(f);");
    line("if (!ok) errno = EIO;");
    line("return ok;");
    close();
    line();
    open("static bool orch_write_file(const std::string& path, const std::vector<unsigned char>& bytes) {");
    line("std::FILE* f = std::fopen(path.c_str(), \"wb\");");
    line("if (!f) return false;");
    line("const bool wrote = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();");
    line("return (std::fclose(f) == 0) && wrote;");
    close();
    line();
    open("int main(int argc, char** argv) {");
    line(params_type() + " p;  // the defaults");
    for (size_t i = 0; i < p_.params.size(); ++i)
      if (!p_.params[i].default_value)
        line("// p." + param_names_[i] + " has no default in the .orch file: set it here or with --param.");
    line("const char* in = nullptr;");
    line("const char* out = nullptr;");
    line("unsigned long long launches = 1;");
    open("for (int i = 1; i < argc; ++i) {");
    line("const std::string arg = argv[i];");
    line("if (i + 1 >= argc) return orch_usage(argv[0], \"unknown or incomplete argument: \" + arg);");
    line("const char* next = argv[++i];");
    open("if (arg == \"--in\") {");
    line("in = next;");
    close("} else if (arg == \"--out\") {");
    ++indent_;
    line("out = next;");
    close("} else if (arg == \"--launches\") {");
    ++indent_;
    line("if (!orch_parse_int(next, &launches)) return orch_usage(argv[0], std::string(\"--launches \") + next + \": not a count\");");
    close("} else if (arg == \"--param\") {");
    ++indent_;
    line("const std::string assignment = next;");
    line("const size_t eq = assignment.find('=');");
    line("if (eq == std::string::npos || !orch_set_param(&p, assignment.substr(0, eq).c_str(), next + eq + 1))");
    line("  return orch_usage(argv[0], \"--param \" + assignment + \": no such param, or a value its type cannot hold\");");
    close("} else {");
    ++indent_;
    line("return orch_usage(argv[0], \"unknown argument: \" + arg);");
    close();
    close();
    line();
    line("// The initial contents, checked before any GPU work.");
    line("unsigned long long count[" + arrays + "] = {};");
    line("if (buffer_counts_" + fn_ + "(p, count) != cudaSuccess) return 1;");
    line("std::vector<std::vector<unsigned char>> initial(orch_buffers);");
    open("for (int i = 0; in && i < orch_buffers; ++i) {");
    line("const std::string path = std::string(in) + \"/\" + orch_buffer_name[i] + \".bin\";");
    open("if (!orch_read_file(path, &initial[i])) {");
    line("if (errno == ENOENT) continue;  // starts zeroed");
    line("std::fprintf(stderr, \"" + fn_ + ": %s: %s\\n\", path.c_str(), std::strerror(errno));");
    line("return 1;");
    close();
    open("if (initial[i].size() != count[i] * orch_element_size[i]) {");
    line("std::fprintf(stderr, \"" + fn_ + ": %s: %zu bytes; buffer %s has %llu\\n\", path.c_str(), "
         "initial[i].size(), orch_buffer_name[i], count[i] * orch_element_size[i]);");
    line("return 1;");
    close();
    close();
    line();
    line(buffers_type() + " b;");
    line(graphs_type() + " g;");
    line("cudaStream_t stream = nullptr;");
    line("cudaError_t err = cudaSuccess;");
    if (has_collectives()) {
      line("// One process, one GPU: a communicator of one rank for every comm.");
      line("int device = 0;");
      for (size_t i = 0; i < p_.comms.size(); ++i) {
        open("if (ncclCommInitAll(&p." + comm_names_[i] + ", 1, &device) != ncclSuccess) {");
        line("std::fprintf(stderr, \"" + fn_ + ": ncclCommInitAll failed\\n\");");
        line("return 1;");
        close();
      }
      line("p." + rank_ + " = 0;");
      line("p." + world_size_ + " = 1;");
    }
    line("err = allocate_" + fn_ + "(p, &b);");
    std::string device_ptrs, host_ptrs;
    for (size_t i = 0; i < n; ++i) {
      device_ptrs += (i ? ", " : "") + std::string("(void*)b.") + buffer_names_[i];
      host_ptrs += (i ? ", " : "") + (p_.buffers[i].host ? "(void*)b." + host_names_[i] : std::string("nullptr"));
    }
    line("// Where each buffer is: device memory, or mapped host memory at its host address.");
    line("void* const device_ptr[" + arrays + "] = {" + (n ? device_ptrs : "nullptr") + "};");
    line("void* const host_ptr[" + arrays + "] = {" + (n ? host_ptrs : "nullptr") + "};");
    open("for (int i = 0; err == cudaSuccess && i < orch_buffers; ++i) {");
    line("if (initial[i].empty()) continue;");
    line("if (host_ptr[i]) std::memcpy(host_ptr[i], initial[i].data(), initial[i].size());");
    line("else err = cudaMemcpy(device_ptr[i], initial[i].data(), initial[i].size(), cudaMemcpyHostToDevice);");
    close();
    line("if (err == cudaSuccess) err = build_" + fn_ + "(p, b, &g);");
    line("// The zeroing, the uploads from pageable memory and build's copies and graph uploads run on");
    line("// the legacy stream, which the launch stream does not wait for.");
    line("if (err == cudaSuccess) err = cudaDeviceSynchronize();");
    line(
        "if (err == cudaSuccess) err = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);");
    line("for (unsigned long long i = 0; err == cudaSuccess && i < launches; ++i) err = launch_" + fn_ +
         "(g, stream);");
    line("if (err == cudaSuccess) err = cudaStreamSynchronize(stream);");
    if (uses_status_) line("if (err == cudaSuccess) err = device_status_" + fn_ + "(g);");
    line("bool written = true;");
    open("for (int i = 0; out && err == cudaSuccess && i < orch_buffers; ++i) {");
    line("std::vector<unsigned char> bytes(count[i] * orch_element_size[i]);");
    line("if (host_ptr[i]) std::memcpy(bytes.data(), host_ptr[i], bytes.size());");
    line("else err = cudaMemcpy(bytes.data(), device_ptr[i], bytes.size(), cudaMemcpyDeviceToHost);");
    line("const std::string path = std::string(out) + \"/\" + orch_buffer_name[i] + \".bin\";");
    open("if (err == cudaSuccess && !orch_write_file(path, bytes)) {");
    line("std::fprintf(stderr, \"" + fn_ + ": %s: cannot write: %s\\n\", path.c_str(), std::strerror(errno));");
    line("written = false;");
    line("break;");
    close();
    close();
    line("if (stream) cudaStreamDestroy(stream);");
    line("destroy_" + fn_ + "(&g);");
    line("free_" + fn_ + "(&b);");
    for (size_t i = 0; i < p_.comms.size(); ++i)
      line("if (p." + comm_names_[i] + ") ncclCommDestroy(p." + comm_names_[i] + ");");
    open("if (err != cudaSuccess) {");
    line("std::fprintf(stderr, \"" + fn_ +
         ": failed: %s (%s)\\n\", cudaGetErrorName(err), cudaGetErrorString(err));");
    line("return 1;");
    close();
    line("if (!written) return 1;");
    line("std::printf(\"" + fn_ + ": ran %llu time(s), ok\\n\", launches);");
    line("return 0;");
    close();
    line("#endif  // ORCH_EJECT_NO_MAIN");
  }

  const lir::Program& p_;
  const SourceManager& sources_;
  std::string out_;
  int indent_ = 0;

  std::string type_, fn_;
  std::set<std::string> macros_;  // declared before the scopes that point at it
  Names param_scope_{&macros_}, buffer_scope_{&macros_}, graph_scope_{&macros_};
  std::vector<std::string> param_names_, comm_names_, buffer_names_, host_names_;
  std::vector<std::string> graph_names_, exec_names_, table_names_, patch_names_;
  std::string rank_, world_size_;
  std::vector<int> device_order_;
  std::vector<std::vector<const lir::Node*>> late_nodes_;
  std::vector<const lir::Node*> handle_nodes_;
  std::set<int> used_kernels_;
  bool uses_status_ = false;  // some kernel reports device-side errors (OrchDeviceStatus)
  bool in_family_ = false;
  bool patching_ = false;
  int evals_ = 0;  // names the values ORCH_EVAL computes
};

}  // namespace

std::string emit_cuda(const lir::Program& lowered, const SourceManager& sources) {
  for (const lir::Kernel& k : lowered.kernels)
    if (!k.generated && (k.waits_at_entry || k.guard_of >= 0))
      throw std::logic_error("emit_cuda: kernel `" + k.name +
                             "` was lowered to be patched at its PTX entry; lower with for_emit_cuda()");
  return Emitter(lowered, sources).run();
}

}  // namespace orch
