"""The studies' stack at run time: where its root is, what its setup recorded (state.json), and
running commands inside it. Every command inside the root runs in a private mount namespace
(`unshare --mount`): /proc and /dev are mounted there and vanish with the last process, so no
mount is ever left behind on the host. Making the root is servers.stack's (`alloclab setup stack`).
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import threading
from dataclasses import replace
from pathlib import Path

from alloclab.catalog.allocators import KNOWN, SOURCE_BUILT
from alloclab.catalog.tidesql import BUILDS, build
from alloclab.core.cache import cache_dir
from alloclab.core.errors import AlloclabError
from alloclab.host.processes import kill_group

SUITE = "trixie"
MARIADB_VERSION = "11.8.6"  # Debian's MariaDB for trixie, the seeds' server (../shared/vendor/mariadb-11.8.6/)


def home() -> Path:
    if os.environ.get("ALLOCLAB_STACK"):
        return Path(os.environ["ALLOCLAB_STACK"]).resolve()
    return cache_dir("stack")


def root() -> Path:
    return home() / "root"


# --- state --------------------------------------------------------------------------------

def state() -> dict:
    try:
        return json.loads((home() / "state.json").read_text())
    except (OSError, json.JSONDecodeError):
        return {"steps": {}, "builds": {}}


def save_state(st: dict) -> None:
    home().mkdir(parents=True, exist_ok=True)
    tmp = home() / "state.json.tmp"
    tmp.write_text(json.dumps(st, indent=1, sort_keys=True))
    os.replace(tmp, home() / "state.json")


def ready() -> bool:
    return state().get("ready", False) and (root() / "usr/sbin/mariadbd").exists()


def built(name: str | None) -> dict | None:
    """What setup recorded of a TideSQL build (its versions, plugin file and plugin version), or
    None if it is not built yet."""
    rec = state().get("builds", {}).get(build(name).name)
    if rec and (root() / plugin_dir().lstrip("/") / rec["plugin"]).exists():
        return rec
    return None


def info() -> dict:
    """What the stack has: versions, plugins, allocators (root-relative paths)."""
    st = state()
    if not ready():
        raise AlloclabError(f"the MariaDB {MARIADB_VERSION} stack is not set up ({home()})",
                            "run: alloclab setup stack (about 2 minutes; ./setup.sh test does it too)")
    return st


STEPS = ("root", "packages", "headers", "tidesql", "tidesdb-mimalloc", "check")


def missing_steps() -> list[str]:
    done = state()["steps"]
    return [s for s in STEPS if s not in done]


# --- running inside the root ----------------------------------------------------------------

def in_root_argv(argv: list[str], env: dict[str, str] | None = None, cwd: str = "/",
                 binds: list[str] = ()) -> list[str]:
    """A command that runs `argv` inside the root, in a private mount namespace with /proc and
    /dev mounted and each folder of `binds` bound at its own path (all gone with the namespace).
    The command execs down to `argv`, so the PID of the process started is the PID of `argv`,
    and `env` (e.g. LD_PRELOAD of an in-root library) reaches `argv` alone."""
    r = str(root())
    env_args = ["env", "-i", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"]
    env_args += [f"{k}={v}" for k, v in (env or {}).items()]
    script = ('set -e; r="$1"; d="$2"; n="$3"; shift 3; mount -t proc proc "$r/proc"; mount --rbind /dev "$r/dev"; '
              'while [ "$n" -gt 0 ]; do mount --bind "$1" "$r$1"; shift; n=$((n - 1)); done; '
              'exec chroot "$r" sh -c \'cd "$0" && exec "$@"\' "$d" "$@"')
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "alloclab-root", r, cwd,
            str(len(binds)), *binds,
            *env_args, *argv]


def in_root_path(host_path: str) -> str:
    """The path inside the root of a file under it."""
    return "/" + str(Path(host_path).relative_to(root()))


_MOUNTPOINTS = threading.Lock()  # runs in turns make and remove theirs at the same time
_MADE: set[Path] = set()  # the folders inside the root that alloclab made


def make_mountpoint(folder: Path) -> list[Path]:
    """Create the mount point of `folder` inside the root; returns the folders created."""
    with _MOUNTPOINTS:
        created = []
        p = root() / str(folder).lstrip("/")
        while not p.exists():
            created.append(p)
            p = p.parent
        for d in reversed(created):
            d.mkdir()
        _MADE.update(created)
        return created


def remove_mountpoint(created: list[Path]) -> None:
    """Remove a mount point, and the folders above it that alloclab made and no other run still
    uses (two runs up together share their study's folder: the last to leave removes it)."""
    with _MOUNTPOINTS:
        for d in created:
            try:
                d.rmdir()
            except OSError:
                return
            _MADE.discard(d)
        p = created[-1].parent if created else None
        while p in _MADE:
            try:
                p.rmdir()
            except OSError:
                return
            _MADE.discard(p)
            p = p.parent


def run_group(argv: list[str], log, timeout: float) -> int:
    """Run a command in its own process group; on Ctrl-C, a timeout or any error the whole
    group is killed (a build's compilers too), so that a stopped setup leaves nothing running."""
    p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                         start_new_session=True)
    try:
        return p.wait(timeout)
    except BaseException:
        kill_group(p.pid)
        p.wait()
        raise


