//! Key-value workloads as in TidesDB's benchtool: write, read, mixed (50/50), delete,
//! seek and range over seq, random, zipfian or uniform keys.

use anyhow::{bail, Result};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Zipf};
use serde::Serialize;
use serde_json::json;

use super::{on_threads, transact, Step, Worker, Workload};
use crate::engines::{DbError, Engine, Session};
use crate::events::EventSink;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum KvKind {
    Write,
    Read,
    Mixed,
    Delete,
    Seek,
    Range,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Pattern {
    /// each thread walks its own stripe of consecutive keys
    Seq,
    /// writes: fresh random 64-bit keys; others: uniform over the populated keys
    Random,
    /// zipfian (theta 0.99) over the key space, hot keys scattered by a hash
    Zipfian,
    /// uniform over the key space
    Uniform,
}

#[derive(Debug, Clone, Serialize)]
pub struct KvSpec {
    pub kind: KvKind,
    pub pattern: Pattern,
    pub key_bytes: usize,
    pub value_bytes: usize,
    /// values of mixed sizes: each put's value is uniform in [value_bytes_min, value_bytes]
    /// (None: every value is value_bytes long)
    pub value_bytes_min: Option<usize>,
    pub batch: usize,
    /// keys 0..keyspace are populated first (read, mixed, delete, seek, range) and are what
    /// uniform and zipfian draw from
    pub keyspace: u64,
    pub range_len: usize,
    pub seed: u64,
    pub max_retries: u64,
}

impl KvSpec {
    pub fn validate(&self) -> Result<()> {
        if self.key_bytes < 8 {
            bail!(
                "--key-bytes must be at least 8 (keys end with a 64-bit index), got {}",
                self.key_bytes
            );
        }
        if let Some(m) = self.value_bytes_min {
            if m == 0 || m > self.value_bytes {
                bail!(
                    "--value-bytes-min must be between 1 and --value-bytes ({}), got {m}",
                    self.value_bytes
                );
            }
        }
        if self.batch == 0 {
            bail!("--batch must be at least 1");
        }
        if self.keyspace == 0 {
            bail!("--keyspace must be at least 1");
        }
        if self.range_len == 0 {
            bail!("--range-len must be at least 1");
        }
        Ok(())
    }

    fn needs_populate(&self) -> bool {
        self.kind != KvKind::Write
    }

    /// A put's value length: value_bytes, or drawn from [value_bytes_min, value_bytes].
    fn value_len(&self, rng: &mut SmallRng) -> usize {
        match self.value_bytes_min {
            Some(m) if m < self.value_bytes => rng.gen_range(m..=self.value_bytes),
            _ => self.value_bytes,
        }
    }
}

pub struct KvWorkload<'e> {
    spec: KvSpec,
    engine: &'e dyn Engine,
}

impl<'e> KvWorkload<'e> {
    pub fn new(spec: KvSpec, engine: &'e dyn Engine) -> Result<Self> {
        spec.validate()?;
        Ok(KvWorkload { spec, engine })
    }
}

pub fn encode_key(idx: u64, key_bytes: usize, buf: &mut Vec<u8>) {
    buf.clear();
    buf.resize(key_bytes - 8, b'k');
    buf.extend_from_slice(&idx.to_be_bytes());
}

