"""The allocator registry: what is installed, how to name it, how to inject it, how to prove it.

One injection path: LD_PRELOAD of an absolute path, into the process under test only.
Every run proves its allocator from /proc/PID/maps; nothing else (a server variable, an
environment variable, a log line) counts as proof.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass, field, replace
from pathlib import Path

from alloclab.alloc import build, environment, tuning
from alloclab.catalog.allocators import BY_NAME, CATALOG, CRATE, FOREIGN_LIBRARIES, KNOWN, LINKABLE
from alloclab.core.digest import sha256_file
from alloclab.core.errors import AlloclabError

# Basenames that mean "some allocator other than glibc is mapped".
FOREIGN_ALLOCATOR = re.compile(r"lib(" + "|".join(map(re.escape, FOREIGN_LIBRARIES)) + r")[^/]*\.so")

# link-time builds of the driver (catalog LINKABLE): the tidesdb crate's allocator features
# (alloclab-driver-<base>)
LINK_SUFFIX = "@link"

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]*$")
ENV_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def library_dirs() -> list[str]:
    dirs = []
    multiarch = sysconfig.get_config_var("MULTIARCH") or "x86_64-linux-gnu"
    for d in (f"/usr/lib/{multiarch}", f"/lib/{multiarch}", "/usr/lib64", "/usr/lib", "/usr/local/lib", "/lib64"):
        if os.path.isdir(d) and d not in dirs:
            dirs.append(d)
    return dirs


def _find_library(sonames: tuple[str, ...]) -> str | None:
    for soname in sonames:
        for d in ([""] if os.path.isabs(soname) else library_dirs()):
            p = os.path.join(d, soname) if d else soname
            if os.path.exists(p):
                return p
    return None


def _dpkg_version_of(path: str) -> str | None:
    try:
        owner = subprocess.run(["dpkg-query", "-S", os.path.realpath(path)], capture_output=True, text=True,
                               timeout=10)
        if owner.returncode != 0:
            return None
        pkg = owner.stdout.split(":")[0].strip()
        ver = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], capture_output=True, text=True,
                             timeout=10)
        return f"{pkg} {ver.stdout.strip()}" if ver.returncode == 0 else pkg
    except (OSError, subprocess.SubprocessError):
        return None


def _version_of(base: str, path: str | None) -> str:
    if base == "glibc" or path is None:
        return os.confstr("CS_GNU_LIBC_VERSION") or "glibc"
    v = _dpkg_version_of(path)
    if v:
        return v
    m = re.search(r"\.so\.([0-9.]+)$", os.path.realpath(path))
    return m.group(1) if m else "unknown"


@dataclass(frozen=True)
class Allocator:
    """One allocator as a run uses it: a label, a library (None for glibc) and its environment
    (the catalog's, e.g. tcmalloc-google's, then the variant's tuning)."""

    name: str
    base: str  # the catalog name (or the label of a library given by path)
    path: str | None
    env: tuple[tuple[str, str], ...] = ()
    version: str = ""
    link: bool = False  # linked into a separate driver binary (name@link), never preloaded
    source: str = ""  # where it came from: the Debian package, or the crate built and the library's SHA-256

    def target_env(self, base_env: dict[str, str]) -> dict[str, str]:
        """The environment of the process under test: the caller's, cleaned of any preload and
        allocator tuning, plus this allocator's preload (none when it is linked in) and tuning."""
        return environment.under_test(self.path if not self.link else None, dict(self.env), base_env)

    def to_json(self) -> dict:
        return {"name": self.name, "base": self.base, "path": self.path, "env": dict(self.env),
                "version": self.version, "link": self.link, "source": self.source}

    @classmethod
    def from_json(cls, a: dict) -> Allocator:
        return cls(name=a["name"], base=a["base"], path=a.get("path"), env=tuple((a.get("env") or {}).items()),
                   version=a.get("version", ""), link=a.get("link", False), source=a.get("source", ""))


@dataclass
class Proof:
    verified: bool
    reason: str
    mapped: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"verified": self.verified, "reason": self.reason, "mapped_libraries": self.mapped}


def _built_allocator(name: str, m: dict) -> Allocator:
    e = BY_NAME[name]
    return Allocator(name=name, base=name, path=m["path"], env=e.env, version=m.get("upstream", e.crate.upstream),
                     source=f"built from crate {m['crate']} {m['crate_version']}, sha256 {m['sha256']}")


