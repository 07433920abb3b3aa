// SPDX-License-Identifier: MIT
//! Reads linkage names on stdin, one a line; for each Rust v0 name
//! (`_R...`) writes `name<TAB>human`, where human is rustc-demangle's
//! alternate form (`{:#}`: no crate hashes, no const type suffixes) of the
//! name without its `.suffix` (mimprof's naming rule drops clone suffixes
//! such as `.llvm.123` or `.cold`). A name rustc-demangle refuses, or
//! prints with an error mark in it (`{invalid syntax}`, `{recursion limit
//! reached}`, `{size limit reached}`, `?`), gets an empty human: mimprof
//! refuses those whole and keeps the linkage name.
use std::io::{self, BufRead, Write};

fn main() {
    let stdin = io::stdin();
    let mut out = io::BufWriter::new(io::stdout().lock());
    for line in stdin.lock().lines() {
        let name = line.expect("stdin");
        let name = name.trim();
        if !name.starts_with("_R") {
            continue;
        }
        let bare = name.split('.').next().unwrap_or(name);
        let human = match rustc_demangle::try_demangle(bare) {
            Ok(d) => format!("{:#}", d),
            Err(_) => String::new(),
        };
        let marked = [
            "{invalid syntax}",
            "{recursion limit reached}",
            "{size limit reached}",
            "?",
        ]
        .iter()
        .any(|m| human.contains(m));
        let human = if marked { "" } else { human.as_str() };
        writeln!(out, "{}\t{}", name, human).expect("stdout");
    }
}
