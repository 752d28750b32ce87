"""Database servers that alloclab starts and owns: a private datadir, a unix socket only (no
TCP listener), the run's allocator preloaded into the server process, readiness probed with a
deadline, a clean shutdown, and the server log kept with the run.

No password is ever created: MariaDB's root authenticates through the unix socket
(unix_socket plugin) and PostgreSQL trusts its socket, which lives inside the private
datadir (mode 0700), so only root and the server's own user can reach it.
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from alloclab import environment, processes
from alloclab.environment import TUNING_PREFIXES
from alloclab.errors import AlloclabError

PROFILE_DIR = Path(__file__).parent / "profiles"


@dataclass(frozen=True)
class ServerTarget:
    """A server and the storage engine the workload's tables use."""

    name: str
    kind: str  # "mariadb" | "postgres"
    engine: str  # the ENGINE= of CREATE TABLE (MariaDB); "heap" for PostgreSQL
    plugin: str | None = None  # a storage-engine plugin to load (MariaDB)
    stack: bool = False  # runs inside the studies' stack (alloclab setup stack), not the host's packages
    tidesql: str | None = None  # the stack's TideSQL build (stack.BUILDS) whose plugin this target loads

    @property
    def packages(self) -> list[str]:
        if self.stack:
            return []
        if self.kind == "postgres":
            return ["postgresql"]
        return ["mariadb-server", "mariadb-client"] + (["mariadb-plugin-rocksdb"] if self.plugin == "ha_rocksdb.so"
                                                       else [])


BUILTIN = {
    "mariadb-innodb": ServerTarget("mariadb-innodb", "mariadb", "InnoDB"),
    "mariadb-myrocks": ServerTarget("mariadb-myrocks", "mariadb", "ROCKSDB", "ha_rocksdb.so"),
    "postgres": ServerTarget("postgres", "postgres", "heap"),
    # the studies' own stack: MariaDB 11.8 from Debian trixie, with TideSQL built for it
    "mariadb11-innodb": ServerTarget("mariadb11-innodb", "mariadb", "InnoDB", stack=True),
    "mariadb11-myrocks": ServerTarget("mariadb11-myrocks", "mariadb", "ROCKSDB", "ha_rocksdb.so", stack=True),
    # TideSQL: the default build; `mariadb11-tidesdb@NAME` another (stack.BUILDS)
    "mariadb11-tidesdb": ServerTarget("mariadb11-tidesdb", "mariadb", "TidesDB", stack=True),
}


def parse(name: str) -> ServerTarget:
    """`mariadb-innodb`, `mariadb-myrocks`, `postgres`, the stack's `mariadb11-innodb`,
    `mariadb11-myrocks`, `mariadb11-tidesdb` (TideSQL; `mariadb11-tidesdb@4.2.5`, `@seed000` ...
    name other TideSQL builds), or `mariadb:ENGINE=plugin.so` / `mariadb11:ENGINE=plugin.so` for
    any storage-engine plugin."""
    base, at, build_name = name.partition("@")
    if base == "mariadb11-tidesdb":
        from alloclab import stack
        b = stack.build(build_name if at else None)
        return ServerTarget(name, "mariadb", "TidesDB", b.plugin, stack=True, tidesql=b.name)
    if name in BUILTIN:
        return BUILTIN[name]
    m = re.fullmatch(r"(mariadb|mariadb11):([A-Za-z0-9_]+)(?:=([A-Za-z0-9_.-]+\.so))?", name)
    if not m:
        raise AlloclabError(f"unknown server target '{name}'",
                            "use " + ", ".join(BUILTIN) + ", or mariadb:ENGINE=plugin.so (mariadb11: for the stack)")
    return ServerTarget(name, "mariadb", m.group(2).upper(), m.group(3), stack=m.group(1) == "mariadb11")


# --- where the binaries are ----------------------------------------------------------------

def _which(*names: str) -> str | None:
    for n in names:
        p = shutil.which(n) or next((c for c in (f"/usr/sbin/{n}", f"/usr/bin/{n}") if os.access(c, os.X_OK)), None)
        if p:
            return p
    return None


def pg_bindir() -> Path | None:
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda d: int(d.split("/")[-2]))
    return Path(dirs[-1]) if dirs else None


def mariadb_plugin_dir() -> Path | None:
    for d in glob.glob("/usr/lib/*/mariadb*/plugin") + glob.glob("/usr/lib/mysql/plugin"):
        return Path(d)
    return None


