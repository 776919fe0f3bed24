// The one main() of orch_artifact_tests (artifact/ keeps its tests apart from tests/).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
