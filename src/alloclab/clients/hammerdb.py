"""HammerDB 4.12, the seeds' TPC-C client (TPROC-C on MariaDB), run beside alloclab's own.

Installed once, from ../shared/vendor/hammerdb (each archive checked against its SHA-256), into
~/.cache/alloclab/tools/hammerdb-4.12 (ALLOCLAB_HAMMERDB): HammerDB's own Tcl sources, its
MariaDB interface (mariatcl, C) compiled against this machine's libmariadb, the one Tcl package
its CLI needs (ticklecharts) and a `bin/tclsh8.6` that runs Debian's Tcl 8.6 with them on its
path (../shared/vendor/README.md says how this was made to run). `alloclab setup hammerdb`
(and ./setup.sh) does it; a second time is a no-op.

A HammerDB run is driven the way alloclab drives its own client, by an adapter
(`python -m alloclab.clients.hammerdb run ...`): it writes HammerDB's script, starts `hammerdbcli
auto`, keeps its output as the client's log and turns it into alloclab's events: the measured
window is HammerDB's timed test after its ramp-up (its "Taking start/end Transaction Count"
lines), at whose ends the adapter also reads the server's counters itself (NOPM: growth of
sum(d_next_o_id); TPM: Com_commit + Com_rollback) and HammerDB's CPU; then HammerDB's result
line, and after the run consistency conditions 1-4 on HammerDB's tables. A HammerDB error, a
missing result line or a virtual user that died ends the run with HammerDB's own words.
HammerDB keeps SQLite files in $TMP: the adapter points it at a folder of its own.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path

from alloclab.catalog.names import HAMMERDB_VERSION
from alloclab.core import events
from alloclab.core.cache import cache_dir
from alloclab.core.errors import AlloclabError
from alloclab.host.vendor import Vendored, find

VERSION = HAMMERDB_VERSION
ARCHIVES = {
    "hammerdb": Vendored("hammerdb/hammerdb-4.12.tar.gz",
                         "00ef509efa91305d021ba3bcc1eb666d42412a742bf2065db8ac6a4b44f0a8a3"),
    "mariatcl": Vendored("hammerdb/mariatcl-0.1.tar.gz",
                         "58e9ed25d5690d1954bcc276d44561a0e62b890f484c93e526afea550f724ad9"),
    "ticklecharts": Vendored("hammerdb/ticklecharts-03537f0.tar.gz",
                             "cdca0b0f2b6870a36ee08a8de27e8f2e254ab7b2e3df79e06a630346ceccd6b8"),
}
# Debian's packages it runs with (./setup.sh installs them)
PACKAGES = ("tcl8.6", "tcl8.6-dev", "tcl-thread", "libsqlite3-tcl", "libmariadb-dev")
# HammerDB's TPROC-C mix: New-Order, Payment, Delivery, Stock-Level, Order-Status of 23
MIX = "hammerdb"
STEP_S = 6  # HammerDB counts its ramp-up and test time in steps of 6 s (0.1 minute)


def home() -> Path:
    if os.environ.get("ALLOCLAB_HAMMERDB"):
        return Path(os.environ["ALLOCLAB_HAMMERDB"]).resolve()
    return cache_dir("tools") / f"hammerdb-{VERSION}"


def installed() -> dict | None:
    """What the installation recorded (versions, paths), or None when there is none."""
    try:
        return json.loads((home() / ".alloclab-installed.json").read_text())
    except (OSError, ValueError):
        return None


def check_available() -> None:
    """Raise, saying what to do, unless HammerDB is installed and its Debian packages are there."""
    missing = [p for p in PACKAGES if not _dpkg_installed(p)]
    if missing:
        raise AlloclabError(f"HammerDB needs Debian's {', '.join(missing)}",
                            f"install with: sudo apt-get install -y {' '.join(missing)} (./setup.sh does)")
    if not installed():
        raise AlloclabError(f"HammerDB {VERSION} is not installed ({home()})",
                            "run: alloclab setup hammerdb (./setup.sh does it too)")


def _dpkg_installed(pkg: str) -> bool:
    p = subprocess.run(["dpkg-query", "-W", "-f=${Status}", pkg], capture_output=True, text=True)
    return p.returncode == 0 and "install ok installed" in p.stdout


def install(notify=print) -> dict:
    """Install HammerDB from the vendored archives (idempotent)."""
    done = installed()
    if done:
        return done
    missing = [p for p in PACKAGES if not _dpkg_installed(p)]
    if missing:
        raise AlloclabError(f"HammerDB needs Debian's {', '.join(missing)}",
                            f"install with: sudo apt-get install -y {' '.join(missing)} (./setup.sh does)")
    src = {k: find(v) for k, v in ARCHIVES.items()}  # every archive checked before any work
    notify(f"installing HammerDB {VERSION} into {home()}")
    dest = home()
    partial = dest.with_name(dest.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    (partial / "lib").mkdir(parents=True)
    _tar(src["hammerdb"], partial, strip=1)
    (partial / "lib" / "ticklecharts").mkdir()
    _tar(src["ticklecharts"], partial / "lib" / "ticklecharts", strip=1)
    with tempfile.TemporaryDirectory() as tmp:
        _tar(src["mariatcl"], Path(tmp), strip=1)
        lib = partial / "lib" / "mariatcl0.1"
        lib.mkdir()
        flags = subprocess.run(["mariadb_config", "--cflags"], capture_output=True, text=True, check=True).stdout
        libs = subprocess.run(["mariadb_config", "--libs"], capture_output=True, text=True, check=True).stdout
        cc = ["gcc", "-O2", "-fPIC", "-shared", "-DUSE_TCL_STUBS", '-DPACKAGE="mariatcl"', '-DPACKAGE_VERSION="0.1"',
              "-I/usr/include/tcl8.6", *flags.split(), str(Path(tmp) / "generic" / "mariatcl.c"), "-ltclstub8.6",
              *libs.split(), "-o", str(lib / "libmariatcl0.1.so")]
        p = subprocess.run(cc, capture_output=True, text=True)
        if p.returncode != 0:
            raise AlloclabError(f"compiling HammerDB's MariaDB interface (mariatcl) failed: {p.stderr.strip()[-400:]}",
                                "install libmariadb-dev and tcl8.6-dev, then run alloclab setup hammerdb again")
        (lib / "pkgIndex.tcl").write_text(
            "package ifneeded mariatcl 0.1 [list load [file join $dir libmariatcl0.1.so] Mariatcl]\n")
    (partial / "bin").mkdir(exist_ok=True)
    wrapper = partial / "bin" / "tclsh8.6"
    # HammerDB execs ./bin/tclsh8.6: Debian's, with HammerDB's own lib folder on its path
    wrapper.write_text('#!/bin/sh\nhere="$(cd "$(dirname "$0")/.." && pwd)"\n'
                       'TCLLIBPATH="$here/lib${TCLLIBPATH:+ $TCLLIBPATH}" exec /usr/bin/tclsh8.6 "$@"\n')
    wrapper.chmod(0o755)
    # (ticklecharts is only looked for at start: it needs tcllib's huddle once it draws, which the CLI never does)
    check = subprocess.run([str(wrapper)], input="puts [package require mariatcl]; puts [package require Thread]; "
                           "puts [package require sqlite3]\n", capture_output=True, text=True, timeout=60)
    if check.returncode != 0 or len(check.stdout.split()) != 3 or check.stdout.split()[0] != "0.1":
        raise AlloclabError(f"HammerDB's Tcl packages do not load: {(check.stderr or check.stdout).strip()[-300:]}",
                            "install " + " ".join(PACKAGES) + ", then run alloclab setup hammerdb again")
    rec = {"version": VERSION, "home": str(dest), "tcl_packages": check.stdout.split(),
           "archives": {k: v.sha256 for k, v in ARCHIVES.items()}}
    (partial / ".alloclab-installed.json").write_text(json.dumps(rec, indent=1))
    shutil.rmtree(dest, ignore_errors=True)
    os.replace(partial, dest)
    notify(f"HammerDB {VERSION} installed in {dest}")
    return rec


def _tar(archive: Path, into: Path, strip: int = 0) -> None:
    p = subprocess.run(["tar", "-xzf", str(archive), "-C", str(into), f"--strip-components={strip}"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise AlloclabError(f"unpacking {archive} failed: {p.stderr.strip()[-300:]}")


# --- HammerDB's script ------------------------------------------------------------------------

def minutes(seconds: float) -> str:
    """HammerDB's minutes for a time in seconds: whole steps of 6 s (at least one), as text."""
    steps = max(1, round(seconds / STEP_S))
    return f"{steps / 10:.1f}"


