#!/bin/bash
# bash results/nvidia-h200/logs/<commit>/c1.sh COMMIT CALL DEADLINE: the zoo and floors re-recorded at COMMIT
# (record's stages), then the fuzz at unseen seeds for the row ops of the new row plan and every op
. .whl/lib.sh "$1" "$2"
st record
timeout $(( $3 - 120 )) python3 -m labkit.benchmarks.record --deadline $(( $3 - 140 )) --logs $L --only build zoo floors --pack $OUT/record.tgz > $L/record.log 2>&1; tail -4 $L/record.log
git status --porcelain --untracked-files=all results | awk '{print $2}' | tar czf $OUT/results.tgz -T - 2>/dev/null
for s in 11 12; do
  st fuzz $s
  timeout $(( $3 - (SECONDS - t0) - 10 )) python3 -m labkit.benchmarks.fuzz --seed $s --ops layer_norm,rms_norm,softmax_rows,softmax --per-variant 200 --out $L/fuzz-rows-$s.json > $L/fuzz-rows-$s.log 2>&1; tail -3 $L/fuzz-rows-$s.log
done
st fuzz-all
timeout $(( $3 - (SECONDS - t0) - 5 )) python3 -m labkit.benchmarks.fuzz --seed 13 --out $L/fuzz-all-13.json > $L/fuzz-all-13.log 2>&1; tail -3 $L/fuzz-all-13.log
st done
