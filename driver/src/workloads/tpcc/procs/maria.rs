//! TPC-C's five transactions as MariaDB stored procedures (the text, and creating them).

use anyhow::Result;

use super::text::{create, Language};
use crate::sql::Server;

/// The five procedures in MariaDB's language.
pub(super) const MARIADB: Language = Language {
    new_order: r"CREATE OR REPLACE PROCEDURE tpcc_neword(p_w INT, p_d INT, p_c INT, p_cnt INT, p_items VARCHAR(200),
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
    payment: r"CREATE OR REPLACE PROCEDURE tpcc_payment(p_w INT, p_d INT, p_c_w INT, p_c_d INT, p_c INT,
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
  {customer}
  {update}
  INSERT INTO history VALUES (v_c, p_c_d, p_c_w, p_d, p_w, p_now, p_amount, CONCAT(v_w_name, '    ', v_d_name));
  COMMIT;
  SELECT 0 AS rolled_back;
END",
    c_data: r"LEFT(CONCAT(v_c, ' ', p_c_d, ' ', p_c_w, ' ', p_d, ' ', p_w, ' ',
                         CAST(p_amount / 100 AS DECIMAL(12, 2)), '|', c_data), 500)",
    delivery: r"CREATE OR REPLACE PROCEDURE tpcc_delivery(p_w INT, p_carrier INT, p_now BIGINT)
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
      {delivered}
    END IF;
    SET d = d + 1;
  END WHILE;
  COMMIT;
  SELECT 0 AS rolled_back;
END",
    stock_level: r"CREATE OR REPLACE PROCEDURE tpcc_slev(p_w INT, p_d INT, p_threshold INT)
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
    order_status: r"CREATE OR REPLACE PROCEDURE tpcc_ostat(p_w INT, p_d INT, p_c INT, p_last VARCHAR(16))
BEGIN
  DECLARE v_c, v_n, v_o INT;
  DECLARE v_msg VARCHAR(128);
  DECLARE v_balance BIGINT;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  START TRANSACTION READ ONLY;
  {customer}
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
    customer: r"IF p_last IS NULL THEN
  SET v_c = p_c;
ELSE
  SELECT COUNT(*) INTO v_n FROM customer WHERE c_w_id = {w} AND c_d_id = {d} AND c_last = p_last;
  IF v_n = 0 THEN
    SET v_msg = CONCAT('no customer named ', p_last, ' in w', {w}, ' d', {d});
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg;
  END IF;
  SET v_n = (v_n - 1) DIV 2;
  SELECT c_id INTO v_c FROM customer WHERE c_w_id = {w} AND c_d_id = {d} AND c_last = p_last
    ORDER BY c_first LIMIT v_n, 1;
END IF;
",
};

/// Create (or replace) the five procedures; an error names the server and the procedure.
pub fn create_mariadb(conn: &mut mysql::Conn, server: &Server) -> Result<()> {
    use mysql::prelude::Queryable;
    let failed = |name: &str| {
        format!(
            "MariaDB at {} cannot create the stored procedure {name} (stored routines and \
             CREATE ROUTINE are needed for --tpcc-mode procedures; --tpcc-mode statements \
             needs neither)",
            server.socket.display()
        )
    };
    create(&MARIADB, |text| conn.query_drop(text), failed)
}
