"""The studies' own server stack, made from vendored files alone: a Debian trixie root with
Debian's MariaDB 11.8.6 (the seeds' server: InnoDB, MyRocks) held at that version, the
allocators of that release, and TideSQL (TidesDB inside MariaDB) built out of the server's
tree against MariaDB 11.8.6's plugin headers.

Nothing of MariaDB is fetched or configured: the .debs and the header archive come from a
vendor folder (../shared/vendor of the checkout, ALLOCLAB_VENDOR, or the cache), each checked
against its SHA-256. A TideSQL *build* is one TideSQL release on one TidesDB release, its own
plugin file in the server's plugin folder (`mariadb11-tidesdb@NAME` picks it): the default is
the newest pair; the seeds' exact pairs stay selectable to show their wrong results.

It lives outside the checkout (ALLOCLAB_STACK, default ~/.cache/alloclab/stack) and is made by
`alloclab setup stack` in steps; a finished step is recorded in state.json and never redone, so
a setup stopped by Ctrl-C or a failure resumes where it stopped. Every command inside the root
runs in a private mount namespace (`unshare --mount`): /proc and /dev are mounted there and
vanish with the last process, so no mount is ever left behind on the host.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

from alloclab.alloc import allocators
from alloclab.catalog import targets
from alloclab.catalog.allocators import KNOWN
from alloclab.catalog.targets import ServerTarget
from alloclab.catalog.tidesql import BUILDS, DEFAULT_BUILD, Build, build
from alloclab.core.errors import AlloclabError
from alloclab.host.vendor import Vendored
from alloclab.host.vendor import find as find_vendored
from alloclab.servers.root import (
    MARIADB_VERSION,
    STEPS,
    SUITE,
    built,
    home,
    in_root_argv,
    plugin_dir,
    ready,
    root,
    root_library,
    root_output,
    run_group,
    run_in_root,
    save_state,
    state,
)
from alloclab.servers.server import Server, mariadb_plugin_dir, pg_bindir, which
from alloclab.servers.sources import MARIADB_DEBS, PLUGIN_HEADERS, TIDESDB_ARCHIVES, TIDESQL_ARCHIVES, vendored_for

# what TidesDB and the plugin build with (no MariaDB configure: the plugin builds out of tree)
BUILD_PACKAGES = ["g++", "make", "cmake", "libzstd-dev", "liblz4-dev", "libsnappy-dev", "libmimalloc-dev"]
# a TidesDB built with TIDESDB_WITH_MIMALLOC, kept to test (and show) that a linked allocator
# inside a plugin does not bind
TIDESDB_MIMALLOC_PREFIX = "/opt/alloclab/tidesdb-mimalloc"
SRC = "/usr/src/alloclab"
HEADERS = f"{SRC}/mariadb-headers"
# apt and dpkg inside the root: no fsync per file (a half-made root is remade anyway)
APT = "apt-get -y -qq -o Dpkg::Options::=--force-unsafe-io --no-install-recommends"


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
    if run_group(cmd, log, 1800) != 0:
        raise AlloclabError(f"debootstrap of {SUITE} from {m} failed",
                            f"see {home() / 'setup.log'}; set ALLOCLAB_MIRROR to a reachable Debian mirror "
                            "and run alloclab setup stack again")
    os.replace(partial, root())
    return {"mirror": m}


def _step_packages(log) -> dict:
    """MariaDB 11.8.6 from the vendored .debs (the rest of their dependencies from the suite),
    held so that nothing upgrades them; the allocators; what TidesDB and the plugin build with."""
    r = root()
    shutil.copy("/etc/resolv.conf", r / "etc/resolv.conf")
    (r / "etc/apt/sources.list").write_text(f"deb {mirror()} {SUITE} main\n")
    debs = r / "opt/alloclab/debs"
    shutil.rmtree(debs, ignore_errors=True)
    debs.mkdir(parents=True)
    for v in MARIADB_DEBS:
        shutil.copy(find_vendored(v), debs / v.name)
    env = {"DEBIAN_FRONTEND": "noninteractive"}
    sh("apt-get update -qq", log, env=env)
    allocs = []
    for names in (k.root_packages for k in KNOWN.values()):
        for n in names:
            p = subprocess.run(in_root_argv(["apt-cache", "show", n]), capture_output=True, timeout=120)
            if p.returncode == 0 and p.stdout.strip():
                allocs.append(n)
                break
    # servers must not start inside the root while installing
    (r / "usr/sbin/policy-rc.d").write_text("#!/bin/sh\nexit 101\n")
    os.chmod(r / "usr/sbin/policy-rc.d", 0o755)
    held = [v.name.split("_")[0] for v in MARIADB_DEBS]
    sh(f"{APT} install /opt/alloclab/debs/*.deb netbase {' '.join(allocs + BUILD_PACKAGES)} >/dev/null && "
       f"apt-mark hold {' '.join(held)} >/dev/null", log, env=env)
    shutil.rmtree(debs, ignore_errors=True)
    version = root_output(["dpkg-query", "-W", "-f=${Version}", "mariadb-server"]).strip()
    if version.split(":", 1)[-1].split("-", 1)[0] != MARIADB_VERSION:
        raise AlloclabError(f"the root's mariadb-server is {version}, not the vendored {MARIADB_VERSION}",
                            f"remove {home()} and run alloclab setup stack again")
    return {"mariadb_version": version, "allocator_packages": allocs, "held": held}


def header_version(version_file: Path) -> str:
    """MariaDB's version as its source tree's VERSION file says it (MYSQL_VERSION_MAJOR=11 ...)."""
    kv = dict(line.split("=", 1) for line in version_file.read_text().split() if "=" in line)
    return ".".join(kv[f"MYSQL_VERSION_{k}"] for k in ("MAJOR", "MINOR", "PATCH"))


def server_version_id(mysql_version_h: Path) -> int:
    m = re.search(r"#define\s+MYSQL_VERSION_ID\s+(\d+)", mysql_version_h.read_text())
    if not m:
        raise AlloclabError(f"{mysql_version_h} has no MYSQL_VERSION_ID", "run alloclab setup stack --force")
    return int(m.group(1))


def check_headers(version_file: Path, mysql_version_h: Path) -> str:
    """The headers' version if it is exactly the installed server's; else refused, because
    MariaDB does not check: a plugin built against other headers loads and then fails on an
    undefined handler:: symbol (its virtual table changed between the two)."""
    have = header_version(version_file)
    vid = server_version_id(mysql_version_h)
    server = f"{vid // 10000}.{vid // 100 % 100}.{vid % 100}"
    if have != server:
        raise AlloclabError(
            f"the plugin headers are MariaDB {have} but the stack's server is {server} (MYSQL_VERSION_ID {vid} in "
            f"{mysql_version_h.name}): a plugin built against another version's headers is refused (MariaDB does not "
            "check; it loads and then fails on an undefined handler:: symbol)",
            f"use the header archive of exactly MariaDB {server}, or remove {home()} and run alloclab setup stack "
            f"again to install the vendored {MARIADB_VERSION}")
    return have


def _step_headers(log) -> dict:
    src = find_vendored(PLUGIN_HEADERS)
    dst = root() / HEADERS.lstrip("/")
    shutil.rmtree(dst, ignore_errors=True)
    dst.mkdir(parents=True)
    p = subprocess.run(["tar", "-xJf", str(src), "-C", str(dst), "--strip-components=1"], capture_output=True,
                       text=True, timeout=300)
    if p.returncode != 0:
        raise AlloclabError(f"unpacking {src} failed: {p.stderr.strip()[-300:]}")
    version = check_headers(dst / "VERSION", root() / "usr/include/mariadb/server/mysql_version.h")
    return {"headers_version": version}


def _unpack(v: Vendored, log) -> str:
    """Copy and unpack an archive into the root's source folder; returns the in-root directory."""
    src = find_vendored(v)
    dst = root() / SRC.lstrip("/")
    dst.mkdir(parents=True, exist_ok=True)
    shutil.copy(src, dst / v.name)
    name = v.name.removesuffix(".tar.gz")
    sh(f"cd {SRC} && rm -rf {name} && mkdir {name} && tar -xzf {v.name} -C {name} --strip-components=1 && "
       f"rm {v.name}", log)
    return f"{SRC}/{name}"


