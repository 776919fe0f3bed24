// The front door of grammar/: text in, orch's own AST out, syntax errors as diagnostics.
#pragma once

#include <memory>

#include "grammar/ast.h"
#include "support/diagnostics.h"
#include "support/source.h"

namespace orch {

// Parses the file `file_id` of `sources`. Always returns a module; when the text has syntax
// errors they are in `diags` (code E0001) and the module holds whatever parsed cleanly.
std::unique_ptr<ast::Module> parse_module(const SourceManager& sources, uint32_t file_id,
                                          DiagnosticEngine& diags);

// Writes the AST as an indented tree with a file:line:col on every node (`--emit=ast`).
std::string dump_ast(const ast::Module& module, const SourceManager& sources);

}  // namespace orch
