// Views of a checked program for people and tools: `orchc --emit=dot|yaml`.
#pragma once

#include <string>

#include "compiler/program.h"
#include "support/source.h"

namespace orch {

// Graphviz: each graph a cluster, conditional bodies nested clusters, edges labelled by the
// buffer that orders them.
std::string emit_dot(const ir::Program& program, const SourceManager& sources);

// The checked DAG as YAML: stable (same input, same bytes) and diffable.
std::string emit_yaml(const ir::Program& program, const SourceManager& sources);

// One-line description of a node, shared by both emitters: "copy u_host -> u".
std::string describe_node(const ir::Program& program, const ir::Node& node);

}  // namespace orch
