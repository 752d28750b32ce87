import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from alloclab import allocators, driver  # noqa: E402


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
