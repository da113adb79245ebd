//! `vfsr demo`: the README's first command. Builds the synthetic full table, loads it into every
//! engine, checks that they agree, and shows lookups and their speed on one core.

use crate::{engines, pin, tables};
use clap::Args;
use std::time::Instant;
use vfsr_bench::lpm::{budget, time_bulk, Params};
use vfsr_lpm::radix::Radix;
use vfsr_lpm::{Key, LpmBuild, Route, NO_ROUTE};
use vfsr_table::traffic;

#[derive(Args)]
pub struct DemoArgs {
    /// Seed of the synthetic table and of the traffic.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Addresses per speed measurement.
    #[arg(long, default_value_t = 1 << 20)]
    pub lookups: usize,
}

struct Built<K: Key> {
    name: &'static str,
    engine: engines::Engine<K>,
    build_s: f64,
}

fn build_all<K: Key>(
    routes: &[Route<K>],
    build: impl Fn(&str, &[Route<K>]) -> Result<engines::Engine<K>, String>,
) -> Vec<Built<K>> {
    let mut v = Vec::new();
    for &name in engines::NAMES {
        let t = Instant::now();
        if let Ok(engine) = build(name, routes) {
            v.push(Built {
                name,
                engine,
                build_s: t.elapsed().as_secs_f64(),
            });
        }
    }
    v
}

fn report<K: Key>(
    family: &str,
    routes: usize,
    built: &[Built<K>],
    addrs: &[K],
    p: &Params,
) -> Result<(), String> {
    let mut first: Option<Vec<u32>> = None;
    for b in built {
        let n = budget(b.engine.as_ref(), addrs, p);
        let mut out = vec![0; n];
        let m = time_bulk(b.engine.as_ref(), &addrs[..n], &mut out, p);
        let agree = match &first {
            None => {
                first = Some(out.clone());
                "reference".to_string()
            }
            Some(r) => {
                let wrong = r.iter().zip(&out).filter(|(a, b)| a != b).count();
                if wrong > 0 {
                    return Err(format!(
                        "{} disagrees with {} on {wrong} lookups",
                        b.name, built[0].name
                    ));
                }
                "agrees".to_string()
            }
        };
        println!(
            "  {family} {:<10} build {:>6.3} s  {:>8.2} MiB  {:>6.1} B/route  {:>7.1} Mlps  ({agree})",
            b.name,
            b.build_s,
            b.engine.memory_bytes() as f64 / 1048576.0,
            b.engine.memory_bytes() as f64 / routes.max(1) as f64,
            m.median,
        );
    }
    Ok(())
}

pub fn run(a: &DemoArgs) -> Result<(), String> {
    let core = pin::default_bench_core();
    if let Err(e) = pin::pin_to_core(core) {
        eprintln!("vfsr: not pinned: {e}");
    }
    let t = Instant::now();
    let table = tables::synthetic(a.seed)?;
    println!(
        "vfsr demo: {} with {} IPv4 and {} IPv6 routes, made in {:.2} s",
        table.source,
        table.v4.len(),
        table.v6.len(),
        t.elapsed().as_secs_f64()
    );
    let n = a.lookups.max(1024);
    let p = Params {
        runs: 3,
        batch: 256,
        max_pass_s: 0.25,
    };
    println!(
        "\nEvery engine, bulk lookups on core {core} (median of {} passes over up to {n} addresses):",
        p.runs
    );
    let b4 = build_all(&table.v4, engines::build_v4);
    report(
        "v4 matched",
        table.v4.len(),
        &b4,
        &traffic::matched(&table.v4, a.seed, n),
        &p,
    )?;
    report(
        "v4 uniform",
        table.v4.len(),
        &b4,
        &traffic::uniform4(a.seed, n),
        &p,
    )?;
    let b6 = build_all(&table.v6, engines::build_v6);
    report(
        "v6 matched",
        table.v6.len(),
        &b6,
        &traffic::matched(&table.v6, a.seed, n),
        &p,
    )?;

    println!("\nSample lookups (matched prefix from the radix tree, next hop from each engine):");
    let x4 = Radix::build(&table.v4, &()).map_err(|e| e.to_string())?;
    let x6 = Radix::build(&table.v6, &()).map_err(|e| e.to_string())?;
    let names: Vec<&str> = b4.iter().map(|b| b.name).collect();
    println!("  {:<40} {:<24} {}", "address", "prefix", names.join(" "));
    for a4 in traffic::matched(&table.v4, a.seed ^ 0x5eed, 4)
        .into_iter()
        .chain(traffic::uniform4(a.seed ^ 7, 2))
    {
        let p = x4
            .lookup_route(a4)
            .map_or("-".to_string(), |(p, _)| p.to_string());
        let nh: Vec<String> = b4.iter().map(|b| show(b.engine.lookup(a4))).collect();
        println!(
            "  {:<40} {:<24} {}",
            std::net::Ipv4Addr::from(a4).to_string(),
            p,
            nh.join(" ")
        );
    }
    for a6 in traffic::matched(&table.v6, a.seed ^ 0x5eed, 3) {
        let p = x6
            .lookup_route(a6)
            .map_or("-".to_string(), |(p, _)| p.to_string());
        let nh: Vec<String> = b6.iter().map(|b| show(b.engine.lookup(a6))).collect();
        println!(
            "  {:<40} {:<24} {}",
            std::net::Ipv6Addr::from(a6).to_string(),
            p,
            nh.join(" ")
        );
    }
    println!("\nFull benchmark with peers and JSON: vfsr lpm bench --json lpm.json");
    Ok(())
}

fn show(nh: u32) -> String {
    if nh == NO_ROUTE {
        "-".into()
    } else {
        format!("nh{nh}")
    }
}
