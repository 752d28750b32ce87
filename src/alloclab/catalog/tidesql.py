"""TideSQL builds of the studies' stack: one TideSQL release on one TidesDB release each, named
by what follows `@` in `mariadb11-tidesdb@NAME`. How they are built is servers.stack's."""

from __future__ import annotations

from dataclasses import dataclass

from alloclab.core.errors import AlloclabError

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
FIXED_BUILD = "4.2.5"  # the seeds' TideSQL on the first TidesDB release with the string-index fix


def build(name: str | None) -> Build:
    """The TideSQL build a target names (`mariadb11-tidesdb@NAME`; none: the default)."""
    key = name or DEFAULT_BUILD
    if key not in BUILDS:
        raise AlloclabError(f"mariadb11-tidesdb@{name}: no TideSQL build '{name}'",
                            "use one of: " + ", ".join(f"@{b.name} ({b.describe()})" for b in BUILDS.values()))
    return BUILDS[key]


# Measured by the stack's check step (servers.stack.link_binding): TideSQL's libtidesdb built with
# mimalloc linked in maps mimalloc inside mariadbd, but its malloc and free bind to libc.so.6 (the
# server's lookup scope comes first), so a link-time allocator never takes effect in a plugin.
LINKED_IN_PLUGIN = ("TideSQL's libtidesdb built with mimalloc linked in maps mimalloc inside mariadbd, but for "
                    "malloc and free it binds to libc.so.6 (LD_DEBUG=bindings, alloclab setup stack's check)")
