//! TPC-C over SQL. SQLite runs here; the MariaDB and PostgreSQL dialects are the same
//! statements with their placeholders and row locks (`FOR UPDATE`), for the server targets.
//! Money is BIGINT cents and rates BIGINT ten-thousandths in every dialect, so that the
//! consistency conditions compare exact integers.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use rusqlite::{params, Connection, OptionalExtension, Row};

use super::rows::*;
use super::{TpccDb, TpccTx};
use crate::engines::{DbError, DbResult, EngineOptions, SyncMode};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(dead_code)] // MariaDb and Postgres: for the server targets
pub enum Dialect {
    Sqlite,
    MariaDb,
    Postgres,
}

impl Dialect {
    /// A statement written with `?` placeholders, in this dialect.
    pub fn sql(self, text: &str) -> String {
        match self {
            Dialect::Sqlite | Dialect::MariaDb => text.to_string(),
            Dialect::Postgres => {
                let mut out = String::with_capacity(text.len() + 8);
                let mut n = 0;
                for ch in text.chars() {
                    if ch == '?' {
                        n += 1;
                        out.push_str(&format!("${n}"));
                    } else {
                        out.push(ch);
                    }
                }
                out
            }
        }
    }

    /// Row lock for reads that will be written in the same transaction.
    pub fn for_update(self) -> &'static str {
        match self {
            Dialect::Sqlite => "",
            Dialect::MariaDb | Dialect::Postgres => " FOR UPDATE",
        }
    }
}

/// The schema, HammerDB's table and column names; `{engine}` is MariaDB's ENGINE clause.
pub const SCHEMA: &[&str] = &[
    "CREATE TABLE warehouse (w_id INT PRIMARY KEY, w_name VARCHAR(10), w_street_1 VARCHAR(20), w_street_2 VARCHAR(20), w_city VARCHAR(20), w_state CHAR(2), w_zip CHAR(9), w_tax BIGINT, w_ytd BIGINT){engine}",
    "CREATE TABLE district (d_w_id INT, d_id INT, d_name VARCHAR(10), d_street_1 VARCHAR(20), d_street_2 VARCHAR(20), d_city VARCHAR(20), d_state CHAR(2), d_zip CHAR(9), d_tax BIGINT, d_ytd BIGINT, d_next_o_id INT, PRIMARY KEY (d_w_id, d_id)){engine}",
    "CREATE TABLE customer (c_w_id INT, c_d_id INT, c_id INT, c_first VARCHAR(16), c_middle CHAR(2), c_last VARCHAR(16), c_street_1 VARCHAR(20), c_street_2 VARCHAR(20), c_city VARCHAR(20), c_state CHAR(2), c_zip CHAR(9), c_phone CHAR(16), c_since BIGINT, c_credit CHAR(2), c_credit_lim BIGINT, c_discount BIGINT, c_balance BIGINT, c_ytd_payment BIGINT, c_payment_cnt INT, c_delivery_cnt INT, c_data VARCHAR(500), PRIMARY KEY (c_w_id, c_d_id, c_id)){engine}",
    "CREATE INDEX customer_by_name ON customer (c_w_id, c_d_id, c_last, c_first)",
    "CREATE TABLE history (h_c_id INT, h_c_d_id INT, h_c_w_id INT, h_d_id INT, h_w_id INT, h_date BIGINT, h_amount BIGINT, h_data VARCHAR(24)){engine}",
    "CREATE TABLE item (i_id INT PRIMARY KEY, i_im_id INT, i_name VARCHAR(24), i_price BIGINT, i_data VARCHAR(50)){engine}",
    "CREATE TABLE stock (s_w_id INT, s_i_id INT, s_quantity INT, s_dist_01 CHAR(24), s_dist_02 CHAR(24), s_dist_03 CHAR(24), s_dist_04 CHAR(24), s_dist_05 CHAR(24), s_dist_06 CHAR(24), s_dist_07 CHAR(24), s_dist_08 CHAR(24), s_dist_09 CHAR(24), s_dist_10 CHAR(24), s_ytd BIGINT, s_order_cnt INT, s_remote_cnt INT, s_data VARCHAR(50), PRIMARY KEY (s_w_id, s_i_id)){engine}",
    "CREATE TABLE orders (o_w_id INT, o_d_id INT, o_id INT, o_c_id INT, o_entry_d BIGINT, o_carrier_id INT, o_ol_cnt INT, o_all_local INT, PRIMARY KEY (o_w_id, o_d_id, o_id)){engine}",
    "CREATE INDEX orders_by_customer ON orders (o_w_id, o_d_id, o_c_id, o_id)",
    "CREATE TABLE new_order (no_w_id INT, no_d_id INT, no_o_id INT, PRIMARY KEY (no_w_id, no_d_id, no_o_id)){engine}",
    "CREATE TABLE order_line (ol_w_id INT, ol_d_id INT, ol_o_id INT, ol_number INT, ol_i_id INT, ol_supply_w_id INT, ol_delivery_d BIGINT, ol_quantity INT, ol_amount BIGINT, ol_dist_info CHAR(24), PRIMARY KEY (ol_w_id, ol_d_id, ol_o_id, ol_number)){engine}",
    "CREATE TABLE tpcc_meta (k VARCHAR(16) PRIMARY KEY, v TEXT){engine}",
];

