#include "grammar/parse.h"

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
  DiagnosticErrorListener(uint32_t file, DiagnosticEngine& diags) : file_(file), diags_(diags) {}

  void syntaxError(antlr4::Recognizer* recognizer, antlr4::Token* offending, size_t line,
                   size_t col, const std::string& antlr_message,
                   std::exception_ptr) override {
    if (line == last_line_ || reported_ >= kMaxReported) return;
    last_line_ = line;
    ++reported_;
    SourceRange r;
    r.file = file_;
    r.begin = {static_cast<uint32_t>(line), static_cast<uint32_t>(col) + 1};
    r.end = {r.begin.line, r.begin.col + 1};
    std::string message;
    auto* parser = dynamic_cast<antlr4::Parser*>(recognizer);
    if (!parser) {  // the lexer never errors (UNEXPECTED_CHAR catches all), but be safe
      diags_.error("E0001", r, antlr_message);
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
    diags_.error("E0001", r, message);
  }

 private:
  static constexpr int kMaxReported = 20;
  uint32_t file_;
  DiagnosticEngine& diags_;
  size_t last_line_ = 0;
  int reported_ = 0;
};

// ANTLR's parser and our transformer recurse once per nesting level and per operator, so
// pathological input (thousands of open parentheses) would exhaust the stack. Reject it
// before parsing, with a diagnostic at the place it happens.
bool check_nesting(antlr4::CommonTokenStream& tokens, uint32_t file, DiagnosticEngine& diags) {
  constexpr int kMaxDepth = 200;
  constexpr int kMaxRun = 2000;  // tokens in one expression-like run between keywords/braces
  int depth = 0, run = 0;
  for (antlr4::Token* t : tokens.getTokens()) {
    size_t type = t->getType();
    if (type == OrchLexer::LPAREN || type == OrchLexer::LBRACK || type == OrchLexer::LBRACE) ++depth;
    if (type == OrchLexer::RPAREN || type == OrchLexer::RBRACK || type == OrchLexer::RBRACE)
      depth = std::max(0, depth - 1);
    bool structural = type == OrchLexer::LBRACE || type == OrchLexer::RBRACE ||
                      (type >= OrchLexer::PIPELINE && type <= OrchLexer::REDUCE_SCATTER);
    run = structural ? 0 : run + 1;
    if (depth > kMaxDepth || run > kMaxRun) {
      SourceRange r;
      r.file = file;
      r.begin = {static_cast<uint32_t>(t->getLine()),
                 static_cast<uint32_t>(t->getCharPositionInLine()) + 1};
      r.end = {r.begin.line, r.begin.col + 1};
      diags.error("E0003", r,
                  depth > kMaxDepth ? "nesting is deeper than " + std::to_string(kMaxDepth) +
                                          " levels"
                                    : "expression is longer than " + std::to_string(kMaxRun) +
                                          " tokens");
      return false;
    }
  }
  return true;
}

}  // namespace

std::unique_ptr<ast::Module> parse_module(const SourceManager& sources, uint32_t file_id,
                                          DiagnosticEngine& diags) {
  const SourceFile& file = sources.file(file_id);
  antlr4::ANTLRInputStream input(file.text);
  input.name = file.path;
  OrchLexer lexer(&input);
  lexer.removeErrorListeners();
  antlr4::CommonTokenStream tokens(&lexer);
  tokens.fill();
  if (!check_nesting(tokens, file_id, diags)) {
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
  DiagnosticErrorListener listener(file_id, diags);
  if (!tree) {
    tokens.seek(0);
    parser.reset();
    parser.addErrorListener(&listener);
    parser.setErrorHandler(std::make_shared<antlr4::DefaultErrorStrategy>());
    parser.getInterpreter<antlr4::atn::ParserATNSimulator>()->setPredictionMode(
        antlr4::atn::PredictionMode::LL);
    tree = parser.file();
  }
  grammar::Transformer transformer(file_id, diags);
  auto module = transformer.module(tree);
  parser.removeErrorListeners();
  return module;
}

}  // namespace orch
