"""CPU half, issue 26 item 2: one row schema (labkit.schema). A field declared in one place shows up
in the CSV written by records (with its type), in the text tables, the explorer's table, the labs'
empty frame and README's field table; one row key; one variant label builder and one parser; the
recorded results are rows of this schema."""
import json
import re
from pathlib import Path

import pytest

from labkit import labs, readme, schema, tables
from labkit.config import resolve
from labkit.errors import ConfigError
from labkit.explore import text
from labkit.records import load_rows, save, to_frame
from labkit.registry import ops

ROOT = Path(__file__).resolve().parent.parent
ROW = {"gpu": "GPU A", "op": "add", "variant": "f16x8_pack[block=512]", "dtype": "f16", "shape": "64x64",
       "mode": "cold", "status": "ok", "time_us": 2.5, "kernel_us": 2.0, "gbps": 10.0, "pct_peak": 1.0, "noise": 0.01,
       "stop_reason": "converged", "block": 512, "commit": "0123456", "date": "2026-11-23"}


@pytest.fixture(params=[("l2_hit_pct", float, "%", 81.25), ("l2_policy", str, "", "0011")], ids=["number", "string"])
def new_field(request):
    """One field declared in the schema, nowhere else: a number with a unit, or a string that looks
    like a number (its CSV cell must come back as the string)."""
    name, kind, unit, value = request.param
    schema.declare(name, kind, unit, group="ceiling", shown="table explorer labs", doc="a field added by a test")
    yield name, kind, unit, value
    del schema.FIELDS[name]


def test_a_field_declared_once_is_in_the_csv_tables_explorer_labs_and_readme(new_field, tmp_path):
    name, kind, unit, value = new_field
    row = dict(ROW, **{name: value})

    # the CSV records writes: a column of its own, among the declared ones (before the axis value
    # `block`), read back with the declared type
    path = save([row, dict(ROW, variant="torch")], tmp_path / "rows.csv")
    header = path.read_text().splitlines()[0].split(",")
    assert name in header and header.index(name) < header.index("block")
    back = load_rows(path)
    assert back[0][name] == value and type(back[0][name]) is kind and back[1][name] is None
    assert back[0]["commit"] == "0123456"

    # the text tables: after the fields the line lays out itself, with its unit
    line = tables.row_line(row)
    shown = f"{name} {format(value, '.4g') if kind is float else value}{' ' + unit if unit else ''}"
    assert line.endswith(f"  {shown}") and shown in tables.seed_table([row])

    # the explorer's table and the labs' frame of no rows
    assert f"<th>{name}</th>" in text.table_html(to_frame([row]))
    assert name in labs.empty().columns

    # README's table of fields, rendered from the declarations
    out = readme.render("<!-- data:fields -->\n<!-- /data -->")
    assert f"`{name}`{' ' + unit if unit else ''}" in out


def test_a_declared_field_of_the_wrong_type_skips_its_row(new_field, tmp_path):
    name, kind, _, _ = new_field
    p = tmp_path / "r.jsonl"
    p.write_text(json.dumps(dict(ROW, **{name: 1 if kind is str else "high"})) + "\n" + json.dumps(ROW) + "\n")
    with pytest.warns(UserWarning, match=rf"{p}:1: skipped a row that has {name}="):
        assert len(load_rows(p)) == 1


def test_declarations_are_checked():
    with pytest.raises(ValueError, match="group one of"):
        schema.declare("x", float, group="nowhere", doc="")
    with pytest.raises(ValueError, match="shown within"):
        schema.declare("x", float, group="time", shown="poster", doc="")
    assert "x" not in schema.FIELDS


def test_the_text_line_lays_out_exactly_the_fields_declared_for_the_table():
    assert set(schema.shown("table")) == tables.COMPOSED


def test_one_row_key_for_configs_rows_and_recorded_mode():
    cfg = resolve("add", "f16x8_pack", shape="64x64", axes={"block": 512})
    assert cfg.key == schema.key(ROW) == ("add", "f16x8_pack[block=512]", "f16", "64x64", "cold")
    assert {k: cfg.head()[k] for k in schema.KEY} == {k: ROW[k] for k in schema.KEY}
    old, new = dict(ROW, date="2026-01-01", time_us=9.0), dict(ROW, date="2026-02-01")
    assert schema.newest([new, old, dict(ROW, gpu="GPU B")]) == [new, dict(ROW, gpu="GPU B")]


def test_one_variant_label_builder_and_parser():
    assert schema.variant_label("f16x8_pack", (("block", 512),)) == "f16x8_pack[block=512]"
    assert schema.variant_label("f16x8_pack", {"block": 512, "rows": 4}) == "f16x8_pack[block=512,rows=4]"
    assert schema.variant_label("torch") == "torch"
    assert schema.split_variant("f16x8_pack[block=512]") == ("f16x8_pack", {"block": 512})
    assert schema.split_variant("torch") == ("torch", {})
    assert schema.base_variant("f16x8_pack[block=512]") == "f16x8_pack"
    with pytest.raises(ConfigError, match="axis values are integers"):
        schema.split_variant("f16x8_pack[block=big]")
    # nothing else builds or takes apart a label
    spelled = re.compile(r"""split\(\s*["']\[|\[\{["']?,["']?\.join|_AXES""")
    found = [f"{p.relative_to(ROOT)}:{n}" for p in sorted((ROOT / "labkit").rglob("*.py")) if p.name != "schema.py"
             for n, line in enumerate(p.read_text().splitlines(), 1) if spelled.search(line)]
    assert not found, f"a variant label built or parsed outside labkit.schema: {found}"


def test_recorded_rows_are_rows_of_the_schema():
    """Every field of every recorded row is declared, or a tuning axis of its op, and has its type."""
    axes = {name for o in ops().values() for name in o.axes}
    files = sorted((ROOT / "results").glob("*/*.jsonl"))
    assert files
    for f in files:
        for n, line in enumerate(f.read_text().splitlines(), 1):
            r = json.loads(line)
            assert schema.problem(r) is None, f"{f}:{n}: {schema.problem(r)}"
            unknown = set(r) - set(schema.FIELDS) - axes
            assert not unknown, f"{f}:{n}: fields declared nowhere (labkit/schema.py): {sorted(unknown)}"
