//! TPC-C as stored procedures, HammerDB's default on MariaDB and PostgreSQL: the five
//! transactions written here from the specification (clause 2) in each server's own language,
//! one call per transaction, the work inside the server. Inputs are drawn by the client as in
//! every other mode (`Input`), so the mix, the 1 % New-Order rollbacks, remote lines and
//! by-name lookups are the same; money stays in integer cents, so that the consistency
//! conditions compare exact integers.
//!
//! MariaDB: procedures that open and end their own transaction (`START TRANSACTION` ..
//! `COMMIT`, `ROLLBACK` and `RESIGNAL` on any error) and end with a one-row result, 1 when
//! New-Order rolled back on purpose. PostgreSQL: functions called in one autocommitted
//! statement; New-Order's unused item raises SQLSTATE `TPCRB`, which rolls the statement back.

use anyhow::{Context, Result};

use super::{Input, Outcome, WholeTxn};
use crate::engines::DbResult;
use crate::sql::mariadb::mysql_err;
use crate::sql::postgres::pg_err;
use crate::sql::Server;

/// The procedures' names, for errors that say which one failed to create.
pub const NAMES: [&str; 5] = [
    "tpcc_neword",
    "tpcc_payment",
    "tpcc_delivery",
    "tpcc_slev",
    "tpcc_ostat",
];

/// The rollback New-Order asks for (PostgreSQL).
const ROLLBACK_STATE: &str = "TPCRB";

pub const MARIADB: [&str; 5] = [
    r"CREATE OR REPLACE PROCEDURE tpcc_neword(p_w INT, p_d INT, p_c INT, p_cnt INT, p_items VARCHAR(200),
    p_supply VARCHAR(200), p_qty VARCHAR(100), p_now BIGINT)
proc: BEGIN
  DECLARE v_o, n, v_i, v_sw, v_q, v_sq, v_all_local INT;
  DECLARE v_price, v_w_tax, v_d_tax, v_disc BIGINT;
  DECLARE v_dist CHAR(24);
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  START TRANSACTION;
  SELECT w_tax INTO v_w_tax FROM warehouse WHERE w_id = p_w;
  SELECT d_tax, d_next_o_id INTO v_d_tax, v_o FROM district WHERE d_w_id = p_w AND d_id = p_d FOR UPDATE;
  UPDATE district SET d_next_o_id = v_o + 1 WHERE d_w_id = p_w AND d_id = p_d;
  SELECT c_discount INTO v_disc FROM customer WHERE c_w_id = p_w AND c_d_id = p_d AND c_id = p_c;
  SET v_all_local = 1, n = 1;
  WHILE n <= p_cnt DO
    IF CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(p_supply, ',', n), ',', -1) AS SIGNED) <> p_w THEN
      SET v_all_local = 0;
    END IF;
    SET n = n + 1;
  END WHILE;
  INSERT INTO orders VALUES (p_w, p_d, v_o, p_c, p_now, NULL, p_cnt, v_all_local);
  INSERT INTO new_order VALUES (p_w, p_d, v_o);
  SET n = 1;
  WHILE n <= p_cnt DO
    SET v_i = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(p_items, ',', n), ',', -1) AS SIGNED);
    SET v_sw = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(p_supply, ',', n), ',', -1) AS SIGNED);
    SET v_q = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(p_qty, ',', n), ',', -1) AS SIGNED);
    SET v_price = NULL;
    SELECT i_price INTO v_price FROM item WHERE i_id = v_i;
    IF v_price IS NULL THEN
      ROLLBACK;
      SELECT 1 AS rolled_back;
      LEAVE proc;
    END IF;
    SELECT s_quantity, ELT(p_d, s_dist_01, s_dist_02, s_dist_03, s_dist_04, s_dist_05, s_dist_06, s_dist_07,
                           s_dist_08, s_dist_09, s_dist_10)
      INTO v_sq, v_dist FROM stock WHERE s_w_id = v_sw AND s_i_id = v_i FOR UPDATE;
    UPDATE stock SET s_quantity = IF(v_sq >= v_q + 10, v_sq - v_q, v_sq - v_q + 91), s_ytd = s_ytd + v_q,
      s_order_cnt = s_order_cnt + 1, s_remote_cnt = s_remote_cnt + IF(v_sw <> p_w, 1, 0)
      WHERE s_w_id = v_sw AND s_i_id = v_i;
    INSERT INTO order_line VALUES (p_w, p_d, v_o, n, v_i, v_sw, NULL, v_q, v_q * v_price, v_dist);
    SET n = n + 1;
  END WHILE;
  COMMIT;
  SELECT 0 AS rolled_back;
