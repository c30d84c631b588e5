# Sourced by the call scripts beside it (copied to .whl/ by prepare-carry.sh): `. .whl/lib.sh COMMIT CALL`.
# The carried wheels installed, labkit installed editable, LABKIT_COMMIT, the call's log folder $L (tarred
# into $OUT/call.tgz by `st`, before each stage, so a call cut off still returns its logs), $SLUG (results/$SLUG).
source .whl/env.sh
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1 || echo "pip -e failed" >&2
export LABKIT_COMMIT=$1
L=/tmp/L/$1/call${2:-1}; rm -rf /tmp/L; mkdir -p $L
SLUG=$(python3 -c "from labkit import device; print(device.properties()['slug'])")
nvidia-smi > $L/gpu.txt 2>&1
pack() { tar czf $OUT/call.tgz -C /tmp/L . ; }
t0=$SECONDS; st() { pack; echo "[$((SECONDS - t0)) s] $*"; }