def _connection(socket: str, warehouses: int, engine: str) -> list[str]:
    return ["dbset db maria", "dbset bm TPC-C",
            "diset connection maria_host localhost", f"diset connection maria_socket {{{socket}}}",
            # root authenticates by the unix socket: the password (HammerDB's default) is not used
            "diset tpcc maria_user root", "diset tpcc maria_dbase tpcc",
            f"diset tpcc maria_count_ware {warehouses}", f"diset tpcc maria_storage_engine {engine.lower()}",
            "diset tpcc maria_partition false"]


def build_script(socket: str, warehouses: int, engine: str, build_vus: int) -> str:
    return "\n".join([*_connection(socket, warehouses, engine), f"diset tpcc maria_num_vu {build_vus}",
                      "buildschema", "puts \"alloclab: buildschema returned\"", ""])


def run_script(socket: str, warehouses: int, engine: str, vus: int, rampup_s: float, duration_s: float) -> str:
    return "\n".join([*_connection(socket, warehouses, engine),
                      "diset tpcc maria_driver timed", f"diset tpcc maria_rampup {minutes(rampup_s)}",
                      f"diset tpcc maria_duration {minutes(duration_s)}",
                      "diset tpcc maria_total_iterations 10000000", "diset tpcc maria_allwarehouse false",
                      "diset tpcc maria_timeprofile false", "diset tpcc maria_raiseerror false",
                      "diset tpcc maria_keyandthink false", "diset tpcc maria_prepared false",
                      "vuset logtotemp 0", f"vuset vu {vus}", "loadscript", "vucreate", "vurun",
                      # HammerDB keeps its CLI alive by itself only for whole minutes: wait for the
                      # virtual users to complete (checked every second), then let them go
                      f"_runtimer {int(rampup_s + duration_s) + 120}", "vudestroy",
                      "puts \"alloclab: vurun returned\"", ""])


