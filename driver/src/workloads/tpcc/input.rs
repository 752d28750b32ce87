//! TPC-C's transaction inputs, drawn by each virtual user as clauses 2.4.1 - 2.8.1 say (the
//! mix, NURand keys, remote warehouses, by-name lookups, New-Order's 1 % rollbacks), with the
//! keying and think times of clause 5.2.5; and `sample`, which counts draws without a database.

use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use super::rows::*;
use super::spec::{Mix, TpccSpec, DELIVERY, NEWORD, OSTAT, PAYMENT, SLEV, TXNS};

/// The inputs of one transaction, drawn as clauses 2.4.1 - 2.8.1 say. Drawing is kept apart
/// from executing, so that the draws can be checked on their own (`tpcc-sample`).
#[derive(Debug, Clone)]
pub enum Input {
    NewOrder {
        w: u32,
        d: u32,
        c: u32,
        lines: Vec<(u32, u32, u32)>,
        rollback: bool,
    },
    Payment(Payment),
    OrderStatus {
        w: u32,
        d: u32,
        by_name: Option<String>,
        c_id: u32,
    },
    Delivery {
        w: u32,
        carrier: u32,
    },
    StockLevel {
        w: u32,
        d: u32,
        threshold: i32,
    },
}

/// Payment's inputs: paid at warehouse `w`, district `d`, by the customer of warehouse `c_w` and
/// district `c_d` (remote in 15 %) named by last name (60 %) or by id, `amount` in cents.
#[derive(Debug, Clone)]
pub struct Payment {
    pub w: u32,
    pub d: u32,
    pub c_w: u32,
    pub c_d: u32,
    pub by_name: Option<String>,
    pub c_id: u32,
    pub amount: i64,
}

/// One virtual user's source of inputs.
pub struct InputGen {
    rng: SmallRng,
    home_w: u32,
    home_d: u32,
    spec: TpccSpec,
    c: Constants,
}

impl InputGen {
    pub fn new(spec: &TpccSpec, c: Constants, thread: usize) -> Self {
        InputGen {
            rng: SmallRng::seed_from_u64(
                spec.seed ^ (thread as u64 + 1).wrapping_mul(0xA24BAED4963EE407),
            ),
            home_w: (thread as u32 % spec.warehouses) + 1,
            home_d: (thread as u32 / spec.warehouses % DISTRICTS) + 1,
            spec: spec.clone(),
            c,
        }
    }

    fn pick(&mut self) -> usize {
        match self.spec.mix {
            Mix::Spec => match self.rng.gen_range(0..100) {
                0..=44 => NEWORD,
                45..=87 => PAYMENT,
                88..=91 => DELIVERY,
                92..=95 => SLEV,
                _ => OSTAT,
            },
            Mix::Hammerdb => match self.rng.gen_range(1..=23) {
                1..=10 => NEWORD,
                11..=20 => PAYMENT,
                21 => DELIVERY,
                22 => SLEV,
                _ => OSTAT,
            },
        }
    }

    fn w(&mut self) -> u32 {
        if self.spec.all_warehouses {
            self.rng.gen_range(1..=self.spec.warehouses)
        } else {
            self.home_w
        }
    }

    fn other_w(&mut self, w: u32) -> u32 {
        if self.spec.warehouses == 1 {
            return w;
        }
        loop {
            let x = self.rng.gen_range(1..=self.spec.warehouses);
            if x != w {
                return x;
            }
        }
    }

    fn customer_by_name_or_id(&mut self) -> (Option<String>, u32) {
        if self.rng.gen_range(1..=100) <= 60 {
            (
                Some(last_name(nurand(&mut self.rng, 255, self.c.c_last, 0, 999))),
                0,
            )
        } else {
            (None, nurand(&mut self.rng, 1023, self.c.c_id, 1, CUSTOMERS))
        }
    }