def discover(versions: bool = False) -> dict[str, Allocator]:
    """Every catalog allocator usable on this machine, by name: Debian's found by soname, the
    source-built ones in alloclab's cache (alloclab setup allocators). Package versions
    (dpkg-query) only when asked: that is preflight's work (`checked`)."""
    found = {}
    made = build.built()
    for e in CATALOG:
        if e.refused:
            continue
        if e.source == CRATE:
            if e.name in made:
                found[e.name] = _built_allocator(e.name, made[e.name])
            continue
        path = None if e.name == "glibc" else _find_library(e.sonames)
        if e.name == "glibc" or path:
            found[e.name] = Allocator(name=e.name, base=e.name, path=path, env=e.env,
                                      version=_version_of(e.name, path) if versions else "",
                                      source=f"Debian package {e.package}")
    return found


def checked(alloc: Allocator) -> Allocator:
    """Preflight: the allocator's library is there and is an allocator (it exports malloc and
    free), and its version (the package that installed it) is known. Raises AlloclabError."""
    spec = alloc.name
    if alloc.path:
        if not os.path.isfile(alloc.path):
            raise AlloclabError(f"allocator '{spec}': {alloc.path} does not exist",
                                "check the path, or install the library first")
        if not looks_like_allocator(alloc.path):
            raise AlloclabError(f"allocator '{spec}': {alloc.path} does not export malloc and free, so it is not "
                                "an allocator", "name the allocator's shared library (e.g. libjemalloc.so.2)")
    made = build.built().get(alloc.base)
    if made and alloc.path and sha256_file(alloc.path) != made["sha256"]:
        raise AlloclabError(f"allocator '{spec}': {alloc.path} changed since it was built (its SHA-256 is not the "
                            "one recorded)", f"rebuild it: alloclab setup allocators {alloc.base} --force")
    return replace(alloc, version=alloc.version or _version_of(alloc.base, alloc.path),
                   source=alloc.source or ("" if alloc.base in BY_NAME else f"given by path {alloc.path}"))


def unavailable() -> dict[str, str]:
    """Catalog allocators that cannot be used here, with why and what to do."""
    have = discover()
    refused = build.refusals()
    out = {}
    for e in CATALOG:
        if e.name in have:
            continue
        if e.refused or e.name in refused:
            out[e.name] = e.refused or refused[e.name]
        elif e.source == CRATE:
            out[e.name] = f"built on its first use (or now: alloclab setup allocators {e.name})"
        else:
            out[e.name] = f"not installed: apt-get install {e.package}"
    return out


def install_hint(names: list[str]) -> str:
    pkgs = " ".join(KNOWN[n].package for n in names if n in KNOWN)
    return f"install with: sudo apt-get install -y {pkgs}" if pkgs else ""


def _not_here(name: str) -> AlloclabError:
    e = BY_NAME[name]
    why = e.refused or build.refusals().get(name)
    if why:
        return AlloclabError(f"allocator '{name}' is refused here: {why}",
                             "leave it out (alloclab allocators lists what can run), or build it again: "
                             f"alloclab setup allocators {name} --force")
    if e.source == CRATE:
        return AlloclabError(f"allocator '{name}' is not built yet",
                             f"build it (offline, from crate {e.crate.name} {e.crate.version}): "
                             f"alloclab setup allocators {name}")
    return AlloclabError(f"allocator '{name}' is not installed", install_hint([name]))


def _first_use(name: str) -> Allocator:
    """A source-built allocator named before it was built: built now, offline from its crate's
    sources, with a progress line (once; the cache keeps it). Any other missing one: why, and
    what to do."""
    e = BY_NAME[name]
    if e.source != CRATE or e.refused or name in build.refusals():
        raise _not_here(name)
    say = functools.partial(print, file=sys.stderr, flush=True)
    say(f"alloclab: {name} is built from sources on its first use (a minute at most; "
        "alloclab setup allocators builds them all)")
    made = build.setup([name], notify=say).get(name) or {}
    if made.get("refused") or name not in build.built():
        raise _not_here(name)
    return _built_allocator(name, build.built()[name])


