"""The allocator catalog: every allocator alloclab knows by name, where it comes from, how it is
injected and proved, and the tuning it documents. Nothing here runs.

Two sources:
- Debian's packages (this machine, Debian 12, and the studies' stack, a trixie root): the
  library is found by soname and its version is the package's (dpkg-query).
- crates.io packages that bundle an allocator's own C/C++ sources: `alloclab setup allocators`
  fetches the crate with cargo (no other download) and compiles the sources into a shared object
  that replaces malloc and friends, as the upstream's own preload build does, into alloclab's
  cache (alloc/build.py). Names carry the version where Debian ships another build of the same
  allocator: `mimalloc` is Debian's 2.0.9, `mimalloc@3` the crate's.

"glibc" is the absence of any preload. Every allocator is injected with LD_PRELOAD of an absolute
path into the process under test only, and proved by its library in /proc/PID/maps (a link-time
build, name@link, by where the driver's malloc and free bind). An entry that cannot be used here
carries its reason (`refused`) and is listed with it, never dropped.
"""

from __future__ import annotations

from dataclasses import dataclass

DEBIAN = "debian"
CRATE = "crate"


@dataclass(frozen=True)
class Crate:
    """The crates.io package whose bundled sources are built, and how."""

    name: str
    version: str  # exact (cargo's =VERSION)
    upstream: str  # the allocator's own version in those sources
    recipe: str  # how alloc/build.py compiles it (one recipe per upstream build)
    library: str  # the built shared object's file name
    options: tuple[tuple[str, str], ...] = ()  # the recipe's choices (e.g. the source folder)


@dataclass(frozen=True)
class Entry:
    name: str
    family: str  # whose tuning it takes and whose account the driver reads: glibc, jemalloc, ...
    about: str  # what it is, in a few words
    package: str = ""  # Debian 12's package (DEBIAN)
    sonames: tuple[str, ...] = ()  # its library's names (or absolute paths) on the host, the first found wins
    crate: Crate | None = None  # or: built from a crate's bundled sources (CRATE)
    companions: tuple[str, ...] = ()  # other libraries the preload maps by itself (basename prefixes)
    env: tuple[tuple[str, str], ...] = ()  # set beside the preload in every process it is injected into
    root_sonames: tuple[str, ...] = ()  # its names inside the stack's root
    root_packages: tuple[str, ...] = ()  # trixie's package names: the first the suite has is installed
    refused: str = ""  # why it cannot be used here (never silently dropped)
    link_package: str = ""  # the -dev package a link-time build of the driver (name@link) needs

    @property
    def source(self) -> str:
        return CRATE if self.crate else DEBIAN

    @property
    def tuning(self) -> tuple[str, ...]:
        return TUNING.get(self.family, ())


# The environment variables each family documents. The values of MALLOC_CONF, GLIBC_TUNABLES and
# SCUDO_OPTIONS are checked too (alloc/allocators.check_tuning); what an allocator rejects at run
# time in its own words fails the run (alloc/allocators.complaints).
GLIBC_TUNING = ("MALLOC_ARENA_MAX", "MALLOC_ARENA_TEST", "MALLOC_CHECK_", "MALLOC_MMAP_MAX_", "MALLOC_MMAP_THRESHOLD_",
                "MALLOC_PERTURB_", "MALLOC_TOP_PAD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES")
GLIBC_TUNABLES = ("arena_max", "arena_test", "check", "hugetlb", "mmap_max", "mmap_threshold", "mxfast", "perturb",
                  "tcache_count", "tcache_max", "tcache_unsorted_limit", "top_pad", "trim_threshold")
GPERFTOOLS_TUNING = ("TCMALLOC_SAMPLE_PARAMETER", "TCMALLOC_RELEASE_RATE", "TCMALLOC_LARGE_ALLOC_REPORT_THRESHOLD",
                     "TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES", "TCMALLOC_AGGRESSIVE_DECOMMIT", "TCMALLOC_HEAP_LIMIT_MB",
                     "TCMALLOC_DISABLE_MEMORY_RELEASE", "TCMALLOC_SKIP_SBRK", "TCMALLOC_SKIP_MMAP",
                     "TCMALLOC_TRANSFER_NUM_OBJ", "TCMALLOC_OVERRIDE_PAGESIZE", "TCMALLOC_MEMFS_MALLOC_PATH",
                     "TCMALLOC_MEMFS_LIMIT_MB", "TCMALLOC_MEMFS_ABORT_ON_FAIL", "TCMALLOC_MEMFS_IGNORE_MMAP_FAIL",
                     "TCMALLOC_MEMFS_MAP_PRIVATE")
