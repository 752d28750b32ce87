//! Loading TPC-C (clause 4.3): every table at the specification's cardinalities, from a seed,
//! by loader threads in batched write transactions; and the metadata the load leaves for the
//! runs that follow (`Meta`).

use std::time::Instant;

use anyhow::{bail, Context, Result};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::rows::*;
use super::traits::{retry, TpccDb, TpccTx};
use crate::engines::DbResult;
use crate::events::EventSink;
use crate::workloads::on_threads;

/// What the loader leaves in the database for the runs that follow.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Meta {
    pub warehouses: u32,
    pub seed: u64,
    pub c_load: Constants,
}

/// Load `warehouses` at the spec's cardinalities with `loaders` threads, deterministically from
/// `seed`. Commits every few hundred rows.
pub fn load(
    db: &dyn TpccDb,
    warehouses: u32,
    loaders: usize,
    seed: u64,
    sink: &EventSink,
) -> Result<()> {
    if warehouses == 0 || loaders == 0 {
        bail!("--warehouses and --loaders must be at least 1");
    }
    let t0 = Instant::now();
    let c_load = Constants::random(&mut SmallRng::seed_from_u64(seed ^ 0xC0157));
    {
        let mut tx = db.session()?;
        if tx
            .begin(false)
            .and_then(|_| tx.meta())
            .map_err(|e| anyhow::anyhow!("{e}"))?
            .is_some()
        {
            bail!("the database already holds a TPC-C load: load into an empty --db-path");
        }
        tx.rollback().map_err(|e| anyhow::anyhow!("{e}"))?; // read-only: it only ends the snapshot
    }
    sink.emit(
        "phase",
        json!({"phase": "load", "state": "begin", "warehouses": warehouses, "loaders": loaders}),
    )?;
    let done = std::sync::atomic::AtomicU32::new(0);
    on_threads(loaders, "a loader thread panicked", |l| {
        let mut tx = bulk_session(db)?;
        let lo = ITEMS as u64 * l as u64 / loaders as u64 + 1;
        let hi = ITEMS as u64 * (l as u64 + 1) / loaders as u64;
        let mut rng = SmallRng::seed_from_u64(seed ^ 0x17E45 ^ l as u64);
        batched(&mut *tx, lo as u32..=hi as u32, |tx, i| {
            tx.put_item(&item(&mut rng, i))
        })?;
        for w in (1..=warehouses).filter(|w| (*w as usize - 1) % loaders == l) {
            load_warehouse(&mut *tx, w, seed, &c_load)?;
            let n = done.fetch_add(1, std::sync::atomic::Ordering::AcqRel) + 1;
            sink.emit(
                "phase",
                json!({"phase": "load", "state": "progress", "warehouses_done": n}),
            )?;
        }
        Ok(())
    })?;
    let meta = Meta {
        warehouses,
        seed,
        c_load,
    };
    let mut tx = bulk_session(db)?; // right after the load, where back-pressure is likeliest
    let text = serde_json::to_string(&meta)?;
    written(&mut *tx, &mut |tx| tx.put_meta(&text)).context("cannot store the load's metadata")?;
    db.analyze()
        .context("cannot update the statistics after the load")?;
    let secs = t0.elapsed().as_secs_f64();
    sink.emit(
        "phase",
        json!({"phase": "load", "state": "end", "warehouses": warehouses, "duration_s": secs,
               "warehouses_per_min": warehouses as f64 * 60.0 / secs}),
    )?;
    Ok(())
}

/// Apply `f` to each id in its own write transaction batch of 500.
fn batched(
    tx: &mut dyn TpccTx,
    ids: std::ops::RangeInclusive<u32>,
    mut f: impl FnMut(&mut dyn TpccTx, u32) -> DbResult<()>,
) -> Result<()> {
    let ids: Vec<u32> = ids.collect();
    let per = tx.load_batch();
    for chunk in ids.chunks(per) {
        written(tx, &mut |tx| chunk.iter().try_for_each(|&i| f(tx, i)))?;
    }
    Ok(())
}

/// A session for the load's writes, in the dialect's bulk settings (`Dialect::bulk_session`).
fn bulk_session(db: &dyn TpccDb) -> Result<Box<dyn TpccTx + '_>> {
    let mut tx = db.session()?;
    tx.set_bulk(true)
        .map_err(|e| anyhow::anyhow!("cannot set the load's session up: {e}"))?;
    Ok(tx)
}

/// Write one batch of the load as a transaction, retried on conflicts a hundred times.
fn written(
    tx: &mut dyn TpccTx,
    body: &mut dyn FnMut(&mut dyn TpccTx) -> DbResult<()>,
) -> Result<()> {
    let (retries, r) = retry(tx, true, 100, body);
    r.map_err(|e| anyhow::anyhow!("load failed after {retries} retries: {e}"))
}

fn load_warehouse(tx: &mut dyn TpccTx, w: u32, seed: u64, c: &Constants) -> Result<()> {
    let mut rng = SmallRng::seed_from_u64(seed ^ (w as u64).wrapping_mul(0x9E3779B97F4A7C15));
    let now = now_s();
    let wh = warehouse(&mut rng, w);
    batched(tx, 1..=1, |tx, _| tx.put_warehouse(&wh, true))?;
    batched(tx, 1..=ITEMS, |tx, i| {
        tx.put_stock(&stock(&mut rng, w, i), true)
    })?;
    for d in 1..=DISTRICTS {
        let dist = district(&mut rng, w, d);
        batched(tx, 1..=1, |tx, _| tx.put_district(&dist, true))?;
        batched(tx, 1..=CUSTOMERS, |tx, cid| {
            tx.put_customer(&customer(&mut rng, c, w, d, cid, now), true)?;
            tx.insert_history(&history(&mut rng, w, d, cid, now))
        })?;
        let orders = orders(&mut rng, w, d, now);
        // an order is about 11 rows (itself, its lines, maybe a new-order)
        for chunk in orders.chunks((tx.load_batch() / 5).max(1)) {
            written(tx, &mut |tx| {
                for (o, lines) in chunk {
                    tx.put_order(o, true)?;
                    if o.o_id >= FIRST_NEW_ORDER {
                        tx.insert_new_order(w, d, o.o_id)?;
                    }
                    lines.iter().try_for_each(|l| tx.put_order_line(l, true))?;
                }
                Ok(())
            })?;
        }
    }
    Ok(())
}

pub fn read_meta(db: &dyn TpccDb) -> Result<Meta> {
    let mut tx = db.session()?;
    let m = tx
        .begin(false)
        .and_then(|_| tx.meta())
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    tx.rollback().map_err(|e| anyhow::anyhow!("{e}"))?; // read-only: it only ends the snapshot
    let text = m.context("this database holds no TPC-C load: run tpcc-load first")?;
    Ok(serde_json::from_str(&text)?)
}
