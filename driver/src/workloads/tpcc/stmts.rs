//! TPC-C as a careful engineer writes the client side: prepared statements (prepared once per
//! connection, then reused), set-based where the specification allows it (New-Order's items
//! and stock rows one statement each per supplying warehouse, its order lines one multi-row
//! INSERT, Stock-Level one join), one statement per step per district in Delivery, only the
//! columns a transaction uses, the fewest round trips. Written once over `SqlConn` for
//! MariaDB, PostgreSQL and SQLite. Money stays in integer cents, so that the consistency
//! conditions compare exact integers.

use std::collections::HashMap;
use std::rc::Rc;

use super::input::{Input, Payment};
use super::rows::DISTRICTS;
use super::traits::{missing, Outcome, WholeTxn};
use super::transactions::no_order;
use crate::engines::{DbError, DbResult};
use crate::sql::{vals, SqlConn, V};

/// Statements whose text depends on a count or a district, made once and kept.
#[derive(Hash, PartialEq, Eq, Clone, Copy)]
enum Key {
    Items(usize),
    Stock(usize, u32),
    StockUpdate(usize),
    Lines(usize),
}

pub struct StmtSession<C: SqlConn> {
    c: C,
    texts: HashMap<Key, Rc<str>>,
    /// the fixed statements in this dialect, made once (keyed by the constant's address)
    fixed: HashMap<usize, String>,
}

fn placeholders(n: usize) -> String {
    vec!["?"; n].join(", ")
}

fn err(msg: String) -> DbError {
    DbError::Other(anyhow::anyhow!(msg))
}

impl<C: SqlConn> StmtSession<C> {
    pub fn new(c: C) -> Self {
        StmtSession {
            c,
            texts: HashMap::new(),
            fixed: HashMap::new(),
        }
    }

    fn sql(&self, text: &str) -> String {
        self.c.dialect().statement(text)
    }

    /// A statement of fixed text, in this dialect, made once (the connection caches its
    /// preparation); with the connection to run it on.
    fn fixed(&mut self, text: &'static str) -> (&mut C, &str) {
        let d = self.c.dialect();
        let sql = self
            .fixed
            .entry(text.as_ptr() as usize)
            .or_insert_with(|| d.statement(text));
        (&mut self.c, sql)
    }

    /// Query with a statement of fixed text.
    fn q(&mut self, text: &'static str, params: &[V]) -> DbResult<Vec<Vec<V>>> {
        let (c, sql) = self.fixed(text);
        c.query(sql, params)
    }

    /// Execute a statement of fixed text.
    fn x(&mut self, text: &'static str, params: &[V]) -> DbResult<()> {
        let (c, sql) = self.fixed(text);
        c.exec(sql, params)
    }

    /// The one row a statement of fixed text reads, or an error naming `what`.
    fn one(&mut self, text: &'static str, params: &[V], what: &str) -> DbResult<Vec<V>> {
        let rows = self.q(text, params)?;
        rows.into_iter().next().ok_or_else(|| missing(what))
    }

    /// A statement whose text depends on a count or a district, made once (shared, not copied).
    fn keyed(&mut self, key: Key) -> Rc<str> {
        if let Some(t) = self.texts.get(&key) {
            return t.clone();
        }
        let text = match key {
            Key::Items(n) => format!(
                "SELECT i_id, i_price FROM item WHERE i_id IN ({})",
                placeholders(n)
            ),
            Key::Stock(n, d) => format!(
                "SELECT s_i_id, s_quantity, s_dist_{d:02} FROM stock WHERE s_w_id = ? AND s_i_id IN ({}){{lock}}",
                placeholders(n)
            ),
            Key::StockUpdate(n) => {
                let case = |col: &str| {
                    format!(
                        "CASE s_i_id {} ELSE {col} END",
                        vec!["WHEN ? THEN ?"; n].join(" ")
                    )
                };
                format!(
                    "UPDATE stock SET s_quantity = {}, s_ytd = s_ytd + {}, s_order_cnt = s_order_cnt + {}, \
                     s_remote_cnt = s_remote_cnt + {} WHERE s_w_id = ? AND s_i_id IN ({})",
                    case("s_quantity"),
                    case("0"),
                    case("0"),
                    case("0"),
                    placeholders(n)
                )
            }
            Key::Lines(n) => format!(
                "INSERT INTO order_line VALUES {}",
                vec!["(?, ?, ?, ?, ?, ?, NULL, ?, ?, ?)"; n].join(", ")
            ),
        };
        let sql: Rc<str> = self.sql(&text).into();
        self.texts.insert(key, sql.clone());
        sql
    }

