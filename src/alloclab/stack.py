"""The studies' own server stack: a Debian trixie root with MariaDB 11.8 (InnoDB, MyRocks), the
allocators of that release, and the TideSQL storage-engine plugin (TidesDB inside MariaDB)
built from vendored archives against the source of exactly the installed server.

It lives outside the checkout (ALLOCLAB_STACK, default ~/.cache/alloclab/stack) and is made by
`alloclab setup stack` in steps; a finished step is recorded in state.json and never redone, so
a setup stopped by Ctrl-C or a failure resumes where it stopped. Every command inside the root
runs in a private mount namespace (`unshare --mount`): /proc and /dev are mounted there and
vanish with the last process, so no mount is ever left behind on the host.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from alloclab.errors import AlloclabError

SUITE = "trixie"
REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Archive:
    file: str
    url: str
    sha256: str


def _gh(repo: str, version: str, sha256: str) -> Archive:
    return Archive(f"{repo}-{version}.tar.gz", f"https://github.com/tidesdb/{repo}/archive/refs/tags/v{version}.tar.gz",
                   sha256)


# TideSQL release -> (TideSQL, the TidesDB it was used with): seed 000's and seed 003's
# (../shared/vendor/README.md). ALLOCLAB_TIDESQL picks one; each has its own stack folder.
RELEASES = {
    "4.2.5": (_gh("tidesql", "4.2.5", "1c582ef8b136a1d98b5cd1273b0542b2e2175287a0b599d437cac3a121c15548"),
              _gh("tidesdb", "9.0.9", "7865b259ebdbac96689b66046a8a9fd35602dbbccf9aa58fc74eb51d99c5e950")),
    "4.2.4": (_gh("tidesql", "4.2.4", "b4d1fd6fa03d2ee54b5fe73e1382de8b12dcd5fb8d16a38003f160af77ddbddf"),
              _gh("tidesdb", "9.0.8", "8471d378a8a258c3ee7977e59cb069997e3320bf0c5bc6e0384ca78b9e7950d2")),
}
DEFAULT_RELEASE = "4.2.5"
TIDESQL, TIDESDB = RELEASES[DEFAULT_RELEASE]


def release() -> str:
    r = os.environ.get("ALLOCLAB_TIDESQL", DEFAULT_RELEASE)
    if r not in RELEASES:
        raise AlloclabError(f"ALLOCLAB_TIDESQL={r} is not a TideSQL release alloclab knows",
                            "use one of: " + ", ".join(RELEASES))
    return r


def archives() -> tuple[Archive, Archive]:
    return RELEASES[release()]

SERVER_PACKAGES = ["mariadb-server", "mariadb-client", "mariadb-plugin-rocksdb", "netbase", "ca-certificates"]
# one name per allocator; the first that the suite has is installed
ALLOCATOR_PACKAGES = {
    "jemalloc": ["libjemalloc2"],
    "mimalloc": ["libmimalloc3", "libmimalloc2.0"],
    "tcmalloc": ["libgoogle-perftools4t64", "libgoogle-perftools4"],
    "tcmalloc-minimal": ["libtcmalloc-minimal4t64", "libtcmalloc-minimal4"],
}
BUILD_PACKAGES = ["build-essential", "cmake", "bison", "flex", "pkg-config", "libssl-dev", "zlib1g-dev",
                  "libpcre2-dev", "libncurses-dev", "libaio-dev", "liburing-dev", "libgnutls28-dev", "libxml2-dev",
                  "libzstd-dev", "liblz4-dev", "libsnappy-dev", "libbz2-dev", "libcurl4-openssl-dev", "libkrb5-dev",
                  "libsystemd-dev", "libedit-dev", "libjudy-dev", "libnuma-dev", "libcrack2-dev", "dpkg-dev",
                  "libmimalloc-dev"]
TIDESDB_PREFIX = "/usr/local"
# a TidesDB built with TIDESDB_WITH_MIMALLOC, kept to test (and show) that a linked allocator
# inside a plugin does not bind
TIDESDB_MIMALLOC_PREFIX = "/opt/alloclab/tidesdb-mimalloc"
SRC = "/usr/src/alloclab"


def home() -> Path:
    if os.environ.get("ALLOCLAB_STACK"):
        return Path(os.environ["ALLOCLAB_STACK"]).resolve()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    r = release()
    return cache / "alloclab" / ("stack" if r == DEFAULT_RELEASE else f"stack-tidesql-{r}")


def root() -> Path:
    return home() / "root"


def vendor_cache() -> Path:
    """Where archives are kept once found (so that later checkouts find them too)."""
    return home().parent / "vendor"


def vendor_dirs() -> list[Path]:
    """ALLOCLAB_VENDOR if set; else the checkout's ../shared/vendor and, for a clone of a local
    checkout, its origin's; then the cache."""
    if os.environ.get("ALLOCLAB_VENDOR"):
        return [Path(os.environ["ALLOCLAB_VENDOR"]), vendor_cache()]
    out = [REPO_ROOT.parent / "shared" / "vendor"]
    try:
        origin = subprocess.run(["git", "-C", str(REPO_ROOT), "config", "--get", "remote.origin.url"],
                                capture_output=True, text=True, timeout=10).stdout.strip()
        if origin and os.path.isdir(origin):
            out.append(Path(origin).resolve().parent / "shared" / "vendor")
    except (OSError, subprocess.SubprocessError):
        pass
    return out + [vendor_cache()]


