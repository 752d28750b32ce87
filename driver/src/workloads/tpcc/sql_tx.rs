//! TPC-C's rows over any SQL connection (`SqlConn`): the `TpccTx` that rows mode, the load and
//! the consistency check use on SQLite, MariaDB and PostgreSQL, one statement per row (each
//! table's from its codec, `sql_rows`). Loading, its INSERTs wait in the transaction and go at
//! COMMIT as multi-row INSERTs, or as text to a connection that loads text (MariaDB's LOAD DATA).

use super::rows::*;
use super::sql_rows::{SqlGet, SqlRow, SqlUpdate};
use super::traits::{missing, TpccTx};
use crate::engines::DbResult;
use crate::sql::{vals, write_row, SqlConn, V};

/// A transaction over one connection, written once for every SQL engine.
pub(super) struct SqlTx<C: SqlConn> {
    c: C,
    open: bool,
    /// loading: INSERTs wait here, per statement, and go at COMMIT as multi-row INSERTs
    bulk: bool,
    pending: Vec<(&'static str, Vec<V>)>,
    /// loading into a connection that takes text: each statement's rows, written once, and
    /// their count
    pending_text: Vec<(&'static str, Vec<u8>, u64)>,
    /// a row's values, written by its codec into this buffer, kept for the next row
    params: Vec<V>,
}

/// Parameters of one multi-row INSERT at most (servers allow 65,535).
const BULK_PARAMS: usize = 16_000;

const NEW_ORDER_INSERT: &str = "INSERT INTO new_order VALUES (?, ?, ?)";

/// The INSERTs a load sends, whose rows can wait for one multi-row INSERT.
const STATEMENTS: &[&str] = &[
    Warehouse::INSERT,
    District::INSERT,
    Customer::INSERT,
    Item::INSERT,
    Stock::INSERT,
    Order::INSERT,
    NEW_ORDER_INSERT,
    OrderLine::INSERT,
    History::INSERT,
];

/// `TpccTx`'s read of a row by its key and its write, for each table that has both: the row's
/// codec does the work.
macro_rules! get_and_put {
    ($($get:ident($($k:ident),+) -> $t:ident, $put:ident;)+) => {$(
        fn $get(&mut self, $($k: u32),+) -> DbResult<$t> {
            self.get(&vals![$($k),+], stringify!($get))
        }
        fn $put(&mut self, r: &$t, insert: bool) -> DbResult<()> {
            self.put(r, insert)
        }
    )+};
}

impl<C: SqlConn> SqlTx<C> {
    pub(super) fn new(c: C) -> Self {
        SqlTx {
            c,
            open: false,
            bulk: false,
            pending: Vec::new(),
            pending_text: Vec::new(),
            params: Vec::new(),
        }
    }

    /// Send the waiting INSERTs, each statement's rows as few multi-row INSERTs.
    fn flush(&mut self) -> DbResult<()> {
        for (text, rows, n) in std::mem::take(&mut self.pending_text) {
            self.c.load_text(text, &rows, n)?;
        }
        for (text, values) in std::mem::take(&mut self.pending) {
            let cols = text.matches('?').count();
            let (head, group) = text.split_at(text.find('(').expect("INSERT ... VALUES (...)"));
            let per = (BULK_PARAMS / cols).max(1);
            for chunk in values.chunks(per * cols) {
                let rows = chunk.len() / cols;
                let mut sql = String::with_capacity(head.len() + rows * (group.len() + 2));
                sql.push_str(head);
                for k in 0..rows {
                    if k > 0 {
                        sql.push_str(", ");
                    }
                    sql.push_str(group);
                }
                let sql = self.c.dialect().sql(&sql);
                self.c.exec(&sql, chunk)?;
            }
        }
        Ok(())
    }

    fn q(&self, text: &str) -> String {
        self.c.dialect().statement(text)
    }

    fn rows(&mut self, text: &str, params: &[V]) -> DbResult<Vec<Vec<V>>> {
        self.flush()?; // a read sees the transaction's own writes
        let sql = self.q(text);
        self.c.query(&sql, params)
    }

    fn one(&mut self, text: &str, params: &[V], what: &str) -> DbResult<Vec<V>> {
        let rows = self.rows(text, params)?;
        rows.into_iter().next().ok_or_else(|| missing(what))
    }

    /// The row of this key, or an error naming `what` where there is none.
    fn get<R: SqlGet>(&mut self, key: &[V], what: &str) -> DbResult<R> {
        Ok(R::read(&self.one(R::GET, key, what)?))
    }

    /// Insert the row whole, or update the columns TPC-C changes.
    fn put<R: SqlUpdate>(&mut self, r: &R, insert: bool) -> DbResult<()> {
        if insert {
            self.insert(r)
        } else {
            self.exec_row(R::UPDATE, |p| r.changes(p))
        }
    }

    fn insert<R: SqlRow>(&mut self, r: &R) -> DbResult<()> {
        self.exec_row(R::INSERT, |p| r.values(p))
    }

    /// `exec` with the values `write` pushes (a row's), in the buffer kept for them.
    fn exec_row(&mut self, text: &str, write: impl FnOnce(&mut Vec<V>)) -> DbResult<()> {
        let mut params = std::mem::take(&mut self.params);
        write(&mut params);
        let r = self.exec(text, &params);
        params.clear();
        self.params = params;
        r
    }

    fn exec(&mut self, text: &str, params: &[V]) -> DbResult<()> {
        if self.bulk {
            // the statements are constants: their text is the key
            if let Some(key) = STATEMENTS.iter().copied().find(|s| *s == text) {
                if self.c.loads_text() {
                    match self.pending_text.iter_mut().find(|(t, _, _)| *t == key) {
                        Some(slot) => {
                            write_row(&mut slot.1, params);
                            slot.2 += 1;
                        }
                        None => {
                            let mut rows = Vec::with_capacity(1 << 16);
                            write_row(&mut rows, params);
                            self.pending_text.push((key, rows, 1));
                        }
                    }
                    return Ok(());
                }
                match self.pending.iter_mut().find(|(t, _)| *t == key) {
                    Some(slot) => slot.1.extend_from_slice(params),
                    None => self.pending.push((key, params.to_vec())),
                }
                return Ok(());
            }
        }
        self.flush()?;
        let sql = self.q(text);
        self.c.exec(&sql, params)
    }
}

impl<C: SqlConn> TpccTx for SqlTx<C> {
    fn begin(&mut self, write: bool) -> DbResult<()> {
        let stmt = self.c.dialect().begin(write);
        self.c.batch(stmt)?;
        self.open = true;
        Ok(())
    }
    fn set_bulk(&mut self, on: bool) -> DbResult<()> {
        self.bulk = on;
        match self.c.dialect().bulk_session(on) {
            Some(sql) => self.c.batch(sql),
            None => Ok(()),
        }
    }
    fn load_batch(&self) -> usize {
        if self.bulk {
            20_000
        } else {
            500
        }
    }
    fn commit(&mut self) -> DbResult<()> {
        self.flush()?; // on error the caller rolls back
        self.open = false;
        self.c.batch("COMMIT").inspect_err(|_| {
            // the COMMIT's own error is what the caller needs; a failed ROLLBACK after it only
            // means the server already ended the transaction
            let _ = self.c.batch("ROLLBACK");
        })
    }
    fn rollback(&mut self) -> DbResult<()> {
        self.pending.clear();
        self.pending_text.clear();
        if std::mem::take(&mut self.open) {
            self.c.batch("ROLLBACK")?;
        }
        Ok(())
    }
    fn meta(&mut self) -> DbResult<Option<String>> {
        Ok(self
            .rows("SELECT v FROM tpcc_meta WHERE k = 'tpcc'", &[])?
            .first()
            .map(|r| r[0].s()))
    }
    fn put_meta(&mut self, text: &str) -> DbResult<()> {
        self.exec("DELETE FROM tpcc_meta WHERE k = 'tpcc'", &[])?;
        self.exec("INSERT INTO tpcc_meta VALUES ('tpcc', ?)", &vals![text])
    }
    get_and_put! {
        warehouse(w) -> Warehouse, put_warehouse;
        district(w, d) -> District, put_district;
        customer(w, d, c) -> Customer, put_customer;
        stock(w, i) -> Stock, put_stock;
        order(w, d, o) -> Order, put_order;
    }
    fn customer_ids_by_last(&mut self, w: u32, d: u32, last: &str) -> DbResult<Vec<u32>> {
        Ok(self
            .rows("SELECT c_id FROM customer WHERE c_w_id = ? AND c_d_id = ? AND c_last = ? ORDER BY c_first", &vals![w, d, last])?
            .iter()
            .map(|r| r[0].u())
            .collect())
    }
    fn item(&mut self, i: u32) -> DbResult<Option<Item>> {
        Ok(self
            .rows(Item::GET, &vals![i])?
            .first()
            .map(|r| Item::read(r)))
    }
    fn put_item(&mut self, r: &Item) -> DbResult<()> {
        self.insert(r)
    }
    fn last_order_of(&mut self, w: u32, d: u32, c: u32) -> DbResult<Option<Order>> {
        // the customer's orders read forwards, the last kept: a backward read of the index's
        // prefix is what TideSQL gets wrong (correctness.py); a customer has a few orders
        Ok(self
            .rows("SELECT o_w_id, o_d_id, o_id, o_c_id, o_entry_d, o_carrier_id, o_ol_cnt, o_all_local FROM orders WHERE o_w_id = ? AND o_d_id = ? AND o_c_id = ? ORDER BY o_id", &vals![w, d, c])?
            .last()
            .map(|r| Order::read(r)))
    }
    fn insert_new_order(&mut self, w: u32, d: u32, o: u32) -> DbResult<()> {
        self.exec(NEW_ORDER_INSERT, &vals![w, d, o])
    }
    fn oldest_new_order(&mut self, w: u32, d: u32) -> DbResult<Option<u32>> {
        Ok(self
            .rows(
                "SELECT MIN(no_o_id) FROM new_order WHERE no_w_id = ? AND no_d_id = ?",
                &vals![w, d],
            )?
            .first()
            .and_then(|r| r[0].opt_u()))
    }
    fn delete_new_order(&mut self, w: u32, d: u32, o: u32) -> DbResult<()> {
        self.exec(
            "DELETE FROM new_order WHERE no_w_id = ? AND no_d_id = ? AND no_o_id = ?",
            &vals![w, d, o],
        )
    }
    fn order_lines(&mut self, w: u32, d: u32, o: u32) -> DbResult<Vec<OrderLine>> {
        let rows = self.rows("SELECT ol_w_id, ol_d_id, ol_o_id, ol_number, ol_i_id, ol_supply_w_id, ol_delivery_d, ol_quantity, ol_amount, ol_dist_info FROM order_line WHERE ol_w_id = ? AND ol_d_id = ? AND ol_o_id = ? ORDER BY ol_number", &vals![w, d, o])?;
        Ok(rows.iter().map(|r| OrderLine::read(r)).collect())
    }
    fn put_order_line(&mut self, r: &OrderLine, insert: bool) -> DbResult<()> {
        self.put(r, insert)
    }
    fn recent_line_items(&mut self, w: u32, d: u32, o_lo: u32, o_hi: u32) -> DbResult<Vec<u32>> {
        Ok(self
            .rows("SELECT ol_i_id FROM order_line WHERE ol_w_id = ? AND ol_d_id = ? AND ol_o_id >= ? AND ol_o_id < ?", &vals![w, d, o_lo, o_hi])?
            .iter()
            .map(|r| r[0].u())
            .collect())
    }
    fn insert_history(&mut self, r: &History) -> DbResult<()> {
        self.insert(r)
    }
    // The consistency check reads a district's rows in a plain forward range scan and aggregates
    // them itself: it checks the data, not an engine's MIN/MAX shortcut (MariaDB answers MAX() of
    // a key prefix with one backward index read, which TideSQL gets wrong; see check.rs).
    fn district_order_stats(&mut self, w: u32, d: u32) -> DbResult<(u32, u64)> {
        let rows = self.rows(
            "SELECT o_id, o_ol_cnt FROM orders WHERE o_w_id = ? AND o_d_id = ?",
            &vals![w, d],
        )?;
        let max_o = rows.iter().map(|r| r[0].u()).max().unwrap_or(0);
        Ok((max_o, rows.iter().map(|r| r[1].i() as u64).sum()))
    }
    fn district_new_order_stats(&mut self, w: u32, d: u32) -> DbResult<(u32, u32, u64)> {
        let ids: Vec<u32> = self
            .rows(
                "SELECT no_o_id FROM new_order WHERE no_w_id = ? AND no_d_id = ?",
                &vals![w, d],
            )?
            .iter()
            .map(|r| r[0].u())
            .collect();
        let (min, max) = (ids.iter().min().copied(), ids.iter().max().copied());
        Ok((min.unwrap_or(0), max.unwrap_or(0), ids.len() as u64))
    }
    fn district_order_line_count(&mut self, w: u32, d: u32) -> DbResult<u64> {
        Ok(self.one(
            "SELECT COUNT(*) FROM order_line WHERE ol_w_id = ? AND ol_d_id = ?",
            &vals![w, d],
            "order lines",
        )?[0]
            .i() as u64)
    }
    fn next_order_sum(&mut self, warehouses: u32) -> DbResult<u64> {
        let q = "SELECT COALESCE(SUM(d_next_o_id), 0) FROM district WHERE d_w_id <= ?";
        Ok(self.one(q, &vals![warehouses], "districts")?[0].i() as u64)
    }
}