    /// `body` inside one transaction: committed, or rolled back on its error or on request.
    fn txn(
        &mut self,
        write: bool,
        body: impl FnOnce(&mut Self) -> DbResult<Outcome>,
    ) -> DbResult<Outcome> {
        self.c.begin(write)?;
        match body(self) {
            Ok(Outcome::Committed) => self.c.batch("COMMIT").map(|_| Outcome::Committed),
            Ok(Outcome::RolledBack) => self.c.batch("ROLLBACK").map(|_| Outcome::RolledBack),
            Err(e) => {
                // the transaction's error is the one to report; a rollback that fails after it
                // only means the server already ended the transaction
                let _ = self.c.batch("ROLLBACK");
                Err(e)
            }
        }
    }

    /// Customer id by last name: the one at position n/2 rounded up in first-name order
    /// (clause 2.5.2.2), or the id given.
    fn customer_id(&mut self, w: u32, d: u32, by_name: &Option<String>, c: u32) -> DbResult<u32> {
        let Some(last) = by_name else { return Ok(c) };
        let ids = self.q(
            "SELECT c_id FROM customer WHERE c_w_id = ? AND c_d_id = ? AND c_last = ? ORDER BY c_first",
            &vals![w, d, last.as_str()],
        )?;
        if ids.is_empty() {
            return Err(err(format!("no customer named {last} in w{w} d{d}")));
        }
        Ok(ids[(ids.len() - 1) / 2][0].u())
    }

    fn new_order(
        &mut self,
        w: u32,
        d: u32,
        c: u32,
        lines: &[(u32, u32, u32)],
        now: i64,
    ) -> DbResult<Outcome> {
        let cust = self.one(
            "SELECT w_tax, c_discount, c_last, c_credit FROM warehouse, customer \
             WHERE w_id = ? AND c_w_id = ? AND c_d_id = ? AND c_id = ?",
            &vals![w, w, d, c],
            "warehouse/customer",
        )?;
        let dist = self.one(
            "SELECT d_tax, d_next_o_id FROM district WHERE d_w_id = ? AND d_id = ?{lock}",
            &vals![w, d],
            "district",
        )?;
        let o_id = dist[1].u();
        self.x(
            "UPDATE district SET d_next_o_id = ? WHERE d_w_id = ? AND d_id = ?",
            &vals![o_id + 1, w, d],
        )?;
        // items: one statement for the distinct ids
        let mut ids: Vec<u32> = lines.iter().map(|l| l.0).collect();
        ids.sort_unstable();
        ids.dedup();
        let sql = self.keyed(Key::Items(ids.len()));
        let prices: HashMap<u32, i64> = self
            .c
            .query(&sql, &ids.iter().map(|&i| V::from(i)).collect::<Vec<_>>())?
            .into_iter()
            .map(|r| (r[0].u(), r[1].i()))
            .collect();
        if prices.len() < ids.len() {
            // an unused item number: the 1 % of New-Orders that roll back (clause 2.4.2.3)
            return Ok(Outcome::RolledBack);
        }
        let all_local = lines.iter().all(|l| l.1 == w);
        self.x(
            "INSERT INTO orders VALUES (?, ?, ?, ?, ?, NULL, ?, ?)",
            &vals![w, d, o_id, c, now, lines.len() as u32, all_local],
        )?;
        self.x("INSERT INTO new_order VALUES (?, ?, ?)", &vals![w, d, o_id])?;
        // stock: per supplying warehouse, one read of its rows and one update of them
        let mut supply: Vec<u32> = lines.iter().map(|l| l.1).collect();
        supply.sort_unstable();
        supply.dedup();
        let mut dist_info: HashMap<(u32, u32), String> = HashMap::new();
        for &sw in &supply {
            let mut items: Vec<u32> = lines.iter().filter(|l| l.1 == sw).map(|l| l.0).collect();
            items.sort_unstable();
            items.dedup();
            let sql = self.keyed(Key::Stock(items.len(), d));
            let mut params = vec![V::from(sw)];
            params.extend(items.iter().map(|&i| V::from(i)));
            let mut quantity: HashMap<u32, i64> = HashMap::new();
            for r in self.c.query(&sql, &params)? {
                quantity.insert(r[0].u(), r[1].i());
                dist_info.insert((sw, r[0].u()), r[2].s());
            }
            // the lines in order, as the row-at-a-time client applies them (an item twice
            // in an order is taken twice)
            let mut ytd: HashMap<u32, i64> = HashMap::new();
            let mut cnt: HashMap<u32, i64> = HashMap::new();
            for l in lines.iter().filter(|l| l.1 == sw) {
                let q = quantity
                    .get_mut(&l.0)
                    .ok_or_else(|| err(format!("TPC-C row missing: stock w{sw} i{}", l.0)))?;
                let n = l.2 as i64;
                *q = if *q >= n + 10 { *q - n } else { *q - n + 91 };
                *ytd.entry(l.0).or_default() += n;
                *cnt.entry(l.0).or_default() += 1;
            }
            let sql = self.keyed(Key::StockUpdate(items.len()));
            let mut p: Vec<V> = Vec::with_capacity(items.len() * 8 + 1 + items.len());
            for col in 0..4 {
                for &i in &items {
                    p.push(V::from(i));
                    p.push(V::I(match col {
                        0 => quantity[&i],
                        1 => ytd[&i],
                        2 => cnt[&i],
                        _ => cnt[&i] * (sw != w) as i64,
                    }));
                }
            }
            p.push(V::from(sw));
            p.extend(items.iter().map(|&i| V::from(i)));
            self.c.exec(&sql, &p)?;
        }
        // the order lines: one multi-row INSERT
        let sql = self.keyed(Key::Lines(lines.len()));
        let mut p = Vec::with_capacity(lines.len() * 9);
        let mut total = 0i64;
        for (n, &(i, sw, qty)) in lines.iter().enumerate() {
            let amount = qty as i64 * prices[&i];
            total += amount;
            let info = dist_info[&(sw, i)].clone();
            p.extend(vals![w, d, o_id, n as u32 + 1, i, sw, qty, amount, info]);
        }
        self.c.exec(&sql, &p)?;
        let discount = 1.0 - cust[1].i() as f64 / 1e4;
        std::hint::black_box(
            total as f64 / 100.0 * discount * (1.0 + (cust[0].i() + dist[0].i()) as f64 / 1e4),
        );
        Ok(Outcome::Committed)
    }

