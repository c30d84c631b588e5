#!/bin/bash
# bash .whl/go.sh COMMIT DEADLINE CALL "stages": labkit.benchmarks.record's stages, logs and changed results under $OUT
source .whl/env.sh
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1 || echo "pip -e failed" >&2
export LABKIT_COMMIT=$1
L=/tmp/L/$1/call$3; rm -rf /tmp/L; mkdir -p $L
nvidia-smi > $L/gpu.txt 2>&1
timeout $(( $2 + 20 )) python3 -m labkit.benchmarks.record --deadline $2 --logs $L --only $4 --pack $OUT/record.tgz
git status --porcelain --untracked-files=all results | awk '{print $2}' | tar czf $OUT/results.tgz -T - 2>/dev/null
tar czf $OUT/call.tgz -C /tmp/L .
