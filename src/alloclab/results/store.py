"""A study's results folder: never loses a finished run.

    plan.json          the resolved plan (every run spec, in order)
    machine.json       machine and version metadata
    runs.csv           one row per finished run, appended after each run
    runs/<run_id>/     events.jsonl (raw driver events), samples.csv, run.json, driver.log
    MANIFEST.sha256    SHA-256 of every other file (sha256sum format)
    report/            derived from the files above; rebuilt by `alloclab report`, not in the manifest

Every file is written whole to a temporary name and renamed into place.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from alloclab.core.digest import sha256_file
from alloclab.core.errors import AlloclabError
from alloclab.results import columns
from alloclab.results.columns import NoColumns

MANIFEST = "MANIFEST.sha256"
RUNS_CSV = "runs.csv"
OWN = "own"  # RunRow's field of its workload's own columns

# The one list of a cell's shared fields that a row carries and that identify its cell, apart from
# the allocator and the repeat (threads last: sweeps drop it). Each is a field of plan.Cell and a
# column of RunRow (tests/test_layers.py holds them so); the runner copies them from the cell into
# the row, and the verdicts key cells by them and by what the workload adds of its own
# (answers.decide.cell_of: plan.workload's `cell_keys`, columns of the workload's own).
CELL_FIELDS = ("engine", "part", "workload", "pattern", "key_bytes", "value_bytes", "batch", "profile", "shape",
               "client", "threads")


@dataclass
class RunRow:
    """One row of runs.csv. The CSV header and the parser both derive from this class."""

    run_id: str
    index: int
    study: str
    cell: str
    engine: str
    allocator: str
    allocator_base: str
    allocator_verified: bool
    workload: str
    part: str
    pattern: str
    threads: int
    batch: int
    key_bytes: int
    value_bytes: int
    repeat: int
    seed: int
    ops: int
    duration_s: float
    ops_per_s: float
    # a percentile the client did not report is empty, never 0 (the real sysbench prints p50,
    # p95 and p99.9 only in its histogram)
    p50_ns: float | None
    p95_ns: float | None
    p99_ns: float
    p999_ns: float | None
    max_ns: float
    mean_ns: float
    errors: int
    retries: int
    peak_rss_bytes: int
    cpu_user_s: float
    cpu_sys_s: float
    ctx_voluntary: int
    ctx_involuntary: int
    minor_faults: int
    major_faults: int
    wall_s: float
    status: str
    reason: str
    started_at: str
    # added in 0.2: columns with defaults may be missing from older folders
    other_busy_cores: float = 0.0
    profile: str = "default"
    shape: str = "default"
    client: str = ""
    # added in 0.3: the allocator's own account at the end of the measured window (empty when
    # the allocator offers no such number, or it was not read: servers)
    alloc_live_bytes: int | None = None
    alloc_resident_bytes: int | None = None
    fragmentation: float | None = None  # RSS / live bytes
    # with --profile: shares of the CPU samples of the measured window (profiling.py)
    alloc_cpu_self_pct: float | None = None
    alloc_cpu_total_pct: float | None = None
    alloc_cpu_kernel_pct: float | None = None
    alloc_cs_pct: float | None = None  # context switches whose stack passes through the allocator
    # added in 0.4: "measure" rows make the statistics; "profile" rows (perf) and "calls" rows
    # (uprobes on malloc/free) are separate runs, slowed by their instruments
    purpose: str = "measure"
    alloc_calls_per_s: float | None = None  # malloc+calloc+realloc+free calls per second (calls runs)
    alloc_calls_per_op: float | None = None
    # server runs: the client's CPU over the same window as the server's (cpu_user_s, cpu_sys_s)
    client_cpu_user_s: float | None = None
    client_cpu_sys_s: float | None = None
    # added in 0.5: where the run executed: the Ray node's id (empty on the study's own machine) and
    # a digest of what makes that machine's figures comparable (host.machine.fingerprint); statistics
    # pair runs within a node and never pool machines of different fingerprints silently
    node: str = ""
    machine_fingerprint: str = ""
    # added in 0.6: the allocator's version and where it came from (Debian package, or the crate
    # whose sources were built and the library's SHA-256)
    allocator_version: str = ""
    allocator_source: str = ""
    # added in 0.9: a run measured in turns, how much the host's drift between its turns and the
    # others' of its round moved its throughput (answers.drift): throughput × this is its level
    # with that drift taken out. Recorded, not compared: it did not narrow the rounds' spread
    drift_factor: float | None = None
    # added in 0.8: the columns of the run's workload's own (results.columns: TPC-C's warehouses
    # and NOPM, a life's memory over its cycles), after the shared ones in runs.csv; not a column
    own: Any = field(default_factory=NoColumns, compare=False)

    @classmethod
    def columns(cls) -> list[str]:
        """The shared columns (a workload's own are results.columns')."""
        return [f.name for f in fields(cls) if f.name != OWN]

    def value(self, column: str):
        """A column by name: a shared one, or its workload's own; None where its workload has no
        such column (a key-value run has no NOPM, rather than a NOPM of 0)."""
        if column in _SHARED:
            return getattr(self, column)
        return getattr(self.own, column, None)

    @classmethod
    def of(cls, **values) -> RunRow:
        """A row from every column's value by name: the shared ones, and its workload's own
        (results.columns), which a row of another workload has none of."""
        shared = set(cls.columns())
        own = columns.of(values["workload"])
        names = {f.name for f in fields(own)}
        stray = sorted(set(values) - shared - names)
        if stray:
            raise AlloclabError(f"a {values['workload']} row has no column(s) {', '.join(stray)}",
                                "a workload's own columns are its Columns' fields (plan.workload)")
        return cls(**{k: v for k, v in values.items() if k in shared},
                   own=own(**{k: v for k, v in values.items() if k in names}))

    @classmethod
    def from_csv(cls, rec: dict) -> RunRow:
        conv = {"int": lambda s: int(float(s)) if s != "" else 0,
                "float": lambda s: float(s) if s != "" else 0.0,
                "int | None": lambda s: int(float(s)) if s != "" else None,
                "float | None": lambda s: float(s) if s != "" else None,
                "bool": lambda s: s.strip().lower() == "true",
                "str": str}
        missing = [f.name for f in fields(cls) if f.name not in rec and f.default is MISSING and f.name != OWN]
        if missing:
            raise AlloclabError(f"runs.csv lacks column(s) {', '.join(missing)}",
                                "the folder was written by another alloclab version or was edited by hand")
        own = columns.of(rec["workload"])
        return cls(**{f.name: conv[str(f.type)](rec[f.name]) for f in fields(cls) if f.name in rec and f.name != OWN},
                   own=own(**{f.name: conv[str(f.type)](rec[f.name]) for f in fields(own) if f.name in rec}))

    def to_csv(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != OWN} | asdict(self.own)
        d["allocator_verified"] = "true" if self.allocator_verified else "false"
        return d


_SHARED = frozenset(RunRow.columns())


def rounds_ran(rows) -> int:
    """The last round in which one of `rows` finished (0 for none): how many rounds a study ran,
    read from its rows (a round the budget stopped before any of its runs began is not one)."""
    return max((r.repeat for r in rows), default=0)


def atomic_write(path: Path, data: bytes | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a full disk must not stay full of half-written copies
        raise


def write_json(path: Path, obj) -> None:
    atomic_write(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def check_can_make(folder: Path, flag: str = "--out") -> None:
    """Raise, with a sentence, unless `folder` is a study folder that can be made (or an empty
    folder that exists): tried for real and undone, so that nothing is left behind."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise AlloclabError(f"{flag} {folder}: that is a file, not a folder", "name a new folder for the results")
    if (folder / RUNS_CSV).exists() or (folder / "plan.json").exists():
        raise AlloclabError(f"{flag} {folder} already holds a study",
                            f"name a new folder, or continue that one: alloclab run --resume {folder}")
    made = []
    p = folder
    while not p.exists():
        made.append(p)
        p = p.parent
    try:
        for d in reversed(made):
            d.mkdir()
        probe = folder / ".alloclab-probe"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise AlloclabError(f"{flag} {folder}: cannot make a results folder there ({e.strerror or e})",
                            "name a folder you can write, e.g. ./results/NAME") from None
    finally:
        for d in made:
            try:
                d.rmdir()
            except OSError:
                break


