// SPDX-License-Identifier: MIT
//! Test support: a minimal decoder of the pprof wire format (profile.proto),
//! written here independently of the C encoder, and the estimator's
//! variance-derived tolerance.
#![allow(dead_code)]

pub mod standin;

use std::collections::HashMap;
use std::sync::Mutex;

/// One session at a time per test binary (the process recorder is one).
pub static SESSION: Mutex<()> = Mutex::new(());

pub fn session_lock() -> std::sync::MutexGuard<'static, ()> {
    SESSION.lock().unwrap_or_else(|e| e.into_inner())
}

#[derive(Default, Debug)]
pub struct Sample {
    pub locations: Vec<u64>,
    pub values: Vec<i64>,
    pub labels: Vec<(String, String, i64)>,
}

#[derive(Default, Debug)]
pub struct Profile {
    pub sample_types: Vec<(String, String)>,
    pub samples: Vec<Sample>,
    locations: HashMap<u64, Vec<u64>>,
    functions: HashMap<u64, (i64, i64)>,
    pub strings: Vec<String>,
    pub comments: Vec<String>,
}

struct Reader<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> u64 {
        let mut v = 0u64;
        let mut shift = 0;
        loop {
            let byte = self.b[self.i];
            self.i += 1;
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return v;
            }
            shift += 7;
        }
    }
    fn done(&self) -> bool {
        self.i >= self.b.len()
    }
    /// (field, wire type, varint value or bytes)
    fn field(&mut self) -> (u64, Field<'a>) {
        let key = self.varint();
        let f = match key & 7 {
            0 => Field::Varint(self.varint()),
            2 => {
                let n = self.varint() as usize;
                let s = &self.b[self.i..self.i + n];
                self.i += n;
                Field::Bytes(s)
            }
            1 => {
                self.i += 8;
                Field::Varint(0)
            }
            5 => {
                self.i += 4;
                Field::Varint(0)
            }
            w => panic!("wire type {w}"),
        };
        (key >> 3, f)
    }
}

enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

fn fields(b: &[u8]) -> Vec<(u64, Field<'_>)> {
    let mut r = Reader { b, i: 0 };
    let mut out = Vec::new();
    while !r.done() {
        out.push(r.field());
    }
    out
}

fn ints(f: &Field<'_>) -> Vec<u64> {
    match f {
        Field::Varint(v) => vec![*v],
        Field::Bytes(b) => {
            let mut r = Reader { b, i: 0 };
            let mut v = Vec::new();
            while !r.done() {
                v.push(r.varint());
            }
            v
        }
    }
}

fn int(f: &Field<'_>) -> u64 {
    match f {
        Field::Varint(v) => *v,
        Field::Bytes(_) => panic!("bytes where an integer was expected"),
    }
}

fn bytes<'a>(f: &Field<'a>) -> &'a [u8] {
    match f {
        Field::Bytes(b) => b,
        Field::Varint(_) => panic!("integer where bytes were expected"),
    }
}

