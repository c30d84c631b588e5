#!/bin/bash
# bash results/nvidia-h200/logs/<commit>/c6.sh COMMIT CALL DEADLINE: every variant in the DRAM states (cold,
# cold-dirty, rotating) with kernel time (CUPTI) at odd shapes and offsets never tuned on, checked before and after
. .whl/lib.sh "$1" "$2"
st build; python3 -m labkit.cli build > $L/build.log 2>&1; tail -1 $L/build.log
st modes
mkdir -p $L/modes
while read op shape off; do
  [ $(( SECONDS - t0 )) -gt $(( $3 - 45 )) ] && { echo "$op $shape: not run (deadline)"; continue; }
  timeout 60 python3 -m labkit.cli bench $op -s $shape --offset $off --mode cold cold-dirty rotating --budget 0.03 --in-process \
    --json $L/modes/$op-$shape-$off.json > $L/modes/$op-$shape-$off.log 2>&1; echo "[$(( SECONDS - t0 )) s] $op $shape +$off rc $?"
  st modes
done <<'SHAPES'
add 4097x4095 7
layer_norm 3001x7001 3
softmax_rows 1000x24576 0
rms_norm 4099x2056 2
reduce_sum 33554433 5
histogram 9999991x4097 1
embedding 50021x4097x777 2
sgemm 1023x1025x513 1
SHAPES
python3 - $L/modes > $L/modes.txt <<'PY'
import json, sys, glob, collections
c = collections.Counter(); bad = []; over = []
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    rows = json.load(open(f)); rows = rows.get("rows", rows) if isinstance(rows, dict) else rows
    for r in rows:
        c[r.get("status")] += 1
        if r.get("status") != "ok": bad.append((f.split("/")[-1], r.get("variant"), r.get("mode"), r.get("status"), r.get("error")))
        elif r.get("kernel_us") is not None and r.get("mode") in ("cold", "cold-dirty") and r["kernel_us"] > r["time_us"] * 1.001:
            over.append((r["op"], r["variant"], r["mode"], r["kernel_us"], r["time_us"]))
print("modes:", dict(c), "| kernel_us > time_us, cold or cold-dirty:", len(over)); [print(" ", *b) for b in bad + over]
PY
cat $L/modes.txt
st done
