//! TPC-C's tables in SQL, written once for SQLite, MariaDB and PostgreSQL: the schema and the
//! row-at-a-time statements (`sql_tx`) with each dialect's placeholders and row locks (`FOR
//! UPDATE`). Money is BIGINT cents and rates BIGINT ten-thousandths in every dialect, so that the
//! consistency conditions compare exact integers.

use super::rows::{Customer, Order, OrderLine};
use crate::sql::{Dialect, V};

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

/// The tables `SCHEMA` creates, in its order (for ANALYZE after a load).
pub fn tables() -> Vec<&'static str> {
    SCHEMA
        .iter()
        .filter_map(|s| s.strip_prefix("CREATE TABLE "))
        .filter_map(|s| s.split_whitespace().next())
        .collect()
}

/// The engine clause of CREATE TABLE for MariaDB (e.g. InnoDB, ROCKSDB).
pub fn schema(dialect: Dialect, table_engine: &str) -> Vec<String> {
    let clause = if dialect == Dialect::MariaDb {
        format!(" ENGINE={table_engine}")
    } else {
        String::new()
    };
    SCHEMA
        .iter()
        .map(|s| {
            s.replace(
                "{engine}",
                if s.starts_with("CREATE TABLE") {
                    &clause
                } else {
                    ""
                },
            )
        })
        .collect()
}

// Statements, written once with `?` placeholders; `{lock}` becomes the dialect's row lock.
pub(super) const WAREHOUSE_GET: &str = "SELECT w_id, w_name, w_street_1, w_street_2, w_city, w_state, w_zip, w_tax, w_ytd FROM warehouse WHERE w_id = ?{lock}";
pub(super) const WAREHOUSE_INSERT: &str =
    "INSERT INTO warehouse VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)";
pub(super) const WAREHOUSE_UPDATE: &str = "UPDATE warehouse SET w_ytd = ? WHERE w_id = ?";
pub(super) const DISTRICT_GET: &str = "SELECT d_w_id, d_id, d_name, d_street_1, d_street_2, d_city, d_state, d_zip, d_tax, d_ytd, d_next_o_id FROM district WHERE d_w_id = ? AND d_id = ?{lock}";
pub(super) const DISTRICT_INSERT: &str =
    "INSERT INTO district VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
pub(super) const DISTRICT_UPDATE: &str =
    "UPDATE district SET d_ytd = ?, d_next_o_id = ? WHERE d_w_id = ? AND d_id = ?";
pub(super) const CUSTOMER_COLS: &str = "c_w_id, c_d_id, c_id, c_first, c_middle, c_last, c_street_1, c_street_2, c_city, c_state, c_zip, c_phone, c_since, c_credit, c_credit_lim, c_discount, c_balance, c_ytd_payment, c_payment_cnt, c_delivery_cnt, c_data";
pub(super) const CUSTOMER_INSERT: &str =
    "INSERT INTO customer VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
pub(super) const CUSTOMER_UPDATE: &str = "UPDATE customer SET c_balance = ?, c_ytd_payment = ?, c_payment_cnt = ?, c_delivery_cnt = ?, c_data = ? WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?";
pub(super) const CUSTOMER_BY_LAST: &str =
    "SELECT c_id FROM customer WHERE c_w_id = ? AND c_d_id = ? AND c_last = ? ORDER BY c_first";
pub(super) const ITEM_GET: &str =
    "SELECT i_id, i_im_id, i_name, i_price, i_data FROM item WHERE i_id = ?";
pub(super) const ITEM_INSERT: &str = "INSERT INTO item VALUES (?, ?, ?, ?, ?)";
pub(super) const STOCK_GET: &str = "SELECT s_w_id, s_i_id, s_quantity, s_dist_01, s_dist_02, s_dist_03, s_dist_04, s_dist_05, s_dist_06, s_dist_07, s_dist_08, s_dist_09, s_dist_10, s_ytd, s_order_cnt, s_remote_cnt, s_data FROM stock WHERE s_w_id = ? AND s_i_id = ?{lock}";
pub(super) const STOCK_INSERT: &str =
    "INSERT INTO stock VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
pub(super) const STOCK_UPDATE: &str = "UPDATE stock SET s_quantity = ?, s_ytd = ?, s_order_cnt = ?, s_remote_cnt = ? WHERE s_w_id = ? AND s_i_id = ?";
pub(super) const ORDER_COLS: &str =
    "o_w_id, o_d_id, o_id, o_c_id, o_entry_d, o_carrier_id, o_ol_cnt, o_all_local";
pub(super) const ORDER_INSERT: &str = "INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?, ?, ?)";
pub(super) const ORDER_UPDATE: &str =
    "UPDATE orders SET o_carrier_id = ? WHERE o_w_id = ? AND o_d_id = ? AND o_id = ?";
