// SPDX-License-Identifier: MIT
// Rust code whose v0 symbols cover the grammar: generic functions and
// types, trait impls (inherent and `<T as Trait>`), closures, shims,
// dyn traits with associated types and lifetimes, fn pointers with ABIs
// and binders, references, raw pointers, arrays with const lengths,
// slices, tuples, const generics (integers, signed, bool, char), and
// non-ASCII (punycode) identifiers. Built by make_pairs.sh with
// -Csymbol-mangling-version=v0; its `nm` feeds the reference pairs.
#![allow(
    dead_code,
    non_snake_case,
    uncommon_codepoints,
    mixed_script_confusables
)]
use std::collections::{BTreeMap, HashMap};
use std::fmt::Debug;
use std::hint::black_box;

pub struct Store<T> {
    items: Vec<T>,
}

impl<T: Clone + Debug> Store<T> {
    #[inline(never)]
    pub fn remember(&mut self, t: &T) {
        self.items.push(t.clone());
    }
}

pub trait Shape {
    fn area(&self) -> f64;
}

pub struct Square(f64);
pub struct Wrapper<T, const N: usize>([T; N]);

impl Shape for Square {
    #[inline(never)]
    fn area(&self) -> f64 {
        self.0 * self.0
    }
}

impl<T: Copy + Into<f64>, const N: usize> Shape for Wrapper<T, N> {
    #[inline(never)]
    fn area(&self) -> f64 {
        self.0.iter().map(|x| (*x).into()).sum()
    }
}

pub struct Flags<const B: bool, const C: char, const I: i32>;
impl<const B: bool, const C: char, const I: i32> Flags<B, C, I> {
    #[inline(never)]
    pub fn show(&self) -> String {
        format!("{}{}{}", B, C, I)
    }
}

pub trait Visitor<'a> {
    type Out;
    fn visit(&self, s: &'a str) -> Self::Out;
}

pub struct Len;
impl<'a> Visitor<'a> for Len {
    type Out = usize;
    fn visit(&self, s: &'a str) -> usize {
        s.len()
    }
}

#[inline(never)]
pub fn use_dyn(v: &dyn for<'a> Visitor<'a, Out = usize>, s: &str) -> usize {
    v.visit(s)
}

#[inline(never)]
pub fn use_boxed(f: Box<dyn Fn(&str) -> usize + Send + Sync>) -> usize {
    f("hello")
}

#[inline(never)]
pub fn take_fn_ptr(f: for<'a> fn(&'a [u8], *const i8, *mut u16) -> &'a [u8]) -> usize {
    f(&[1, 2, 3], std::ptr::null(), std::ptr::null_mut()).len()
}

pub extern "C" fn c_callback(x: i32) -> i32 {
    x + 1
}

#[inline(never)]
pub fn take_c_fn(f: unsafe extern "C" fn(i32) -> i32) -> i32 {
    unsafe { f(1) }
}

#[inline(never)]
pub fn generic_tuple<A: Debug, B: Debug>(t: (A, B), single: (u8,), unit: ()) -> String {
    format!("{:?}{:?}{:?}", t, single, unit)
}

#[inline(never)]
pub fn arrays<const N: usize>(a: [i64; N], s: &mut [u128]) -> i64 {
    s.iter_mut().for_each(|x| *x += 1);
    a.iter().sum()
}

pub mod größe {
    #[inline(never)]
    pub fn 计算(x: u32) -> u32 {
        x.wrapping_mul(3)
    }
    pub struct Über;
    impl Über {
        #[inline(never)]
        pub fn zählen(&self) -> usize {
            7
        }
    }
}

fn first<'a>(xs: &'a [&'a str]) -> &'a str {
    xs[0]
}

#[inline(never)]
fn closures() -> usize {
    let mut total = 0usize;
    let v: Vec<usize> = (0..black_box(10)).collect();
    v.iter().for_each(|x| total += *x);
    let add = move |y: usize| y + total;
    let nested = |z: usize| (0..z).map(|w| add(w)).sum::<usize>();
    nested(black_box(4))
}

#[inline(never)]
fn maps() -> usize {
    let mut m: HashMap<String, Vec<(u8, i16)>> = HashMap::new();
    m.insert("a".into(), vec![(1, -1)]);
    let mut b: BTreeMap<u64, Box<[f32]>> = BTreeMap::new();
    b.insert(1, vec![1.0f32].into_boxed_slice());
    m.len() + b.len()
}

fn never_returns() -> ! {
    std::process::exit(0)
}

fn main() {
    let mut s = Store { items: Vec::new() };
    s.remember(&String::from("x"));
    let mut s2 = Store { items: Vec::new() };
    s2.remember(&(1u8, 'c'));
    let shapes: Vec<Box<dyn Shape>> = vec![
        Box::new(Square(2.0)),
        Box::new(Wrapper::<f32, 3>([1.0, 2.0, 3.0])),
        Box::new(Wrapper::<u8, 0>([])),
    ];
    let area: f64 = shapes.iter().map(|s| s.area()).sum();
    let f1 = Flags::<true, 'x', -5>.show();
    let f2 = Flags::<false, 'ü', 300000>.show();
    let n =
        use_dyn(&Len, "abc") + use_boxed(Box::new(|s: &str| s.len())) + take_fn_ptr(|a, _, _| a);
    let c = take_c_fn(c_callback);
    let g =
        generic_tuple((1i8, "s"), (2,), ()) + &generic_tuple((vec![1u64], Some(2.5f64)), (3,), ());
    let mut big = [1u128, 2];
    let a = arrays([1i64, 2, 3], &mut big) + arrays([5i64; 17], &mut []);
    let u = größe::计算(black_box(2)) as usize + größe::Über.zählen();
    let fst = first(&["a", "b"]);
    let t = std::thread::spawn(move || closures() + maps())
        .join()
        .unwrap();
    println!(
        "{} {} {} {} {} {} {} {} {} {}",
        area, f1, f2, n, c, g, a, u, fst, t
    );
    if black_box(false) {
        never_returns();
    }
}