def _build_tidesdb(log, version: str, prefix: str, extra: str = "") -> None:
    d = _unpack(TIDESDB_ARCHIVES[version], log)
    b = f"{d}/build"
    sh(f"rm -rf {b} {prefix} && cmake -S {d} -B {b} -DCMAKE_BUILD_TYPE=Release -DTIDESDB_BUILD_TESTS=OFF "
       f"-DCMAKE_INSTALL_PREFIX={prefix} {extra} >/dev/null && cmake --build {b} -j{os.cpu_count() or 2} >/dev/null "
       f"&& cmake --install {b} >/dev/null && rm -rf {d}", log)


def plugin_flags() -> str:
    """MariaDB's own flags for a dynamic storage-engine plugin, and its include order: generated
    headers from libmariadbd-dev, private ones from the header archive (vendor/README.md)."""
    inc = [f"{HEADERS}/probe", "/usr/include/mariadb/server", f"{HEADERS}/include", f"{HEADERS}/sql",
           f"{HEADERS}/include/providers", f"{HEADERS}/wsrep-lib/include", f"{HEADERS}/wsrep-lib/wsrep-API/v26"]
    return ("-DHAVE_CONFIG_H -DMYSQL_DYNAMIC_PLUGIN -D_FILE_OFFSET_BITS=64 -DDBUG_OFF -DNDEBUG -std=gnu++17 -fPIC -O3 "
            "-fno-omit-frame-pointer -fno-strict-aliasing " + " ".join(f"-I{d}" for d in inc))


