#include "lsp/server.h"

#include <algorithm>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "lsp/text_document.h"

namespace orch::lsp {

using json = nlohmann::json;

namespace {

// JSON-RPC and LSP error codes.
constexpr int kParseError = -32700;
constexpr int kInvalidRequest = -32600;
constexpr int kMethodNotFound = -32601;
constexpr int kInvalidParams = -32602;
constexpr int kInternalError = -32603;
constexpr int kServerNotInitialized = -32002;

// A reply's parameters could not be used: answered with kInvalidParams.
struct InvalidParams : std::runtime_error {
  using std::runtime_error::runtime_error;
};

json to_json(Position p) { return {{"line", p.line}, {"character", p.character}}; }
json to_json(const Range& r) { return {{"start", to_json(r.start)}, {"end", to_json(r.end)}}; }

// An orch position as LSP's, from the text of the file it is in (the document, or a `from`
// kernel file the check read).
Position lsp_position(const SourceManager& s, uint32_t file, SourcePos p, PositionEncoding enc) {
  if (p.line == 0) return {0, 0};
  std::string_view line = s.line_text(file, p.line);
  size_t bytes = p.col > 0 ? std::min<size_t>(p.col - 1, line.size()) : 0;
  while (bytes > 0 && bytes < line.size() && (static_cast<unsigned char>(line[bytes]) & 0xc0) == 0x80) --bytes;
  return {static_cast<int64_t>(p.line) - 1, static_cast<int64_t>(encoded_length(line.substr(0, bytes), enc))};
}

Range lsp_range(const SourceManager& s, const SourceRange& r, PositionEncoding enc) {
  if (!r.valid() || r.file >= s.count()) return {};
  Range out{lsp_position(s, r.file, r.begin, enc), lsp_position(s, r.file, r.end.line ? r.end : r.begin, enc)};
  if (out.end.line < out.start.line || (out.end.line == out.start.line && out.end.character < out.start.character))
    out.end = out.start;
  return out;
}

int64_t get_int(const json& j, const char* key) {
  const json& v = j.at(key);
  if (!v.is_number_integer() && !v.is_number_unsigned()) throw InvalidParams(std::string("`") + key + "` is not an integer");
  return v.get<int64_t>();
}

std::string get_string(const json& j, const char* key) {
  const json& v = j.at(key);
  if (!v.is_string()) throw InvalidParams(std::string("`") + key + "` is not a string");
  return v.get<std::string>();
}

const json& get_object(const json& j, const char* key) {
  const json& v = j.at(key);
  if (!v.is_object()) throw InvalidParams(std::string("`") + key + "` is not an object");
  return v;
}

Position get_position(const json& j) {
  const json& p = get_object(j, "position");
  return {get_int(p, "line"), get_int(p, "character")};
}

Range get_range(const json& j) {
  const json& r = get_object(j, "range");
  const json& a = get_object(r, "start");
  const json& b = get_object(r, "end");
  return {{get_int(a, "line"), get_int(a, "character")}, {get_int(b, "line"), get_int(b, "character")}};
}

// A diagnostic the way LSP shows it: the code, orchc's message, and its notes (the declaration
// it refers to, the fix, `call` sites) as related locations; notes without a place join the
// message, as orchc prints them.
json to_lsp_diagnostic(const Diagnostic& d, const SourceManager& s, PositionEncoding enc, const std::string& doc_uri,
                       uint32_t doc_file) {
  json out = {{"range", to_json(lsp_range(s, d.range, enc))},
              {"severity", d.severity == Severity::Error ? 1 : d.severity == Severity::Warning ? 2 : 3},
              {"code", d.code},
              {"source", "orch"},
              {"message", d.message}};
  json related = json::array();
  std::vector<DiagnosticNote> notes = d.notes;
  notes.insert(notes.end(), d.context.begin(), d.context.end());
  std::string message = d.message;
  for (const DiagnosticNote& n : notes) {
    if (!n.range.valid() || n.range.file >= s.count()) {
      message += "\nnote: " + n.message;
      continue;
    }
    const std::string uri = n.range.file == doc_file ? doc_uri : path_to_uri(s.path(n.range.file));
    related.push_back({{"location", {{"uri", uri}, {"range", to_json(lsp_range(s, n.range, enc))}}},
                       {"message", n.message}});
  }
  out["message"] = message;
  if (!related.empty()) out["relatedInformation"] = related;
  return out;
}

// Diagnostics by the URI they belong to (a `from` kernel file's own, or the document's).
using DiagnosticsByUri = std::map<std::string, json>;

void add_diagnostics(DiagnosticsByUri& out, const std::vector<Diagnostic>& diags, const SourceManager& s,
                     PositionEncoding enc, const std::string& doc_uri, uint32_t doc_file) {
  for (const Diagnostic& d : diags) {
    std::string uri = doc_uri;
    if (d.range.valid() && d.range.file != doc_file && d.range.file < s.count()) uri = path_to_uri(s.path(d.range.file));
    json& list = out[uri];
    if (list.is_null()) list = json::array();
    list.push_back(to_lsp_diagnostic(d, s, enc, doc_uri, doc_file));
  }
}

}  // namespace

struct Server::Impl {
  struct Document {
    std::string uri, path;
    TextDocument text;
    bool waiting = false;  // changed since the last check
    Clock::time_point due;
    std::unique_ptr<Analysis> analysis;
    DiagnosticsByUri compiled;    // the last compile's diagnostics, while the text is as compiled
    int64_t compiled_version = -1;
    std::set<std::string> other_uris;  // files we published diagnostics to besides this one
  };