# --- HammerDB's output ------------------------------------------------------------------------

WINDOW_BEGIN = "Rampup complete, Taking start Transaction Count."
WINDOW_END = "Test complete, Taking end Transaction Count."
RESULT = re.compile(r"TEST RESULT : System achieved ([\d.]+) NOPM from ([\d.]+) MariaDB TPM")
FAILED = re.compile(r"(Error in Virtual User \d+: .*|Vuser \d+:FINISHED FAILED|Error: .*)")
# what a virtual user prints for a transaction that failed (maria_raiseerror false): the
# server's message, after the "Vuser N:" prefix
TXN_ERROR = re.compile(r"Vuser \d+:(.*(?:Deadlock|Lock wait timeout|Got error \d+|Duplicate entry|doesn't exist|"
                       r"[Ee]rror|failed).*)")


def failures(text: str) -> list[str]:
    """HammerDB's own words for what went wrong, each once, in order."""
    out = [m.group(0).strip() for m in FAILED.finditer(text)]
    out += [m.group(1).strip() for m in TXN_ERROR.finditer(text) if "FINISHED" not in m.group(1)]
    return list(dict.fromkeys(out))


# --- the adapter: HammerDB's run as alloclab's events --------------------------------------------

Events = events.Channel  # alloclab's event channel (the driver's schema)


class Server:
    """The server's counters and tables, read through the mariadb client on its socket."""

    def __init__(self, socket: str, database: str = "tpcc"):
        self.socket, self.database = socket, database
        self.client = shutil.which("mariadb") or shutil.which("mysql") or "mariadb"

    def rows(self, sql: str) -> list[list[str]]:
        p = subprocess.run([self.client, "--no-defaults", f"--socket={self.socket}", "--user=root", "-N", "-B", "-e",
                            sql, self.database], capture_output=True, text=True, timeout=3600)
        if p.returncode != 0:
            raise AlloclabError(f"reading the server failed: {p.stderr.strip()[-300:]}")
        return [line.split("\t") for line in p.stdout.splitlines() if line]

    def counters(self) -> tuple[int, int]:
        """(sum(d_next_o_id), Com_commit + Com_rollback): what HammerDB's NOPM and TPM grow from."""
        nopm = int(self.rows("SELECT SUM(d_next_o_id) FROM district")[0][0])
        tpm = sum(int(v) for _k, v in self.rows("SHOW GLOBAL STATUS WHERE Variable_name IN "
                                                 "('Com_commit', 'Com_rollback')"))
        return nopm, tpm


