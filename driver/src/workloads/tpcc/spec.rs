//! What a TPC-C run is asked for (`TpccSpec`): the transactions and their mix, how the client
//! drives the database (`Mode`), the warehouses, the seed.

use serde::Serialize;

/// The five transactions, by the names the events give them; the indices below are theirs.
pub const TXNS: [&str; 5] = ["neword", "payment", "delivery", "slev", "ostat"];
pub(super) const NEWORD: usize = 0;
pub(super) const PAYMENT: usize = 1;
pub(super) const DELIVERY: usize = 2;
pub(super) const SLEV: usize = 3;
pub(super) const OSTAT: usize = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Mix {
    /// 45/43/4/4/4 (New-Order, Payment, Delivery, Stock-Level, Order-Status)
    Spec,
    /// HammerDB's 10/10/1/1/1 out of 23
    Hammerdb,
}

/// How the client drives the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// row at a time through `TpccTx` (the key-value engines' only way; SQL engines too)
    Rows,
    /// prepared statements, set-based where the specification allows, fewest round trips
    Statements,
    /// one CALL per transaction, the work inside the server (HammerDB's default)
    Procedures,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Rows => "rows",
            Mode::Statements => "statements",
            Mode::Procedures => "procedures",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct TpccSpec {
    pub warehouses: u32,
    pub mix: Mix,
    pub mode: Mode,
    /// each virtual user picks a random warehouse per transaction instead of its home one
    pub all_warehouses: bool,
    /// the spec's keying and think times (off in HammerDB's default)
    pub think: bool,
    pub seed: u64,
    pub max_retries: u64,
}