pub(super) const NEW_ORDER_INSERT: &str = "INSERT INTO new_order VALUES (?, ?, ?)";
pub(super) const NEW_ORDER_OLDEST: &str =
    "SELECT MIN(no_o_id) FROM new_order WHERE no_w_id = ? AND no_d_id = ?";
pub(super) const NEW_ORDER_DELETE: &str =
    "DELETE FROM new_order WHERE no_w_id = ? AND no_d_id = ? AND no_o_id = ?";
pub(super) const LINE_COLS: &str = "ol_w_id, ol_d_id, ol_o_id, ol_number, ol_i_id, ol_supply_w_id, ol_delivery_d, ol_quantity, ol_amount, ol_dist_info";
pub(super) const LINE_INSERT: &str = "INSERT INTO order_line VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
pub(super) const LINE_UPDATE: &str = "UPDATE order_line SET ol_delivery_d = ? WHERE ol_w_id = ? AND ol_d_id = ? AND ol_o_id = ? AND ol_number = ?";
pub(super) const RECENT_ITEMS: &str = "SELECT ol_i_id FROM order_line WHERE ol_w_id = ? AND ol_d_id = ? AND ol_o_id >= ? AND ol_o_id < ?";
pub(super) const HISTORY_INSERT: &str = "INSERT INTO history VALUES (?, ?, ?, ?, ?, ?, ?, ?)";
// The consistency check reads a district's rows in a plain forward range scan and aggregates
// them itself: it checks the data, not an engine's MIN/MAX shortcut (MariaDB answers MAX() of
// a key prefix with one backward index read, which TideSQL gets wrong; see check.rs).
pub(super) const CHECK_ORDERS: &str =
    "SELECT o_id, o_ol_cnt FROM orders WHERE o_w_id = ? AND o_d_id = ?";
pub(super) const CHECK_NEW_ORDERS: &str =
    "SELECT no_o_id FROM new_order WHERE no_w_id = ? AND no_d_id = ?";
pub(super) const CHECK_LINES: &str =
    "SELECT COUNT(*) FROM order_line WHERE ol_w_id = ? AND ol_d_id = ?";

/// The INSERTs a load sends, whose rows can wait for one multi-row INSERT.
pub(super) const STATEMENTS: &[&str] = &[
    WAREHOUSE_INSERT,
    DISTRICT_INSERT,
    CUSTOMER_INSERT,
    ITEM_INSERT,
    STOCK_INSERT,
    ORDER_INSERT,
    NEW_ORDER_INSERT,
    LINE_INSERT,
    HISTORY_INSERT,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tables_are_those_the_schema_creates() {
        assert_eq!(
            tables(),
            [
                "warehouse",
                "district",
                "customer",
                "history",
                "item",
                "stock",
                "orders",
                "new_order",
                "order_line",
                "tpcc_meta"
            ]
        );
    }

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
        let my = schema(Dialect::MariaDb, "ROCKSDB");
        assert!(my[0].ends_with(" ENGINE=ROCKSDB") && !my[3].contains("ENGINE"));
        assert_eq!(my.len(), 12);
    }
}

/// The rows a SELECT of this schema returns, in its columns' order.
pub(super) fn customer_from(r: &[V]) -> Customer {
    Customer {
        w_id: r[0].u(),
        d_id: r[1].u(),
        c_id: r[2].u(),
        first: r[3].s(),
        middle: r[4].s(),
        last: r[5].s(),
        street_1: r[6].s(),
        street_2: r[7].s(),
        city: r[8].s(),
        state: r[9].s(),
        zip: r[10].s(),
        phone: r[11].s(),
        since: r[12].i(),
        credit: r[13].s(),
        credit_lim: r[14].i(),
        discount: r[15].i() as i32,
        balance: r[16].i(),
        ytd_payment: r[17].i(),
        payment_cnt: r[18].u(),
        delivery_cnt: r[19].u(),
        data: r[20].s(),
    }
}

pub(super) fn order_from(r: &[V]) -> Order {
    Order {
        w_id: r[0].u(),
        d_id: r[1].u(),
        o_id: r[2].u(),
        c_id: r[3].u(),
        entry_d: r[4].i(),
        carrier_id: r[5].opt_u(),
        ol_cnt: r[6].u(),
        all_local: r[7].i() != 0,
    }
}

pub(super) fn line_from(r: &[V]) -> OrderLine {
    OrderLine {
        w_id: r[0].u(),
        d_id: r[1].u(),
        o_id: r[2].u(),
        number: r[3].u(),
        i_id: r[4].u(),
        supply_w_id: r[5].u(),
        delivery_d: r[6].opt_i(),
        quantity: r[7].u(),
        amount: r[8].i(),
        dist_info: r[9].s(),
    }
}
