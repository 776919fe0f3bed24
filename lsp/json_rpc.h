// JSON-RPC 2.0 framing as LSP sends it over stdio: `Content-Length: N` headers, a blank line,
// then N bytes of JSON. The reader never trusts the stream: a header it cannot use, a body
// over the size limit or a line without an end is skipped and reported, and reading goes on
// at the next message, so one bad message costs one error reply, not the server.
#pragma once

#include <cstddef>
#include <istream>
#include <string>

namespace orch::lsp {

// Larger than any document orch reads (kMaxInputBytes, 16 MiB) sent as a JSON string with
// every byte escaped.
constexpr size_t kMaxMessageBytes = size_t{128} << 20;
constexpr size_t kMaxHeaderLine = 8192;

class MessageReader {
 public:
  explicit MessageReader(std::istream& in, size_t max_body = kMaxMessageBytes) : in_(in), max_body_(max_body) {}

  enum class Status { Ok, Eof, Bad };
  // Ok: `body` holds one message. Bad: a message was skipped, `error` says why. Eof: the
  // stream ended (in the middle of a message too).
  Status read(std::string* body, std::string* error);

 private:
  // One header line without its line break; false at end of stream. `too_long`: the line
  // passed kMaxHeaderLine and the rest of it was dropped.
  bool read_line(std::string* line, bool* too_long);

  std::istream& in_;
  size_t max_body_;
};

// The message as it goes on the wire.
std::string frame_message(const std::string& body);

}  // namespace orch::lsp
