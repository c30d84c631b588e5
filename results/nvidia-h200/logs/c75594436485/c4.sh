#!/bin/bash
# bash results/nvidia-h200/logs/<commit>/c4.sh COMMIT CALL DEADLINE: every variant at shapes past 2^31 elements
# (or bytes) and at extreme aspect ratios, with offsets: what a 32-bit index would break (hot, checked before and
# after timing); each case its own process, stopped at the deadline
. .whl/lib.sh "$1" "$2"
st build; python3 -m labkit.cli build > $L/build.log 2>&1; tail -1 $L/build.log
st huge
mkdir -p $L/huge
while read op shape off; do
  [ $(( SECONDS - t0 )) -gt $(( $3 - 60 )) ] && { echo "$op $shape: not run (deadline)"; continue; }
  timeout 90 python3 -m labkit.cli bench $op -s $shape --offset $off --mode hot --budget 0.02 --no-kernel-time --in-process \
    --json $L/huge/$op-$shape-$off.json > $L/huge/$op-$shape-$off.log 2>&1; echo "[$(( SECONDS - t0 )) s] $op $shape +$off rc $?"
  st huge
done <<'SHAPES'
softmax_rows 10000019x1 0
softmax_rows 3x131075 1
add 2x1073741827 1
reduce_sum 2147483659 3
dot 2147483653 1
relu 1x2147483651 2
copy 4294967311 5
layer_norm 2097152x1024 0
softmax_rows 33554433x64 1
softmax 2147483651 1
histogram 2147483651x7 1
sgemv 3x715827883 1
sgemm 1x50000x1 1
embedding 1000x2000000x1100 1
SHAPES
python3 - $L/huge > $L/huge.txt <<'PY'
import json, sys, glob, collections
c = collections.Counter(); bad = []
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    rows = json.load(open(f)); rows = rows.get("rows", rows) if isinstance(rows, dict) else rows
    for r in rows:
        c[r.get("status")] += 1
        if r.get("status") != "ok": bad.append((f.split("/")[-1], r.get("variant"), r.get("status"), r.get("error")))
print("huge shapes:", dict(c)); [print(" ", *b) for b in bad]
PY
cat $L/huge.txt
st done
