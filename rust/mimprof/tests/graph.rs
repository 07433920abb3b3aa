// SPDX-License-Identifier: MIT
//! The resolved dependency graph (as the release tooling checks the C
//! one): a program that only sets the allocator pulls in mimprof-sys and
//! the provider, nothing of Pyroscope or of an encoder; the pyroscope
//! feature adds no crate (the C adapter does the work).

use std::collections::BTreeSet;
use std::process::Command;

fn graph(features: &str) -> BTreeSet<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(env!("CARGO_MANIFEST_DIR")).args([
        "tree",
        "--offline",
        "-p",
        "mimprof",
        "-e",
        "normal",
        "--prefix",
        "none",
        "--format",
        "{p}",
        "--no-default-features",
    ]);
    if !features.is_empty() {
        cmd.args(["--features", features]);
    }
    let out = cmd.output().expect("cargo tree");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

fn names(v: &[&str]) -> BTreeSet<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn allocator_only_graph_is_mimprof_sys() {
    assert_eq!(graph(""), names(&["mimprof", "mimprof-sys"]));
    assert_eq!(graph("pyroscope"), names(&["mimprof", "mimprof-sys"]));
}

#[test]
fn mimalloc_feature_adds_only_the_provider() {
    let g = graph("mimalloc");
    let extra: Vec<_> = g
        .iter()
        .filter(|n| {
            ![
                "mimprof",
                "mimprof-sys",
                "mimalloc",
                "libmimalloc-sys",
                "libc",
            ]
            .contains(&n.as_str())
        })
        .collect();
    assert!(extra.is_empty(), "unexpected crates: {extra:?}");
    assert!(g.contains("mimalloc"));
}
