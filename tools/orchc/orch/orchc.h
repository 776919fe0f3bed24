/* orchc as a C API, for language bindings (python/ uses it through ctypes): check a pipeline, or
 * check and compile it to the bytes of pipeline.bin, and get the diagnostics as orchc prints them
 * (text) and as orchc --diagnostics-format=json prints them. The same code as the orchc program:
 * compiler/ checks, lowering/ compiles the kernels with NVRTC and nvJitLink and writes the
 * artifact. Needs no GPU.
 *
 *   orch_compile_options o = {0};
 *   o.path = "saxpy.orch";                      // read from disk (or give `source` too)
 *   char *bytes, *json, *text;
 *   size_t size;
 *   int rc = orch_compile(&o, &bytes, &size, &json, &text);   // 0, 1 or 2, as orchc exits
 *   if (rc != 0) fputs(text, stderr);
 *   orch_compile_free(bytes); orch_compile_free(json); orch_compile_free(text);
 *
 * Nothing is thrown or aborted; a NULL `options` or `options->path` is a usage error (2). Every
 * `out` that is not NULL is always set (to NULL, 0 or "" when there is nothing). Safe to call from
 * several threads at once (each call has its own state; the kernel cache is shared safely). */
#ifndef ORCH_ORCHC_H
#define ORCH_ORCHC_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct orch_compile_options {
  /* The file to read; with `source`, the name diagnostics show and the folder that
   * `from "file.cu"` is found in. Required. */
  const char* path;
  /* The pipeline's text (source_size bytes), or NULL to read `path`. */
  const char* source;
  size_t source_size;
  /* orchc --target: a profile name ("sm_90") or a .yaml path; NULL or "": the file's `target`. */
  const char* target;
  /* orchc --targets-dir; NULL or "": $ORCH_TARGETS_DIR, then the folders built in. */
  const char* targets_dir;
  /* orchc --arch, comma-separated ("sm_80,sm_90"); NULL or "": from the targets. */
  const char* archs;
  /* The kernel cache: NULL for the default ($ORCH_CACHE_DIR, else ~/.cache/orch/kernels); ""
   * for none (orchc --no-cache). */
  const char* cache_dir;
  /* orchc -j: kernel compile threads; 0 for all cores. */
  unsigned jobs;
  /* orchc --no-pdl: non-zero for no programmatic (PDL) edges. */
  int no_pdl;
  /* orchc --unroll: copies of a `while` body per WHILE iteration (1: none); 0 for the compiler's
   * choice. At most 64. */
  unsigned unroll;
  /* orchc --profile: a profile orch-run --profile wrote (docs/observe.md, "--profile"), which
   * the speed passes decide from; NULL for none. One that cannot be read is the compile's error
   * (E0004-E0006); another pipeline's or GPU's is ignored with warning W0006. */
  const char* profile;
  /* orchc --no-memory-plan: non-zero for every buffer allocated alone (no arena). */
  int no_memory_plan;
} orch_compile_options;

/* orchc -o: returns 0 (compiled; *artifact holds *artifact_size bytes), 1 (the pipeline has
 * errors: see the diagnostics) or 2 (a usage or internal error: *diagnostics_text says which, in
 * one line). *diagnostics_json is {"diagnostics": [...]} as orchc --diagnostics-format=json
 * prints it; *diagnostics_text is what orchc prints on stderr (without color). Warnings may come
 * with 0. Free each output with orch_compile_free. */
int orch_compile(const orch_compile_options* options, char** artifact, size_t* artifact_size, char** diagnostics_json,
                 char** diagnostics_text);

/* orchc --check: the same without compiling kernels (no NVRTC needed); 0, 1 or 2. */
int orch_check(const orch_compile_options* options, char** diagnostics_json, char** diagnostics_text);

/* Frees an output of the calls above; NULL is accepted. */
void orch_compile_free(void* p);

#ifdef __cplusplus
}
#endif

#endif /* ORCH_ORCHC_H */
