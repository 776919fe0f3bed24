#include "grammar/parse.h"

#include <algorithm>
#include <optional>

#include "OrchLexer.h"
#include "OrchParser.h"
#include "antlr4-runtime.h"
#include "grammar/transformer.h"

namespace orch {

namespace {

std::string describe_token(antlr4::Token* t, const antlr4::dfa::Vocabulary& vocab) {
  if (!t || t->getType() == antlr4::Token::EOF) return "end of file";
  switch (t->getType()) {
    case OrchLexer::ID: return "name `" + t->getText() + "`";
    case OrchLexer::INT:
    case OrchLexer::FLOAT: return "number `" + t->getText() + "`";
    case OrchLexer::STRING: return "string";
    case OrchLexer::TRIPLE_STRING: return "source block";
    case OrchLexer::UNEXPECTED_CHAR: return "character `" + t->getText() + "`";
    default: break;
  }
  (void)vocab;
  return "`" + t->getText() + "`";
}

std::string describe_expected(size_t type, const antlr4::dfa::Vocabulary& vocab) {
  switch (type) {
    case OrchLexer::ID: return "a name";
    case OrchLexer::INT: return "an integer";
    case OrchLexer::FLOAT: return "a number";
    case OrchLexer::STRING: return "a string";
    case OrchLexer::TRIPLE_STRING: return "a \"\"\" source block";
    case antlr4::Token::EOF: return "end of file";
    default: break;
  }
  std::string name = vocab.getLiteralName(type);
  if (name.size() >= 2 && name.front() == '\'') name = name.substr(1, name.size() - 2);
  return "`" + name + "`";
}

// Replaces ANTLR's console listener: every syntax error becomes an E0001 diagnostic. Only the
// first error on a line is kept, since ANTLR's recovery often reports one mistake twice.
class DiagnosticErrorListener : public antlr4::BaseErrorListener {
 public:
  DiagnosticErrorListener(const SourceManager& sources, uint32_t file, DiagnosticEngine& diags)
      : sources_(sources), file_(file), diags_(diags) {}

  void syntaxError(antlr4::Recognizer* recognizer, antlr4::Token* offending, size_t line,
                   size_t col, const std::string& antlr_message,
                   std::exception_ptr) override {
    if (line == last_line_ || reported_ >= kMaxReported) return;
    last_line_ = line;
    ++reported_;
    SourceRange r;
    r.file = file_;
    r.begin = {static_cast<uint32_t>(line),
               sources_.byte_column(file_, static_cast<uint32_t>(line), col)};
    r.end = {r.begin.line, r.begin.col + 1};
    std::string message;
    auto* parser = dynamic_cast<antlr4::Parser*>(recognizer);
    if (!parser) {  // the lexer never errors (UNEXPECTED_CHAR catches all), but be safe
      diags_.error(DiagCode::E0001, r, antlr_message);
      return;
    }
    const auto& vocab = parser->getVocabulary();
    if (offending && offending->getType() != antlr4::Token::EOF) {
      const std::string& text = offending->getText();
      if (text.find('\n') == std::string::npos)
        r.end.col = r.begin.col + static_cast<uint32_t>(std::max<size_t>(text.size(), 1));
    }
    message = "unexpected " + describe_token(offending, vocab);
    try {
      antlr4::misc::IntervalSet expected = parser->getExpectedTokens();
      std::vector<ssize_t> types = expected.toList();
      if (!types.empty() && types.size() <= 4) {
        message += "; expected ";
        for (size_t i = 0; i < types.size(); ++i) {
          if (i) message += i + 1 == types.size() ? " or " : ", ";
          message += describe_expected(static_cast<size_t>(types[i]), vocab);
        }
      } else if (types.size() > 4 && expected.contains(static_cast<size_t>(OrchLexer::INT)) &&
                 expected.contains(static_cast<size_t>(OrchLexer::LPAREN))) {
        message += "; expected an expression";
      }
    } catch (...) {
      // The expected set is a courtesy; the position is what matters.
    }
    diags_.error(DiagCode::E0001, r, message);
  }