END",
    r"CREATE OR REPLACE PROCEDURE tpcc_payment(p_w INT, p_d INT, p_c_w INT, p_c_d INT, p_c INT,
    p_last VARCHAR(16), p_amount BIGINT, p_now BIGINT)
BEGIN
  DECLARE v_c, v_n INT;
  DECLARE v_msg VARCHAR(128);
  DECLARE v_w_name, v_d_name VARCHAR(10);
  DECLARE v_credit CHAR(2);
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  START TRANSACTION;
  UPDATE warehouse SET w_ytd = w_ytd + p_amount WHERE w_id = p_w;
  SELECT w_name INTO v_w_name FROM warehouse WHERE w_id = p_w;
  UPDATE district SET d_ytd = d_ytd + p_amount WHERE d_w_id = p_w AND d_id = p_d;
  SELECT d_name INTO v_d_name FROM district WHERE d_w_id = p_w AND d_id = p_d;
  IF p_last IS NULL THEN
    SET v_c = p_c;
  ELSE
    SELECT COUNT(*) INTO v_n FROM customer WHERE c_w_id = p_c_w AND c_d_id = p_c_d AND c_last = p_last;
    IF v_n = 0 THEN
      SET v_msg = CONCAT('no customer named ', p_last, ' in w', p_c_w, ' d', p_c_d);
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg;
    END IF;
    SET v_n = (v_n - 1) DIV 2;
    SELECT c_id INTO v_c FROM customer WHERE c_w_id = p_c_w AND c_d_id = p_c_d AND c_last = p_last
      ORDER BY c_first LIMIT v_n, 1;
  END IF;
  SELECT c_credit INTO v_credit FROM customer WHERE c_w_id = p_c_w AND c_d_id = p_c_d AND c_id = v_c FOR UPDATE;
  IF v_credit = 'BC' THEN
    UPDATE customer SET c_balance = c_balance - p_amount, c_ytd_payment = c_ytd_payment + p_amount,
      c_payment_cnt = c_payment_cnt + 1,
      c_data = LEFT(CONCAT(v_c, ' ', p_c_d, ' ', p_c_w, ' ', p_d, ' ', p_w, ' ',
                           CAST(p_amount / 100 AS DECIMAL(12, 2)), '|', c_data), 500)
      WHERE c_w_id = p_c_w AND c_d_id = p_c_d AND c_id = v_c;
  ELSE
    UPDATE customer SET c_balance = c_balance - p_amount, c_ytd_payment = c_ytd_payment + p_amount,
      c_payment_cnt = c_payment_cnt + 1
      WHERE c_w_id = p_c_w AND c_d_id = p_c_d AND c_id = v_c;
  END IF;
  INSERT INTO history VALUES (v_c, p_c_d, p_c_w, p_d, p_w, p_now, p_amount, CONCAT(v_w_name, '    ', v_d_name));
  COMMIT;
  SELECT 0 AS rolled_back;
END",
    r"CREATE OR REPLACE PROCEDURE tpcc_delivery(p_w INT, p_carrier INT, p_now BIGINT)
