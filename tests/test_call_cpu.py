"""labkit.call's repeated path without a GPU (issue 21 item 3): the launcher is a C function compiled
here that records what each launch was given (its argument block, stream and data pointers), the
device and stream are torch's stand-ins, and CPU tensors play the CUDA ones. A repeat must launch
exactly what a checked call would: never a prepared signature on tensors it was not checked for
(a tensor resized or restrided in place, a view, another dtype, another out=, other params, another
device), always on the current stream, each thread with its own pointers."""
import ctypes
import subprocess
import sys
import threading

import pytest
import torch

import labkit
from labkit import calls
from labkit.errors import ConfigError, LaunchError
from labkit.launch import LkArgs, LkTensor, fill
from labkit.paths import KERNELS_DIR

RECORDER = r"""
#include <string.h>
#include "lk_abi.h"
#define LOGN (1 << 18)
static lk_args last_args;
static void* log_ptr[LOGN][3];
static void* log_stream[LOGN];
static long n;
static int rc;
int lk_record(const lk_args* a, void* stream) {  /* called with the GIL held (PYFUNCTYPE) */
  if (n < LOGN) {
    for (int k = 0; k < 3; k++) log_ptr[n][k] = a->nt > k ? a->t[k].data : 0;
    log_stream[n] = stream;
  }
  n++;
  memcpy(&last_args, a, sizeof last_args);
  return rc;
}
long lk_n(void) { return n; }
void lk_reset(int code) { n = 0; rc = code; }
const lk_args* lk_last(void) { return &last_args; }
void* lk_ptr(long i, int k) { return log_ptr[i][k]; }
void* lk_stream(long i) { return log_stream[i]; }
"""


@pytest.fixture(scope="module")
def recorder(tmp_path_factory):
    d = tmp_path_factory.mktemp("recorder")
    (d / "rec.c").write_text(RECORDER)
    subprocess.run(["gcc", "-O1", "-shared", "-fPIC", "-I", str(KERNELS_DIR), "-o", str(d / "librec.so"),
                    str(d / "rec.c")], check=True)
    lib = ctypes.CDLL(str(d / "librec.so"))
    lib.lk_n.restype = ctypes.c_long
    lib.lk_last.restype = ctypes.POINTER(LkArgs)
    lib.lk_ptr.restype = lib.lk_stream.restype = ctypes.c_void_p
    lib.lk_ptr.argtypes = [ctypes.c_long, ctypes.c_int]
    lib.lk_stream.argtypes = [ctypes.c_long]
    return lib


class Gpu:
    """The stand-ins: torch's current device (None: the CPU tensors' own index) and stream."""
    device = None
    stream = 0x5000


class FakeLauncher:
    """labkit.launch.Launcher's part that labkit.call uses, on the recorder; counts full checks."""

    def __init__(self, lib):
        self.address = ctypes.cast(lib.lk_record, ctypes.c_void_p).value
        self.fn = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)(self.address)
        self.prepared = 0

    def prepare(self, tensors, ints=(), floats=()):
        self.prepared += 1
        a = fill(tensors, ints, floats)  # labkit.launch.pack without its CUDA check

        class Launch:
            args = a

            def __call__(launch):
                rc = self.fn(ctypes.addressof(a), Gpu.stream)
                if rc < 0:
                    raise LaunchError("kernel launch failed", code=-rc)
                return rc
        return Launch()


@pytest.fixture
def gpu(recorder, monkeypatch):
    """labkit.call on CPU tensors as on a GPU: every check, then the recorder as the launcher."""
    launcher = FakeLauncher(recorder)

    def check_device(o, inputs):
        if Gpu.device != inputs[0].device.index:
            raise ConfigError(f"{o.name}: the inputs are on {inputs[0].device}, "
                              f"the current device is cuda:{Gpu.device}")

    monkeypatch.setattr(calls, "launcher_for", lambda o, v, axes=(): launcher)
    monkeypatch.setattr(calls, "_check_device", check_device)
    monkeypatch.setattr(calls, "_device_api", lambda device: (lambda: Gpu.device, lambda dev: Gpu.stream,
                                                              torch._C._dynamo.guards._empty_strided_cpu))
    monkeypatch.setattr(calls, "_prepared", {})
    monkeypatch.setattr(calls, "_last", {})
    monkeypatch.setattr("labkit.launch.error_string", lambda code: f"CUDA error {code}")
    monkeypatch.setattr(Gpu, "device", None)
    monkeypatch.setattr(Gpu, "stream", 0x5000)
    checked = []
    slow = calls._call
    monkeypatch.setattr(calls, "_call", lambda *a: checked.append(a[0]) or slow(*a))
    recorder.lk_reset(0)
    launcher.checked = checked
    yield launcher


