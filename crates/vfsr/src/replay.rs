//! `vfsr replay`: forwards a capture offline through the real pipeline and writes what the
//! router would have sent.
//!
//! The router is a `vfsr_router::Router` (the RIB compiled into Poptrie FIBs, its published
//! next hops, per-port neighbor tables) read by one `vfsr_fwd::Worker` with its flow table,
//! exactly what a forwarding core runs; frames come from a `vfsr_io::pcap::PcapReader` and leave through a
//! `vfsr_io::pcap::PcapWriter`. The topology is fixed so that a capture can be made for it:
//!
//! ```text
//!   capture ──▶ port 1                         port 2 ──▶ OUT
//!               02:00:00:00:00:01              02:00:00:00:00:02, MTU --egress-mtu
//!               192.0.2.1/24                   198.51.100.1/24
//!               2001:db8:1::1/64               2001:db8:2::1/64
//!               host 192.0.2.2 /               gateway 198.51.100.2 / 2001:db8:2::2
//!                    2001:db8:1::2                     at 02:00:00:00:02:02
//!                    at 02:00:00:00:01:02
//! ```
//!
//! Routes: every route of `--table` (any format `vfsr` reads), or of the embedded synthetic
//! full table, points at the gateway on port 2, and so does a static default route of each
//! family; the two connected subnets route to their ports. Frames must be addressed to port 1's MAC
//! to be forwarded (`--to-router` rewrites unicast destination MACs to it, for captures
//! taken elsewhere).
//!
//! What is written: each forwarded frame (rewritten: TTL or hop limit decremented, MACs of
//! port 2 and the gateway) and each generated packet (ICMP errors, which go back the way
//! their source routes, and IPv4 fragments), stamped with the timestamp of the frame that
//! caused it. With the default `--batch 1` the output is in input order exactly; a larger
//! batch runs the pipeline's bulk path and writes, per batch, the forwarded frames in input
//! order and then the generated ones. Punted frames (for the router itself) and frames held
//! for an unresolved neighbor are counted, not written. The summary is the worker's
//! counters: frames in, forwarded, punted and held, drops by named reason, events (ICMP
//! errors sent, fragments made); `--json` prints it as one JSON object.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;

use clap::Args;
use serde_json::{json, Map, Value};
use vfsr_fib::nexthop::Forward;
use vfsr_fwd::{Batch, Counters, Outcome, Packet, Verdict, WorkerConfig};
use vfsr_io::pcap::{PcapReader, PcapWriter, Resolution};
use vfsr_io::Backend;
use vfsr_lpm::Prefix;
use vfsr_rib::{IpPrefix, Source};
use vfsr_router::{PortSpec, RouterConfig};
use vfsr_table::Table;
use vfsr_wire::MacAddr;

use crate::fwdbench::Engines;
use crate::tables;

/// Why a replay stopped.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// An option out of its range (the message says which and why).
    #[error("{0}")]
    Arg(String),
    /// The route table could not be read (the reader's error names the file).
    #[error(transparent)]
    Table(vfsr_table::Error),
    /// The router could not be made, or refused the table.
    #[error(transparent)]
    Router(vfsr_router::RouterError),
    /// The RIB refused a static default route.
    #[error(transparent)]
    Rib(vfsr_rib::RibError),
    /// A FIB could not be published.
    #[error(transparent)]
    Fib(vfsr_fib::FibError),
    /// The capture could not be read, or the output written (the error names the file).
    #[error(transparent)]
    Pcap(vfsr_io::IoError),
}

#[derive(Args)]
pub struct ReplayArgs {
    /// The capture to forward (classic pcap, Ethernet), arriving on port 1.
    #[arg(long = "in", value_name = "IN.pcap")]
    pub input: PathBuf,
    /// Where to write what the router sends (pcap, nanosecond timestamps).
    #[arg(long = "out", value_name = "OUT.pcap")]
    pub output: PathBuf,
    /// Route table (text, gzip or MRT); default: the embedded synthetic full table.
    #[arg(long)]
    pub table: Option<PathBuf>,
    /// Frames per batch handed to the worker (1 keeps the output in input order exactly).
    #[arg(long, default_value_t = 1)]
    pub batch: usize,
    /// IP MTU of port 2 (larger IPv4 packets without DF are fragmented, others answered
    /// with ICMP).
    #[arg(long, default_value_t = 1500)]
    pub egress_mtu: u16,
    /// Rewrite unicast destination MACs to port 1's, for captures taken on another link.
    #[arg(long)]
    pub to_router: bool,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Port 1's MAC: frames of the capture must be addressed to it.
pub const PORT1_MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
/// Port 2's MAC: the source MAC of forwarded frames.
pub const PORT2_MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 2]);
/// The gateway on port 2 every route points at.
pub const GW4: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 2);
/// Its IPv6 address.
pub const GW6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 2, 0, 0, 0, 0, 2);
/// Its MAC: the destination MAC of forwarded frames.
pub const GW_MAC: MacAddr = MacAddr([2, 0, 0, 0, 2, 2]);
/// A host on port 1, resolved, so ICMP errors to it go back out of port 1.
pub const HOST4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
/// Its IPv6 address.
pub const HOST6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 2);
/// Its MAC.
pub const HOST_MAC: MacAddr = MacAddr([2, 0, 0, 0, 1, 2]);