// Statements, written once with `?` placeholders; `{lock}` becomes the dialect's row lock.
const WAREHOUSE_GET: &str = "SELECT w_id, w_name, w_street_1, w_street_2, w_city, w_state, w_zip, w_tax, w_ytd FROM warehouse WHERE w_id = ?{lock}";
const WAREHOUSE_INSERT: &str = "INSERT INTO warehouse VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)";
const WAREHOUSE_UPDATE: &str = "UPDATE warehouse SET w_ytd = ? WHERE w_id = ?";
const DISTRICT_GET: &str = "SELECT d_w_id, d_id, d_name, d_street_1, d_street_2, d_city, d_state, d_zip, d_tax, d_ytd, d_next_o_id FROM district WHERE d_w_id = ? AND d_id = ?{lock}";
const DISTRICT_INSERT: &str = "INSERT INTO district VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
const DISTRICT_UPDATE: &str =
    "UPDATE district SET d_ytd = ?, d_next_o_id = ? WHERE d_w_id = ? AND d_id = ?";
const CUSTOMER_COLS: &str = "c_w_id, c_d_id, c_id, c_first, c_middle, c_last, c_street_1, c_street_2, c_city, c_state, c_zip, c_phone, c_since, c_credit, c_credit_lim, c_discount, c_balance, c_ytd_payment, c_payment_cnt, c_delivery_cnt, c_data";
const CUSTOMER_INSERT: &str =
    "INSERT INTO customer VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
const CUSTOMER_UPDATE: &str = "UPDATE customer SET c_balance = ?, c_ytd_payment = ?, c_payment_cnt = ?, c_delivery_cnt = ?, c_data = ? WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?";
const CUSTOMER_BY_LAST: &str =
    "SELECT c_id FROM customer WHERE c_w_id = ? AND c_d_id = ? AND c_last = ? ORDER BY c_first";
const ITEM_GET: &str = "SELECT i_id, i_im_id, i_name, i_price, i_data FROM item WHERE i_id = ?";
const ITEM_INSERT: &str = "INSERT INTO item VALUES (?, ?, ?, ?, ?)";
const STOCK_GET: &str = "SELECT s_w_id, s_i_id, s_quantity, s_dist_01, s_dist_02, s_dist_03, s_dist_04, s_dist_05, s_dist_06, s_dist_07, s_dist_08, s_dist_09, s_dist_10, s_ytd, s_order_cnt, s_remote_cnt, s_data FROM stock WHERE s_w_id = ? AND s_i_id = ?{lock}";
const STOCK_INSERT: &str =
    "INSERT INTO stock VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
