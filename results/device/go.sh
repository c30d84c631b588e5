#!/bin/bash
# bash .whl/go.sh COMMIT DEADLINE CALL "stages": labkit.benchmarks.record's stages, logs and changed results under $OUT
. .whl/lib.sh "$1" "$3"
timeout $(( $2 + 20 )) python3 -m labkit.benchmarks.record --deadline $2 --logs $L --only $4 --pack $OUT/record.tgz
git status --porcelain --untracked-files=all results | awk '{print $2}' | tar czf $OUT/results.tgz -T - 2>/dev/null
pack
