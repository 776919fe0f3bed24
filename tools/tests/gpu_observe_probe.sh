#!/usr/bin/env bash
# On a GPU machine, from the repository root of a staged checkout (scripts/stage-gpu): what
# CUPTI tells orch-run about graph nodes (ORCH_RUN_CUPTI_DEBUG=1 on fills, jacobi, two sibling
# ifs with nested ifs, and a one-rank allreduce), then the observe GPU tests. Everything they
# write goes to $OUT (default ./observe-out): probe.txt, observe.txt, and the logs, traces and
# SVGs in observe-files.tgz. The summary says, per log, how many records were found by exec
# index in both orders, in one order only (breadth-first or recursive: which one CUDA uses), or
# not at all; cupti-debug-nested.log is the one whose records tell the orders apart.
#
#   bash tools/tests/gpu_observe_probe.sh [BUILD_DIR]      # default build-gpu
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$(cd "${1:-$root/build-gpu}" && pwd)" || exit 2
out="${OUT:-$root/observe-out}"
mkdir -p "$out"
# As scripts/gpu-check sets them.
export ORCH_ORCHC="$build/compiler/orchc" ORCH_RUN="$build/tools/orch-run"
export ORCH_EXAMPLES_DIR="${ORCH_EXAMPLES_DIR:-$root/examples}" ORCH_TARGETS_DIR="$root/targets"
export ORCH_PIPELINES_DIR="$root/pipelines"
export LD_LIBRARY_PATH="$build/lib:${CUDA_HOME:-/usr/local/cuda}/lib64:${LD_LIBRARY_PATH:-}" NCCL_NVLS_ENABLE=0
if [ -z "${ORCH_NCCL_LIBRARY:-}" ] && ! ldconfig -p 2>/dev/null | grep -q 'libnccl\.so\.2 '; then
  nccl="$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)"
  [ -n "$nccl" ] && [ -f "$nccl" ] || nccl="$(find /usr /opt -name libnccl.so.2 2>/dev/null | head -1)"
  [ -n "$nccl" ] && export ORCH_NCCL_LIBRARY="$nccl"
fi
files="$(mktemp -d)"
export ORCH_TEST_OUT="$files"
tests="$build/tools/orch_tools_tests"
timeout -k 10 200 "$tests" --test-suite=gpu -tc='*as orch-run hears them*' >"$out/probe.txt" 2>&1
echo "probe: exit $? (reported, not asserted; the logs are in observe-files.tgz)"
timeout -k 10 360 "$tests" --test-suite=gpu -sf='*gpu_observe_test.cpp' -tce='*as orch-run hears them*' >"$out/observe.txt" 2>&1
rc=$?
echo "observe GPU tests: exit $rc"
tar czf "$out/observe-files.tgz" -C "$files" .
for log in "$files"/cupti-debug-*.log; do
  [ -f "$log" ] || continue
  echo "== $(basename "$log"): $(grep -c 'record: ' "$log") records, $(grep -c -- '-> not attributed' "$log") not attributed"
  grep -oE '\[exec index [0-9]+, (both orders|breadth-first order only|recursive order only)' "$log" |
    sed -E 's/\[exec index [0-9]+, //' | sort | uniq -c | sed 's/^/   found by exec index: /'
  grep -E -- '-> not attributed|ids after the launches' "$log" | head -12
  case "$log" in
    *nested*) grep -E 'exec numbering|   index |record: launch 1 ' "$log" | head -40 ;;
  esac
done
tail -c 5000 "$out/observe.txt"
exit $rc
