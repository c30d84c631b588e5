"""CPU half, every op: its registry entry matches its kernel file (launchers exported, kernels
defined, the file's header comment names each variant), and its shapes round-trip."""
import re

import pytest

from labkit.build import KERNELS_DIR
from labkit.registry import ops

OPS = list(ops().values())


@pytest.mark.parametrize("op", OPS, ids=[o.name for o in OPS])
def test_registry_entry_matches_its_kernel_file(op):
    src = (KERNELS_DIR / op.source).read_text()
    header = src.split("#include")[0]  # the leading comment lists every variant with a note
    assert len({(v.name, v.dtype) for v in op.variants}) == len(op.variants)
    for v in op.variants:
        assert re.search(rf"LK_EXPORT int {v.symbol}\(const lk_args\*", src), f"{v.symbol} not exported"
    for base in [v.kernel.split("<")[0] for v in op.variants] + list(op.shape_kernels):
        assert re.search(rf"__global__\s+void\s+(__launch_bounds__\([^)]*\)\s*(//[^\n]*)?\s*)?{base}\s*\(", src), f"no kernel {base}"
    for v in op.variants:
        assert re.search(rf"\b{v.name}\b", header), f"{v.name} missing from the header of {op.source}"
        assert v.note and v.width >= 1 and v.access in (1, 2, 4, 8, 16)


@pytest.mark.parametrize("op", OPS, ids=[o.name for o in OPS])
def test_shapes_round_trip(op):
    for s in op.default_shapes + op.test_shapes + [s for v in op.shape_presets.values() for s in v]:
        assert op.parse_shape(op.format_shape(s)) == tuple(s)
    assert op.test_shapes, f"{op.name}: no test shapes for the GPU half"


@pytest.mark.parametrize("op", [o for o in OPS if o.name != "add"], ids=[o.name for o in OPS if o.name != "add"])
def test_memory_bound_default_shape(op):
    # performance goals are stated at >= 256 MiB of traffic (add keeps the seed's shapes)
    assert any(op.bytes_moved(s, op.dtypes[0]) >= 256 << 20 for s in op.default_shapes)