BEGIN
  DECLARE d, v_o, v_c INT;
  DECLARE v_sum BIGINT;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  START TRANSACTION;
  SET d = 1;
  WHILE d <= 10 DO
    SET v_o = NULL;
    SELECT no_o_id INTO v_o FROM new_order WHERE no_w_id = p_w AND no_d_id = d ORDER BY no_o_id LIMIT 1
      FOR UPDATE;
    IF v_o IS NOT NULL THEN
      DELETE FROM new_order WHERE no_w_id = p_w AND no_d_id = d AND no_o_id = v_o;
      SELECT o_c_id INTO v_c FROM orders WHERE o_w_id = p_w AND o_d_id = d AND o_id = v_o FOR UPDATE;
      UPDATE orders SET o_carrier_id = p_carrier WHERE o_w_id = p_w AND o_d_id = d AND o_id = v_o;
      UPDATE order_line SET ol_delivery_d = p_now WHERE ol_w_id = p_w AND ol_d_id = d AND ol_o_id = v_o;
      SELECT COALESCE(SUM(ol_amount), 0) INTO v_sum FROM order_line
        WHERE ol_w_id = p_w AND ol_d_id = d AND ol_o_id = v_o;
      UPDATE customer SET c_balance = c_balance + v_sum, c_delivery_cnt = c_delivery_cnt + 1
        WHERE c_w_id = p_w AND c_d_id = d AND c_id = v_c;
    END IF;
    SET d = d + 1;
  END WHILE;
  COMMIT;
  SELECT 0 AS rolled_back;
END",
    r"CREATE OR REPLACE PROCEDURE tpcc_slev(p_w INT, p_d INT, p_threshold INT)
BEGIN
  DECLARE v_next, v_low INT;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  START TRANSACTION READ ONLY;
  SELECT d_next_o_id INTO v_next FROM district WHERE d_w_id = p_w AND d_id = p_d;
  SELECT COUNT(DISTINCT s_i_id) INTO v_low FROM order_line JOIN stock ON s_w_id = p_w AND s_i_id = ol_i_id
    WHERE ol_w_id = p_w AND ol_d_id = p_d AND ol_o_id >= v_next - 20 AND ol_o_id < v_next
      AND s_quantity < p_threshold;
  COMMIT;
  SELECT v_low AS low_stock;
END",
    r"CREATE OR REPLACE PROCEDURE tpcc_ostat(p_w INT, p_d INT, p_c INT, p_last VARCHAR(16))
BEGIN
  DECLARE v_c, v_n, v_o INT;
  DECLARE v_msg VARCHAR(128);
  DECLARE v_balance BIGINT;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  START TRANSACTION READ ONLY;
  IF p_last IS NULL THEN
    SET v_c = p_c;
  ELSE
    SELECT COUNT(*) INTO v_n FROM customer WHERE c_w_id = p_w AND c_d_id = p_d AND c_last = p_last;
    IF v_n = 0 THEN
      SET v_msg = CONCAT('no customer named ', p_last, ' in w', p_w, ' d', p_d);
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg;
    END IF;
    SET v_n = (v_n - 1) DIV 2;
    SELECT c_id INTO v_c FROM customer WHERE c_w_id = p_w AND c_d_id = p_d AND c_last = p_last
      ORDER BY c_first LIMIT v_n, 1;
  END IF;
  SELECT c_balance INTO v_balance FROM customer WHERE c_w_id = p_w AND c_d_id = p_d AND c_id = v_c;
  -- the last of the customer's orders, over a forward read of them: MAX(o_id + 0) is not
  -- answered by one backward read of the index's prefix (MAX(o_id) would be), which TideSQL
  -- gets wrong (alloclab.correctness)
  SELECT MAX(o_id + 0) INTO v_o FROM orders WHERE o_w_id = p_w AND o_d_id = p_d AND o_c_id = v_c;
  IF v_o IS NULL THEN
    SET v_msg = CONCAT('no order of customer ', v_c, ' in w', p_w, ' d', p_d, ', who has one since the load');
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg;
  END IF;
  SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d FROM order_line
    WHERE ol_w_id = p_w AND ol_d_id = p_d AND ol_o_id = v_o;
  COMMIT;
