"""CPU half of the main job (`labkit` on a GPU machine): the libraries build ahead while runs start,
one compact table per dtype printed as its rows arrive (the smallest first), a short summary last."""
import threading

from labkit import main_job

from fake_runner import FakeRunner


def test_main_job_builds_ahead_prints_a_table_per_dtype_then_a_summary(monkeypatch, capsys):
    import labkit.build

    built = threading.Event()
    monkeypatch.setattr(labkit.build, "build_all", lambda families, arch=None: built.set() or {})
    order = []

    class Runner(FakeRunner):
        def run(self, cfg):
            order.append(cfg.dtype)
            return dict(super().run(cfg), kernel_us=0.5, bytes=cfg.spec.cost.bytes_moved(cfg.shape, cfg.dtype))

    assert main_job.main({"runner": Runner()}) == 0
    out = capsys.readouterr().out
    assert built.wait(5)
    heads = [line for line in out.splitlines() if line.startswith("add ") and "kernel µs" in line]
    dtypes = [h.split()[1].rstrip(",") for h in heads]
    assert len(dtypes) == len(set(order)) >= 3
    sizes = [order.count(d) for d in dtypes]
    assert sizes == sorted(sizes)  # the smallest table first
    assert order == sorted(order, key=dtypes.index)  # each dtype's rows measured together, in that order
    assert "0.50 (" in out and "configurations in" in out and "first table after" in out
    assert len(out.splitlines()) < 60  # a short page, not 354 lines


def test_main_job_table_marks_rows_that_were_not_timed():
    rows = [{"shape": "8x8", "variant": "f32x4", "dtype": "f32", "status": "failed", "time_us": None},
            {"shape": "8x8", "variant": "torch", "dtype": "f32", "status": "ok", "time_us": 2.0, "kernel_us": 1.0}]
    t = main_job.table(rows)
    assert "FAILED" in t and "1.00 (2.00)" in t and "torch f32" in t