 private:
  static constexpr int kMaxReported = 20;
  const SourceManager& sources_;
  uint32_t file_;
  DiagnosticEngine& diags_;
  size_t last_line_ = 0;
  int reported_ = 0;
};

// ANTLR's parser and our transformer recurse once per nesting level and per operator, so
// pathological input (thousands of open parentheses) would exhaust the stack. Reject it
// before parsing, with a diagnostic at the place it happens.
bool check_nesting(antlr4::CommonTokenStream& tokens, const SourceManager& sources, uint32_t file,
                   DiagnosticEngine& diags) {
  constexpr int kMaxDepth = 200;
  constexpr int kMaxRun = 2000;  // tokens in one expression-like run between keywords/braces
  int depth = 0, run = 0;
  // A chain of prefix operators (`- - - x`) nests as deeply as parentheses do, without any.
  int prefix = 0;
  size_t previous = 0;  // the previous token's type (0: none)
  auto ends_operand = [](size_t type) {
    switch (type) {
      case OrchLexer::ID: case OrchLexer::INT: case OrchLexer::FLOAT: case OrchLexer::TRUE:
      case OrchLexer::FALSE: case OrchLexer::RPAREN: case OrchLexer::RBRACK:
      case OrchLexer::IN: case OrchLexer::OUT: case OrchLexer::INOUT: case OrchLexer::HOST:
      case OrchLexer::DEVICE: case OrchLexer::COND: case OrchLexer::SELF: case OrchLexer::FROM:
      case OrchLexer::SOURCE: case OrchLexer::ENTRY: case OrchLexer::LAUNCHES: case OrchLexer::TAIL:
      case OrchLexer::FIRE_AND_FORGET: case OrchLexer::SIBLING: case OrchLexer::ON: case OrchLexer::COST:
        return true;
      default:
        return false;
    }
  };
  for (antlr4::Token* t : tokens.getTokens()) {
    size_t type = t->getType();
    const bool prefix_op = (type == OrchLexer::MINUS || type == OrchLexer::PLUS ||
                            type == OrchLexer::NOT || type == OrchLexer::TILDE) &&
                           !ends_operand(previous);
    prefix = prefix_op ? prefix + 1 : 0;
    previous = type;
    if (type == OrchLexer::LPAREN || type == OrchLexer::LBRACK || type == OrchLexer::LBRACE) ++depth;
    if (type == OrchLexer::RPAREN || type == OrchLexer::RBRACK || type == OrchLexer::RBRACE)
      depth = std::max(0, depth - 1);
    // Tokens no expression contains end a run: braces, keywords, `<<<`, `>>>`, `->`, `=`.
    bool structural = type == OrchLexer::LBRACE || type == OrchLexer::RBRACE ||
                      (type >= OrchLexer::PIPELINE && type <= OrchLexer::REDUCE_SCATTER) ||
                      type == OrchLexer::LAUNCH_OPEN || type == OrchLexer::LAUNCH_CLOSE ||
                      type == OrchLexer::ARROW || type == OrchLexer::ASSIGN ||
                      type == OrchLexer::PLUS_ASSIGN || type == OrchLexer::MINUS_ASSIGN ||
                      type == OrchLexer::STAR_ASSIGN || type == OrchLexer::SLASH_ASSIGN;
    run = structural ? 0 : run + 1;
    if (depth > kMaxDepth || prefix > kMaxDepth || run > kMaxRun) {
      SourceRange r;
      r.file = file;
      r.begin = {static_cast<uint32_t>(t->getLine()),
                 sources.byte_column(file, static_cast<uint32_t>(t->getLine()),
                                     t->getCharPositionInLine())};
      r.end = {r.begin.line, r.begin.col + 1};
      diags.error(DiagCode::E0003, r,
                  depth > kMaxDepth ? "nesting is deeper than " + std::to_string(kMaxDepth) +
                                          " levels"
                  : prefix > kMaxDepth ? "more than " + std::to_string(kMaxDepth) +
                                             " prefix operators in a row nest as deeply as parentheses"
                                    : "expression is longer than " + std::to_string(kMaxRun) +
                                          " tokens");
      return false;
    }
  }
  return true;
}

// Hands the lexer's tokens on until the limit, then ends the stream early and remembers that
// it did, so that a huge file is never held as tokens in full.
class CappedTokenSource : public antlr4::TokenSource {
 public:
  CappedTokenSource(antlr4::Lexer& lexer, size_t cap) : lexer_(lexer), cap_(cap) {}
  std::unique_ptr<antlr4::Token> nextToken() override {
    if (over_) return eof();
    std::unique_ptr<antlr4::Token> t = lexer_.nextToken();
    if (t->getType() == antlr4::Token::EOF) return t;  // EOF is not counted
    if (count_ >= cap_) {
      over_ = true;
      over_line_ = t->getLine();
      over_col_ = t->getCharPositionInLine();
      return eof();
    }
    ++count_;
    return t;
  }
  size_t getLine() const override { return lexer_.getLine(); }
  size_t getCharPositionInLine() override { return lexer_.getCharPositionInLine(); }
  antlr4::CharStream* getInputStream() override { return lexer_.getInputStream(); }
  std::string getSourceName() override { return lexer_.getSourceName(); }
  antlr4::TokenFactory<antlr4::CommonToken>* getTokenFactory() override {
    return lexer_.getTokenFactory();
  }
  bool over() const { return over_; }
  // Where the token past the limit begins (valid when over()).
  size_t over_line() const { return over_line_; }
  size_t over_col() const { return over_col_; }

 private:
  antlr4::Lexer& lexer_;
  size_t cap_;
  std::unique_ptr<antlr4::Token> eof() {
    return lexer_.getTokenFactory()->create(
        {&lexer_, lexer_.getInputStream()}, antlr4::Token::EOF, "", antlr4::Token::DEFAULT_CHANNEL,
        INVALID_INDEX, INVALID_INDEX, lexer_.getLine(), lexer_.getCharPositionInLine());
  }

