#include "lsp/analysis.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <sstream>

#include "support/input_file.h"
#include "support/overloaded.h"

namespace orch::lsp {

namespace {

std::string code_block(const std::string& code) { return "```orch\n" + code + "\n```\n"; }

std::string quoted(const std::string& name) { return "`" + name + "`"; }

// One line of a statement for lists: its first line, trimmed, without an opening brace.
std::string summary(const SourceManager& sources, const SourceRange& r, size_t width = 60) {
  std::string line(sources.line_text(r.file, r.begin.line));
  size_t from = r.begin.col > 0 ? std::min<size_t>(r.begin.col - 1, line.size()) : 0;
  line = line.substr(from);
  if (r.end.line == r.begin.line && r.end.col > r.begin.col)
    line = line.substr(0, std::min<size_t>(line.size(), r.end.col - r.begin.col));
  while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '{')) line.pop_back();
  if (line.size() > width) {
    size_t cut = width;
    while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xc0) == 0x80) --cut;  // UTF-8 boundary
    line = line.substr(0, cut) + "...";
  }
  return line;
}

const char* access_word(ast::Access a) {
  switch (a) {
    case ast::Access::In: return "in ";
    case ast::Access::Out: return "out ";
    case ast::Access::InOut: return "inout ";
    case ast::Access::None: break;
  }
  return "";
}

std::string kernel_param_text(const SourceManager& s, const ast::KernelParam& p) {
  std::string out = p.name.name + ": ";
  switch (p.kind) {
    case ast::KernelParamKind::Cond: return out + "cond";
    case ast::KernelParamKind::Graph: return out + "graph";
    case ast::KernelParamKind::GraphFamily:
      return out + "graph[" + (p.family_size ? source_text(s, p.family_size->loc) : "") + "]";
    case ast::KernelParamKind::Data: break;
  }
  return out + access_word(p.access) + p.elem_type.name + (p.is_array ? "[]" : "");
}

std::string kernel_signature(const SourceManager& s, const ast::Kernel& k) {
  std::string out = "kernel " + k.name.name + "(";
  for (size_t i = 0; i < k.params.size(); ++i) out += (i ? ", " : "") + kernel_param_text(s, k.params[i]);
  return out + ")";
}

std::string kernel_param_meaning(const ast::KernelParam& p) {
  switch (p.kind) {
    case ast::KernelParamKind::Cond:
      return "the condition of the enclosing `while kernel` (`cudaGraphConditionalHandle`)";
    case ast::KernelParamKind::Graph: return "a device graph the kernel may launch (`cudaGraphExec_t`)";
    case ast::KernelParamKind::GraphFamily:
      return "a family of device graphs the kernel may launch (`const cudaGraphExec_t*`)";
    case ast::KernelParamKind::Data: break;
  }
  if (p.access == ast::Access::None) return "a value, computed on the host from params and literals";
  std::string what = p.is_array ? "an array buffer" : "a device scalar";
  switch (p.access) {
    case ast::Access::In: return what + " the kernel reads";
    case ast::Access::Out: return what + " the kernel writes";
    default: return what + " the kernel reads and writes";
  }
}

std::string bytes_text(double bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  std::ostringstream out;
  out.precision(bytes < 10 && u > 0 ? 2 : 4);
  out << bytes << " " << units[u];
  return out.str();
}

// An expression's value with the params' defaults, if they decide it.
std::optional<expr::Value> with_defaults(const ir::Program& p, const ir::Expr& e) {
  std::vector<expr::Instr> code = ir::to_postfix(e);
  expr::Evaluation ev = expr::evaluate(code, [&](const expr::Instr& in) -> std::optional<expr::Value> {
    if (in.kind == expr::InstrKind::Param && in.ref >= 0 && static_cast<size_t>(in.ref) < p.params.size())
      return p.params[in.ref].default_evaluated;
    return std::nullopt;
  });
  if (!ev.known()) return std::nullopt;
  return ev.value;
}

// The checked node of a statement: the one whose place is the statement's, outside inlined
// `call` copies, with the region that holds it (its DAG edges).
struct NodeRef {
  const ir::Node* node = nullptr;
  const ir::Region* region = nullptr;
  int index = -1;
};

