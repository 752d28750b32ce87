//! Each table's row as the values of its SQL columns, both ways, with the statements that read,
//! insert and update it: one codec per table (`SqlRow`; `SqlGet` for a table read by its key,
//! `SqlUpdate` for one TPC-C updates), declared once by the row's fields in its columns' order.
//! `sql_tx` reads and writes every table through them. Statements are written with `?`
//! placeholders; `{lock}` becomes the dialect's row lock.

use super::rows::*;
use crate::sql::V;

/// A row as its table's columns, in their order: read from a SELECT of all of them, written
/// whole by the table's INSERT.
pub(super) trait SqlRow: Sized {
    const INSERT: &'static str;
    fn read(r: &[V]) -> Self;
    /// The INSERT's values, pushed to `out`.
    fn values(&self, out: &mut Vec<V>);
}

/// A row read by its key: the SELECT of all its columns.
pub(super) trait SqlGet: SqlRow {
    const GET: &'static str;
}

/// A row TPC-C updates: its UPDATE and that statement's values (the changed columns, then the
/// key).
pub(super) trait SqlUpdate: SqlRow {
    const UPDATE: &'static str;
    /// The UPDATE's values, pushed to `out`.
    fn changes(&self, out: &mut Vec<V>);
}

/// A field of a row as its column (or, for an address and a stock's district infos, columns).
trait Column: Sized {
    fn read(c: &mut std::slice::Iter<'_, V>) -> Self;
    fn write(&self, out: &mut Vec<V>);
}

fn next<'a>(c: &mut std::slice::Iter<'a, V>) -> &'a V {
    c.next().expect("a column for every field of the row")
}

/// Columns of a plain type: how a value of it is read, and written as `V::from` writes it.
macro_rules! column {
    ($($t:ty: $read:expr;)+) => {$(
        impl Column for $t {
            fn read(c: &mut std::slice::Iter<'_, V>) -> Self {
                $read(next(c))
            }
            fn write(&self, out: &mut Vec<V>) {
                out.push(V::from(self.clone()));
            }
        }
    )+};
}

column! {
    u32: V::u;
    i32: |v: &V| v.i() as i32;
    i64: V::i;
    bool: |v: &V| v.i() != 0;
    String: V::s;
    Option<u32>: V::opt_u;
    Option<i64>: V::opt_i;
}

/// Stock's S_DIST_01 .. S_DIST_10, one per district.
impl Column for Vec<String> {
    fn read(c: &mut std::slice::Iter<'_, V>) -> Self {
        (1..=DISTRICTS).map(|_| String::read(c)).collect()
    }
    fn write(&self, out: &mut Vec<V>) {
        self.iter().for_each(|s| s.write(out));
    }
}

/// A table's codec: `Row [its fields in the columns' order]`, its statements (`get` where it is
/// read by its key; `update` where TPC-C updates it, with the fields its parameters take, in
/// their order). A struct of columns (`Address`) is declared by its fields alone.
macro_rules! sql_row {
    ($t:ident [$($f:ident),+]) => {
        impl Column for $t {
            fn read(c: &mut std::slice::Iter<'_, V>) -> Self {
                $t { $($f: Column::read(c)),+ }
            }
            fn write(&self, out: &mut Vec<V>) {
                $(self.$f.write(out);)+
            }
        }
    };
    ($t:ident [$($f:ident),+]
     $(get $get:literal)?
     insert $insert:literal
     $(update $update:literal [$($u:ident),+])?) => {
        sql_row!($t [$($f),+]);
        impl SqlRow for $t {
            const INSERT: &'static str = $insert;
            fn read(r: &[V]) -> Self {
                Column::read(&mut r.iter())
            }
            fn values(&self, out: &mut Vec<V>) {
                self.write(out);
            }
        }
        $(impl SqlGet for $t {
            const GET: &'static str = $get;
        })?
        $(impl SqlUpdate for $t {
            const UPDATE: &'static str = $update;
            fn changes(&self, out: &mut Vec<V>) {
                $(self.$u.write(out);)+
            }
        })?
    };
}

