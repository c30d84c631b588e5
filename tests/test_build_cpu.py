"""CPU half, builds: the key, compile errors with file and line, generated export tables, and
recovery (a stale lock taken over, a bounded and visible wait, a library that does not load rebuilt
once then named), with environment values validated before they reach a shell."""
import os
import subprocess
import threading
import time

import pytest

from labkit import build
from labkit.errors import BuildError, ConfigError
from labkit.paths import cache_root


def test_build_key_changes_with_source_flags_and_deps(tmp_path):
    a, dep = tmp_path / "k.cu", tmp_path / "fam.cu"
    a.write_text("__global__ void k() {}")
    dep.write_text("// family")
    k1 = build.build_key([a], ["-O3"], [dep])
    assert build.build_key([a], ["-O2"], [dep]) != k1
    dep.write_text("// family, edited")
    assert build.build_key([a], ["-O3"], [dep]) != k1


def test_compile_error_carries_file_and_line():
    log = ("[1/2] nvcc ... -c /x/kernels/add.cu -o add.cuda.o\nFAILED: add.cuda.o\n"
           "/x/kernels/add.cu(42): error: identifier \"oops\" is undefined\n    c[i] = oops;\n           ^\n")
    e = build.parse_compile_error(log)
    assert (e.file, e.line) == ("/x/kernels/add.cu", 42) and str(e).startswith("/x/kernels/add.cu:42:")


def test_export_table_is_generated_from_the_variant_lines():
    from labkit.registry import family_exports

    text = build.export_source("add.cu", family_exports("add.cu"))
    assert text.startswith('#include "add.cu"')
    assert "LK_EXPORT int add_f16x8_pack(const lk_args* a, cudaStream_t s) { return launch_add<__half, 8, 16, 256>(a, s); }" in text
    with pytest.raises(ConfigError, match="not a C identifier"):
        build.export_source("add.cu", [("bad name", "x")])


@pytest.mark.parametrize("arch", ["90/../..", "`touch x`", "90;rm", "sm_90", " "])
def test_bad_arch_never_reaches_a_shell(arch, monkeypatch):
    monkeypatch.setenv("LABKIT_ARCH", arch)
    with pytest.raises(ConfigError, match="not a compute capability list"):
        build.target_arch()


@pytest.mark.parametrize("arch,flags", [("90", ["-gencode=arch=compute_90,code=sm_90"]),
                                        ("80,90a", ["-gencode=arch=compute_80,code=sm_80",
                                                    "-gencode=arch=compute_90a,code=sm_90a"])])
def test_good_arch_lists(arch, flags):
    assert build.arch_flags(arch) == flags


@pytest.mark.parametrize("value", ["/tmp/a b", "/tmp/`id`", "/tmp/$(id)", "/tmp/x;y"])
def test_cache_path_must_be_plain(value, monkeypatch):
    monkeypatch.setenv("LABKIT_CACHE", value)
    with pytest.raises(ConfigError, match="not a plain path"):
        cache_root()


def test_cache_is_private_and_a_shared_one_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_CACHE", str(tmp_path / "c"))
    assert oct(cache_root().stat().st_mode & 0o777) == "0o700"
    (tmp_path / "c").chmod(0o777)
    with pytest.raises(ConfigError, match="writable by others"):
        cache_root()


