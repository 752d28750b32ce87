"""What machine a study ran on, and with which versions: stored with every study."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import socket
import subprocess
import sys
from pathlib import Path

import alloclab
from alloclab.alloc import allocators


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _meminfo_bytes() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def filesystem_of(path: Path) -> dict:
    """Mount point, device and type of the filesystem holding `path`."""
    path = Path(path).resolve()
    best = {"mount": "/", "type": "unknown", "device": "unknown"}
    try:
        for line in Path("/proc/mounts").read_text().splitlines():
            dev, mnt, fstype = line.split()[:3]
            if (str(path) == mnt or str(path).startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best["mount"]):
                best = {"mount": mnt, "type": fstype, "device": dev}
    except OSError:
        pass
    return best


def _git_commit() -> str | None:
    root = Path(__file__).resolve().parents[3]
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


# A machine's own name for what no file shows (a rack, a host generation, a cloud placement):
# two machines that differ in it never pair and their answers are given apart
LABEL_ENV = "ALLOCLAB_MACHINE_LABEL"


def describe(data_dir: Path, driver_info: dict | None) -> dict:
    return {
        **({"label": os.environ[LABEL_ENV]} if os.environ.get(LABEL_ENV) else {}),
        "hostname": socket.gethostname(),
        "cpu_model": _cpu_model(),
        "cores": os.cpu_count(),
        "kernel": platform.release(),
        "os": _os_release(),
        "memory_bytes": _meminfo_bytes(),
        "data_filesystem": filesystem_of(data_dir),
        "python": sys.version.split()[0],
        "alloclab_version": alloclab.__version__,
        "alloclab_commit": _git_commit(),
        "driver": driver_info,
        "allocators": allocators.library_version_list(),
        "load_average": os.getloadavg(),
    }


def _os_release() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    return platform.platform()


# what makes two machines comparable: the one list. Runs on machines that differ in any of these
# are never paired, a comparison that pools them says so, and a before/after names them.
MACHINE_KEYS = ("cpu_model", "cores", "memory_bytes", "kernel", "os")
FINGERPRINT_KEYS = MACHINE_KEYS + ("alloclab_commit",)


def comparable(described: dict) -> dict:
    """What of a machine's description two machines must share to be one machine (MACHINE_KEYS, its
    memory to the GiB: the kernel's reserve varies)."""
    ident = {k: described.get(k) for k in MACHINE_KEYS}
    ident["memory_gib"] = round((ident.pop("memory_bytes") or 0) / 2**30)
    return ident


def fingerprint(described: dict) -> str:
    """A short digest of what makes this machine's figures comparable with another's."""
    ident = comparable(described) | {k: described.get(k) for k in FINGERPRINT_KEYS if k not in MACHINE_KEYS}
    ident["driver_version"] = (described.get("driver") or {}).get("driver_version")
    if described.get("label"):  # only where set: the fingerprints of unlabelled machines stay as they were
        ident["label"] = described["label"]
    return hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()[:12]


def in_words_alloclab(m: dict) -> str:
    """A machine in a few words and the alloclab it ran (its commit, where known)."""
    commit = (m.get("alloclab_commit") or "")[:7]
    return in_words(m) + (f", alloclab {commit}" if commit else "")


def in_words(m: dict) -> str:
    """A machine in a few words, as an answer names where it holds: CPU model, cores, kernel."""
    words = f"{m.get('cpu_model') or 'an unknown CPU'}, {m.get('cores') or '?'} cores, kernel {m.get('kernel') or '?'}"
    return f"{m['label']}: {words}" if m.get("label") else words
