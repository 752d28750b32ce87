//! `liballoclab_account.so`: preloaded beside the allocator into a server under test (MariaDB,
//! PostgreSQL's postmaster and, through fork, every backend), it reads the allocator's own
//! account of memory inside the process at the moments alloclab chooses: the end of the
//! measured window (and of each phase of a server's life), without stopping the server.
//!
//! With `ALLOCLAB_ACCOUNT_DIR` set, each process gets one thread that blocks (no wake-ups)
//! on a shared lock of `DIR/gate`, which alloclab holds exclusively until the window ends.
//! When alloclab lets go, every thread reads the account (the same code as the driver's,
//! `alloc_account.rs`) and writes `DIR/account-PID.json`, then ends.
//!
//! A server's life reads the account at the end of every phase too, through two more gates
//! that take turns: phase K waits on `DIR/gate-1` (K odd) or `DIR/gate-2` (K even), held by
//! alloclab, which lets go at the phase's end and takes the gate again once `DIR/phase-K-PID.json`
//! is written, before the thread can come back to it. Once those gates are gone (never made, or
//! removed at the window's end) the thread waits on `DIR/gate`.

#[path = "../../src/alloc_account.rs"]
mod alloc_account;

use std::fs::{self, File};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::PathBuf;

const ENV: &str = "ALLOCLAB_ACCOUNT_DIR";

#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = init;

extern "C" fn init() {
    if std::env::var_os(ENV).is_none() {
        return;
    }
    // SAFETY: registers a plain function to run in the child after fork.
    unsafe { libc::pthread_atfork(None, None, Some(after_fork)) };
    start();
}

extern "C" fn after_fork() {
    // a forked child has no threads but the caller's: PostgreSQL's backends need their own
    start();
}

fn start() {
    let Some(dir) = std::env::var_os(ENV).map(PathBuf::from) else {
        return;
    };
    // The thread blocks every signal, and is created with them blocked (it inherits the mask
    // of its creator): a signal sent to the server process must never land in it. MariaDB
    // wakes its main thread's poll() with a process-directed signal at shutdown; delivered
    // here instead, the server would never stop.
    // SAFETY: sigset_t is plain data; pthread_sigmask only reads and writes the two sets.
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    unsafe {
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut old);
    }
    // the thread only waits: a failure to start it costs the account, never the server
    let _ = std::thread::Builder::new()
        .name("alloclab-account".into())
        .stack_size(256 << 10)
        .spawn(move || wait_and_write(dir));
    // SAFETY: restores the caller's own mask.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
}

fn wait_and_write(dir: PathBuf) {
    let mut k: u64 = 1;
    loop {
        let gate = match File::open(dir.join(format!("gate-{}", 2 - k % 2))) {
            Ok(gate) => gate,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
            Err(_) => return,
        };
        if !wait(&gate) {
            return;
        }
        write(&dir, &format!("phase-{k}-{}.json", std::process::id()));
        drop(gate); // alloclab takes it again for phase k + 2
        k += 1;
    }
    let Ok(gate) = File::open(dir.join("gate")) else {
        return;
    };
    if wait(&gate) {
        write(&dir, &format!("account-{}.json", std::process::id()));
    }
}

/// Blocks until alloclab lets go of `gate`; false where the lock cannot be taken.
fn wait(gate: &File) -> bool {
    loop {
        // SAFETY: flock on a descriptor the caller owns.
        if unsafe { libc::flock(gate.as_raw_fd(), libc::LOCK_SH) } == 0 {
            return true;
        }
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return false;
        }
    }
}

/// The account now, written whole (by rename) as `dir/name`.
fn write(dir: &std::path::Path, name: &str) {
    let pid = std::process::id();
    let mut account = alloc_account::read();
    account["pid"] = pid.into();
    let tmp = dir.join(format!(".{name}.tmp"));
    let written = File::create(&tmp).and_then(|mut f| f.write_all(account.to_string().as_bytes()));
    if written.is_ok() {
        let _ = fs::rename(&tmp, dir.join(name));
    }
}
