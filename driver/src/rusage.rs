//! Resource usage of this process, as the kernel counts it.

use serde::Serialize;

#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Usage {
    pub cpu_user_s: f64,
    pub cpu_sys_s: f64,
    pub minor_faults: u64,
    pub major_faults: u64,
    pub ctx_voluntary: u64,
    pub ctx_involuntary: u64,
}

fn tv_s(tv: libc::timeval) -> f64 {
    tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6
}

pub fn current() -> Usage {
    // SAFETY: getrusage writes into the zeroed struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    Usage {
        cpu_user_s: tv_s(ru.ru_utime),
        cpu_sys_s: tv_s(ru.ru_stime),
        minor_faults: ru.ru_minflt as u64,
        major_faults: ru.ru_majflt as u64,
        ctx_voluntary: ru.ru_nvcsw as u64,
        ctx_involuntary: ru.ru_nivcsw as u64,
    }
}

impl Usage {
    /// What happened between `earlier` and `self`.
    /// (ru_maxrss is left out on purpose: it survives exec, so it can hold the RSS of the
    /// forked parent; VmHWM is the peak of this program alone.)
    pub fn since(&self, earlier: &Usage) -> Usage {
        Usage {
            cpu_user_s: self.cpu_user_s - earlier.cpu_user_s,
            cpu_sys_s: self.cpu_sys_s - earlier.cpu_sys_s,
            minor_faults: self.minor_faults - earlier.minor_faults,
            major_faults: self.major_faults - earlier.major_faults,
            ctx_voluntary: self.ctx_voluntary - earlier.ctx_voluntary,
            ctx_involuntary: self.ctx_involuntary - earlier.ctx_involuntary,
        }
    }
}

/// VmHWM and VmRSS of this process in bytes, from /proc/self/status.
pub fn memory() -> (Option<u64>, Option<u64>) {
    let text = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<u64>().ok())
            .map(|kb| kb * 1024)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

/// Distinct file paths mapped into this process, from /proc/self/maps.
pub fn mapped_files() -> Vec<String> {
    let text = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let mut out: Vec<String> = Vec::new();
    for line in text.lines() {
        if let Some(path) = line
            .splitn(6, char::is_whitespace)
            .filter(|s| !s.is_empty())
            .nth(5)
        {
            let path = path.trim();
            if path.starts_with('/') && !out.iter().any(|p| p == path) {
                out.push(path.to_string());
            }
        }
    }
    out
}