def _build_plugin(log, b: Build) -> None:
    """TideSQL's ha_tidesdb.cc compiled out of the server's tree and linked against its TidesDB
    (found at run time through the plugin's RUNPATH, so builds never mix)."""
    d = _unpack(TIDESQL_ARCHIVES[b.tidesql], log)
    o = f"{d}/ha_tidesdb.o"
    sh(f"mkdir -p {HEADERS}/probe && cp {HEADERS}/include/probes_mysql_nodtrace.h.in "
       f"{HEADERS}/probe/probes_mysql_nodtrace.h && "
       f"g++ {plugin_flags()} -I{b.prefix}/include -c {d}/tidesdb/ha_tidesdb.cc -o {o} && "
       f"g++ -shared -o {plugin_dir()}/{b.plugin}.tmp {o} /usr/lib/x86_64-linux-gnu/libmysqlservices.a "
       f"-L{b.prefix}/lib -Wl,--enable-new-dtags,-rpath,{b.prefix}/lib -ltidesdb -lzstd -llz4 -lsnappy && "
       f"mv {plugin_dir()}/{b.plugin}.tmp {plugin_dir()}/{b.plugin} && rm -rf {d}", log)


def make_build(b: Build, log, notify=print) -> dict:
    """Build (once) a TideSQL build and load it into the server: its TidesDB, its plugin file,
    the plugin version the server reports."""
    st = state()
    builds = st.setdefault("builds", {})
    if b.name in builds and (root() / plugin_dir().lstrip("/") / builds[b.name]["plugin"]).exists():
        return builds[b.name]
    notify(f"stack: TideSQL {b.name} ({b.describe()}) ...")
    t0 = time.monotonic()
    tidesdb_done = st.setdefault("tidesdb", {})
    if b.tidesdb not in tidesdb_done or not (root() / b.prefix.lstrip("/") / "lib").exists():
        _build_tidesdb(log, b.tidesdb, b.prefix)
        tidesdb_done[b.tidesdb] = {"prefix": b.prefix, "seconds": round(time.monotonic() - t0, 1)}
        save_state(st)
    t1 = time.monotonic()
    _build_plugin(log, b)
    t2 = time.monotonic()
    loaded = _load_check(b)
    rec = {**b.to_json(), **loaded, "plugin_build_s": round(t2 - t1, 1),
           "tidesdb_build_s": tidesdb_done[b.tidesdb]["seconds"] if t1 - t0 > 1 else 0.0,
           "seconds": round(time.monotonic() - t0, 1)}
    st = state()
    st.setdefault("builds", {})[b.name] = rec
    st.setdefault("tidesdb", {}).update(tidesdb_done)
    save_state(st)
    notify(f"stack: TideSQL {b.name} done in {time.monotonic() - t0:.0f}s (plugin version "
           f"{loaded['plugin_version']})")
    return rec


