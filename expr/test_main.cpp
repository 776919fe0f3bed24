// The one main() of orch_expr_tests (expr/ keeps its unit tests beside the code).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
