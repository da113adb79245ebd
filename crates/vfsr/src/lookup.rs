//! `vfsr lookup`: answers longest-prefix-match queries from a table file, optionally after an
//! update stream.
//!
//! The table goes the way a router's routes go: into the RIB (as routes of the `table`
//! source), compiled into a live FIB per family on the chosen engine; the update stream is
//! applied to the RIB as routes of the same source (so `w PREFIX` removes a table route), the
//! FIBs are published, and the lookups read the published FIB and next-hop table as a
//! forwarding worker would.

use crate::tables;
use clap::Args;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::net::IpAddr;
use std::path::PathBuf;
use vfsr_fib::nexthop::{Forward, NhSnapshot};
use vfsr_lpm::dir24::Dir24;
use vfsr_lpm::lctrie::{LcConfig, LcTrie};
use vfsr_lpm::poptrie::{Poptrie, PoptrieConfig};
use vfsr_lpm::radix::Radix;
use vfsr_lpm::{LpmUpdate, NextHop, NO_ROUTE};
use vfsr_rib::{
    ApplyError, LoadError, ReadError, Rib, RouteTable, Source, StreamOptions, UpdateReader,
};
use vfsr_table::Table;

/// Why a lookup run stopped.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// The table could not be read (the reader's error names the file).
    #[error(transparent)]
    Table(vfsr_table::Error),
    /// No engine of that name.
    #[error("unknown backend '{0}'")]
    Backend(String),
    /// The update stream could not be opened.
    #[error("{}: {err}", .path.display())]
    Open {
        path: PathBuf,
        #[source]
        err: std::io::Error,
    },
    /// A line of the update stream could not be read or parsed.
    #[error("{}: {err}", .path.display())]
    Read {
        path: PathBuf,
        #[source]
        err: ReadError,
    },
    /// The RIB refused an update (without `--skip-bad`).
    #[error("{}:{line}: {err}", .path.display())]
    Refused {
        path: PathBuf,
        line: u64,
        #[source]
        err: ApplyError,
    },
    /// A live FIB could not be made or published.
    #[error(transparent)]
    Fib(vfsr_fib::FibError),
    /// The RIB or a FIB refused the table.
    #[error(transparent)]
    Load(LoadError),
    /// Standard input could not be read.
    #[error("reading standard input: {0}")]
    Input(#[source] std::io::Error),
    /// The answers could not be written.
    #[error("writing output: {0}")]
    Output(#[source] std::io::Error),
    /// Some inputs were not addresses (each was said on standard error).
    #[error("{0} input(s) were not addresses")]
    NotAddresses(usize),
}

#[derive(Args)]
pub struct LookupArgs {
    /// Route table: text (`PREFIX [NEXTHOP]` per line) or MRT TABLE_DUMP_V2, gzip or not.
    #[arg(long)]
    pub table: PathBuf,
    /// Update stream applied to the table before the lookups: `a PREFIX NEXTHOP` (announce
    /// or replace) and `w PREFIX` (withdraw), one per line. NEXTHOP is a gateway address,
    /// `blackhole`, `unreachable`, `local`, or `#N` for the next hop with index N.
    #[arg(long)]
    pub updates: Option<PathBuf>,
    /// Engine answering the lookups.
    #[arg(long, default_value = "poptrie", value_parser = clap::builder::PossibleValuesParser::new(crate::engines::NAMES))]
    pub backend: String,
    /// Skip (and count) bad lines of the table and of the update stream, and updates the RIB
    /// refuses, instead of stopping at the first.
    #[arg(long)]
    pub skip_bad: bool,
    /// Addresses to look up (read from standard input, one per line, when none are given).
    pub addrs: Vec<String>,
}

pub(crate) fn run(a: &LookupArgs) -> Result<(), Error> {
    let l = tables::load(&a.table, a.skip_bad).map_err(Error::Table)?;
    let t = Table {
        v4: l.v4,
        v6: l.v6,
        nexthops: l.nexthops,
    };
    let p4 = PoptrieConfig::for_family::<u32>();
    let p6 = PoptrieConfig::for_family::<u128>();
    let lc = LcConfig::default();
    match a.backend.as_str() {
        "poptrie" => answer::<Poptrie<u32>, Poptrie<u128>>(a, &t, p4, p6),
        "poptrie16" => answer::<Poptrie<u32>, Poptrie<u128>>(
            a,
            &t,
            PoptrieConfig::flat(16),
            PoptrieConfig::flat(16),
        ),
        "lctrie" => answer::<LcTrie<u32>, LcTrie<u128>>(a, &t, lc, lc),
        "radix" => answer::<Radix<u32>, Radix<u128>>(a, &t, (), ()),
        "dir24" => {
            // DIR-24-8 has no IPv6 form: IPv6 addresses go to Poptrie, said once when it matters.
            if !t.v6.is_empty() {
                eprintln!("vfsr: dir24 serves IPv4 only; IPv6 lookups use poptrie");
            }
            answer::<Dir24, Poptrie<u128>>(a, &t, (), p6)
        }
        other => Err(Error::Backend(other.to_string())),
    }
}

/// Applies the update stream of `a` to `rt`. Returns (applied, refused).
fn apply_updates<E4, E6>(a: &LookupArgs, rt: &mut RouteTable<E4, E6>) -> Result<(u64, u64), Error>
where
    E4: LpmUpdate<u32> + Clone,
    E6: LpmUpdate<u128> + Clone,
{
    let Some(path) = &a.updates else {
        return Ok((0, 0));
    };
    let name = path.display();
    let f = std::fs::File::open(path).map_err(|err| Error::Open {
        path: path.clone(),
        err,
    })?;
    let opts = StreamOptions {
        skip_bad: a.skip_bad,
        ..StreamOptions::default()
    };
    let mut reader = UpdateReader::new(BufReader::new(f), opts);
    let (mut applied, mut refused) = (0u64, 0u64);
    for item in reader.by_ref() {
        let (line, u) = item.map_err(|err| Error::Read {
            path: path.clone(),
            err,
        })?;
        match rt.apply(&u, Source::Table) {
            Ok(()) => applied += 1,
            Err(e) if a.skip_bad => {
                refused += 1;
                eprintln!("vfsr: {name}:{line}: refused: {e}");
            }
            Err(err) => {
                return Err(Error::Refused {
                    path: path.clone(),
                    line,
                    err,
                })
            }
        }
    }
    eprintln!(
        "vfsr: {name}: {}; {applied} applied, {refused} refused",
        reader.report()
    );
    Ok((applied, refused))
}

/// A next hop as people read it; an ECMP group lists its members.
fn describe(nhs: &NhSnapshot, nh: NextHop) -> String {
    match nhs.get(nh).map(|e| &e.forward) {
        Some(Forward::Group { members, .. }) => {
            let parts: Vec<String> = members
                .iter()
                .map(|&m| {
                    nhs.get(m)
                        .map_or(format!("nh {m}"), |e| e.forward.to_string())
                })
                .collect();
            format!("ecmp {}", parts.join(", "))
        }
        Some(f) => f.to_string(),
        None => format!("next hop {nh} (unknown)"),
    }
}

fn answer<E4, E6>(a: &LookupArgs, t: &Table, c4: E4::Config, c6: E6::Config) -> Result<(), Error>
where
    E4: LpmUpdate<u32> + Clone,
    E6: LpmUpdate<u128> + Clone,
{
    let mut rt = RouteTable::<E4, E6>::new(Rib::new(), c4, c6).map_err(Error::Fib)?;
    rt.load_table(t, Source::Table).map_err(Error::Load)?;
    apply_updates(a, &mut rt)?;
    rt.publish().map_err(Error::Fib)?;
    let (r4, r6, rn) = rt.readers();
    // As a worker does: the FIB first, then the next hops it points into.
    let (f4, f6) = (r4.load(), r6.load());
    let nhs = rn.load();
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut bad = 0usize;
    let mut one = |s: &str, out: &mut dyn Write| -> std::io::Result<()> {
        let s = s.trim();
        if s.is_empty() || s.starts_with('#') {
            return Ok(());
        }
        // The engines return next hops only; the FIB's route map knows which prefix matched.
        let (nh, prefix) = match s.parse::<IpAddr>() {
            Ok(IpAddr::V4(v4)) => {
                let k = u32::from(v4);
                let p = rt.v4().table().lookup(k).map(|r| r.prefix.to_string());
                (f4.engine.lookup(k), p)
            }
            Ok(IpAddr::V6(v6)) => {
                let k = u128::from(v6);
                let p = rt.v6().table().lookup(k).map(|r| r.prefix.to_string());
                (f6.engine.lookup(k), p)
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
            writeln!(out, "{s} {p} {}", describe(&nhs, nh))
        }
    };
    if a.addrs.is_empty() {
        for line in std::io::stdin().lock().lines() {
            let line = line.map_err(Error::Input)?;
            one(&line, &mut out).map_err(Error::Output)?;
        }
    } else {
        for s in &a.addrs {
            one(s, &mut out).map_err(Error::Output)?;
        }
    }
    out.flush().map_err(Error::Output)?;
    if bad > 0 {
        return Err(Error::NotAddresses(bad));
    }
    Ok(())
}
