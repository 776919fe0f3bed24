#include "lsp/json_rpc.h"

#include <doctest/doctest.h>

#include <sstream>

namespace orch::lsp {

TEST_CASE("messages are framed by Content-Length and read one at a time") {
  std::istringstream in(frame_message("{\"a\":1}") + "Content-Type: application/vscode-jsonrpc\r\n" +
                        frame_message("{}"));
  MessageReader r(in);
  std::string body, error;
  CHECK(r.read(&body, &error) == MessageReader::Status::Ok);
  CHECK(body == "{\"a\":1}");
  CHECK(r.read(&body, &error) == MessageReader::Status::Ok);
  CHECK(body == "{}");
  CHECK(r.read(&body, &error) == MessageReader::Status::Eof);
}

TEST_CASE("a bad header costs its message, not the stream") {
  std::istringstream in("Content-Length: x1\r\n\r\n" + frame_message("[1]") + "Content-Length: 99999999999\r\n\r\n" +
                        frame_message("2"));
  MessageReader r(in, 1 << 20);
  std::string body, error;
  CHECK(r.read(&body, &error) == MessageReader::Status::Bad);
  CHECK(error.find("invalid Content-Length") != std::string::npos);
  // The message after it is read as usual.
  CHECK(r.read(&body, &error) == MessageReader::Status::Ok);
  CHECK(body == "[1]");
  // Too large: its announced bytes are skipped; here the stream ends inside them.
  CHECK(r.read(&body, &error) == MessageReader::Status::Eof);
}

TEST_CASE("an oversized message is skipped and the next one read") {
  std::string big(100, 'x');
  std::istringstream in(frame_message(big) + frame_message("ok"));
  MessageReader r(in, 50);
  std::string body, error;
  CHECK(r.read(&body, &error) == MessageReader::Status::Bad);
  CHECK(error.find("limit") != std::string::npos);
  CHECK(r.read(&body, &error) == MessageReader::Status::Ok);
  CHECK(body == "ok");
}

TEST_CASE("missing Content-Length, endless header lines and a cut body") {
  std::string long_line(kMaxHeaderLine + 10, 'h');
  std::istringstream in("X-Other: 1\r\n\r\n" + long_line + "\r\n\r\nContent-Length: 10\r\n\r\nabc");
  MessageReader r(in);
  std::string body, error;
  CHECK(r.read(&body, &error) == MessageReader::Status::Bad);
  CHECK(error.find("without a Content-Length") != std::string::npos);
  CHECK(r.read(&body, &error) == MessageReader::Status::Bad);
  CHECK(r.read(&body, &error) == MessageReader::Status::Eof);
}

}  // namespace orch::lsp
