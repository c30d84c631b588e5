#!/bin/bash
# bash results/nvidia-h200/logs/c4698cfb989b/call2/call.sh COMMIT CALL: issue 25's row-structure probe and the shipped row ops at
# its sizes, then the GPU half after d8354da (softmax launcher): tests step whole, memcheck + racecheck on softmax,
# test_reconcile_gpu
. .whl/lib.sh "$1" "$2"
N=results/nvidia-h200/logs/next
st build; python3 -m labkit.cli build > $L/build.log 2>&1; tail -1 $L/build.log
st rows-copy
nvcc -O3 -arch=sm_90 -std=c++17 $N/rows-copy.cu -o /tmp/rows-copy > $L/rows-copy.log 2>&1
timeout 120 /tmp/rows-copy >> $L/rows-copy.log 2>&1; echo "rc $?" >> $L/rows-copy.log; cat $L/rows-copy.log | grep -v Remark
st rows-shipped
for op in layer_norm softmax_rows; do
  timeout 100 python3 -m labkit.cli bench $op -v f16x8 -d f16 -s 65536x1024 262144x1024 16384x4096 65536x4096 4096x16384 16384x16384 \
    --mode rotating --budget 0.2 --in-process > $L/rows-$op.log 2>&1; grep -E "f16x8|error|Error" $L/rows-$op.log | head -12
done
st gpu-tests
timeout 200 python3 -m labkit.benchmarks.gpu_tests --logs $L/gpu --steps tests > $L/gpu-tests.log 2>&1; tail -3 $L/gpu-tests.log
st sanitizers
timeout 200 python3 -m labkit.benchmarks.gpu_tests --logs $L/san --steps memcheck racecheck --select softmax > $L/sanitizers.log 2>&1; tail -4 $L/sanitizers.log; cp results/$SLUG/tests.json $L/
st reconcile-test
timeout 100 python3 -m pytest -q -p no:cacheprovider tests/test_reconcile_gpu.py > $L/reconcile-test.log 2>&1; tail -2 $L/reconcile-test.log
st done
