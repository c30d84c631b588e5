"""Set-up from Python alone (no GPU, no system CUDA toolkit).

toolkit.tool()'s search order and error text on fake toolkits; the PyPI wheels' nvcc compiling a
kernel family for sm_80 and sm_90; and (marked `setup`: a minute or more, CI runs it; deselect with
-m 'not gpu and not setup') README's commands in a fresh venv on a PATH without any system nvcc."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from labkit import toolkit
from labkit.errors import ToolMissingError

ROOT = Path(__file__).resolve().parent.parent
CUDA_PROGS = {"nvcc", "ptxas", "fatbinary", "nvlink", "cudafe++", "bin2c", "__nvcc_device_query", "nvprune",
              "cuobjdump", "nvdisasm", "cu++filt"}


def _exe(path: Path, body: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def path_without_cuda(path: str, scratch: Path) -> str:
    """`path` less its CUDA folders (*/cuda/bin, */cuda-13.0/bin); a folder that mixes CUDA's programs
    with others (/usr/local/bin with an nvcc wrapper) becomes a folder of links to the others (as .ci/run)."""
    out = []
    for i, d in enumerate(p for p in path.split(os.pathsep) if p):
        if re.search(r"/cuda(-[^/]*)?(/|$)", d):
            continue
        if os.path.exists(os.path.join(d, "nvcc")):
            keep = scratch / f"path{i}"
            keep.mkdir(parents=True, exist_ok=True)
            for f in Path(d).iterdir():
                if f.name not in CUDA_PROGS and not (keep / f.name).exists():
                    (keep / f.name).symlink_to(f)
            d = str(keep)
        out.append(d)
    return os.pathsep.join(out)


@pytest.fixture
def bare(monkeypatch, tmp_path):
    """No toolkit anywhere: empty PATH, no $CUDA_HOME/$CUDA_PATH, no wheels, no /usr/local/cuda."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-path"))
    monkeypatch.setattr(toolkit, "DEFAULT_HOME", str(tmp_path / "no-default-cuda"))
    monkeypatch.setattr(toolkit, "wheel_dirs", lambda: [])
    monkeypatch.setenv("LABKIT_CACHE", str(tmp_path / "cache"))
    return tmp_path


def test_search_order_cuda_home_cuda_path_path_wheels_default(bare, monkeypatch):
    t = bare
    homes = {"$CUDA_HOME": t / "home" / "bin", "$CUDA_PATH": t / "cpath" / "bin", "PATH": t / "pathdir",
             "wheel": t / "site" / "nvidia" / "cu13" / "bin", "/usr/local/cuda": t / "default" / "bin"}
    for d in homes.values():
        _exe(d / "nvcc")
    monkeypatch.setenv("CUDA_HOME", str(t / "home"))
    monkeypatch.setenv("CUDA_PATH", str(t / "cpath"))
    monkeypatch.setenv("PATH", os.pathsep.join([str(t / "empty-path"), str(homes["PATH"])]))
    monkeypatch.setattr(toolkit, "wheel_dirs", lambda: [homes["wheel"]])
    monkeypatch.setattr(toolkit, "DEFAULT_HOME", str(t / "default"))
    assert [w for w, _ in toolkit.search_dirs()] == ["$CUDA_HOME", "$CUDA_PATH", "PATH", "PATH", "wheel",
                                                     str(t / "default")]
    for where, d in homes.items():
        found = toolkit.locate("nvcc")
        assert found[1] == d / "nvcc" and toolkit.tool("nvcc") == str(d / "nvcc"), where
        (d / "nvcc").unlink()  # the next place in the order takes over
    assert toolkit.locate("nvcc") is None
    with pytest.raises(ToolMissingError):
        toolkit.tool("nvcc")


def test_each_program_is_looked_up_on_its_own(bare, monkeypatch):
    """A $CUDA_HOME without cuobjdump (a conda or minimal toolkit) still gets the wheel's."""
    t = bare
    _exe(t / "home" / "bin" / "nvcc")
    _exe(t / "wheel" / "bin" / "cuobjdump")
    monkeypatch.setenv("CUDA_HOME", str(t / "home"))
    monkeypatch.setattr(toolkit, "wheel_dirs", lambda: [t / "wheel" / "bin"])
    assert toolkit.tool("nvcc") == str(t / "home" / "bin" / "nvcc")
    assert toolkit.locate("cuobjdump") == ("wheel", t / "wheel" / "bin" / "cuobjdump")


