//! `vfsrctl`: asks the running vfsrd what it is doing, and changes it, over its control API
//! (see `vfsr-api`). Text close to `ip` and `birdc` by default, the API's JSON with `--json`.
//!
//! ```text
//! vfsrctl show interfaces | route [PREFIX] [--source S] | rib [PREFIX] | sources
//!              | neighbors [PORT] | nexthops | flows | fast-path | workers | counters [--nonzero]
//! vfsrctl route get ADDR
//! vfsrctl route add PREFIX via ADDR [via ADDR]... | route add PREFIX blackhole
//! vfsrctl route del PREFIX
//! vfsrctl neighbor flush [PORT]
//! vfsrctl clear counters
//! vfsrctl reload
//! vfsrctl top [--interval MS] [--count N]
//! ```
//!
//! Exit status: 0 done, 1 vfsrd refused or `top` could not use the terminal (the reason is
//! printed), 2 a wrong command line, 3 vfsrd could not be reached.

#![forbid(unsafe_code)]

mod text;
mod top;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use vfsr_api::{Client, ClientError, Request, DEFAULT_SOCKET};

/// Ask the running vfsrd what it is doing, and change it.
#[derive(Parser)]
#[command(name = "vfsrctl", version)]
struct Cli {
    /// vfsrd's control socket (its `[api] socket`).
    #[arg(long, short = 's', value_name = "PATH", env = "VFSR_SOCKET", default_value = DEFAULT_SOCKET)]
    socket: PathBuf,
    /// Print the API's JSON answer instead of text.
    #[arg(long, short = 'j', global = true)]
    json: bool,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Show a part of the router.
    #[command(subcommand)]
    Show(Show),
    /// Look up, add or withdraw routes.
    #[command(subcommand)]
    Route(RouteCmd),
    /// Change the neighbor tables.
    #[command(subcommand)]
    Neighbor(NeighborCmd),
    /// Start counters from zero.
    #[command(subcommand)]
    Clear(ClearCmd),
    /// Read the configuration file again and apply what changed.
    Reload,
    /// Rates per worker and port: live on a terminal until q, Esc or Ctrl-C; piped, one
    /// screen after another until interrupted (or --count screens).
    Top {
        /// Milliseconds between screens.
        #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(100..=60_000))]
        interval: u64,
        /// Stop after this many screens.
        #[arg(long)]
        count: Option<u64>,
    },
}

#[derive(Subcommand)]
enum Show {
    /// Ports: state, MTU, MAC, addresses, backend, packets and drops.
    Interfaces,
    /// The FIB: prefixes and how they forward.
    Route {
        /// Only prefixes within this one.
        prefix: Option<String>,
        /// Only prefixes whose best route is of this source (connected, static, api,
        /// kernel, table, fpm).
        #[arg(long)]
        source: Option<String>,
    },
    /// The RIB: every source's routes, best marked.
    Rib {
        /// Only this prefix.
        prefix: Option<String>,
    },
    /// The route sources (FPM, kernel): state and counters.
    Sources,
    /// The ARP and ND tables.
    Neighbors {
        /// Only this port.
        port: Option<String>,
    },
    /// The next-hop table.
    Nexthops,
    /// The flow tables per worker.
    Flows,
    /// The XDP fast path.
    FastPath,
    /// The workers: cores, load, batches.
    Workers,
    /// Every counter by worker, and the control plane's.
    Counters {
        /// Leave out the zeros.
        #[arg(long)]
        nonzero: bool,
    },
}

#[derive(Subcommand)]
enum RouteCmd {
    /// How an address is forwarded.
    Get {
        /// The address.
        addr: String,
    },
    /// Add a route (source `api`): `PREFIX via ADDR [via ADDR]...` or `PREFIX blackhole`.
    Add {
        /// The prefix.
        prefix: String,
        /// `via ADDR` (repeatable: an ECMP group) or `blackhole`.
        #[arg(num_args = 1.., required = true, allow_hyphen_values = false)]
        target: Vec<String>,
    },
    /// Withdraw the `api` routes of a prefix.
    Del {
        /// The prefix.
        prefix: String,
    },
}

#[derive(Subcommand)]
enum NeighborCmd {
    /// Empty the ARP and ND tables (neighbors are resolved again).
    Flush {
        /// Only this port.
        port: Option<String>,
    },
}

#[derive(Subcommand)]
enum ClearCmd {
    /// The counters `show counters`, `show flows` and `show workers` report.
    Counters,
}

/// A command line that cannot become a request (exit status 2).
#[derive(Debug, PartialEq, Eq)]
enum UsageError {
    /// `via` at the end, without its address.
    ViaWithoutAddress,
    /// `blackhole` beside `via`.
    BlackholeNotAlone,
    /// A word that is neither `via ADDR` nor `blackhole`.
    UnknownTarget(String),
    /// `top` runs many requests, not one.
    NotOneRequest,
}

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UsageError::ViaWithoutAddress => f.write_str("`via` needs an address"),
            UsageError::BlackholeNotAlone => f.write_str("`blackhole` stands alone (no `via`)"),
            UsageError::UnknownTarget(w) => {
                write!(f, "expected `via ADDR` or `blackhole`, found {w:?}")
            }
            UsageError::NotOneRequest => f.write_str("top is not one request"),
        }
    }
}

