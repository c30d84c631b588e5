#!/bin/bash
# bash results/nvidia-h200/logs/<commit>/c1.sh COMMIT CALL DEADLINE: the GPU half (tests and timing steps) at
# the commit the last session ended on, tuning axes and fallback paths at odd shapes, offsets and DRAM states
# never tuned on (each row checked before and after timing), and the probe logs/next/rows-tma.cu (bulk copies
# and persistent blocks for the long f16 rows)
. .whl/lib.sh "$1" "$2"
st build; python3 -m labkit.cli build > $L/build.log 2>&1; tail -1 $L/build.log
st rows-tma
nvcc -O3 -arch=sm_90 -std=c++17 results/nvidia-h200/logs/next/rows-tma.cu -o /tmp/rows-tma > $L/rows-tma.build.log 2>&1 \
  && timeout 120 /tmp/rows-tma > $L/rows-tma.log 2>&1; echo "rows-tma rc $?"; cat $L/rows-tma.log
st gpu-tests
timeout 340 python3 -m labkit.benchmarks.gpu_tests --logs $L/gpu --steps tests timing --budget-s 330 > $L/gpu-tests.log 2>&1
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
layer_norm 1001x16392 3 -d f16 --axis floats=8,32 --axis threads=128,1024 --mode cold rotating
layer_norm 3x65544 0 -d f16 --mode rotating --in-process
layer_norm 5x131080 1 --mode hot --in-process
rms_norm 7x200003 2 --mode cold --in-process
rms_norm 2049x24577 0 -d f32 --axis floats=8,16 --axis threads=256,512 --mode rotating --in-process
softmax_rows 4097x12000 5 -d bf16 --axis floats=8,16 --axis threads=128 --mode cold-dirty --in-process
softmax_rows 3x262144 0 --mode hot --in-process
softmax_rows 65537x24 2 --mode rotating --in-process
histogram 10000019x60000 1 --axis smem_kb=32,192 --mode cold --in-process
histogram 16777219x12289 3 --axis unroll=8 --mode rotating --in-process
histogram 5000011x1 0 --mode hot --in-process
add 268435461 5 -d f16 --axis block=64,1024 --mode rotating --in-process
dot 134217731 3 --axis unroll=1,4 --mode cold --in-process
reduce_sum 134217735 7 -d bf16 --axis unroll=2,8 --mode cold-dirty --in-process
sgemm 1000x999x17 1 -v tuned --axis bm=64 --axis bn=64 --axis wm=32 --axis wn=32 --axis tm=4 --axis tn=8 --mode cold --in-process
sgemm 4097x33x4099 0 -v tuned --axis stages=2,5 --axis group=1,16 --mode hot --in-process
embedding 100003x4097x3 2 --mode cold --in-process
embedding 7x1x65536 0 --mode hot --in-process
sgemv 1x16777217 1 --mode cold --in-process
sgemv 16777217x1 0 --mode rotating --in-process
copy 1073741825 9 --mode rotating --in-process
copy_gs 100000007 3 --mode cold-dirty
softmax 2147483647 0 -v f32x4 --mode hot --in-process
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
st done
