"""The allocators alloclab knows by name, where Debian ships them: on this machine (Debian 12)
and in the studies' stack (a trixie root). "glibc" is the absence of any preload."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Known:
    sonames: tuple[str, ...]  # the library's names on the host, the first found wins
    package: str  # Debian 12's package
    root_sonames: tuple[str, ...] = ()  # its names inside the stack's root
    root_packages: tuple[str, ...] = ()  # trixie's package names: the first the suite has is installed


KNOWN: dict[str, Known] = {
    "glibc": Known((), "libc6"),
    "jemalloc": Known(("libjemalloc.so.2", "libjemalloc.so"), "libjemalloc2", ("libjemalloc.so.2",), ("libjemalloc2",)),
    "mimalloc": Known(("libmimalloc.so.2", "libmimalloc.so.2.0", "libmimalloc.so"), "libmimalloc2.0",
                      ("libmimalloc.so.3", "libmimalloc.so.2"), ("libmimalloc3", "libmimalloc2.0")),
    "tcmalloc": Known(("libtcmalloc.so.4", "libtcmalloc.so"), "libgoogle-perftools4", ("libtcmalloc.so.4",),
                      ("libgoogle-perftools4t64", "libgoogle-perftools4")),
    "tcmalloc-minimal": Known(("libtcmalloc_minimal.so.4", "libtcmalloc_minimal.so"), "libtcmalloc-minimal4",
                              ("libtcmalloc_minimal.so.4",), ("libtcmalloc-minimal4t64", "libtcmalloc-minimal4")),
}