@pytest.fixture(params=["torch-guard", "key-guard"])
def guard(request, monkeypatch):
    """Both guards the fast path may use: torch's TensorGuards, and the key's fields where a torch has none."""
    if request.param == "key-guard":
        def none(*a, **k):
            raise AttributeError("no TensorGuards in this torch")
        monkeypatch.setattr(torch._C._dynamo.guards, "TensorGuards", none)
    return request.param


def launched(rec, k=-1):
    """The data pointers of launch k (the last by default)."""
    n = rec.lk_n()
    return [rec.lk_ptr(n + k if k < 0 else k, j) or 0 for j in range(3)]


def f32(*s):
    return torch.randn(*s)


def test_a_repeat_takes_the_fast_path_and_writes_only_the_data_pointers(gpu, recorder, guard):
    a, b, c = f32(64, 64), f32(64, 64), torch.empty(64, 64)
    assert labkit.call("add", "f32x4", a, b, out=c) is c
    first = bytes(recorder.lk_last().contents)
    a2, b2, c2 = f32(64, 64), f32(64, 64), torch.empty(64, 64)
    for _ in range(3):
        assert labkit.call("add", "f32x4", a2, b2, out=c2) is c2
        assert launched(recorder) == [a2.data_ptr(), b2.data_ptr(), c2.data_ptr()]
    assert gpu.prepared == 1 and len(gpu.checked) == 1 and recorder.lk_n() == 4  # checked once, launched 4 times
    again = bytes(recorder.lk_last().contents)
    data = {LkArgs.t.offset + k * ctypes.sizeof(LkTensor) + LkTensor.data.offset + j
            for k in range(3) for j in range(8)}
    assert {k for k, (x, y) in enumerate(zip(first, again)) if x != y} <= data

    # the allocating call: a new output per call, laid out as the checked one
    y = labkit.call("add", "f32x4", a, b)
    ys = [labkit.call("add", "f32x4", a2, b2) for _ in range(3)]
    assert gpu.prepared == 2 and len(gpu.checked) == 2
    for t in ys:
        assert (t.shape, t.stride(), t.dtype, t.device) == (y.shape, y.stride(), y.dtype, y.device)
        assert t.is_contiguous() and t.data_ptr() not in (a2.data_ptr(), b2.data_ptr())
    assert launched(recorder)[:2] == [a2.data_ptr(), b2.data_ptr()] and launched(recorder)[2] == ys[-1].data_ptr()
    assert len({t.data_ptr() for t in ys}) == 3


def stale_cases():
    """(what changes between a checked call and its repeat, the repeat's inputs and out, what it must say)."""
    def resized_input(a, b, c):
        b.resize_(64, 63)
        return (a, b), c, "equal shapes"

    def restrided_input(a, b, c):
        b.as_strided_((64, 64), (1, 64))
        return (a, b), c, "not contiguous"

    def view(a, b, c):
        return (a, f32(64, 64).t()), c, "not contiguous"

    def dtype(a, b, c):
        return (a, b.half()), c, "has dtype f16"

    def resized_out(a, b, c):
        c.resize_(64, 65)
        return (a, b), c, r"out\[0\] must be a contiguous \(64, 64\)"

    def restrided_out(a, b, c):
        c.as_strided_((64, 64), (1, 64))
        return (a, b), c, r"out\[0\] must be a contiguous"

    def out_dtype(a, b, c):
        return (a, b), c.double(), r"out\[0\] must be a contiguous \(64, 64\) torch.float32"

    def no_out(a, b, c):  # three inputs where the signature had two and an out=
        return (a, b, c), None, "add takes"

    def not_a_tensor(a, b, c):
        return (a, 3), c, "b is a int"

    def another_device(a, b, c):
        Gpu.device = 1
        return (a, b), c, "the current device is cuda:1"

    return [resized_input, restrided_input, view, dtype, resized_out, restrided_out, out_dtype, no_out,
            not_a_tensor, another_device]


@pytest.mark.parametrize("change", stale_cases(), ids=lambda c: c.__name__)
def test_a_prepared_signature_is_never_launched_on_tensors_it_was_not_checked_for(gpu, recorder, guard, change):
    a, b, c = f32(64, 64), f32(64, 64), torch.empty(64, 64)
    for _ in range(2):  # checked, then the fast path
        labkit.call("add", "f32x4", a, b, out=c)
    n = recorder.lk_n()
    inputs, out, match = change(a, b, c)
    for _ in range(2):  # the same objects again after the change: refused every time, nothing launched
        with pytest.raises(ConfigError, match=match):
            labkit.call("add", "f32x4", *inputs, out=out)
    assert recorder.lk_n() == n
    Gpu.device = None
    a, b, c = f32(64, 64), f32(64, 64), torch.empty(64, 64)
    labkit.call("add", "f32x4", a, b, out=c)  # the prepared signature still serves what it was checked for
    assert launched(recorder) == [a.data_ptr(), b.data_ptr(), c.data_ptr()] and recorder.lk_n() == n + 1


