"""Allocators built from the sources that crates.io packages bundle (catalog SOURCE_BUILT), once,
into alloclab's cache (ALLOCLAB_ALLOCATORS, default ~/.cache/alloclab/allocators).

cargo fetches the crates at their exact versions (the only download; offline when cargo's cache
has them) and says where their sources are (cargo metadata). Each allocator is then compiled the
way its upstream builds its own preload library: mimalloc's override library (src/static.c with
MI_MALLOC_OVERRIDE, as its CMake does), jemalloc's configure && make, snmalloc's CMake target
snmallocshim, rpmalloc's rpmallocwrap (ENABLE_PRELOAD, ENABLE_OVERRIDE), and Google's TCMalloc
from the crate's file list with its malloc overrides left in (the crate builds it with
TCMALLOC_INTERNAL_METHODS_ONLY, for Rust). The library is kept only if it exports malloc and
free and loads: a preloaded probe must map it and allocate. Each folder holds the library and
manifest.json (crate, versions, SHA-256, build time, what the probe saw); a build that fails
writes its reason there instead, so the catalog shows it refused, never missing.

A second setup with nothing changed is a no-op (the manifest names the crate version and the
recipe's revision; a library whose SHA-256 changed is rebuilt).
"""

from __future__ import annotations

import concurrent.futures
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

from alloclab.catalog.allocators import SOURCE_BUILT, Entry
from alloclab.core.cache import cache_dir
from alloclab.core.digest import sha256_file
from alloclab.core.errors import AlloclabError

RECIPE_REVISION = 1  # bump when a recipe changes what it builds
MANIFEST = "manifest.json"
ALLOC_SYMBOLS = ("malloc", "free", "realloc", "calloc", "memalign", "posix_memalign", "aligned_alloc",
                 "malloc_usable_size", "valloc", "pvalloc")


def home() -> Path:
    env = os.environ.get("ALLOCLAB_ALLOCATORS")
    if env:
        return Path(env)
    return cache_dir("allocators")


def folder(name: str) -> Path:
    return home() / name


def manifest(name: str) -> dict | None:
    """The record of `name`'s last build (or refusal), or None if it was never built here."""
    try:
        return json.loads((folder(name) / MANIFEST).read_text())
    except (OSError, ValueError):
        return None


def built() -> dict[str, dict]:
    """The source-built allocators whose library is in the cache, by name (their manifests)."""
    out = {}
    for name in SOURCE_BUILT:
        m = manifest(name)
        if m and not m.get("refused") and Path(m.get("path", "")).is_file():
            out[name] = m
    return out


def refusals() -> dict[str, str]:
    """Why a source-built allocator is refused here: its build or its load failed (from the last
    setup), by name."""
    return {n: m["refused"] for n in SOURCE_BUILT if (m := manifest(n)) and m.get("refused")}


PROVED = "proved.json"


def remember_proof(name: str, engine: str, reason: str) -> None:
    """Note the latest run in which catalog allocator `name` was proved (`alloclab allocators`
    shows it). The runs of a group end together, in threads and in processes: one writer at a
    time (a lock beside the file), each through its own temporary file; an unreadable note is
    started again. A note that cannot be written loses nothing measured."""
    p = home() / PROVED
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        with open(p.with_name(f".{p.name}.lock"), "w") as lock:  # each open its own lock: threads too
            fcntl.flock(lock, fcntl.LOCK_EX)
            seen = last_proofs()
            seen[name] = {"at": datetime.now(timezone.utc).isoformat(timespec="seconds"), "engine": engine,
                          "proof": reason}
            tmp = p.with_name(f".{p.name}.{os.getpid()}.{threading.get_ident()}")
            tmp.write_text(json.dumps(seen, indent=1) + "\n")
            os.replace(tmp, p)
    except OSError:
        pass


def last_proofs() -> dict[str, dict]:
    try:
        return json.loads((home() / PROVED).read_text())
    except (OSError, ValueError):
        return {}


