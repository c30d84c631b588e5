#!/bin/bash
# bash results/nvidia-h200/logs/<commit>/c3.sh COMMIT CALL DEADLINE: memcheck and racecheck over their whole
# selections (last whole runs at 016dfc21147b; since then the row kernels' shared-memory opt-in and sgemm's row
# bands changed), then fuzz seed 24
. .whl/lib.sh "$1" "$2"
st build; python3 -m labkit.cli build > $L/build.log 2>&1; tail -1 $L/build.log
st sanitizers
timeout 400 python3 -m labkit.benchmarks.gpu_tests --logs $L/san --steps memcheck racecheck --budget-s 390 > $L/sanitizers.log 2>&1
tail -4 $L/sanitizers.log; cp results/$SLUG/tests.json $L/san/
for s in 24; do
  st fuzz-all $s
  timeout $(( $3 - (SECONDS - t0) - 5 )) python3 -m labkit.benchmarks.fuzz --seed $s --out $L/fuzz-all-$s.json > $L/fuzz-all-$s.log 2>&1; tail -1 $L/fuzz-all-$s.log
done
st done