# mimalloc reads MIMALLOC_<OPTION> (options.c of each version; 2.0.9 is Debian's: the option table
# compiled into libmimalloc.so.2, its deprecated_* entries left out; purge_delay and the other purge
# options came with 2.1, so Debian's mimalloc would ignore them: its delay is reset_delay)
MIMALLOC_2_0_OPTIONS = ("show_errors", "show_stats", "verbose", "eager_commit", "large_os_pages",
                        "reserve_huge_os_pages", "reserve_huge_os_pages_at", "reserve_os_memory",
                        "abandoned_page_decommit", "abandoned_page_reset", "eager_commit_delay", "reset_delay",
                        "use_numa_nodes", "limit_os_alloc", "os_tag", "max_errors", "max_warnings",
                        "max_segment_reclaim", "allow_decommit", "segment_decommit_delay", "decommit_extend_delay",
                        "destroy_on_exit")
MIMALLOC_2_OPTIONS = ("abandoned_page_purge", "abandoned_page_reset", "abandoned_reclaim_on_free",
                      "allow_large_os_pages", "allow_thp", "arena_eager_commit", "arena_purge_mult", "arena_reserve",
                      "destroy_on_exit", "disallow_arena_alloc", "disallow_os_alloc", "eager_commit",
                      "eager_commit_delay", "eager_region_commit", "generic_collect", "guarded_max", "guarded_min",
                      "guarded_precise", "guarded_sample_rate", "guarded_sample_seed", "large_os_pages",
                      "limit_os_alloc", "max_errors", "max_segment_reclaim", "max_warnings", "os_tag",
                      "purge_decommits", "purge_delay", "purge_extend_delay", "reserve_huge_os_pages",
                      "reserve_huge_os_pages_at", "reserve_os_memory", "reset_decommits", "reset_delay",
                      "retry_on_oom", "show_errors", "show_stats", "target_segments_per_thread", "use_numa_nodes",
                      "verbose", "visit_abandoned")
MIMALLOC_3_OPTIONS = ("allow_large_os_pages", "allow_thp", "arena_eager_commit", "arena_is_numa_local",
                      "arena_max_object_size", "arena_purge_mult", "arena_reserve", "destroy_on_exit",
                      "disallow_arena_alloc", "disallow_os_alloc", "eager_region_commit", "generic_collect",
                      "guarded_max", "guarded_min", "guarded_precise", "guarded_sample_rate", "guarded_sample_seed",
                      "large_os_pages", "limit_os_alloc", "max_errors", "max_vabits", "max_warnings",
                      "minimal_purge_size", "os_tag", "page_commit_on_demand", "page_cross_thread_max_reclaim",
                      "page_full_retain", "page_max_candidates", "page_max_reclaim", "page_reclaim_on_free",
                      "pagemap_commit", "purge_decommits", "purge_delay", "reserve_huge_os_pages",
                      "reserve_huge_os_pages_at", "reserve_os_memory", "reset_decommits", "reset_delay",
                      "retry_on_oom", "show_errors", "show_stats", "use_numa_nodes", "verbose", "visit_abandoned")
# Google's TCMalloc reads these four (tcmalloc/parameters.cc, huge_page_aware_allocator.cc)
TCMALLOC_GOOGLE_TUNING = ("TCMALLOC_HPAA_CONTROL", "TCMALLOC_LEGACY_SIZE_CLASSES", "TCMALLOC_NUMA_AWARE",
                          "TCMALLOC_USE_HUGE_REGION_MORE_OFTEN_DISABLE")
