"""CPU half, every op: a variant is stated once (its V(...) line); the symbol, launcher expression
and kernel name are derived from it and checked against the kernel family file (the launcher
template and kernels it names exist there; no hand-written export table remains); op modules and
kernel families line up; shapes round-trip."""
import re

import pytest

from labkit.build import family_text
from labkit.paths import KERNELS_DIR
from labkit.registry import family, ops

OPS = list(ops().values())
FAMILIES = sorted({o.source for o in OPS})


@pytest.mark.parametrize("op", OPS, ids=[o.name for o in OPS])
def test_derived_names_exist_in_the_kernel_file(op):
    src = family_text(op.source)
    assert len({(v.name, v.dtype) for v in op.variants}) == len(op.variants)
    for v in op.variants:
        assert v.symbol == f"{op.name}_{v.name}" and v.op == op.name
        launcher = v.launch.split("<")[0]
        assert re.search(rf"static (int|void) {launcher}\(", src), f"{op.source} defines no launcher {launcher}"
        assert v.note and v.width >= 1 and v.access in (1, 2, 4, 8, 16)
    for base in [v.kernel.split("<")[0] for v in op.variants] + list(op.shape_kernels):
        assert re.search(rf"__global__\s+void\s+(__launch_bounds__\([^)]*\)\s*(//[^\n]*)?\s*)?{base}\s*\(", src), \
            f"no kernel {base}"


@pytest.mark.parametrize("source", FAMILIES)
def test_one_family_one_module_and_no_hand_written_exports(source):
    src = family_text(source)
    assert "LK_EXPORT" not in src, f"{source}: exports are generated from labkit/ops/{source[:-3]}.py"
    mods = {o.__module__ if hasattr(o, "__module__") else None for o in family(source)}
    assert all(o.source == source for o in family(source)) and mods
    assert (KERNELS_DIR.parent / "labkit" / "ops" / f"{source[:-3]}.py").exists()


@pytest.mark.parametrize("op", OPS, ids=[o.name for o in OPS])
def test_shapes_round_trip(op):
    for s in op.default_shapes + op.testing.shapes + [s for v in op.shape_presets.values() for s in v]:
        assert op.parse_shape(op.format_shape(s)) == tuple(s)
    assert op.testing.shapes, f"{op.name}: no test shapes for the GPU half"


@pytest.mark.parametrize("op", [o for o in OPS if o.name != "add"], ids=[o.name for o in OPS if o.name != "add"])
def test_memory_bound_default_shape(op):
    # performance goals are stated at >= 256 MiB of traffic (add keeps the seed's shapes)
    assert any(op.cost.bytes_moved(s, op.dtypes[0]) >= 256 << 20 for s in op.default_shapes)
