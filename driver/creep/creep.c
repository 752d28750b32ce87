/* A planted creep (issue 36): preloaded into a process, it keeps ALLOCLAB_CREEP_KIB KiB more
 * every ALLOCLAB_CREEP_PERIOD_S seconds (default 1), allocated with malloc, touched and never
 * freed, so a life's creep measurement has a known slope to find. It interposes nothing: a
 * constructor starts one detached thread that does it on a fixed schedule (the k-th time at
 * k periods after the process started).
 *
 * The memory is taken as blocks of 4080 bytes, a page less a 16-byte header: glibc's chunk and
 * the 4 KiB size classes of jemalloc, tcmalloc and mimalloc each fill exactly one page, so no
 * header per block adds up. Measured with `sleep` (1024 KiB every 0.5 s, 6 cycles): glibc and
 * mimalloc grow by exactly the planted rate; tcmalloc by 0.3 % more and jemalloc by 3.4 % more
 * (their own bookkeeping of the blocks: part of what an allocator costs). The blocks stay
 * reachable (each points to the one before) so a leak checker sees them as kept, not lost.
 *
 * A process that forks keeps the creep in the parent only (threads do not survive fork). The
 * thread blocks every signal, so that none meant for the process lands on it: MariaDB handles
 * SIGTERM in a thread of its own that waits for it, and a SIGTERM taken by the shim's thread
 * only printed "Got signal 15" and left the server up.
 * Without a valid ALLOCLAB_CREEP_KIB (a positive multiple of 4) the process stops at once with
 * a message: a run labelled as creeping must creep.
 *
 * Build: cc -O2 -shared -fPIC -pthread -o liballoclab_creep.so creep.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BLOCK_BYTES 4080
#define PAGE_KIB 4

static void *kept; /* the newest block; each block's first word points to the one before */
static long blocks_per_cycle;
static struct timespec period;

static void fail(const char *what) {
    fprintf(stderr, "alloclab creep shim: %s\n", what);
    _exit(97);
}

static void add(struct timespec *t, const struct timespec *d) {
    t->tv_sec += d->tv_sec;
    t->tv_nsec += d->tv_nsec;
    if (t->tv_nsec >= 1000000000L) {
        t->tv_sec += 1;
        t->tv_nsec -= 1000000000L;
    }
}

static void *creep(void *unused) {
    (void)unused;
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    for (;;) {
        add(&next, &period);
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR) {
        }
        for (long i = 0; i < blocks_per_cycle; i++) {
            char *b = malloc(BLOCK_BYTES);
            if (b == NULL)
                fail("malloc returned NULL");
            memset(b, 0xa5, BLOCK_BYTES);
            *(void **)b = kept;
            kept = b;
        }
    }
    return NULL;
}

__attribute__((constructor)) static void start(void) {
    const char *kib = getenv("ALLOCLAB_CREEP_KIB");
    const char *secs = getenv("ALLOCLAB_CREEP_PERIOD_S");
    char *end;
    long k = kib ? strtol(kib, &end, 10) : 0;
    if (kib == NULL || *end != '\0' || k <= 0 || k % PAGE_KIB != 0)
        fail("set ALLOCLAB_CREEP_KIB to a positive multiple of 4 (KiB kept per period)");
    double p = secs ? strtod(secs, &end) : 1.0;
    if ((secs != NULL && *end != '\0') || !(p >= 0.01))
        fail("set ALLOCLAB_CREEP_PERIOD_S to a period of 0.01 seconds or more");
    blocks_per_cycle = k / PAGE_KIB;
    period.tv_sec = (time_t)p;
    period.tv_nsec = (long)((p - (double)period.tv_sec) * 1e9);
    /* the thread starts with every signal blocked (it inherits the mask it is created with) */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t t;
    int made = pthread_create(&t, NULL, creep, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (made != 0)
        fail("cannot start its thread");
    pthread_detach(t);
}