# oneTBB's scalable allocator (src/tbbmalloc/frontend.cpp)
TBBMALLOC_TUNING = ("TBB_MALLOC_USE_HUGE_PAGES", "TBB_MALLOC_SET_HUGE_SIZE_THRESHOLD")

TUNING: dict[str, tuple[str, ...]] = {
    "glibc": GLIBC_TUNING,
    "jemalloc": ("MALLOC_CONF",),
    "tcmalloc": GPERFTOOLS_TUNING,
    "mimalloc-2.0": tuple(f"MIMALLOC_{o.upper()}" for o in MIMALLOC_2_0_OPTIONS),
    "mimalloc-2": tuple(f"MIMALLOC_{o.upper()}" for o in MIMALLOC_2_OPTIONS),
    "mimalloc-3": tuple(f"MIMALLOC_{o.upper()}" for o in MIMALLOC_3_OPTIONS),
    "tcmalloc-google": TCMALLOC_GOOGLE_TUNING,
    "tbbmalloc": TBBMALLOC_TUNING,
    "scudo": ("SCUDO_OPTIONS",),
    "snmalloc": (),  # compile-time configuration only
    "rpmalloc": (),  # compile-time configuration only
}
# the variables whose value must be a number
NUMERIC_TUNING = (set(GLIBC_TUNING[:-1]) | set(GPERFTOOLS_TUNING[:7]) | {"TCMALLOC_TRANSFER_NUM_OBJ"}
                  | {v for f in ("mimalloc-2.0", "mimalloc-2", "mimalloc-3") for v in TUNING[f]
                     if v != "MIMALLOC_RESERVE_OS_MEMORY"}
                  | set(TCMALLOC_GOOGLE_TUNING[1:]) | set(TBBMALLOC_TUNING))

# Environment variables that tune an allocator: stripped from every environment unless the
# allocator variant under test sets them, so that a stray setting in the user's shell never
# changes a run silently (alloc.environment). Each family's documented variables start with one
# of these (tests/test_catalog.py holds them so), and so do the profilers' (HEAPPROFILE).
TUNING_PREFIXES = ("MALLOC_", "TCMALLOC_", "MIMALLOC_", "JE_MALLOC_", "GLIBC_TUNABLES", "HEAPPROFILE", "SCUDO_OPTIONS",
                   "TBB_MALLOC_")

# The libraries of allocators, in the catalog or not, by the stem of their file names
# (lib<stem>...so): a glibc run that maps one of them, or another allocator's run that maps a
# second one, is not proved (alloc.allocators.prove).
FOREIGN_LIBRARIES = ("jemalloc", "mimalloc", "tcmalloc", "hoard", "tbbmalloc", "snmalloc", "rpmalloc", "scalloc",
                     "supermalloc", "lockless", "clang_rt.scudo")

# Google's TCMalloc cannot register rseq where glibc (2.35 and later) already has, and then runs
# without its per-CPU caches (measured here: MallocExtension says per-CPU caches inactive);
# glibc's own registration is turned off in the processes it is injected into
RSEQ_OFF = ("GLIBC_TUNABLES", "glibc.pthread.rseq=0")

