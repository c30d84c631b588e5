#!/bin/bash
# bash results/nvidia-h200/logs/<commit>/c3.sh COMMIT CALL DEADLINE: after the row kernels opt in to shared
# memory from 47 KiB: the GPU half's tests step, memcheck and racecheck on the rows at the smem plan's edges,
# the row ops at the shapes that failed to launch and their neighbours, the fuzz (now drawing 3 * 2^k) at seeds 21, 22
. .whl/lib.sh "$1" "$2"
st build; python3 -m labkit.cli build > $L/build.log 2>&1; tail -1 $L/build.log
st gpu-tests
timeout 200 python3 -m labkit.benchmarks.gpu_tests --logs $L/gpu --steps tests > $L/gpu-tests.log 2>&1; tail -3 $L/gpu-tests.log; cp results/$SLUG/tests.json $L/gpu/
st sanitizers
timeout 150 python3 -m labkit.benchmarks.gpu_tests --logs $L/san --steps memcheck racecheck --select "24576 or 16384 or 32768" > $L/sanitizers.log 2>&1; tail -4 $L/sanitizers.log; cp results/$SLUG/tests.json $L/san/
st unseen
mkdir -p $L/unseen
for op in softmax_rows layer_norm rms_norm; do
  for sh in 1999x24576 1000x24520 3x24568 777x24584; do
    timeout 60 python3 -m labkit.cli bench $op -s $sh --mode hot --budget 0.05 --no-kernel-time --in-process \
      --json $L/unseen/$op-$sh.json > $L/unseen/$op-$sh.log 2>&1; echo "$op $sh rc $?"
  done
done
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
