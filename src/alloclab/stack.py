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
import json
import os
import re
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from alloclab.errors import AlloclabError
from alloclab.vendor import Vendored
from alloclab.vendor import find as find_vendored

SUITE = "trixie"


# TideSQL and TidesDB release archives (`git archive` of each tag; ../shared/vendor/README.md)
TIDESQL_ARCHIVES = {
    "4.5.5": Vendored("tidesql-4.5.5.tar.gz", "3130e633ff308ef87366e83a07037a22011a88c9e1ea400d61661090c75789b9"),
    "4.2.5": Vendored("tidesql-4.2.5.tar.gz", "1c582ef8b136a1d98b5cd1273b0542b2e2175287a0b599d437cac3a121c15548"),
    "4.2.4": Vendored("tidesql-4.2.4.tar.gz", "b4d1fd6fa03d2ee54b5fe73e1382de8b12dcd5fb8d16a38003f160af77ddbddf"),
}
TIDESDB_ARCHIVES = {
    "9.3.14": Vendored("tidesdb-9.3.14.tar.gz", "b16717d686ddc6920ddf204683f782b2ceb02f182d709037f0b6c80d566bedc3"),
    "9.2.5": Vendored("tidesdb-9.2.5.tar.gz", "66b242cfa6fbbee6ed05e53220ed745480ffda4835ad84560bb6d27f16428d81"),
    "9.0.9": Vendored("tidesdb-9.0.9.tar.gz", "7865b259ebdbac96689b66046a8a9fd35602dbbccf9aa58fc74eb51d99c5e950"),
    "9.0.8": Vendored("tidesdb-9.0.8.tar.gz", "8471d378a8a258c3ee7977e59cb069997e3320bf0c5bc6e0384ca78b9e7950d2"),
}
# TidesDB <= 9.2.0 returns wrong results through string secondary indexes once rows reach
# SSTables: the block index keeps a 16-byte key prefix and seeks to the last of several blocks
# sharing it (fixed by commit 6674b76, first in 9.2.1)
FIRST_FIXED_TIDESDB = "9.2.1"