impl Profile {
    pub fn decode(b: &[u8]) -> Profile {
        let mut p = Profile::default();
        let mut types = Vec::new();
        let mut labels_raw = Vec::new();
        let mut comments = Vec::new();
        for (n, f) in fields(b) {
            match n {
                1 => {
                    let mut t = (0, 0);
                    for (m, g) in fields(bytes(&f)) {
                        match m {
                            1 => t.0 = int(&g),
                            2 => t.1 = int(&g),
                            _ => {}
                        }
                    }
                    types.push(t);
                }
                2 => {
                    let mut s = Sample::default();
                    let mut ls = Vec::new();
                    for (m, g) in fields(bytes(&f)) {
                        match m {
                            1 => s.locations.extend(ints(&g)),
                            2 => s.values.extend(ints(&g).into_iter().map(|v| v as i64)),
                            3 => {
                                let mut l = (0u64, 0u64, 0i64);
                                for (k, h) in fields(bytes(&g)) {
                                    match k {
                                        1 => l.0 = int(&h),
                                        2 => l.1 = int(&h),
                                        3 => l.2 = int(&h) as i64,
                                        _ => {}
                                    }
                                }
                                ls.push(l);
                            }
                            _ => {}
                        }
                    }
                    labels_raw.push(ls);
                    p.samples.push(s);
                }
                4 => {
                    let (mut id, mut fns) = (0, Vec::new());
                    for (m, g) in fields(bytes(&f)) {
                        match m {
                            1 => id = int(&g),
                            4 => {
                                for (k, h) in fields(bytes(&g)) {
                                    if k == 1 {
                                        fns.push(int(&h));
                                    }
                                }
                            }
                            _ => {}
                        }
                    }
                    p.locations.insert(id, fns);
                }
                5 => {
                    let (mut id, mut name, mut sys) = (0, 0, 0);
                    for (m, g) in fields(bytes(&f)) {
                        match m {
                            1 => id = int(&g),
                            2 => name = int(&g) as i64,
                            3 => sys = int(&g) as i64,
                            _ => {}
                        }
                    }
                    p.functions.insert(id, (name, sys));
                }
                6 => p
                    .strings
                    .push(String::from_utf8_lossy(bytes(&f)).into_owned()),
                13 => comments.extend(ints(&f)),
                _ => {}
            }
        }
        let s = |i: u64| p.strings.get(i as usize).cloned().unwrap_or_default();
        p.sample_types = types.iter().map(|&(t, u)| (s(t), s(u))).collect();
        p.comments = comments.iter().map(|&i| s(i)).collect();
        for (sample, ls) in p.samples.iter_mut().zip(labels_raw) {
            sample.labels = ls.into_iter().map(|(k, v, n)| (s(k), s(v), n)).collect();
        }
        p
    }

    /// Function names (and linkage names) of a sample's frames, innermost first.
    pub fn frames(&self, s: &Sample) -> Vec<String> {
        let mut out = Vec::new();
        for l in &s.locations {
            for f in self.locations.get(l).into_iter().flatten() {
                if let Some(&(n, sys)) = self.functions.get(f) {
                    let name = &self.strings[n as usize];
                    let sys = &self.strings[sys as usize];
                    out.push(format!("{name} {sys}"));
                }
            }
        }
        out
    }

    pub fn column(&self, name: &str) -> usize {
        self.sample_types
            .iter()
            .position(|(t, _)| t == name)
            .unwrap_or_else(|| panic!("no sample type {name}: {:?}", self.sample_types))
    }

    /// Sum of `column` over the samples one of whose frames contains `frame`.
    pub fn sum(&self, column: &str, frame: &str) -> i64 {
        let c = self.column(column);
        self.samples
            .iter()
            .filter(|s| self.frames(s).iter().any(|f| f.contains(frame)))
            .map(|s| s.values[c])
            .sum()
    }
}

/// The estimator's standard deviation for `n` objects of `size` bytes at
/// mean interval `interval`: each is sampled with p = 1 - exp(-S/R) and
/// stands for 1/p, so the estimate of n has variance n (1 - p) / p.
pub fn sd_objects(n: f64, size: f64, interval: f64) -> f64 {
    let p = 1.0 - (-size / interval).exp();
    (n * (1.0 - p) / p).sqrt()
}

/// Asserts |estimate - n| <= 5 sd (+1 for the encoder's rounding).
pub fn assert_within(what: &str, estimate: i64, n: f64, sd: f64) {
    let tol = 5.0 * sd + 1.0;
    let diff = (estimate as f64 - n).abs();
    assert!(
        diff <= tol,
        "{what}: estimate {estimate}, true {n}, off by {diff:.0} > 5 sd = {tol:.0}"
    );
    eprintln!("{what}: estimate {estimate}, true {n}, off by {diff:.0} (5 sd = {tol:.0})");
}