def check(server: Server) -> dict:
    """TPC-C's consistency conditions 1-4 (clause 3.3.2) on HammerDB's tables, each district's rows
    aggregated over a forward scan (never an engine's MIN/MAX shortcut: see correctness.py)."""
    w = {r[0]: (Decimal(r[1]), Decimal(r[2] or 0)) for r in server.rows(
        "SELECT w_id, w_ytd, (SELECT SUM(d_ytd) FROM district WHERE d_w_id = w_id) FROM warehouse")}
    dist = {(r[0], r[1]): int(r[2]) for r in server.rows("SELECT d_w_id, d_id, d_next_o_id FROM district")}
    orders = {(r[0], r[1]): (int(r[2]), int(r[3])) for r in server.rows(
        "SELECT o_w_id, o_d_id, MAX(o_id + 0), SUM(o_ol_cnt) FROM orders GROUP BY o_w_id, o_d_id")}
    new = {(r[0], r[1]): (int(r[2]), int(r[3]), int(r[4])) for r in server.rows(
        "SELECT no_w_id, no_d_id, MIN(no_o_id + 0), MAX(no_o_id + 0), COUNT(*) FROM new_order "
        "GROUP BY no_w_id, no_d_id")}
    lines = {(r[0], r[1]): int(r[2]) for r in server.rows(
        "SELECT ol_w_id, ol_d_id, COUNT(*) FROM order_line GROUP BY ol_w_id, ol_d_id")}
    fails: list[list[str]] = [[], [], [], []]
    for wid, (ytd, dsum) in sorted(w.items(), key=lambda x: int(x[0])):
        if ytd != dsum:
            fails[0].append(f"w{wid}: w_ytd={ytd} sum(d_ytd)={dsum}")
    for (wid, did), nxt in sorted(dist.items(), key=lambda x: (int(x[0][0]), int(x[0][1]))):
        max_o, sum_ol = orders.get((wid, did), (0, 0))
        min_no, max_no, n_no = new.get((wid, did), (0, 0, 0))
        if nxt - 1 != max_o or (n_no and max_no != max_o):
            fails[1].append(f"w{wid} d{did}: d_next_o_id-1={nxt - 1} max(o_id)={max_o} max(no_o_id)={max_no}")
        if n_no and max_no - min_no + 1 != n_no:
            fails[2].append(f"w{wid} d{did}: max-min+1={max_no - min_no + 1} count={n_no}")
        if sum_ol != lines.get((wid, did), 0):
            fails[3].append(f"w{wid} d{did}: sum(o_ol_cnt)={sum_ol} order lines={lines.get((wid, did), 0)}")
    what = ["W_YTD = sum(D_YTD)", "D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID)",
            "max(NO_O_ID) - min(NO_O_ID) + 1 = rows in NEW-ORDER", "sum(O_OL_CNT) = rows in ORDER-LINE"]
    conds = [{"id": i + 1, "ok": not fails[i],
              "detail": f"{what[i]} holds everywhere" if not fails[i] else
              f"{what[i]} fails in {len(fails[i])} place(s): {'; '.join(fails[i][:3])}"} for i in range(4)]
    return {"ok": all(c["ok"] for c in conds), "conditions": conds}


