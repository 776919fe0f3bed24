// The front door of grammar/: text in, orch's own AST out, syntax errors as diagnostics.
#pragma once

#include <memory>

#include "grammar/ast.h"
#include "support/diagnostics.h"
#include "support/source.h"

namespace orch {

// The tokens parse_module() accepts in one file. Parsing holds every token and the whole parse
// tree at once, about 500 bytes per token at the peak, so a file with more is refused (E0005)
// before the parser runs: memory stays under 1 GB for any input. Generated pipelines of
// 100,000 statements (bench/check_bench) have about 1.3 million tokens.
constexpr size_t kMaxTokens = 1'500'000;

// Parses the file `file_id` of `sources`. Always returns a module; when the text has syntax
// errors they are in `diags` (code E0001) and the module holds whatever parsed cleanly.
// `max_tokens` is for tests.
std::unique_ptr<ast::Module> parse_module(const SourceManager& sources, uint32_t file_id,
                                          DiagnosticEngine& diags, size_t max_tokens = kMaxTokens);

// Writes the AST as an indented tree with a file:line:col on every node (`--emit=ast`).
std::string dump_ast(const ast::Module& module, const SourceManager& sources);

}  // namespace orch
