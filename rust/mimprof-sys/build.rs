// SPDX-License-Identifier: MIT
//! Finds the C libraries with pkg-config: mimprof-profiling always,
//! mimprof-pyroscope with the `pyroscope` feature. Their versions must be
//! this crate's (the workspace releases them together).

use std::env;
use std::process;

fn probe(package: &str) {
    let version = env!("CARGO_PKG_VERSION");
    match pkg_config::Config::new()
        .exactly_version(version)
        .cargo_metadata(true)
        .probe(package)
    {
        Ok(lib) => {
            // Dependents read these as DEP_MIMPROF_PROFILING_<NAME> (`links`).
            let key = package.trim_start_matches("mimprof-").replace('-', "_");
            for dir in &lib.link_paths {
                println!("cargo:{}_libdir={}", key, dir.display());
            }
        }
        Err(err) => {
            eprintln!(
                "\nerror: mimprof-sys needs the C package `{package}` {version} \
                 (pkg-config could not find it: {err})\n\n\
                 Build and install it from the mimprof source tree (a Meson workspace):\n\
                 \n    meson setup build && ninja -C build && meson install -C build\n\n\
                 and point PKG_CONFIG_PATH at <prefix>/lib/<arch>/pkgconfig; or, without \
                 installing, at the build tree's uninstalled files:\n\
                 \n    PKG_CONFIG_PATH=$PWD/build/meson-uninstalled \
                 LD_LIBRARY_PATH=$PWD/build/subprojects/mimprof-profiling:\
                 $PWD/build/subprojects/mimprof-pyroscope cargo build\n"
            );
            process::exit(1);
        }
    }
}

fn main() {
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    probe("mimprof-profiling");
    if env::var_os("CARGO_FEATURE_PYROSCOPE").is_some() {
        probe("mimprof-pyroscope");
    }
}