/// The replay router: the fixed ports (their subnets connected), the table's routes and a
/// static default route of each family, all via the gateway on port 2.
fn build(table: &tables::Loaded, mtu: u16) -> Result<Engines, Error> {
    let specs = vec![
        PortSpec::new(1, PORT1_MAC)
            .v4(Ipv4Addr::new(192, 0, 2, 1), 24)
            .v6(Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 1), 64),
        PortSpec::new(2, PORT2_MAC)
            .v4(Ipv4Addr::new(198, 51, 100, 1), 24)
            .v6(Ipv6Addr::new(0x2001, 0xdb8, 2, 0, 0, 0, 0, 1), 64)
            .mtu(mtu),
    ];
    let mut router = Engines::new(specs, RouterConfig::default()).map_err(Error::Router)?;
    let t = Table {
        v4: table.v4.clone(),
        v6: table.v6.clone(),
        nexthops: table.nexthops.clone(),
    };
    router
        .load_table(&t, Source::Table, &[(GW4.into(), 2)], &[(GW6.into(), 2)])
        .map_err(Error::Router)?;
    let defaults: [(IpPrefix, IpAddr); 2] = [
        (Prefix::new_masked(0u32, 0).into(), GW4.into()),
        (Prefix::new_masked(0u128, 0).into(), GW6.into()),
    ];
    for (prefix, addr) in defaults {
        let route = router.route(
            Source::Static,
            Forward::Gateway {
                addr,
                ifindex: Some(2),
            },
        );
        router
            .announce(prefix, Source::Static, &[route])
            .map_err(Error::Rib)?;
    }
    router.resolve4(2, GW4, GW_MAC);
    router.resolve6(2, GW6, GW_MAC);
    router.resolve4(1, HOST4, HOST_MAC);
    router.resolve6(1, HOST6, HOST_MAC);
    router.publish().map_err(Error::Fib)?;
    Ok(router)
}

/// Points a unicast frame at port 1.
fn to_router(p: &mut Packet) {
    if let Some(dst) = p.frame_mut().get_mut(..6) {
        if dst.first().is_some_and(|b| b & 1 == 0) {
            dst.copy_from_slice(&PORT1_MAC.0);
        }
    }
}

/// What a replay did.
struct Summary {
    counters: Counters,
    invalid: u64,
    written: u64,
    source: String,
}

impl Summary {
    fn json(&self) -> Value {
        let c = &self.counters;
        let mut drops = Map::new();
        let mut punts = Map::new();
        let mut events = Map::new();
        for (group, name, v) in c.nonzero() {
            match group {
                "drop" => {
                    drops.insert(name.to_string(), json!(v));
                }
                "punt" => {
                    punts.insert(name.to_string(), json!(v));
                }
                "event" => {
                    events.insert(name.to_string(), json!(v));
                }
                _ => {}
            }
        }
        json!({
            "table": self.source,
            "frames_in": c.rx(),
            "invalid_records": self.invalid,
            "forwarded": c.outcome(Outcome::Forwarded),
            "punted": c.outcome(Outcome::Punted),
            "held": c.outcome(Outcome::Held),
            "dropped": c.outcome(Outcome::Dropped),
            "drops": drops,
            "punts": punts,
            "events": events,
            "frames_out": self.written,
        })
    }