def _real_so(path):
    src = path.with_suffix(".c")
    src.write_text("int lk_probe(void) { return 7; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(path), str(src)], check=True)


class FakeExtension:
    """torch.utils.cpp_extension's load(), writing a real (or a broken) shared library."""

    _run_ninja_build = None  # build swaps it for its bounded ninja step during load()

    def __init__(self, broken=0):
        from torch.utils._cpp_extension_versioner import ExtensionVersioner

        self.loads, self.broken = 0, broken
        self.JIT_EXTENSION_VERSIONER = ExtensionVersioner()  # cpp_extension's, as its load() uses it

    def load(self, name, build_directory, sources, **kw):
        self.loads += 1
        version = self.JIT_EXTENSION_VERSIONER.bump_version_if_changed(
            name, sources, build_arguments=[], build_directory=build_directory, with_cuda=True, with_sycl=False,
            is_python_module=False, is_standalone=False)
        if version > 0:  # what cpp_extension does to a module it built before from other sources or folder
            name = f"{name}_v{version}"
        so = os.path.join(build_directory, f"{name}.so")
        if self.broken:
            self.broken -= 1
            open(so, "wb").write(b"\x7fELF truncated")
        else:
            _real_so(type(build.KERNELS_DIR)(so))


@pytest.fixture
def fake_build(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_CACHE", str(tmp_path / "cache"))
    src = tmp_path / "k.cu"
    src.write_text("// kernel")
    ext = FakeExtension()
    monkeypatch.setattr(build, "_require_toolkit", lambda: ext)
    monkeypatch.setattr(build, "_toolchain_key", lambda: "test")
    build._libraries.clear()
    return src, ext


def test_a_stale_lock_is_taken_over_with_a_message(fake_build, capsys):
    src, ext = fake_build
    key = build.build_key([src.resolve()], [*build.NVCC_FLAGS, *build.arch_flags("90")])
    d = cache_root() / f"k-sm90-{key}"
    d.mkdir(parents=True)
    (d / "lock").write_text("")  # what a build killed by SIGTERM leaves behind
    lib = build.build_library("k", [src], "90")
    assert lib.handle().lk_probe() == 7 and not (d / "lock").exists()
    assert "took over a stale build lock" in capsys.readouterr().err


def test_a_library_that_does_not_load_is_rebuilt_once_then_named(fake_build, capsys):
    src, ext = fake_build
    ext.broken = 1
    assert build.build_library("k", [src], "90").handle().lk_probe() == 7
    assert ext.loads == 2 and "does not load" in capsys.readouterr().err
    build._libraries.clear()
    src.write_text("// kernel, edited")
    ext.broken = 2
    with pytest.raises(BuildError, match="does not load after a rebuild") as e:
        build.build_library("k", [src], "90")
    assert str(cache_root()) in str(e.value)


def test_a_wait_for_another_build_is_visible_and_bounded(tmp_path, capsys):
    from filelock import FileLock

    d = tmp_path / "b"
    d.mkdir()
    held = FileLock(str(d / ".labkit.lock"))
    (d / ".labkit.owner").write_text("pid 4242")
    ready = threading.Event()

    def hold():
        held.acquire()
        ready.set()
        time.sleep(6)
        held.release()
    threading.Thread(target=hold, daemon=True).start()
    ready.wait()
    with pytest.raises(BuildError, match="pid 4242 has been building .* if it is not running, remove"):
        with build._FolderLock(d, wait_s=1):
            pass
    assert "waiting for pid 4242 to finish building b" in capsys.readouterr().err


def test_a_build_under_umask_0_is_not_writable_by_others(fake_build):
    """Nsight Systems starts its target with umask 0: a library built there must still load in the
    next process (which refuses one that others may write)."""
    src, ext = fake_build
    old = os.umask(0)
    try:
        lib = build.build_library("k", [src], "90")
        gen = build.generated("add.cu", [("lk_probe_x", "lk_probe")])
    finally:
        os.umask(old)
    for p in [*lib.path.parent.iterdir(), gen]:
        assert not p.stat().st_mode & 0o022, (p, oct(p.stat().st_mode))
    build._libraries.clear()
    assert build.build_library("k", [src], "90").handle().lk_probe() == 7  # what a later process does


def test_a_foreign_library_is_refused(tmp_path, monkeypatch):
    so = tmp_path / "x.so"
    so.write_bytes(b"")
    so.chmod(0o666)
    with pytest.raises(BuildError, match="others cannot write"):
        build._owned(so)


def test_runner_prebuilds_a_groups_libraries_side_by_side(monkeypatch):
    """A tuning sweep's group needs one library per axis value: they are built in parallel threads
    before the runs, torch needs none, and a failed build is left to its configuration's run."""
    import threading
    import time

    import labkit.launch
    from labkit.config import plan
    from labkit.errors import CompileError
    from labkit.runner import Runner
    from labkit.sweeps import get_sweep

    cfgs = get_sweep("tune-add-block").configs()
    group = [c for c in cfgs if c.group == cfgs[0].group]
    seen, threads = [], set()

    def fake(op, v, axes=()):
        threads.add(threading.get_ident())
        time.sleep(0.05)
        seen.append((v.name, tuple(axes)))
        if dict(axes).get("block") == 1024:
            raise CompileError("kernels/add.cu:1: error: too many threads")

    monkeypatch.setattr(labkit.launch, "library_for", fake)
    built = Runner().prebuild(group)
    want = {(c.variant.name, tuple(c.axes)) for c in group if not c.variant.is_torch}
    assert sorted(seen) == sorted(want) and len(threads) > 1
    assert built == len(want) - sum(dict(a).get("block") == 1024 for _, a in want)
    assert Runner().prebuild(plan("add", ["f32"], "f32", [(64, 64)])) == 0  # one library: nothing to gain


def test_generated_sources_written_by_threads_side_by_side(tmp_path, monkeypatch):
    """prebuild's threads generate a family's source at once: each writes through its own temporary
    file (a pid-named one was shared by threads, and one rename failed: FileNotFoundError)."""
    from concurrent.futures import ThreadPoolExecutor

    from labkit.build import generated
    from labkit.registry import family_exports

    monkeypatch.setenv("LABKIT_CACHE", str(tmp_path))
    exports = family_exports("add.cu")
    for round_ in range(20):
        with ThreadPoolExecutor(8) as pool:
            paths = list(pool.map(lambda _: generated("add.cu", exports, tag=f"-r{round_}"), range(8)))
        assert len(set(paths)) == 1 and paths[0].read_text().startswith('#include "add.cu"')
    assert not list((tmp_path / "gen").glob("*.tmp"))



def test_an_inline_library_is_named_by_its_source_content():
    """Two kernels of one name (two attendees' `mine`, an edited cell) never share a library name."""
    from labkit.registry import Variant

    v1, v2 = (Variant("mine", "f16", source=f"/c/inline/add_mine_{h}.cu", symbol="inline_add_mine") for h in ("a1", "b2"))
    assert (v1.library, v2.library) == ("inline_add_mine_a1", "inline_add_mine_b2")


def test_inline_sources_are_written_whole_while_others_read_them(tmp_path, monkeypatch):
    """Attendee processes on one box write the same kernel's source at once while others read it
    to send: a reader never sees a truncated (empty) file."""
    import threading

    from labkit.inline_kernel import from_text
    from labkit.registry import get_op

    monkeypatch.setenv("LABKIT_CACHE", str(tmp_path))
    text = "// kernel\n" * 20000
    path = from_text(get_op("add"), "mine", "f16", 8, "", text).source
    seen, stop = set(), threading.Event()

    def read():
        while not stop.is_set():
            seen.add(len(path.read_text()))

    readers = [threading.Thread(target=read) for _ in range(2)]
    for t in readers:
        t.start()
    for _ in range(200):
        from_text(get_op("add"), "mine", "f16", 8, "", text)
    stop.set()
    for t in readers:
        t.join()
    assert seen == {len(text)}


def test_one_library_built_in_two_caches_in_one_process_loads_from_both(fake_build, tmp_path, monkeypatch):
    """cpp_extension renames a module it built before in this process from another folder `<name>_v1`:
    labkit names the build by its key and must find `<name>.so` in each cache (the tile tests of
    sgemm, each worker with its own cache and a test with another, failed so on the GPU)."""
    src, ext = fake_build
    first = build.build_library("k", [src], "90")
    build._libraries.clear()
    monkeypatch.setenv("LABKIT_CACHE", str(tmp_path / "other-cache"))
    second = build.build_library("k", [src], "90")
    assert first.path != second.path and first.path.name == second.path.name
    assert second.handle().lk_probe() == 7 and ext.loads == 2
