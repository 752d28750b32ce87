"""The turn protocol of a driver measuring in turns (its `--gate`): the coordinator's commands on
the driver's stdin and its answers on stdout. The Rust twin, with the same words, is the
driver's gate.rs (tests/test_layers.py holds them equal).

    driver: ready        its workers are parked; the window may begin
    coordinator: go MS   measure for MS milliseconds, then park again
    coordinator: go MS W the same, after W milliseconds of work not measured (the caches the
                         others' turns took are the process's again)
    driver: paused       parked, the window not yet measured whole
    driver: full         parked, the window measured (turns that ran long end it early)
    driver: done         its workers have ended (their error, if any, is in the events)
    coordinator: end     leave the gate
"""

READY = "ready"
GO = "go"
PAUSED = "paused"
FULL = "full"
DONE = "done"
END = "end"

WAITING = (READY, PAUSED, FULL)  # the answers of a driver that waits at its gate


def go(ms: int, warm_ms: int = 0) -> str:
    """The command for a turn of `ms` milliseconds, measured after `warm_ms` unmeasured."""
    return f"{GO} {ms}" + (f" {warm_ms}" if warm_ms else "")
