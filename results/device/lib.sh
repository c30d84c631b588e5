# Sourced by the call scripts beside it (copied to .whl/ by prepare-carry.sh): `. .whl/lib.sh COMMIT CALL`.
# The carried wheels installed, labkit installed editable, LABKIT_COMMIT, the call's log folder $L (tarred
# into $OUT/call.tgz by `st`, before each stage, so a call cut off still returns its logs), $SLUG (results/$SLUG).
source .whl/env.sh
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1 || echo "pip -e failed" >&2
# COMMIT comes from this machine's git: the lent machine's .git can be a stale copy under a newer work tree
# (logs/a0ea16f195ed/call4/notes.txt), so a COMMIT equal to its HEAD while its tree differs is refused
if [ "$1" = "$(git rev-parse --short=12 HEAD 2>/dev/null)" ] && [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  echo "COMMIT $1 is the lent machine's stale .git HEAD, not this tree's: pass git rev-parse --short=12 HEAD from your machine" >&2; exit 2
fi
export LABKIT_COMMIT=$1
L=/tmp/L/$1/call${2:-1}; rm -rf /tmp/L; mkdir -p $L
SLUG=$(python3 -c "from labkit import device; print(device.properties()['slug'])")
nvidia-smi > $L/gpu.txt 2>&1
pack() { tar czf $OUT/call.tgz -C /tmp/L . ; }
t0=$SECONDS; st() { pack; echo "[$((SECONDS - t0)) s] $*"; }