def check_available(t: ServerTarget) -> None:
    """Raise, naming the package to install, if this machine cannot run `t`."""
    hint = "install with: sudo apt-get install -y " + " ".join(t.packages) + " (./setup.sh installs them)"
    if t.stack:
        from alloclab import stack
        if not stack.ready():
            stack.check_can_setup()  # the study builds it before its first run
            return
        if t.tidesql:
            if not stack.built(t.tidesql):
                stack.check_can_setup([t.tidesql])  # the study builds it before its first run
            return
        if t.plugin and not (stack.root() / stack.plugin_dir().lstrip("/") / t.plugin).exists():
            raise AlloclabError(f"target {t.name}: plugin {t.plugin} is not in the stack's plugin directory",
                                "build and install the plugin into the stack's plugin directory first")
        return
    if t.kind == "postgres":
        b = pg_bindir()
        if not b or not (b / "postgres").exists():
            raise AlloclabError("PostgreSQL is not installed", hint)
        return
    if not _which("mariadbd") or not _which("mariadb-install-db"):
        raise AlloclabError("MariaDB is not installed", hint)
    if t.plugin:
        d = mariadb_plugin_dir()
        if not d or not (d / t.plugin).exists():
            raise AlloclabError(f"target {t.name}: plugin {t.plugin} is not in MariaDB's plugin directory ({d})",
                                hint if t.plugin == "ha_rocksdb.so" else "build and install the plugin first")


# --- profiles ------------------------------------------------------------------------------

def load_profile(t: ServerTarget, profile: str) -> dict[str, str]:
    """Server settings of a named profile (profiles/<kind>-<name>.conf) or of a file a user
    names. Lines are `key = value`; `#` starts a comment."""
    path = Path(profile) if ("/" in profile or profile.endswith(".conf")) else PROFILE_DIR / f"{t.kind}-{profile}.conf"
    if not path.exists():
        known = sorted(p.stem.split("-", 1)[1] for p in PROFILE_DIR.glob(f"{t.kind}-*.conf"))
        raise AlloclabError(f"no {t.kind} profile '{profile}' ({path})",
                            "use one of: " + ", ".join(known) + ", or a path to a file of key = value lines")
    out = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        k, sep, v = line.partition("=")
        if not sep or not k.strip():
            raise AlloclabError(f"{path} line {n}: expected key = value")
        out[k.strip().replace("-", "_") if t.kind == "mariadb" else k.strip()] = v.strip()
    if t.kind == "mariadb":
        # engine settings of other engines do not apply (and would stop the server)
        out = {k: v for k, v in out.items() if not k.startswith("rocksdb_") or t.plugin == "ha_rocksdb.so"}
        out = {k: v for k, v in out.items() if not k.startswith("tidesdb_") or t.tidesql}
    return out


# --- a running server ----------------------------------------------------------------------

def check_reachable(path: Path, user: str = "postgres") -> None:
    """Raise unless the server's own user can pass through every directory down to `path`.
    alloclab never changes permissions outside its own folders: it only checks here."""
    import pwd
    try:
        uid = pwd.getpwnam(user).pw_uid
    except KeyError as e:
        raise AlloclabError(f"the user {user} does not exist", "install the server's package: ./setup.sh") from e
    for d in [path, *path.parents]:
        try:
            st = d.stat()
        except OSError:
            continue  # not created yet: it will be alloclab's own
        if not (st.st_mode & 0o001 or (st.st_uid == uid and st.st_mode & 0o100)):
            raise AlloclabError(f"the server runs as user {user}, who cannot pass through {d} "
                                f"(mode {oct(st.st_mode & 0o777)}) to reach {path}",
                                "put alloclab's scratch folder where other users can pass, e.g. "
                                "ALLOCLAB_SCRATCH=/var/tmp (the default is /tmp)")


def _host_env(t: ServerTarget, env: dict[str, str]) -> dict[str, str]:
    """The environment of what alloclab starts on the host: for a stack server that is the
    namespace and chroot wrapper, which must never receive the allocator (it is set inside)."""
    return environment.wrapper(env) if t.stack else env


def children(pid: int) -> list[int]:
    """`pid` and all its descendants."""
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat", "rb") as f:
                    st = f.read().decode(errors="replace")
                ppid = int(st[st.rfind(")") + 2:].split()[1])
                kids.setdefault(ppid, []).append(int(d))
            except (OSError, ValueError):
                continue
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += kids.get(p, [])
    return out


