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
import shutil
import signal
import socket
import stat
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from alloclab.alloc import environment
from alloclab.catalog.allocators import TUNING_PREFIXES
from alloclab.catalog.targets import ServerTarget
from alloclab.core.errors import AlloclabError
from alloclab.host import processes
from alloclab.servers import root

# --- where the binaries are ----------------------------------------------------------------

def which(*names: str) -> str | None:
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


# --- a running server ----------------------------------------------------------------------

SCRATCH_HINT = ("put alloclab's scratch folder where other users can pass, e.g. ALLOCLAB_SCRATCH=/var/tmp "
                "(the default is /tmp)")


def check_reachable(path: Path, user: str = "postgres", hint: str = SCRATCH_HINT) -> None:
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
        if stat.S_ISDIR(st.st_mode):  # a directory is passed through (x), a file is read (r)
            if not (st.st_mode & 0o001 or (st.st_uid == uid and st.st_mode & 0o100)):
                raise AlloclabError(f"the server runs as user {user}, who cannot pass through {d} "
                                    f"(mode {oct(st.st_mode & 0o777)}) to reach {path}", hint)
        elif not (st.st_mode & 0o004 or (st.st_uid == uid and st.st_mode & 0o400)):
            raise AlloclabError(f"the server runs as user {user}, who cannot read {d} "
                                f"(mode {oct(st.st_mode & 0o777)})", hint)


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


def _as_postgres(first=None):
    """preexec of PostgreSQL: `first` as root (joining a memory cgroup takes root), then the
    server's own user (groups, group, user), then dying with alloclab again: the kernel forgets a
    parent-death signal when a process changes its user. Popen's own user= drops before any
    preexec, so it is not used."""
    import pwd
    pw = pwd.getpwnam("postgres")

    def run():
        if first:
            first()
        os.setgroups([])
        os.setgid(pw.pw_gid)
        os.setuid(pw.pw_uid)
        processes.die_with_parent()
    return run


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
            cmd = ["mariadb-install-db" if self.target.stack else which("mariadb-install-db"), "--no-defaults",
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
        return root.in_root_argv(argv, env, binds=[str(self.datadir)])

    @contextlib.contextmanager
    def _bound(self):
        """The mount point of the datadir inside the root exists while a command runs there, and
        the folders created for it are removed afterwards (nothing accumulates in the root)."""
        if not self.target.stack:
            yield
            return
        created = root.make_mountpoint(self.datadir)
        try:
            yield
        finally:
            root.remove_mountpoint(created)

    def argv(self) -> list[str]:
        if self.target.kind == "mariadb":
            a = ["mariadbd" if self.target.stack else which("mariadbd"), "--no-defaults", f"--datadir={self.data}",
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

        stderr = log  # what the server writes before its own log opens (an allocator's complaints) too
        inner = ({k: v for k, v in env.items()
                 if k.startswith("LD_") or k == "ALLOCLAB_ACCOUNT_DIR" or k.startswith(TUNING_PREFIXES)}
                 if self.target.stack else {})
        if inner.get("LD_PRELOAD"):
            inner["LD_PRELOAD"] = " ".join(root.in_root_path(x) for x in inner["LD_PRELOAD"].split())
        if self.target.kind == "postgres":
            preexec = _as_postgres(preexec)
        self._mountpoint = None
        if self.target.stack:
            self._mountpoint = root.make_mountpoint(self.datadir)
        self.proc = subprocess.Popen(self._wrap(self.argv(), inner), env=_host_env(self.target, env),
                                     stdin=subprocess.DEVNULL, stdout=log, stderr=stderr, start_new_session=True,
                                     preexec_fn=processes.child_setup(cpus, preexec), cwd=str(self.datadir))
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
            root.remove_mountpoint(self._mountpoint)
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
            cmd = [which("mariadb", "mysql"), "--no-defaults", f"--socket={self.socket}", "--user=root", "-N", "-B",
                   "-e", statement] + ([database] if database else [])
        else:
            cmd = [str(pg_bindir() / "psql"), "-h", str(self.socket_dir), "-U", "root", "-At", "-v",
                   "ON_ERROR_STOP=1", "-c", statement, database or "postgres"]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            raise AlloclabError(f"{self.target.name}: {statement[:60]!r} failed: {p.stderr.strip()[-300:]}")
        return p.stdout