def parse(spec: str, found: dict[str, Allocator] | None = None) -> Allocator:
    """Parse `name`, `name=/path/lib.so`, and tuning variants `name+ENV=value[+ENV=value]`.

    Raises AlloclabError naming what is wrong and what to do.
    """
    spec = spec.strip()
    if not spec:
        raise AlloclabError("empty allocator name", "name one of: " + ", ".join(BY_NAME))
    head, *tunings = spec.split("+")
    if LINK_SUFFIX + "=" in head:
        raise AlloclabError(f"allocator '{spec}': a link-time allocator takes no library path (nothing is preloaded "
                            "on top of it)", f"write {head.split('=')[0]}, or preload a library with name=/path.so")
    if head.endswith(LINK_SUFFIX):
        base = head[:-len(LINK_SUFFIX)]
        if base not in LINKABLE:
            raise AlloclabError(f"allocator '{spec}': there is no link-time build with {base}",
                                "link-time allocators: " + ", ".join(f"{b}{LINK_SUFFIX}" for b in LINKABLE))
        found = discover() if found is None else found
        if base not in found:
            raise AlloclabError(f"allocator '{spec}': {base} is not installed", install_hint([base]))
        linked = parse("+".join([base, *tunings]), found)
        return Allocator(name=f"{base}{LINK_SUFFIX}" + spec[len(head):], base=base, path=found[base].path,
                         env=linked.env, version=found[base].version, link=True, source=found[base].source)
    env = []
    for t in tunings:
        k, sep, v = t.partition("=")
        if not sep or not ENV_RE.match(k):
            raise AlloclabError(f"allocator '{spec}': tuning '{t}' is not ENV=value",
                                "write tuning variants as name+ENV=value, e.g. jemalloc+MALLOC_CONF=narenas:2")
        env.append((k, v))
    name, sep, path = head.partition("=")
    if not NAME_RE.match(name):
        raise AlloclabError(f"allocator '{spec}': '{name}' is not a valid name",
                            "use letters, digits, '.', '_', '@' or '-', e.g. jemalloc or mylib=/opt/lib/libmy.so")
    found = discover() if found is None else found
    if sep:
        if not path or not os.path.isabs(path):
            raise AlloclabError(f"allocator '{spec}': the library path must be absolute",
                                f"write {name}=/absolute/path/to/lib.so")
        alloc = Allocator(name=name, base=name, path=path)  # checked by the preflight (`checked`)
    elif name in found:
        alloc = found[name]
    elif name in BY_NAME:
        alloc = _first_use(name)
    else:
        raise AlloclabError(f"unknown allocator '{name}'",
                            "name one of: " + ", ".join(BY_NAME) + ", or give a library: name=/path/lib.so")
    if not sep:
        tuning.check(spec, alloc.base, env)
    label = spec if env else alloc.name
    return replace(alloc, name=label, env=alloc.env + tuple(env))


# ---------------------------------------------------------------------------------------
# Proof


def mapped_files(maps_text: str) -> list[str]:
    """Distinct file paths mapped in a /proc/PID/maps text, in order of first appearance."""
    seen: dict[str, None] = {}
    for line in maps_text.splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5].startswith("/"):
            seen.setdefault(parts[5].replace(" (deleted)", ""), None)
    return list(seen)


def read_maps(pid: int) -> list[str] | None:
    """Files mapped in a live process, or None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/maps").read_text()
    except (OSError, ProcessLookupError):
        return None
    # a process that has exited (a zombie) maps nothing: that is no answer, not an empty one
    return mapped_files(text) if text.strip() else None


LIBC = re.compile(r"/libc(\.so\.6|-[0-9.]+\.so)$")


def whole(files: list[str] | None, binary: str | os.PathLike | None = None) -> bool:
    """True if a read of a process's maps shows the C library (a read without it caught the
    process before its loader ran or while it exited) and, given `binary`, that program: a read
    without it was of another process that came to hold the PID."""
    return (bool(files) and any(LIBC.search(f) for f in files)
            and (binary is None or any(_same_file(f, os.fspath(binary)) for f in files)))


def _same_file(a: str, b: str) -> bool:
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        sa, sb = os.stat(a), os.stat(b)
        return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)
    except OSError:
        return False


def prove(alloc: Allocator, files: list[str] | None, pid: int | str = "?") -> Proof:
    """Decide from the files mapped in a process (`mapped_files` of its /proc/PID/maps)
    whether `alloc` is the allocator of that process."""
    if files is None:
        return Proof(False, f"could not read /proc/{pid}/maps (the process was gone)")
    libs = [f for f in files if ".so" in os.path.basename(f)]
    if alloc.path is None:
        foreign = [f for f in libs if FOREIGN_ALLOCATOR.search(os.path.basename(f))]
        if foreign:
            return Proof(False, f"glibc run, but another allocator is mapped in PID {pid}: {', '.join(foreign)}",
                         libs)
        if not whole(libs):
            return Proof(False, f"libc is not mapped in PID {pid}", libs)
        return Proof(True, f"PID {pid}: libc mapped, no other allocator mapped", libs)
    if not os.path.exists(alloc.path):
        return Proof(False, f"{alloc.path} does not exist, so it cannot have been preloaded", libs)
    hit = [f for f in libs if _same_file(f, alloc.path)]
    if not hit:
        return Proof(False, f"{alloc.path} is not mapped in PID {pid}: LD_PRELOAD did not reach the process "
                            "or the loader refused the library", libs)
    companions = BY_NAME[alloc.base].companions if alloc.base in BY_NAME else ()
    others = [f for f in libs if FOREIGN_ALLOCATOR.search(os.path.basename(f)) and not _same_file(f, alloc.path)
              and not os.path.basename(f).startswith(companions)]
    if others:
        return Proof(False, f"{alloc.name} is mapped in PID {pid}, but so is {', '.join(others)}", libs)
    return Proof(True, f"PID {pid}: {hit[0]} mapped", libs)


def library_version_list() -> list[dict]:
    """Every catalog allocator, usable here or not (and why not): for `alloclab allocators` and
    the study's machine.json."""
    have = discover(versions=True)
    why_not = unavailable()
    refused = build.refusals()
    rows = []
    for e in CATALOG:
        row = {"name": e.name, "about": e.about, "from": e.source, "tuning": list(e.tuning)}
        if e.name in have:
            row |= have[e.name].to_json() | {"installed": True}
            if e.crate:
                row["probe"] = (build.manifest(e.name) or {}).get("probe", {})
        else:
            row |= {"installed": False, "why_not": why_not.get(e.name, ""), "package": e.package,
                    "refused": bool(e.refused or e.name in refused),
                    "crate": f"{e.crate.name} {e.crate.version}" if e.crate else ""}
        rows.append(row)
    return rows


