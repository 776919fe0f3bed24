#include "lsp/server.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "lsp/kernel_compile.h"
#include "lsp/test_util.h"
#include "lsp/text_document.h"

namespace orch::lsp {

namespace {

using json = nlohmann::json;

// A server in process, with what it sends kept in order.
struct Session {
  std::vector<json> sent;
  std::vector<std::function<void()>> posted;
  Server server;
  int next_id = 1;

  explicit Session(ServerOptions options = quiet())
      : server(
            std::move(options), [this](const std::string& body) { sent.push_back(json::parse(body)); },
            [this](std::function<void()> task) { posted.push_back(std::move(task)); }) {}

  static ServerOptions quiet() {
    ServerOptions o;
    o.compile_on_save = false;
    return o;
  }

  bool send(const json& msg) { return server.handle(msg.dump()); }
  json request(const std::string& method, json params) {
    const int id = next_id++;
    send({{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}});
    for (auto it = sent.rbegin(); it != sent.rend(); ++it)
      if (it->contains("id") && (*it)["id"] == id) return *it;
    return nullptr;
  }
  void notify(const std::string& method, json params) {
    send({{"jsonrpc", "2.0"}, {"method", method}, {"params", std::move(params)}});
  }
  // The last diagnostics published for `uri`.
  json diagnostics(const std::string& uri) {
    for (auto it = sent.rbegin(); it != sent.rend(); ++it)
      if ((*it).value("method", "") == "textDocument/publishDiagnostics" && (*it)["params"]["uri"] == uri)
        return (*it)["params"]["diagnostics"];
    return nullptr;
  }
};

json pos(int line, int character) { return {{"line", line}, {"character", character}}; }

json at(const std::string& uri, int line, int character) {
  return {{"textDocument", {{"uri", uri}}}, {"position", pos(line, character)}};
}

}  // namespace

TEST_CASE("a session: open, change, hover, definition, references, symbols, shutdown") {
  Session s;
  json init = s.request("initialize", {{"capabilities", json::object()}});
  CHECK(init["result"]["capabilities"]["positionEncoding"] == "utf-16");
  CHECK(init["result"]["capabilities"]["hoverProvider"] == true);
  s.notify("initialized", json::object());
  const std::string uri = path_to_uri(test::example("saxpy.orch"));
  s.notify("textDocument/didOpen",
           {{"textDocument", {{"uri", uri}, {"languageId", "orch"}, {"version", 1}, {"text", test::read(test::example("saxpy.orch"))}}}});
  CHECK(s.diagnostics(uri) == json::array());
  // Rename the buffer `x`'s use in the launch: one E0101, once the debounce has passed.
  s.notify("textDocument/didChange", {{"textDocument", {{"uri", uri}, {"version", 2}}},
                                      {"contentChanges", json::array({{{"range", {{"start", pos(22, 41)}, {"end", pos(22, 42)}}},
                                                                       {"text", "z"}}})}});
  REQUIRE(s.server.next_due());
  s.server.run_due(*s.server.next_due());
  json d = s.diagnostics(uri);
  REQUIRE(d.size() == 1);
  CHECK(d[0]["code"] == "E0101");
  CHECK(d[0]["range"] == json({{"start", pos(22, 41)}, {"end", pos(22, 42)}}));
  CHECK(d[0]["source"] == "orch");
  // Hover on `a` in the launch's arguments: the param.
  json h = s.request("textDocument/hover", at(uri, 22, 38));
  CHECK(h["result"]["contents"]["value"].get<std::string>().find("param a: f32 = 2.0") != std::string::npos);
  json def = s.request("textDocument/definition", at(uri, 22, 38));
  REQUIRE(def["result"].size() == 1);
  CHECK(def["result"][0]["uri"] == uri);
  CHECK(def["result"][0]["range"]["start"] == pos(5, 6));
  json refs = s.request("textDocument/references",
                        {{"textDocument", {{"uri", uri}}}, {"position", pos(5, 6)}, {"context", {{"includeDeclaration", true}}}});
  CHECK(refs["result"].size() == 2);
  json symbols = s.request("textDocument/documentSymbol", {{"textDocument", {{"uri", uri}}}});
  CHECK(symbols["result"].size() == 9);
  json completion = s.request("textDocument/completion", at(uri, 21, 7));
  CHECK(completion["result"].is_array());
  CHECK(s.request("shutdown", nullptr)["result"].is_null());
  CHECK_FALSE(s.send({{"jsonrpc", "2.0"}, {"method", "exit"}}));
  CHECK(s.server.exit_code() == 0);
}

TEST_CASE("bad requests get errors and the server goes on") {
  Session s;
  CHECK(s.request("textDocument/hover", at("file:///x.orch", 0, 0))["error"]["code"] == -32002);
  s.request("initialize", json::object());
  CHECK(s.server.handle("{not json"));
  CHECK(s.sent.back()["error"]["code"] == -32700);
  CHECK(s.server.handle("[1, 2]"));
  CHECK(s.sent.back()["error"]["code"] == -32600);
  CHECK(s.server.handle(R"({"jsonrpc":"2.0","id":{"deep":[1]},"method":"shutdown"})"));
  CHECK(s.sent.back()["error"]["code"] == -32600);
  CHECK(s.request("no/such/method", json::object())["error"]["code"] == -32601);
  CHECK(s.request("textDocument/hover", {{"textDocument", 5}})["error"]["code"] == -32602);
  // Unknown documents: empty answers.
  CHECK(s.request("textDocument/hover", at("file:///x.orch", 0, 0))["result"].is_null());
  s.notify("textDocument/didOpen", {{"textDocument", {{"uri", "file:///x.orch"}, {"version", 1}, {"text", "pipeline x"}}}});
  CHECK(s.request("textDocument/hover", {{"textDocument", {{"uri", "file:///x.orch"}}}, {"position", {{"line", "a"}}}})["error"]["code"] ==
        -32602);
  CHECK(s.request("textDocument/definition", {{"textDocument", {{"uri", "file:///x.orch"}}}})["error"]["code"] == -32602);
  // Notifications with bad params are dropped.
  s.notify("textDocument/didOpen", {{"textDocument", {{"uri", 3}}}});
  s.notify("textDocument/didChange", {{"textDocument", {{"uri", "file:///x.orch"}}}, {"contentChanges", 7}});
  s.server.bad_message("header");
  CHECK(s.sent.back()["error"]["code"] == -32700);
  // A change far out of range is clamped.
  s.notify("textDocument/didOpen", {{"textDocument", {{"uri", "file:///y.orch"}, {"version", 1}, {"text", "pipeline y"}}}});
  s.notify("textDocument/didChange",
           {{"textDocument", {{"uri", "file:///y.orch"}, {"version", 2}}},
            {"contentChanges", json::array({{{"range", {{"start", pos(-3, 99)}, {"end", pos(1 << 30, -1)}}}, {"text", "x"}}})}});
  s.server.run_due(Clock::now(), true);
  CHECK(s.diagnostics("file:///y.orch")[0]["code"] == "E0001");
  CHECK_FALSE(s.send({{"jsonrpc", "2.0"}, {"method", "exit"}}));
  CHECK(s.server.exit_code() == 1);  // no shutdown first
}

TEST_CASE("UTF-8 positions when the client offers them") {
  Session s;
  json init = s.request("initialize", {{"capabilities", {{"general", {{"positionEncodings", {"utf-8", "utf-16"}}}}}}});
  CHECK(init["result"]["capabilities"]["positionEncoding"] == "utf-8");
  const std::string uri = "file:///tmp/u.orch";
  // `é` in a comment before the error: 2 bytes, so the column differs from UTF-16's.
  s.notify("textDocument/didOpen",
           {{"textDocument", {{"uri", uri}, {"version", 1}, {"text", "pipeline u\ngraph main { /*\xc3\xa9*/ fill q = 0 }\n"}}}});
  json d = s.diagnostics(uri);
  REQUIRE(d.size() == 1);
  CHECK(d[0]["range"]["start"] == pos(1, 25));
}

TEST_CASE("compile on save: a kernel's NVRTC error at its line in the source block") {
  ServerOptions o;
  o.compile_on_save = true;
  o.compile_kernels = kernel_compiler((std::filesystem::current_path() / "lsp-test-kernel-cache").string());
  Session s(o);
  s.request("initialize", json::object());
  const std::string uri = "file:///tmp/save.orch";
  const std::string text =
      "pipeline save\n"
      "param n: u32 = 256\n"
      "buffer x: f32[n]\n"
      "kernel k(n: u32, x: inout f32[]) source \"\"\"\n"
      "extern \"C\" __global__ void k(unsigned n, float* x) {\n"
      "  x[0] = undefined_value;\n"
      "}\n"
      "\"\"\"\n"
      "graph main { k<<<1, 256>>>(n, x) }\n";
  s.notify("textDocument/didOpen", {{"textDocument", {{"uri", uri}, {"version", 1}, {"text", text}}}});
  CHECK(s.diagnostics(uri) == json::array());  // the rules hold; the code is not compiled yet
  s.notify("textDocument/didSave", {{"textDocument", {{"uri", uri}}}});
  s.server.wait_for_compile();
  REQUIRE(s.posted.size() == 1);
  s.posted[0]();
  json d = s.diagnostics(uri);
  REQUIRE(d.size() >= 1);
  CHECK(d[0]["code"] == "E0901");
  CHECK(d[0]["range"]["start"]["line"] == 5);  // `x[0] = undefined_value;`
  CHECK(d[0]["message"].get<std::string>().find("undefined_value") != std::string::npos);
  // A change drops the compile's diagnostics until the next save.
  s.notify("textDocument/didChange", {{"textDocument", {{"uri", uri}, {"version", 2}}},
                                      {"contentChanges", json::array({{{"text", text + "\n"}}})}});
  s.server.run_due(Clock::now(), true);
  CHECK(s.diagnostics(uri) == json::array());
}

}  // namespace orch::lsp

