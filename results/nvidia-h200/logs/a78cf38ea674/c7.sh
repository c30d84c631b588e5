#!/bin/bash
# bash results/nvidia-h200/logs/<commit>/c7.sh COMMIT CALL: sgemm's 2-D-grid variants in row bands: every variant at
# tall shapes past 65535 tile rows (checked before and after timing), then sgemm's GPU tests
. .whl/lib.sh "$1" "$2"
st build; python3 -m labkit.cli build > $L/build.log 2>&1; tail -1 $L/build.log
st tall
timeout 90 python3 -m labkit.cli bench sgemm -s 3000000x4x4 9000001x8x4 2100000x33x5 --offset 1 --mode hot --budget 0.02 \
  --no-kernel-time --in-process --json $L/tall.json > $L/tall.log 2>&1; echo "tall rc $?"
grep -E "^ +[a-z0-9_]+ .*(µs|ERROR|SKIPPED)" $L/tall.log | cut -c1-120
st gpu-tests
timeout 150 python3 -m pytest -m "gpu and not workers" -q -rs -p no:cacheprovider -n 8 tests/test_gpu.py tests/test_sgemm_tuned_gpu.py -k sgemm > $L/gpu-tests.log 2>&1; tail -2 $L/gpu-tests.log
st done