    pub fn next(&mut self) -> (usize, Input) {
        let op = self.pick();
        let input = match op {
            NEWORD => {
                let w = self.w();
                let d = self.rng.gen_range(1..=DISTRICTS);
                let c = nurand(&mut self.rng, 1023, self.c.c_id, 1, CUSTOMERS);
                let ol_cnt = self.rng.gen_range(5..=15u32);
                let rollback = self.rng.gen_range(1..=100) == 1;
                let mut lines = Vec::with_capacity(ol_cnt as usize);
                for n in 1..=ol_cnt {
                    let i = if rollback && n == ol_cnt {
                        ITEMS + 1
                    } else {
                        nurand(&mut self.rng, 8191, self.c.ol_i_id, 1, ITEMS)
                    };
                    let remote = self.spec.warehouses > 1 && self.rng.gen_range(1..=100) == 1;
                    let supply = if remote { self.other_w(w) } else { w };
                    lines.push((i, supply, self.rng.gen_range(1..=10u32)));
                }
                Input::NewOrder {
                    w,
                    d,
                    c,
                    lines,
                    rollback,
                }
            }
            PAYMENT => {
                let w = self.w();
                let d = self.rng.gen_range(1..=DISTRICTS);
                let (c_w, c_d) = if self.spec.warehouses > 1 && self.rng.gen_range(1..=100) > 85 {
                    (self.other_w(w), self.rng.gen_range(1..=DISTRICTS))
                } else {
                    (w, d)
                };
                let (by_name, c_id) = self.customer_by_name_or_id();
                Input::Payment(Payment {
                    w,
                    d,
                    c_w,
                    c_d,
                    by_name,
                    c_id,
                    amount: self.rng.gen_range(100..=500_000i64),
                })
            }
            OSTAT => {
                let w = self.w();
                let d = self.rng.gen_range(1..=DISTRICTS);
                let (by_name, c_id) = self.customer_by_name_or_id();
                Input::OrderStatus {
                    w,
                    d,
                    by_name,
                    c_id,
                }
            }
            DELIVERY => Input::Delivery {
                w: self.w(),
                carrier: self.rng.gen_range(1..=10u32),
            },
            _ => Input::StockLevel {
                w: self.home_w,
                d: self.home_d,
                threshold: self.rng.gen_range(10..=20),
            },
        };
        (op, input)
    }

    pub(super) fn think(&mut self, op: usize) {
        if !self.spec.think {
            return;
        }
        // keying times (clause 5.2.5.7) and mean think times (clause 5.2.5.4)
        let (keying, think_mean) = [
            (18.0, 12.0),
            (3.0, 12.0),
            (2.0, 5.0),
            (2.0, 5.0),
            (2.0, 10.0),
        ][op];
        let u: f64 = self.rng.gen_range(f64::EPSILON..1.0);
        let think = (-u.ln() * think_mean).min(think_mean * 10.0);
        std::thread::sleep(Duration::from_secs_f64(keying + think));
    }
}

/// Counts over `n` drawn inputs, for checking the draws against the specification's rates.
pub fn sample(spec: &TpccSpec, n: u64, vus: usize) -> serde_json::Value {
    let c = Constants::random(&mut SmallRng::seed_from_u64(spec.seed));
    let mut gens: Vec<InputGen> = (0..vus.max(1)).map(|t| InputGen::new(spec, c, t)).collect();
    let mut by_type = [0u64; 5];
    let (mut rollbacks, mut lines, mut remote_lines) = (0u64, 0u64, 0u64);
    let (mut payments_remote, mut payments_by_name, mut ostat_by_name) = (0u64, 0u64, 0u64);
    for k in 0..n {
        let vu = (k as usize) % gens.len();
        let (op, input) = gens[vu].next();
        by_type[op] += 1;
        match input {
            Input::NewOrder {
                w,
                lines: l,
                rollback,
                ..
            } => {
                rollbacks += rollback as u64;
                lines += l.len() as u64;
                remote_lines += l.iter().filter(|x| x.1 != w).count() as u64;
            }
            Input::Payment(p) => {
                payments_remote += (p.c_w != p.w) as u64;
                payments_by_name += p.by_name.is_some() as u64;
            }
            Input::OrderStatus { by_name, .. } => ostat_by_name += by_name.is_some() as u64,
            _ => {}
        }
    }
    json!({
        "transactions": n,
        "by_type": TXNS.iter().zip(by_type).map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
        "new_order_rollbacks": rollbacks,
        "order_lines": lines,
        "remote_order_lines": remote_lines,
        "payments_remote": payments_remote,
        "payments_by_name": payments_by_name,
        "order_status_by_name": ostat_by_name,
    })
}