fn scramble(x: u64) -> u64 {
    // FNV-1a over the 8 bytes: spreads zipfian ranks over the key space
    let mut h: u64 = 0xcbf29ce484222325;
    for b in x.to_le_bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

struct KeyGen {
    pattern: Pattern,
    rng: SmallRng,
    keyspace: u64,
    thread: u64,
    threads: u64,
    seq: u64,
    zipf: Option<Zipf<f64>>,
    fresh: bool,
}

impl KeyGen {
    fn new(spec: &KvSpec, thread: usize, threads: usize, salt: u64) -> Self {
        let seed = spec.seed ^ (thread as u64).wrapping_mul(0x9E3779B97F4A7C15) ^ salt;
        KeyGen {
            pattern: spec.pattern,
            rng: SmallRng::seed_from_u64(seed),
            keyspace: spec.keyspace,
            thread: thread as u64,
            threads: threads as u64,
            seq: 0,
            zipf: (spec.pattern == Pattern::Zipfian)
                .then(|| Zipf::new(spec.keyspace, 0.99).expect("keyspace >= 1")),
            fresh: spec.kind == KvKind::Write,
        }
    }

    fn next(&mut self) -> u64 {
        match self.pattern {
            Pattern::Seq => {
                let i = self.seq * self.threads + self.thread;
                self.seq += 1;
                if self.fresh {
                    i
                } else {
                    i % self.keyspace
                }
            }
            Pattern::Random if self.fresh => self.rng.gen(),
            Pattern::Random | Pattern::Uniform => self.rng.gen_range(0..self.keyspace),
            Pattern::Zipfian => {
                let rank = self.zipf.as_ref().expect("zipf").sample(&mut self.rng) as u64 - 1;
                scramble(rank) % self.keyspace
            }
        }
    }
}

/// A buffer of printable random bytes, sliced at random offsets to make values.
fn value_pool(len: usize, rng: &mut SmallRng) -> Vec<u8> {
    (0..len + 4096)
        .map(|_| rng.gen_range(b'a'..=b'z'))
        .collect()
}

impl Workload for KvWorkload<'_> {
    fn op_names(&self) -> Vec<&'static str> {
        match self.spec.kind {
            KvKind::Write => vec!["put"],
            KvKind::Read => vec!["get"],
            KvKind::Mixed => vec!["put", "get"],
            KvKind::Delete => vec!["delete"],
            KvKind::Seek => vec!["seek"],
            KvKind::Range => vec!["range"],
        }
    }

    fn prepare(&self, threads: usize, sink: &EventSink) -> Result<()> {
        if !self.spec.needs_populate() {
            return Ok(());
        }
        let s = &self.spec;
        let engine = self.engine;
        // keep one populate transaction under ~4 MiB
        let per_txn = (4 << 20) / (s.key_bytes + s.value_bytes).max(1);
        let per_txn = per_txn.clamp(1, 1000) as u64;
        let t0 = std::time::Instant::now();
        sink.emit(
            "phase",
            json!({"phase": "populate", "state": "begin", "keys": s.keyspace}),
        )?;
        on_threads(threads, "populate thread panicked", |t| {
            let t = t as u64;
            let mut session = engine.session()?;
            let mut rng = SmallRng::seed_from_u64(s.seed ^ 0xF00D ^ t);
            let pool = value_pool(s.value_bytes, &mut rng);
            let mut sizes = SmallRng::seed_from_u64(s.seed ^ 0x517E ^ t);
            let lo = s.keyspace * t / threads as u64;
            let hi = s.keyspace * (t + 1) / threads as u64;
            let mut key = Vec::with_capacity(s.key_bytes);
            let mut start = lo;
            while start < hi {
                let end = (start + per_txn).min(hi);
                let (_, r) = transact(&mut *session, true, 1000, &mut |sess| {
                    for i in start..end {
                        encode_key(i, s.key_bytes, &mut key);
                        let off = (i as usize * 7919) % 4096;
                        sess.put(&key, &pool[off..off + s.value_len(&mut sizes)])?;
                    }
                    Ok(())
                });
                r.map_err(|e| anyhow::anyhow!("populate failed: {e}"))?;
                start = end;
            }
            Ok(())
        })?;
        sink.emit(
            "phase",
            json!({"phase": "populate", "state": "end", "keys": s.keyspace, "duration_s": t0.elapsed().as_secs_f64()}),
        )?;
        Ok(())
    }

    fn worker(&self, thread: usize, threads: usize) -> Result<Box<dyn Worker + '_>> {
        let mut keygen = KeyGen::new(&self.spec, thread, threads, 0);
        let pool = value_pool(self.spec.value_bytes, &mut keygen.rng);
        Ok(Box::new(KvWorker {
            session: self.engine.session()?,
            spec: self.spec.clone(),
            keygen,
            coin: SmallRng::seed_from_u64(self.spec.seed ^ 0xC014 ^ thread as u64),
            pool,
            keys: vec![Vec::with_capacity(self.spec.key_bytes); self.spec.batch],
        }))
    }
}

struct KvWorker<'e> {
    session: Box<dyn Session + 'e>,
    spec: KvSpec,
    keygen: KeyGen,
    coin: SmallRng,
    pool: Vec<u8>,
    keys: Vec<Vec<u8>>,
}

