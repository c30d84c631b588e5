"""CPU half: README's numbers are data. Every measured number sits in a `<!-- data:... -->` block
rendered from the files under results/; this fails when README differs from what they give."""
import re

import pytest

from labkit import readme
from labkit.paths import ROOT


def test_readme_blocks_equal_what_the_files_give():
    text = (ROOT / "README.md").read_text()
    assert readme.BLOCK.search(text), "README has no data blocks"
    rendered = readme.render(text)
    if rendered != text:
        import difflib

        diff = "".join(difflib.unified_diff(text.splitlines(True), rendered.splitlines(True), "README.md", "from results/"))
        raise AssertionError("README.md differs from results/: run `python -m labkit.readme`\n" + diff[:4000])


def test_the_check_catches_a_changed_number(tmp_path):
    text = (ROOT / "README.md").read_text()
    m = re.search(r"(<!-- data:\w[^>]*-->\n[^<]*?)(\d+\.\d\d)", text)
    if m is None:  # no rendered number yet (no results): a fake block proves the mechanism
        fake = tmp_path / "g"
        fake.mkdir()
        (fake / "launch-cost.json").write_text('{"gpu": "G", "labkit_prepared_us": 1.0, "torch_add_out_us": 2.0, '
                                              '"prepared_vs_torch_out": 0.5, "labkit_call_us": 3.0, "torch_add_us": 4.0, '
                                              '"call_vs_torch": 0.75, "date": "2026-01-01", "commit": "c"}')
        text = "<!-- data:launch -->\n<!-- /data -->\n"
        good = readme.render(text, tmp_path)
        assert "0.50" in good and readme.render(good.replace("0.50", "0.51"), tmp_path) == good
        return
    changed = text[:m.start(2)] + "9" + text[m.start(2):]
    assert readme.render(changed) != changed


def test_unknown_blocks_are_named():
    import pytest

    with pytest.raises(ValueError, match="README block data:nope is unknown"):
        readme.render("<!-- data:nope -->\n<!-- /data -->\n")


def test_json_block_renders_a_dict_field(tmp_path):
    """A dict field (seconds per lab) is one cell, 'name value; ...'."""
    g = tmp_path / "g"
    g.mkdir()
    (g / "explorer-latency.json").write_text('{"gpu": "G", "labs_s": {"07_why.ipynb": 155.331, "08.ipynb": 2}, '
                                           '"date": "2026-11-23T22:00:00Z", "commit": "c"}')
    out = readme.render("<!-- data:json explorer-latency.json labs_s -->\n<!-- /data -->\n", tmp_path)
    assert "| G | 07_why.ipynb 155; 08.ipynb 2 | 2026-11-23 | c |" in out


def _modes():
    from labkit.sweeps import get_sweep

    return get_sweep("access-width").modes  # what a recording holds per configuration


def test_access_width_is_of_the_state_its_block_names(tmp_path):
    """A file of cold, rotating and hot rows (hot 3x faster): the table holds the rows of the state the
    block names (cold when it names none), never the last row of a configuration."""
    import pytest

    from labkit.errors import ConfigError
    from labkit.records import load_rows
    from test_recorded import make_results

    make_results(tmp_path, modes=_modes())
    rows = load_rows(tmp_path / "nvidia-h200" / "access-width.jsonl")
    cells = {m: " | ".join(f"{next(r['gbps'] for r in rows if (r['mode'], r['shape'], r['variant']) == (m, '4GiB', v)):.0f}"
                           for v in ("torch", "w1", "w2", "w4", "w8", "w16")) for m in ("cold", "hot")}
    cold = readme.render("<!-- data:access-width -->\n<!-- /data -->\n", tmp_path)
    assert f"| 4GiB | {cells['cold']} |" in cold and f"| 4GiB | {cells['hot']} |" not in cold
    assert "**NVIDIA H200, driver 550.54.15, 2026-11-02, commit fixture**, cold, GB/s" in cold
    assert readme.render("<!-- data:access-width cold -->\n<!-- /data -->\n", tmp_path) == \
        cold.replace("access-width -->", "access-width cold -->")
    hot = readme.render("<!-- data:access-width hot -->\n<!-- /data -->\n", tmp_path)
    assert f"| 4GiB | {cells['hot']} |" in hot and ", hot, GB/s" in hot
    assert "_no cold-dirty rows of access-width.jsonl" in readme.render("<!-- data:access-width cold-dirty -->\n<!-- /data -->\n", tmp_path)
    with pytest.raises(ConfigError, match="unknown cache mode 'warm'"):
        readme.render("<!-- data:access-width warm -->\n<!-- /data -->\n", tmp_path)


