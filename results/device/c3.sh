#!/bin/bash
# bash .whl/c3.sh COMMIT CALL: the GPU tests (parallel step and timing step), kernel_time_cost at the sweep's budget
source .whl/env.sh
python3 -c "import cryptography, dask_cuda; print('cryptography', cryptography.__version__)"
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1 || echo "pip -e failed" >&2
export LABKIT_COMMIT=$1
L=/tmp/L/$1/call$2; rm -rf /tmp/L; mkdir -p $L
pack() { tar czf $OUT/call.tgz -C /tmp/L . ; }
nvidia-smi > $L/gpu.txt 2>&1
t0=$SECONDS; st() { pack; echo "[$((SECONDS - t0)) s] $*"; }
st build; python3 -m labkit.cli build > $L/build.log 2>&1; tail -1 $L/build.log
st gpu-tests
timeout 300 python3 -m labkit.benchmarks.gpu_tests --logs $L/gpu --steps timing tests > $L/gpu-tests.log 2>&1; tail -5 $L/gpu-tests.log; cp results/nvidia-h200/tests.json $L/gpu/
st kernel-time-cost
timeout $(( 580 - (SECONDS - t0) )) python3 -m labkit.benchmarks.kernel_time_cost --budget 1.0 --repeat 1 --out $L/kernel-time-cost-1s.json > $L/kernel-time-cost-1s.log 2>&1; tail -8 $L/kernel-time-cost-1s.log
st done
