"""The allocator registry: what is installed, how to name it, how to inject it, how to prove it.

One injection path: LD_PRELOAD of an absolute path, into the process under test only.
Every run proves its allocator from /proc/PID/maps; nothing else (a server variable, an
environment variable, a log line) counts as proof.
"""

from __future__ import annotations

import os
import re
import subprocess
import sysconfig
from dataclasses import dataclass, field, replace
from pathlib import Path

from alloclab.catalog.allocators import KNOWN, Known
from alloclab.core import environment
from alloclab.core.errors import AlloclabError

# Basenames that mean "some allocator other than glibc is mapped".
FOREIGN_ALLOCATOR = re.compile(
    r"lib(jemalloc|mimalloc|tcmalloc|hoard|tbbmalloc|snmalloc|rpmalloc|scalloc|supermalloc|lockless)[^/]*\.so"
)

# Environment variables that tune an allocator (see environment.py)
TUNING_PREFIXES = environment.TUNING_PREFIXES

# link-time builds of the driver: the tidesdb crate's allocator features (alloclab-driver-<base>)
LINK_SUFFIX = "@link"
LINKABLE = ("jemalloc", "mimalloc", "tcmalloc")

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
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
        for d in library_dirs():
            p = os.path.join(d, soname)
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
    """One allocator as a run uses it: a label, a library (None for glibc) and tuning env."""

    name: str
    base: str
    path: str | None
    env: tuple[tuple[str, str], ...] = ()
    version: str = ""
    link: bool = False  # linked into a separate driver binary (name@link), never preloaded

    def target_env(self, base_env: dict[str, str]) -> dict[str, str]:
        """The environment of the process under test: the caller's, cleaned of any preload and
        allocator tuning, plus this allocator's preload (none when it is linked in) and tuning."""
        return environment.under_test(self.path if not self.link else None, dict(self.env), base_env)

    def to_json(self) -> dict:
        return {"name": self.name, "base": self.base, "path": self.path, "env": dict(self.env),
                "version": self.version, "link": self.link}

    @classmethod
    def from_json(cls, a: dict) -> Allocator:
        return cls(name=a["name"], base=a["base"], path=a.get("path"), env=tuple((a.get("env") or {}).items()),
                   version=a.get("version", ""), link=a.get("link", False))


@dataclass
class Proof:
    verified: bool
    reason: str
    mapped: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"verified": self.verified, "reason": self.reason, "mapped_libraries": self.mapped}


def discover(versions: bool = False) -> dict[str, Allocator]:
    """Every known allocator installed on this machine, by name (its library found by soname).
    Package versions (dpkg-query) only when asked: that is preflight's work (`checked`)."""
    found = {}
    for name, k in KNOWN.items():
        path = None if name == "glibc" else _find_library(k.sonames)
        if name == "glibc" or path:
            found[name] = Allocator(name=name, base=name, path=path,
                                    version=_version_of(name, path) if versions else "")
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
    return replace(alloc, version=alloc.version or _version_of(alloc.base, alloc.path))


def missing() -> dict[str, Known]:
    """Known allocators that are not installed, with what to install."""
    have = discover()
    return {n: k for n, k in KNOWN.items() if n not in have}


# The tuning each allocator documents, by environment variable (the values of MALLOC_CONF and
# GLIBC_TUNABLES are checked below; jemalloc checks its own and says what it rejects, which
# fails the run: `complaints`). An allocator given by path (name=/lib.so) is not checked.
GLIBC_TUNING = ("MALLOC_ARENA_MAX", "MALLOC_ARENA_TEST", "MALLOC_CHECK_", "MALLOC_MMAP_MAX_", "MALLOC_MMAP_THRESHOLD_",
                "MALLOC_PERTURB_", "MALLOC_TOP_PAD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES")
GLIBC_TUNABLES = ("arena_max", "arena_test", "check", "hugetlb", "mmap_max", "mmap_threshold", "mxfast", "perturb",
                  "tcache_count", "tcache_max", "tcache_unsorted_limit", "top_pad", "trim_threshold")
