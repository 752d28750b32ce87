"""Tuning variants (name+ENV=value): refused before any run when the allocator does not document
the variable or cannot take the value (most allocators ignore what they do not know without a
word), and failed after the run when the allocator said in its own log that it rejected it.
The variables each allocator documents are the catalog's (catalog/allocators.TUNING)."""

from __future__ import annotations

import re

from alloclab.catalog.allocators import GLIBC_TUNABLES, NUMERIC_TUNING, TUNING, family
from alloclab.core.errors import AlloclabError


def check(spec: str, name: str, env: list[tuple[str, str]]) -> None:
    """Refuse a tuning that catalog allocator `name` does not document, or a value it cannot
    take. An allocator outside the catalog (name=/lib.so) is not checked."""
    fam = family(name)
    documented = TUNING.get(fam)
    if documented is None:
        return
    for k, v in env:
        if k not in documented:
            raise AlloclabError(f"allocator '{spec}': {k} is not an option {name} documents, so it would be ignored "
                                "without a word", f"{name}'s options: " + (", ".join(documented) or
                                                                          "none at run time (compile-time only)"))
        if k in NUMERIC_TUNING and not re.fullmatch(r"-?[0-9]+(\.[0-9]+)?", v):
            raise AlloclabError(f"allocator '{spec}': {k}={v!r} is not a number", f"give {k} a number, e.g. {k}=2")
        if k == "GLIBC_TUNABLES":
            for item in v.split(":"):
                key, sep, val = item.partition("=")
                if not sep or not key.startswith("glibc.malloc.") or key[13:] not in GLIBC_TUNABLES \
                        or not re.fullmatch(r"[0-9]+", val):
                    raise AlloclabError(f"allocator '{spec}': GLIBC_TUNABLES item {item!r} is not a glibc.malloc "
                                        "tunable with a number", "glibc.malloc tunables: " +
                                        ", ".join(GLIBC_TUNABLES) + ", e.g. GLIBC_TUNABLES=glibc.malloc.arena_max=2")
        if k == "MALLOC_CONF":
            bad = [p for p in v.split(",") if not re.fullmatch(r"[a-z_0-9.]+:[^,:]*", p)]
            if bad or not v:
                raise AlloclabError(f"allocator '{spec}': MALLOC_CONF={v!r} is not a list of key:value",
                                    "write e.g. MALLOC_CONF=narenas:2,dirty_decay_ms:1000")
        if k == "SCUDO_OPTIONS":
            bad = [p for p in re.split(r"[:,\s]+", v) if p and not re.fullmatch(r"[A-Za-z_0-9]+=[^=]*", p)]
            if bad or not v:
                raise AlloclabError(f"allocator '{spec}': SCUDO_OPTIONS={v!r} is not a list of key=value",
                                    "write e.g. SCUDO_OPTIONS=release_to_os_interval_ms=1000:quarantine_size_kb=0")


def split_list(text: str) -> list[str]:
    """`--allocators`' comma-separated list, where a tuning's value may hold commas of its own
    (MALLOC_CONF=dirty_decay_ms:0,muzzy_decay_ms:0): a piece that is an option (key:value, no
    name or path of its own) after a tuning continues that tuning's value."""
    out: list[str] = []
    for piece in (t.strip() for t in text.split(",")):
        if not piece:
            continue
        if out and "+" in out[-1] and "=" in out[-1] and re.fullmatch(r"[a-z_0-9.]+:[^,:+=/]*", piece):
            out[-1] += "," + piece
        else:
            out.append(piece)
    return out


# What an allocator writes when it rejects its tuning (found in the process's own log)
# (scudo names the flags it did not recognise on the lines after its warning)
COMPLAINTS = re.compile(r"<jemalloc>: .*|mimalloc: .*(?:invalid value|unknown option).*"
                        r"|Scudo (?:WARNING|ERROR): [^\n]*(?:\n[ \t]+\S[^\n]*)*", re.I)


def complaints(log_text: str) -> list[str]:
    """The lines in which an allocator said it rejected its tuning, each once."""
    return list(dict.fromkeys(" ".join(m.group(0).split()) for m in COMPLAINTS.finditer(log_text)))
