#!/bin/bash
# bash results/nvidia-h200/logs/<commit>/c2.sh COMMIT CALL DEADLINE: after the row plan's smem range moved into
# lk_plan_row and the harness subject's tolerance is computed once: the GPU half's tests step, test_reconcile_gpu,
# every variant at large odd shapes and offsets never tuned on (hot, checked before and after timing), the fuzz
# at two unseen seeds
. .whl/lib.sh "$1" "$2"
st build; python3 -m labkit.cli build > $L/build.log 2>&1; tail -1 $L/build.log
st gpu-tests
timeout 200 python3 -m labkit.benchmarks.gpu_tests --logs $L/gpu --steps tests > $L/gpu-tests.log 2>&1; tail -3 $L/gpu-tests.log; cp results/$SLUG/tests.json $L/gpu/
st reconcile-test
timeout 100 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_reconcile_gpu.py > $L/reconcile-test.log 2>&1; tail -1 $L/reconcile-test.log
st unseen
mkdir -p $L/unseen
while read op shape off; do
  timeout 60 python3 -m labkit.cli bench $op -s $shape --offset $off --mode hot --budget 0.05 --no-kernel-time --in-process \
    --json $L/unseen/$op-$shape-$off.json > $L/unseen/$op-$shape-$off.log 2>&1; echo "$op $shape +$off rc $?"
done <<'SHAPES'
add 3001x5003 3
add 7x1234567 1
relu 1999x4099 5
sigmoid 33x3000017 2
copy 1000000007 7
copy_gs 33554435 1
dot 50000017 3
reduce_sum 67108869 1
softmax 16777223 5
softmax_rows 2000x50001 1
softmax_rows 1999x24576 0
layer_norm 3333x12289 2
layer_norm 1025x16384 0
rms_norm 777x65537 3
histogram 30000001x5000 2
embedding 30011x1777x1003 1
sgemm 2500x6001x1793 1
sgemv 7777x12345 3
SHAPES
python3 - $L/unseen > $L/unseen.txt <<'PY'
import json, sys, glob, collections
c = collections.Counter(); bad = []
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    rows = json.load(open(f)); rows = rows.get("rows", rows) if isinstance(rows, dict) else rows
    for r in rows:
        c[r.get("status")] += 1
        if r.get("status") not in ("ok", "skipped"): bad.append((f.split("/")[-1], r.get("variant"), r.get("status"), r.get("error")))
print("unseen shapes:", dict(c)); [print(" ", *b) for b in bad]
PY
cat $L/unseen.txt
for s in 21 22; do
  st fuzz-all $s
  timeout $(( $3 - (SECONDS - t0) - 5 )) python3 -m labkit.benchmarks.fuzz --seed $s --out $L/fuzz-all-$s.json > $L/fuzz-all-$s.log 2>&1; tail -1 $L/fuzz-all-$s.log
done
st done