#include <sstream>

#include "lsp/json_rpc.h"
#include "lsp/stdio_loop.h"

namespace orch::lsp {

namespace {

std::string framed(const nlohmann::json& m) { return frame_message(m.dump()); }

std::vector<nlohmann::json> read_all(const std::string& out) {
  std::istringstream in(out);
  MessageReader reader(in);
  std::vector<nlohmann::json> messages;
  std::string body, error;
  while (reader.read(&body, &error) == MessageReader::Status::Ok) messages.push_back(nlohmann::json::parse(body));
  return messages;
}

}  // namespace

TEST_CASE("serve: a session over byte streams, garbage included, ended by exit") {
  using json = nlohmann::json;
  const std::string uri = "file:///tmp/stream.orch";
  std::string input = framed({{"jsonrpc", "2.0"}, {"id", 1}, {"method", "initialize"}, {"params", json::object()}}) +
                      "garbage without a header\r\n\r\n" +
                      framed({{"jsonrpc", "2.0"}, {"method", "textDocument/didOpen"},
                              {"params", {{"textDocument", {{"uri", uri}, {"version", 1}, {"text", "pipeline s\n"}}}}}}) +
                      framed({{"jsonrpc", "2.0"}, {"method", "textDocument/didChange"},
                              {"params", {{"textDocument", {{"uri", uri}, {"version", 2}}},
                                          {"contentChanges", json::array({{{"text", "pipeline s\ngraph main { fill q = 1 }\n"}}})}}}}) +
                      framed({{"jsonrpc", "2.0"}, {"id", 2}, {"method", "textDocument/documentSymbol"},
                              {"params", {{"textDocument", {{"uri", uri}}}}}}) +
                      framed({{"jsonrpc", "2.0"}, {"id", 3}, {"method", "shutdown"}}) +
                      framed({{"jsonrpc", "2.0"}, {"method", "exit"}}) +
                      framed({{"jsonrpc", "2.0"}, {"id", 4}, {"method", "shutdown"}});  // never read
  // After `exit` the reader thread is left reading the rest of the input (as it would be left
  // blocked on a pipe), so the stream must outlive this test.
  static std::istringstream in;
  in.str(input);
  std::ostringstream out;
  ServerOptions options;
  options.compile_on_save = false;
  CHECK(serve(in, out, options) == 0);
  std::vector<json> sent = read_all(out.str());
  REQUIRE(sent.size() >= 5);
  CHECK(sent[0]["id"] == 1);
  CHECK(sent[1]["error"]["code"] == -32700);  // the garbage
  // The symbols request came after the change: the change is checked first.
  json last_diagnostics;
  for (const json& m : sent) {
    if (m.value("method", "") == "textDocument/publishDiagnostics") last_diagnostics = m["params"];
    if (m.contains("id") && m["id"] == 2) {
      REQUIRE(!last_diagnostics.is_null());
      CHECK(last_diagnostics["version"] == 2);
      CHECK(last_diagnostics["diagnostics"][0]["code"] == "E0101");
      CHECK(m["result"].size() == 2);  // the pipeline and `main`
    }
  }
  CHECK(sent.back()["id"] == 3);
}

TEST_CASE("serve: the input ending without exit is exit code 1") {
  std::istringstream in(frame_message(R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{}})"));
  std::ostringstream out;
  ServerOptions options;
  CHECK(serve(in, out, options) == 1);
}

}  // namespace orch::lsp
