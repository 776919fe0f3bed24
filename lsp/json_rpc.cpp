#include "lsp/json_rpc.h"

#include <algorithm>
#include <cctype>
#include <vector>

namespace orch::lsp {

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t");
  if (a == std::string::npos) return {};
  size_t b = s.find_last_not_of(" \t");
  return s.substr(a, b - a + 1);
}

}  // namespace

bool MessageReader::read_line(std::string* line, bool* too_long) {
  line->clear();
  *too_long = false;
  int c;
  bool any = false;
  while ((c = in_.get()) != std::char_traits<char>::eof()) {
    any = true;
    if (c == '\n') break;
    if (line->size() < kMaxHeaderLine) line->push_back(static_cast<char>(c));
    else *too_long = true;
  }
  if (!any) return false;
  if (!line->empty() && line->back() == '\r') line->pop_back();
  return true;
}

MessageReader::Status MessageReader::read(std::string* body, std::string* error) {
  body->clear();
  error->clear();
  long long length = -1;
  bool bad_header = false;
  std::string line;
  bool too_long = false;
  bool saw_header = false;
  for (;;) {
    if (!read_line(&line, &too_long)) return Status::Eof;
    if (line.empty() && !too_long) {
      if (saw_header) break;
      continue;  // blank lines between messages
    }
    // Resynchronise after a body without headers: the next header follows it on its line, and
    // what came before it belongs to no message.
    if (size_t at = lower(line).find("content-length:"); at != std::string::npos && at > 0) {
      line = line.substr(at);
      bad_header = false;
      length = -1;
      error->clear();
    }
    saw_header = true;
    if (too_long) {
      bad_header = true;
      *error = "header line longer than " + std::to_string(kMaxHeaderLine) + " bytes";
      continue;
    }
    size_t colon = line.find(':');
    if (colon == std::string::npos) {
      bad_header = true;
      *error = "header line without `:`";
      continue;
    }
    if (lower(trim(line.substr(0, colon))) != "content-length") continue;  // Content-Type etc.
    std::string value = trim(line.substr(colon + 1));
    if (value.empty() || value.size() > 18 ||
        !std::all_of(value.begin(), value.end(), [](unsigned char c) { return std::isdigit(c); })) {
      bad_header = true;
      *error = "invalid Content-Length `" + value.substr(0, 40) + "`";
      continue;
    }
    length = std::stoll(value);
  }
  if (length < 0) {
    if (error->empty()) *error = "message without a Content-Length header";
    return Status::Bad;
  }
  if (static_cast<unsigned long long>(length) > max_body_) {
    // Skip the body, so the next message is read from its start.
    std::vector<char> sink(1 << 16);
    long long left = length;
    while (left > 0) {
      in_.read(sink.data(), static_cast<std::streamsize>(std::min<long long>(left, sink.size())));
      if (in_.gcount() <= 0) return Status::Eof;
      left -= in_.gcount();
    }
    *error = "message of " + std::to_string(length) + " bytes; the limit is " + std::to_string(max_body_);
    return Status::Bad;
  }
  body->resize(static_cast<size_t>(length));
  if (length > 0) in_.read(body->data(), length);
  if (in_.gcount() != length && length > 0) return Status::Eof;
  if (bad_header) return Status::Bad;
  return Status::Ok;
}

std::string frame_message(const std::string& body) {
  return "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

}  // namespace orch::lsp
