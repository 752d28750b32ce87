"""The server targets alloclab can start, by name, and their settings profiles (profiles/*.conf).

Names only: starting and stopping a server is servers.server's; the studies' stack (MariaDB 11.8
in a trixie root) is servers.stack's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from alloclab.catalog import tidesql
from alloclab.core.errors import AlloclabError

PROFILE_DIR = Path(__file__).parents[1] / "profiles"


@dataclass(frozen=True)
class ServerTarget:
    """A server and the storage engine the workload's tables use."""

    name: str
    kind: str  # "mariadb" | "postgres"
    engine: str  # the ENGINE= of CREATE TABLE (MariaDB); "heap" for PostgreSQL
    plugin: str | None = None  # a storage-engine plugin to load (MariaDB)
    stack: bool = False  # runs inside the studies' stack (alloclab setup stack), not the host's packages
    tidesql: str | None = None  # the stack's TideSQL build (catalog.tidesql.BUILDS) whose plugin this target loads

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
    # TideSQL: the default build; `mariadb11-tidesdb@NAME` another (catalog.tidesql.BUILDS)
    "mariadb11-tidesdb": ServerTarget("mariadb11-tidesdb", "mariadb", "TidesDB", stack=True),
}


def parse(name: str) -> ServerTarget:
    """`mariadb-innodb`, `mariadb-myrocks`, `postgres`, the stack's `mariadb11-innodb`,
    `mariadb11-myrocks`, `mariadb11-tidesdb` (TideSQL; `mariadb11-tidesdb@4.2.5`, `@seed000` ...
    name other TideSQL builds), or `mariadb:ENGINE=plugin.so` / `mariadb11:ENGINE=plugin.so` for
    any storage-engine plugin."""
    base, at, build_name = name.partition("@")
    if base == "mariadb11-tidesdb":
        b = tidesql.build(build_name if at else None)
        return ServerTarget(name, "mariadb", "TidesDB", b.plugin, stack=True, tidesql=b.name)
    if name in BUILTIN:
        return BUILTIN[name]
    m = re.fullmatch(r"(mariadb|mariadb11):([A-Za-z0-9_]+)(?:=([A-Za-z0-9_.-]+\.so))?", name)
    if not m:
        raise AlloclabError(f"unknown server target '{name}'",
                            "use " + ", ".join(BUILTIN) + ", or mariadb:ENGINE=plugin.so (mariadb11: for the stack)")
    return ServerTarget(name, "mariadb", m.group(2).upper(), m.group(3), stack=m.group(1) == "mariadb11")


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