def _cpu_s(pid: int) -> tuple[float, float]:
    """User and system CPU seconds of a process and its threads so far."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0, 0.0
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def _start(script: str, tmp: Path, log) -> subprocess.Popen:
    check_available()
    tmp.mkdir(parents=True, exist_ok=True)
    path = tmp / "alloclab.tcl"
    path.write_text(script)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LD_")} | {"TMP": str(tmp), "TMPDIR": str(tmp)}
    return subprocess.Popen(["./hammerdbcli", "auto", str(path)], cwd=home(), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True, errors="replace")


def run(a: argparse.Namespace) -> int:
    """The adapter of a measured run: HammerDB's timed test as alloclab's events."""
    ev = Events(Path(a.events))
    server = Server(a.socket)
    out: list[str] = []
    p = _start(run_script(a.socket, a.warehouses, a.engine, a.threads, a.rampup_s, a.duration_s), Path(a.tmp),
               sys.stdout)
    ev.emit("start", pid=os.getpid(), client="hammerdb", hammerdb_version=VERSION, hammerdb_pid=p.pid)
    ev.emit("phase", phase="rampup", state="begin")
    begin = end = None
    for line in p.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        out.append(line)
        if WINDOW_BEGIN in line and begin is None:
            begin = (time.monotonic(), *server.counters(), *_cpu_s(p.pid))
            ev.emit("phase", phase="measure", state="begin")
        elif WINDOW_END in line and begin is not None and end is None:
            end = (time.monotonic(), *server.counters(), *_cpu_s(p.pid))
            ev.emit("phase", phase="measure", state="end")
    code = p.wait()
    text = "".join(out)
    said = failures(text)
    result = RESULT.search(text)
    why = None
    if said:
        why = "HammerDB: " + "; ".join(said[:3])
    elif code != 0:
        why = f"hammerdbcli exited with code {code}: {text.strip()[-300:]}"
    elif not result:
        why = "HammerDB printed no TEST RESULT line: " + (text.strip().splitlines() or ["(no output)"])[-1][-300:]
    elif begin is None or end is None:
        why = "HammerDB's timed test did not start and end (no Transaction Count lines)"
    if why:
        ev.emit("end", status="error", error=why)
        return 1
    minutes_ = (end[0] - begin[0]) / 60
    workload = {"kind": "tpcc", "client": "hammerdb", "mix": MIX,
                "nopm": (end[1] - begin[1]) / minutes_, "server_tpm": (end[2] - begin[2]) / minutes_,
                "client_nopm": float(result.group(1)), "tpm": float(result.group(2)),
                "hammerdb_nopm": float(result.group(1)), "hammerdb_tpm": float(result.group(2))}
    ev.emit("summary", duration_s=end[0] - begin[0], total_ops=0, ops_per_s=0.0, total_errors=0, total_retries=0,
            first_error=None, ops={}, workload=workload,
            usage_window={"cpu_user_s": end[3] - begin[3], "cpu_sys_s": end[4] - begin[4]})
    c = check(server)
    ev.emit("check", **c)
    ev.emit("end", status="ok")
    return 0


def build(a: argparse.Namespace) -> int:
    """HammerDB's own schema build (its buildschema: tables, rows and stored procedures)."""
    t0 = time.monotonic()
    p = _start(build_script(a.socket, a.warehouses, a.engine, a.build_vus), Path(a.tmp), sys.stdout)
    out = []
    for line in p.stdout:
        sys.stdout.write(line)
        out.append(line)
    code = p.wait()
    text = "".join(out)
    said = failures(text)
    if code != 0 or said or "SCHEMA COMPLETE" not in text:
        why = "; ".join(said[:3]) or (text.strip().splitlines() or ["(no output)"])[-1]
        print(f"alloclab: HammerDB's schema build failed: {why}", file=sys.stderr)
        return 1
    print(f"alloclab: HammerDB built {a.warehouses} warehouse(s) in {time.monotonic() - t0:.1f}s")
    return 0


MODULE = "alloclab.clients.hammerdb"  # run as python -m MODULE (its __name__ is then "__main__")


def command(*args: str) -> list[str]:
    """The command line of this adapter (`python -m alloclab.clients.hammerdb ARGS`)."""
    return [sys.executable, "-m", MODULE, *args]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog=f"python -m {MODULE}", description="HammerDB as alloclab's client")
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("run", "build"):
        s = sub.add_parser(name)
        s.add_argument("--socket", required=True)
        s.add_argument("--warehouses", type=int, required=True)
        s.add_argument("--engine", required=True, help="the tables' ENGINE (innodb, rocksdb, tidesdb, ...)")
        s.add_argument("--tmp", required=True, help="HammerDB's own folder (its SQLite files)")
    r = sub.choices["run"]
    r.add_argument("--threads", type=int, required=True, help="virtual users")
    r.add_argument("--rampup-s", type=float, required=True)
    r.add_argument("--duration-s", type=float, required=True)
    r.add_argument("--events", required=True)
    sub.choices["build"].add_argument("--build-vus", type=int, default=1)
    a = ap.parse_args(argv)
    try:
        return run(a) if a.cmd == "run" else build(a)
    except AlloclabError as e:
        if a.cmd == "run":
            Events(Path(a.events)).emit("end", status="error", error=str(e))
        print(f"alloclab: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
