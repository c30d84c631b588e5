#!/bin/bash
# bash results/nvidia-h200/logs/152fa4709bd7/next2.sh COMMIT: issue 25's reduce-finish probe, issue 22's CUPTI-phase cost with CUPTI_GRAPHS=1
. .whl/lib.sh "$1" "${2:-1}"
st build; python3 -m labkit.cli build > $L/build.log 2>&1; tail -1 $L/build.log
st reduce-finish
nvcc -O3 -arch=sm_90 -std=c++17 -I kernels results/nvidia-h200/logs/next/reduce-finish.cu -o /tmp/rf > $L/reduce-finish.log 2>&1
for p in 24 25 26; do timeout 60 /tmp/rf $p >> $L/reduce-finish.log 2>&1; done; cat $L/reduce-finish.log
st kineto-in-phase
( cd results/nvidia-h200/logs/134ce6a71b89 && PYTHONPATH=$OLDPWD:$PYTHONPATH timeout 60 python3 kineto-in-phase.py ) > $L/kineto-in-phase.log 2>&1; tail -12 $L/kineto-in-phase.log
( cd results/nvidia-h200/logs/134ce6a71b89 && PYTHONPATH=$OLDPWD:$PYTHONPATH timeout 60 python3 kineto-in-phase.py nocorr ) > $L/kineto-in-phase-nocorr.log 2>&1; tail -12 $L/kineto-in-phase-nocorr.log
st kernel-time-cost
timeout 150 python3 -m labkit.benchmarks.kernel_time_cost --budget 0.1 --repeat 2 --out $L/kernel-time-cost.json > $L/kernel-time-cost.log 2>&1; tail -15 $L/kernel-time-cost.log
st timing-tests
timeout 200 python3 -m labkit.benchmarks.gpu_tests --logs $L/gpu --steps timing > $L/gpu-timing.log 2>&1; tail -5 $L/gpu-timing.log; cp results/$SLUG/tests.json $L/gpu/
st reconcile
LABKIT_RESULTS=/tmp/res timeout $(( 580 - (SECONDS - t0) )) python3 -m labkit.benchmarks.reconcile --skip nvbench triton > $L/reconcile.log 2>&1; tail -30 $L/reconcile.log; cp /tmp/res/*/reconcile.json $L/
st done