def _version_key(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


@dataclass(frozen=True)
class Build:
    """One TideSQL release on one TidesDB release: a plugin file of its own in the stack."""

    name: str  # what follows @ in the target's name
    tidesql: str
    tidesdb: str
    why: str

    @property
    def plugin(self) -> str:
        return f"ha_tidesql-{self.tidesql}-tidesdb-{self.tidesdb}.so"

    @property
    def prefix(self) -> str:
        """Where its TidesDB is installed inside the root (the plugin's RUNPATH)."""
        return f"/opt/alloclab/tidesdb-{self.tidesdb}"

    @property
    def wrong_results(self) -> bool:
        """Its TidesDB returns wrong results through string secondary indexes."""
        return _version_key(self.tidesdb) < _version_key(FIRST_FIXED_TIDESDB)

    def describe(self) -> str:
        return f"TideSQL {self.tidesql} + TidesDB {self.tidesdb}"

    def to_json(self) -> dict:
        return {"build": self.name, "tidesql_version": self.tidesql, "tidesdb_version": self.tidesdb,
                "plugin": self.plugin, "wrong_results": self.wrong_results}


BUILDS = {
    "4.5.5": Build("4.5.5", "4.5.5", "9.3.14", "the newest TideSQL and TidesDB releases (the default)"),
    "4.2.5": Build("4.2.5", "4.2.5", "9.2.5", "the seeds' TideSQL on the smallest TidesDB release with the "
                   "string-index fix (9.2.1)"),
    "seed000": Build("seed000", "4.2.5", "9.0.9", "seed 000's exact pair: wrong results through string secondary "
                     "indexes"),
    "seed003": Build("seed003", "4.2.4", "9.0.8", "seed 003's exact pair: wrong results through string secondary "
                     "indexes"),
}
DEFAULT_BUILD = "4.5.5"
SEED_BUILD = "seed000"  # what study 1 published its TidesDB figures with


def build(name: str | None) -> Build:
    """The TideSQL build a target names (`mariadb11-tidesdb@NAME`; none: the default)."""
    key = name or DEFAULT_BUILD
    if key not in BUILDS:
        raise AlloclabError(f"mariadb11-tidesdb@{name}: no TideSQL build '{name}'",
                            "use one of: " + ", ".join(f"@{b.name} ({b.describe()})" for b in BUILDS.values()))
    return BUILDS[key]


# Debian's MariaDB 11.8.6 for trixie, the seeds' server (../shared/vendor/mariadb-11.8.6/)
MARIADB_VERSION = "11.8.6"
MARIADB_DEBS = [Vendored(f"mariadb-11.8.6/{f}", h) for f, h in (
    ("libmariadb-dev_11.8.6-0+deb13u1_amd64.deb", "f980a7ab01598d5129256c55cf24479153f8bd2274a9fa96c3bcfb8d2d57e852"),
    ("libmariadb3_11.8.6-0+deb13u1_amd64.deb", "b2a2d1cdf7493c75d43916a18947700740964513ff5ff603cf5cbbf61e9e6385"),
    ("libmariadbd-dev_11.8.6-0+deb13u1_amd64.deb", "384734221b7bfd59ae0412bfd239465f6281118b4c9e7bc9a341fc44ab4ede82"),
    ("libmariadbd19t64_11.8.6-0+deb13u1_amd64.deb", "b13e8c0fbb8bc1935d744b18a7d78193a27695bfc21e4582018a27f23e8a2475"),
    ("mariadb-client-core_11.8.6-0+deb13u1_amd64.deb",
     "d9dc20e0769be8ec54b9bdd64667c047cf5e0933a0c873626a4ac1cb2be7c300"),
    ("mariadb-client_11.8.6-0+deb13u1_amd64.deb", "1ce40c794aa660d6bb57b0b6ab8903367b68a010abc766fd03202251ee836c9b"),
    ("mariadb-common_11.8.6-0+deb13u1_all.deb", "b5116ff56a60d471332d45bfd4ec50391fdcf5a40747bf7fe23ec8551cb71f9c"),
    ("mariadb-plugin-rocksdb_11.8.6-0+deb13u1_amd64.deb",
     "7397a9b8b80b9f68e84ce6e8a5c027604da6c9943b4090e0650473b97d0c665d"),
    ("mariadb-server-core_11.8.6-0+deb13u1_amd64.deb",
     "07a333e34773e1e1bc7c5613878c70a1224180f452481dcf786be05711148178"),
    ("mariadb-server_11.8.6-0+deb13u1_amd64.deb", "b62235159df3ad6dd4e82b1ff586e76a395063def855ea341252584ab61fb1b0"),
)]
# the server headers a storage-engine plugin compiles against, which no Debian package ships
PLUGIN_HEADERS = Vendored("mariadb-11.8.6-plugin-headers.tar.xz",
                          "862e0982113d9214b49977948dd4aebbf9470734b4a1478e049d10fa5d11a6b0")

# one name per allocator; the first that the suite has is installed
ALLOCATOR_PACKAGES = {
    "jemalloc": ["libjemalloc2"],
    "mimalloc": ["libmimalloc3", "libmimalloc2.0"],
    "tcmalloc": ["libgoogle-perftools4t64", "libgoogle-perftools4"],
    "tcmalloc-minimal": ["libtcmalloc-minimal4t64", "libtcmalloc-minimal4"],
}
# what TidesDB and the plugin build with (no MariaDB configure: the plugin builds out of tree)
BUILD_PACKAGES = ["g++", "make", "cmake", "libzstd-dev", "liblz4-dev", "libsnappy-dev", "libmimalloc-dev"]
# a TidesDB built with TIDESDB_WITH_MIMALLOC, kept to test (and show) that a linked allocator
# inside a plugin does not bind
TIDESDB_MIMALLOC_PREFIX = "/opt/alloclab/tidesdb-mimalloc"
SRC = "/usr/src/alloclab"
HEADERS = f"{SRC}/mariadb-headers"
# apt and dpkg inside the root: no fsync per file (a half-made root is remade anyway)
APT = "apt-get -y -qq -o Dpkg::Options::=--force-unsafe-io --no-install-recommends"


def home() -> Path:
    if os.environ.get("ALLOCLAB_STACK"):
        return Path(os.environ["ALLOCLAB_STACK"]).resolve()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "alloclab" / "stack"


def root() -> Path:
    return home() / "root"


def vendored_for(b: Build | None = None) -> list[Vendored]:
    """Every vendored file the stack (and a build of TideSQL) needs."""
    b = b or BUILDS[DEFAULT_BUILD]
    return [*MARIADB_DEBS, PLUGIN_HEADERS, TIDESQL_ARCHIVES[b.tidesql], TIDESDB_ARCHIVES[b.tidesdb]]


# --- state --------------------------------------------------------------------------------

def state() -> dict:
    try:
        return json.loads((home() / "state.json").read_text())
    except (OSError, json.JSONDecodeError):
        return {"steps": {}, "builds": {}}


def _save(st: dict) -> None:
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
    for names in ALLOCATOR_PACKAGES.values():
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
        _save(st)
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
    _save(st)
    notify(f"stack: TideSQL {b.name} done in {time.monotonic() - t0:.0f}s (plugin version "
           f"{loaded['plugin_version']})")
    return rec


def _load_check(b: Build) -> dict:
    """Start the server once with the build's plugin; what it reports."""
    from alloclab import targets  # the server code; imported here to keep setup importable alone
    d = home() / f"check-{b.name}"
    shutil.rmtree(d, ignore_errors=True)
    srv = targets.Server(targets.parse(f"mariadb11-tidesdb@{b.name}"), d, home() / f"check-{b.name}-server.log")
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


def plugin_dir() -> str:
    dirs = glob.glob(str(root() / "usr/lib/*/mysql/plugin")) + glob.glob(str(root() / "usr/lib/mysql/plugin"))
    if not dirs:
        raise AlloclabError("MariaDB's plugin directory is missing from the stack", "run alloclab setup stack again")
    return "/" + str(Path(dirs[0]).relative_to(root()))


def _step_check(log) -> dict:
    """Start the server once and ask it what it has; record the root's allocators; find out
    whether TideSQL on a TidesDB built with a linked allocator really uses it."""
    from alloclab import targets
    d = home() / "check"
    shutil.rmtree(d, ignore_errors=True)
    srv = targets.Server(targets.parse("mariadb11-innodb"), d, home() / "check-server.log")
    srv.initialise()
    srv.start({})
    try:
        version = srv.sql("SELECT @@version").strip()
        engines = srv.sql("SELECT ENGINE FROM information_schema.ENGINES WHERE SUPPORT IN ('YES','DEFAULT')").split()
    finally:
        srv.stop()
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
    return {"server_version": version, "engines": engines, "allocators": allocs,
            "link": {"mimalloc": link_binding("mimalloc")}}


def link_binding(base: str) -> dict:
    """Start mariadb11-tidesdb on the libtidesdb built with `base` linked in (without any
    preload) and read where libtidesdb's malloc and free bind (LD_DEBUG=bindings, resolved at
    load with LD_BIND_NOW). Returns {"bound": bool, "reason": str, "mapped": bool}."""
    from alloclab import allocators, targets
    prefix = {"mimalloc": TIDESDB_MIMALLOC_PREFIX}.get(base)
    if prefix is None:
        return {"bound": False, "reason": f"the stack has no TideSQL build with {base} linked in", "mapped": False}
    d = home() / f"link-{base}"
    shutil.rmtree(d, ignore_errors=True)
    srv = targets.Server(targets.parse("mariadb11-tidesdb"), d, home() / f"link-{base}-server.log")
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
        _save({"steps": {}, "builds": {}})
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
            _save(st)
            notify(f"stack: {name} done in {time.monotonic() - t0:.0f}s")
        for b in builds:
            make_build(build(b), log, notify)
    st = state()
    st["ready"] = True
    st["home"] = str(home())
    _save(st)
    return st


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
