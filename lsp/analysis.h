// One check of one document, and what the editor asks of it. The document's text is parsed and
// checked by compiler/ in process (check_text: exactly what `orchc --check --no-kernels` runs),
// so the diagnostics are orchc's, codes, messages and notes alike; the symbol index, the checked
// program (when there is one) and the sources answer hover, definition, references, the outline
// and completion. Nothing here speaks JSON: lsp/server.cpp converts.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/check.h"
#include "lsp/symbol_index.h"

namespace orch::lsp {

struct AnalysisOptions {
  std::string target_override;  // as orchc --target
  std::string targets_dir;      // as orchc --targets-dir
};

class Analysis {
 public:
  // Parses and checks `text` as the file at `path` (`from` kernel files are found beside it).
  Analysis(const std::string& path, std::string text, const AnalysisOptions& options);
  Analysis(const Analysis&) = delete;
  Analysis& operator=(const Analysis&) = delete;

  SourceManager& sources() { return sources_; }
  const SourceManager& sources() const { return sources_; }
  uint32_t file() const { return file_; }
  const std::string& path() const { return path_; }
  const std::vector<Diagnostic>& diagnostics() const { return diagnostics_; }
  bool has_errors() const { return has_errors_; }
  const ast::Module* module() const { return module_.get(); }
  const ir::Program* program() const { return program_.get(); }
  const SymbolIndex& index() const { return index_; }
  // The checked program, for compiling the kernels (lowering rewrites it); null afterwards.
  std::unique_ptr<ir::Program> take_program() { return std::move(program_); }
  double check_ms() const { return check_ms_; }

 private:
  std::string path_;
  SourceManager sources_;
  uint32_t file_ = 0;
  std::unique_ptr<ast::Module> module_;
  std::unique_ptr<ir::Program> program_;
  std::vector<Diagnostic> diagnostics_;
  bool has_errors_ = false;
  SymbolIndex index_;
  double check_ms_ = 0;
};

// The text of a range of the analysed sources (several lines joined as they are).
std::string source_text(const SourceManager& sources, const SourceRange& r);

struct HoverInfo {
  std::string markdown;
  SourceRange range;
};
// A name's declaration (a param's type and default, a buffer's element type, size and where it
// lives, a kernel's signature, ...) and, on a statement, what it reads and writes and the
// statements before it in the DAG. Nothing at `p`: nullopt.
std::optional<HoverInfo> hover(const Analysis& a, SourcePos p);

// Where the name at `p` is declared (empty if `p` is on no name).
std::vector<SourceRange> definition(const Analysis& a, SourcePos p);
// Every use of the name at `p`, its declaration first when asked for.
std::vector<SourceRange> references(const Analysis& a, SourcePos p, bool include_declaration);

// LSP's SymbolKind numbers for the outline and completion kinds.
enum class LspSymbolKind {
  Module = 2, Namespace = 3, Class = 5, Method = 6, Field = 8, Function = 12, Variable = 13,
  Constant = 14, Array = 18, Object = 19, Event = 24, Operator = 25, TypeParameter = 26
};

struct OutlineSymbol {
  std::string name, detail;
  LspSymbolKind kind = LspSymbolKind::Variable;
  SourceRange range, selection;
  std::vector<OutlineSymbol> children;
};
// The document's declarations: the pipeline, params, buffers, comms, kernels (with their
// parameters) and graphs (with their statements, nested as written).
std::vector<OutlineSymbol> outline(const Analysis& a);

// LSP's CompletionItemKind numbers.
enum class CompletionKind { Function = 3, Field = 5, Variable = 6, Module = 9, Keyword = 14, Snippet = 15,
                            Constant = 21, Struct = 22, TypeParameter = 25 };
struct CompletionItem {
  std::string label, detail;
  CompletionKind kind = CompletionKind::Variable;
};
// What may be written at byte `offset` of `text`, from the words before it on its line and the
// names `text` declares: buffers after `copy`, `fill`, `->` or a collective, graphs after `call`
// and `launch`, comms after `on`, types after `:`, statement keywords and kernels at the start
// of a statement in a graph, declaration keywords at the top level, names in expressions.
// Nothing inside comments, strings or a `source` block. `a` adds details (types, signatures);
// it may be of an older text.
std::vector<CompletionItem> complete(const std::string& text, size_t offset, const Analysis* a);

}  // namespace orch::lsp