  size_t count_ = 0;
  bool over_ = false;
  size_t over_line_ = 0, over_col_ = 0;
};

// ANTLR's own UTF-8 decoding (std::wstring_convert) needs several times the file's size at its
// peak; the text is known to be valid UTF-8 here, so decode it directly into the stream.
class Utf32InputStream : public antlr4::ANTLRInputStream {
 public:
  explicit Utf32InputStream(const std::string& utf8) {
    size_t i = utf8.compare(0, 3, "\xef\xbb\xbf") == 0 ? 3 : 0;  // ANTLR drops a BOM too
    size_t count = 0;
    for (size_t k = i; k < utf8.size(); ++k)
      count += (static_cast<unsigned char>(utf8[k]) & 0xc0) != 0x80;
    _data.reserve(count);
    while (i < utf8.size()) {
      unsigned char c = static_cast<unsigned char>(utf8[i]);
      size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : 4;
      char32_t cp = len == 1 ? c : c & (0xff >> (len + 1));
      for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(utf8[i + k]) & 0x3f);
      _data.push_back(cp);
      i += len;
    }
    p = 0;
  }
};

std::optional<size_t> first_invalid_utf8(const std::string& text) {
  size_t i = 0;
  while (i < text.size()) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (len == 0 || i + len > text.size()) return i;
    uint32_t cp = len == 1 ? c : c & (0xff >> (len + 1));
    for (size_t k = 1; k < len; ++k) {
      unsigned char d = static_cast<unsigned char>(text[i + k]);
      if ((d & 0xc0) != 0x80) return i;
      cp = (cp << 6) | (d & 0x3f);
    }
    // Overlong forms, surrogates and values past U+10FFFF are invalid too.
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
      return i;
    i += len;
  }
  return std::nullopt;
}

}  // namespace

std::unique_ptr<ast::Module> parse_module(const SourceManager& sources, uint32_t file_id,
                                          DiagnosticEngine& diags, size_t max_tokens) {
  const SourceFile& file = sources.file(file_id);
  // ANTLR decodes UTF-8 and throws on invalid bytes: find them first and say where.
  if (auto bad = first_invalid_utf8(file.text)) {
    SourceRange r;
    r.file = file_id;
    r.begin.line = 1 + static_cast<uint32_t>(std::count(file.text.begin(), file.text.begin() + *bad, '\n'));
    size_t line_start = file.text.rfind('\n', *bad == 0 ? 0 : *bad - 1);
    line_start = (line_start == std::string::npos || *bad == 0) ? 0 : line_start + 1;
    r.begin.col = static_cast<uint32_t>(*bad - line_start) + 1;
    r.end = {r.begin.line, r.begin.col + 1};
    diags.error(DiagCode::E0001, r, "the file is not valid UTF-8");
    auto empty = std::make_unique<ast::Module>();
    empty->file = file_id;
    return empty;
  }
  Utf32InputStream input(file.text);
  input.name = file.path;
  OrchLexer lexer(&input);
  lexer.removeErrorListeners();
  CappedTokenSource capped(lexer, max_tokens);
  antlr4::CommonTokenStream tokens(&capped);
  tokens.fill();
  if (capped.over()) {
    SourceRange r;
    r.file = file_id;
    r.begin = {static_cast<uint32_t>(capped.over_line()),
               sources.byte_column(file_id, static_cast<uint32_t>(capped.over_line()),
                                   capped.over_col())};
    r.end = {r.begin.line, r.begin.col + 1};
    diags.error(DiagCode::E0005, r,
                "the file has more than " + std::to_string(max_tokens) +
                    " tokens, more than orchc parses in one file");
    auto empty = std::make_unique<ast::Module>();
    empty->file = file_id;
    return empty;
  }
  if (!check_nesting(tokens, sources, file_id, diags)) {
    auto empty = std::make_unique<ast::Module>();
    empty->file = file_id;
    return empty;
  }
  OrchParser parser(&tokens);
  parser.removeErrorListeners();

  // Two-stage parse: SLL with bail-out is fast and right for almost every input; only a
  // failure there pays for full LL with error reporting.
  parser.getInterpreter<antlr4::atn::ParserATNSimulator>()->setPredictionMode(
      antlr4::atn::PredictionMode::SLL);
  parser.setErrorHandler(std::make_shared<antlr4::BailErrorStrategy>());
  OrchParser::FileContext* tree = nullptr;
  try {
    tree = parser.file();
  } catch (const antlr4::ParseCancellationException&) {
    tree = nullptr;
  }
  DiagnosticErrorListener listener(sources, file_id, diags);
  if (!tree) {
    tokens.seek(0);
    parser.reset();
    parser.addErrorListener(&listener);
    parser.setErrorHandler(std::make_shared<antlr4::DefaultErrorStrategy>());
    parser.getInterpreter<antlr4::atn::ParserATNSimulator>()->setPredictionMode(
        antlr4::atn::PredictionMode::LL);
    tree = parser.file();
  }
  grammar::Transformer transformer(sources, file_id, diags);
  auto module = transformer.module(tree);
  parser.removeErrorListeners();
  return module;
}

}  // namespace orch