def run_in_root(argv: list[str], log, env: dict[str, str] | None = None, cwd: str = "/",
                timeout: float = 3600) -> None:
    log.write(f"\n$ (in root) {' '.join(argv)}\n".encode())
    log.flush()
    rc = run_group(in_root_argv(argv, env, cwd), log, timeout)
    if rc != 0:
        raise AlloclabError(f"in the {SUITE} root, `{' '.join(argv)[:120]}` failed (exit {rc})",
                            f"see {home() / 'setup.log'}; then run alloclab setup stack again (it resumes)")


def root_output(argv: list[str]) -> str:
    p = subprocess.run(in_root_argv(argv), capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise AlloclabError(f"in the {SUITE} root, `{' '.join(argv)}` failed: {p.stderr.strip()[-300:]}")
    return p.stdout


def plugin_dir() -> str:
    dirs = glob.glob(str(root() / "usr/lib/*/mysql/plugin")) + glob.glob(str(root() / "usr/lib/mysql/plugin"))
    if not dirs:
        raise AlloclabError("MariaDB's plugin directory is missing from the stack", "run alloclab setup stack again")
    return "/" + str(Path(dirs[0]).relative_to(root()))


def describe() -> str:
    """One line for `alloclab doctor`."""
    st = state()
    if ready():
        steps = st["steps"]
        have = ", ".join(f"@{n} ({BUILDS[n].describe()}, plugin {r.get('plugin_version')})"
                         for n, r in sorted(st.get("builds", {}).items()) if n in BUILDS)
        return f"ready at {home()}: MariaDB {steps['check'].get('server_version', '?')}, TideSQL builds {have}"
    miss = missing_steps()
    return (f"not set up at {home()} (missing steps: {', '.join(miss)}); "
            "run alloclab setup stack")


# --- allocators inside the root -----------------------------------------------------------------



def root_library(base: str) -> str | None:
    """The in-root path of an allocator's library, or None if the root lacks it."""
    for soname in KNOWN[base].root_sonames if base in KNOWN else ():
        for d in ("usr/lib/x86_64-linux-gnu", "lib/x86_64-linux-gnu", "usr/lib"):
            p = root() / d / soname
            if p.exists():
                return "/" + str(p.relative_to(root()))
    return None


def allocator(alloc):
    """The run's allocator as a stack server uses it: the root's own library of that allocator
    (its host path, which /proc/PID/maps shows), with the root's package version; a source-built
    allocator is copied into the root (`place`)."""
    st = info()
    have = st["steps"]["check"]["allocators"]
    if alloc.link:
        raise AlloclabError(f"allocator {alloc.name}: link-time allocators do not apply to stack servers",
                            "use the preloaded allocator (the studies preloaded the server too)")
    if alloc.base in SOURCE_BUILT and alloc.path:
        # built on this host against an older glibc than the root's, which loads it: copied in
        return replace(alloc, path=str(place(Path(alloc.path))))
    if alloc.base not in have:
        raise AlloclabError(f"allocator {alloc.name}: the {SUITE} stack has no {alloc.base}",
                            "use one of: " + ", ".join(sorted(have)))
    lib = have[alloc.base]["path"]
    return replace(alloc, path=str(root() / lib.lstrip("/")) if lib else None, version=have[alloc.base]["version"])


def place(lib: Path) -> Path:
    """A host library copied into the root (/opt/alloclab), for a stack server to preload;
    copied again when it changed. Returns its host path."""
    dest = root() / "opt" / "alloclab" / lib.name
    if not dest.exists() or dest.stat().st_size != lib.stat().st_size or dest.stat().st_mtime < lib.stat().st_mtime:
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{dest.name}.tmp-{os.getpid()}")
        shutil.copy2(lib, tmp)
        os.replace(tmp, dest)
    return dest
