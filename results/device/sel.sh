#!/bin/bash
# bash .whl/sel.sh COMMIT CALL "-k expr": the GPU tests step whole, memcheck and racecheck on the tests matching expr,
# and test_reconcile_gpu (cuda-bench carried)
. .whl/lib.sh "$1" "$2"
st build; python3 -m labkit.cli build > $L/build.log 2>&1; tail -1 $L/build.log
st gpu-tests
timeout 200 python3 -m labkit.benchmarks.gpu_tests --logs $L/gpu --steps tests > $L/gpu-tests.log 2>&1; tail -3 $L/gpu-tests.log
st sanitizers
timeout 240 python3 -m labkit.benchmarks.gpu_tests --logs $L/san --steps memcheck racecheck --select "$3" > $L/sanitizers.log 2>&1; tail -4 $L/sanitizers.log; cp results/$SLUG/tests.json $L/
st reconcile-test
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_reconcile_gpu.py > $L/reconcile-test.log 2>&1; tail -2 $L/reconcile-test.log
st done
