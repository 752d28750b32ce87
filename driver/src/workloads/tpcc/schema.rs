//! TPC-C's tables in SQL, written once for SQLite, MariaDB and PostgreSQL (each table's row and
//! its statements: `sql_rows`). Money is BIGINT cents and rates BIGINT ten-thousandths in every
//! dialect, so that the consistency conditions compare exact integers.

use crate::sql::Dialect;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::tpcc::rows::{Customer, District};
    use crate::workloads::tpcc::sql_rows::{SqlGet, SqlRow};

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
        let text = District::GET.replace("{lock}", Dialect::Postgres.for_update());
        let pg = Dialect::Postgres.sql(&text);
        assert!(
            pg.ends_with("WHERE d_w_id = $1 AND d_id = $2 FOR UPDATE"),
            "{pg}"
        );
        assert_eq!(
            Dialect::MariaDb.sql(Customer::INSERT).matches('?').count(),
            21
        );
        assert_eq!(
            Dialect::Postgres.sql(Customer::INSERT).matches('$').count(),
            21
        );
        let my = schema(Dialect::MariaDb, "ROCKSDB");
        assert!(my[0].ends_with(" ENGINE=ROCKSDB") && !my[3].contains("ENGINE"));
        assert_eq!(my.len(), 12);
    }
}
