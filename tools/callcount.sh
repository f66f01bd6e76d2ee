#!/usr/bin/env bash
# Instructions per call of the Go side of one op from Python: callgrind's
# count for the capi call benchmarks (lucid_op and the release of one
# minimum on 1 and 1,000 float32 elements, and lending one NumPy buffer),
# as the difference of two run lengths, so start-up cancels. Wall-clock
# benchmarks of a sub-microsecond call move by tens of percent on a shared
# machine; this count does not.
# (Go's preemption signals are off: callgrind has aborted on one.)
# Needs valgrind. Usage: tools/callcount.sh [benchmark names without "Benchmark"]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(mktemp)
trap 'rm -f "$bin" "$bin".cg' EXIT
GOEXPERIMENT=${GOEXPERIMENT:-simd} go test -c -o "$bin" ./capi
count() { # Ir of benchmark $1 run $2 times
  GOMAXPROCS=1 GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind --callgrind-out-file="$bin".cg "$bin" -test.run x \
    -test.bench "^Benchmark$1\$" -test.benchtime "$2"x 2>&1 | awk '/Collected/ {print $4}'
}
for b in "${@:-CallMinimum1 CallMinimum1000 Borrow1}"; do
  for name in $b; do
    lo=$(count "$name" 10000)
    hi=$(count "$name" 30000)
    echo "$name: $(( (hi - lo) / 20000 )) instructions per call"
  done
done