CATALOG: tuple[Entry, ...] = (
    Entry("glibc", "glibc", "the C library's own malloc (ptmalloc2): no preload", package="libc6"),
    Entry("jemalloc", "jemalloc", "jemalloc as Debian 12 ships it (5.3.0)", package="libjemalloc2",
          sonames=("libjemalloc.so.2", "libjemalloc.so"), root_sonames=("libjemalloc.so.2",),
          root_packages=("libjemalloc2",), link_package="libjemalloc-dev"),
    Entry("jemalloc@5.3.1", "jemalloc", "jemalloc 5.3.1-dev, its own configure && make (shared library)",
          crate=Crate("tikv-jemalloc-sys", "0.7.1+5.3.1-0-g81034ce1f1373e37dc865038e1bc8eeecf559ce8",
                      "5.3.1-0-g81034ce1f1373e37dc865038e1bc8eeecf559ce8", "jemalloc", "libjemalloc.so.2")),
    Entry("mimalloc", "mimalloc-2.0", "mimalloc as Debian 12 ships it (2.0.9)", package="libmimalloc2.0",
          sonames=("libmimalloc.so.2", "libmimalloc.so.2.0", "libmimalloc.so"),
          root_sonames=("libmimalloc.so.3", "libmimalloc.so.2"), root_packages=("libmimalloc3", "libmimalloc2.0"),
          link_package="libmimalloc-dev"),
    Entry("mimalloc@2", "mimalloc-2", "mimalloc's latest 2.x (segments), built as its override library",
          crate=Crate("libmimalloc-sys", "0.1.49", "2.3.2", "mimalloc", "libmimalloc.so.2", (("dir", "v2"),))),
    Entry("mimalloc@3", "mimalloc-3", "mimalloc 3 (pages and arenas redesigned), built as its override library",
          crate=Crate("libmimalloc-sys", "0.1.49", "3.3.2", "mimalloc", "libmimalloc.so.3", (("dir", "v3"),))),
    Entry("tcmalloc", "tcmalloc", "gperftools' full tcmalloc (2.10), the library the seeds preloaded",
          package="libgoogle-perftools4", sonames=("libtcmalloc.so.4", "libtcmalloc.so"),
          root_sonames=("libtcmalloc.so.4",), root_packages=("libgoogle-perftools4t64", "libgoogle-perftools4"),
          link_package="libgoogle-perftools-dev"),
    Entry("tcmalloc-minimal", "tcmalloc", "gperftools' tcmalloc without the profilers (2.10)",
          package="libtcmalloc-minimal4", sonames=("libtcmalloc_minimal.so.4", "libtcmalloc_minimal.so"),
          root_sonames=("libtcmalloc_minimal.so.4",),
          root_packages=("libtcmalloc-minimal4t64", "libtcmalloc-minimal4")),
    Entry("tcmalloc-google", "tcmalloc-google", "Google's TCMalloc with per-CPU caches (rseq) and abseil, "
          "8 KiB pages", crate=Crate("libtcmalloc-sys", "0.1.14", "snapshot in crate 0.1.14",
                                     "tcmalloc-google", "libtcmalloc_google.so"),
          env=(RSEQ_OFF,)),
    Entry("tbbmalloc", "tbbmalloc", "oneTBB's scalable allocator through its malloc proxy (2021.8)",
          package="libtbbmalloc2", sonames=("libtbbmalloc_proxy.so.2",), companions=("libtbbmalloc.so",)),
    Entry("scudo", "scudo", "LLVM's hardened scudo (standalone), from LLVM 16's compiler-rt",
          package="libclang-rt-16-dev",
          sonames=("/usr/lib/llvm-16/lib/clang/16/lib/linux/libclang_rt.scudo_standalone-x86_64.so",)),
    Entry("snmalloc", "snmalloc", "Microsoft's snmalloc (message-passing frees), its libsnmallocshim.so",
          crate=Crate("snmalloc-sys", "0.7.6", "snapshot in crate 0.7.6", "snmalloc",
                      "libsnmallocshim.so")),
    Entry("rpmalloc", "rpmalloc", "rpmalloc (lock-free thread caches), its librpmallocwrap.so preload build",
          crate=Crate("rpmalloc-sys", "0.2.3+b097fd0", "1.4.3 (b097fd0)", "rpmalloc", "librpmallocwrap.so")),
)

BY_NAME: dict[str, Entry] = {e.name: e for e in CATALOG}
# the Debian-packaged allocators (what the host and the stack's root install)
KNOWN: dict[str, Entry] = {e.name: e for e in CATALOG if e.source == DEBIAN}
SOURCE_BUILT: dict[str, Entry] = {e.name: e for e in CATALOG if e.source == CRATE}
# a plan that names no allocators compares those of these that are installed: the seeds' own
DEFAULT_SET = ("glibc", "jemalloc", "mimalloc", "tcmalloc", "tcmalloc-minimal")
# the allocator-shootout preset: every allocator of the catalog not refused outright
SHOOTOUT = tuple(e.name for e in CATALOG if not e.refused)


# the allocators the driver can be built with (its features link-<name>, setup.sh builds each)
LINKABLE = tuple(e.name for e in CATALOG if e.link_package)


