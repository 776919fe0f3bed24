# cmake -DORCH_RUN=... -DPIPELINE=saxpy.bin -P orch_run_no_device.cmake
# Runs orch-run as a user would. Without a CUDA device it must print exactly one line on
# stderr, "orch-run: no CUDA device: <why>", nothing on stdout, and exit 1. With a device the
# run must succeed; the test then reports itself skipped (the GPU tests cover that machine).
execute_process(
  COMMAND ${ORCH_RUN} ${PIPELINE} --param n=4096 --fill x=random --fill y=0.5 --repeat 3 --warmup 1
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("exit ${rc}\nstdout:\n${out}stderr:\n${err}")
if(err MATCHES "no CUDA device")
  if(NOT rc EQUAL 1)
    message(FATAL_ERROR "expected exit code 1 without a CUDA device, got ${rc}")
  endif()
  if(NOT err MATCHES "^orch-run: no CUDA device: [^\n]+\n$")
    message(FATAL_ERROR "expected one line 'orch-run: no CUDA device: ...' on stderr")
  endif()
  if(NOT out STREQUAL "")
    message(FATAL_ERROR "expected nothing on stdout without a CUDA device")
  endif()
  message("ok: the clean no-device error")
elseif(rc EQUAL 0 AND out MATCHES "per launch \\(CUDA events\\): median")
  message("orch-run-test: skipped: this machine has a CUDA device and the run succeeded")
else()
  message(FATAL_ERROR "orch-run failed with something other than the no-device error")
endif()
