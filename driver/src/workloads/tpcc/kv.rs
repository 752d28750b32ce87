//! TPC-C's nine tables as ordered keys in a key-value engine, with the access paths TPC-C
//! needs kept in the same transaction as the rows:
//!   customers by last name:  c | w | d | last(16) | first(16) | c_id
//!   a customer's orders:     o | w | d | c_id | !o_id      (newest first)
//!   new orders:              N | w | d | o_id              (oldest first)
//! Rows are bincode-encoded.

use anyhow::Result;
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::rows::*;
use super::traits::{missing, TpccDb, TpccTx};
use crate::engines::{DbError, DbResult, Engine, Session};

pub struct TpccKv {
    engine: Box<dyn Engine>,
}

impl TpccKv {
    pub fn new(engine: Box<dyn Engine>) -> Self {
        TpccKv { engine }
    }
}

impl TpccDb for TpccKv {
    fn session(&self) -> Result<Box<dyn TpccTx + '_>> {
        Ok(Box::new(KvTx {
            s: self.engine.session()?,
            history_seq: rand::random::<u64>(),
        }))
    }
}

struct KvTx<'e> {
    s: Box<dyn Session + 'e>,
    history_seq: u64,
}

struct Key(Vec<u8>);

impl Key {
    fn new(table: u8) -> Self {
        Key(vec![table])
    }
    fn u8(mut self, v: u32) -> Self {
        self.0.push(v as u8);
        self
    }
    fn u16(mut self, v: u32) -> Self {
        self.0.extend_from_slice(&(v as u16).to_be_bytes());
        self
    }
    fn u32(mut self, v: u32) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn u64(mut self, v: u64) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn text(mut self, s: &str, width: usize) -> Self {
        let b = s.as_bytes();
        self.0.extend_from_slice(&b[..b.len().min(width)]);
        self.0
            .resize(self.0.len() + width.saturating_sub(b.len()), 0);
        self
    }
}

fn wd(table: u8, w: u32, d: u32) -> Key {
    Key::new(table).u16(w).u8(d)
}

fn enc<T: Serialize>(r: &T) -> DbResult<Vec<u8>> {
    bincode::serialize(r).map_err(|e| DbError::Other(e.into()))
}

fn dec<T: DeserializeOwned>(b: &[u8]) -> DbResult<T> {
    bincode::deserialize(b).map_err(|e| DbError::Other(e.into()))
}

fn tail_u32(key: &[u8]) -> u32 {
    u32::from_be_bytes(key[key.len() - 4..].try_into().expect("4 bytes"))
}

impl KvTx<'_> {
    fn get_row<T: DeserializeOwned>(&mut self, key: Key, what: &str) -> DbResult<T> {
        match self.s.get(&key.0)? {
            Some(v) => dec(&v),
            None => Err(missing(what)),
        }
    }

    fn put_row<T: Serialize>(&mut self, key: Key, row: &T) -> DbResult<()> {
        let v = enc(row)?;
        self.s.put(&key.0, &v)
    }

    /// Keys and values under `prefix`, in key order, at most `limit`.
    fn prefix(&mut self, prefix: &[u8], limit: usize) -> DbResult<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        self.s.scan(prefix, limit, &mut |k, v| {
            if !k.starts_with(prefix) {
                return false;
            }
            out.push((k.to_vec(), v.to_vec()));
            true
        })?;
        out.retain(|(k, _)| k.starts_with(prefix));
        Ok(out)
    }
}