END",
];

pub const POSTGRES: [&str; 5] = [
    r"CREATE OR REPLACE FUNCTION tpcc_neword(p_w INT, p_d INT, p_c INT, p_items INT[], p_supply INT[],
    p_qty INT[], p_now BIGINT) RETURNS INT LANGUAGE plpgsql AS $$
DECLARE
  v_o INT; v_sq INT; v_price BIGINT; v_w_tax BIGINT; v_d_tax BIGINT; v_disc BIGINT; v_dist CHAR(24);
  v_cnt INT := array_length(p_items, 1);
BEGIN
  SELECT w_tax INTO v_w_tax FROM warehouse WHERE w_id = p_w;
  SELECT d_tax, d_next_o_id INTO v_d_tax, v_o FROM district WHERE d_w_id = p_w AND d_id = p_d FOR UPDATE;
  UPDATE district SET d_next_o_id = v_o + 1 WHERE d_w_id = p_w AND d_id = p_d;
  SELECT c_discount INTO v_disc FROM customer WHERE c_w_id = p_w AND c_d_id = p_d AND c_id = p_c;
  INSERT INTO orders VALUES (p_w, p_d, v_o, p_c, p_now, NULL, v_cnt,
                             CASE WHEN p_w = ALL(p_supply) THEN 1 ELSE 0 END);
  INSERT INTO new_order VALUES (p_w, p_d, v_o);
  FOR n IN 1 .. v_cnt LOOP
    SELECT i_price INTO v_price FROM item WHERE i_id = p_items[n];
    IF NOT FOUND THEN
      RAISE EXCEPTION 'New-Order rolled back on purpose (unused item number)' USING ERRCODE = 'TPCRB';
    END IF;
    SELECT s_quantity, CASE p_d WHEN 1 THEN s_dist_01 WHEN 2 THEN s_dist_02 WHEN 3 THEN s_dist_03
             WHEN 4 THEN s_dist_04 WHEN 5 THEN s_dist_05 WHEN 6 THEN s_dist_06 WHEN 7 THEN s_dist_07
             WHEN 8 THEN s_dist_08 WHEN 9 THEN s_dist_09 ELSE s_dist_10 END
      INTO v_sq, v_dist FROM stock WHERE s_w_id = p_supply[n] AND s_i_id = p_items[n] FOR UPDATE;
    UPDATE stock SET s_quantity = CASE WHEN v_sq >= p_qty[n] + 10 THEN v_sq - p_qty[n] ELSE v_sq - p_qty[n] + 91 END,
      s_ytd = s_ytd + p_qty[n], s_order_cnt = s_order_cnt + 1,
      s_remote_cnt = s_remote_cnt + CASE WHEN p_supply[n] <> p_w THEN 1 ELSE 0 END
      WHERE s_w_id = p_supply[n] AND s_i_id = p_items[n];
    INSERT INTO order_line VALUES (p_w, p_d, v_o, n, p_items[n], p_supply[n], NULL, p_qty[n],
                                   p_qty[n] * v_price, v_dist);
  END LOOP;
  RETURN 0;
END $$",
    r"CREATE OR REPLACE FUNCTION tpcc_payment(p_w INT, p_d INT, p_c_w INT, p_c_d INT, p_c INT, p_last VARCHAR(16),
    p_amount BIGINT, p_now BIGINT) RETURNS INT LANGUAGE plpgsql AS $$
DECLARE
  v_c INT; v_n INT; v_w_name VARCHAR(10); v_d_name VARCHAR(10); v_credit CHAR(2);