NodeRef find_node(const ir::Program& p, int graph, const SourceRange& loc) {
  if (graph < 0 || static_cast<size_t>(graph) >= p.graphs.size()) return {};
  std::function<NodeRef(const ir::Region&)> walk = [&](const ir::Region& r) -> NodeRef {
    for (size_t i = 0; i < r.nodes.size(); ++i) {
      const ir::Node& n = r.nodes[i];
      if (!n.call_stack.empty()) continue;
      if (n.loc.begin.line == loc.begin.line && n.loc.begin.col == loc.begin.col && n.loc.file == loc.file)
        return {&n, &r, static_cast<int>(i)};
      for (const ir::Region& b : ir::bodies(n))
        if (NodeRef found = walk(b); found.node) return found;
    }
    return {};
  };
  return walk(p.graphs[graph].body);
}

const char* statement_kind(const ast::Stmt& s) {
  return std::visit(overloaded{
                        [](const ast::KernelLaunch&) { return "kernel launch"; },
                        [](const ast::Copy&) { return "copy"; },
                        [](const ast::Fill&) { return "fill"; },
                        [](const ast::Assign&) { return "scalar update"; },
                        [](const ast::If&) { return "`if`"; },
                        [](const ast::While&) { return "`while` loop"; },
                        [](const ast::Switch&) { return "`switch`"; },
                        [](const ast::Call&) { return "`call`"; },
                        [](const ast::LaunchGraph&) { return "device graph launch"; },
                        [](const ast::Collective&) { return "collective"; },
                        [](const ast::Shmem& n) { return ast::to_string(n.kind); },
                    },
                    s.node);
}

std::string names_list(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + quoted(names[i]);
  return out;
}

// What a statement reads and writes and which statements the DAG runs before it.
std::string statement_hover(const Analysis& a, const StatementRef& s) {
  const SourceManager& sources = a.sources();
  const ast::Module& m = *a.module();
  std::string out = code_block(summary(sources, s.stmt->loc, 200));
  out += std::string("**") + statement_kind(*s.stmt) + "**";
  if (s.graph >= 0 && static_cast<size_t>(s.graph) < m.graphs.size())
    out += " in graph " + quoted(m.graphs[s.graph].name.name);
  out += "\n\n";
  if (auto* call = std::get_if<ast::Call>(&s.stmt->node))
    return out + "Inlines the statements of graph " + quoted(call->graph.name) +
           " here: they join this graph's DAG, each ordered by what it reads and writes.\n";
  const ir::Program* p = a.program();
  if (!p) return out + "The DAG is not available until the file's errors are fixed.\n";
  NodeRef ref = find_node(*p, s.graph, s.stmt->loc);
  if (!ref.node) return out + "The checker made no node of this statement (see its errors).\n";
  auto buffer_name = [&](int b) {
    return b >= 0 && static_cast<size_t>(b) < p->buffers.size() ? p->buffers[b].name : std::string("?");
  };
  std::vector<std::string> reads, writes;
  for (const ir::BufferAccess& acc : ref.node->accesses) {
    if (acc.read) reads.push_back(buffer_name(acc.buffer));
    if (acc.write) writes.push_back(buffer_name(acc.buffer));
  }
  out += "reads " + (reads.empty() ? std::string("nothing") : names_list(reads)) + "; writes " +
         (writes.empty() ? std::string("nothing") : names_list(writes)) + "\n\n";
  // Edges into this node, grouped by the node they come from.
  std::map<int, std::vector<const ir::Edge*>> from;
  for (const ir::Edge& e : ref.region->edges)
    if (e.to == ref.index) from[e.from].push_back(&e);
  if (from.empty()) return out + "Nothing runs before it in its body's DAG.\n";
  out += "After, in the DAG:\n";
  for (const auto& [index, edges] : from) {
    const ir::Node& n = ref.region->nodes[index];
    out += "- line " + std::to_string(n.loc.begin.line) + " `" + summary(sources, n.loc) + "`: ";
    for (size_t i = 0; i < edges.size(); ++i) {
      const ir::Edge& e = *edges[i];
      out += i ? ", " : "";
      const std::string b = quoted(buffer_name(e.buffer));
      switch (e.kind) {
        case ir::DepKind::RAW: out += "reads " + b + " it writes"; break;
        case ir::DepKind::WAR: out += "writes " + b + " it reads"; break;
        case ir::DepKind::WAW: out += "writes " + b + " after it"; break;
        case ir::DepKind::Condition: out += "its condition"; break;
      }
    }
    out += "\n";
  }
  return out;
}