def _load_check(b: Build) -> dict:
    """Start the server once with the build's plugin; what it reports."""
    d = home() / f"check-{b.name}"
    shutil.rmtree(d, ignore_errors=True)
    srv = Server(targets.parse(f"mariadb11-tidesdb@{b.name}"), d, home() / f"check-{b.name}-server.log")
    srv.initialise()
    srv.start({})
    try:
        engines = srv.sql("SELECT ENGINE FROM information_schema.ENGINES WHERE SUPPORT IN ('YES','DEFAULT')").split()
        plugin = srv.sql("SELECT PLUGIN_VERSION, PLUGIN_LIBRARY FROM information_schema.PLUGINS "
                         "WHERE PLUGIN_NAME='TidesDB'").split()
    finally:
        srv.stop()
    if "TidesDB" not in engines or len(plugin) != 2 or plugin[1] != b.plugin:
        raise AlloclabError(f"TideSQL {b.name} ({b.plugin}) did not load into MariaDB: {srv.log_errors()}",
                            f"see {home() / f'check-{b.name}-server.log'}; then run alloclab setup stack again")
    shutil.rmtree(d, ignore_errors=True)
    return {"plugin_version": plugin[0]}


def _step_tidesql(log) -> dict:
    rec = make_build(BUILDS[DEFAULT_BUILD], log, notify=lambda _m: None)
    return {"build": DEFAULT_BUILD, "plugin_version": rec["plugin_version"]}


def _step_tidesdb_mimalloc(log) -> dict:
    b = BUILDS[DEFAULT_BUILD]
    _build_tidesdb(log, b.tidesdb, TIDESDB_MIMALLOC_PREFIX, "-DTIDESDB_WITH_MIMALLOC=ON")
    return {"prefix": TIDESDB_MIMALLOC_PREFIX, "tidesdb_version": b.tidesdb}


def _step_check(log) -> dict:
    """Start the server once and ask it what it has; record the root's allocators; find out
    whether TideSQL on a TidesDB built with a linked allocator really uses it."""
    d = home() / "check"
    shutil.rmtree(d, ignore_errors=True)
    srv = Server(targets.parse("mariadb11-innodb"), d, home() / "check-server.log")
    srv.initialise()
    srv.start({})
    try:
        version = srv.sql("SELECT @@version").strip()
        engines = srv.sql("SELECT ENGINE FROM information_schema.ENGINES WHERE SUPPORT IN ('YES','DEFAULT')").split()
    finally:
        srv.stop()
    shutil.rmtree(d, ignore_errors=True)
    allocs = {}
    for base in KNOWN:
        lib = root_library(base)
        if lib:
            pkg = root_output(["dpkg-query", "-S", os.path.realpath(root() / lib.lstrip("/")).replace(str(root()), "")])
            name = pkg.split(":")[0].strip()
            ver = root_output(["dpkg-query", "-W", "-f=${Version}", name]).strip()
            allocs[base] = {"path": lib, "version": f"{name} {ver}"}
    libc = root_output(["dpkg-query", "-W", "-f=${Version}", "libc6"]).strip()
    allocs["glibc"] = {"path": None, "version": f"libc6 {libc}"}
    return {"server_version": version, "engines": engines, "allocators": allocs,
            "link": {"mimalloc": link_binding("mimalloc")}}