BEGIN
  UPDATE warehouse SET w_ytd = w_ytd + p_amount WHERE w_id = p_w RETURNING w_name INTO v_w_name;
  UPDATE district SET d_ytd = d_ytd + p_amount WHERE d_w_id = p_w AND d_id = p_d RETURNING d_name INTO v_d_name;
  IF p_last IS NULL THEN
    v_c := p_c;
  ELSE
    SELECT COUNT(*) INTO v_n FROM customer WHERE c_w_id = p_c_w AND c_d_id = p_c_d AND c_last = p_last;
    IF v_n = 0 THEN
      RAISE EXCEPTION 'no customer named % in w% d%', p_last, p_c_w, p_c_d;
    END IF;
    SELECT c_id INTO v_c FROM customer WHERE c_w_id = p_c_w AND c_d_id = p_c_d AND c_last = p_last
      ORDER BY c_first OFFSET (v_n - 1) / 2 LIMIT 1;
  END IF;
  SELECT c_credit INTO v_credit FROM customer WHERE c_w_id = p_c_w AND c_d_id = p_c_d AND c_id = v_c FOR UPDATE;
  IF v_credit = 'BC' THEN
    UPDATE customer SET c_balance = c_balance - p_amount, c_ytd_payment = c_ytd_payment + p_amount,
      c_payment_cnt = c_payment_cnt + 1,
      c_data = LEFT(v_c || ' ' || p_c_d || ' ' || p_c_w || ' ' || p_d || ' ' || p_w || ' '
                    || to_char(p_amount / 100.0, 'FM9999999990.00') || '|' || c_data, 500)
      WHERE c_w_id = p_c_w AND c_d_id = p_c_d AND c_id = v_c;
  ELSE
    UPDATE customer SET c_balance = c_balance - p_amount, c_ytd_payment = c_ytd_payment + p_amount,
      c_payment_cnt = c_payment_cnt + 1
      WHERE c_w_id = p_c_w AND c_d_id = p_c_d AND c_id = v_c;
  END IF;
  INSERT INTO history VALUES (v_c, p_c_d, p_c_w, p_d, p_w, p_now, p_amount, v_w_name || '    ' || v_d_name);
  RETURN 0;
END $$",
    r"CREATE OR REPLACE FUNCTION tpcc_delivery(p_w INT, p_carrier INT, p_now BIGINT) RETURNS INT
    LANGUAGE plpgsql AS $$
DECLARE
  v_o INT; v_c INT; v_sum BIGINT;
BEGIN
  FOR d IN 1 .. 10 LOOP
    SELECT no_o_id INTO v_o FROM new_order WHERE no_w_id = p_w AND no_d_id = d ORDER BY no_o_id LIMIT 1
      FOR UPDATE;
    CONTINUE WHEN NOT FOUND;
    DELETE FROM new_order WHERE no_w_id = p_w AND no_d_id = d AND no_o_id = v_o;
    UPDATE orders SET o_carrier_id = p_carrier WHERE o_w_id = p_w AND o_d_id = d AND o_id = v_o
      RETURNING o_c_id INTO v_c;
    UPDATE order_line SET ol_delivery_d = p_now WHERE ol_w_id = p_w AND ol_d_id = d AND ol_o_id = v_o;
    SELECT COALESCE(SUM(ol_amount), 0) INTO v_sum FROM order_line
      WHERE ol_w_id = p_w AND ol_d_id = d AND ol_o_id = v_o;
    UPDATE customer SET c_balance = c_balance + v_sum, c_delivery_cnt = c_delivery_cnt + 1
      WHERE c_w_id = p_w AND c_d_id = d AND c_id = v_c;
  END LOOP;
  RETURN 0;
END $$",
    r"CREATE OR REPLACE FUNCTION tpcc_slev(p_w INT, p_d INT, p_threshold INT) RETURNS INT
    LANGUAGE plpgsql AS $$
DECLARE
  v_next INT; v_low INT;
