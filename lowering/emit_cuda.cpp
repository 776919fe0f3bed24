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

#include "lowering/emit_cuda_internal.h"

namespace orch::eject {

std::string Emitter::run() {
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

void Emitter::line(const std::string& s) {
  if (s.empty()) {
    out_ += "\n";
    return;
  }
  out_ += std::string(indent_ * 2, ' ') + s + "\n";
}

void Emitter::open(const std::string& s) {
  line(s);
  ++indent_;
}

void Emitter::close(const std::string& s) {
  --indent_;
  line(s);
  if (indent_ == 0) resolve_unused();
}

void Emitter::resolve_unused() {
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

std::string Emitter::at(const SourceRange& r) const {
  if (!r.valid()) return p_.file != 0 ? sources_.path(p_.file) : "<unknown>";
  return sources_.describe(r);
}

std::string Emitter::statement(const SourceRange& r) const {
  if (!r.valid()) return "";
  // An excerpt: a generated pipeline may put thousands of statements on one long line.
  SourceManager::Excerpt ex = sources_.line_excerpt(r.file, r.begin.line, r.begin.col, 200);
  return comment_text((ex.cut_before ? "..." : "") + std::string(ex.text) +
                      (ex.cut_after ? "..." : ""));
}

std::string Emitter::where(const SourceRange& r, const std::string& what) const {
  return c_string(at(r) + ": " + what);
}

void Emitter::node_comment(const lir::Node& n) {
  std::string text = statement(n.loc);
  line("// " + at(n.loc) + (text.empty() ? "" : "  " + text));
  for (auto it = n.call_stack.rbegin(); it != n.call_stack.rend(); ++it)
    line("//   inlined by `" + statement(*it) + "` at " + at(*it));
  if (const auto* k = std::get_if<lir::KernelNode>(&n.op); k && p_.kernels[k->kernel].generated)
    line("//   runs " + p_.kernels[k->kernel].name + ", a kernel orchc wrote (above)");
}

void Emitter::name_things() {
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

  // Device graphs in lowering's order (order_device_graphs); kernel nodes with a late graph
  // argument are set on the executable graph after instantiation, by the graph's patcher.
  device_order_ = p_.device_order;
  late_nodes_.resize(p_.graphs.size());
  for (int g : device_order_) {
    collect_late(p_.graphs[g].body, g);
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

bool Emitter::built(int g) const {
  return p_.graphs[g].device ||
         std::find(p_.segments.begin(), p_.segments.end(), g) != p_.segments.end();
}

void Emitter::collect_late(const lir::Body& r, int graph) {
  lir::for_each_node(r, [&](const lir::Node& n) {
    const auto* k = std::get_if<lir::KernelNode>(&n.op);
    if (k && std::any_of(k->args.begin(), k->args.end(), [](const lir::KernelArg& a) { return a.late; }))
      late_nodes_[graph].push_back(&n);
  });
}

void Emitter::find_handles(const lir::Body& r) {
  lir::for_each_node(r, [&](const lir::Node& n) {
    const auto* c = std::get_if<lir::ConditionalNode>(&n.op);
    if (c && c->handle >= 0 && static_cast<size_t>(c->handle) < handle_nodes_.size())
      handle_nodes_[c->handle] = &n;
  });
}

std::string Emitter::leaf_code(const expr::Instr& in) const {
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

std::string Emitter::eval(const lir::Expr& e, lir::ScalarType t, const std::string& where) {
  std::string var = "orch_x" + std::to_string(evals_++);
  std::string code = expr::print(e.code, [&](const expr::Instr& in) { return leaf_code(in); });
  line("ORCH_EVAL(" + var + ", " + expr::type_code(t) + ", " + where + ", " +
       expr::print_convert(code, e.type(), t) + ");");
  return var + ".v";
}

std::string Emitter::generated_arg(const lir::Expr& e, lir::ScalarType t, const std::string& where) {
  return "orch_to_storage<" + std::string(expr::type_code(t)) + ">(" + eval(e, t, where) + ")";
}

std::string Emitter::host_as(const lir::Expr& e, lir::ScalarType t, const std::string& where) {
  if (const expr::Instr* leaf = e.leaf();
      leaf && leaf->kind == expr::InstrKind::Param && p_.params[leaf->ref].type == t)
    return "p." + param_names_[leaf->ref];
  std::string v = eval(e, t, where);
  if (t == lir::ScalarType::F16) return "__float2half(" + v + ")";  // exact: v is an f16
  if (t == lir::ScalarType::BF16) return "__float2bfloat16(" + v + ")";
  return v;
}

std::string Emitter::dim(const lir::Expr& e, const std::string& where) {
  if (const expr::Instr* leaf = e.leaf(); leaf && leaf->kind == expr::InstrKind::Const &&
                                          !leaf->value.is_float() && !leaf->value.negative() &&
                                          leaf->value.magnitude() <= UINT32_MAX)
    return leaf->value.to_string();
  return eval(e, lir::ScalarType::U32, where);
}

std::string Emitter::count_of(int buffer, const std::string& where) {
  const lir::Buffer& b = p_.buffers[buffer];
  if (!b.count) return "1";
  if (const expr::Instr* leaf = b.count->leaf();
      leaf && leaf->kind == expr::InstrKind::Const && !leaf->value.is_float())
    return leaf->value.to_string();
  return "static_cast<size_t>(" + eval(*b.count, lir::ScalarType::U64, where) + ")";
}

std::string Emitter::bytes_of(int buffer, const std::string& where) {
  return count_of(buffer, where) + " * sizeof(" + cuda_type(p_.buffers[buffer].elem) + ")";
}

}  // namespace orch::eject

namespace orch {

std::string emit_cuda(const lir::Program& lowered, const SourceManager& sources) {
  for (const lir::Kernel& k : lowered.kernels)
    if (!k.generated && (k.waits_at_entry || k.guard_of >= 0))
      throw std::logic_error("emit_cuda: kernel `" + k.name +
                             "` was lowered to be patched at its PTX entry; lower with for_emit_cuda()");
  return eject::Emitter(lowered, sources).run();
}

}  // namespace orch
