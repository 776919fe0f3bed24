/* A C program against the installed orch, built with pkg-config alone:
 *
 *   cc main.c $(pkg-config --cflags --libs orch) -o c_client
 *   ./c_client pipeline.bin
 *
 * It reads and verifies the artifact and prints its name (no GPU needed); with a GPU it loads
 * it, instantiates it (the params' defaults, every buffer allocated by orch) and launches it
 * once. Every failure is an orch_error value: printed, then destroyed, and the program exits 1;
 * without a CUDA device it says so and exits 0. liborch.so is the whole runtime: the program
 * links nothing else. */
#include <orch/orch.h>
#include <stdio.h>

/* Prints `error` ("where: message [code]") and destroys it; returns 1 when there was one. */
static int report(const char* what, orch_error* error) {
  if (!error) return 0;
  const char* where = orch_error_where(error);
  fprintf(stderr, "c_client: %s: %s%s%s [orch error %d]\n", what, where, *where ? ": " : "",
          orch_error_message(error), orch_error_code(error));
  orch_error_destroy(error);
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: c_client PIPELINE.bin\n");
    return 2;
  }
  orch_artifact* artifact = NULL;
  if (report("read", orch_artifact_read(argv[1], &artifact))) return 1;
  printf("pipeline %s\n", orch_artifact_name(artifact));
  orch_artifact_destroy(artifact);

  orch_pipeline* pipeline = NULL;
  orch_error* error = orch_pipeline_load(argv[1], &pipeline);
  if (orch_error_code(error) == ORCH_ERROR_NO_DEVICE) {
    printf("no CUDA device: %s\n", orch_error_message(error));
    orch_error_destroy(error);
    return 0;
  }
  if (report("load", error)) return 1;
  orch_bindings* bindings = orch_bindings_create();
  orch_executable* exec = NULL;
  int failed = report("instantiate", orch_instantiate(pipeline, bindings, 0, &exec));
  if (!failed) {
    failed = report("launch", orch_launch(exec, 0));
    if (!failed) printf("launched once\n");
  }
  orch_executable_destroy(exec); /* waits for the launch */
  orch_bindings_destroy(bindings);
  orch_pipeline_destroy(pipeline);
  return failed;
}