# --- state --------------------------------------------------------------------------------

def state() -> dict:
    try:
        return json.loads((home() / "state.json").read_text())
    except (OSError, json.JSONDecodeError):
        return {"steps": {}}


def _save(st: dict) -> None:
    home().mkdir(parents=True, exist_ok=True)
    tmp = home() / "state.json.tmp"
    tmp.write_text(json.dumps(st, indent=1, sort_keys=True))
    os.replace(tmp, home() / "state.json")


def ready() -> bool:
    return state().get("ready", False) and (root() / "usr/sbin/mariadbd").exists()


def info() -> dict:
    """What the stack has: versions, plugin, allocators (root-relative paths)."""
    st = state()
    if not ready():
        raise AlloclabError(f"the MariaDB {SUITE} stack is not set up ({home()})",
                            "run: alloclab setup stack (about 3 minutes; ./setup.sh test does it too)")
    return st


STEPS = ("root", "packages", "source", "tidesdb", "tidesdb-mimalloc", "configure", "plugin", "check")


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


def make_mountpoint(folder: Path) -> list[Path]:
    """Create the mount point of `folder` inside the root; returns the folders created."""
    created = []
    p = root() / str(folder).lstrip("/")
    while not p.exists():
        created.append(p)
        p = p.parent
    for d in reversed(created):
        d.mkdir()
    return created


def remove_mountpoint(created: list[Path]) -> None:
    for d in created:
        try:
            d.rmdir()
        except OSError:
            return


def _run_group(argv: list[str], log, timeout: float) -> int:
    """Run a command in its own process group; on Ctrl-C, a timeout or any error the whole
    group is killed (a build's compilers too), so that a stopped setup leaves nothing running."""
    p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                         start_new_session=True)
    try:
        return p.wait(timeout)
    except BaseException:
        from alloclab.processes import kill_group
        kill_group(p.pid)
        p.wait()
        raise


def run_in_root(argv: list[str], log, env: dict[str, str] | None = None, cwd: str = "/",
                timeout: float = 3600) -> None:
    log.write(f"\n$ (in root) {' '.join(argv)}\n".encode())
    log.flush()
    rc = _run_group(in_root_argv(argv, env, cwd), log, timeout)
    if rc != 0:
        raise AlloclabError(f"in the {SUITE} root, `{' '.join(argv)[:120]}` failed (exit {rc})",
                            f"see {home() / 'setup.log'}; then run alloclab setup stack again (it resumes)")