def exported(path: str | Path) -> set[str]:
    """The dynamic symbols a shared object defines (nm -D), or an empty set if it is none."""
    try:
        out = subprocess.run(["nm", "-D", "--defined-only", str(path)], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return set()
    return {line.split()[-1].split("@")[0] for line in out.stdout.splitlines() if line.strip()} \
        if out.returncode == 0 else set()


# --- cargo: the crates' sources ------------------------------------------------------------------


def crate_sources(entries: list[Entry], log) -> dict[str, Path]:
    """Fetch the entries' crates at their exact versions with cargo and return each crate's
    source folder (cargo's own unpacked copy), by crate name."""
    d = home() / "_crates"
    d.mkdir(parents=True, exist_ok=True)
    deps = {e.crate.name: e.crate.version for e in entries if e.crate}
    (d / "Cargo.toml").write_text(
        '[package]\nname = "alloclab-allocator-sources"\nversion = "0.0.0"\nedition = "2021"\npublish = false\n\n'
        "[lib]\npath = \"lib.rs\"\n\n[dependencies]\n"
        + "".join(f'{n} = "={v}"\n' for n, v in sorted(deps.items())))
    (d / "lib.rs").write_text("")
    if shutil.which("cargo") is None:
        raise AlloclabError("cargo is not installed, so the allocators' sources cannot be fetched",
                            "run ./setup.sh (it installs Rust), then alloclab setup allocators")
    _run(["cargo", "fetch", "--manifest-path", str(d / "Cargo.toml")], d, log, timeout=900)
    meta = subprocess.run(["cargo", "metadata", "--format-version", "1", "--manifest-path", str(d / "Cargo.toml")],
                          capture_output=True, text=True, timeout=600)
    if meta.returncode != 0:
        raise AlloclabError(f"cargo metadata failed: {meta.stderr.strip()[-400:]}",
                            "check that crates.io (or cargo's offline cache) is reachable")
    pkgs = json.loads(meta.stdout)["packages"]
    return {p["name"]: Path(p["manifest_path"]).parent for p in pkgs if deps.get(p["name"]) == p["version"]}


# --- recipes: one per upstream build ---------------------------------------------------------------


def _jobs() -> int:
    return max(1, os.cpu_count() or 1)


def _run(argv: list[str], cwd: Path, log, timeout: float = 3600, env: dict | None = None) -> None:
    with open(log, "a") as f:
        f.write(f"$ {' '.join(argv)}\n")
        f.flush()
        p = subprocess.run(argv, cwd=cwd, stdout=f, stderr=subprocess.STDOUT, timeout=timeout,
                           env={**os.environ, **(env or {})})
    if p.returncode != 0:
        tail = Path(log).read_text(errors="replace").strip().splitlines()[-6:]
        raise AlloclabError(f"{argv[0]} failed (exit {p.returncode}): " + " | ".join(tail),
                            f"read the build log {log}")


def _cc() -> str:
    return os.environ.get("CC", "gcc")


def _cxx() -> str:
    return os.environ.get("CXX", "g++")


# each recipe builds `out` and returns the allocator's version as its sources say it (None: the
# catalog's word stands)


def _mimalloc(src: Path, work: Path, out: Path, log, options: dict) -> str | None:
    m = src / "c_src" / "mimalloc" / options["dir"]
    _run([_cc(), "-O3", "-DNDEBUG", "-fPIC", "-shared", "-DMI_MALLOC_OVERRIDE", "-DMI_SHARED_LIB",
          "-DMI_SHARED_LIB_EXPORT", "-fvisibility=hidden", "-ftls-model=initial-exec", "-fno-builtin-malloc",
          "-Wno-unknown-pragmas", f"-Wl,-soname,{out.name}", f"-I{m / 'include'}", str(m / "src" / "static.c"),
          "-o", str(out), "-lpthread"], work, log)
    v = re.search(r"#define MI_MALLOC_VERSION\s+(\d+)", (m / "include" / "mimalloc.h").read_text())
    n = int(v.group(1)) if v else 0
    return f"{n // 10000}.{n // 100 % 100}.{n % 100}"


def _jemalloc(src: Path, work: Path, out: Path, log, options: dict) -> str | None:
    b = work / "jemalloc"
    shutil.rmtree(b, ignore_errors=True)
    shutil.copytree(src / "jemalloc", b)
    shutil.copy(src / "configure" / "configure", b / "configure")
    version = src.name.split("+", 1)[1] if "+" in src.name else "unknown"
    _run(["sh", "./configure", f"--with-version={version}", "--disable-cxx", "--enable-doc=no", "--disable-static"],
         b, log)
    _run(["make", f"-j{_jobs()}", "build_lib_shared"], b, log)
    shutil.copy(b / "lib" / "libjemalloc.so.2", out)
    return version


def _snmalloc(src: Path, work: Path, out: Path, log, options: dict) -> str | None:
    b = work / "cmake"
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    _run(["cmake", "-S", str(src / "upstream"), "-B", str(b), *gen, "-DCMAKE_BUILD_TYPE=Release",
          "-DSNMALLOC_BUILD_TESTING=OFF"], work, log)
    _run(["cmake", "--build", str(b), "--target", "snmallocshim", "-j", str(_jobs())], work, log)
    shutil.copy(b / "libsnmallocshim.so", out)
    return None  # the crate's snapshot has no version of its own


def _rpmalloc(src: Path, work: Path, out: Path, log, options: dict) -> str | None:
    d = src / "rpmalloc" / "rpmalloc"
    _run([_cc(), "-O3", "-DNDEBUG", "-fPIC", "-shared", "-DENABLE_PRELOAD=1", "-DENABLE_OVERRIDE=1",
          "-Wno-attributes", f"-Wl,-soname,{out.name}", str(d / "rpmalloc.c"), "-o", str(out), "-lpthread"], work, log)
    first = (src / "rpmalloc" / "CHANGELOG").read_text().split()
    commit = src.name.split("+", 1)[1] if "+" in src.name else ""
    return f"{first[0]} ({commit})" if first else None


def _tcmalloc_google(src: Path, work: Path, out: Path, log, options: dict) -> str | None:
    """The crate's own list of sources (its build.rs), with tcmalloc.cc compiled as upstream
    does, so that its libc overrides (malloc, free, operator new, ...) are defined."""
    files = [f for f in re.findall(r'"(c_src/[^"]+\.(?:cc|S))"', (src / "build.rs").read_text())
             if "bridge" not in f] + ["c_src/tcmalloc/tcmalloc/tcmalloc.cc"]
    objs = work / "obj"
    objs.mkdir(parents=True, exist_ok=True)
    flags = ["-std=c++17", "-O2", "-fPIC", "-DNDEBUG", "-DNOMINMAX", "-DTCMALLOC_INTERNAL_8K_PAGES",
             "-fno-omit-frame-pointer", "-w", f"-I{src / 'c_src' / 'abseil-cpp'}", f"-I{src / 'c_src' / 'tcmalloc'}"]

    def compile_one(f: str) -> Path:
        o = objs / (f.replace("/", "_") + ".o")
        if not o.exists():
            tmp = o.with_suffix(".tmp.o")
            _run([_cxx(), *flags, "-c", str(src / f), "-o", str(tmp)], src, log)
            tmp.rename(o)
        return o

    with concurrent.futures.ThreadPoolExecutor(_jobs()) as pool:
        built_objs = list(pool.map(compile_one, files))
    _run([_cxx(), "-shared", f"-Wl,-soname,{out.name}", "-o", str(out), *map(str, built_objs), "-lpthread"], work, log)
    return None  # the crate's snapshot of Google's repository has no version of its own


RECIPES = {"mimalloc": _mimalloc, "jemalloc": _jemalloc, "snmalloc": _snmalloc, "rpmalloc": _rpmalloc,
           "tcmalloc-google": _tcmalloc_google}

PROBE = r"""
import ctypes, json, sys
blocks = [bytearray(64 + i % 4000) for i in range(200000)]
del blocks
maps = sorted({l.split()[-1] for l in open('/proc/self/maps') if len(l.split()) >= 6})
out = {"mapped": [m for m in maps if m == sys.argv[1]]}
try:
    f = ctypes.CDLL(None).MallocExtension_Internal_GetPerCpuCachesActive
    f.restype = ctypes.c_bool
    out["per_cpu_caches_active"] = bool(f())
except AttributeError:
    pass
print(json.dumps(out))
"""


def probe(path: Path, env: dict[str, str] | None = None) -> dict:
    """Preload the library into a short Python process that allocates: does it load, is it
    mapped, and (Google's TCMalloc) are its per-CPU caches active, by its own MallocExtension."""
    e = {**os.environ, **(env or {}), "LD_PRELOAD": str(path)}
    p = subprocess.run([sys.executable, "-c", PROBE, os.path.realpath(path)], capture_output=True, text=True,
                       timeout=120, env=e)
    if p.returncode != 0:
        return {"loads": False, "reason": (p.stderr.strip().splitlines() or ["no output"])[-1]}
    got = json.loads(p.stdout.strip().splitlines()[-1])
    if not got["mapped"]:
        return {"loads": False, "reason": f"{path} was not mapped: " + (p.stderr.strip()[-300:] or "the loader "
                                                                           "refused it")}
    return {"loads": True, **{k: v for k, v in got.items() if k != "mapped"}}


def _current(e: Entry, m: dict | None) -> bool:
    return bool(m and not m.get("refused") and m.get("crate_version") == e.crate.version
                and m.get("recipe_revision") == RECIPE_REVISION and Path(m.get("path", "")).is_file()
                and sha256_file(m["path"]) == m.get("sha256"))


def setup(names: list[str] | None = None, force: bool = False, notify=print) -> dict[str, dict]:
    """Build the named source allocators (all by default) unless already built; returns each
    one's manifest. A failure is recorded as a refusal with its reason, and setup goes on."""
    names = list(SOURCE_BUILT) if not names else names
    unknown = [n for n in names if n not in SOURCE_BUILT]
    if unknown:
        raise AlloclabError(f"alloclab setup allocators: {', '.join(unknown)} is not built from sources",
                            "source-built allocators: " + ", ".join(SOURCE_BUILT)
                            + " (Debian's come from apt-get: see alloclab allocators)")
    todo = [SOURCE_BUILT[n] for n in names if force or not _current(SOURCE_BUILT[n], manifest(n))]
    result = {n: manifest(n) for n in names}
    if not todo:
        return result
    home().mkdir(parents=True, exist_ok=True)
    log = home() / "build.log"
    t0 = time.monotonic()
    try:
        srcs = crate_sources(todo, log)
    except AlloclabError as err:
        srcs = {}
        fetch_error = str(err)
    for e in todo:
        notify(f"building {e.name} ({e.about}) from crate {e.crate.name} {e.crate.version}")
        result[e.name] = _build_one(e, srcs.get(e.crate.name), log,
                                    None if srcs else f"its sources could not be fetched: {fetch_error}")
        m = result[e.name]
        notify(f"  {e.name}: " + (f"refused: {m['refused']}" if m.get("refused")
                                  else f"{m['path']} ({m['build_s']:.0f} s, sha256 {m['sha256'][:12]})"))
    notify(f"allocators built in {time.monotonic() - t0:.0f} s into {home()}")
    return result


def _build_one(e: Entry, src: Path | None, log: Path, why_not: str | None) -> dict:
    d = folder(e.name)
    work = home() / "_work" / e.name
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    rec = {"name": e.name, "crate": e.crate.name, "crate_version": e.crate.version,
           "recipe": e.crate.recipe, "recipe_revision": RECIPE_REVISION,
           "built_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    t0 = time.monotonic()
    try:
        if src is None:
            raise AlloclabError(why_not or f"cargo did not fetch {e.crate.name} {e.crate.version}",
                                "run alloclab setup allocators again where crates.io or cargo's cache is reachable")
        work.mkdir(parents=True, exist_ok=True)
        out = d / e.crate.library
        upstream = RECIPES[e.crate.recipe](src, work, out, log, dict(e.crate.options)) or e.crate.upstream
        missing = [s for s in ("malloc", "free") if s not in exported(out)]
        if missing:
            raise AlloclabError(f"the built library does not export {', '.join(missing)}", "")
        from_probe = probe(out, dict(e.env))
        if not from_probe["loads"]:
            raise AlloclabError(f"the built library does not load here: {from_probe['reason']}", "")
        syms = exported(out)
        rec |= {"path": str(out), "upstream": upstream, "sha256": sha256_file(out), "bytes": out.stat().st_size,
                "exports": [s for s in ALLOC_SYMBOLS if s in syms], "probe": from_probe,
                "source_dir": str(src)}
    except (AlloclabError, OSError, subprocess.SubprocessError) as err:
        rec["refused"] = f"{e.name} could not be built or loaded here: {err}"
    rec["build_s"] = round(time.monotonic() - t0, 1)
    shutil.rmtree(work, ignore_errors=True)
    (d / MANIFEST).write_text(json.dumps(rec, indent=1) + "\n")
    return rec
