"""What the bench scripts share: their command line, and a server of their own to measure on."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from alloclab.catalog import targets  # noqa: E402
from alloclab.servers.server import Server  # noqa: E402


def arguments(doc: str, **defaults) -> argparse.ArgumentParser:
    """A bench script's parser: its docstring as the description, and one option per keyword
    (`load_repeats=2`: --load-repeats, an int defaulting to 2), typed as its default."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    for name, default in defaults.items():
        ap.add_argument("--" + name.replace("_", "-"), type=type(default), default=default)
    return ap


@contextlib.contextmanager
def started_server(t: targets.ServerTarget, profile: str,
                   prefix: str = "alloclab-bench-") -> Iterator[tuple[Server, Path]]:
    """A fresh server of target `t` with the settings of `profile`, in a folder of its own (the
    server and the folder, for the bench's own files): stopped and removed afterwards."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    os.chmod(work, 0o711)
    srv = Server(t, work / "data", work / "server.log", settings=targets.load_profile(t, profile))
    srv.initialise()
    srv.start({k: v for k, v in os.environ.items() if k != "LD_PRELOAD"})
    try:
        yield srv, work
    finally:
        srv.stop()
        shutil.rmtree(work, ignore_errors=True)