  ServerOptions options;
  Send send;
  Post post;
  PositionEncoding enc = PositionEncoding::Utf16;
  bool initialized = false;
  bool shutdown = false;
  std::map<std::string, Document> docs;
  // Compile on save: one at a time; a save during a compile compiles again after it.
  std::thread worker;
  bool compiling = false;
  std::set<std::string> save_pending;

  Impl(ServerOptions o, Send s, Post p) : options(std::move(o)), send(std::move(s)), post(std::move(p)) {}

  ~Impl() {
    if (worker.joinable()) worker.join();
  }

  // Text from files (a `from` kernel's, a message quoting it) may be invalid UTF-8: replaced,
  // never thrown about.
  void send_json(const json& j) { send(j.dump(-1, ' ', false, json::error_handler_t::replace)); }
  void reply(const json& id, json result) { send_json({{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}}); }
  void reply_error(const json& id, int code, const std::string& message) {
    send_json({{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", message}}}});
  }
  void notify(const std::string& method, json params) {
    send_json({{"jsonrpc", "2.0"}, {"method", method}, {"params", std::move(params)}});
  }
  void log(const std::string& line) {
    if (options.verbose) std::cerr << "orch-lsp: " << line << std::endl;
  }

  // ---- documents ------------------------------------------------------------------------

  Document* find(const json& params) {
    const std::string uri = get_string(get_object(params, "textDocument"), "uri");
    auto it = docs.find(uri);
    return it == docs.end() ? nullptr : &it->second;
  }

  void check(Document& d) {
    d.waiting = false;
    d.analysis = std::make_unique<Analysis>(d.path, d.text.text(), options.analysis);
    log("checked " + d.path + " (version " + std::to_string(d.text.version()) + ") in " +
        std::to_string(d.analysis->check_ms()) + " ms");
    publish(d);
  }

  void ensure_checked(Document& d) {
    if (d.waiting || !d.analysis) check(d);
  }

  void publish(Document& d) {
    DiagnosticsByUri by_uri;
    by_uri[d.uri] = json::array();
    if (d.analysis)
      add_diagnostics(by_uri, d.analysis->diagnostics(), d.analysis->sources(), enc, d.uri, d.analysis->file());
    if (d.compiled_version == d.text.version())
      for (const auto& [uri, list] : d.compiled) {
        json& to = by_uri[uri];
        if (to.is_null()) to = json::array();
        for (const json& x : list) to.push_back(x);
      }
    // Files that had diagnostics from this document and have none now are cleared.
    std::set<std::string> others;
    for (const auto& [uri, list] : by_uri)
      if (uri != d.uri) others.insert(uri);
    for (const std::string& uri : d.other_uris)
      if (!others.count(uri)) by_uri[uri] = json::array();
    d.other_uris = std::move(others);
    for (auto& [uri, list] : by_uri) {
      json params = {{"uri", uri}, {"diagnostics", std::move(list)}};
      if (uri == d.uri) params["version"] = d.text.version();
      notify("textDocument/publishDiagnostics", std::move(params));
    }
  }

  // ---- compile on save --------------------------------------------------------------------

  void start_compile(Document& d) {
    ensure_checked(d);
    if (d.analysis->has_errors()) return;  // as orchc --check: kernels compile once the rules hold
    if (compiling) {
      save_pending.insert(d.uri);
      return;
    }
    // The worker gets its own check of the text (lowering rewrites the program it is given).
    auto analysis = std::make_shared<Analysis>(d.path, d.text.text(), options.analysis);
    if (!analysis->program()) return;
    compiling = true;
    if (worker.joinable()) worker.join();
    const std::string uri = d.uri;
    const int64_t version = d.text.version();
    const PositionEncoding encoding = enc;
    CompileKernels compile_kernels = options.compile_kernels;
    worker = std::thread([this, analysis, uri, version, encoding, compile_kernels] {
      const auto start = Clock::now();
      DiagnosticsByUri by_uri;
      try {
        DiagnosticEngine diags;
        compile_kernels(*analysis, diags);
        add_diagnostics(by_uri, diags.sorted(), analysis->sources(), encoding, uri, analysis->file());
      } catch (const std::exception& e) {
        log(std::string("compile failed: ") + e.what());
      }
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
      post([this, uri, version, by_uri = std::move(by_uri), ms]() mutable { compiled(uri, version, std::move(by_uri), ms); });
    });
  }

  void compiled(const std::string& uri, int64_t version, DiagnosticsByUri by_uri, double ms) {
    compiling = false;
    log("compiled the kernels of " + uri + " in " + std::to_string(ms) + " ms");
    auto it = docs.find(uri);
    if (it != docs.end() && it->second.text.version() == version) {
      it->second.compiled = std::move(by_uri);
      it->second.compiled_version = version;
      publish(it->second);
    }
    if (!save_pending.empty()) {
      std::string next = *save_pending.begin();
      save_pending.erase(save_pending.begin());
      auto n = docs.find(next);
      if (n != docs.end()) start_compile(n->second);
    }
  }

  // ---- messages -----------------------------------------------------------------------------

  json initialize(const json& params) {
    if (params.is_object()) {
      const json caps = params.value("capabilities", json::object());
      if (caps.is_object() && caps.contains("general") && caps["general"].is_object()) {
        const json& encodings = caps["general"].value("positionEncodings", json::array());
        if (encodings.is_array())
          for (const json& e : encodings)
            if (e == "utf-8") enc = PositionEncoding::Utf8;
      }
      if (params.contains("initializationOptions")) configure(params["initializationOptions"]);
    }
    initialized = true;
    return {{"capabilities",
             {{"positionEncoding", enc == PositionEncoding::Utf8 ? "utf-8" : "utf-16"},
              {"textDocumentSync", {{"openClose", true}, {"change", 2}, {"save", {{"includeText", false}}}}},
              {"hoverProvider", true},
              {"definitionProvider", true},
              {"referencesProvider", true},
              {"documentSymbolProvider", true},
              {"completionProvider", {{"triggerCharacters", json::array({">", ":"})}}}}},
            {"serverInfo", {{"name", "orch-lsp"}, {"version", "0.1.0"}}}};
  }

  // initializationOptions, or the `orch` section of didChangeConfiguration's settings.
  void configure(const json& o) {
    if (!o.is_object()) return;
    if (o.contains("debounceMs") && o["debounceMs"].is_number_integer())
      options.debounce_ms = static_cast<int>(std::clamp<int64_t>(o["debounceMs"].get<int64_t>(), 0, 10000));
    if (o.contains("compileOnSave") && o["compileOnSave"].is_boolean()) options.compile_on_save = o["compileOnSave"].get<bool>();
    if (o.contains("target") && o["target"].is_string()) options.analysis.target_override = o["target"].get<std::string>();
    if (o.contains("targetsDir") && o["targetsDir"].is_string()) options.analysis.targets_dir = o["targetsDir"].get<std::string>();
  }

  json hover(const json& params) {
    Document* d = find(params);
    if (!d) return nullptr;
    ensure_checked(*d);
    std::optional<HoverInfo> h = lsp::hover(*d->analysis, d->text.source_pos(get_position(params), enc));
    if (!h) return nullptr;
    json out = {{"contents", {{"kind", "markdown"}, {"value", h->markdown}}}};
    if (h->range.valid()) out["range"] = to_json(lsp_range(d->analysis->sources(), h->range, enc));
    return out;
  }

  json location(const Document& d, const SourceRange& r) {
    const SourceManager& s = d.analysis->sources();
    const std::string uri = r.file == d.analysis->file() ? d.uri : path_to_uri(s.path(r.file));
    return {{"uri", uri}, {"range", to_json(lsp_range(s, r, enc))}};
  }

  json definition(const json& params) {
    Document* d = find(params);
    json out = json::array();
    if (!d) return out;
    ensure_checked(*d);
    for (const SourceRange& r : lsp::definition(*d->analysis, d->text.source_pos(get_position(params), enc)))
      out.push_back(location(*d, r));
    return out;
  }

  json references(const json& params) {
    Document* d = find(params);
    json out = json::array();
    if (!d) return out;
    ensure_checked(*d);
    bool include = true;
    if (params.contains("context") && params["context"].is_object())
      include = params["context"].value("includeDeclaration", true);
    for (const SourceRange& r : lsp::references(*d->analysis, d->text.source_pos(get_position(params), enc), include))
      out.push_back(location(*d, r));
    return out;
  }

  json symbols_json(const Document& d, const std::vector<OutlineSymbol>& list) {
    json out = json::array();
    for (const OutlineSymbol& s : list) {
      json j = {{"name", s.name.empty() ? std::string("?") : s.name},
                {"detail", s.detail},
                {"kind", static_cast<int>(s.kind)},
                {"range", to_json(lsp_range(d.analysis->sources(), s.range, enc))},
                {"selectionRange", to_json(lsp_range(d.analysis->sources(), s.selection, enc))}};
      if (!s.children.empty()) j["children"] = symbols_json(d, s.children);
      out.push_back(std::move(j));
    }
    return out;
  }

  json document_symbols(const json& params) {
    Document* d = find(params);
    if (!d) return json::array();
    ensure_checked(*d);
    return symbols_json(*d, outline(*d->analysis));
  }

  json completion(const json& params) {
    Document* d = find(params);
    json out = json::array();
    if (!d) return out;
    ensure_checked(*d);
    const size_t offset = d->text.offset(get_position(params), enc);
    for (const CompletionItem& c : complete(d->text.text(), offset, d->analysis.get()))
      out.push_back({{"label", c.label}, {"kind", static_cast<int>(c.kind)}, {"detail", c.detail}});
    return out;
  }

  void did_open(const json& params) {
    const json& td = get_object(params, "textDocument");
    const std::string uri = get_string(td, "uri");
    Document& d = docs[uri];
    d.uri = uri;
    d.path = uri_to_path(uri);
    d.text = TextDocument(get_string(td, "text"), td.contains("version") && td["version"].is_number_integer() ? td["version"].get<int64_t>() : 0);
    d.compiled_version = -1;
    check(d);  // at once: the file was just opened
  }

  void did_change(const json& params) {
    Document* d = find(params);
    if (!d) return;
    const json& td = get_object(params, "textDocument");
    const json& changes = params.at("contentChanges");
    if (!changes.is_array()) throw InvalidParams("`contentChanges` is not an array");
    for (const json& c : changes) {
      if (!c.is_object()) throw InvalidParams("a content change is not an object");
      if (c.contains("range")) d->text.replace(get_range(c), get_string(c, "text"), enc);
      else d->text.set_text(get_string(c, "text"));
    }
    if (td.contains("version") && td["version"].is_number_integer()) d->text.set_version(td["version"].get<int64_t>());
    else d->text.set_version(d->text.version() + 1);
    d->waiting = true;
    d->due = Clock::now() + std::chrono::milliseconds(options.debounce_ms);
  }

  void did_save(const json& params) {
    Document* d = find(params);
    if (!d || !options.compile_on_save || !options.compile_kernels) return;
    start_compile(*d);
  }

  void did_close(const json& params) {
    const std::string uri = get_string(get_object(params, "textDocument"), "uri");
    auto it = docs.find(uri);
    if (it == docs.end()) return;
    // Its diagnostics go with it.
    notify("textDocument/publishDiagnostics", {{"uri", uri}, {"diagnostics", json::array()}});
    for (const std::string& other : it->second.other_uris)
      notify("textDocument/publishDiagnostics", {{"uri", other}, {"diagnostics", json::array()}});
    docs.erase(it);
    save_pending.erase(uri);
  }

  // Returns false after `exit`.
  bool dispatch(const json& msg) {
    if (!msg.is_object()) {
      reply_error(nullptr, kInvalidRequest, "a message must be a JSON object");
      return true;
    }
    json id = nullptr;
    bool is_request = false;
    if (msg.contains("id")) {
      const json& raw = msg["id"];
      if (raw.is_number_integer() || raw.is_number_unsigned() || raw.is_string()) {
        id = raw;
        is_request = true;
      } else if (!raw.is_null()) {
        reply_error(nullptr, kInvalidRequest, "`id` must be a number or a string");
        return true;
      }
    }
    if (!msg.contains("method")) return true;  // a reply to a request of ours: we send none
    if (!msg["method"].is_string()) {
      if (is_request) reply_error(id, kInvalidRequest, "`method` must be a string");
      return true;
    }
    const std::string method = msg["method"].get<std::string>();
    const json params = msg.contains("params") ? msg["params"] : json::object();
    if (method == "exit") return false;
    if (!initialized && method != "initialize") {
      if (is_request) reply_error(id, kServerNotInitialized, "the server is not initialized");
      return true;
    }
    if (shutdown && is_request) {
      reply_error(id, kInvalidRequest, "the server is shutting down");
      return true;
    }
    try {
      if (is_request) {
        json result;
        if (method == "initialize") result = initialize(params);
        else if (method == "shutdown") {
          shutdown = true;
          result = nullptr;
        } else if (method == "textDocument/hover") result = hover(params);
        else if (method == "textDocument/definition") result = definition(params);
        else if (method == "textDocument/references") result = references(params);
        else if (method == "textDocument/documentSymbol") result = document_symbols(params);
        else if (method == "textDocument/completion") result = completion(params);
        else {
          reply_error(id, kMethodNotFound, "orch-lsp has no method `" + method + "`");
          return true;
        }
        reply(id, std::move(result));
      } else {
        if (method == "textDocument/didOpen") did_open(params);
        else if (method == "textDocument/didChange") did_change(params);
        else if (method == "textDocument/didSave") did_save(params);
        else if (method == "textDocument/didClose") did_close(params);
        else if (method == "workspace/didChangeConfiguration" && params.is_object() && params.contains("settings") &&
                 params["settings"].is_object() && params["settings"].contains("orch"))
          configure(params["settings"]["orch"]);
        // Other notifications ($/cancelRequest, initialized, ...) need nothing.
      }
    } catch (const InvalidParams& e) {
      if (is_request) reply_error(id, kInvalidParams, e.what());
      else log(method + ": " + e.what());
    } catch (const json::exception& e) {
      if (is_request) reply_error(id, kInvalidParams, e.what());
      else log(method + ": " + e.what());
    } catch (const std::exception& e) {
      if (is_request) reply_error(id, kInternalError, std::string("internal error: ") + e.what());
      else log(method + ": internal error: " + e.what());
    }
    return true;
  }
};

Server::Server(ServerOptions options, Send send, Post post)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(send), std::move(post))) {}

Server::~Server() = default;

bool Server::handle(const std::string& body) {
  json msg = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (msg.is_discarded()) {
    impl_->reply_error(nullptr, kParseError, "the message is not valid JSON");
    return true;
  }
  return impl_->dispatch(msg);
}

void Server::bad_message(const std::string& why) { impl_->reply_error(nullptr, kParseError, why); }

std::optional<Clock::time_point> Server::next_due() const {
  std::optional<Clock::time_point> due;
  for (const auto& [uri, d] : impl_->docs)
    if (d.waiting && (!due || d.due < *due)) due = d.due;
  return due;
}

void Server::run_due(Clock::time_point now, bool all) {
  for (auto& [uri, d] : impl_->docs)
    if (d.waiting && (all || d.due <= now)) impl_->check(d);
}

void Server::wait_for_compile() {
  if (impl_->worker.joinable()) impl_->worker.join();
}

int Server::exit_code() const { return impl_->shutdown ? 0 : 1; }

}  // namespace orch::lsp
