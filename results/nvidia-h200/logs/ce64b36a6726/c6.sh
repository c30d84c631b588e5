#!/bin/bash
# bash results/nvidia-h200/logs/<commit>/c6.sh COMMIT CALL: after layer_norm's row atol moved to f32 statistics,
# the tests step's norm and fuzz tests, and the row-op fuzz at the seeds that found the K = 2 rows
. .whl/lib.sh "$1" "$2"
st build; python3 -m labkit.cli build > $L/build.log 2>&1; tail -1 $L/build.log
st gpu-tests
timeout 150 python3 -m labkit.benchmarks.gpu_tests --logs $L/gpu --steps tests --select "norm or fuzz" --budget-s 140 > $L/gpu-tests.log 2>&1; tail -3 $L/gpu-tests.log
for s in 11 12; do
  st fuzz $s
  timeout 40 python3 -m labkit.benchmarks.fuzz --seed $s --ops layer_norm,rms_norm --per-variant 300 --out $L/fuzz-norms-$s.json > $L/fuzz-norms-$s.log 2>&1; tail -1 $L/fuzz-norms-$s.log
done
st done
