import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import alloclab.workloads  # noqa: E402, F401  (registers the workloads, as every entry point does)
from alloclab.alloc import allocators  # noqa: E402
from alloclab.clients import driver  # noqa: E402

# The Ctrl-C tests send SIGINT to the studies they start. A suite started in the background by a
# script (`cmd &` ignores SIGINT) would hand that ignoring down to them, and they would finish
# instead of stopping: the children of this process get SIGINT's default back.
signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def driver_exe() -> Path:
    return driver.locate()


@pytest.fixture(scope="session")
def found():
    return allocators.discover()


@pytest.fixture
def scratch(tmp_path):
    d = tmp_path / "scratch"
    d.mkdir()
    return d


def need(found, *names):
    lacking = [n for n in names if n not in found]
    if lacking:
        pytest.fail(f"allocator(s) {lacking} not installed: run ./setup.sh (it installs them)")


@pytest.fixture(autouse=True)
def _no_user_preload(monkeypatch):
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    os.environ.pop("ALLOCLAB_DRIVER", None)


@pytest.fixture(scope="module")
def creep_shim(tmp_path_factory):
    """The planted-creep shim (driver/creep/creep.c), built once per module with cc."""
    cc = shutil.which("cc")
    if cc is None:
        pytest.fail("no C compiler (cc): install one (./setup.sh installs clang)")
    out = tmp_path_factory.mktemp("creep") / "liballoclab_creep.so"
    subprocess.run([cc, "-O2", "-shared", "-fPIC", "-pthread", "-Wall", "-Werror", "-o", str(out),
                    str(ROOT / "driver/creep/creep.c")], check=True)
    return out
