//! Versioned JSON-lines events on a channel of their own (a file descriptor or a file),
//! never on stdout. One line per event, flushed as it is written so a reader sees it live.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::fd::FromRawFd;
use std::path::Path;
use std::sync::Mutex;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde_json::{json, Map, Value};

/// Bumped whenever a field changes meaning or disappears. Readers refuse other versions.
pub const SCHEMA_VERSION: u64 = 1;

pub struct EventSink {
    out: Mutex<BufWriter<File>>,
    started: Instant,
}

impl EventSink {
    /// `fd` wins over `path`. A descriptor of 0, 1 or 2 is refused: events never share stdio.
    pub fn open(fd: Option<i32>, path: Option<&Path>) -> Result<Self> {
        let file = match (fd, path) {
            (Some(fd), _) if fd <= 2 => {
                bail!("--events-fd {fd} is stdin/stdout/stderr; events need a channel of their own (use 3 or higher, or --events FILE)")
            }
            (Some(fd), _) => {
                // SAFETY: the caller passed this descriptor to us for our exclusive use.
                let f = unsafe { File::from_raw_fd(fd) };
                f.metadata()
                    .with_context(|| format!("--events-fd {fd} is not an open descriptor"))?;
                f
            }
            (None, Some(p)) => File::create(p)
                .with_context(|| format!("cannot create events file {}", p.display()))?,
            (None, None) => bail!("no event channel: pass --events-fd N or --events FILE"),
        };
        Ok(EventSink {
            out: Mutex::new(BufWriter::new(file)),
            started: Instant::now(),
        })
    }

    /// Write one event: `{"v":1,"type":kind,"t_s":..., ...fields}`.
    pub fn emit(&self, kind: &str, fields: Value) -> Result<()> {
        let mut obj = Map::new();
        obj.insert("v".into(), json!(SCHEMA_VERSION));
        obj.insert("type".into(), json!(kind));
        obj.insert("t_s".into(), json!(self.started.elapsed().as_secs_f64()));
        if let Value::Object(m) = fields {
            obj.extend(m);
        }
        let mut out = self.out.lock().expect("event sink poisoned");
        serde_json::to_writer(&mut *out, &Value::Object(obj))?;
        out.write_all(b"\n")?;
        out.flush().context("cannot write event")?;
        Ok(())
    }
}
