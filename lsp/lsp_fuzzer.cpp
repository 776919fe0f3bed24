// libFuzzer entry point for the language server (built with -DORCH_FUZZ=ON; scripts/fuzz-lsp
// runs it). The input is a .orch file, as for the parser's fuzzer: the server opens it, then
// takes a sequence of didChange edits made from it (ranges and inserted text drawn from the
// input's bytes, so every prefix, splice and out-of-range position comes up), answering hover,
// definition, references, symbols and completion between edits, and the raw input as a
// message. Nothing may crash, hang, leak or throw, and only `exit` may stop the server.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "lsp/server.h"

namespace {

using json = nlohmann::json;

// A small deterministic generator over the input (the same input, the same session).
struct Rng {
  uint64_t s;
  uint64_t next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  }
  int64_t below(int64_t n) { return n <= 0 ? 0 : static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }
};

json position(Rng& r, int64_t lines) {
  // Mostly inside the text; sometimes past it or negative.
  switch (r.below(8)) {
    case 0: return {{"line", -1 - r.below(3)}, {"character", r.below(5)}};
    case 1: return {{"line", lines + r.below(3)}, {"character", r.below(1000)}};
    default: return {{"line", r.below(lines + 1)}, {"character", r.below(120)}};
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  orch::lsp::ServerOptions options;
  options.compile_on_save = false;  // NVRTC is not what is fuzzed here
  options.debounce_ms = 0;
  bool alive = true;
  orch::lsp::Server server(options, [](const std::string& body) {
    // Every reply must be JSON.
    if (json::parse(body, nullptr, false).is_discarded()) std::abort();
  }, [](std::function<void()>) {});
  auto send = [&](const json& m) { alive = alive && server.handle(m.dump(-1, ' ', false, json::error_handler_t::replace)); };
  send({{"jsonrpc", "2.0"}, {"id", 0}, {"method", "initialize"}, {"params", {{"capabilities", json::object()}}}});
  const std::string uri = "file:///fuzz/fuzz.orch";
  send({{"jsonrpc", "2.0"}, {"method", "textDocument/didOpen"},
        {"params", {{"textDocument", {{"uri", uri}, {"version", 1}, {"text", text}}}}}});
  uint64_t seed = 1469598103934665603ull;
  for (unsigned char c : text) seed = (seed ^ c) * 1099511628211ull;
  Rng r{seed | 1};
  int64_t lines = 1;
  for (char c : text) lines += c == '\n';
  const int edits = 1 + static_cast<int>(r.below(6));
  for (int i = 0; i < edits && alive; ++i) {
    json change;
    if (r.below(5) == 0) {
      change = {{"text", text.substr(0, static_cast<size_t>(r.below(static_cast<int64_t>(size) + 1)))}};
    } else {
      const size_t from = static_cast<size_t>(r.below(static_cast<int64_t>(size) + 1));
      const size_t len = static_cast<size_t>(r.below(24));
      change = {{"range", {{"start", position(r, lines)}, {"end", position(r, lines)}}}, {"text", text.substr(from, len)}};
    }
    send({{"jsonrpc", "2.0"}, {"method", "textDocument/didChange"},
          {"params", {{"textDocument", {{"uri", uri}, {"version", i + 2}}}, {"contentChanges", json::array({change})}}}});
    server.run_due(orch::lsp::Clock::now(), true);
    static const char* methods[] = {"textDocument/hover", "textDocument/definition", "textDocument/references",
                                    "textDocument/completion"};
    for (int q = 0; q < 3; ++q)
      send({{"jsonrpc", "2.0"}, {"id", 100 + q}, {"method", methods[r.below(4)]},
            {"params", {{"textDocument", {{"uri", uri}}}, {"position", position(r, lines)}}}});
    send({{"jsonrpc", "2.0"}, {"id", 200}, {"method", "textDocument/documentSymbol"},
          {"params", {{"textDocument", {{"uri", uri}}}}}});
  }
  if (!alive) std::abort();  // only `exit` stops the server, and none was sent
  // The input as a message of its own: malformed JSON and odd requests must get replies, and
  // only an `exit` notification may stop the server.
  const json raw = json::parse(text, nullptr, false);
  const bool is_exit = raw.is_object() && raw.contains("method") && raw["method"] == "exit";
  if (!server.handle(text) && !is_exit) std::abort();
  return 0;
}