const STOCK_UPDATE: &str = "UPDATE stock SET s_quantity = ?, s_ytd = ?, s_order_cnt = ?, s_remote_cnt = ? WHERE s_w_id = ? AND s_i_id = ?";
const ORDER_COLS: &str =
    "o_w_id, o_d_id, o_id, o_c_id, o_entry_d, o_carrier_id, o_ol_cnt, o_all_local";
const ORDER_INSERT: &str = "INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?, ?, ?)";
const ORDER_UPDATE: &str =
    "UPDATE orders SET o_carrier_id = ? WHERE o_w_id = ? AND o_d_id = ? AND o_id = ?";
const NEW_ORDER_INSERT: &str = "INSERT INTO new_order VALUES (?, ?, ?)";
const NEW_ORDER_OLDEST: &str =
    "SELECT MIN(no_o_id) FROM new_order WHERE no_w_id = ? AND no_d_id = ?";
const NEW_ORDER_DELETE: &str =
    "DELETE FROM new_order WHERE no_w_id = ? AND no_d_id = ? AND no_o_id = ?";
const LINE_COLS: &str = "ol_w_id, ol_d_id, ol_o_id, ol_number, ol_i_id, ol_supply_w_id, ol_delivery_d, ol_quantity, ol_amount, ol_dist_info";
const LINE_INSERT: &str = "INSERT INTO order_line VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
const LINE_UPDATE: &str = "UPDATE order_line SET ol_delivery_d = ? WHERE ol_w_id = ? AND ol_d_id = ? AND ol_o_id = ? AND ol_number = ?";
const RECENT_ITEMS: &str = "SELECT ol_i_id FROM order_line WHERE ol_w_id = ? AND ol_d_id = ? AND ol_o_id >= ? AND ol_o_id < ?";
const HISTORY_INSERT: &str = "INSERT INTO history VALUES (?, ?, ?, ?, ?, ?, ?, ?)";
const CHECK_ORDERS: &str = "SELECT COALESCE(MAX(o_id), 0), COALESCE(SUM(o_ol_cnt), 0) FROM orders WHERE o_w_id = ? AND o_d_id = ?";
const CHECK_NEW_ORDERS: &str = "SELECT COALESCE(MIN(no_o_id), 0), COALESCE(MAX(no_o_id), 0), COUNT(*) FROM new_order WHERE no_w_id = ? AND no_d_id = ?";
const CHECK_LINES: &str = "SELECT COUNT(*) FROM order_line WHERE ol_w_id = ? AND ol_d_id = ?";

pub struct TpccSqlite {
    file: PathBuf,
    pragmas: String,
}

fn map_err(e: rusqlite::Error) -> DbError {
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseBusy) | Some(rusqlite::ErrorCode::DatabaseLocked) => {
            DbError::Conflict(e.to_string())
        }
        _ => DbError::Other(anyhow::Error::new(e)),
    }
}

impl TpccSqlite {
    pub fn open(o: &EngineOptions) -> Result<Self> {
        std::fs::create_dir_all(&o.path)?;
        let file = o.path.join("tpcc.sqlite");
        let sync = if o.sync == SyncMode::Full {
            "FULL"
        } else {
            "OFF"
        };
        let mut pragmas = format!("PRAGMA synchronous={sync};");
        if let Some(b) = o.block_cache_bytes {
            pragmas += &format!("PRAGMA cache_size=-{};", (b / 1024).max(1));
        }
        let db = TpccSqlite { file, pragmas };
        let c = db.connect()?;
        let exists: bool = c
            .query_row(
                "SELECT COUNT(*) FROM sqlite_master WHERE name = 'warehouse'",
                [],
                |r| r.get::<_, i64>(0),
            )
            .map(|n| n > 0)?;
        if !exists {
            let ddl: Vec<String> = SCHEMA.iter().map(|s| s.replace("{engine}", "")).collect();
            c.execute_batch(&format!("BEGIN; {}; COMMIT;", ddl.join("; ")))?;
        }
        Ok(db)
    }

