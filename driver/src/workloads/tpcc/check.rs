//! TPC-C's consistency conditions 1-4 (clause 3.3.2), read in one snapshot over every
//! warehouse and district.
//!
//! On SQL engines each district's orders and new orders are read by a plain forward range scan
//! and aggregated here, never through the engine's MIN()/MAX(): MariaDB answers `MAX(o_id) ...
//! WHERE o_w_id = ? AND o_d_id = ?` with one backward read of the primary key's prefix, and
//! TideSQL (4.2.x to 4.5.5) seeks to the row *before* that prefix and returns NULL although the
//! district holds 3,000 orders, so a check through MAX() would report damage that is not there.

use anyhow::Result;
use serde::Serialize;

use super::rows::DISTRICTS;
use super::traits::TpccDb;
use crate::engines::DbError;

/// One condition's verdict: its number, whether it holds, and where it fails if it does not.
#[derive(Debug, Clone, Serialize)]
pub struct Condition {
    pub id: u32,
    pub ok: bool,
    pub detail: String,
}

/// Consistency conditions 1-4 of clause 3.3.2 over every warehouse and district.
pub fn check(db: &dyn TpccDb, warehouses: u32) -> Result<Vec<Condition>> {
    let mut tx = db.session()?;
    let e = |e: DbError| anyhow::anyhow!("consistency check failed to read: {e}");
    tx.begin(false).map_err(e)?;
    let mut fails: [Vec<String>; 4] = Default::default();
    for w in 1..=warehouses {
        let wh = tx.warehouse(w).map_err(e)?;
        let mut d_ytd = 0;
        for d in 1..=DISTRICTS {
            let dist = tx.district(w, d).map_err(e)?;
            d_ytd += dist.ytd;
            let (max_o, sum_ol) = tx.district_order_stats(w, d).map_err(e)?;
            let (min_no, max_no, n_no) = tx.district_new_order_stats(w, d).map_err(e)?;
            let lines = tx.district_order_line_count(w, d).map_err(e)?;
            if dist.next_o_id - 1 != max_o || (n_no > 0 && max_no != max_o) {
                fails[1].push(format!(
                    "w{w} d{d}: d_next_o_id-1={} max(o_id)={max_o} max(no_o_id)={max_no}",
                    dist.next_o_id - 1
                ));
            }
            if n_no > 0 && (max_no - min_no + 1) as u64 != n_no {
                fails[2].push(format!(
                    "w{w} d{d}: max-min+1={} count={n_no}",
                    max_no - min_no + 1
                ));
            }
            if sum_ol != lines {
                fails[3].push(format!(
                    "w{w} d{d}: sum(o_ol_cnt)={sum_ol} order lines={lines}"
                ));
            }
        }
        if wh.ytd != d_ytd {
            fails[0].push(format!("w{w}: w_ytd={} sum(d_ytd)={d_ytd}", wh.ytd));
        }
    }
    tx.rollback().map_err(|e| anyhow::anyhow!("{e}"))?; // read-only: it only ends the snapshot
    let what = [
        "W_YTD = sum(D_YTD)",
        "D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID)",
        "max(NO_O_ID) - min(NO_O_ID) + 1 = rows in NEW-ORDER",
        "sum(O_OL_CNT) = rows in ORDER-LINE",
    ];
    Ok((0..4)
        .map(|i| Condition {
            id: i as u32 + 1,
            ok: fails[i].is_empty(),
            detail: if fails[i].is_empty() {
                format!("{} holds everywhere", what[i])
            } else {
                format!(
                    "{} fails in {} place(s): {}",
                    what[i],
                    fails[i].len(),
                    fails[i]
                        .iter()
                        .take(3)
                        .cloned()
                        .collect::<Vec<_>>()
                        .join("; ")
                )
            },
        })
        .collect())
}
