#!/bin/bash
# bash results/nvidia-h200/logs/<commit>/c2.sh COMMIT CALL DEADLINE: the GPU half (timing and tests steps) after
# layer_norm's per-row tolerance, then the fuzz at the seeds that found its K = 2 rows and two more
. .whl/lib.sh "$1" "$2"
st build; python3 -m labkit.cli build > $L/build.log 2>&1; tail -1 $L/build.log
st gpu-tests
timeout 330 python3 -m labkit.benchmarks.gpu_tests --logs $L/gpu --steps timing tests > $L/gpu-tests.log 2>&1; tail -5 $L/gpu-tests.log; cp results/$SLUG/tests.json $L/gpu/
for s in 11 12; do
  st fuzz $s
  timeout 60 python3 -m labkit.benchmarks.fuzz --seed $s --ops layer_norm,rms_norm,softmax_rows,softmax --per-variant 200 --out $L/fuzz-rows-$s.json > $L/fuzz-rows-$s.log 2>&1; tail -1 $L/fuzz-rows-$s.log
done
for s in 14 15; do
  st fuzz-all $s
  timeout $(( $3 - (SECONDS - t0) - 5 )) python3 -m labkit.benchmarks.fuzz --seed $s --out $L/fuzz-all-$s.json > $L/fuzz-all-$s.log 2>&1; tail -1 $L/fuzz-all-$s.log
done
st done