GPERFTOOLS_TUNING = ("TCMALLOC_SAMPLE_PARAMETER", "TCMALLOC_RELEASE_RATE", "TCMALLOC_LARGE_ALLOC_REPORT_THRESHOLD",
                     "TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES", "TCMALLOC_AGGRESSIVE_DECOMMIT", "TCMALLOC_HEAP_LIMIT_MB",
                     "TCMALLOC_DISABLE_MEMORY_RELEASE", "TCMALLOC_SKIP_SBRK", "TCMALLOC_SKIP_MMAP",
                     "TCMALLOC_TRANSFER_NUM_OBJ", "TCMALLOC_OVERRIDE_PAGESIZE", "TCMALLOC_MEMFS_MALLOC_PATH",
                     "TCMALLOC_MEMFS_LIMIT_MB", "TCMALLOC_MEMFS_ABORT_ON_FAIL", "TCMALLOC_MEMFS_IGNORE_MMAP_FAIL",
                     "TCMALLOC_MEMFS_MAP_PRIVATE")
MIMALLOC_OPTIONS = ("show_errors", "show_stats", "verbose", "eager_commit", "large_os_pages", "reserve_huge_os_pages",
                    "reserve_huge_os_pages_at", "reserve_os_memory", "abandoned_page_decommit", "abandoned_page_reset",
                    "eager_commit_delay", "reset_delay", "use_numa_nodes", "limit_os_alloc", "os_tag", "max_errors",
                    "max_warnings", "max_segment_reclaim", "allow_decommit", "segment_decommit_delay",
                    "decommit_extend_delay", "destroy_on_exit", "arena_eager_commit", "purge_decommits",
                    "purge_delay", "arena_purge_mult", "purge_extend_delay", "page_reset", "segment_reset")
DOCUMENTED_TUNING = {
    "glibc": GLIBC_TUNING,
    "jemalloc": ("MALLOC_CONF",),
    "tcmalloc": GPERFTOOLS_TUNING,
    "tcmalloc-minimal": GPERFTOOLS_TUNING,
    "mimalloc": tuple(f"MIMALLOC_{o.upper()}" for o in MIMALLOC_OPTIONS),
}
NUMERIC_TUNING = set(GLIBC_TUNING[:-1]) | set(GPERFTOOLS_TUNING[:7]) | {"TCMALLOC_TRANSFER_NUM_OBJ"} | {
    f"MIMALLOC_{o.upper()}" for o in MIMALLOC_OPTIONS if o != "reserve_os_memory"}


def check_tuning(spec: str, base: str, env: list[tuple[str, str]]) -> None:
    """Refuse a tuning the allocator does not document, or a value it cannot take, before any
    run: most allocators ignore what they do not know without a word."""
    documented = DOCUMENTED_TUNING.get(base)
    if documented is None:
        return
    for k, v in env:
        if k not in documented:
            raise AlloclabError(f"allocator '{spec}': {k} is not an option {base} documents, so it would be ignored "
                                "without a word", f"{base}'s options: " + ", ".join(documented))
        if k in NUMERIC_TUNING and not re.fullmatch(r"-?[0-9]+(\.[0-9]+)?", v):
            raise AlloclabError(f"allocator '{spec}': {k}={v!r} is not a number", f"give {k} a number, e.g. {k}=2")
        if k == "GLIBC_TUNABLES":
            for item in v.split(":"):
                name, sep, val = item.partition("=")
                if not sep or not name.startswith("glibc.malloc.") or name[13:] not in GLIBC_TUNABLES \
                        or not re.fullmatch(r"[0-9]+", val):
                    raise AlloclabError(f"allocator '{spec}': GLIBC_TUNABLES item {item!r} is not a glibc.malloc "
                                        "tunable with a number", "glibc.malloc tunables: " +
                                        ", ".join(GLIBC_TUNABLES) + ", e.g. GLIBC_TUNABLES=glibc.malloc.arena_max=2")
        if k == "MALLOC_CONF":
            bad = [p for p in v.split(",") if not re.fullmatch(r"[a-z_0-9.]+:[^,:]*", p)]
            if bad or not v:
                raise AlloclabError(f"allocator '{spec}': MALLOC_CONF={v!r} is not a list of key:value",
                                    "write e.g. MALLOC_CONF=narenas:2,dirty_decay_ms:1000")


