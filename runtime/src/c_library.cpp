// The only source of liborch.so (cmake/orch_c_library.cmake): its contents come whole from the
// static runtime, and a shared library needs at least one source file of its own.
namespace {
int orch_c_library_unused;
}
