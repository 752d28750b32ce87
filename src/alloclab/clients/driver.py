"""Finding the native driver and turning a RunSpec into its command line."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from alloclab.alloc import allocators
from alloclab.core.cache import cargo_target
from alloclab.core.errors import AlloclabError
from alloclab.plan import RunSpec, workload

BINARY = "alloclab-driver"
REPO_ROOT = Path(__file__).resolve().parents[3]


def locate() -> Path:
    """ALLOCLAB_DRIVER, then next to this Python (a venv's bin), then PATH, then the checkout's build."""
    candidates = []
    if os.environ.get("ALLOCLAB_DRIVER"):
        candidates.append(Path(os.environ["ALLOCLAB_DRIVER"]))
    candidates.append(Path(sys.executable).parent / BINARY)
    on_path = shutil.which(BINARY)
    if on_path:
        candidates.append(Path(on_path))
    candidates.append(REPO_ROOT / "driver" / "target" / "release" / BINARY)
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return c
    raise AlloclabError("the native driver (alloclab-driver) is not built",
                        "run ./setup.sh, or: cargo build --release --manifest-path driver/Cargo.toml")


def locate_link(base: str) -> Path:
    """The driver built with `base` linked in (alloclab-driver-<base>, beside the driver), built
    from this checkout on its first use where it is not (./setup.sh test builds them all)."""
    main = locate().resolve()
    exe = main.parent / f"{BINARY}-{base}"
    if not (exe.is_file() and os.access(exe, os.X_OK)) and main.parent == REPO_ROOT / "driver" / "target" / "release":
        # built in cargo's cache and copied: the plain driver, which other studies may be starting, stays as it is
        _build(f"the driver with {base} linked in", ["--features", f"link-{base}"], BINARY, exe)
    if not (exe.is_file() and os.access(exe, os.X_OK)):
        raise AlloclabError(f"the driver with {base} linked in ({exe}) is not built",
                            f"run ./setup.sh test (it builds them), or: cargo build --release --manifest-path "
                            f"driver/Cargo.toml --features link-{base} and copy the binary to {exe.name}")
    return exe


def _build(what: str, features: list[str], built: str, copy_to: Path, manifest: str = "driver/Cargo.toml") -> None:
    """Build a part of the driver from this checkout with cargo, on its first use, with a progress
    line, in cargo's target outside the checkout (core.cache.cargo_target, as setup.sh does), and
    copy what it built (`built`, in its release folder) to `copy_to`; a checkout without the
    driver's sources or a machine without cargo builds nothing (the caller then says what to do)."""
    cargo = shutil.which("cargo") or str(Path.home() / ".cargo" / "bin" / "cargo")
    if not (REPO_ROOT / manifest).is_file() or not os.access(cargo, os.X_OK):
        return
    print(f"alloclab: building {what} on its first use (a few minutes)", file=sys.stderr, flush=True)
    target = cargo_target()
    p = subprocess.run([cargo, "build", "--release", "--quiet", "--manifest-path", str(REPO_ROOT / manifest),
                        "--target-dir", str(target), *features], capture_output=True, text=True,
                       env={"ROCKSDB_LIB_DIR": "/usr/lib/x86_64-linux-gnu", **os.environ})
    if p.returncode != 0:
        raise AlloclabError(f"building {what} failed: {p.stderr.strip()[-600:]}", "run ./setup.sh test, then try again")
    copy_to.parent.mkdir(parents=True, exist_ok=True)
    tmp = copy_to.with_name(copy_to.name + ".tmp")
    shutil.copy2(target / "release" / built, tmp)
    os.replace(tmp, copy_to)


ACCOUNT_LIBRARY = "liballoclab_account.so"


def account_library() -> Path | None:
    """The helper preloaded into servers to read the allocator's account (built beside the
    driver by ./setup.sh test, or on a server study's first run: ensure_account); None where it
    is not built."""
    try:
        lib = locate().resolve().parent / ACCOUNT_LIBRARY
    except AlloclabError:
        return None
    return lib if lib.is_file() else None


def ensure_account() -> str | None:
    """Preflight of a study with servers: the account helper built from this checkout if it is not;
    why it could not be, or None (the servers then run without the allocator's own account)."""
    if account_library() is None:
        try:
            _build("the allocator-account helper for servers", [], ACCOUNT_LIBRARY,
                   REPO_ROOT / "driver" / "target" / "release" / ACCOUNT_LIBRARY, "driver/account/Cargo.toml")
        except AlloclabError as e:
            return str(e)
    return None if account_library() else "the allocator-account helper (liballoclab_account.so) is not built"


@functools.lru_cache(maxsize=8)
def _link_proof(exe: str, mtime: float, base: str):
    text = allocators.binding_text([exe, "info"])
    return allocators.prove_binding(base, text, os.path.basename(exe))


def link_proof(exe: Path, base: str):
    """Where the linked driver's own malloc/free calls bind (a short start with
    LD_DEBUG=bindings); cached per binary."""
    return _link_proof(str(exe), exe.stat().st_mtime, base)


def for_allocator(alloc, exe: Path) -> Path:
    """The driver binary of a run: the linked build for name@link, else the driver."""
    return locate_link(alloc.base) if alloc.link else exe


def check_links(allocs) -> None:
    """Preflight: every link-time build exists and its calls bind to its allocator."""
    for a in allocs:
        if a.link:
            p = link_proof(locate_link(a.base), a.base)
            if not p.verified:
                raise AlloclabError(f"allocator {a.name} refused: {p.reason}",
                                    "rebuild it with ./setup.sh; a build whose calls do not bind to the allocator "
                                    "measures glibc")


@functools.lru_cache(maxsize=4)
def info(path: str | None = None) -> dict:
    exe = path or str(locate())
    try:
        out = subprocess.run([exe, "info"], capture_output=True, text=True, timeout=30, check=True)
        return json.loads(out.stdout)
    except (OSError, subprocess.SubprocessError, json.JSONDecodeError) as e:
        raise AlloclabError(f"{exe} info failed: {e}", "rebuild the driver: ./setup.sh") from e


def _engine_flags(options: dict) -> list[str]:
    out = []
    for k, v in sorted(options.items()):
        out += ["--" + k.replace("_", "-"), str(v)]
    return out


def reach(srv, database: str) -> list[str]:
    """How the driver, as a client, reaches a server alloclab started."""
    engine = "postgres" if srv.target.kind == "postgres" else "mariadb"
    return ["--engine", engine, "--socket", str(srv.socket), "--database", database]


def _window(c) -> list[str]:
    return ["--duration-s", repr(c.duration_s)] if c.duration_s is not None else ["--ops", str(c.ops)]


def argv(exe: str | Path, spec: RunSpec, events: Path, *, db_path: Path | None = None, srv=None,
         gate: bool = False) -> list[str]:
    """The driver's command line for a run: on its embedded engine in `db_path`, or as the client
    of the server `srv`; `gate`: it measures in turns (interleave.py). The one place that writes
    it; what is the workload's own (the server it reaches, its parameters) its workload says."""
    c = spec.cell
    wl = workload.of(c.workload)
    where = ["--engine", c.engine, "--db-path", str(db_path)] if srv is None else wl.driver_reach(c, srv)
    a = [str(exe), wl.driver_command(c), *where, "--workload", wl.driver_workload(c), "--threads", str(c.threads),
         "--seed", str(spec.seed), "--warmup-s", repr(spec.warmup_s), "--interval-ms", str(spec.interval_ms),
         "--events", str(events), *wl.driver_args(c)]
    a += _window(c) + (["--gate"] if gate and c.duration_s is not None else [])
    return a + (_engine_flags(spec.engine_options) if srv is None else [])


def load_argv(exe: str | Path, spec: RunSpec, events: Path, *, db_path: Path | None = None, srv=None) -> list[str]:
    """The driver's command line that loads a cell's TPC-C warehouses: into its embedded engine in
    `db_path`, or into the server `srv`."""
    c = spec.cell
    where = ["--engine", c.engine, "--db-path", str(db_path)] if srv is None else workload.of(c.workload).driver_reach(
        c, srv)
    p = c.params  # TPC-C's (workloads.tpcc.TPCCParams)
    return [str(exe), "tpcc-load", *where, "--warehouses", str(p.warehouses), "--loaders", str(p.loaders), "--seed",
            str(spec.study_seed), "--events", str(events)] + (_engine_flags(spec.engine_options) if srv is None else [])
