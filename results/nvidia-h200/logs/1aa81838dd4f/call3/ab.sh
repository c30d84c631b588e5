#!/bin/bash
# bash results/nvidia-h200/logs/1aa81838dd4f/call3/ab.sh COMMIT CALL: the row plan change (plan64.diff) A/B/A/B on the shipped
# row ops, then the GPU half at B: tests step whole, memcheck + racecheck on the row ops, test_reconcile_gpu
. .whl/lib.sh "$1" "$2"
N=$(dirname "$0")
bench() {  # $1: A or B, $2: round
  python3 -m labkit.cli build > $L/build-$1$2.log 2>&1; tail -1 $L/build-$1$2.log
  for op in layer_norm rms_norm softmax_rows; do
    timeout 100 python3 -m labkit.cli bench $op -v f16x8 -d f16 -s 16384x4096 65536x4096 8192x8192 4096x16384 \
      --mode cold rotating --budget 0.2 --in-process --json $L/$op-$1$2.json > $L/$op-$1$2.log 2>&1
    echo "== $op $1$2"; grep -E "f16x8|rror" $L/$op-$1$2.log | cut -c1-110
  done
}
st A1; patch -R -p1 < $N/plan64.diff > /dev/null && bench A 1
st B1; patch -p1 < $N/plan64.diff > /dev/null && bench B 1
st A2; patch -R -p1 < $N/plan64.diff > /dev/null && bench A 2
st B2; patch -p1 < $N/plan64.diff > /dev/null && bench B 2
st gpu-tests
timeout 200 python3 -m labkit.benchmarks.gpu_tests --logs $L/gpu --steps tests > $L/gpu-tests.log 2>&1; tail -3 $L/gpu-tests.log
st sanitizers
timeout 180 python3 -m labkit.benchmarks.gpu_tests --logs $L/san --steps memcheck racecheck --select "norm or softmax" > $L/sanitizers.log 2>&1; tail -4 $L/sanitizers.log; cp results/$SLUG/tests.json $L/
st reconcile-test
timeout 100 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_reconcile_gpu.py > $L/reconcile-test.log 2>&1; tail -2 $L/reconcile-test.log
st done