/// `via A via B ...` or `blackhole`.
fn parse_target(words: &[String]) -> Result<(Vec<String>, bool), UsageError> {
    if words.len() == 1 && words.first().map(String::as_str) == Some("blackhole") {
        return Ok((Vec::new(), true));
    }
    let mut via = Vec::new();
    let mut it = words.iter();
    while let Some(w) = it.next() {
        match w.as_str() {
            "via" => match it.next() {
                Some(a) => via.push(a.clone()),
                None => return Err(UsageError::ViaWithoutAddress),
            },
            "blackhole" => return Err(UsageError::BlackholeNotAlone),
            other => return Err(UsageError::UnknownTarget(other.to_string())),
        }
    }
    Ok((via, false))
}

fn request(cmd: &Cmd) -> Result<Request, UsageError> {
    Ok(match cmd {
        Cmd::Show(s) => match s {
            Show::Interfaces => Request::ShowInterfaces,
            Show::Route { prefix, source } => Request::ShowRoute {
                prefix: prefix.clone(),
                source: source.clone(),
            },
            Show::Rib { prefix } => Request::ShowRib {
                prefix: prefix.clone(),
            },
            Show::Sources => Request::ShowSources,
            Show::Neighbors { port } => Request::ShowNeighbors { port: port.clone() },
            Show::Nexthops => Request::ShowNexthops,
            Show::Flows => Request::ShowFlows,
            Show::FastPath => Request::ShowFastPath,
            Show::Workers => Request::ShowWorkers,
            Show::Counters { nonzero } => Request::ShowCounters { nonzero: *nonzero },
        },
        Cmd::Route(r) => match r {
            RouteCmd::Get { addr } => Request::RouteGet { addr: addr.clone() },
            RouteCmd::Add { prefix, target } => {
                let (via, blackhole) = parse_target(target)?;
                Request::RouteAdd {
                    prefix: prefix.clone(),
                    via,
                    blackhole,
                }
            }
            RouteCmd::Del { prefix } => Request::RouteDel {
                prefix: prefix.clone(),
            },
        },
        Cmd::Neighbor(NeighborCmd::Flush { port }) => Request::NeighborFlush { port: port.clone() },
        Cmd::Clear(ClearCmd::Counters) => Request::ClearCounters,
        Cmd::Reload => Request::Reload,
        Cmd::Top { .. } => return Err(UsageError::NotOneRequest),
    })
}

fn fail(e: &ClientError) -> ExitCode {
    eprintln!("vfsrctl: {e}");
    match e {
        ClientError::Refused(_) => ExitCode::from(1),
        _ => ExitCode::from(3),
    }
}

fn main() -> ExitCode {
    vfsr_cpu::exit_unless_built_for_this_cpu("vfsrctl");
    let cli = Cli::parse();
    let mut client = match Client::connect(&cli.socket) {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    if let Cmd::Top { interval, count } = &cli.cmd {
        return match top::run(&mut client, *interval, *count) {
            Ok(()) => ExitCode::SUCCESS,
            Err(top::Error::Api(e)) => fail(&e),
            Err(e @ top::Error::Terminal(_)) => {
                eprintln!("vfsrctl: {e}");
                ExitCode::from(1)
            }
        };
    }
    let req = match request(&cli.cmd) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("vfsrctl: {e}");
            return ExitCode::from(2);
        }
    };
    match client.call(&req) {
        Ok(v) => {
            if cli.json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&v).unwrap_or_else(|_| v.to_string())
                );
            } else {
                print!("{}", text::render(&req, &v));
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

/// A JSON answer for the text modules' tests.
#[cfg(test)]
pub(crate) fn sample(v: &str) -> serde_json::Value {
    serde_json::from_str(v).unwrap_or(serde_json::Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn route_targets_parse_like_ip() {
        assert_eq!(
            parse_target(&words("via 10.0.0.1 via 10.0.0.2")).unwrap(),
            (vec!["10.0.0.1".to_string(), "10.0.0.2".to_string()], false)
        );
        assert_eq!(parse_target(&words("blackhole")).unwrap(), (vec![], true));
        let refused = |s: &str| parse_target(&words(s)).unwrap_err();
        assert_eq!(refused("via"), UsageError::ViaWithoutAddress);
        assert_eq!(
            refused("via 10.0.0.1 blackhole"),
            UsageError::BlackholeNotAlone
        );
        let e = refused("dev eth0");
        assert_eq!(e, UsageError::UnknownTarget("dev".into()));
        assert_eq!(
            e.to_string(),
            "expected `via ADDR` or `blackhole`, found \"dev\""
        );
    }

    #[test]
    fn command_lines_become_requests() {
        let cli =
            Cli::try_parse_from(["vfsrctl", "show", "route", "10.0.0.0/8", "--source", "fpm"])
                .unwrap();
        assert_eq!(
            request(&cli.cmd).unwrap(),
            Request::ShowRoute {
                prefix: Some("10.0.0.0/8".into()),
                source: Some("fpm".into())
            }
        );
        let cli =
            Cli::try_parse_from(["vfsrctl", "route", "add", "192.0.2.0/24", "via", "10.0.0.1"])
                .unwrap();
        assert_eq!(
            request(&cli.cmd).unwrap(),
            Request::RouteAdd {
                prefix: "192.0.2.0/24".into(),
                via: vec!["10.0.0.1".into()],
                blackhole: false
            }
        );
        assert!(Cli::try_parse_from(["vfsrctl", "show", "bogus"]).is_err());
        assert!(Cli::try_parse_from(["vfsrctl", "route", "add", "192.0.2.0/24"]).is_err());
        assert!(Cli::try_parse_from(["vfsrctl", "top", "--interval", "5"]).is_err());
    }
}
