"""This call's files named commit b6169b15ea97: its command took LABKIT_COMMIT from `git rev-parse` on the lent
machine, whose .git is a stale copy (HEAD b6169b1, this session's first commit), while its work tree was this
machine's, clean at a0ea16f195ed (results.tgz listed every file added since b6169b1 as changed, the A/B scripts
among them). Run once from the project root: python results/nvidia-h200/logs/a0ea16f195ed/call4/relabel.py
(after copying the call's results over the tree); it rewrites only the records dated in this call."""
import json, subprocess
from pathlib import Path

true = subprocess.run(["git", "rev-parse", "--short=12", "a0ea16f"], capture_output=True, text=True, check=True).stdout.strip()
src = f"LABKIT_COMMIT, corrected to the tree's commit (logs/{true}/call4/relabel.py)"
R = Path("results/nvidia-h200")


def fix(d):
    if d.get("commit") == "b6169b15ea97" and str(d.get("date", "")).startswith("2026-11-28T20:2"):
        d["commit"], d["commit_source"] = true, src
        return 1
    return 0


n = 0
for f in ("tune-softmax-floats.jsonl", "tune-softmax-rows.jsonl"):
    rows = [json.loads(l) for l in (R / f).read_text().splitlines() if l.strip()]
    n += sum(fix(r) for r in rows)
    (R / f).write_text("".join(json.dumps(r) + "\n" for r in rows))
for f in ("tests.json", "device.json"):
    d = json.loads((R / f).read_text())
    parts = [d, *d.get("runs", [])] if f == "tests.json" else list(d["devices"].values())
    n += sum(fix(p) for p in parts if isinstance(p, dict))
    (R / f).write_text(json.dumps(d, indent=1, sort_keys=(f == "device.json")) + "\n")
print(f"{n} records relabelled {true}")