def root_output(argv: list[str]) -> str:
    p = subprocess.run(in_root_argv(argv), capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise AlloclabError(f"in the {SUITE} root, `{' '.join(argv)}` failed: {p.stderr.strip()[-300:]}")
    return p.stdout


def sh(script: str, log, cwd: str = "/", env: dict[str, str] | None = None) -> None:
    run_in_root(["sh", "-ec", script], log, env, cwd)


# --- steps ----------------------------------------------------------------------------------

def mirror() -> str:
    """The Debian mirror this machine uses (ALLOCLAB_MIRROR overrides)."""
    if os.environ.get("ALLOCLAB_MIRROR"):
        return os.environ["ALLOCLAB_MIRROR"]
    for f in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")) + ["/etc/apt/sources.list"]:
        try:
            text = Path(f).read_text()
        except OSError:
            continue
        for m in re.finditer(r"(?:^URIs:\s*|^deb\s+(?:\[[^]]*\]\s+)?)(\S+/debian)/?\s", text, re.M):
            return m.group(1)
    return "http://deb.debian.org/debian"


def _need_host_tools() -> None:
    if os.geteuid() != 0:
        raise AlloclabError("setting up the stack needs root (debootstrap, chroot, mount namespaces)",
                            "run it as root: sudo alloclab setup stack")
    for tool, pkg in (("debootstrap", "debootstrap"), ("unshare", "util-linux"), ("chroot", "coreutils")):
        if not shutil.which(tool) and not os.path.exists(f"/usr/sbin/{tool}"):
            raise AlloclabError(f"{tool} is not installed", f"install it: apt-get install -y {pkg}")


def _step_root(log) -> dict:
    partial = home() / "root.partial"
    shutil.rmtree(partial, ignore_errors=True)
    shutil.rmtree(root(), ignore_errors=True)
    m = mirror()
    cmd = [shutil.which("debootstrap") or "/usr/sbin/debootstrap", "--variant=minbase",
           "--include=netbase,ca-certificates", SUITE, str(partial), m]
    log.write(f"\n$ {' '.join(cmd)}\n".encode())
    log.flush()
    if _run_group(cmd, log, 1800) != 0:
        raise AlloclabError(f"debootstrap of {SUITE} from {m} failed",
                            f"see {home() / 'setup.log'}; set ALLOCLAB_MIRROR to a reachable Debian mirror "
                            "and run alloclab setup stack again")
    os.replace(partial, root())
    return {"mirror": m}


def _step_packages(log) -> dict:
    r = root()
    shutil.copy("/etc/resolv.conf", r / "etc/resolv.conf")
    m = mirror()
    (r / "etc/apt/sources.list").write_text(f"deb {m} {SUITE} main\ndeb-src {m} {SUITE} main\n")
    env = {"DEBIAN_FRONTEND": "noninteractive"}
    sh("apt-get update -qq", log, env=env)
    allocs = []
    for names in ALLOCATOR_PACKAGES.values():
        for n in names:
            p = subprocess.run(in_root_argv(["apt-cache", "show", n]), capture_output=True, timeout=120)
            if p.returncode == 0 and p.stdout.strip():
                allocs.append(n)
                break
    pkgs = SERVER_PACKAGES + allocs + BUILD_PACKAGES
    # servers must not start inside the root while installing
    (r / "usr/sbin/policy-rc.d").write_text("#!/bin/sh\nexit 101\n")
    os.chmod(r / "usr/sbin/policy-rc.d", 0o755)
    sh("apt-get install -y -qq --no-install-recommends " + " ".join(pkgs), log, env=env)
    version = root_output(["dpkg-query", "-W", "-f=${Version}", "mariadb-server"]).strip()
    return {"mariadb_version": version, "allocator_packages": allocs}


def source_files(version: str) -> list[Path]:
    """Debian's source package of exactly `version` (its .dsc and the archives it names) in a
    vendor folder, for a mirror that serves the binaries but not the source."""
    upstream = version.split(":", 1)[-1].rsplit("-", 1)[0]
    full = version.split(":", 1)[-1]
    for d in vendor_dirs():
        dsc = d / f"mariadb_{full}.dsc"
        if dsc.is_file():
            return [dsc, *sorted(d.glob(f"mariadb_{upstream}.orig.tar.*")), *sorted(d.glob(f"mariadb_{full}.debian.*"))]
    return []


def _step_source(log) -> dict:
    """The source of exactly the installed server (TideSQL is built against it). A mirror that
    does not serve it leaves the stack without TideSQL, with the reason: InnoDB and MyRocks in
    the same server still run."""
    version = state()["steps"]["packages"]["mariadb_version"]
    unpack = (f"cd {SRC}/mariadb && (dpkg-source -x --skip-patches *.dsc src >/dev/null "
              f"|| dpkg-source -x *.dsc src)")
    sh(f"rm -rf {SRC}/mariadb && mkdir -p {SRC}/mariadb", log)
    try:
        sh(f"cd {SRC}/mariadb && apt-get source -qq --download-only mariadb={version} && {unpack}", log,
           env={"DEBIAN_FRONTEND": "noninteractive"})
        return {"source_version": version}
    except AlloclabError as e:
        fetched = str(e)
    files = source_files(version)
    if not files:
        full = version.split(":", 1)[-1]
        return {"source_version": None, "skipped": (
            f"the mirror ({mirror()}) does not serve the source of mariadb {version} (apt-get source failed: see "
            f"{home() / 'setup.log'}), and no vendor folder has mariadb_{full}.dsc with its archives; put them in "
            f"{vendor_cache()} (or ALLOCLAB_VENDOR) and run alloclab setup stack again"), "error": fetched[-300:]}
    dst = root() / SRC.lstrip("/") / "mariadb"
    for f in files:
        shutil.copy(f, dst / f.name)
    sh(unpack, log)
    return {"source_version": version, "from": str(files[0].parent)}


def tidesql_missing() -> str | None:
    """Why the stack has no TideSQL plugin (e.g. the server's source could not be had), or None."""
    for name in ("source", "configure", "plugin"):
        why = state()["steps"].get(name, {}).get("skipped")
        if why:
            return why
    return None


def find_archive(a: Archive) -> Path:
    """A vendored archive checked against its SHA-256; fetched from upstream (and checked the
    same way) when no vendor folder has it."""
    for d in vendor_dirs():
        p = d / a.file
        if p.is_file():
            _check_sha(p, a)
            if d != vendor_cache():
                vendor_cache().mkdir(parents=True, exist_ok=True)
                shutil.copy(p, vendor_cache() / f"{a.file}.partial")
                os.replace(vendor_cache() / f"{a.file}.partial", vendor_cache() / a.file)
            return p
    dest = vendor_cache() / a.file
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        with urllib.request.urlopen(a.url, timeout=60) as resp, open(f"{dest}.partial", "wb") as f:
            shutil.copyfileobj(resp, f)
    except OSError as e:
        raise AlloclabError(f"{a.file} is not in any vendor folder and could not be fetched from {a.url} ({e})",
                            f"put {a.file} (SHA-256 {a.sha256}) in {vendor_cache()} or set ALLOCLAB_VENDOR "
                            "to the folder that has it (../shared/vendor of the alloclab checkout)") from e
    _check_sha(Path(f"{dest}.partial"), a)
    os.replace(f"{dest}.partial", dest)
    return dest


def _check_sha(p: Path, a: Archive) -> None:
    h = hashlib.sha256(p.read_bytes()).hexdigest()
    if h != a.sha256:
        raise AlloclabError(f"{p} has SHA-256 {h}, not {a.sha256}: refused",
                            f"replace it with the release archive {a.file} ({a.url})")


def _unpack(a: Archive, log) -> str:
    """Copy and unpack an archive into the root's source folder; returns the in-root directory."""
    src = find_archive(a)
    dst = root() / SRC.lstrip("/")
    dst.mkdir(parents=True, exist_ok=True)
    shutil.copy(src, dst / a.file)
    name = a.file.removesuffix(".tar.gz")
    sh(f"cd {SRC} && rm -rf {name} && mkdir {name} && tar -xzf {a.file} -C {name} --strip-components=1", log)
    return f"{SRC}/{name}"


def _build_tidesdb(log, prefix: str, extra: str = "") -> str:
    tidesdb = archives()[1]
    d = _unpack(tidesdb, log)
    build = f"{d}/build{'-' + extra.split('=')[0].lower() if extra else ''}"
    jobs = os.cpu_count() or 2
    sh(f"rm -rf {build} && cmake -S {d} -B {build} -DCMAKE_BUILD_TYPE=Release -DTIDESDB_BUILD_TESTS=OFF "
       f"-DCMAKE_INSTALL_PREFIX={prefix} {extra} >/dev/null && cmake --build {build} -j{jobs} >/dev/null && "
       f"cmake --install {build} >/dev/null && ldconfig", log)
    return tidesdb.file.removesuffix(".tar.gz").split("-", 1)[1]


def _step_tidesdb(log) -> dict:
    return {"tidesdb_version": _build_tidesdb(log, TIDESDB_PREFIX)}


def _step_tidesdb_mimalloc(log) -> dict:
    _build_tidesdb(log, TIDESDB_MIMALLOC_PREFIX, "-DTIDESDB_WITH_MIMALLOC=ON")
    return {"prefix": TIDESDB_MIMALLOC_PREFIX}


def _mariadb_src() -> str:
    dirs = glob.glob(str(root() / SRC.lstrip("/") / "mariadb/src"))
    if not dirs:
        raise AlloclabError("the MariaDB source is missing from the stack", "run alloclab setup stack again")
    return "/" + str(Path(dirs[0]).relative_to(root()))


def _step_configure(log) -> dict:
    if tidesql_missing():
        return {"skipped": tidesql_missing()}
    tidesql = archives()[0]
    d = _unpack(tidesql, log)
    src = _mariadb_src()
    version = state()["steps"]["packages"]["mariadb_version"]
    suffix = "-" + version.split("-", 1)[1] if "-" in version else ""
    flags = ["-DBUILD_CONFIG=mysql_release", f"-DMYSQL_SERVER_SUFFIX={suffix}", "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
             "-DINSTALL_LAYOUT=DEB", "-DSYSTEM_TYPE=debian-linux-gnu", "-DPLUGIN_TIDESDB=DYNAMIC",
             "-DWITH_SSL=system", "-DWITH_PCRE=system", "-DWITH_ZLIB=system", "-DPLUGIN_AUTH_PAM=NO",
             "-DWITH_UNIT_TESTS=OFF", "-DWITH_WSREP=ON"]
    flags += [f"-DPLUGIN_{p}=NO" for p in ("ROCKSDB", "MROONGA", "SPIDER", "CONNECT", "COLUMNSTORE", "S3",
                                            "OQGRAPH", "TOKUDB", "SPHINX")]
    sh(f"rm -rf {src}/storage/tidesdb && cp -r {d}/tidesdb {src}/storage/tidesdb && rm -rf {src}/build && "
       f"cmake -S {src} -B {src}/build -G 'Unix Makefiles' {' '.join(repr(f) for f in flags)} >/dev/null", log)
    return {"tidesql_version": tidesql.file.removesuffix(".tar.gz").split("-", 1)[1]}


def plugin_dir() -> str:
    dirs = glob.glob(str(root() / "usr/lib/*/mysql/plugin")) + glob.glob(str(root() / "usr/lib/mysql/plugin"))
    if not dirs:
        raise AlloclabError("MariaDB's plugin directory is missing from the stack", "run alloclab setup stack again")
    return "/" + str(Path(dirs[0]).relative_to(root()))


def _step_plugin(log) -> dict:
    if tidesql_missing():
        return {"skipped": tidesql_missing()}
    src = _mariadb_src()
    jobs = os.cpu_count() or 2
    pdir = plugin_dir()
    sh(f"cd {src}/build && make -j{jobs} tidesdb >/dev/null && "
       f"cp \"$(find . -name ha_tidesdb.so | head -1)\" {pdir}/ha_tidesdb.so", log)
    return {"plugin": f"{pdir}/ha_tidesdb.so"}


def _step_check(log) -> dict:
    """Start the server once with the plugin and ask it what it has; record the root's
    allocators; find out whether TideSQL built with a linked allocator really uses it. Without
    TideSQL (see `tidesql_missing`) the server starts with InnoDB alone."""
    from alloclab import targets  # the server code; imported here to keep setup importable alone
    missing = tidesql_missing()
    d = home() / "check"
    shutil.rmtree(d, ignore_errors=True)
    srv = targets.Server(targets.parse("mariadb11-innodb" if missing else "mariadb11-tidesdb"), d,
                         home() / "check-server.log")
    srv.initialise()
    srv.start({})
    try:
        version = srv.sql("SELECT @@version").strip()
        engines = srv.sql("SELECT ENGINE FROM information_schema.ENGINES WHERE SUPPORT IN ('YES','DEFAULT')").split()
        plugin = srv.sql("SELECT PLUGIN_VERSION FROM information_schema.PLUGINS WHERE PLUGIN_NAME='TidesDB'").strip()
    finally:
        srv.stop()
    if "TidesDB" not in engines and not missing:
        raise AlloclabError(f"the TideSQL plugin did not load into MariaDB {version}: {srv.log_tail(6)}",
                            f"run alloclab setup stack again; if it persists, see {home() / 'check-server.log'}")
    shutil.rmtree(d, ignore_errors=True)
    allocs = {}
    for base in ROOT_SONAMES:
        lib = root_library(base)
        if lib:
            pkg = root_output(["dpkg-query", "-S", os.path.realpath(root() / lib.lstrip("/")).replace(str(root()), "")])
            name = pkg.split(":")[0].strip()
            ver = root_output(["dpkg-query", "-W", "-f=${Version}", name]).strip()
            allocs[base] = {"path": lib, "version": f"{name} {ver}"}
    libc = root_output(["dpkg-query", "-W", "-f=${Version}", "libc6"]).strip()
    allocs["glibc"] = {"path": None, "version": f"libc6 {libc}"}
    link = ({"bound": False, "reason": f"not measured: the stack has no TideSQL ({missing})", "mapped": False}
            if missing else link_binding("mimalloc"))
    return {"server_version": version, "engines": engines, "tidesql_plugin_version": plugin or None,
            "allocators": allocs, "link": {"mimalloc": link}}


def link_binding(base: str) -> dict:
    """Start mariadb11-tidesdb on the libtidesdb built with `base` linked in (without any
    preload) and read where libtidesdb's malloc and free bind (LD_DEBUG=bindings, resolved at
    load with LD_BIND_NOW). Returns {"bound": bool, "reason": str, "bindings": {...}}."""
    from alloclab import allocators, targets
    prefix = {"mimalloc": TIDESDB_MIMALLOC_PREFIX}.get(base)
    if prefix is None:
        return {"bound": False, "reason": f"the stack has no TideSQL build with {base} linked in", "bindings": {}}
    d = home() / f"link-{base}"
    shutil.rmtree(d, ignore_errors=True)
    srv = targets.Server(targets.parse("mariadb11-tidesdb"), d, home() / f"link-{base}-server.log")
    srv.initialise()
    (d / "ld").mkdir()
    srv.start({"LD_LIBRARY_PATH": f"{prefix}/lib", "LD_BIND_NOW": "1", "LD_DEBUG": "bindings",
               "LD_DEBUG_OUTPUT": str(d / "ld" / "bindings")})
    try:
        maps = allocators.read_maps(srv.pid) or []
    finally:
        srv.stop()
    text = "".join(p.read_text(errors="replace") for p in (d / "ld").glob("bindings*"))
    shutil.rmtree(d, ignore_errors=True)
    proof = allocators.prove_binding(base, text, "libtidesdb", maps)
    return {"bound": proof.verified, "reason": proof.reason, "mapped": any(
        allocators.allocator_of(f) == base for f in maps)}


STEP_FUNCS = {"root": _step_root, "packages": _step_packages, "source": _step_source, "tidesdb": _step_tidesdb,
              "tidesdb-mimalloc": _step_tidesdb_mimalloc, "configure": _step_configure, "plugin": _step_plugin,
              "check": _step_check}


def check_can_setup() -> None:
    """Raise, saying what to do, unless this machine can make the stack (root, tools, archives)."""
    _need_host_tools()
    for a in archives():
        find_archive(a)  # bad or missing archives are refused before any work


def ensure(notify=print) -> None:
    """Make the stack if it is not ready (a study that needs it builds it once)."""
    if not ready():
        notify(f"setting up the MariaDB 11.8 + TideSQL stack once, in {home()} (about 4 minutes)")
        setup(notify=notify)


def setup(notify=print, force: bool = False) -> dict:
    """Make (or finish making) the stack. Idempotent: done steps are skipped."""
    check_can_setup()
    home().mkdir(parents=True, exist_ok=True)
    st = {"steps": {}} if force else state()
    if force:
        _save(st)
    with open(home() / "setup.log", "ab") as log:
        for name in STEPS:
            if name in st["steps"] and not st["steps"][name].get("skipped"):
                continue
            if name == "source" and name in st["steps"]:
                # the source is tried again (the mirror or a vendor folder may have it now); the
                # steps after it are redone if it is found
                st["steps"].pop(name)
            if name in st["steps"]:
                continue
            notify(f"stack: {name} ...")
            t0 = time.monotonic()
            out = STEP_FUNCS[name](log)
            st["steps"][name] = {**out, "seconds": round(time.monotonic() - t0, 1)}
            if name == "root":  # a new root invalidates every later step
                st["steps"] = {"root": st["steps"]["root"]}
            if name == "source" and not out.get("skipped"):
                for later in ("configure", "plugin", "check"):
                    st["steps"].pop(later, None)
            _save(st)
            notify(f"stack: {name} done in {time.monotonic() - t0:.0f}s")
    st["ready"] = True
    st["home"] = str(home())
    _save(st)
    return st


def describe() -> str:
    """One line for `alloclab doctor`."""
    st = state()
    if ready():
        steps = st["steps"]
        if tidesql_missing():
            return (f"ready at {home()} without TideSQL: MariaDB {steps['check'].get('server_version', '?')} "
                    f"(InnoDB, MyRocks); {tidesql_missing()}")
        return (f"ready at {home()}: MariaDB {steps['check'].get('server_version', '?')}, TideSQL "
                f"{steps['configure'].get('tidesql_version')} (TidesDB {steps['tidesdb'].get('tidesdb_version')})")
    miss = missing_steps()
    return (f"not set up at {home()} (missing steps: {', '.join(miss)}); "
            "run alloclab setup stack")


# --- allocators inside the root -----------------------------------------------------------------

ROOT_SONAMES = {
    "jemalloc": ("libjemalloc.so.2",),
    "mimalloc": ("libmimalloc.so.3", "libmimalloc.so.2"),
    "tcmalloc": ("libtcmalloc.so.4",),
    "tcmalloc-minimal": ("libtcmalloc_minimal.so.4",),
}


def root_library(base: str) -> str | None:
    """The in-root path of an allocator's library, or None if the root lacks it."""
    for soname in ROOT_SONAMES.get(base, ()):
        for d in ("usr/lib/x86_64-linux-gnu", "lib/x86_64-linux-gnu", "usr/lib"):
            p = root() / d / soname
            if p.exists():
                return "/" + str(p.relative_to(root()))
    return None


def allocator(alloc):
    """The run's allocator as a stack server uses it: the root's own library of that allocator
    (its host path, which /proc/PID/maps shows), with the root's package version."""
    from dataclasses import replace
    st = info()
    have = st["steps"]["check"]["allocators"]
    if alloc.link:
        raise AlloclabError(f"allocator {alloc.name}: link-time allocators do not apply to stack servers",
                            "use the preloaded allocator (the studies preloaded the server too)")
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
