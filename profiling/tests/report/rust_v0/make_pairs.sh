#!/bin/sh
# SPDX-License-Identifier: MIT
# Renews v0_pairs.tsv and crafted.tsv, the reference pairs of test_demangle_v0.c: real
# Rust v0 linkage names and their human names as rustc-demangle (the
# demangler of rustc's own tools) prints them in its alternate form.
#
# The names come from samples.rs built with v0 mangling (optimized and
# not: different instantiations survive) and from the generator itself
# (its std, core, alloc and rustc-demangle frames, also v0). Needs rustc,
# cargo and nm; the rustc-demangle crate comes from the registry at the
# version Cargo.lock pins. Run by hand: ./make_pairs.sh
set -eu
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export CARGO_TARGET_DIR="$work/target"
export RUSTFLAGS="-Csymbol-mangling-version=v0"
cargo build --quiet --release --locked --manifest-path "$here/Cargo.toml"
gen="$CARGO_TARGET_DIR/release/v0-pairs"
rustc -C symbol-mangling-version=v0 -O -g "$here/samples.rs" -o "$work/samples-opt"
rustc -C symbol-mangling-version=v0 -g "$here/samples.rs" -o "$work/samples-dbg"
for f in "$work/samples-opt" "$work/samples-dbg" "$gen"; do
    nm "$f" | awk '{print $NF}'
done | grep '^_R' | LC_ALL=C sort -u | "$gen" > "$here/v0_pairs.tsv"
# crafted.txt: names written by hand for what real code rarely mangles
# (constants of every kind, fn pointers, binders, Punycode) and names to
# refuse; their human names come from rustc-demangle all the same.
"$gen" < "$here/crafted.txt" > "$here/crafted.tsv"
wc -l "$here/v0_pairs.tsv" "$here/crafted.tsv"
