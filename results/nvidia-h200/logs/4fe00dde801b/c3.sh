#!/bin/bash
# bash results/nvidia-h200/logs/4fe00dde801b/c3.sh COMMIT CALL: the GPU tests (parallel step and timing step), kernel_time_cost at the sweep's budget
. .whl/lib.sh "$1" "$2"
python3 -c "import cryptography, dask_cuda; print('cryptography', cryptography.__version__)"
st build; python3 -m labkit.cli build > $L/build.log 2>&1; tail -1 $L/build.log
st gpu-tests
timeout 300 python3 -m labkit.benchmarks.gpu_tests --logs $L/gpu --steps timing tests > $L/gpu-tests.log 2>&1; tail -5 $L/gpu-tests.log; cp results/$SLUG/tests.json $L/gpu/
st kernel-time-cost
timeout $(( 580 - (SECONDS - t0) )) python3 -m labkit.benchmarks.kernel_time_cost --budget 1.0 --repeat 1 --out $L/kernel-time-cost-1s.json > $L/kernel-time-cost-1s.log 2>&1; tail -8 $L/kernel-time-cost-1s.log
st done
