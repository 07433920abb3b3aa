// SPDX-License-Identifier: MIT
//! The workspace's Pyroscope stand-in (tests/pyroscope-server/server.py),
//! started on ephemeral ports for one test and stopped when dropped.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

pub struct Standin {
    child: Child,
    pub data: u16,
    pub control: u16,
}

impl Standin {
    /// None (the test is skipped) outside the mimprof source tree.
    pub fn start() -> Option<Standin> {
        let script = std::env::var_os("MIMPROF_PYROSCOPE_STANDIN")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                    .join("../../tests/pyroscope-server/server.py")
            });
        if !script.exists() {
            eprintln!("skipped: no Pyroscope stand-in at {}", script.display());
            return None;
        }
        let mut child = Command::new("/usr/bin/python3")
            .arg(&script)
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the stand-in");
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = |key: &str| -> u16 {
            let i = line.find(key).expect("READY line") + key.len();
            line[i..]
                .split_whitespace()
                .next()
                .unwrap()
                .parse()
                .unwrap()
        };
        Some(Standin {
            data: port("data="),
            control: port("control="),
            child,
        })
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.data)
    }

    /// GET on the control port: the body.
    pub fn control_get(&self, path: &str) -> String {
        let mut s = TcpStream::connect(("127.0.0.1", self.control)).unwrap();
        write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out.split_once("\r\n\r\n")
            .map(|(_, b)| b.to_owned())
            .unwrap_or_default()
    }

    /// POST of a JSON body on the control port (configuration, faults).
    pub fn control_post(&self, path: &str, json: &str) {
        let mut s = TcpStream::connect(("127.0.0.1", self.control)).unwrap();
        write!(
            s,
            "POST {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n{json}",
            json.len()
        )
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        assert!(
            out.starts_with("HTTP/1.0 200") || out.starts_with("HTTP/1.1 200"),
            "{out}"
        );
    }

    /// Sum of the stored profiles' totals of `type_prefix` (e.g.
    /// "memory:inuse_space") whose labels contain every one of `labels`.
    pub fn total(&self, type_prefix: &str, labels: &[&str]) -> i64 {
        self.control_get("/profiles.tsv")
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split('\t').collect();
                let ok = f.len() == 5
                    && f[2].starts_with(type_prefix)
                    && labels.iter().all(|x| f[4].split(';').any(|kv| kv == *x));
                ok.then(|| f[3].parse::<i64>().unwrap())
            })
            .sum()
    }
}

impl Drop for Standin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