sql_row!(Address [street_1, street_2, city, state, zip]);
sql_row! {
    Warehouse [w_id, name, address, tax, ytd]
    get "SELECT w_id, w_name, w_street_1, w_street_2, w_city, w_state, w_zip, w_tax, w_ytd FROM warehouse WHERE w_id = ?{lock}"
    insert "INSERT INTO warehouse VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
    update "UPDATE warehouse SET w_ytd = ? WHERE w_id = ?" [ytd, w_id]
}
sql_row! {
    District [w_id, d_id, name, address, tax, ytd, next_o_id]
    get "SELECT d_w_id, d_id, d_name, d_street_1, d_street_2, d_city, d_state, d_zip, d_tax, d_ytd, d_next_o_id FROM district WHERE d_w_id = ? AND d_id = ?{lock}"
    insert "INSERT INTO district VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    update "UPDATE district SET d_ytd = ?, d_next_o_id = ? WHERE d_w_id = ? AND d_id = ?"
        [ytd, next_o_id, w_id, d_id]
}
sql_row! {
    Customer [w_id, d_id, c_id, first, middle, last, address, phone, since, credit, credit_lim,
        discount, balance, ytd_payment, payment_cnt, delivery_cnt, data]
    get "SELECT c_w_id, c_d_id, c_id, c_first, c_middle, c_last, c_street_1, c_street_2, c_city, c_state, c_zip, c_phone, c_since, c_credit, c_credit_lim, c_discount, c_balance, c_ytd_payment, c_payment_cnt, c_delivery_cnt, c_data FROM customer WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?{lock}"
    insert "INSERT INTO customer VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    update "UPDATE customer SET c_balance = ?, c_ytd_payment = ?, c_payment_cnt = ?, c_delivery_cnt = ?, c_data = ? WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?"
        [balance, ytd_payment, payment_cnt, delivery_cnt, data, w_id, d_id, c_id]
}
sql_row! {
    Item [i_id, im_id, name, price, data]
    get "SELECT i_id, i_im_id, i_name, i_price, i_data FROM item WHERE i_id = ?"
    insert "INSERT INTO item VALUES (?, ?, ?, ?, ?)"
}
sql_row! {
    Stock [w_id, i_id, quantity, dist, ytd, order_cnt, remote_cnt, data]
    get "SELECT s_w_id, s_i_id, s_quantity, s_dist_01, s_dist_02, s_dist_03, s_dist_04, s_dist_05, s_dist_06, s_dist_07, s_dist_08, s_dist_09, s_dist_10, s_ytd, s_order_cnt, s_remote_cnt, s_data FROM stock WHERE s_w_id = ? AND s_i_id = ?{lock}"
    insert "INSERT INTO stock VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    update "UPDATE stock SET s_quantity = ?, s_ytd = ?, s_order_cnt = ?, s_remote_cnt = ? WHERE s_w_id = ? AND s_i_id = ?"
        [quantity, ytd, order_cnt, remote_cnt, w_id, i_id]
}
sql_row! {
    Order [w_id, d_id, o_id, c_id, entry_d, carrier_id, ol_cnt, all_local]
    get "SELECT o_w_id, o_d_id, o_id, o_c_id, o_entry_d, o_carrier_id, o_ol_cnt, o_all_local FROM orders WHERE o_w_id = ? AND o_d_id = ? AND o_id = ?{lock}"
    insert "INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
    update "UPDATE orders SET o_carrier_id = ? WHERE o_w_id = ? AND o_d_id = ? AND o_id = ?"
        [carrier_id, w_id, d_id, o_id]
}
sql_row! {
    OrderLine [w_id, d_id, o_id, number, i_id, supply_w_id, delivery_d, quantity, amount, dist_info]
    insert "INSERT INTO order_line VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    update "UPDATE order_line SET ol_delivery_d = ? WHERE ol_w_id = ? AND ol_d_id = ? AND ol_o_id = ? AND ol_number = ?"
        [delivery_d, w_id, d_id, o_id, number]
}
sql_row! {
    History [c_id, c_d_id, c_w_id, d_id, w_id, date, amount, data]
    insert "INSERT INTO history VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
}