def looks_like_allocator(path: str) -> bool:
    """True if the shared object exports malloc and free (what a preload needs to replace)."""
    if shutil.which("nm") is None:
        return True  # cannot tell without binutils; the maps proof and the run decide
    return {"malloc", "free"} <= build.exported(path)


def allocator_of(path: str) -> str | None:
    """The catalog allocator a mapped library belongs to (None for anything else)."""
    name = os.path.basename(path)
    for n, m in build.built().items():
        if _same_file(path, m["path"]):
            return n
    for base, k in KNOWN.items():
        if any(name == os.path.basename(so) or name.startswith(os.path.basename(so).split(".so")[0] + ".so")
               for so in k.sonames):
            if base == "tcmalloc" and "minimal" in name:
                continue
            return base
    if name.startswith("libmimalloc.so"):
        return "mimalloc"
    return None


BINDING_RE = re.compile(r"binding file (.*?) \[\d+\] to (.*?) \[\d+\]: normal symbol `(\w+)'")
CHECKED_SYMBOLS = ("malloc", "free")


def bindings(ld_debug_text: str, subject: str) -> dict[str, set[str]]:
    """From LD_DEBUG=bindings output: for each of malloc and free, the libraries that the
    references of files whose path contains `subject` bind to."""
    out: dict[str, set[str]] = {s: set() for s in CHECKED_SYMBOLS}
    for m in BINDING_RE.finditer(ld_debug_text):
        src, dst, sym = m.groups()
        if sym in out and subject in os.path.basename(src):
            out[sym].add(dst)
    return out


def prove_binding(base: str, ld_debug_text: str, subject: str, maps: list[str] | None = None) -> Proof:
    """A link-time allocator is proved by where the calls bind, never by a mapped library: the
    references to malloc and free of the files named `subject` (the driver, libtidesdb) must all
    bind to `base`'s library."""
    b = bindings(ld_debug_text, subject)
    if not any(b.values()):
        return Proof(False, f"no binding of malloc/free from {subject} was seen (LD_DEBUG=bindings)")
    wrong = {sym: sorted(libs) for sym, libs in b.items()
             if not libs or any(allocator_of(lib) != base for lib in libs)}
    mapped = bool(maps) and any(allocator_of(f) == base for f in maps or [])
    if wrong:
        where = "; ".join(f"{sym} binds to {', '.join(os.path.basename(x) for x in libs) or 'nothing'}"
                          for sym, libs in wrong.items())
        also = f" although {base} is mapped" if mapped else ""
        return Proof(False, f"{subject}: {where}{also}: {base} is not the allocator of its calls", maps or [])
    libs = sorted({os.path.basename(x) for v in b.values() for x in v})
    return Proof(True, f"{subject}: malloc and free bind to {', '.join(libs)}", maps or [])


def binding_text(argv: list[str], env: dict[str, str] | None = None, timeout: float = 60) -> str:
    """Run a short command with LD_DEBUG=bindings (all symbols resolved at load) and return the
    loader's report."""
    import tempfile
    with tempfile.TemporaryDirectory(prefix="alloclab-ld-") as d:
        e = {**(env if env is not None else os.environ), "LD_DEBUG": "bindings", "LD_BIND_NOW": "1",
             "LD_DEBUG_OUTPUT": f"{d}/bindings"}
        e.pop("LD_PRELOAD", None)
        subprocess.run(argv, env=e, capture_output=True, timeout=timeout)
        return "".join(p.read_text(errors="replace") for p in Path(d).glob("bindings*"))
