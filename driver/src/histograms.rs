//! The histograms every call is recorded into: their bounds and precision, the percentiles a
//! summary reports, and the encoding that carries a histogram in the events.

use anyhow::{anyhow, Result};
use base64::Engine as _;
use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde_json::{json, Map, Value};

/// Largest latency a histogram holds: one hour, in nanoseconds.
const MAX_NS: u64 = 3_600_000_000_000;
pub const SIGFIG: u8 = 3;

pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_NS, SIGFIG).expect("valid histogram bounds")
}

pub fn percentiles(h: &Histogram<u64>) -> Map<String, Value> {
    let mut m = Map::new();
    let q = |p: f64| {
        if h.is_empty() {
            0
        } else {
            h.value_at_quantile(p)
        }
    };
    m.insert(
        "mean_ns".into(),
        json!(if h.is_empty() { 0.0 } else { h.mean() }),
    );
    m.insert(
        "stdev_ns".into(),
        json!(if h.is_empty() { 0.0 } else { h.stdev() }),
    );
    m.insert(
        "min_ns".into(),
        json!(if h.is_empty() { 0 } else { h.min() }),
    );
    m.insert("p50_ns".into(), json!(q(0.50)));
    m.insert("p95_ns".into(), json!(q(0.95)));
    m.insert("p99_ns".into(), json!(q(0.99)));
    m.insert("p999_ns".into(), json!(q(0.999)));
    m.insert(
        "max_ns".into(),
        json!(if h.is_empty() { 0 } else { h.max() }),
    );
    m
}

/// The standard compressed V2 encoding, base64: what HdrHistogram's other ports decode.
pub fn encode(h: &Histogram<u64>) -> Result<String> {
    let mut buf = Vec::new();
    V2DeflateSerializer::new()
        .serialize(h, &mut buf)
        .map_err(|e| anyhow!("cannot encode histogram: {e:?}"))?;
    Ok(base64::engine::general_purpose::STANDARD.encode(buf))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// Per-thread histograms merged give exactly the percentiles of one histogram of all samples.
    #[test]
    fn merged_thread_histograms_equal_one_histogram() {
        let mut all = new_histogram();
        let mut sync = new_histogram().into_sync();
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let mut rec = sync.recorder();
                s.spawn(move || {
                    let mut rng = rand::rngs::SmallRng::seed_from_u64(t);
                    for _ in 0..50_000 {
                        rec.saturating_record(rng.gen_range(1..10_000_000u64));
                    }
                });
            }
        });
        sync.refresh();
        for t in 0..4u64 {
            let mut rng = rand::rngs::SmallRng::seed_from_u64(t);
            for _ in 0..50_000 {
                all.saturating_record(rng.gen_range(1..10_000_000u64));
            }
        }
        assert_eq!(sync.len(), all.len());
        for q in [0.5, 0.9, 0.95, 0.99, 0.999, 1.0] {
            assert_eq!(sync.value_at_quantile(q), all.value_at_quantile(q), "q={q}");
        }
    }

    #[test]
    fn encoding_round_trips() {
        let mut h = new_histogram();
        for v in [1u64, 10, 1000, 123_456, 9_999_999] {
            h.record(v).unwrap();
        }
        let b = base64::engine::general_purpose::STANDARD
            .decode(encode(&h).unwrap())
            .unwrap();
        let back: Histogram<u64> = hdrhistogram::serialization::Deserializer::new()
            .deserialize(&mut &b[..])
            .unwrap();
        assert_eq!(back, h);
    }
}
