"""Third-party files that no package registry serves (any more): found in a vendor folder and
checked against their SHA-256 before use. The folders: ALLOCLAB_VENDOR if set; else the
checkout's ../shared/vendor and, for a clone of a local checkout, its origin's; then a cache
beside the studies' stack (~/.cache/alloclab/vendor), where every file found is kept for later
checkouts. See ../shared/vendor/README.md for where each file comes from."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from alloclab.core.cache import cache_dir
from alloclab.core.errors import AlloclabError

REPO_ROOT = Path(__file__).resolve().parents[3]


@dataclass(frozen=True)
class Vendored:
    """A file of the vendor folder (path relative to it) and its SHA-256."""

    file: str
    sha256: str

    @property
    def name(self) -> str:
        return Path(self.file).name


def cache() -> Path:
    """Where vendored files are kept once found: beside the stack (ALLOCLAB_STACK's parent)."""
    if os.environ.get("ALLOCLAB_STACK"):
        return Path(os.environ["ALLOCLAB_STACK"]).resolve().parent / "vendor"
    return cache_dir("vendor")


def dirs() -> list[Path]:
    if os.environ.get("ALLOCLAB_VENDOR"):
        return [Path(os.environ["ALLOCLAB_VENDOR"]), cache()]
    out = [REPO_ROOT.parent / "shared" / "vendor"]
    try:
        origin = subprocess.run(["git", "-C", str(REPO_ROOT), "config", "--get", "remote.origin.url"],
                                capture_output=True, text=True, timeout=10).stdout.strip()
        if origin and os.path.isdir(origin):
            out.append(Path(origin).resolve().parent / "shared" / "vendor")
    except (OSError, subprocess.SubprocessError):
        pass
    return out + [cache()]


def find(v: Vendored) -> Path:
    """A vendored file, checked against its SHA-256 (and kept in the cache for later checkouts)."""
    for d in dirs():
        p = d / v.file
        if p.is_file():
            check_sha(p, v)
            if d != cache():
                dest = cache() / v.file
                dest.parent.mkdir(parents=True, exist_ok=True)
                if not dest.is_file() or dest.stat().st_size != p.stat().st_size:
                    shutil.copy(p, f"{dest}.partial")
                    os.replace(f"{dest}.partial", dest)
            return p
    raise AlloclabError(f"{v.file} is not in any vendor folder ({', '.join(str(d) for d in dirs())})",
                        f"put {v.name} (SHA-256 {v.sha256}) in {cache() / Path(v.file).parent} or set "
                        "ALLOCLAB_VENDOR to the folder that has it (../shared/vendor beside the alloclab checkout)")


def check_sha(p: Path, v: Vendored) -> None:
    h = hashlib.sha256(p.read_bytes()).hexdigest()
    if h != v.sha256:
        raise AlloclabError(f"{p} has SHA-256 {h}, not {v.sha256}: refused",
                            f"replace it with the unmodified {v.name} (../shared/vendor/README.md says where it "
                            "comes from)")
