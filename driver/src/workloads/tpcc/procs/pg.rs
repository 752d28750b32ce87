//! TPC-C's five transactions as PostgreSQL functions (the text, and creating them).

use anyhow::Result;

use super::text::{create, Language};
use crate::sql::Server;

/// The five functions in PL/pgSQL.
pub(super) const POSTGRES: Language = Language {
    new_order: r"CREATE OR REPLACE FUNCTION tpcc_neword(p_w INT, p_d INT, p_c INT, p_items INT[], p_supply INT[],
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
    payment: r"CREATE OR REPLACE FUNCTION tpcc_payment(p_w INT, p_d INT, p_c_w INT, p_c_d INT, p_c INT, p_last VARCHAR(16),
    p_amount BIGINT, p_now BIGINT) RETURNS INT LANGUAGE plpgsql AS $$
DECLARE
  v_c INT; v_n INT; v_w_name VARCHAR(10); v_d_name VARCHAR(10); v_credit CHAR(2);
BEGIN
  UPDATE warehouse SET w_ytd = w_ytd + p_amount WHERE w_id = p_w RETURNING w_name INTO v_w_name;
  UPDATE district SET d_ytd = d_ytd + p_amount WHERE d_w_id = p_w AND d_id = p_d RETURNING d_name INTO v_d_name;
  {customer}
  {update}
  INSERT INTO history VALUES (v_c, p_c_d, p_c_w, p_d, p_w, p_now, p_amount, v_w_name || '    ' || v_d_name);
  RETURN 0;
END $$",
    c_data: r"LEFT(v_c || ' ' || p_c_d || ' ' || p_c_w || ' ' || p_d || ' ' || p_w || ' '
                  || to_char(p_amount / 100.0, 'FM9999999990.00') || '|' || c_data, 500)",
    delivery: r"CREATE OR REPLACE FUNCTION tpcc_delivery(p_w INT, p_carrier INT, p_now BIGINT) RETURNS INT
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
    {delivered}
  END LOOP;
  RETURN 0;
END $$",
    stock_level: r"CREATE OR REPLACE FUNCTION tpcc_slev(p_w INT, p_d INT, p_threshold INT) RETURNS INT
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
    order_status: r"CREATE OR REPLACE FUNCTION tpcc_ostat(p_w INT, p_d INT, p_c INT, p_last VARCHAR(16))
    RETURNS TABLE (i_id INT, supply_w_id INT, quantity INT, amount BIGINT, delivery_d BIGINT)
    LANGUAGE plpgsql AS $$
DECLARE
  v_c INT; v_n INT; v_o INT; v_balance BIGINT;
BEGIN
  {customer}
  SELECT c_balance INTO v_balance FROM customer WHERE c_w_id = p_w AND c_d_id = p_d AND c_id = v_c;
  SELECT o_id INTO v_o FROM orders WHERE o_w_id = p_w AND o_d_id = p_d AND o_c_id = v_c
    ORDER BY o_id DESC LIMIT 1;
  IF v_o IS NULL THEN
    RAISE EXCEPTION 'no order of customer % in w% d%, who has one since the load', v_c, p_w, p_d;
  END IF;
  RETURN QUERY SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d FROM order_line
    WHERE ol_w_id = p_w AND ol_d_id = p_d AND ol_o_id = v_o;
END $$",
    customer: r"IF p_last IS NULL THEN
  v_c := p_c;
ELSE
  SELECT COUNT(*) INTO v_n FROM customer WHERE c_w_id = {w} AND c_d_id = {d} AND c_last = p_last;
  IF v_n = 0 THEN
    RAISE EXCEPTION 'no customer named % in w% d%', p_last, {w}, {d};
  END IF;
  SELECT c_id INTO v_c FROM customer WHERE c_w_id = {w} AND c_d_id = {d} AND c_last = p_last
    ORDER BY c_first OFFSET (v_n - 1) / 2 LIMIT 1;
END IF;
",
};

/// Create (or replace) the five functions; an error names the server and the function.
pub fn create_postgres(conn: &mut postgres::Client, server: &Server) -> Result<()> {
    let failed = |name: &str| {
        format!(
            "PostgreSQL in {} cannot create the function {name} (plpgsql and CREATE on the \
             schema are needed for --tpcc-mode procedures; --tpcc-mode statements needs \
             neither)",
            server.socket.display()
        )
    };
    create(&POSTGRES, |text| conn.batch_execute(text), failed)
}
