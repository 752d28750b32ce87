//! The five TPC-C transactions (clause 2) row at a time, written once against `TpccTx` for
//! every engine: the rows mode of SQL engines and the only way of key-value engines.

use std::collections::HashSet;

use super::input::Input;
use super::rows::*;
use super::traits::{order_id_taken_is_a_conflict, retry, Outcome, TpccTx, TxnSession};
use crate::engines::{DbError, DbResult};

/// The row-at-a-time way: the transactions below, over `TpccTx`.
pub(crate) struct RowSession<'a>(pub(crate) Box<dyn TpccTx + 'a>);

impl TxnSession for RowSession<'_> {
    fn run(&mut self, input: &Input, max: u64) -> (u64, DbResult<Outcome>) {
        execute(&mut *self.0, input, max)
    }
}

fn money(cents: i64) -> f64 {
    cents as f64 / 100.0
}

/// Order-Status found no order of a customer, who has had one since the initial load.
pub(super) fn no_order(w: u32, d: u32, c: u32) -> DbError {
    DbError::Other(anyhow::anyhow!(
        "no order of customer {c} in w{w} d{d}, who has one since the load"
    ))
}

fn by_name_or_id(
    tx: &mut dyn TpccTx,
    w: u32,
    d: u32,
    by_name: &Option<String>,
    c_id: u32,
) -> DbResult<u32> {
    match by_name {
        Some(last) => {
            let ids = tx.customer_ids_by_last(w, d, last)?;
            if ids.is_empty() {
                return Err(DbError::Other(anyhow::anyhow!(
                    "no customer named {last} in w{w} d{d}"
                )));
            }
            // the one at position n/2 rounded up, in first-name order (clause 2.5.2.2)
            Ok(ids[(ids.len() - 1) / 2])
        }
        None => Ok(c_id),
    }
}

