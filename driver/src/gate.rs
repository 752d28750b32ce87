//! The turn protocol of a gated run (`--gate`): the coordinator's commands on stdin, one a
//! line, and the driver's answers on stdout (which carries nothing else in a run). Its Python
//! twin, with the same words, is `alloclab.core.gate`.
//!
//!   driver: `ready`        its workers are parked; the window may begin
//!   coordinator: `go MS`   measure for MS milliseconds, then park again
//!   coordinator: `go MS W` the same, after W milliseconds of work not measured (the caches
//!                          the others' turns took are the process's again)
//!   driver: `paused`       parked, the window not yet measured whole
//!   driver: `full`         parked, the window measured (turns that ran long end it early)
//!   driver: `done`         its workers have ended (their error, if any, is in the events)
//!   coordinator: `end`     leave the gate

use std::io::{BufRead, Write};
use std::time::Duration;

use anyhow::{anyhow, bail, Result};

pub const READY: &str = "ready";
pub const GO: &str = "go";
pub const PAUSED: &str = "paused";
pub const FULL: &str = "full";
pub const DONE: &str = "done";
pub const END: &str = "end";

/// Serve the coordinator until it says `end`: answer `ready`, then for each `go MS [W]` run
/// `turn` for that long after W milliseconds unmeasured (unless the workers have ended; it
/// returns how long the window has measured in all) and answer how the run stands. A window
/// cut short is not a measurement: an error, unless the workers ended (their error says why).
pub fn serve(
    window: Duration,
    all_done: impl Fn() -> bool,
    mut turn: impl FnMut(Duration, Duration) -> Result<Duration>,
) -> Result<()> {
    let mut measured = Duration::ZERO;
    let mut turns = 0u64;
    answer(READY)?;
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            [GO, ms] | [GO, ms, _] => {
                let whole = |x: &str| -> Result<u64> {
                    x.parse()
                        .map_err(|_| anyhow!("--gate: `{GO}` takes whole milliseconds, got {x:?}"))
                };
                let ms = whole(ms)?;
                let warm = match words.as_slice() {
                    [_, _, w] => whole(w)?,
                    _ => 0,
                };
                if !all_done() {
                    turns += 1;
                    measured = turn(Duration::from_millis(ms), Duration::from_millis(warm))?;
                }
                answer(if all_done() {
                    DONE
                } else if !window.is_zero() && measured >= window {
                    FULL
                } else {
                    PAUSED
                })?;
            }
            [END] => break,
            [] => {}
            _ => bail!("--gate: unknown command {line:?} ({GO} MS [W], or {END})"),
        }
    }
    if !all_done() && measured.as_secs_f64() < 0.99 * window.as_secs_f64() {
        bail!(
            "--gate: told to end after {} turn(s), {:.2} s of the {:.2} s window",
            turns,
            measured.as_secs_f64(),
            window.as_secs_f64()
        );
    }
    Ok(())
}

/// An answer to the coordinator.
fn answer(word: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{word}")?;
    out.flush()?;
    Ok(())
}
