// Views of a checked program for people and tools: `orchc --emit=dot|yaml`.
#pragma once

#include <string>
#include <vector>

#include "compiler/program.h"
#include "support/source.h"

namespace YAML {
class Emitter;
}

namespace orch {

// Graphviz: each graph a cluster, conditional bodies nested clusters, edges labelled by the
// buffer that orders them.
std::string emit_dot(const ir::Program& program, const SourceManager& sources);

// The checked DAG as YAML: stable (same input, same bytes) and diffable.
std::string emit_yaml(const ir::Program& program, const SourceManager& sources);

// One-line description of a node, shared by both emitters: "copy u_host -> u".
std::string describe_node(const ir::Program& program, const ir::Node& node);

// The pieces of both views that lowering's program (lowering/mir.h) shares with the checker's:
// the same declarations and leaf node kinds, in graphs of its own types. Its printer
// (lowering/mir_print.cpp) writes the rest, so that --print-passes reads as --emit=yaml does.
namespace emit_parts {

// describe_node of the kinds lowering does not change, and of a kernel launch (whose arguments
// lowering's program has kinds of its own for).
std::string describe_launch(const ir::Declarations& p, int kernel, const ir::Expr (&grid)[3], const ir::Expr (&block)[3],
                            const ir::Expr& shared_bytes);
std::string describe(const ir::Declarations& p, const ir::CopyNode& c);
std::string describe(const ir::Declarations& p, const ir::FillNode& f);
std::string describe(const ir::Declarations& p, const ir::LaunchGraphNode& l, const std::string& graph_name);
std::string describe(const ir::Declarations& p, const ir::CollectiveNode& c);
std::string describe(const ir::Declarations& p, const ir::ShmemNode& s);
std::string describe_scalar_update(const ir::Declarations& p, int dst, const ir::Expr& value);
std::string describe_conditional(const ir::Declarations& p, const char* keyword, const ir::Expr* cond);

// emit_yaml's parts. yaml_declarations opens the document's map, which the caller closes.
void yaml_declarations(YAML::Emitter& out, const ir::Declarations& p);
// A node's map up to its kind's own fields (the caller adds them and closes the map).
void yaml_node_start(YAML::Emitter& out, const ir::Declarations& p, const SourceManager& sources, size_t id,
                     const char* kind, const std::string& what, const SourceRange& loc,
                     const std::vector<SourceRange>& call_stack, const std::vector<ir::BufferAccess>& accesses);
// A kernel launch's fields: its kernel's name and its arguments' text.
void yaml_kernel_fields(YAML::Emitter& out, const std::string& kernel, const std::vector<std::string>& args);
void yaml_edges(YAML::Emitter& out, const ir::Declarations& p, const std::vector<ir::Edge>& edges);
// A graph's map up to its body (the caller writes the body's region and closes the map).
void yaml_graph_start(YAML::Emitter& out, const std::string& name, bool device, uint32_t family_size,
                      uint64_t fire_and_forget, uint64_t tail, uint64_t self_tail);
void yaml_bind_checks(YAML::Emitter& out, const ir::Declarations& p, const SourceManager& sources);

}  // namespace emit_parts

}  // namespace orch