@dataclass
class Server:
    target: ServerTarget
    datadir: Path
    log_path: Path
    proc: subprocess.Popen | None = None
    settings: dict[str, str] = field(default_factory=dict)

    @property
    def socket_dir(self) -> Path:
        return self.datadir

    @property
    def socket(self) -> Path:
        return self.datadir / ("mysqld.sock" if self.target.kind == "mariadb" else ".s.PGSQL.5432")

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def data(self) -> Path:
        """MariaDB's own datadir. Stack servers keep it one level down, because TideSQL keeps its
        data beside it (tidesdb_data): the folder alloclab copies holds both."""
        return self.datadir / "data" if self.target.stack else self.datadir

    # -- lifecycle --
    def initialise(self) -> None:
        """A new, empty datadir."""
        self.datadir.mkdir(parents=True, exist_ok=True)
        if self.target.kind == "postgres":
            check_reachable(self.datadir.parent)
        if self.target.kind == "mariadb":
            cmd = ["mariadb-install-db" if self.target.stack else _which("mariadb-install-db"), "--no-defaults",
                   f"--datadir={self.data}", "--user=root", "--auth-root-authentication-method=socket",
                   "--skip-test-db"]
            with self._bound():
                p = subprocess.run(self._wrap(cmd, {}), capture_output=True, text=True, timeout=300,
                                   env=_host_env(self.target, os.environ))
        else:
            shutil.chown(self.datadir, "postgres", "postgres")
            os.chmod(self.datadir, 0o700)
            cmd = [str(pg_bindir() / "initdb"), "-D", str(self.datadir), "--auth=trust", "--username=root",
                   "--no-sync", "--encoding=UTF8", "--locale=C"]
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, user="postgres", group="postgres",
                               extra_groups=[], cwd="/")
        if p.returncode != 0:
            raise AlloclabError(f"initialising {self.target.name} failed: {(p.stderr or p.stdout).strip()[-400:]}")

    def _wrap(self, argv: list[str], env: dict[str, str]) -> list[str]:
        """Stack servers run inside the root with the folder bound at the same path; `env` (the
        allocator's preload, with in-root paths) applies to the server alone."""
        if not self.target.stack:
            return argv
        from alloclab import stack
        return stack.in_root_argv(argv, env, binds=[str(self.datadir)])

    @contextlib.contextmanager
    def _bound(self):
        """The mount point of the datadir inside the root exists while a command runs there, and
        the folders created for it are removed afterwards (nothing accumulates in the root)."""
        if not self.target.stack:
            yield
            return
        from alloclab import stack
        created = stack.make_mountpoint(self.datadir)
        try:
            yield
        finally:
            stack.remove_mountpoint(created)

    def argv(self) -> list[str]:
        if self.target.kind == "mariadb":
            a = ["mariadbd" if self.target.stack else _which("mariadbd"), "--no-defaults", f"--datadir={self.data}",
                 f"--socket={self.socket}", "--skip-networking", f"--pid-file={self.datadir / 'mysqld.pid'}",
                 "--user=root", "--skip-log-bin"]
            # the host's server writes its own log; a stack server's stderr is the log
            a += [] if self.target.stack else [f"--log-error={self.log_path}"]
            if self.target.plugin:
                # FORCE: a plugin that fails to load stops the server (with the reason in its log)
                # instead of leaving tables to fall back on another engine
                a += [f"--plugin-load-add={self.target.plugin}", f"--{self.target.engine.lower()}=FORCE",
                      f"--default-storage-engine={self.target.engine}"]
            if self.target.tidesql:
                a += ["--plugin-maturity=gamma", f"--tidesdb-data-home-dir={self.datadir / 'tidesdb_data'}"]
            a += [f"--{k}={v}" for k, v in self.settings.items()]
            return a
        a = [str(pg_bindir() / "postgres"), "-D", str(self.datadir), "-c", "listen_addresses=",
             "-c", f"unix_socket_directories={self.socket_dir}", "-c", "unix_socket_permissions=0700"]
        for k, v in self.settings.items():
            a += ["-c", f"{k}={v}"]
        return a

    def start(self, env: dict[str, str], cpus: set[int] | None = None, preexec=None, deadline_s: float = 120) -> None:
        if self.socket.exists():
            self.socket.unlink()
        log = open(self.log_path, "ab")

        kw = {"user": "postgres", "group": "postgres", "extra_groups": []} if self.target.kind == "postgres" else {}
        stderr = log  # what the server writes before its own log opens (an allocator's complaints) too
        inner = ({k: v for k, v in env.items()
                 if k.startswith("LD_") or k == "ALLOCLAB_ACCOUNT_DIR" or k.startswith(TUNING_PREFIXES)}
                 if self.target.stack else {})
        if inner.get("LD_PRELOAD"):
            from alloclab import stack
            inner["LD_PRELOAD"] = " ".join(stack.in_root_path(x) for x in inner["LD_PRELOAD"].split())
        self._mountpoint = None
        if self.target.stack:
            from alloclab import stack
            self._mountpoint = stack.make_mountpoint(self.datadir)
        self.proc = subprocess.Popen(self._wrap(self.argv(), inner), env=_host_env(self.target, env),
                                     stdin=subprocess.DEVNULL, stdout=log, stderr=stderr, start_new_session=True,
                                     preexec_fn=processes.child_setup(cpus, preexec), cwd=str(self.datadir), **kw)
        log.close()
        self.wait_ready(deadline_s)

    def ready(self) -> bool:
        """The server answers on its socket (MariaDB: a handshake packet; PostgreSQL: pg_isready)."""
        if not self.socket.exists():
            return False
        if self.target.kind == "mariadb":
            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                    s.settimeout(1.0)
                    s.connect(str(self.socket))
                    head = s.recv(5)
                    return len(head) == 5 and head[4] == 10  # protocol version 10
            except OSError:
                return False
        p = subprocess.run([str(pg_bindir() / "pg_isready"), "-q", "-h", str(self.socket_dir)], timeout=10)
        return p.returncode == 0

    def wait_ready(self, deadline_s: float) -> None:
        t0 = time.monotonic()
        while time.monotonic() - t0 < deadline_s:
            if self.proc.poll() is not None:
                self.kill()  # nothing of it is left (its mount point in a stack root included)
                raise AlloclabError(f"{self.target.name} exited with code {self.proc.returncode} while starting: "
                                    f"{self.log_errors()}", f"the whole log: {self.log_path}")
            if self.ready():
                return
            time.sleep(0.05)
        self.kill()
        raise AlloclabError(f"{self.target.name} was not ready after {deadline_s:g}s: {self.log_tail()}")

    def stop(self, deadline_s: float = 120) -> bool:
        """Clean shutdown (MariaDB: SIGTERM; PostgreSQL: fast shutdown); SIGKILL past the
        deadline. Returns whether it stopped cleanly."""
        if self.proc is None or self.proc.poll() is not None:
            self.kill()  # already gone (killed, crashed): what it leaves is cleared all the same
            return self.proc is not None and self.proc.returncode == 0
        self.proc.send_signal(signal.SIGTERM if self.target.kind == "mariadb" else signal.SIGINT)
        try:
            self.proc.wait(deadline_s)
            clean = True
        except subprocess.TimeoutExpired:
            clean = False
        self.kill()
        return clean

    def kill(self) -> None:
        if self.proc is None:
            return
        processes.kill_group(self.proc.pid)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            pass
        if getattr(self, "_mountpoint", None):
            from alloclab import stack
            stack.remove_mountpoint(self._mountpoint)
            self._mountpoint = None

    def pids(self) -> list[int]:
        return children(self.pid) if self.proc and self.proc.poll() is None else []

    def log_errors(self, lines: int = 3) -> str:
        """The server's own error lines (e.g. why a plugin did not load), else the log's tail."""
        try:
            text = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return "(no log)"
        errors = [x.strip() for x in text if "[ERROR]" in x or "FATAL" in x]
        return " | ".join(errors[-lines:]) if errors else self.log_tail()

    def log_tail(self, lines: int = 4) -> str:
        try:
            text = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return "(no log)"
        return " | ".join(text[-lines:]) or "(empty log)"

    # -- SQL through the command-line client, for setup only (never in a measured path) --
    def sql(self, statement: str, database: str | None = None) -> str:
        if self.target.kind == "mariadb":
            cmd = [_which("mariadb", "mysql"), "--no-defaults", f"--socket={self.socket}", "--user=root", "-N", "-B",
                   "-e", statement] + ([database] if database else [])
        else:
            cmd = [str(pg_bindir() / "psql"), "-h", str(self.socket_dir), "-U", "root", "-At", "-v",
                   "ON_ERROR_STOP=1", "-c", statement, database or "postgres"]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            raise AlloclabError(f"{self.target.name}: {statement[:60]!r} failed: {p.stderr.strip()[-300:]}")
        return p.stdout
