// liborchc.so's only source: its contents come whole from static libraries
// (python/CMakeLists.txt), and a library needs at least one source file.
namespace {
[[maybe_unused]] int orch_python_exports_unused;
}
