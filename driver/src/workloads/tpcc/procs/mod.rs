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

mod maria;
mod pg;
mod text;

pub use maria::create_mariadb;
pub use pg::create_postgres;

use anyhow::Result;

use super::input::Input;
use super::traits::{Outcome, WholeTxn};
use crate::engines::DbResult;
use crate::sql::mariadb::Calls;
use crate::sql::postgres::{pg_err, Calls as PgCalls};

/// The rollback New-Order asks for (PostgreSQL).
const ROLLBACK_STATE: &str = "TPCRB";

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
        Input::Payment(p) => call(
            1,
            &[
                Id(p.w),
                Id(p.d),
                Id(p.c_w),
                Id(p.c_d),
                Id(p.c_id),
                Name(&p.by_name),
                Big(p.amount),
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
pub struct MariaProcs(Calls);

impl MariaProcs {
    pub fn new(conn: mysql::Conn) -> Result<Self> {
        let calls = [
            "CALL tpcc_neword(?, ?, ?, ?, ?, ?, ?, ?)",
            "CALL tpcc_payment(?, ?, ?, ?, ?, ?, ?, ?)",
            "CALL tpcc_delivery(?, ?, ?)",
            "CALL tpcc_slev(?, ?, ?)",
            "CALL tpcc_ostat(?, ?, ?, ?)",
        ];
        Ok(MariaProcs(Calls::prepare(
            conn,
            &calls,
            "the TPC-C procedures",
        )?))
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
        let first = self.0.call(k, params)?;
        Ok(if k == 0 && first == Some(1) {
            Outcome::RolledBack
        } else {
            Outcome::Committed
        })
    }
}

/// A virtual user calling PostgreSQL's functions: one statement per transaction.
pub struct PgProcs(PgCalls);

impl PgProcs {
    pub fn new(conn: postgres::Client) -> Result<Self> {
        let calls = [
            "SELECT tpcc_neword($1, $2, $3, $4, $5, $6, $7)",
            "SELECT tpcc_payment($1, $2, $3, $4, $5, $6, $7, $8)",
            "SELECT tpcc_delivery($1, $2, $3)",
            "SELECT tpcc_slev($1, $2, $3)",
            "SELECT * FROM tpcc_ostat($1, $2, $3, $4)",
        ];
        Ok(PgProcs(PgCalls::prepare(
            conn,
            &calls,
            "the TPC-C functions",
        )?))
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
            self.0.query(k, &params[..n])
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