def link_binding(base: str) -> dict:
    """Start mariadb11-tidesdb on the libtidesdb built with `base` linked in (without any
    preload) and read where libtidesdb's malloc and free bind (LD_DEBUG=bindings, resolved at
    load with LD_BIND_NOW). Returns {"bound": bool, "reason": str, "mapped": bool}."""
    prefix = {"mimalloc": TIDESDB_MIMALLOC_PREFIX}.get(base)
    if prefix is None:
        return {"bound": False, "reason": f"the stack has no TideSQL build with {base} linked in", "mapped": False}
    d = home() / f"link-{base}"
    shutil.rmtree(d, ignore_errors=True)
    srv = Server(targets.parse("mariadb11-tidesdb"), d, home() / f"link-{base}-server.log")
    srv.initialise()
    (d / "ld").mkdir()
    # LD_LIBRARY_PATH comes before the plugin's RUNPATH: libtidesdb is the one built with `base`
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


STEP_FUNCS = {"root": _step_root, "packages": _step_packages, "headers": _step_headers, "tidesql": _step_tidesql,
              "tidesdb-mimalloc": _step_tidesdb_mimalloc, "check": _step_check}


def check_available(t: ServerTarget) -> None:
    """Raise, naming the package to install, if this machine cannot run `t`."""
    hint = "install with: sudo apt-get install -y " + " ".join(t.packages) + " (./setup.sh installs them)"
    if t.stack:
        if not ready():
            check_can_setup()  # the study builds it before its first run
            return
        if t.tidesql:
            if not built(t.tidesql):
                check_can_setup([t.tidesql])  # the study builds it before its first run
            return
        if t.plugin and not (root() / plugin_dir().lstrip("/") / t.plugin).exists():
            raise AlloclabError(f"target {t.name}: plugin {t.plugin} is not in the stack's plugin directory",
                                "build and install the plugin into the stack's plugin directory first")
        return
    if t.kind == "postgres":
        b = pg_bindir()
        if not b or not (b / "postgres").exists():
            raise AlloclabError("PostgreSQL is not installed", hint)
        return
    if not which("mariadbd") or not which("mariadb-install-db"):
        raise AlloclabError("MariaDB is not installed", hint)
    if t.plugin:
        d = mariadb_plugin_dir()
        if not d or not (d / t.plugin).exists():
            raise AlloclabError(f"target {t.name}: plugin {t.plugin} is not in MariaDB's plugin directory ({d})",
                                hint if t.plugin == "ha_rocksdb.so" else "build and install the plugin first")


def check_can_setup(builds: list[str | None] = ()) -> None:
    """Raise, saying what to do, unless this machine can make the stack (root, tools, every
    vendored file it needs, checked against its SHA-256) before any work."""
    _need_host_tools()
    need = {v.file: v for b in [None, *builds] for v in vendored_for(build(b))}
    for v in need.values():
        find_vendored(v)


def ensure(builds: list[str | None] = (), notify=print) -> None:
    """Make the stack if it is not ready, and the TideSQL builds a study names."""
    if not ready():
        notify(f"setting up the MariaDB {MARIADB_VERSION} + TideSQL stack once, in {home()} (about 2 minutes)")
        setup(notify=notify)
    missing = [build(b) for b in builds if not built(b)]
    if missing:
        check_can_setup([b.name for b in missing])
        with open(home() / "setup.log", "ab") as log:
            for b in missing:
                make_build(b, log, notify)


def setup(notify=print, force: bool = False, builds: list[str | None] = ()) -> dict:
    """Make (or finish making) the stack, and any further TideSQL builds named. Idempotent: done
    steps are skipped."""
    check_can_setup(builds)
    home().mkdir(parents=True, exist_ok=True)
    if force:
        save_state({"steps": {}, "builds": {}})
    st = state()
    with open(home() / "setup.log", "ab") as log:
        for name in STEPS:
            if name in st["steps"]:
                continue
            notify(f"stack: {name} ...")
            t0 = time.monotonic()
            out = STEP_FUNCS[name](log)
            st = state()  # a step may record builds
            st["steps"][name] = {**out, "seconds": round(time.monotonic() - t0, 1)}
            if name == "root":  # a new root invalidates every later step
                st = {"steps": {"root": st["steps"]["root"]}, "builds": {}, "tidesdb": {}}
            save_state(st)
            notify(f"stack: {name} done in {time.monotonic() - t0:.0f}s")
        for b in builds:
            make_build(build(b), log, notify)
    st = state()
    st["ready"] = True
    st["home"] = str(home())
    save_state(st)
    return st