    fn connect(&self) -> Result<Connection> {
        let c = Connection::open(&self.file)
            .with_context(|| format!("cannot open {}", self.file.display()))?;
        c.busy_timeout(Duration::from_secs(60))?;
        c.query_row("PRAGMA journal_mode=WAL", [], |_| Ok(()))?;
        c.execute_batch(&self.pragmas)?;
        Ok(c)
    }
}

impl TpccDb for TpccSqlite {
    fn session(&self) -> Result<Box<dyn TpccTx + '_>> {
        Ok(Box::new(SqlTx {
            c: self.connect()?,
            open: false,
            d: Dialect::Sqlite,
        }))
    }
}

struct SqlTx {
    c: Connection,
    open: bool,
    d: Dialect,
}

fn o_u32(v: Option<i64>) -> Option<u32> {
    v.map(|x| x as u32)
}

impl SqlTx {
    fn q(&self, text: &str) -> String {
        self.d.sql(&text.replace("{lock}", self.d.for_update()))
    }

    fn one<T>(
        &mut self,
        text: &str,
        p: impl rusqlite::Params,
        f: impl FnOnce(&Row) -> rusqlite::Result<T>,
    ) -> DbResult<T> {
        let sql = self.q(text);
        let mut st = self.c.prepare_cached(&sql).map_err(map_err)?;
        st.query_row(p, f).map_err(map_err)
    }

    fn exec(&mut self, text: &str, p: impl rusqlite::Params) -> DbResult<()> {
        let sql = self.q(text);
        let mut st = self.c.prepare_cached(&sql).map_err(map_err)?;
        st.execute(p).map_err(map_err)?;
        Ok(())
    }
}

fn customer_from(r: &Row) -> rusqlite::Result<Customer> {
    Ok(Customer {
        w_id: r.get(0)?,
        d_id: r.get(1)?,
        c_id: r.get(2)?,
        first: r.get(3)?,
        middle: r.get(4)?,
        last: r.get(5)?,
        street_1: r.get(6)?,
        street_2: r.get(7)?,
        city: r.get(8)?,
        state: r.get(9)?,
        zip: r.get(10)?,
        phone: r.get(11)?,
        since: r.get(12)?,
        credit: r.get(13)?,
        credit_lim: r.get(14)?,
        discount: r.get(15)?,
        balance: r.get(16)?,
        ytd_payment: r.get(17)?,
        payment_cnt: r.get(18)?,
        delivery_cnt: r.get(19)?,
        data: r.get(20)?,
    })
}

fn order_from(r: &Row) -> rusqlite::Result<Order> {
    Ok(Order {
        w_id: r.get(0)?,
        d_id: r.get(1)?,
        o_id: r.get(2)?,
        c_id: r.get(3)?,
        entry_d: r.get(4)?,
        carrier_id: o_u32(r.get(5)?),
        ol_cnt: r.get(6)?,
        all_local: r.get::<_, i64>(7)? != 0,
    })
}

fn line_from(r: &Row) -> rusqlite::Result<OrderLine> {
    Ok(OrderLine {
        w_id: r.get(0)?,
        d_id: r.get(1)?,
        o_id: r.get(2)?,
        number: r.get(3)?,
        i_id: r.get(4)?,
        supply_w_id: r.get(5)?,
        delivery_d: r.get(6)?,
        quantity: r.get(7)?,
        amount: r.get(8)?,
        dist_info: r.get(9)?,
    })
}