BEGIN
  SELECT d_next_o_id INTO v_next FROM district WHERE d_w_id = p_w AND d_id = p_d;
  SELECT COUNT(DISTINCT s_i_id) INTO v_low FROM order_line JOIN stock ON s_w_id = p_w AND s_i_id = ol_i_id
    WHERE ol_w_id = p_w AND ol_d_id = p_d AND ol_o_id >= v_next - 20 AND ol_o_id < v_next
      AND s_quantity < p_threshold;
  RETURN v_low;
END $$",
    r"CREATE OR REPLACE FUNCTION tpcc_ostat(p_w INT, p_d INT, p_c INT, p_last VARCHAR(16))
    RETURNS TABLE (i_id INT, supply_w_id INT, quantity INT, amount BIGINT, delivery_d BIGINT)
    LANGUAGE plpgsql AS $$
DECLARE
  v_c INT; v_n INT; v_o INT; v_balance BIGINT;
BEGIN
  IF p_last IS NULL THEN
    v_c := p_c;
  ELSE
    SELECT COUNT(*) INTO v_n FROM customer WHERE c_w_id = p_w AND c_d_id = p_d AND c_last = p_last;
    IF v_n = 0 THEN
      RAISE EXCEPTION 'no customer named % in w% d%', p_last, p_w, p_d;
    END IF;
    SELECT c_id INTO v_c FROM customer WHERE c_w_id = p_w AND c_d_id = p_d AND c_last = p_last
      ORDER BY c_first OFFSET (v_n - 1) / 2 LIMIT 1;
  END IF;
  SELECT c_balance INTO v_balance FROM customer WHERE c_w_id = p_w AND c_d_id = p_d AND c_id = v_c;
  SELECT o_id INTO v_o FROM orders WHERE o_w_id = p_w AND o_d_id = p_d AND o_c_id = v_c
    ORDER BY o_id DESC LIMIT 1;
  IF v_o IS NULL THEN
    RAISE EXCEPTION 'no order of customer % in w% d%, who has one since the load', v_c, p_w, p_d;
  END IF;
  RETURN QUERY SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d FROM order_line
    WHERE ol_w_id = p_w AND ol_d_id = p_d AND ol_o_id = v_o;
END $$",
];

/// Create (or replace) the five procedures; an error names the server and the procedure.
pub fn create_mariadb(conn: &mut mysql::Conn, server: &Server) -> Result<()> {
    use mysql::prelude::Queryable;
    for (name, text) in NAMES.iter().zip(MARIADB) {
        conn.query_drop(text).with_context(|| {
            format!(
                "MariaDB at {} cannot create the stored procedure {name} (stored routines and \
                 CREATE ROUTINE are needed for --tpcc-mode procedures; --tpcc-mode statements \
                 needs neither)",
                server.socket.display()
            )
        })?;
    }
    Ok(())
}

pub fn create_postgres(conn: &mut postgres::Client, server: &Server) -> Result<()> {
    for (name, text) in NAMES.iter().zip(POSTGRES) {
        conn.batch_execute(text).with_context(|| {
            format!(
                "PostgreSQL in {} cannot create the function {name} (plpgsql and CREATE on the \
                 schema are needed for --tpcc-mode procedures; --tpcc-mode statements needs \
                 neither)",
                server.socket.display()
            )
        })?;
    }
    Ok(())
}