def test_other_params_or_another_signature_prepare_their_own(gpu, recorder, guard):
    x = torch.randint(0, 5, (1000,), dtype=torch.int32)
    for bins in (5, 7, 5, 7):
        h = labkit.call("histogram", "i32", x, bins=bins)
        assert h.shape == (bins,) and launched(recorder)[:2] == [x.data_ptr(), h.data_ptr()]
        assert recorder.lk_last().contents.t[1].size[0] == bins  # the block of this bins, not the other's
    assert gpu.prepared == 2
    a, b = f32(64, 64), f32(64, 64)
    for s in ((64, 64), (32, 16), (64, 64), (32, 16)):  # alternating shapes: each its own block
        a, b = f32(*s), f32(*s)
        y = labkit.call("add", "f32x4", a, b)
        assert y.shape == s and tuple(recorder.lk_last().contents.t[2].size[:2]) == s
    assert gpu.prepared == 4


def test_a_layout_the_key_accepts_but_the_guard_refuses_rearms_the_fast_path(gpu, recorder):
    # a size-1 dim's stride, requires_grad and inference mode: same key, another guard
    a, b = f32(1, 64), f32(1, 64)
    labkit.call("add", "f32x4", a, b)
    b1 = f32(64, 1).t()  # contiguous (1, 64) with strides (1, 1)
    assert b1.is_contiguous() and b1.stride() != b.stride()
    for _ in range(3):
        labkit.call("add", "f32x4", a, b1)
    assert gpu.prepared == 1 and len(gpu.checked) == 2  # one keyed repeat re-armed the guard
    with torch.inference_mode():
        a, b = f32(1, 64), f32(1, 64)
        for _ in range(3):
            y = labkit.call("add", "f32x4", a, b)
    assert gpu.prepared == 1 and len(gpu.checked) == 3
    assert launched(recorder) == [a.data_ptr(), b.data_ptr(), y.data_ptr()]


def test_the_current_stream_is_read_at_each_call(gpu, recorder):
    a, b = f32(256), f32(256)
    for s in (0x5000, 0x6000, 0x7000, 0):
        Gpu.stream = s
        labkit.call("add", "f32x4", a, b)
        assert (recorder.lk_stream(recorder.lk_n() - 1) or 0) == s


def test_a_failed_launch_raises_on_the_fast_path(gpu, recorder):
    a, b = f32(256), f32(256)
    labkit.call("add", "f32x4", a, b)
    recorder.lk_reset(-700)
    with pytest.raises(LaunchError, match="CUDA error 700"):
        labkit.call("add", "f32x4", a, b)
    recorder.lk_reset(0)
    assert labkit.call("add", "f32x4", a, b).shape == (256,)


def test_threads_never_launch_each_others_pointers(gpu, recorder):
    """One prepared signature called from 4 threads with a thread switch as often as CPython allows:
    every launch carries one thread's own (a, b, out) pointers, each thread's exactly as often as it
    called (a shared argument block lets another thread's call overwrite them before the launch)."""
    sys_interval = sys.getswitchinterval()
    sets = [(f32(64), f32(64), torch.empty(64)) for _ in range(4)]
    labkit.call("add", "f32x4", *sets[0][:2], out=sets[0][2])
    recorder.lk_reset(0)
    n = 20000

    def work(a, b, c):
        for _ in range(n):
            labkit.call("add", "f32x4", a, b, out=c)
    threads = [threading.Thread(target=work, args=s) for s in sets]
    sys.setswitchinterval(1e-6)
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(sys_interval)
    assert recorder.lk_n() == 4 * n
    seen: dict = {}
    for i in range(recorder.lk_n()):
        triple = tuple(recorder.lk_ptr(i, k) for k in range(3))
        seen[triple] = seen.get(triple, 0) + 1
    assert seen == {tuple(t.data_ptr() for t in s): n for s in sets}


def test_workspace_and_other_shaped_outputs_are_allocated_each_repeat(gpu, recorder):
    """softmax's scratch pairs (allocated, never returned) beside y given or allocated; sgemm's output
    shaped (M, N) from two inputs of other shapes."""
    x = f32(4099)
    for out in (None, torch.empty(4099), None, torch.empty(4099)):
        for _ in range(2):
            y = labkit.call("softmax", "f32x4", x, out=out)
            assert isinstance(y, torch.Tensor) and y.shape == x.shape and (out is None or y is out)
            ptrs = launched(recorder)
            assert ptrs[:2] == [x.data_ptr(), y.data_ptr()] and ptrs[2] not in (0, x.data_ptr(), y.data_ptr())
    assert gpu.prepared == 2
    a, b = f32(32, 16), f32(16, 8)
    for _ in range(3):
        c = labkit.call("sgemm", "warptile", a, b)
        assert c.shape == (32, 8) and c.is_contiguous()
        assert launched(recorder) == [a.data_ptr(), b.data_ptr(), c.data_ptr()]
    assert gpu.prepared == 3