def debian_packages() -> list[str]:
    """Debian 12's packages of the catalog: each allocator's library (glibc is libc6, always
    there) and the -dev packages of the link-time builds (setup.sh installs them)."""
    return [e.package for e in CATALOG if e.package and e.package != "libc6"] + [
        e.link_package for e in CATALOG if e.link_package]


def entry(name: str) -> Entry | None:
    return BY_NAME.get(name)


def family(name: str) -> str:
    """The tuning family of a catalog name (a name outside the catalog is its own family)."""
    e = BY_NAME.get(name)
    return e.family if e else name


# a tuning's short name in answers and charts (the report's Environment says what each stands for,
# beside its version): its options as a plan spells them -> a few letters
SHORT_TUNINGS = {
    "MALLOC_CONF=background_thread:true,dirty_decay_ms:5000,muzzy_decay_ms:5000": "bg5s",
    "MALLOC_CONF=dirty_decay_ms:0,muzzy_decay_ms:0": "decay0",
    "MALLOC_CONF=dirty_decay_ms:0": "dirty0",
    "MALLOC_CONF=narenas:1": "narenas1",
    "MALLOC_CONF=background_thread:true": "bg",
    "MALLOC_ARENA_MAX=1": "arenas1",
    "MALLOC_ARENA_MAX=2": "arenas2",
    "MALLOC_TRIM_THRESHOLD_=131072": "trim128k",
    "MALLOC_MMAP_THRESHOLD_=131072": "mmap128k",
    "TCMALLOC_RELEASE_RATE=10": "release10",
    "TCMALLOC_AGGRESSIVE_DECOMMIT=1": "decommit",
    "MIMALLOC_RESET_DELAY=0": "reset0",
    "MIMALLOC_PURGE_DELAY=0": "purge0",
}


# the tunings people deploy against memory growth: jemalloc's background thread with 5 s decays
# (mariadb-operator 1808's fix), glibc with two arenas; and the settings people try, one per
# allocator and glibc's two: glibc trims above 128 KiB and serves blocks of 128 KiB and more from
# mmap, jemalloc purges at once, tcmalloc releases ten times faster, mimalloc resets at once
# (Debian's 2.0: reset_delay)
JEMALLOC_BACKGROUND = "jemalloc+MALLOC_CONF=background_thread:true,dirty_decay_ms:5000,muzzy_decay_ms:5000"
GLIBC_TWO_ARENAS = "glibc+MALLOC_ARENA_MAX=2"
LEAN_TUNINGS = ["glibc+MALLOC_TRIM_THRESHOLD_=131072", "glibc+MALLOC_MMAP_THRESHOLD_=131072",
                "jemalloc+MALLOC_CONF=dirty_decay_ms:0,muzzy_decay_ms:0", "tcmalloc+TCMALLOC_RELEASE_RATE=10",
                "mimalloc+MIMALLOC_RESET_DELAY=0"]


# the settings public reports found a cliff at, each beside its allocator: RocksDB/MyRocks with one
# arena (bloat gone, speed "lousy"), jemalloc purging at once (ClickHouse: about 2x slower from
# madvise) and with one arena, mimalloc purging at once (a web server: -31 % requests; Debian's
# 2.0 spells it reset_delay), gperftools decommitting at once (speed "tanks") and releasing ten
# times faster
CLIFF_TUNINGS = ["glibc+MALLOC_ARENA_MAX=1", GLIBC_TWO_ARENAS, "jemalloc+MALLOC_CONF=dirty_decay_ms:0,muzzy_decay_ms:0",
                 "jemalloc+MALLOC_CONF=narenas:1", "mimalloc+MIMALLOC_RESET_DELAY=0",
                 "tcmalloc+TCMALLOC_AGGRESSIVE_DECOMMIT=1", "tcmalloc+TCMALLOC_RELEASE_RATE=10"]


def short_name(name: str) -> str:
    """An allocator as answers and charts name it: a known tuning by its short name
    (jemalloc+bg5s), anything else as given."""
    base, plus, tuning = name.partition("+")
    return f"{base}+{SHORT_TUNINGS[tuning]}" if plus and tuning in SHORT_TUNINGS else name