/// One argument of a procedure call, in the type the input holds it.
#[derive(Debug, Clone, Copy)]
enum Arg<'a> {
    /// an id (INT)
    Id(u32),
    /// Stock-Level's threshold (INT)
    Int(i32),
    /// money or a time stamp (BIGINT)
    Big(i64),
    /// a customer's last name, or NULL when the customer is looked up by id
    Name(&'a Option<String>),
    /// New-Order's line count: MariaDB's procedure takes it, PostgreSQL's function reads it
    /// from its arrays (skipped there)
    Count(u32),
    /// one column of New-Order's lines (0: item, 1: supplying warehouse, 2: quantity): a
    /// comma-separated list for MariaDB, an INT array for PostgreSQL
    Column(&'a [(u32, u32, u32)], usize),
}

/// The procedure `input` calls (its index in `NAMES`) and its arguments, in the order both
/// servers' procedures declare them, given to `call`.
fn call_args<R>(input: &Input, now: i64, call: impl FnOnce(usize, &[Arg]) -> R) -> R {
    use Arg::*;
    match input {
        Input::NewOrder { w, d, c, lines, .. } => call(
            0,
            &[
                Id(*w),
                Id(*d),
                Id(*c),
                Count(lines.len() as u32),
                Column(lines, 0),
                Column(lines, 1),
                Column(lines, 2),
                Big(now),
            ],
        ),
        Input::Payment {
            w,
            d,
            c_w,
            c_d,
            by_name,
            c_id,
            amount,
        } => call(
            1,
            &[
                Id(*w),
                Id(*d),
                Id(*c_w),
                Id(*c_d),
                Id(*c_id),
                Name(by_name),
                Big(*amount),
                Big(now),
            ],
        ),
        Input::Delivery { w, carrier } => call(2, &[Id(*w), Id(*carrier), Big(now)]),
        Input::StockLevel { w, d, threshold } => call(3, &[Id(*w), Id(*d), Int(*threshold)]),
        Input::OrderStatus {
            w,
            d,
            by_name,
            c_id,
        } => call(4, &[Id(*w), Id(*d), Id(*c_id), Name(by_name)]),
    }
}

/// Column `k` of New-Order's lines.
fn column(lines: &[(u32, u32, u32)], k: usize) -> impl Iterator<Item = u32> + '_ {
    lines.iter().map(move |l| match k {
        0 => l.0,
        1 => l.1,
        _ => l.2,
    })
}

fn list(xs: impl Iterator<Item = u32>) -> String {
    xs.map(|x| x.to_string()).collect::<Vec<_>>().join(",")
}

/// A virtual user calling MariaDB's procedures: one CALL per transaction.
pub struct MariaProcs {
    pub conn: mysql::Conn,
    calls: Vec<mysql::Statement>,
}

impl MariaProcs {
    pub fn new(mut conn: mysql::Conn) -> Result<Self> {
        use mysql::prelude::Queryable;
        let calls = [
            "CALL tpcc_neword(?, ?, ?, ?, ?, ?, ?, ?)",
            "CALL tpcc_payment(?, ?, ?, ?, ?, ?, ?, ?)",
            "CALL tpcc_delivery(?, ?, ?)",
            "CALL tpcc_slev(?, ?, ?)",
            "CALL tpcc_ostat(?, ?, ?, ?)",
        ]
        .iter()
        .map(|s| conn.prep(s))
        .collect::<std::result::Result<Vec<_>, _>>()
        .context("cannot prepare the CALLs of the TPC-C procedures (were they created?)")?;
        Ok(MariaProcs { conn, calls })
    }

    /// One CALL; every result set read; the first column of the first row of the first set.
    fn call(&mut self, k: usize, params: Vec<mysql::Value>) -> DbResult<Option<i64>> {
        use mysql::prelude::Queryable;
        let mut res = self
            .conn
            .exec_iter(&self.calls[k], mysql::Params::Positional(params))
            .map_err(mysql_err)?;
        let mut first = None;
        while let Some(set) = res.iter() {
            for row in set {
                let row = row.map_err(mysql_err)?;
                if first.is_none() {
                    first = Some(row.get::<Option<i64>, _>(0).flatten().unwrap_or(0));
                }
            }
        }
        Ok(first)
    }
}

fn mv<T: Into<mysql::Value>>(x: T) -> mysql::Value {
    x.into()
}