fn execute(tx: &mut dyn TpccTx, input: &Input, max: u64) -> (u64, DbResult<Outcome>) {
    let now = now_s();
    match input {
        // clause 2.4
        Input::NewOrder { w, d, c, lines, .. } => {
            let (w, d, c) = (*w, *d, *c);
            let body = |tx: &mut dyn TpccTx| -> DbResult<Outcome> {
                let wh = tx.warehouse(w)?;
                let mut dist = tx.district(w, d)?;
                let cust = tx.customer(w, d, c)?;
                let o_id = dist.next_o_id;
                dist.next_o_id += 1;
                tx.put_district(&dist, false)?;
                let all_local = lines.iter().all(|l| l.1 == w);
                let ol_cnt = lines.len() as u32;
                let order = Order {
                    w_id: w,
                    d_id: d,
                    o_id,
                    c_id: c,
                    entry_d: now,
                    carrier_id: None,
                    ol_cnt,
                    all_local,
                };
                tx.put_order(&order, true)?;
                tx.insert_new_order(w, d, o_id)?;
                let mut total = 0i64;
                for (n, &(i, supply, qty)) in lines.iter().enumerate() {
                    let Some(item) = tx.item(i)? else {
                        // the unused item number: the 1 % of New-Orders that roll back (clause 2.4.2.3)
                        return Err(DbError::Other(anyhow::Error::new(RollbackSignal)));
                    };
                    let mut st = tx.stock(supply, i)?;
                    let q = qty as i32;
                    st.quantity = if st.quantity >= q + 10 {
                        st.quantity - q
                    } else {
                        st.quantity - q + 91
                    };
                    st.ytd += qty as i64;
                    st.order_cnt += 1;
                    if supply != w {
                        st.remote_cnt += 1;
                    }
                    tx.put_stock(&st, false)?;
                    let amount = qty as i64 * item.price;
                    total += amount;
                    let line = OrderLine {
                        w_id: w,
                        d_id: d,
                        o_id,
                        number: n as u32 + 1,
                        i_id: i,
                        supply_w_id: supply,
                        delivery_d: None,
                        quantity: qty,
                        amount,
                        dist_info: st.dist[(d - 1) as usize].clone(),
                    };
                    tx.put_order_line(&line, true)?;
                }
                let discount = 1.0 - cust.discount as f64 / 1e4;
                std::hint::black_box(
                    money(total) * discount * (1.0 + (wh.tax + dist.tax) as f64 / 1e4),
                );
                Ok(Outcome::Committed)
            };
            let (retries, r) = retry(tx, true, max, &mut |tx| {
                body(tx).map_err(|e| order_id_taken_is_a_conflict(input, e))
            });
            match r {
                Err(DbError::Other(e)) if e.is::<RollbackSignal>() => {
                    (retries, Ok(Outcome::RolledBack))
                }
                other => (retries, other),
            }
        }
        // clause 2.5
        Input::Payment(p) => {
            let (w, d, c_w, c_d, amount) = (p.w, p.d, p.c_w, p.c_d, p.amount);
            retry(tx, true, max, &mut |tx| {
                let mut wh = tx.warehouse(w)?;
                wh.ytd += amount;
                tx.put_warehouse(&wh, false)?;
                let mut dist = tx.district(w, d)?;
                dist.ytd += amount;
                tx.put_district(&dist, false)?;
                let c = by_name_or_id(tx, c_w, c_d, &p.by_name, p.c_id)?;
                let mut cust = tx.customer(c_w, c_d, c)?;
                cust.balance -= amount;
                cust.ytd_payment += amount;
                cust.payment_cnt += 1;
                if cust.credit == "BC" {
                    let mut data =
                        format!("{c} {c_d} {c_w} {d} {w} {:.2}|{}", money(amount), cust.data);
                    data.truncate(500);
                    cust.data = data;
                }
                tx.put_customer(&cust, false)?;
                let data = format!("{}    {}", wh.name, dist.name);
                let h = History {
                    c_id: c,
                    c_d_id: c_d,
                    c_w_id: c_w,
                    d_id: d,
                    w_id: w,
                    date: now,
                    amount,
                    data,
                };
                tx.insert_history(&h)?;
                Ok(Outcome::Committed)
            })
        }
        // clause 2.6
        Input::OrderStatus {
            w,
            d,
            by_name,
            c_id,
        } => {
            let (w, d) = (*w, *d);
            retry(tx, false, max, &mut |tx| {
                let c = by_name_or_id(tx, w, d, by_name, *c_id)?;
                std::hint::black_box(tx.customer(w, d, c)?.balance);
                // every customer has an order from the initial load (clause 4.3.3.1): none
                // found is a wrong result of the engine, never a transaction with nothing to do
                let Some(o) = tx.last_order_of(w, d, c)? else {
                    return Err(no_order(w, d, c));
                };
                std::hint::black_box(tx.order_lines(w, d, o.o_id)?);
                Ok(Outcome::Committed)
            })
        }
        // clause 2.7, as one transaction over the ten districts (HammerDB's way)
        Input::Delivery { w, carrier } => {
            let (w, carrier) = (*w, *carrier);
            retry(tx, true, max, &mut |tx| {
                for d in 1..=DISTRICTS {
                    let Some(o_id) = tx.oldest_new_order(w, d)? else {
                        continue;
                    };
                    tx.delete_new_order(w, d, o_id)?;
                    let mut order = tx.order(w, d, o_id)?;
                    order.carrier_id = Some(carrier);
                    tx.put_order(&order, false)?;
                    let mut sum = 0;
                    for mut line in tx.order_lines(w, d, o_id)? {
                        line.delivery_d = Some(now);
                        sum += line.amount;
                        tx.put_order_line(&line, false)?;
                    }
                    let mut cust = tx.customer(w, d, order.c_id)?;
                    cust.balance += sum;
                    cust.delivery_cnt += 1;
                    tx.put_customer(&cust, false)?;
                }
                Ok(Outcome::Committed)
            })
        }
        // clause 2.8
        Input::StockLevel { w, d, threshold } => {
            let (w, d, threshold) = (*w, *d, *threshold);
            retry(tx, false, max, &mut |tx| {
                let next = tx.district(w, d)?.next_o_id;
                let items: HashSet<u32> = tx
                    .recent_line_items(w, d, next.saturating_sub(20), next)?
                    .into_iter()
                    .collect();
                let mut low = 0;
                for i in items {
                    if tx.stock(w, i)?.quantity < threshold {
                        low += 1;
                    }
                }
                std::hint::black_box(low);
                Ok(Outcome::Committed)
            })
        }
    }
}

/// Business rollback of New-Order: rolled back on purpose, then reported as completed.
#[derive(Debug)]
struct RollbackSignal;

impl std::fmt::Display for RollbackSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "New-Order rolled back on purpose (unused item number)")
    }
}

impl std::error::Error for RollbackSignal {}