impl TpccTx for SqlTx {
    fn begin(&mut self, write: bool) -> DbResult<()> {
        self.c
            .execute_batch(if write { "BEGIN IMMEDIATE" } else { "BEGIN" })
            .map_err(map_err)?;
        self.open = true;
        Ok(())
    }
    fn commit(&mut self) -> DbResult<()> {
        self.open = false;
        self.c.execute_batch("COMMIT").map_err(|e| {
            let _ = self.c.execute_batch("ROLLBACK");
            map_err(e)
        })
    }
    fn rollback(&mut self) -> DbResult<()> {
        if std::mem::take(&mut self.open) {
            self.c.execute_batch("ROLLBACK").map_err(map_err)?;
        }
        Ok(())
    }
    fn meta(&mut self) -> DbResult<Option<String>> {
        let sql = self.q("SELECT v FROM tpcc_meta WHERE k = 'tpcc'");
        let mut st = self.c.prepare_cached(&sql).map_err(map_err)?;
        st.query_row([], |r| r.get(0)).optional().map_err(map_err)
    }
    fn put_meta(&mut self, text: &str) -> DbResult<()> {
        self.exec("DELETE FROM tpcc_meta WHERE k = 'tpcc'", [])?;
        self.exec("INSERT INTO tpcc_meta VALUES ('tpcc', ?)", params![text])
    }
    fn warehouse(&mut self, w: u32) -> DbResult<Warehouse> {
        self.one(WAREHOUSE_GET, params![w], |r| {
            Ok(Warehouse {
                w_id: r.get(0)?,
                name: r.get(1)?,
                street_1: r.get(2)?,
                street_2: r.get(3)?,
                city: r.get(4)?,
                state: r.get(5)?,
                zip: r.get(6)?,
                tax: r.get(7)?,
                ytd: r.get(8)?,
            })
        })
    }
    fn put_warehouse(&mut self, r: &Warehouse, insert: bool) -> DbResult<()> {
        if insert {
            self.exec(
                WAREHOUSE_INSERT,
                params![
                    r.w_id, r.name, r.street_1, r.street_2, r.city, r.state, r.zip, r.tax, r.ytd
                ],
            )
        } else {
            self.exec(WAREHOUSE_UPDATE, params![r.ytd, r.w_id])
        }
    }
    fn district(&mut self, w: u32, d: u32) -> DbResult<District> {
        self.one(DISTRICT_GET, params![w, d], |r| {
            Ok(District {
                w_id: r.get(0)?,
                d_id: r.get(1)?,
                name: r.get(2)?,
                street_1: r.get(3)?,
                street_2: r.get(4)?,
                city: r.get(5)?,
                state: r.get(6)?,
                zip: r.get(7)?,
                tax: r.get(8)?,
                ytd: r.get(9)?,
                next_o_id: r.get(10)?,
            })
        })
    }
    fn put_district(&mut self, r: &District, insert: bool) -> DbResult<()> {
        if insert {
            self.exec(
                DISTRICT_INSERT,
                params![
                    r.w_id,
                    r.d_id,
                    r.name,
                    r.street_1,
                    r.street_2,
                    r.city,
                    r.state,
                    r.zip,
                    r.tax,
                    r.ytd,
                    r.next_o_id
                ],
            )
        } else {
            self.exec(DISTRICT_UPDATE, params![r.ytd, r.next_o_id, r.w_id, r.d_id])
        }
    }
    fn customer(&mut self, w: u32, d: u32, c: u32) -> DbResult<Customer> {
        let text = format!("SELECT {CUSTOMER_COLS} FROM customer WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?{{lock}}");
        self.one(&text, params![w, d, c], customer_from)
    }
    fn put_customer(&mut self, r: &Customer, insert: bool) -> DbResult<()> {
        if insert {
            self.exec(
                CUSTOMER_INSERT,
                params![
                    r.w_id,
                    r.d_id,
                    r.c_id,
                    r.first,
                    r.middle,
                    r.last,
                    r.street_1,
                    r.street_2,
                    r.city,
                    r.state,
                    r.zip,
                    r.phone,
                    r.since,
                    r.credit,
                    r.credit_lim,
                    r.discount,
                    r.balance,
                    r.ytd_payment,
                    r.payment_cnt,
                    r.delivery_cnt,
                    r.data
                ],
            )
        } else {
            self.exec(
                CUSTOMER_UPDATE,
                params![
                    r.balance,
                    r.ytd_payment,
                    r.payment_cnt,
                    r.delivery_cnt,
                    r.data,
                    r.w_id,
                    r.d_id,
                    r.c_id
                ],
            )
        }
    }
    fn customer_ids_by_last(&mut self, w: u32, d: u32, last: &str) -> DbResult<Vec<u32>> {
        let sql = self.q(CUSTOMER_BY_LAST);
        let mut st = self.c.prepare_cached(&sql).map_err(map_err)?;
        let ids = st
            .query_map(params![w, d, last], |r| r.get(0))
            .map_err(map_err)?;
        ids.collect::<rusqlite::Result<Vec<u32>>>().map_err(map_err)
    }
    fn item(&mut self, i: u32) -> DbResult<Option<Item>> {
        let sql = self.q(ITEM_GET);
        let mut st = self.c.prepare_cached(&sql).map_err(map_err)?;
        st.query_row(params![i], |r| {
            Ok(Item {
                i_id: r.get(0)?,
                im_id: r.get(1)?,
                name: r.get(2)?,
                price: r.get(3)?,
                data: r.get(4)?,
            })
        })
        .optional()
        .map_err(map_err)
    }
    fn put_item(&mut self, r: &Item) -> DbResult<()> {
        self.exec(
            ITEM_INSERT,
            params![r.i_id, r.im_id, r.name, r.price, r.data],
        )
    }
    fn stock(&mut self, w: u32, i: u32) -> DbResult<Stock> {
        self.one(STOCK_GET, params![w, i], |r| {
            Ok(Stock {
                w_id: r.get(0)?,
                i_id: r.get(1)?,
                quantity: r.get(2)?,
                dist: (3..13)
                    .map(|k| r.get(k))
                    .collect::<rusqlite::Result<Vec<String>>>()?,
                ytd: r.get(13)?,
                order_cnt: r.get(14)?,
                remote_cnt: r.get(15)?,
                data: r.get(16)?,
            })
        })
    }
    fn put_stock(&mut self, r: &Stock, insert: bool) -> DbResult<()> {
        if insert {
            let dd = &r.dist;
            self.exec(
                STOCK_INSERT,
                params![
                    r.w_id,
                    r.i_id,
                    r.quantity,
                    dd[0],
                    dd[1],
                    dd[2],
                    dd[3],
                    dd[4],
                    dd[5],
                    dd[6],
                    dd[7],
                    dd[8],
                    dd[9],
                    r.ytd,
                    r.order_cnt,
                    r.remote_cnt,
                    r.data
                ],
            )
        } else {
            self.exec(
                STOCK_UPDATE,
                params![r.quantity, r.ytd, r.order_cnt, r.remote_cnt, r.w_id, r.i_id],
            )
        }
    }
    fn order(&mut self, w: u32, d: u32, o: u32) -> DbResult<Order> {
        let text = format!(
            "SELECT {ORDER_COLS} FROM orders WHERE o_w_id = ? AND o_d_id = ? AND o_id = ?{{lock}}"
        );
        self.one(&text, params![w, d, o], order_from)
    }
    fn put_order(&mut self, r: &Order, insert: bool) -> DbResult<()> {
        if insert {
            self.exec(
                ORDER_INSERT,
                params![
                    r.w_id,
                    r.d_id,
                    r.o_id,
                    r.c_id,
                    r.entry_d,
                    r.carrier_id,
                    r.ol_cnt,
                    r.all_local as i64
                ],
            )
        } else {
            self.exec(ORDER_UPDATE, params![r.carrier_id, r.w_id, r.d_id, r.o_id])
        }
    }
    fn last_order_of(&mut self, w: u32, d: u32, c: u32) -> DbResult<Option<Order>> {
        let sql = self.q(&format!(
            "SELECT {ORDER_COLS} FROM orders WHERE o_w_id = ? AND o_d_id = ? AND o_c_id = ? ORDER BY o_id DESC LIMIT 1"
        ));
        let mut st = self.c.prepare_cached(&sql).map_err(map_err)?;
        st.query_row(params![w, d, c], order_from)
            .optional()
            .map_err(map_err)
    }
    fn insert_new_order(&mut self, w: u32, d: u32, o: u32) -> DbResult<()> {
        self.exec(NEW_ORDER_INSERT, params![w, d, o])
    }
    fn oldest_new_order(&mut self, w: u32, d: u32) -> DbResult<Option<u32>> {
        self.one(NEW_ORDER_OLDEST, params![w, d], |r| {
            r.get::<_, Option<u32>>(0)
        })
    }
    fn delete_new_order(&mut self, w: u32, d: u32, o: u32) -> DbResult<()> {
        self.exec(NEW_ORDER_DELETE, params![w, d, o])
    }
    fn order_lines(&mut self, w: u32, d: u32, o: u32) -> DbResult<Vec<OrderLine>> {
        let sql = self.q(&format!(
            "SELECT {LINE_COLS} FROM order_line WHERE ol_w_id = ? AND ol_d_id = ? AND ol_o_id = ? ORDER BY ol_number"
        ));
        let mut st = self.c.prepare_cached(&sql).map_err(map_err)?;
        let rows = st.query_map(params![w, d, o], line_from).map_err(map_err)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(map_err)
    }
    fn put_order_line(&mut self, r: &OrderLine, insert: bool) -> DbResult<()> {
        if insert {
            self.exec(
                LINE_INSERT,
                params![
                    r.w_id,
                    r.d_id,
                    r.o_id,
                    r.number,
                    r.i_id,
                    r.supply_w_id,
                    r.delivery_d,
                    r.quantity,
                    r.amount,
                    r.dist_info
                ],
            )
        } else {
            self.exec(
                LINE_UPDATE,
                params![r.delivery_d, r.w_id, r.d_id, r.o_id, r.number],
            )
        }
    }
    fn recent_line_items(&mut self, w: u32, d: u32, o_lo: u32, o_hi: u32) -> DbResult<Vec<u32>> {
        let sql = self.q(RECENT_ITEMS);
        let mut st = self.c.prepare_cached(&sql).map_err(map_err)?;
        let rows = st
            .query_map(params![w, d, o_lo, o_hi], |r| r.get(0))
            .map_err(map_err)?;
        rows.collect::<rusqlite::Result<Vec<u32>>>()
            .map_err(map_err)
    }
    fn insert_history(&mut self, r: &History) -> DbResult<()> {
        self.exec(
            HISTORY_INSERT,
            params![r.c_id, r.c_d_id, r.c_w_id, r.d_id, r.w_id, r.date, r.amount, r.data],
        )
    }
    fn district_order_stats(&mut self, w: u32, d: u32) -> DbResult<(u32, u64)> {
        self.one(CHECK_ORDERS, params![w, d], |r| {
            Ok((r.get(0)?, r.get::<_, i64>(1)? as u64))
        })
    }
    fn district_new_order_stats(&mut self, w: u32, d: u32) -> DbResult<(u32, u32, u64)> {
        self.one(CHECK_NEW_ORDERS, params![w, d], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get::<_, i64>(2)? as u64))
        })
    }
    fn district_order_line_count(&mut self, w: u32, d: u32) -> DbResult<u64> {
        self.one(CHECK_LINES, params![w, d], |r| {
            Ok(r.get::<_, i64>(0)? as u64)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dialects_differ_only_in_placeholders_and_locks() {
        let text = DISTRICT_GET.replace("{lock}", Dialect::Postgres.for_update());
        let pg = Dialect::Postgres.sql(&text);
        assert!(
            pg.ends_with("WHERE d_w_id = $1 AND d_id = $2 FOR UPDATE"),
            "{pg}"
        );
        assert_eq!(
            Dialect::MariaDb.sql(CUSTOMER_INSERT).matches('?').count(),
            21
        );
        assert_eq!(
            Dialect::Postgres.sql(CUSTOMER_INSERT).matches('$').count(),
            21
        );
        assert_eq!(SCHEMA.len(), 12);
    }
}
