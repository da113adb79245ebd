//! `vfsr lookup`: answers longest-prefix-match queries from a table file.

use crate::{engines, tables};
use clap::Args;
use std::io::{BufRead, BufWriter, Write};
use std::net::IpAddr;
use std::path::PathBuf;
use vfsr_lpm::radix::Radix;
use vfsr_lpm::{LpmBuild, NO_ROUTE};

#[derive(Args)]
pub struct LookupArgs {
    /// Route table: text (`PREFIX [NEXTHOP]` per line) or MRT TABLE_DUMP_V2, gzip or not.
    #[arg(long)]
    pub table: PathBuf,
    /// Engine answering the lookups.
    #[arg(long, default_value = "poptrie", value_parser = clap::builder::PossibleValuesParser::new(engines::NAMES))]
    pub backend: String,
    /// Skip (and count) bad lines of a text table instead of stopping at the first.
    #[arg(long)]
    pub skip_bad: bool,
    /// Addresses to look up (read from standard input, one per line, when none are given).
    pub addrs: Vec<String>,
}

pub fn run(a: &LookupArgs) -> Result<(), String> {
    let t = tables::load(&a.table, a.skip_bad)?;
    let e4 = engines::build_v4(&a.backend, &t.v4).map_err(|e| format!("{}: {e}", a.backend))?;
    // DIR-24-8 has no IPv6 form: IPv6 addresses then go to Poptrie, said once when it matters.
    let v6_backend = if a.backend == "dir24" {
        if !t.v6.is_empty() {
            eprintln!("vfsr: dir24 serves IPv4 only; IPv6 lookups use poptrie");
        }
        "poptrie"
    } else {
        a.backend.as_str()
    };
    let e6 = engines::build_v6(v6_backend, &t.v6).map_err(|e| format!("{v6_backend}: {e}"))?;
    // The engines return next hops only; the radix tree also knows which prefix matched.
    let x4 = Radix::build(&t.v4, &()).map_err(|e| e.to_string())?;
    let x6 = Radix::build(&t.v6, &()).map_err(|e| e.to_string())?;
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut bad = 0usize;
    let mut answer = |s: &str, out: &mut dyn Write| -> std::io::Result<()> {
        let s = s.trim();
        if s.is_empty() || s.starts_with('#') {
            return Ok(());
        }
        let (nh, prefix) = match s.parse::<IpAddr>() {
            Ok(IpAddr::V4(v4)) => {
                let k = u32::from(v4);
                (e4.lookup(k), x4.lookup_route(k).map(|(p, _)| p.to_string()))
            }
            Ok(IpAddr::V6(v6)) => {
                let k = u128::from(v6);
                (e6.lookup(k), x6.lookup_route(k).map(|(p, _)| p.to_string()))
            }
            Err(_) => {
                bad += 1;
                eprintln!("vfsr: '{s}' is not an IPv4 or IPv6 address");
                return Ok(());
            }
        };
        if nh == NO_ROUTE {
            writeln!(out, "{s} - unreachable")
        } else {
            let p = prefix.unwrap_or_else(|| "?".into());
            writeln!(out, "{s} {p} {}", t.describe(nh))
        }
    };
    let io = |e: std::io::Error| format!("writing output: {e}");
    if a.addrs.is_empty() {
        for line in std::io::stdin().lock().lines() {
            let line = line.map_err(|e| format!("reading standard input: {e}"))?;
            answer(&line, &mut out).map_err(io)?;
        }
    } else {
        for s in &a.addrs {
            answer(s, &mut out).map_err(io)?;
        }
    }
    out.flush().map_err(io)?;
    if bad > 0 {
        return Err(format!("{bad} input(s) were not addresses"));
    }
    Ok(())
}