impl KvWorker<'_> {
    fn fill_keys(&mut self) {
        for k in self.keys.iter_mut() {
            let idx = self.keygen.next();
            encode_key(idx, self.spec.key_bytes, k);
        }
    }

    fn write(&mut self, op: usize) -> Step {
        self.fill_keys();
        let off = self.keygen.rng.gen_range(0..4096);
        let len = self.spec.value_len(&mut self.keygen.rng);
        let value = &self.pool[off..off + len];
        let keys = &self.keys;
        let r = transact(&mut *self.session, true, self.spec.max_retries, &mut |s| {
            keys.iter().try_for_each(|k| s.put(k, value))
        });
        Step::new(op, keys.len() as u64, r)
    }

    fn read(&mut self, op: usize) -> Step {
        self.fill_keys();
        let keys = &self.keys;
        let r = transact(&mut *self.session, false, self.spec.max_retries, &mut |s| {
            for k in keys {
                std::hint::black_box(s.get(k)?);
            }
            Ok(())
        });
        Step::new(op, keys.len() as u64, r)
    }
}

impl Worker for KvWorker<'_> {
    fn step(&mut self) -> Step {
        match self.spec.kind {
            KvKind::Write => self.write(0),
            KvKind::Read => self.read(0),
            KvKind::Mixed => {
                if self.coin.gen_bool(0.5) {
                    self.write(0)
                } else {
                    self.read(1)
                }
            }
            KvKind::Delete => {
                self.fill_keys();
                let keys = &self.keys;
                let r = transact(&mut *self.session, true, self.spec.max_retries, &mut |s| {
                    keys.iter().try_for_each(|k| s.delete(k))
                });
                Step::new(0, keys.len() as u64, r)
            }
            KvKind::Seek | KvKind::Range => {
                self.fill_keys();
                let limit = if self.spec.kind == KvKind::Seek {
                    1
                } else {
                    self.spec.range_len
                };
                let keys = &self.keys;
                let r = transact(&mut *self.session, false, self.spec.max_retries, &mut |s| {
                    for k in keys {
                        s.scan(k, limit, &mut |k, v| {
                            std::hint::black_box((k, v));
                            true
                        })?;
                    }
                    Ok::<(), DbError>(())
                });
                Step::new(0, keys.len() as u64, r)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(kind: KvKind, pattern: Pattern) -> KvSpec {
        KvSpec {
            kind,
            pattern,
            key_bytes: 16,
            value_bytes: 8,
            value_bytes_min: None,
            batch: 1,
            keyspace: 1000,
            range_len: 10,
            seed: 7,
            max_retries: 10,
        }
    }

    #[test]
    fn keys_sort_in_index_order() {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        encode_key(255, 16, &mut a);
        encode_key(256, 16, &mut b);
        assert_eq!(a.len(), 16);
        assert!(a < b);
    }

    #[test]
    fn seq_threads_cover_disjoint_stripes() {
        let s = spec(KvKind::Write, Pattern::Seq);
        let mut seen = std::collections::HashSet::new();
        for t in 0..4 {
            let mut g = KeyGen::new(&s, t, 4, 0);
            for _ in 0..10 {
                assert!(seen.insert(g.next()));
            }
        }
        assert_eq!(seen.len(), 40);
        assert!(seen.iter().all(|&k| k < 40));
    }

    #[test]
    fn read_patterns_stay_in_the_populated_space() {
        for p in [
            Pattern::Random,
            Pattern::Uniform,
            Pattern::Zipfian,
            Pattern::Seq,
        ] {
            let mut g = KeyGen::new(&spec(KvKind::Read, p), 1, 2, 0);
            for _ in 0..5000 {
                assert!(g.next() < 1000, "{p:?}");
            }
        }
    }

    #[test]
    fn zipfian_is_skewed() {
        let mut g = KeyGen::new(&spec(KvKind::Read, Pattern::Zipfian), 0, 1, 0);
        let mut counts = std::collections::HashMap::new();
        for _ in 0..20000 {
            *counts.entry(g.next()).or_insert(0u32) += 1;
        }
        let top = *counts.values().max().unwrap();
        // uniform would give ~20 per key; theta 0.99 over 1000 keys puts ~13% on rank 1
        assert!(top > 1000, "hottest key drawn {top} times");
    }
}