# What an allocator writes when it rejects its tuning (found in the process's own log)
COMPLAINTS = re.compile(r"<jemalloc>: .*|mimalloc: .*(?:invalid value|unknown option).*", re.I)


def complaints(log_text: str) -> list[str]:
    """The lines in which an allocator said it rejected its tuning, each once."""
    return list(dict.fromkeys(m.group(0).strip() for m in COMPLAINTS.finditer(log_text)))


def install_hint(names: list[str]) -> str:
    pkgs = " ".join(KNOWN[n].package for n in names if n in KNOWN)
    return f"install with: sudo apt-get install -y {pkgs}" if pkgs else ""


def parse(spec: str, found: dict[str, Allocator] | None = None) -> Allocator:
    """Parse `name`, `name=/path/lib.so`, and tuning variants `name+ENV=value[+ENV=value]`.

    Raises AlloclabError naming what is wrong and what to do.
    """
    spec = spec.strip()
    if not spec:
        raise AlloclabError("empty allocator name", "name one of: " + ", ".join(KNOWN))
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
                         env=linked.env, version=found[base].version, link=True)
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
                            "use letters, digits, '.', '_' or '-', e.g. jemalloc or mylib=/opt/lib/libmy.so")
    found = discover() if found is None else found
    if sep:
        if not path or not os.path.isabs(path):
            raise AlloclabError(f"allocator '{spec}': the library path must be absolute",
                                f"write {name}=/absolute/path/to/lib.so")
        alloc = Allocator(name=name, base=name, path=path)  # checked by the preflight (`checked`)
    elif name in found:
        alloc = found[name]
    elif name in KNOWN:
        raise AlloclabError(f"allocator '{name}' is not installed", install_hint([name]))
    else:
        raise AlloclabError(f"unknown allocator '{name}'",
                            "name one of: " + ", ".join(KNOWN) + ", or give a library: name=/path/lib.so")
    if not sep:
        check_tuning(spec, alloc.base, env)
    label = spec if env else alloc.name
    return Allocator(name=label, base=alloc.base, path=alloc.path, env=tuple(env), version=alloc.version)


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
        if not any(re.search(r"/libc(\.so\.6|-[0-9.]+\.so)$", f) for f in libs):
            return Proof(False, f"libc is not mapped in PID {pid}", libs)
        return Proof(True, f"PID {pid}: libc mapped, no other allocator mapped", libs)
    if not os.path.exists(alloc.path):
        return Proof(False, f"{alloc.path} does not exist, so it cannot have been preloaded", libs)
    hit = [f for f in libs if _same_file(f, alloc.path)]
    if not hit:
        return Proof(False, f"{alloc.path} is not mapped in PID {pid}: LD_PRELOAD did not reach the process "
                            "or the loader refused the library", libs)
    others = [f for f in libs if FOREIGN_ALLOCATOR.search(os.path.basename(f)) and not _same_file(f, alloc.path)]
    if others:
        return Proof(False, f"{alloc.name} is mapped in PID {pid}, but so is {', '.join(others)}", libs)
    return Proof(True, f"PID {pid}: {hit[0]} mapped", libs)


def library_version_list() -> list[dict]:
    """For `alloclab allocators` and the study metadata."""
    rows = [a.to_json() | {"installed": True} for a in discover(versions=True).values()]
    for name, k in missing().items():
        rows.append({"name": name, "installed": False, "package": k.package})
    return rows


def looks_like_allocator(path: str) -> bool:
    """True if the shared object exports malloc and free (what a preload needs to replace)."""
    try:
        out = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return True  # cannot tell without binutils; the maps proof and the run decide
    if out.returncode != 0:
        return False  # not an ELF shared object at all
    syms = {line.split()[-1].split("@")[0] for line in out.stdout.splitlines() if line.strip()}
    return {"malloc", "free"} <= syms



def allocator_of(path: str) -> str | None:
    """The known allocator a mapped library belongs to (None for anything else)."""
    name = os.path.basename(path)
    for base, k in KNOWN.items():
        if any(name == so or name.startswith(so.split(".so")[0] + ".so") for so in k.sonames):
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
