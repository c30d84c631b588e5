"""CPU half: README's numbers are data. Every measured number sits in a `<!-- data:... -->` block
rendered from the files under results/; this fails when README differs from what they give."""
import re

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
