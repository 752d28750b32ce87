"""The `alloclab` command. The only module that prints for the user and decides exit codes."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from alloclab import __version__, doctor, report, study, workloads
from alloclab import plan as plan_mod
from alloclab.alloc import build, listing, tuning
from alloclab.answers import analyse, compare, metrics
from alloclab.catalog import tidesql
from alloclab.catalog.allocators import SOURCE_BUILT
from alloclab.catalog.names import HAMMERDB
from alloclab.clients import hammerdb
from alloclab.core.errors import AlloclabError
from alloclab.core.units import csv_list, fmt_duration, parse_duration
from alloclab.plan import flags, presets
from alloclab.plan import workload as workload_mod
from alloclab.report import to_markdown
from alloclab.results.store import Store, check_can_make
from alloclab.servers import stack
from alloclab.study import limits as limit_checks
from alloclab.study.progress import Progress

EXIT_OK, EXIT_FAILED_RUNS, EXIT_USAGE = 0, 3, 2


PLAN_FLAGS = ("preset", "plan", "scale", "engines", "allocators", "workloads", "client", "threads", "batch", "runs",
              "duration", "ops", "warmup", "slice", "turn_warmup", "seed", "baseline", "name", "out", "server_cpus",
              "client_cpus", "server_memory", "target_ci", "margin", "max_rounds", "profile",
              *(f for wl in workload_mod.every() for f in wl.flags))


def _allocator_list(text: str) -> list[str]:
    items = tuning.split_list(text)
    if not items:
        raise argparse.ArgumentTypeError("expected a comma-separated list")
    return items


def _percent(text: str) -> float:
    try:
        return float(text.rstrip("%").strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a percentage such as 2 or 2.5, got {text!r}") from None


def _finish(result: study.StudyResult, out: Path) -> int:
    md = report.build(out)
    answers = md.parent / "answers.md"
    if answers.exists():
        print(answers.read_text())
    print(f"{result.ok} ok, {result.failed} failed, {result.invalid} invalid of {result.total} runs"
          f"{f' in {result.rounds} round(s)' if result.rounds else ''}"
          f"{f'; stopped: {result.stop}' if result.stop else ''}")
    print(f"report: {md.with_suffix('.html')} (also {md.name}, charts/, tables/)")
    print(f"verify: alloclab verify {out}")
    if result.failed or result.invalid:
        print("runs that failed or whose allocator was not proved are listed in the report", file=sys.stderr)
        return EXIT_FAILED_RUNS
    return EXIT_OK


def cmd_resume(a: argparse.Namespace) -> int:
    given = [f"--{f.replace('_', '-')}" for f in PLAN_FLAGS if getattr(a, f, None)]
    if given:
        raise AlloclabError(f"--resume continues the stored plan; {', '.join(given)} cannot change it",
                            "drop those flags, or start a new study with --out")
    out = Path(a.resume)
    live = False if a.quiet else None
    budget = parse_duration(a.budget, "--budget") if a.budget is not None else None
    result = study.resume(out, Progress(0, live=live), budget=budget, ray_address=a.ray)
    return _finish(result, out)


def cmd_run(a: argparse.Namespace) -> int:
    if a.resume:
        return cmd_resume(a)
    raw = flags.plan_dict(a)
    plan = plan_mod.load(raw)
    out = Path(a.out) if a.out else study.default_out(plan.name)
    check_can_make(out, "--out" if a.out else "the results folder")
    progress = Progress(0, live=False if a.quiet else None)
    units = len(plan.units())
    if plan.adaptive:
        on = "".join(f"of {', '.join(map(metrics.words, g))} " for g in [plan.design.decide_on] if g)
        within = metrics.margin_words(plan.design.decide_on, plan.design.margin, {c.workload for c in plan.cells()},
                                      plan.design.margins)
        how = ((f"as many rounds as its budget affords, then every comparison {on}decided once (a direction, or "
                f"equivalent within {within}), at most {plan.design.max_rounds} rounds"
                if plan.design.max_looks == 1 and plan.budget else
                f"rounds until every comparison {on}is decided (a direction, or equivalent within {within}), "
                f"at least {plan.design.min_runs} and at most {plan.design.max_rounds} rounds")
               + (f", budget {fmt_duration(plan.budget)}" if plan.budget else ", no time budget"))
    else:
        how = f"exactly {plan.runs} round(s) = {units * (plan.runs or 0)} runs"
    progress.message(f"alloclab {__version__}: study '{plan.name}' ({plan.scale}): "
                     f"{len(plan.engines)} engine(s) x {len(plan.allocators)} allocator(s) "
                     f"[{', '.join(x.name for x in plan.allocators)}] x {len(plan.cells()) // len(plan.engines)} "
                     f"workload cell(s) = {units} cell x allocator; {how}; seed {plan.seed}")
    progress.message(f"results: {out}")
    result = study.run(plan, out, progress)
    return _finish(result, out)


def cmd_limits(a: argparse.Namespace) -> int:
    out = Path(a.dir)
    done = limit_checks.check(out, a.below, a.lives, Progress(0, live=False if a.quiet else None))
    md = report.build(out)
    answers = md.parent / "answers.md"
    if answers.exists():
        print(answers.read_text())
    for level, result in done.items():
        print(f"lives {level} the limit: {result.ok} ok, {result.failed} failed, {result.invalid} invalid of "
              f"{result.total} (a kill is an outcome, not a failure)")
    print(f"report: {md.with_suffix('.html')} (the limit table: tables/life_limit.csv)")
    return EXIT_OK if not any(r.failed or r.invalid for r in done.values()) else EXIT_FAILED_RUNS


def cmd_allocators(a: argparse.Namespace) -> int:
    print("\n".join(listing.catalog()))
    return EXIT_OK


def cmd_report(a: argparse.Namespace) -> int:
    md = report.build(Path(a.dir))
    print(md.read_text())
    print(f"report: {md}")
    return EXIT_OK


def cmd_verify(a: argparse.Namespace) -> int:
    problems = Store(Path(a.dir)).verify()  # a folder that is no results folder is refused (rc 2)
    if problems:
        for p in problems:
            print(p)
        print(f"{a.dir}: {len(problems)} problem(s) against MANIFEST.sha256", file=sys.stderr)
        return 1
    print(f"{a.dir}: every file matches MANIFEST.sha256")
    return EXIT_OK


def cmd_compare(a: argparse.Namespace) -> int:
    """Replication of two or more folders (machines may differ) and what to expect on a new
    machine; for two folders from one machine (or --force), also their before/after."""
    if len(a.dirs) < 2:
        raise AlloclabError("compare needs two results folders or more", "alloclab compare BEFORE AFTER [MORE...]")
    studies = [analyse.load(Path(d)) for d in a.dirs]
    diff = compare.machine_differences(studies)
    lines, expect = compare.new_machine_of(studies)
    tables = [compare.replication(studies), expect]
    if len(studies) == 2 and not a.replicate and (a.force or not diff):
        tables += compare.before_after(studies[0], studies[1], force=a.force)
    head = ("The machines differ (the answers say where each holds):\n" + "\n".join(f"- {d}" for d in diff) + "\n\n"
            if diff else "")
    head += "".join(f"{x}\n" for x in lines) + ("\n" if lines else "")
    agree = compare.agreement(studies)
    head += "".join(f"- {x}\n" for x in agree) + ("\n" if agree else "")
    text = head + "\n\n".join(f"## {t.title}\n\n" + (f"_{t.note}_\n\n" if t.note else "") + to_markdown(t)
                                for t in tables) + "\n"
    print(text)
    if a.out:
        Path(a.out).write_text(text)
        print(f"written: {a.out}")
    return EXIT_OK


def cmd_bundle(a: argparse.Namespace) -> int:
    root = Path(a.dir)
    zip_path = Path(a.out) if a.out else root.with_name(root.resolve().name + ".zip")
    path, digest = Store(root).bundle(zip_path)
    print(f"{digest}  {path}")
    print(f"written: {path} and {path}.sha256")
    return EXIT_OK


def cmd_doctor(a: argparse.Namespace) -> int:

    for f in doctor.findings():
        mark = {True: "ok  ", False: "WARN", None: "?   "}[f.ok]
        print(f"[{mark}] {f.name}: {f.value}\n       {f.meaning}")
    return EXIT_OK


def cmd_setup(a: argparse.Namespace) -> int:

    if a.what == HAMMERDB:
        rec = hammerdb.install(notify=lambda m: print(m, flush=True))
        print(f"HammerDB {rec['version']} ready at {rec['home']} (Tcl packages: {', '.join(rec['tcl_packages'])})")
        return EXIT_OK
    if a.what == "allocators":
        made = build.setup(a.names or None, force=a.force, notify=lambda m: print(m, flush=True))
        print("\n".join(listing.built(made)))
        return EXIT_OK
    if a.names:
        raise AlloclabError(f"alloclab setup {a.what} takes no names ({' '.join(a.names)})",
                            "names are for alloclab setup allocators NAME...")
    if a.what != "stack":
        raise AlloclabError(f"unknown setup target '{a.what}'",
                            "use: alloclab setup stack, alloclab setup hammerdb or alloclab setup allocators")
    builds = [tidesql.build(b).name for b in a.tidesql or ()]  # an unknown build is refused before any work
    st = stack.setup(notify=lambda m: print(m, flush=True), force=a.force, builds=builds)
    c = st["steps"]["check"]
    print(f"stack ready at {st['home']}: MariaDB {c['server_version']} (engines {', '.join(c['engines'])}); "
          "TideSQL builds: " + "; ".join(
              f"mariadb11-tidesdb{'' if n == tidesql.DEFAULT_BUILD else '@' + n} = {tidesql.BUILDS[n].describe()} "
              f"(plugin {r['plugin_version']})" for n, r in sorted(st["builds"].items()) if n in tidesql.BUILDS))
    return EXIT_OK


def cmd_presets(a: argparse.Namespace) -> int:
    for name, (_fn, desc) in presets.PRESETS.items():
        print(f"{name:20s} {desc}")
    print(f"\nscales: {', '.join(presets.SCALES)}")
    return EXIT_OK


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="alloclab", description=__doc__)
    p.add_argument("--version", action="version", version=f"alloclab {__version__}")
    sub = p.add_subparsers(dest="cmd")
    r = sub.add_parser("run", help="run a study (default: the quick kv-allocators preset)")
    src = r.add_mutually_exclusive_group()
    src.add_argument("--preset", help="a preset name (see `alloclab presets`)")
    src.add_argument("--plan", help="a TOML plan file")
    r.add_argument("--scale", choices=presets.SCALES, help="size of a preset (default quick)")
    r.add_argument("--engines", type=csv_list(str), help="e.g. tidesdb,rocksdb,sqlite")
    r.add_argument("--allocators", type=_allocator_list,
                   help="e.g. glibc,jemalloc,mimalloc=/opt/lib.so,jemalloc+MALLOC_CONF=narenas:2,dirty_decay_ms:0 "
                        "(a tuning's options may hold commas; default: all found)")
    r.add_argument("--workloads", type=csv_list(str),
                   help="workload kinds, preset parts or sysbench tests, e.g. write,read or oltp_read_only")
    r.add_argument("--client", help="the client of a server workload: sysbench or native for sysbench's tests; "
                                    "native or hammerdb (the seeds' HammerDB 4.12) for TPC-C")
    r.add_argument("--threads", type=csv_list(int), help="e.g. 1,4,8")
    r.add_argument("--batch", type=csv_list(int), help="e.g. 1,100,1000")
    r.add_argument("--runs", type=int, help="exactly this many runs of every cell (default: rounds until decided)")
    r.add_argument("--target-ci", type=_percent, metavar="PCT",
                   help="a cell that takes part in no comparison stops once its 95%% CI half-width is within PCT "
                        "%% (default 2); compared cells stop when their comparisons are decided")
    r.add_argument("--margin", type=_percent, metavar="PCT",
                   help="'equivalent' when the whole CI of a ratio is within ±PCT %% (default 2)")
    r.add_argument("--budget", metavar="DURATION",
                   help="wall time for the whole study, e.g. 10m, 2h; with --resume, the new total")
    r.add_argument("--max-rounds", type=int, metavar="N", help="at most N rounds (default 30)")
    dur = r.add_mutually_exclusive_group()
    dur.add_argument("--duration", help="measured time per run, e.g. 10s, 2m")
    dur.add_argument("--ops", type=int, help="measured operations per run")
    r.add_argument("--warmup", help="unmeasured warm-up per run, e.g. 2s")
    r.add_argument("--slice", metavar="DURATION",
                   help="measure a cell's allocators in turns of DURATION, e.g. 500ms (0: one after another): "
                        "their drivers stay up and take turns, so that a machine whose speed drifts slows each "
                        "alike (embedded key-value cells; default in the default study)")
    r.add_argument("--turn-warmup", metavar="DURATION",
                   help="in turns, each turn's unmeasured start, e.g. 200ms (default 20ms): what the others' "
                        "turns took (caches, pages handed back while stopped) is the run's own again")
    for wl in workloads.every():  # each workload's own flags (TPC-C's warehouses, ...)
        wl.add_flags(r)
    r.add_argument("--server-cpus", help="CPU set of the process under test (a server, or the driver), e.g. 0-3")
    r.add_argument("--client-cpus", help="CPU set of the client of a server, e.g. 4-7")
    r.add_argument("--server-memory", help="memory limit of a server (a cgroup), e.g. 2GiB")
    r.add_argument("--seed", type=int, help="seed of the run order and the key streams")
    r.add_argument("--baseline", help="allocator the others are compared to (default glibc)")
    r.add_argument("--name", help="study name")
    r.add_argument("--out", help="results folder (default: a new folder under ./results)")
    r.add_argument("--profile", action=argparse.BooleanOptionalAction, default=None,
                   help="add profiled runs beside the measured ones (never in the statistics): perf CPU samples "
                        "and context switches of the measured window (allocator share of CPU, flame graphs) and "
                        "a short run counting the allocator's calls and sizes (uprobes); on by default in "
                        "sysbench-scaling, --no-profile turns it off")
    r.add_argument("--ray", metavar="ADDRESS",
                   help="run on the nodes of a Ray cluster (host:port of its head, or auto): one run per node at a "
                        "time, on nodes started with --resources='{\"alloclab_slot\": 1}'; with --resume, the "
                        "cluster to finish on (default: the one the study started on)")
    r.add_argument("--quiet", action="store_true", help="plain lines, no live display")
    r.add_argument("--resume", metavar="DIR", help="finish a study that was interrupted: finished runs are kept")
    r.set_defaults(fn=cmd_run)
    li = sub.add_parser("limits", help="check the memory limits a study of lives found: its lives again under "
                        "a cgroup limit of what each needs, and of less")
    li.add_argument("dir", help="the study's results folder (memory-life)")
    li.add_argument("--below", type=_percent, default=10.0, metavar="PCT",
                    help="the second limit, this share below what each needs (default 10)")
    li.add_argument("--lives", type=int, default=2, help="rounds of lives at each limit (default 2)")
    li.add_argument("--quiet", action="store_true", help="no progress lines")
    li.set_defaults(fn=cmd_limits)
    al = sub.add_parser("allocators", help="list the allocator catalog: version, source, usable here or why "
                        "not, proved in the last run, tunings")
    al.set_defaults(fn=cmd_allocators)
    rp = sub.add_parser("report", help="rebuild the report of a results folder from its files")
    rp.add_argument("dir")
    rp.set_defaults(fn=cmd_report)
    v = sub.add_parser("verify", help="check a results folder against its MANIFEST.sha256")
    v.add_argument("dir")
    v.set_defaults(fn=cmd_verify)
    for name, what in (("compare", "replication of two or more results folders (do their verdicts agree?), what "
                                   "to expect on a new machine and, for two from one machine, their before/after"),
                       ("replicate", "replication only: do the folders' verdicts agree (machines may differ), and "
                                     "what to expect on a new machine?")):
        c = sub.add_parser(name, help=what)
        c.add_argument("dirs", nargs="+", metavar="DIR",
                       help="results folders of the same plan, the first the reference")
        c.add_argument("--force", action="store_true", help="before/after even if machine or settings differ")
        c.add_argument("--out", help="also write the tables to this Markdown file")
        c.set_defaults(fn=cmd_compare, replicate=name == "replicate")
    b = sub.add_parser("bundle", help="zip a results folder and write its SHA-256")
    b.add_argument("dir")
    b.add_argument("--out", help="zip path (default: DIR.zip beside the folder)")
    b.set_defaults(fn=cmd_bundle)
    d = sub.add_parser("doctor", help="what on this machine can move the numbers, and what it means")
    d.set_defaults(fn=cmd_doctor)
    su = sub.add_parser("setup", help="build and cache what some studies need: the stack (MariaDB 11.8.6 with "
                        "TideSQL), HammerDB, the allocators built from sources")
    su.add_argument("what", choices=["stack", HAMMERDB, "allocators"],
                    help="stack: the studies' MariaDB 11.8.6 + TideSQL in a Debian root; hammerdb: HammerDB 4.12, "
                         "the seeds' TPC-C client; allocators: the allocators built from crates' sources "
                         f"({', '.join(SOURCE_BUILT)})")
    su.add_argument("names", nargs="*", metavar="NAME", help="allocators: only these (default: all)")
    su.add_argument("--force", action="store_true", help="start again from nothing")
    su.add_argument("--tidesql", action="append", metavar="BUILD",
                    help=f"also build this TideSQL build ({', '.join(tidesql.BUILDS)}; repeatable)")
    su.set_defaults(fn=cmd_setup)
    ps = sub.add_parser("presets", help="list the presets")
    ps.set_defaults(fn=cmd_presets)
    return p


def _sigterm(_signum, _frame):
    raise KeyboardInterrupt


def _options(p: argparse.ArgumentParser) -> tuple[set[str], set[str]]:
    """Every option string of `p` and its subcommands, and those that take a value."""
    names, valued = set(), set()
    for action in p._actions:  # argparse keeps its actions here; no public accessor
        names.update(action.option_strings)
        if action.option_strings and action.nargs != 0:
            valued.update(action.option_strings)
        for sub in (action.choices or {}).values() if isinstance(action, argparse._SubParsersAction) else ():
            n, v = _options(sub)
            names |= n
            valued |= v
    return names, valued


def dash_values(argv: list[str], p: argparse.ArgumentParser) -> list[str]:
    """`--duration -5s` as `--duration=-5s`: a value that begins with '-' (and is no option)
    reaches the validation of its flag, which says what is allowed, instead of argparse taking
    it for an option."""
    names, valued = _options(p)
    out: list[str] = []
    i = 0
    while i < len(argv):
        tok = argv[i]
        nxt = argv[i + 1] if i + 1 < len(argv) else None
        if (tok in valued and nxt is not None and nxt.startswith("-") and nxt != "--"
                and nxt.split("=", 1)[0] not in names):
            out.append(f"{tok}={nxt}")
            i += 2
            continue
        out.append(tok)
        i += 1
    return out


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _sigterm)  # a stop request is handled like Ctrl-C
    p = parser()
    argv = dash_values(list(argv if argv is not None else sys.argv[1:]), p)
    args = p.parse_args(argv)
    if not getattr(args, "fn", None):
        args = p.parse_args(["run", *argv])
    try:
        return args.fn(args)
    except AlloclabError as e:
        print(f"alloclab: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # output piped into `head` and the like
        return EXIT_OK
    except study.Interrupted as e:
        print(f"\nalloclab: {e}; the run in progress was stopped and discarded, finished runs are kept.\n"
              f"  -> resume with: alloclab run --resume {e.out}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print("\nalloclab: interrupted", file=sys.stderr)
        return 130