def test_a_folder_or_a_file_that_cannot_run_is_not_a_tool(bare, monkeypatch):
    t = bare
    (t / "a" / "nvcc").mkdir(parents=True)
    (t / "b").mkdir()
    (t / "b" / "nvcc").write_text("not executable")
    _exe(t / "c" / "nvcc")
    monkeypatch.setenv("PATH", os.pathsep.join(str(t / x) for x in "abc"))
    assert toolkit.tool("nvcc") == str(t / "c" / "nvcc")


def test_missing_tool_says_where_it_looked_and_what_to_install(bare):
    with pytest.raises(ToolMissingError) as e:
        toolkit.tool("nvcc")
    msg = str(e.value)
    assert msg.startswith("nvcc not found on PATH or in the CUDA toolkit")
    for part in ("$CUDA_HOME/bin", "$CUDA_PATH/bin", "PATH", "nvidia-* wheels", "/bin",
                 "pip install nvidia-cuda-nvcc nvidia-cuda-cccl", "`cuda` extra"):
        assert part in msg, part
    with pytest.raises(ToolMissingError, match="pip install nvidia-cuda-cuobjdump"):
        toolkit.tool("cuobjdump")
    with pytest.raises(ToolMissingError, match="pip install nvidia-cuda-nvdisasm"):
        toolkit.tool("nvdisasm")
    with pytest.raises(ToolMissingError) as e:
        toolkit.tool("cu++filt")  # no wheel carries it: no pip hint
    assert "pip install" not in str(e.value)
    with pytest.raises(ToolMissingError, match="kernels need nvcc to build"):
        toolkit.cuda_home()


def test_wheel_dirs_are_the_nvidia_namespace_bin_folders(monkeypatch, tmp_path):
    site = tmp_path / "site"
    for pkg in ("cu13", "cuda_nvcc"):
        _exe(site / "nvidia" / pkg / "bin" / "nvcc")
    (site / "nvidia" / "cu13" / "include").mkdir()
    monkeypatch.syspath_prepend(str(site))
    dirs = toolkit.wheel_dirs()
    ours = [d for d in dirs if tmp_path in d.parents]
    assert ours == [site / "nvidia" / "cu13" / "bin", site / "nvidia" / "cuda_nvcc" / "bin"]


def test_cuda_home_of_the_wheels_gets_a_linkable_libcudart(bare, monkeypatch):
    """The wheels ship lib/libcudart.so.13 only; torch's cpp_extension links -lcudart from
    $CUDA_HOME/lib64 or lib, so cuda_home() is a cache folder linking to the wheel's with
    lib64/libcudart.so added."""
    top = bare / "site" / "nvidia" / "cu13"
    _exe(top / "bin" / "nvcc")
    (top / "include").mkdir(parents=True)
    (top / "include" / "cuda_runtime.h").write_text("")
    (top / "lib").mkdir()
    (top / "lib" / "libcudart.so.13").write_text("")
    (top / "nvvm" / "bin").mkdir(parents=True)
    monkeypatch.setattr(toolkit, "wheel_dirs", lambda: [top / "bin"])
    home = toolkit.cuda_home()
    assert (bare / "cache") in home.parents
    assert (home / "lib64" / "libcudart.so").resolve() == top / "lib" / "libcudart.so.13"
    for d in ("bin", "include", "nvvm", "lib"):
        assert (home / d).resolve() == top / d
    assert (home / "include" / "cuda_runtime.h").exists() and os.access(home / "bin" / "nvcc", os.X_OK)
    assert toolkit.cuda_home() == home  # stable, and a second call rewrites nothing


def test_cuda_home_of_a_toolkit_and_of_a_wrapper_script(bare, monkeypatch):
    real = bare / "cuda-13.0"
    _exe(real / "bin" / "nvcc")
    (real / "include").mkdir()
    (real / "include" / "cuda_runtime.h").write_text("")
    (real / "lib64").mkdir()
    (real / "lib64" / "libcudart.so").write_text("")
    monkeypatch.setenv("CUDA_HOME", str(real))
    assert toolkit.cuda_home() == real
    # /usr/local/bin/nvcc as a script that execs the real one: nvcc -dryrun names its own folder
    monkeypatch.delenv("CUDA_HOME")
    _exe(bare / "wrap" / "bin" / "nvcc", f"echo '#$ _HERE_={real}/bin' >&2")
    monkeypatch.setenv("PATH", str(bare / "wrap" / "bin"))
    toolkit._dryrun_home.cache_clear()
    assert toolkit.cuda_home() == real


