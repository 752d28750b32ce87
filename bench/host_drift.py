#!/usr/bin/env python3
"""How much this machine's own speed drifts, and what turns do about it (not a test).

Runs one memory-bound loop per core (random reads over 128 MiB each, compiled with cc) for
--seconds, counting iterations per 0.5 s, with nothing else of alloclab running. Then cuts the
trace the two ways a study can measure four identical "allocators": 5 s windows one after
another (3 s apart, as runs start and stop), and 0.5 s turns in a shuffled order per cycle.
The spread of the ratios between identical things is the noise each design leaves:

    .venv/bin/python bench/host_drift.py [--seconds 90]
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

LOOP = r"""
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <time.h>
static double now(void) {
    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9;
}
int main(int argc, char **argv) {
    size_t n = (size_t)atol(argv[1]) << 17; double secs = atof(argv[2]);
    uint64_t *a = malloc(n * 8), x = 1, s = 0; long it = 0;
    for (size_t i = 0; i < n; i++) a[i] = i * 2654435761u;
    double t0 = now(), tl = t0;
    for (;;) {
        for (int k = 0; k < 100000; k++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            s += a[(x >> 20) % n];
        }
        it++;
        double t = now();
        if (t - tl >= 0.5) { printf("%ld\n", it); fflush(stdout); it = 0; tl = t; }
        if (t - t0 > secs) break;
    }
    return (int)(s & 1);
}
"""


def trace(seconds: float) -> list[float]:
    """Iterations per 0.5 s, summed over one loop per core."""
    with tempfile.TemporaryDirectory() as d:
        src, exe = Path(d) / "loop.c", Path(d) / "loop"
        src.write_text(LOOP)
        subprocess.run(["cc", "-O2", "-o", str(exe), str(src)], check=True)
        procs = [subprocess.Popen([str(exe), "128", str(seconds)], stdout=subprocess.PIPE, text=True)
                 for _ in range(len(os.sched_getaffinity(0)))]
        per = [[float(line) for line in p.stdout] for p in procs]
        for p in procs:
            p.wait()
    n = min(len(x) for x in per)
    return [sum(x[i] for x in per) for i in range(n)]


def back_to_back(x: list[float], start: int, window: int = 10, gap: int = 6) -> list[float]:
    out, t = [], start
    for _ in range(4):
        out.append(sum(x[t:t + window]) / window)
        t += window + gap
    return out


def turns(x: list[float], start: int, cycles: int, rng: random.Random) -> list[float]:
    out, t = [0.0] * 4, start
    for _ in range(cycles):
        order = list(range(4))
        rng.shuffle(order)
        for k in order:
            out[k] += x[t]
            t += 1
    return out


def spread(groups: list[list[float]]) -> float:
    return statistics.pstdev([math.log(g[k] / g[0]) for g in groups for k in (1, 2, 3)])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=90.0)
    a = ap.parse_args()
    x = trace(a.seconds)
    if len(x) < 80:
        print("the trace is too short: use --seconds 60 or more")
        return 2
    med = statistics.median(x)
    slow = [v / med for v in x]
    print(f"{len(x)} half-seconds on {len(os.sched_getaffinity(0))} core(s); speed relative to the median: "
          f"min {min(slow):.2f}, 5th percentile {sorted(slow)[len(slow) // 20]:.2f}, "
          f"{sum(v < 0.9 for v in slow)} of {len(x)} half-seconds under 0.9")
    rng = random.Random(1)
    b = [back_to_back(x, s) for s in range(len(x) - 64)]
    t = [turns(x, s, 10, rng) for s in range(len(x) - 40)]
    sb, st = spread(b), spread(t)
    print("ratios between four identical runs, standard deviation of the log ratio:")
    print(f"  5 s windows one after another : {100 * sb:.1f} %")
    print(f"  5 s windows in 0.5 s turns    : {100 * st:.1f} %")
    print(f"  turns / back to back          : {st / sb:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