class Store:
    def __init__(self, root: Path):
        self.root = Path(root)
        self._hash_cache: dict[str, tuple[int, int, str]] = {}
        self._rows: list[RunRow] | None = None  # runs.csv as this Store last wrote it

    # --- writing ---
    def create(self, plan_json: dict, machine: dict) -> None:
        if (self.root / RUNS_CSV).exists() or (self.root / "plan.json").exists():
            raise AlloclabError(f"{self.root} already holds a study", "pass a new --out folder")
        self.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o755)
        write_json(self.root / "plan.json", plan_json)
        write_json(self.root / "machine.json", machine)
        self._write_rows([])
        self.write_manifest()

    def run_dir(self, run_id: str) -> Path:
        d = self.root / "runs" / run_id
        d.mkdir(parents=True, exist_ok=True)
        return d

    def _write_rows(self, rows: list[RunRow]) -> None:
        buf = io.StringIO()
        header = RunRow.columns() + columns.names(dict.fromkeys(r.workload for r in rows))
        w = csv.DictWriter(buf, fieldnames=header, lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow(r.to_csv())
        atomic_write(self.root / RUNS_CSV, buf.getvalue())
        self._rows = list(rows)

    def append(self, row: RunRow) -> None:
        """Add a finished run (rewrites runs.csv atomically, so a crash never leaves half a row)."""
        known = self._rows if self._rows is not None else self.rows()
        rows = [r for r in known if r.run_id != row.run_id]
        rows.append(row)
        self._write_rows(rows)

    def write_manifest(self) -> None:
        lines = []
        for rel in self.files():
            p = self.root / rel
            st = p.stat()
            cached = self._hash_cache.get(rel)
            if cached and cached[:2] == (st.st_size, st.st_mtime_ns):
                digest = cached[2]
            else:
                digest = sha256_file(p)
                self._hash_cache[rel] = (st.st_size, st.st_mtime_ns, digest)
            lines.append(f"{digest}  {rel}\n")
        atomic_write(self.root / MANIFEST, "".join(lines))

    # --- reading ---
    def files(self) -> list[str]:
        """Every stored file but the manifest, hidden partial files and the derived report/."""
        out = []
        for dirpath, dirs, names in os.walk(self.root):
            if Path(dirpath) == self.root and "report" in dirs:
                dirs.remove("report")
            for n in names:
                rel = os.path.relpath(os.path.join(dirpath, n), self.root)
                if rel == MANIFEST or n.startswith("."):
                    continue
                out.append(rel)
        return sorted(out)

    def rows(self) -> list[RunRow]:
        p = self.root / RUNS_CSV
        if not p.exists():
            raise AlloclabError(f"{self.root} has no {RUNS_CSV}", "point at a folder written by `alloclab run`")
        rows = []
        for n, (rec, whole) in enumerate(_records(p), 2):
            try:
                if not whole:
                    raise ValueError("its line was cut off before its end")
                rows.append(RunRow.from_csv(rec))
            except (ValueError, TypeError) as e:
                raise AlloclabError(f"{p} line {n} is damaged ({e})",
                                    f"repair it (damaged runs are run again): alloclab run --resume {self.root}"
                                    ) from e
        return rows

    def rows_repaired(self) -> tuple[list[RunRow], int]:
        """The rows of runs.csv that are whole; damaged lines (e.g. a truncated last line) are
        dropped and runs.csv is rewritten without them. Returns the rows and how many were dropped."""
        p = self.root / RUNS_CSV
        if not p.exists():
            self._write_rows([])
            return [], 0
        good, dropped = [], 0
        for rec, whole in _records(p):
            try:
                if None in rec or any(v is None for v in rec.values()):
                    raise ValueError("short line")
                if not whole:
                    raise ValueError("cut off before its end")
                good.append(RunRow.from_csv(rec))
            except (ValueError, TypeError, AlloclabError):
                dropped += 1
        seen, rows = set(), []
        for r in good:  # a run listed twice keeps its first row
            if r.run_id not in seen:
                seen.add(r.run_id)
                rows.append(r)
        dropped += len(good) - len(rows)
        if dropped:
            self._write_rows(rows)
        return rows, dropped

    def discard_unrecorded(self, run_dir: Path | None) -> None:
        """Remove the folder of a run that was cut short, unless its row made it into runs.csv (the
        disk may fill up after the row was written)."""
        if run_dir is not None and run_dir.name not in {r.run_id for r in self.rows_repaired()[0]}:
            shutil.rmtree(run_dir, ignore_errors=True)

    def read_json(self, rel: str) -> dict:
        p = self.root / rel
        try:
            return json.loads(p.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise AlloclabError(f"cannot read {p}: {e}") from e

    def bundle(self, zip_path: Path) -> tuple[Path, str]:
        """A zip of the whole folder, and beside it `<zip>.sha256` in sha256sum format."""
        import zipfile

        problems = self.verify()
        if problems:
            raise AlloclabError(f"{self.root} does not match its manifest ({problems[0]})",
                                "bundle only what `alloclab verify` accepts")
        zip_path = Path(zip_path)
        tmp = zip_path.with_name(f".{zip_path.name}.tmp-{os.getpid()}")
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as z:
            for dirpath, _dirs, names in os.walk(self.root):
                for n in sorted(names):
                    p = Path(dirpath) / n
                    if n.startswith("."):
                        continue
                    z.write(p, Path(self.root.name) / p.relative_to(self.root))
        os.replace(tmp, zip_path)
        digest = sha256_file(zip_path)
        atomic_write(zip_path.with_name(zip_path.name + ".sha256"), f"{digest}  {zip_path.name}\n")
        return zip_path, digest

    def verify(self) -> list[str]:
        """Problems found against the manifest: changed, missing or unlisted files. A folder that
        holds none of a results folder's own files (manifest, runs.csv, plan.json) is refused."""
        mf = self.root / MANIFEST
        if not any((self.root / f).is_file() for f in (MANIFEST, RUNS_CSV, "plan.json")):
            what = ("does not exist" if not self.root.exists() else "is not a folder" if not self.root.is_dir()
                    else f"is not a results folder (it has no {MANIFEST}, {RUNS_CSV} or plan.json)")
            raise AlloclabError(f"{self.root} {what}", "point at a folder written by `alloclab run`")
        if not mf.exists():
            return [f"{MANIFEST} is missing"]
        listed = {}
        for n, line in enumerate(mf.read_text().splitlines(), 1):
            digest, sep, rel = line.partition("  ")
            if not sep or len(digest) != 64:
                return [f"{MANIFEST} line {n} is malformed"]
            listed[rel] = digest
        problems = []
        for rel, digest in sorted(listed.items()):
            p = self.root / rel
            if not p.exists():
                problems.append(f"missing: {rel}")
            elif sha256_file(p) != digest:
                problems.append(f"changed: {rel}")
        for rel in self.files():
            if rel not in listed:
                problems.append(f"not in manifest: {rel}")
        return problems


def _records(p: Path) -> list[tuple[dict, bool]]:
    """The records of a CSV file, each with whether its line is whole: every whole line of
    runs.csv ends with a newline (a cut inside the last field still parses as a row)."""
    with open(p, newline="", errors="replace") as f:
        recs = list(csv.DictReader(f))
    with open(p, "rb") as f:
        f.seek(0, os.SEEK_END)
        torn = f.tell() > 0 and (f.seek(-1, os.SEEK_END), f.read(1))[1] != b"\n"
    return [(rec, not (torn and i == len(recs) - 1)) for i, rec in enumerate(recs)]


# the lives that check the limits a study found (alloclab limits): in limits/<level> of its folder
LIMIT_CHECKS = ("at", "below")


def limit_checks(root: Path) -> dict:
    """level -> (cell key, allocator) -> the lives that checked the limit: their measured rows and
    the limit they had (their plan's unit_memory)."""
    out: dict = {}
    for level in LIMIT_CHECKS:
        folder = root / "limits" / level
        if (folder / "runs.csv").is_file():
            store = Store(folder)
            try:
                limits, rows = store.read_json("plan.json").get("unit_memory") or {}, store.rows()
            except (AlloclabError, OSError, ValueError):  # unreadable: the study's own answers stand without it
                continue
            got: dict = {}
            for r in rows:
                if r.purpose == "measure":
                    got.setdefault((r.cell, r.allocator), {"rows": [], "limit": limits.get(f"{r.cell}|{r.allocator}")})
                    got[(r.cell, r.allocator)]["rows"].append(r)
            out[level] = got
    return out