/// The CALL's parameters: New-Order's lines as their count and three comma-separated lists.
fn maria_params(args: &[Arg]) -> Vec<mysql::Value> {
    args.iter()
        .map(|a| match *a {
            Arg::Id(x) | Arg::Count(x) => mv(x),
            Arg::Int(x) => mv(x),
            Arg::Big(x) => mv(x),
            Arg::Name(x) => mv(x.clone()),
            Arg::Column(lines, k) => mv(list(column(lines, k))),
        })
        .collect()
}

impl WholeTxn for MariaProcs {
    fn once(&mut self, input: &Input, now: i64) -> DbResult<Outcome> {
        let (k, params) = call_args(input, now, |k, args| (k, maria_params(args)));
        let first = self.call(k, params)?;
        Ok(if k == 0 && first == Some(1) {
            Outcome::RolledBack
        } else {
            Outcome::Committed
        })
    }
}

/// A virtual user calling PostgreSQL's functions: one statement per transaction.
pub struct PgProcs {
    pub conn: postgres::Client,
    calls: Vec<postgres::Statement>,
}

impl PgProcs {
    pub fn new(mut conn: postgres::Client) -> Result<Self> {
        let calls = [
            "SELECT tpcc_neword($1, $2, $3, $4, $5, $6, $7)",
            "SELECT tpcc_payment($1, $2, $3, $4, $5, $6, $7, $8)",
            "SELECT tpcc_delivery($1, $2, $3)",
            "SELECT tpcc_slev($1, $2, $3)",
            "SELECT * FROM tpcc_ostat($1, $2, $3, $4)",
        ]
        .iter()
        .map(|s| conn.prepare(s))
        .collect::<std::result::Result<Vec<_>, _>>()
        .context("cannot prepare the calls of the TPC-C functions (were they created?)")?;
        Ok(PgProcs { conn, calls })
    }
}

/// An argument as PostgreSQL's functions take it: ids as INT, New-Order's lines as INT arrays.
impl postgres::types::ToSql for Arg<'_> {
    fn to_sql(
        &self,
        ty: &postgres::types::Type,
        out: &mut bytes::BytesMut,
    ) -> std::result::Result<postgres::types::IsNull, Box<dyn std::error::Error + Sync + Send>>
    {
        match *self {
            Arg::Id(x) | Arg::Count(x) => (x as i32).to_sql_checked(ty, out),
            Arg::Int(x) => x.to_sql_checked(ty, out),
            Arg::Big(x) => x.to_sql_checked(ty, out),
            Arg::Name(x) => x.to_sql_checked(ty, out),
            Arg::Column(lines, k) => column(lines, k)
                .map(|x| x as i32)
                .collect::<Vec<i32>>()
                .to_sql_checked(ty, out),
        }
    }
    fn accepts(_ty: &postgres::types::Type) -> bool {
        true
    }
    postgres::types::to_sql_checked!();
}

/// The most arguments a TPC-C function takes (Payment's).
const MAX_ARGS: usize = 8;

impl WholeTxn for PgProcs {
    fn once(&mut self, input: &Input, now: i64) -> DbResult<Outcome> {
        let r = call_args(input, now, |k, args| {
            const UNUSED: &(dyn postgres::types::ToSql + Sync) = &0i32;
            let mut params: [&(dyn postgres::types::ToSql + Sync); MAX_ARGS] = [UNUSED; MAX_ARGS];
            let mut n = 0;
            for a in args.iter().filter(|a| !matches!(a, Arg::Count(_))) {
                params[n] = a;
                n += 1;
            }
            self.conn.query(&self.calls[k], &params[..n])
        });
        match r {
            Ok(rows) => {
                std::hint::black_box(rows);
                Ok(Outcome::Committed)
            }
            Err(e) if e.code().map(|c| c.code()) == Some(ROLLBACK_STATE) => Ok(Outcome::RolledBack),
            Err(e) => Err(pg_err(e)),
        }
    }
}
