// The one main() of orch_lowering_tests (lowering/ keeps its tests apart from tests/).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
