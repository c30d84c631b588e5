"""GPU half of the verdicts (issue 22's acceptance): the A/A self-test of add f16x8_pack at 4096x4096
says SAME for at least 95 % of 20 pairs, and f16x8 against f16x8_pack there (a real difference)
gets a verdict other than SAME. Both with the default stop rule, as `labkit aa` and `labkit bench`."""
import pytest

import labkit
from labkit.verdicts import compare_rows
from labkit.selftest import SAME_GOAL

pytestmark = pytest.mark.gpu


def test_aa_add_f16x8_pack_says_same():
    res = labkit.aa("add", "f16x8_pack", "4096x4096", dtype="f16", pairs=20, progress=False)
    print(res.text())
    assert 1 - res.false_rate >= SAME_GOAL, res.text()


@pytest.mark.workers
def test_f16x8_against_f16x8_pack_is_decided():
    df = labkit.bench("add", ["f16x8", "f16x8_pack"], "f16", ["4096x4096"], progress=False)
    rows = {r["variant"]: r for r in df.to_dict("records")}
    v = compare_rows(rows["f16x8"], rows["f16x8_pack"])
    print(f"f16x8 / f16x8_pack: {v.text()}")
    assert v.decided, v.text()
