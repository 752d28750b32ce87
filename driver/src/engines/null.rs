//! No storage at all, optionally a simulated latency per call: for testing the harness.

use std::time::{Duration, Instant};

use super::{DbResult, Engine, Session, Visit};

pub struct Null {
    latency: Duration,
}

impl Null {
    pub fn new(latency_ns: u64) -> Self {
        Null {
            latency: Duration::from_nanos(latency_ns),
        }
    }
}

impl Engine for Null {
    fn session(&self) -> anyhow::Result<Box<dyn Session + '_>> {
        Ok(Box::new(NullSession {
            latency: self.latency,
        }))
    }
}

struct NullSession {
    latency: Duration,
}

impl NullSession {
    fn wait(&self) {
        if self.latency.is_zero() {
            return;
        }
        if self.latency >= Duration::from_micros(100) {
            std::thread::sleep(self.latency);
        } else {
            let t0 = Instant::now();
            while t0.elapsed() < self.latency {
                std::hint::spin_loop();
            }
        }
    }
}

impl Session for NullSession {
    fn begin(&mut self, _write: bool) -> DbResult<()> {
        Ok(())
    }
    fn put(&mut self, _key: &[u8], _value: &[u8]) -> DbResult<()> {
        self.wait();
        Ok(())
    }
    fn get(&mut self, _key: &[u8]) -> DbResult<Option<Vec<u8>>> {
        self.wait();
        Ok(None)
    }
    fn delete(&mut self, _key: &[u8]) -> DbResult<()> {
        self.wait();
        Ok(())
    }
    fn scan(&mut self, _s: &[u8], _l: usize, _v: &mut Visit<'_>) -> DbResult<usize> {
        self.wait();
        Ok(0)
    }
    fn commit(&mut self) -> DbResult<()> {
        Ok(())
    }
    fn rollback(&mut self) -> DbResult<()> {
        Ok(())
    }
}