    fn payment(&mut self, p: &Payment, now: i64) -> DbResult<Outcome> {
        let (w, d, c_w, c_d, amount) = (p.w, p.d, p.c_w, p.c_d, p.amount);
        self.x(
            "UPDATE warehouse SET w_ytd = w_ytd + ? WHERE w_id = ?",
            &vals![amount, w],
        )?;
        self.x(
            "UPDATE district SET d_ytd = d_ytd + ? WHERE d_w_id = ? AND d_id = ?",
            &vals![amount, w, d],
        )?;
        let names = self.one(
            "SELECT w_name, d_name FROM warehouse, district WHERE w_id = ? AND d_w_id = ? AND d_id = ?",
            &vals![w, w, d],
            "warehouse/district",
        )?;
        let c = self.customer_id(c_w, c_d, &p.by_name, p.c_id)?;
        let cust = self.one(
            "SELECT c_credit FROM customer WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?{lock}",
            &vals![c_w, c_d, c],
            "customer",
        )?;
        if cust[0].s() == "BC" {
            let data = self.one(
                "SELECT c_data FROM customer WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?",
                &vals![c_w, c_d, c],
                "customer",
            )?[0]
                .s();
            let mut data = format!(
                "{c} {c_d} {c_w} {d} {w} {:.2}|{data}",
                amount as f64 / 100.0
            );
            data.truncate(500);
            self.x(
                "UPDATE customer SET c_balance = c_balance - ?, c_ytd_payment = c_ytd_payment + ?, \
                 c_payment_cnt = c_payment_cnt + 1, c_data = ? WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?",
                &vals![amount, amount, data, c_w, c_d, c],
            )?;
        } else {
            self.x(
                "UPDATE customer SET c_balance = c_balance - ?, c_ytd_payment = c_ytd_payment + ?, \
                 c_payment_cnt = c_payment_cnt + 1 WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?",
                &vals![amount, amount, c_w, c_d, c],
            )?;
        }
        self.x(
            "INSERT INTO history VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            &vals![
                c,
                c_d,
                c_w,
                d,
                w,
                now,
                amount,
                format!("{}    {}", names[0].s(), names[1].s())
            ],
        )?;
        Ok(Outcome::Committed)
    }

    fn order_status(
        &mut self,
        w: u32,
        d: u32,
        by_name: &Option<String>,
        c_id: u32,
    ) -> DbResult<Outcome> {
        let c = self.customer_id(w, d, by_name, c_id)?;
        std::hint::black_box(self.q(
            "SELECT c_balance, c_first, c_middle, c_last FROM customer WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?",
            &vals![w, d, c],
        )?);
        // the customer's orders read forwards, the last kept: a backward read of the index's
        // prefix is what TideSQL gets wrong (correctness.py); a customer has a few orders
        let orders = self.q(
            "SELECT o_id, o_entry_d, o_carrier_id FROM orders WHERE o_w_id = ? AND o_d_id = ? AND o_c_id = ? \
             ORDER BY o_id",
            &vals![w, d, c],
        )?;
        let Some(o) = orders.last() else {
            return Err(no_order(w, d, c));
        };
        std::hint::black_box(self.q(
            "SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d FROM order_line \
             WHERE ol_w_id = ? AND ol_d_id = ? AND ol_o_id = ?",
            &vals![w, d, o[0].clone()],
        )?);
        Ok(Outcome::Committed)
    }

    fn delivery(&mut self, w: u32, carrier: u32, now: i64) -> DbResult<Outcome> {
        for d in 1..=DISTRICTS {
            let oldest = self.q(
                "SELECT no_o_id FROM new_order WHERE no_w_id = ? AND no_d_id = ? ORDER BY no_o_id LIMIT 1{lock}",
                &vals![w, d],
            )?;
            let Some(o) = oldest.first().map(|r| r[0].clone()) else {
                continue;
            };
            let key = vals![w, d, o.clone()];
            self.x(
                "DELETE FROM new_order WHERE no_w_id = ? AND no_d_id = ? AND no_o_id = ?",
                &key,
            )?;
            let c = self.one(
                "SELECT o_c_id FROM orders WHERE o_w_id = ? AND o_d_id = ? AND o_id = ?",
                &key,
                "order",
            )?[0]
                .clone();
            self.x(
                "UPDATE orders SET o_carrier_id = ? WHERE o_w_id = ? AND o_d_id = ? AND o_id = ?",
                &vals![carrier, w, d, o.clone()],
            )?;
            self.x(
                "UPDATE order_line SET ol_delivery_d = ? WHERE ol_w_id = ? AND ol_d_id = ? AND ol_o_id = ?",
                &vals![now, w, d, o],
            )?;
            let sum = self.one(
                "SELECT COALESCE(SUM(ol_amount), 0){bigint} FROM order_line WHERE ol_w_id = ? AND ol_d_id = ? AND ol_o_id = ?",
                &key,
                "order lines",
            )?[0]
                .i();
            self.x(
                "UPDATE customer SET c_balance = c_balance + ?, c_delivery_cnt = c_delivery_cnt + 1 \
                 WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?",
                &vals![sum, w, d, c],
            )?;
        }
        Ok(Outcome::Committed)
    }

    fn stock_level(&mut self, w: u32, d: u32, threshold: i32) -> DbResult<Outcome> {
        std::hint::black_box(self.q(
            "SELECT COUNT(DISTINCT s_i_id) FROM district \
             JOIN order_line ON ol_w_id = d_w_id AND ol_d_id = d_id \
               AND ol_o_id >= d_next_o_id - 20 AND ol_o_id < d_next_o_id \
             JOIN stock ON s_w_id = ol_w_id AND s_i_id = ol_i_id \
             WHERE d_w_id = ? AND d_id = ? AND s_quantity < ?",
            &vals![w, d, threshold as i64],
        )?);
        Ok(Outcome::Committed)
    }
}

impl<C: SqlConn> WholeTxn for StmtSession<C> {
    fn once(&mut self, input: &Input, now: i64) -> DbResult<Outcome> {
        match input {
            Input::NewOrder { w, d, c, lines, .. } => {
                self.txn(true, |s| s.new_order(*w, *d, *c, lines, now))
            }
            Input::Payment(p) => self.txn(true, |s| s.payment(p, now)),
            Input::OrderStatus {
                w,
                d,
                by_name,
                c_id,
            } => self.txn(false, |s| s.order_status(*w, *d, by_name, *c_id)),
            Input::Delivery { w, carrier } => self.txn(true, |s| s.delivery(*w, *carrier, now)),
            Input::StockLevel { w, d, threshold } => {
                self.txn(false, |s| s.stock_level(*w, *d, *threshold))
            }
        }
    }
}
