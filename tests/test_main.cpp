// The one main() of orch_tests; every *_test.cpp adds its test cases to this executable.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