def _wheel_only(monkeypatch, tmp_path):
    """This process's toolkit search with the system toolkit out of reach; skips without the wheels."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PATH", path_without_cuda(os.environ.get("PATH", ""), tmp_path / "path"))
    monkeypatch.setattr(toolkit, "DEFAULT_HOME", str(tmp_path / "no-default-cuda"))
    monkeypatch.setenv("LABKIT_CACHE", str(tmp_path / "cache"))
    found = toolkit.locate("nvcc")
    if not found or found[0] != "wheel":
        pytest.skip(f"nvcc does not come from the PyPI wheels here ({found}): pip install -e '.[cuda]'")
    return found[1]


@pytest.mark.parametrize("arch", ["80", "90"])
def test_wheel_nvcc_compiles_a_kernel_family(monkeypatch, tmp_path, arch):
    """The test extra's wheels alone compile add.cu's generated form (cuda_runtime.h, cuda_fp16.h,
    cuda_bf16.h, <nv/target> found through the wheel's nvcc.profile) and cuobjdump reads it."""
    nvcc = _wheel_only(monkeypatch, tmp_path)
    assert toolkit.locate("cuobjdump")[0] == "wheel"
    assert sys.prefix in str(nvcc) or "site-packages" in str(nvcc)
    from labkit import sass

    df = sass.report("add", arch)
    assert len(df) and {"f16x8_pack", "bf16x8_pack"} <= set(df["variant"])
    assert (df["registers"] > 0).all()


def test_wheel_cuda_home_links_with_lcudart(monkeypatch, tmp_path):
    """What torch's cpp_extension does with cuda_home() on a GPU machine with only the wheels:
    -L$CUDA_HOME/lib64 -lcudart (without the lib64/libcudart.so link: `cannot find -lcudart`)."""
    _wheel_only(monkeypatch, tmp_path)
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler")
    home = toolkit.cuda_home()
    assert (home / "include" / "cuda_runtime.h").exists()
    (tmp_path / "x.c").write_text("int f(void) { return 0; }\n")
    r = subprocess.run([cc, "-shared", "-fPIC", str(tmp_path / "x.c"), f"-L{home / 'lib64'}", "-lcudart",
                        "-o", str(tmp_path / "x.so")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


# --- README's commands in a fresh venv -----------------------------------------------------------

def readme_commands() -> tuple[str, str]:
    """README's two commands: the main job (`pip install ... '.[lab]' && labkit`) and the install
    part of the test command (before its first `&&`)."""
    lines = [ln for ln in (ROOT / "README.md").read_text().splitlines() if ln.startswith("pip install torch")]
    lab = next(ln for ln in lines if "'.[lab]'" in ln)
    test = next(ln for ln in lines if "'.[test]'" in ln)
    return re.sub(r"\s+#\s.*$", "", lab).strip(), test.split(" && ")[0].strip()


def test_readme_commands_are_found():
    lab, test = readme_commands()
    assert lab.startswith("pip install torch==2.13.0 ") and lab.endswith("&& labkit")
    assert test == "pip install torch==2.13.0 -e '.[test]'"


@pytest.mark.setup
@pytest.mark.timeout(1800)
def test_readme_commands_in_a_fresh_venv_without_system_nvcc(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    bin_ = venv / "bin"
    env = {k: v for k, v in os.environ.items()
           if k not in ("CUDA_HOME", "CUDA_PATH", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")
           and not k.startswith(("PYTEST_", "LABKIT_"))}
    env.update(PATH=os.pathsep.join([str(bin_), path_without_cuda(os.environ.get("PATH", ""), tmp_path / "path")]),
               VIRTUAL_ENV=str(venv), LABKIT_CACHE=str(tmp_path / "cache"), PIP_DISABLE_PIP_VERSION_CHECK="1",
               PIP_PROGRESS_BAR="off")  # pip's own cache (~/.cache/pip) stays on: repeat runs reuse the wheels

    def sh(cmd: str, timeout: float = 900) -> str:
        r = subprocess.run(["bash", "-c", cmd], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
        out = r.stdout + r.stderr
        assert r.returncode == 0, f"`{cmd}` exited {r.returncode}:\n{out[-6000:]}"
        return out

    assert sh("command -v nvcc || echo none").strip() == "none"
    lab, test = readme_commands()
    out = sh(lab)  # the main job: installs the lab extra, then `labkit` (no GPU: the recorded results)
    assert "recorded" in out.lower()
    sh(test)  # the test command's install part: adds the test extra and, with it, the CUDA wheels
    assert sh("command -v labkit").strip() == str(bin_ / "labkit")
    assert re.search(r"^labkit \S+", sh("labkit --version"), re.M)
    assert "recorded" in sh("labkit").lower()
    where = sh("python -c \"from labkit import toolkit; w, p = toolkit.locate('nvcc'); print(w, p)\"").split()
    assert where[0] == "wheel" and Path(where[1]).is_relative_to(venv), where
    out = sh("labkit sass add")
    assert "f16x8_pack" in out and "add_kernel<__half, 8, 16>" in out