def test_zoo_goal_judges_reductions_from_64_mib_and_names_what_misses(tmp_path):
    """Issue 25's rule: reductions from 64 MiB of input (histogram at >= 4096 bins), other ops from 256
    MiB moved; a row whose kernels reach the goal while its events do not reads `kernel only`, a tie
    with torch (verdict SAME at 1.01x) is no miss, a SLOWER verdict is."""
    import json

    from labkit.benchmarks.zoo import judged, kernel_pct, goal_table

    assert judged("reduce_sum", {"bytes": 64 << 20, "shape": "16777216"})
    assert not judged("reduce_sum", {"bytes": (64 << 20) - 4, "shape": "16777215"})
    assert not judged("relu", {"bytes": 128 << 20, "shape": "4096x4096"})
    assert judged("histogram", {"bytes": (64 << 20) + 4 * 4096, "shape": "16777216x4096"})
    assert not judged("histogram", {"bytes": (64 << 20) + 1024, "shape": "16777216x256"})
    assert judged("histogram", {"bytes": (256 << 20) + 1024, "shape": "67108864x256"})

    def row(variant, shape, pct, kernel_pct_, vs=None, verdict=None):
        peak = 3000.0
        return {"op": "reduce_sum", "variant": variant, "dtype": "f32", "shape": shape, "mode": "cold", "status": "ok",
                "bytes": int(shape) * 4, "time_us": 100 / pct, "pct_peak": pct, "peak_gbps": peak,
                "kernel_gbps": peak * kernel_pct_ / 100, "vs_torch": vs, "vs_torch_verdict": verdict}

    assert kernel_pct(row("a", "16777216", 90, 97)) == 97 and kernel_pct({"pct_peak": 90}) is None
    cases = {"kernel only": [row("a", "16777216", 91, 96, 0.9, "FASTER"), row("a", "67108864", 97, 98, 1.01, "SAME")],
             "met": [row("a", "67108864", 97, 98, 1.01, "SAME"), row("a", "1024", 10, 11, 2.0, "SLOWER")],
             "MISSED": [row("a", "16777216", 91, 92, 0.9, "FASTER"), row("a", "67108864", 97, 98, 1.01, "SLOWER")]}
    for goal, rows in cases.items():
        d = tmp_path / goal.replace(" ", "_")
        d.mkdir()
        # a torn last line (a run cut off while writing) is skipped, the rows before it judged
        (d / "reduce-sum.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"op": "reduce_s')
        line, = [x for x in goal_table(d).splitlines() if x.startswith("| reduce_sum")]
        assert f"| {goal} |" in line, (goal, line)
        assert ("67108864 (97.0 %, kernel 98.0 %, 1.01x SLOWER)" in line) == (goal == "MISSED")
        assert ("16777216 (91.0 %, kernel 96.0 %, 0.90x FASTER)" in line) == (goal == "kernel only")
        assert "1024" not in line.split("|")[-2]  # 4 KiB: not judged


def test_zoo_goals_are_judged_per_dram_state_never_across_states(tmp_path):
    """relu recorded cold, rotating and hot on one GPU (hot 3x faster: far above the copy peak), cold
    only on the other: a line per op, dtype and state whose inputs come from DRAM, with that state's
    best rows; hot is named as not judged, never a line, never a winner."""
    import json

    from labkit.benchmarks.zoo import MEMORY_GOAL_PCT, goal_table
    from test_recorded import FIXTURE_GPUS, fixture_rows

    made = {}
    for (slug, (gpu, peak)), modes in zip(FIXTURE_GPUS.items(), (_modes(), ("cold",))):
        made[slug] = fixture_rows(gpu, peak, "relu", modes=modes)
        (tmp_path / slug).mkdir()
        (tmp_path / slug / "relu.jsonl").write_text("".join(json.dumps(r) + "\n" for r in made[slug]))

    def lowest(rows, mode, dtype):  # the best variant's lowest % of peak over the >= 256 MiB shapes
        best = {}
        for r in rows:
            if (r["mode"], r["dtype"]) == (mode, dtype) and r["variant"] != "torch" and r["bytes"] >= 256 << 20:
                best[r["shape"]] = min(best.get(r["shape"], r), r, key=lambda x: x["time_us"])
        return min(r["pct_peak"] for r in best.values())

    h100 = goal_table(tmp_path / "nvidia-h100-80gb-hbm3")
    assert h100.startswith("Judged per cache state: cold, rotating (the inputs come from DRAM); not judged: hot")
    assert "| op | dtype | mode | shapes |" in h100
    lines = {tuple(x.strip() for x in line.split("|")[1:4]): line for line in h100.splitlines()[4:]}
    assert set(lines) == {("relu", d, m) for d in ("f32", "f16") for m in ("cold", "rotating")}
    for (_, dtype, mode), line in lines.items():
        pct = lowest(made["nvidia-h100-80gb-hbm3"], mode, dtype)
        assert f"| {pct:.1f} |" in line and pct < 100 and ("MISSED" in line) == (pct < MEMORY_GOAL_PCT)
    assert lowest(made["nvidia-h100-80gb-hbm3"], "hot", "f32") > 200  # what a table across states would report
    h200 = goal_table(tmp_path / "nvidia-h200")
    assert h200.startswith("Judged per cache state: cold (the inputs come from DRAM).")
    assert [line.split("|")[3].strip() for line in h200.splitlines()[4:]] == ["cold", "cold"]
    block = readme.render("<!-- data:zoo -->\n<!-- /data -->\n", tmp_path)
    assert block.count("Judged per cache state") == 2 and "**NVIDIA H200, driver 550.54.15" in block


def _aa_rows(shifts):
    """A/A rows as `labkit aa --json` saves them: A then B per pair, B's samples scaled by its shift."""
    import random

    rnd = random.Random(0)
    rows = []
    for i, k in enumerate(shifts):
        base = [30.0 * (1 + rnd.gauss(0, 0.002)) for _ in range(400)]
        for side, s in (("A", base), ("B", [x * k for x in base[::-1]])):
            rows.append({"op": "add", "variant": "f16x8_pack", "dtype": "f16", "shape": "4096x4096", "mode": "cold",
                         "time_us": sorted(s)[200], "samples_us": s, "aa_pair": i + 1, "aa_side": side, "gpu": "G",
                         "date": "2026-11-28T00:00:00Z", "commit": "c"})
    return rows


@pytest.mark.parametrize("shifts, cell, result", [([1.0] * 19 + [1.05], "1 (5%)", "PASS"),
                                                  ([1.0] * 18 + [1.05, 0.95], "2 (10%)", "FAIL")])
def test_aa_block_counts_the_pairs_not_called_same(tmp_path, shifts, cell, result):
    """The A/A block reads the saved rows back and judges them as `labkit aa` does: 19 of 20 SAME
    passes, 18 of 20 does not."""
    import json

    g = tmp_path / "g"
    g.mkdir()
    (g / "aa.json").write_text(json.dumps(_aa_rows(shifts)))
    out = readme.render("<!-- data:aa -->\n<!-- /data -->\n", tmp_path)
    assert f"| G | add f16x8_pack f16 4096x4096 cold | 20 | {cell} | {result} (at least 95% SAME) | 2026-11-28 | c |" in out, out


def test_axis_block_pairs_two_values_per_shape_and_state_and_names_gpus_without_the_sweep(tmp_path):
    import json

    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    (b / "device.json").write_text("{}")
    rows = []
    for floats, k in ((16, 1.0), (32, 1.05)):
        for r in _aa_rows([k])[1:]:  # B's samples: scaled by k
            rows.append({**r, "op": "softmax_rows", "variant": f"f16x8[floats={floats}]", "floats": floats, "status": "ok"})
    rows.append({**rows[0], "status": "wrong", "floats": 8})  # a failed row pairs with nothing
    (a / "tune-x.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = readme.render("<!-- data:axis tune-x floats 16 32 -->\n<!-- /data -->\n", tmp_path)
    assert "| 4096x4096 | cold | 30.00 | 31.50 | 0.952x floats=32 (" in out and ") FASTER |" in out, out
    assert "(`labkit sweep tune-x`), softmax_rows f16x8 f16, event time µs" in out
    assert "Not recorded yet in results/{b}/ (`labkit sweep tune-x` there)." in out


def test_the_tests_block_says_whether_each_step_passed(tmp_path):
    """A step whose tests passed can still fail (its sanitizer's verdict, an interruption, not run):
    the block shows that beside pytest's summary."""
    import json

    g = tmp_path / "g"
    g.mkdir()
    run = {"step": "racecheck", "command": "c", "summary": "132 passed; 0 in it", "date": "2026-11-28", "commit": "c"}
    runs = [dict(run, returncode=0), dict(run, returncode="sanitizer: the planted race was not reported"),
            dict(run, returncode="timeout"), dict(run, returncode=1), dict(run, returncode=None)]
    (g / "tests.json").write_text(json.dumps({"gpu": "G", "date": "2026-11-28", "commit": "c", "runs": runs}))
    out = readme.render("<!-- data:tests -->\n<!-- /data -->\n", tmp_path)
    for passed in ("yes", "no (sanitizer: the planted race was not reported)", "no (timeout)", "no (exit 1)", "no (not run)"):
        assert f"| G | `c` | 132 passed; 0 in it | {passed} | 2026-11-28 | c |" in out, out
