#!/bin/bash
# bash results/nvidia-h200/logs/<commit>/c3.sh COMMIT CALL: labs 04 and 07 top to bottom live and the explorer's
# latency (explorer-latency.json, each lab's text in labs-live/), then the Nsight summary (record's stage)
. .whl/lib.sh "$1" "$2"
st build; python3 -m labkit.cli build > $L/build.log 2>&1; tail -1 $L/build.log
st explorer-latency
( time timeout 300 python3 -m labkit.benchmarks.explorer_latency --labs '0[47]*' --executed $L/labs-live \
    --out results/$SLUG/explorer-latency.json ) > $L/explorer-latency.log 2>&1; grep -v WARNING $L/explorer-latency.log | head -4 | cut -c1-300
st nsight-summary
timeout 200 python3 -m labkit.benchmarks.record --deadline 190 --logs $L --only nsight-summary --pack $OUT/record.tgz > $L/record.log 2>&1; tail -2 $L/record.log
git status --porcelain --untracked-files=all results | awk '{print $2}' | tar czf $OUT/results.tgz -T - 2>/dev/null
st done
