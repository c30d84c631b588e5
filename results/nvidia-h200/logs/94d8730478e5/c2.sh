#!/bin/bash
# bash results/nvidia-h200/logs/<commit>/c2.sh COMMIT CALL DEADLINE: the GPU half's timing step alone (at
# 94d8730478e5 it shared a 330 s budget with the tests step and was cut off at 200 s, where it needs ~180 s),
# then the unseen shapes call 1 had no time for (tuning axes, fallbacks, DRAM states, offsets), and fuzz seed 23
. .whl/lib.sh "$1" "$2"
st build; python3 -m labkit.cli build > $L/build.log 2>&1; tail -1 $L/build.log
st gpu-tests
timeout 340 python3 -m labkit.benchmarks.gpu_tests --logs $L/gpu --steps timing --budget-s 330 > $L/gpu-tests.log 2>&1
tail -4 $L/gpu-tests.log; cp results/$SLUG/tests.json $L/gpu/
st unseen
mkdir -p $L/unseen
n=0
while read op shape off rest; do
  n=$((n + 1))
  left=$(( $3 - (SECONDS - t0) - 15 )); [ $left -gt 20 ] || { echo "$n: no time left"; continue; }
  timeout $(( left < 90 ? left : 90 )) python3 -m labkit.cli bench $op -s $shape --offset $off --budget 0.05 --no-kernel-time $rest \
    --json $L/unseen/$n-$op.json > $L/unseen/$n-$op.log 2>&1 < /dev/null; echo "$n $op $shape +$off $rest: rc $?"
done <<'SHAPES'
add 16385x16387 5 -d f16 --axis block=64,1024 --mode rotating --in-process
sgemm 1000x999x17 1 -v tuned --axis bm=64 --axis bn=64 --axis wm=32 --axis wn=32 --axis tm=4 --axis tn=8 --mode cold --in-process
sgemm 4097x33x4099 0 -v tuned --axis stages=2,5 --axis group=1,16 --mode hot --in-process
embedding 100003x4097x3 2 --mode cold --in-process
embedding 7x1x65536 0 --mode hot --in-process
sgemv 1x16777217 1 --mode cold --in-process
sgemv 16777217x1 0 --mode rotating --in-process
copy 1073741825 9 --mode rotating --in-process
copy_gs 100000007 3 --mode cold-dirty
softmax 2147483647 0 -v f32x4 --mode hot --in-process
softmax_rows 3001x7777 1 -d f32 --mode cold
layer_norm 65537x1000 0 -d f16 --mode cold-dirty
histogram 33554433x4096 2 --mode cold
SHAPES
python3 - $L/unseen > $L/unseen.txt <<'PY'
import json, sys, glob, collections
c = collections.Counter(); bad = []
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    rows = json.load(open(f)); rows = rows.get("rows", rows) if isinstance(rows, dict) else rows
    for r in rows:
        c[r.get("status")] += 1
        if r.get("status") not in ("ok", "skipped"): bad.append((f.split("/")[-1], r.get("variant"), r.get("mode"), r.get("status"), r.get("error")))
print("unseen shapes:", dict(c)); [print(" ", *b) for b in bad]
PY
cat $L/unseen.txt
for s in 23; do
  st fuzz-all $s
  timeout $(( $3 - (SECONDS - t0) - 5 )) python3 -m labkit.benchmarks.fuzz --seed $s --out $L/fuzz-all-$s.json > $L/fuzz-all-$s.log 2>&1; tail -1 $L/fuzz-all-$s.log
done
st done