std::string declaration_hover(const Analysis& a, const Declaration& d) {
  const SourceManager& s = a.sources();
  const ast::Module& m = *a.module();
  const ir::Program* p = a.program();
  switch (d.kind) {
    case SymbolKind::Pipeline: return code_block("pipeline " + d.name);
    case SymbolKind::Param: {
      const ast::Param& ap = m.params[d.index];
      std::string decl = "param " + d.name + ": " + ap.type.name;
      if (ap.default_value) decl += " = " + source_text(s, ap.default_value->loc);
      std::string out = code_block(decl) + "Host-set scalar: the application binds it, and may change it later.\n\n";
      if (!ap.default_value) return out + "No default: the application must bind it.\n";
      if (p && static_cast<size_t>(d.index) < p->params.size() && p->params[d.index].name == d.name &&
          p->params[d.index].default_evaluated)
        out += "Default: `" + p->params[d.index].default_evaluated->to_string() + "`\n";
      return out;
    }
    case SymbolKind::Buffer: {
      const ast::Buffer& b = m.buffers[d.index];
      std::string decl = "buffer " + d.name + ": " + b.elem_type.name;
      if (b.size) decl += "[" + source_text(s, b.size->loc) + "]";
      if (b.host) decl += " host";
      std::string out = code_block(decl);
      const std::string where = b.host ? "pinned, device-mapped host memory" : "device memory";
      if (!b.size)
        return out + "Device scalar: one `" + b.elem_type.name + "` in " + where +
               ", read and written on the GPU (conditions, scalar updates).\n";
      out += "Array of `" + b.elem_type.name + "`, `" + source_text(s, b.size->loc) + "` elements, in " + where + ".";
      if (p && static_cast<size_t>(d.index) < p->buffers.size() && p->buffers[d.index].name == d.name &&
          p->buffers[d.index].count) {
        if (std::optional<expr::Value> n = with_defaults(*p, *p->buffers[d.index].count)) {
          const double bytes = n->as_double() * expr::size_of(p->buffers[d.index].elem);
          out += " With the defaults: " + n->to_string() + " elements, " + bytes_text(bytes) + ".";
        }
      }
      return out + "\n";
    }
    case SymbolKind::Comm:
      return code_block("comm " + d.name) +
             "NCCL communicator the application binds; gives the pipeline `rank` and `world_size`.\n";
    case SymbolKind::Kernel: {
      const ast::Kernel& k = m.kernels[d.index];
      std::string decl = kernel_signature(s, k);
      for (size_t i = 0; i < k.budgets.size(); ++i)
        decl += std::string(i ? ", " : "\n    launches ") + k.budgets[i].param.name + " " +
                ast::to_string(k.budgets[i].mode) + " <= " +
                (k.budgets[i].limit ? source_text(s, k.budgets[i].limit->loc) : "");
      if (k.entry) decl += "\n    entry \"" + k.entry->name + "\"";
      if (k.from_file) decl += "\n    from \"" + k.from_file->name + "\"";
      std::string out = code_block(decl);
      if (k.inline_source)
        out += "Code: inline `source` block (line " + std::to_string(k.inline_source->loc.begin.line) + ").\n\n";
      size_t launches = 0;
      for (const Occurrence* o : a.index().occurrences_of(static_cast<int>(&d - a.index().declarations().data())))
        if (!o->definition) ++launches;
      out += "Used " + std::to_string(launches) + (launches == 1 ? " time" : " times") + " in this file.\n";
      return out;
    }
    case SymbolKind::KernelParam: {
      const ast::Kernel& k = m.kernels[d.parent];
      const ast::KernelParam& kp = k.params[d.index];
      return code_block(kernel_param_text(s, kp)) + "Parameter " + std::to_string(d.index + 1) + " of kernel " +
             quoted(k.name.name) + ": " + kernel_param_meaning(kp) + ".\n";
    }
    case SymbolKind::Graph: {
      const ast::Graph& g = m.graphs[d.index];
      std::string decl = "graph " + d.name;
      if (g.family_index) decl += "[" + g.family_index->name + ": " + (g.family_size ? source_text(s, g.family_size->loc) : "") + "]";
      if (g.device) decl += " device";
      std::string out = code_block(decl);
      if (d.name == "main") out += "The graph the application launches.";
      else if (g.device) out += g.family_index ? "A family of device graphs: one instantiation per member, launched by kernels or `launch`."
                                               : "A device graph, launched by kernels or `launch`.";
      else out += "A helper graph: `call` inlines its statements where it is called.";
      out += " " + std::to_string(g.body.size()) + (g.body.size() == 1 ? " statement" : " statements") + ".\n";
      return out;
    }
    case SymbolKind::FamilyIndex: {
      const ast::Graph& g = m.graphs[d.parent];
      return code_block(d.name) + "Index of the graph family " + quoted(g.name.name) + ": 0 to " +
             (g.family_size ? source_text(s, g.family_size->loc) : "N") + " - 1, a host value in each member.\n";
    }
  }
  return {};
}

}  // namespace