    fn print(&self) {
        let c = &self.counters;
        println!("table:           {}", self.source);
        println!("frames in:       {}", c.rx());
        if self.invalid > 0 {
            println!("invalid records: {} (skipped)", self.invalid);
        }
        println!("forwarded:       {}", c.outcome(Outcome::Forwarded));
        println!("punted:          {}", c.outcome(Outcome::Punted));
        println!("held:            {}", c.outcome(Outcome::Held));
        println!("dropped:         {}", c.outcome(Outcome::Dropped));
        for (group, name, v) in c.nonzero() {
            match group {
                "drop" => println!("  drop  {name:<24} {v}"),
                "punt" => println!("  punt  {name:<24} {v}"),
                "event" if name != "rx" => println!("  event {name:<24} {v}"),
                _ => {}
            }
        }
        println!("frames out:      {}", self.written);
    }
}

pub(crate) fn run(a: &ReplayArgs) -> Result<(), Error> {
    if a.batch == 0 || a.batch > 4096 {
        return Err(Error::Arg(format!(
            "--batch {} must be in 1..=4096",
            a.batch
        )));
    }
    if a.egress_mtu < 1280 {
        return Err(Error::Arg(format!(
            "--egress-mtu {} is below IPv6's minimum of 1280",
            a.egress_mtu
        )));
    }
    if let (Ok(i), Ok(o)) = (a.input.canonicalize(), a.output.canonicalize()) {
        if i == o {
            return Err(Error::Arg(format!(
                "--in and --out are the same file ({}); writing would destroy the capture",
                i.display()
            )));
        }
    }
    // The input first: a bad capture is reported before a table is built.
    let mut reader = PcapReader::open(&a.input, 1).map_err(Error::Pcap)?;
    let table = match &a.table {
        Some(p) => tables::load(p, false).map_err(Error::Table)?,
        None => tables::synthetic(1),
    };
    let router = build(&table, a.egress_mtu)?;
    let mut worker = router.worker(WorkerConfig {
        batch_size: a.batch,
        ..WorkerConfig::default()
    });
    let mut writer = PcapWriter::create(&a.output, Resolution::Nano).map_err(Error::Pcap)?;

    let mut batch = Batch::new();
    let mut pool: Vec<Packet> = Vec::new();
    let mut stamps: Vec<u64> = Vec::with_capacity(a.batch);
    let mut now = 0u64;
    let mut written = 0u64;
    // Records the replay refuses itself (too large, cut by the snapshot length).
    let mut refused = 0u64;
    loop {
        // Frames one by one so that each keeps its timestamp.
        stamps.clear();
        batch.packets.clear();
        while batch.packets.len() < a.batch {
            let Some(rec) = reader.next_record().map_err(Error::Pcap)? else {
                break;
            };
            let mut p = Packet::take(&mut pool);
            if rec.data.len() > p.capacity() || rec.data.len() < rec.orig_len as usize {
                // Larger than a buffer, or cut short by the capture's snapshot length.
                refused += 1;
                pool.push(p);
                continue;
            }
            p.set_frame(&rec.data);
            p.iif = 1;
            p.oif = 0;
            if a.to_router {
                to_router(&mut p);
            }
            // The pipeline's clock (ICMP rate limit, flow ages) follows the capture's, never
            // backwards.
            now = now.max(rec.ts_ns);
            stamps.push(rec.ts_ns);
            batch.packets.push(p);
        }
        if batch.packets.is_empty() {
            break;
        }
        worker.process(&mut batch, now);
        for ((p, v), ts) in batch.packets.iter().zip(&batch.verdicts).zip(&stamps) {
            if let Verdict::Forward { .. } = v {
                if writer.write_frame(*ts, p.frame()).map_err(Error::Pcap)? {
                    written += 1;
                }
            }
        }
        let last = stamps.last().copied().unwrap_or(now);
        for g in &batch.generated {
            if writer.write_frame(last, g.frame()).map_err(Error::Pcap)? {
                written += 1;
            }
        }
        worker.recycle(batch.generated.drain(..));
        pool.append(&mut batch.packets);
    }
    writer.finish().map_err(Error::Pcap)?;
    let summary = Summary {
        counters: worker.counters().clone(),
        invalid: reader.stats().rx_invalid + refused,
        written,
        source: table.source,
    };
    if a.json {
        println!("{}", summary.json());
    } else {
        summary.print();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn to_router_rewrites_unicast_only() {
        let mut p = Packet::from_frame(&[0x10, 1, 2, 3, 4, 5, 9, 9, 9, 9, 9, 9, 8, 0], 1);
        to_router(&mut p);
        assert_eq!(&p.frame()[..6], &PORT1_MAC.0);
        let mut b = Packet::from_frame(&[0xff; 14], 1);
        to_router(&mut b);
        assert_eq!(&b.frame()[..6], &[0xff; 6]);
    }
}
