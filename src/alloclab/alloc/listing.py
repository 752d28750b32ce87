"""The allocator catalog as `alloclab allocators` and `alloclab setup allocators` print it."""

from __future__ import annotations

from alloclab.alloc import allocators, build


def catalog() -> list[str]:
    """One line per catalog allocator (name, version, source, usable here, proved in the last run,
    tunings), then what each is and where its library is, or why it cannot be used here."""
    rows = allocators.library_version_list()
    proofs = build.last_proofs()
    out = [f"{'name':17s} {'version':30s} {'from':7s} {'here':9s} {'proved in the last run':24s} tunings"]
    for r in rows:
        here = "yes" if r["installed"] else "refused" if r["refused"] else "no"
        seen = proofs.get(r["name"])
        proved = f"{seen['at'][:16]} {seen['engine']}" if seen else "-"
        tunings = (", ".join(r["tuning"][:3]) + (f" (+{len(r['tuning']) - 3})" if len(r["tuning"]) > 3 else "")
                   if r["tuning"] else "none at run time")
        version = r.get("version") or (r["crate"] if not r["installed"] and r.get("crate") else "")
        out.append(f"{r['name']:17s} {version[:30]:30s} {r['from']:7s} {here:9s} {proved:24s} {tunings}")
    for r in rows:
        if not r["installed"]:
            out.append(f"  {r['name']}: {r['about']}; {r['why_not']}")
            continue
        env = " ".join(f"{k}={v}" for k, v in (r.get("env") or {}).items())
        probe = r.get("probe", {})
        out.append(f"  {r['name']}: {r['about']}; {r.get('source') or ''}"
                   f"{'; ' + r['path'] if r.get('path') else ''}{'; runs with ' + env if env else ''}"
                   + ("" if "per_cpu_caches_active" not in probe else
                      f"; per-CPU caches (rseq) {'active' if probe['per_cpu_caches_active'] else 'NOT active'}"
                      " in a probe, by its own MallocExtension"))
    out.append("\nalso: any library as name=/path/lib.so, and tuning variants as name+ENV=value "
               "(e.g. jemalloc+MALLOC_CONF=narenas:2, glibc+MALLOC_ARENA_MAX=2)")
    return out


def built(made: dict[str, dict | None]) -> list[str]:
    """What `alloclab setup allocators` made: each library, or why it was refused."""
    out = []
    for n, m in made.items():
        if m and m.get("refused"):
            out.append(f"{n}: refused: {m['refused']}")
        elif m:
            out.append(f"{n}: {m['upstream']} from crate {m['crate']} {m['crate_version']}, {m['path']} "
                       f"(sha256 {m['sha256'][:16]}…)")
    return out