Analysis::Analysis(const std::string& path, std::string text, const AnalysisOptions& options) : path_(path) {
  const auto start = std::chrono::steady_clock::now();
  DiagnosticEngine diags;
  CheckOptions check;
  check.target_override = options.target_override;
  check.targets_dir = options.targets_dir;
  if (text.size() > kMaxInputBytes) {
    // As orchc refuses the file (E0005); the document itself stays empty here.
    file_ = sources_.add(path, "");
    diags.error(DiagCode::E0005, {}, "`" + path + "` is " + std::to_string(text.size()) + " bytes; orchc reads at most " +
                                  std::to_string(kMaxInputBytes) + " bytes from one input file");
  } else {
    CheckResult r = check_text(path, std::move(text), sources_, check, diags);
    file_ = r.module ? r.module->file : 1;
    module_ = std::move(r.module);
    program_ = std::move(r.program);
  }
  if (module_) index_ = SymbolIndex(*module_);
  diagnostics_ = diags.sorted();
  has_errors_ = diags.has_errors();
  check_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

std::string source_text(const SourceManager& sources, const SourceRange& r) {
  if (!r.valid() || r.file >= sources.count()) return {};
  const SourceFile& f = sources.file(r.file);
  auto offset = [&](SourcePos p) -> size_t {
    if (p.line == 0 || p.line > f.line_starts.size()) return f.text.size();
    size_t at = f.line_starts[p.line - 1] + (p.col > 0 ? p.col - 1 : 0);
    return std::min(at, f.text.size());
  };
  size_t a = offset(r.begin), b = offset(r.end);
  return b > a ? f.text.substr(a, b - a) : std::string();
}

std::optional<HoverInfo> hover(const Analysis& a, SourcePos p) {
  if (!a.module()) return std::nullopt;
  const SymbolIndex& index = a.index();
  const Occurrence* o = index.occurrence_at(p);
  const StatementRef* s = index.statement_at(p);
  if (o) {
    const Declaration& d = index.declarations()[o->decl];
    HoverInfo out{declaration_hover(a, d), o->range};
    // The kernel of a launch: what the launch does too.
    if (s && d.kind == SymbolKind::Kernel && !o->definition && std::holds_alternative<ast::KernelLaunch>(s->stmt->node))
      out.markdown += "\n---\n\n" + statement_hover(a, *s);
    return out;
  }
  if (s) {
    // The statement's first line, not the whole body of a loop.
    SourceRange r = s->stmt->loc;
    if (r.end.line != r.begin.line) r.end = {r.begin.line, r.begin.col + static_cast<uint32_t>(summary(a.sources(), r, 100000).size())};
    return HoverInfo{statement_hover(a, *s), r};
  }
  return std::nullopt;
}

std::vector<SourceRange> definition(const Analysis& a, SourcePos p) {
  if (!a.module()) return {};
  // On a kernel's `from "file.cu"`: its `__global__` function in that file, or the file.
  for (size_t k = 0; k < a.module()->kernels.size(); ++k) {
    const ast::Kernel& kernel = a.module()->kernels[k];
    if (!kernel.from_file || !contains(kernel.from_file->loc, p)) continue;
    const ir::Program* prog = a.program();
    if (!prog || k >= prog->kernels.size() || prog->kernels[k].name != kernel.name.name) return {};
    const ir::Kernel& ik = prog->kernels[k];
    if (ik.signature_in_source.valid()) return {ik.signature_in_source};
    if (ik.source_file != 0 && ik.source_file != a.file()) return {SourceRange{ik.source_file, {1, 1}, {1, 1}}};
    return {};
  }
  const Occurrence* o = a.index().occurrence_at(p);
  if (!o) return {};
  return {a.index().declarations()[o->decl].name_loc};
}

std::vector<SourceRange> references(const Analysis& a, SourcePos p, bool include_declaration) {
  if (!a.module()) return {};
  const Occurrence* o = a.index().occurrence_at(p);
  if (!o) return {};
  std::vector<SourceRange> out;
  for (const Occurrence* r : a.index().occurrences_of(o->decl))
    if (include_declaration || !r->definition) out.push_back(r->range);
  return out;
}

namespace {

OutlineSymbol symbol(const Analysis& a, const Declaration& d, LspSymbolKind kind, std::string detail) {
  OutlineSymbol s{d.name, std::move(detail), kind, d.loc, d.name_loc, {}};
  if (!s.range.valid()) s.range = s.selection;
  if (!contains(s.range, s.selection.begin) || !contains(s.range, s.selection.end)) s.range = s.selection;
  return s;
}

void statement_symbols(const Analysis& a, const ast::Block& body, std::vector<OutlineSymbol>& out) {
  for (const ast::Stmt& st : body) {
    OutlineSymbol s;
    s.name = summary(a.sources(), st.loc);
    if (s.name.empty()) continue;  // `;`
    s.detail = statement_kind(st);
    s.range = st.loc;
    s.selection = st.loc;
    // Bodies are children; a statement without one is a leaf (Operator).
    std::visit(overloaded{
                   [&](const ast::KernelLaunch&) { s.kind = LspSymbolKind::Event; },
                   [&](const ast::If& n) {
                     s.kind = LspSymbolKind::Namespace;
                     statement_symbols(a, n.then_body, s.children);
                     statement_symbols(a, n.else_body, s.children);
                   },
                   [&](const ast::While& n) {
                     s.kind = LspSymbolKind::Namespace;
                     statement_symbols(a, n.body, s.children);
                   },
                   [&](const ast::Switch& n) {
                     s.kind = LspSymbolKind::Namespace;
                     for (const ast::SwitchCase& c : n.cases) statement_symbols(a, c.body, s.children);
                     if (n.default_body) statement_symbols(a, *n.default_body, s.children);
                   },
                   [&](const ast::Copy&) { s.kind = LspSymbolKind::Operator; },
                   [&](const ast::Fill&) { s.kind = LspSymbolKind::Operator; },
                   [&](const ast::Assign&) { s.kind = LspSymbolKind::Operator; },
                   [&](const ast::Call&) { s.kind = LspSymbolKind::Operator; },
                   [&](const ast::LaunchGraph&) { s.kind = LspSymbolKind::Operator; },
                   [&](const ast::Collective&) { s.kind = LspSymbolKind::Operator; },
                   [&](const ast::Shmem&) { s.kind = LspSymbolKind::Operator; },
               },
               st.node);
    out.push_back(std::move(s));
  }
}

}  // namespace

std::vector<OutlineSymbol> outline(const Analysis& a) {
  std::vector<OutlineSymbol> out;
  if (!a.module()) return out;
  const ast::Module& m = *a.module();
  const SourceManager& src = a.sources();
  for (const Declaration& d : a.index().declarations()) {
    switch (d.kind) {
      case SymbolKind::Pipeline: out.push_back(symbol(a, d, LspSymbolKind::Module, "pipeline")); break;
      case SymbolKind::Param: {
        const ast::Param& p = m.params[d.index];
        out.push_back(symbol(a, d, LspSymbolKind::Constant,
                             p.type.name + (p.default_value ? " = " + source_text(src, p.default_value->loc) : "")));
        break;
      }
      case SymbolKind::Buffer: {
        const ast::Buffer& b = m.buffers[d.index];
        out.push_back(symbol(a, d, b.size ? LspSymbolKind::Array : LspSymbolKind::Variable,
                             b.elem_type.name + (b.size ? "[" + source_text(src, b.size->loc) + "]" : "") +
                                 (b.host ? " host" : "")));
        break;
      }
      case SymbolKind::Comm: out.push_back(symbol(a, d, LspSymbolKind::Object, "comm")); break;
      case SymbolKind::Kernel: {
        const ast::Kernel& k = m.kernels[d.index];
        std::string sig = kernel_signature(src, k);
        OutlineSymbol s = symbol(a, d, LspSymbolKind::Function, sig.substr(sig.find('(')));
        for (const Declaration& p : a.index().declarations())
          if (p.kind == SymbolKind::KernelParam && p.parent == d.index)
            s.children.push_back(symbol(a, p, LspSymbolKind::Field, kernel_param_text(src, k.params[p.index]).substr(p.name.size() + 2)));
        out.push_back(std::move(s));
        break;
      }
      case SymbolKind::Graph: {
        const ast::Graph& g = m.graphs[d.index];
        OutlineSymbol s = symbol(a, d, LspSymbolKind::Class, g.device ? "device graph" : "graph");
        statement_symbols(a, g.body, s.children);
        out.push_back(std::move(s));
        break;
      }
      case SymbolKind::KernelParam:
      case SymbolKind::FamilyIndex: break;
    }
  }
  return out;
}

}  // namespace orch::lsp
