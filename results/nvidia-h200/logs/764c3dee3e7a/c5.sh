#!/bin/bash
# bash results/nvidia-h200/logs/<commit>/c5.sh COMMIT CALL: after the fixes c4 found: the shapes again (add at 2^31+6
# values: f32 after the 16-bit sets; softmax at 2^31+3 values), a bench killed by `timeout` (SIGTERM) keeps its rows,
# and the GPU tests of bad inputs and the softmax ops
. .whl/lib.sh "$1" "$2"
st build; python3 -m labkit.cli build > $L/build.log 2>&1; tail -1 $L/build.log
st huge
mkdir -p $L/huge
for c in "add 2x1073741827 1" "softmax 2147483651 1"; do
  set -- $c
  timeout 150 python3 -m labkit.cli bench $1 -s $2 --offset $3 --mode hot --budget 0.02 --no-kernel-time --in-process \
    --json $L/huge/$1-$2-$3.json > $L/huge/$1-$2-$3.log 2>&1; echo "[$(( SECONDS - t0 )) s] $1 $2 +$3 rc $?"
  grep -E "^ +[a-z0-9_]+ .*(µs|ERROR|SKIPPED)" $L/huge/$1-$2-$3.log | cut -c1-150
done
st sigterm
timeout -s TERM 30 python3 -m labkit.cli bench sgemv -s 3x715827883 --offset 1 --mode hot --budget 0.02 --no-kernel-time \
  --in-process --json $L/sigterm.json > $L/sigterm.log 2>&1; echo "sigterm: rc $?"; tail -c 400 $L/sigterm.log
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); r=r.get('rows', r) if isinstance(r, dict) else r; print('rows kept:', [(x['variant'], x['status']) for x in r])" $L/sigterm.json
st gpu-tests
timeout 200 python3 -m pytest -m "gpu and not workers" -q -rs -p no:cacheprovider -n 8 tests/test_bad_inputs_gpu.py tests/test_gpu.py -k "bad or softmax" > $L/gpu-tests.log 2>&1; tail -2 $L/gpu-tests.log
st done