impl TpccTx for KvTx<'_> {
    fn begin(&mut self, write: bool) -> DbResult<()> {
        if write {
            self.s.begin_snapshot()
        } else {
            self.s.begin(false)
        }
    }
    fn commit(&mut self) -> DbResult<()> {
        self.s.commit()
    }
    fn rollback(&mut self) -> DbResult<()> {
        self.s.rollback()
    }
    fn meta(&mut self) -> DbResult<Option<String>> {
        Ok(self
            .s
            .get(b"M")?
            .map(|v| String::from_utf8_lossy(&v).into_owned()))
    }
    fn put_meta(&mut self, text: &str) -> DbResult<()> {
        self.s.put(b"M", text.as_bytes())
    }
    fn warehouse(&mut self, w: u32) -> DbResult<Warehouse> {
        self.get_row(Key::new(b'W').u16(w), "warehouse")
    }
    fn put_warehouse(&mut self, r: &Warehouse, _insert: bool) -> DbResult<()> {
        self.put_row(Key::new(b'W').u16(r.w_id), r)
    }
    fn district(&mut self, w: u32, d: u32) -> DbResult<District> {
        self.get_row(wd(b'D', w, d), "district")
    }
    fn put_district(&mut self, r: &District, _insert: bool) -> DbResult<()> {
        self.put_row(wd(b'D', r.w_id, r.d_id), r)
    }
    fn customer(&mut self, w: u32, d: u32, c: u32) -> DbResult<Customer> {
        self.get_row(wd(b'C', w, d).u32(c), "customer")
    }
    fn put_customer(&mut self, r: &Customer, insert: bool) -> DbResult<()> {
        if insert {
            let idx = wd(b'c', r.w_id, r.d_id)
                .text(&r.last, 16)
                .text(&r.first, 16)
                .u32(r.c_id);
            self.s.put(&idx.0, b"")?;
        }
        self.put_row(wd(b'C', r.w_id, r.d_id).u32(r.c_id), r)
    }
    fn customer_ids_by_last(&mut self, w: u32, d: u32, last: &str) -> DbResult<Vec<u32>> {
        let p = wd(b'c', w, d).text(last, 16);
        Ok(self
            .prefix(&p.0, usize::MAX)?
            .iter()
            .map(|(k, _)| tail_u32(k))
            .collect())
    }
    fn item(&mut self, i: u32) -> DbResult<Option<Item>> {
        self.s
            .get(&Key::new(b'I').u32(i).0)?
            .map(|v| dec(&v))
            .transpose()
    }
    fn put_item(&mut self, r: &Item) -> DbResult<()> {
        self.put_row(Key::new(b'I').u32(r.i_id), r)
    }
    fn stock(&mut self, w: u32, i: u32) -> DbResult<Stock> {
        self.get_row(Key::new(b'S').u16(w).u32(i), "stock")
    }
    fn put_stock(&mut self, r: &Stock, _insert: bool) -> DbResult<()> {
        self.put_row(Key::new(b'S').u16(r.w_id).u32(r.i_id), r)
    }
    fn order(&mut self, w: u32, d: u32, o: u32) -> DbResult<Order> {
        self.get_row(wd(b'O', w, d).u32(o), "order")
    }
    fn put_order(&mut self, r: &Order, insert: bool) -> DbResult<()> {
        if insert {
            let idx = wd(b'o', r.w_id, r.d_id).u32(r.c_id).u32(u32::MAX - r.o_id);
            self.s.put(&idx.0, b"")?;
        }
        self.put_row(wd(b'O', r.w_id, r.d_id).u32(r.o_id), r)
    }
    fn last_order_of(&mut self, w: u32, d: u32, c: u32) -> DbResult<Option<Order>> {
        let p = wd(b'o', w, d).u32(c);
        match self.prefix(&p.0, 1)?.first() {
            Some((k, _)) => Ok(Some(self.order(w, d, u32::MAX - tail_u32(k))?)),
            None => Ok(None),
        }
    }
    fn insert_new_order(&mut self, w: u32, d: u32, o: u32) -> DbResult<()> {
        self.s.put(&wd(b'N', w, d).u32(o).0, b"")
    }
    fn oldest_new_order(&mut self, w: u32, d: u32) -> DbResult<Option<u32>> {
        Ok(self
            .prefix(&wd(b'N', w, d).0, 1)?
            .first()
            .map(|(k, _)| tail_u32(k)))
    }
    fn delete_new_order(&mut self, w: u32, d: u32, o: u32) -> DbResult<()> {
        self.s.delete(&wd(b'N', w, d).u32(o).0)
    }
    fn order_lines(&mut self, w: u32, d: u32, o: u32) -> DbResult<Vec<OrderLine>> {
        self.prefix(&wd(b'L', w, d).u32(o).0, 32)?
            .iter()
            .map(|(_, v)| dec(v))
            .collect()
    }
    fn put_order_line(&mut self, r: &OrderLine, _insert: bool) -> DbResult<()> {
        self.put_row(wd(b'L', r.w_id, r.d_id).u32(r.o_id).u8(r.number), r)
    }
    fn recent_line_items(&mut self, w: u32, d: u32, o_lo: u32, o_hi: u32) -> DbResult<Vec<u32>> {
        let start = wd(b'L', w, d).u32(o_lo);
        let p = wd(b'L', w, d);
        let mut out = Vec::new();
        self.s.scan(&start.0, usize::MAX, &mut |k, v| {
            if !k.starts_with(&p.0) || u32::from_be_bytes(k[4..8].try_into().expect("o_id")) >= o_hi
            {
                return false;
            }
            if let Ok(ol) = bincode::deserialize::<OrderLine>(v) {
                out.push(ol.i_id);
            }
            true
        })?;
        Ok(out)
    }
    fn insert_history(&mut self, r: &History) -> DbResult<()> {
        self.history_seq = self.history_seq.wrapping_add(1);
        self.put_row(
            wd(b'H', r.w_id, r.d_id).u32(r.c_id).u64(self.history_seq),
            r,
        )
    }
    fn district_order_stats(&mut self, w: u32, d: u32) -> DbResult<(u32, u64)> {
        let rows = self.prefix(&wd(b'O', w, d).0, usize::MAX)?;
        let mut max = 0;
        let mut sum = 0u64;
        for (_, v) in rows {
            let o: Order = dec(&v)?;
            max = max.max(o.o_id);
            sum += o.ol_cnt as u64;
        }
        Ok((max, sum))
    }
    fn district_new_order_stats(&mut self, w: u32, d: u32) -> DbResult<(u32, u32, u64)> {
        let ids: Vec<u32> = self
            .prefix(&wd(b'N', w, d).0, usize::MAX)?
            .iter()
            .map(|(k, _)| tail_u32(k))
            .collect();
        Ok((
            ids.iter().copied().min().unwrap_or(0),
            ids.iter().copied().max().unwrap_or(0),
            ids.len() as u64,
        ))
    }
    fn district_order_line_count(&mut self, w: u32, d: u32) -> DbResult<u64> {
        Ok(self.prefix(&wd(b'L', w, d).0, usize::MAX)?.len() as u64)
    }
}
