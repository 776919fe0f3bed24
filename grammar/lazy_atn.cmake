# Makes the generated lexer and parser deserialize their ATN when the first one is constructed
# rather than at program start (ANTLR 4.7-4.9's C++ target does it in a static initializer,
# about 5 million instructions that every orchc process paid, even one that never parses: a
# compile the artifact cache answers, --help). The constructor gets a function-local static of
# the same Initializer (thread-safe, once), and the namespace-scope one is removed. Code from
# newer ANTLR, which initializes lazily itself, does not match and is left as it is.
#   cmake -DDIR=<generated folder> -P lazy_atn.cmake
foreach(name OrchLexer OrchParser)
  set(file "${DIR}/${name}.cpp")
  file(READ "${file}" code)
  set(static_init "${name}::Initializer ${name}::_init;")
  if(name STREQUAL "OrchLexer")
    set(ctor "${name}::${name}(CharStream *input) : Lexer(input) {\n")
  else()
    set(ctor "${name}::${name}(TokenStream *input) : Parser(input) {\n")
  endif()
  string(FIND "${code}" "${static_init}" at_init)
  string(FIND "${code}" "${ctor}" at_ctor)
  if(at_init EQUAL -1 OR at_ctor EQUAL -1)
    message(STATUS "lazy_atn: ${name}.cpp does not initialize statically as ANTLR 4.9 does; left as generated")
    continue()
  endif()
  string(REPLACE "${static_init}" "// ${static_init} (made lazy: grammar/lazy_atn.cmake)" code "${code}")
  string(REPLACE "${ctor}" "${ctor}  static Initializer init_once;  // the ATN, on first use (grammar/lazy_atn.cmake)\n  (void)init_once;\n"
         code "${code}")
  file(WRITE "${file}" "${code}")
endforeach()
