//! # vfsr-api: vfsrd's control API
//!
//! vfsrd answers on a Unix stream socket (`[api] socket`, `/run/vfsrd.sock` by default; owner
//! root, mode 0660, group `[api] group`). The protocol is JSON lines:
//!
//! ```text
//!   client                                              vfsrd (control plane, core 0)
//!   {"cmd":"route-get","addr":"203.0.113.9"}\n  ──▶
//!                                               ◀──  {"ok":true,"data":{"prefix":"203.0.113.0/24",...}}\n
//!   {"cmd":"route-add","prefix":"198.51.100.0/24","via":["10.9.0.2"]}\n  ──▶
//!                                               ◀──  {"ok":true,"data":{...}}\n
//!   {"cmd":"bogus"}\n                           ──▶
//!                                               ◀──  {"ok":false,"error":"unknown variant `bogus`, ..."}\n
//! ```
//!
//! - A request is one JSON object on one line (UTF-8, at most [`MAX_REQUEST`] bytes with its
//!   newline); its `cmd` names a [`Request`] variant in kebab case, its other keys are the
//!   variant's fields.
//! - Every request gets exactly one answer line, in order: [`Answer`], `ok` with the `data`
//!   of the command, or `ok: false` with an `error` in words. A malformed or unknown request
//!   is answered with an error and the connection stays open; an oversized one is answered
//!   with an error and the connection is closed (its end cannot be found).
//! - Several clients may be connected at once; each is served in turn, a request at a time,
//!   by the control plane's loop, which never blocks on a client.
//!
//! The `data` of each command is documented on its [`Request`] variant; `vfsrctl` prints it
//! as text close to `ip` and `birdc`, or as the JSON itself with `--json`.

#![forbid(unsafe_code)]

use std::fmt;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The longest request line accepted, newline included.
pub const MAX_REQUEST: usize = 64 * 1024;

/// The socket's path unless the configuration says otherwise.
pub const DEFAULT_SOCKET: &str = "/run/vfsrd.sock";

/// A request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Request {
    /// Ports: state, MTU, addresses, MAC, backend, queues, rx/tx packets and bytes, drops.
    ShowInterfaces,
    /// The FIB: every prefix (or those within `prefix`; `source` keeps those whose best route
    /// is of that source) with how it forwards.
    ShowRoute {
        #[serde(default)]
        prefix: Option<String>,
        #[serde(default)]
        source: Option<String>,
    },
    /// How an address is forwarded: the matched prefix, its source, the next hop or ECMP
    /// group, the egress port, the neighbor's MAC and state.
    RouteGet { addr: String },
    /// The RIB: every source's routes (of `prefix` only, if given) with distance, metric,
    /// weight, best marked, unresolved and stale ones shown.
    ShowRib {
        #[serde(default)]
        prefix: Option<String>,
    },
    /// The route sources: FPM and kernel state, routes per source, resyncs, errors.
    ShowSources,
    /// The ARP and ND tables (of one port, by name, if given).
    ShowNeighbors {
        #[serde(default)]
        port: Option<String>,
    },
    /// The next-hop table: index, generation, version, what it forwards to, references.
    ShowNexthops,
    /// Per worker: flow-table hits, misses, insertions, evictions, refusals, expirations.
    ShowFlows,
    /// The XDP fast path per port: frames forwarded in XDP, stale entries, installs.
    ShowFastPath,
    /// Per worker: core, busy share, packets per second, batches, batch fill.
    ShowWorkers,
    /// Every counter by worker (drops by reason, punts by class, events), and the control
    /// plane's; `nonzero` leaves out the zeros.
    ShowCounters {
        #[serde(default)]
        nonzero: bool,
    },
    /// Starts the counters shown from zero (the workers' own are not touched: the answer is
    /// the difference).
    ClearCounters,
    /// Adds a route of source `api` (distance 5 unless configured) at run time: through
    /// gateways (an ECMP group when several) or a blackhole. It replaces the prefix's earlier
    /// `api` routes, lives until withdrawn or vfsrd stops, and a reload leaves it alone.
    RouteAdd {
        prefix: String,
        #[serde(default)]
        via: Vec<String>,
        #[serde(default)]
        blackhole: bool,
    },
    /// Withdraws the `api` routes of a prefix.
    RouteDel { prefix: String },
    /// Empties the ARP and ND tables (of one port, if given): neighbors are resolved again.
    NeighborFlush {
        #[serde(default)]
        port: Option<String>,
    },
    /// Reads the configuration file again and applies what changed (static routes, punt
    /// limits, distances, route sources); names what can only change at a restart.
    Reload,
}

impl Request {
    /// The request as a client writes it: one line of JSON, newline included.
    pub fn to_line(&self) -> Result<String, serde_json::Error> {
        let mut s = serde_json::to_string(self)?;
        s.push('\n');
        Ok(s)
    }
}

/// An answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    /// Whether the request was carried out.
    pub ok: bool,
    /// The command's data, when `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    /// What went wrong, when not `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Answer {
    /// A successful answer.
    pub fn data(data: Value) -> Answer {
        Answer {
            ok: true,
            data: Some(data),
            error: None,
        }
    }

    /// A refusal.
    pub fn error(e: impl Into<String>) -> Answer {
        Answer {
            ok: false,
            data: None,
            error: Some(e.into()),
        }
    }

    /// The answer as one line, newline included.
    pub fn to_line(&self) -> String {
        let mut s = serde_json::to_string(self)
            .unwrap_or_else(|_| r#"{"ok":false,"error":"unencodable answer"}"#.into());
        s.push('\n');
        s
    }
}

/// Why a request line was refused (the text goes back to the client in the answer).
#[derive(Debug)]
pub enum RequestError {
    /// The line is longer than [`MAX_REQUEST`].
    TooLong,
    /// The line is not UTF-8.
    NotUtf8,
    /// The line is not a request (unknown command, missing or extra field, not JSON).
    Bad(serde_json::Error),
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestError::TooLong => write!(f, "request longer than {MAX_REQUEST} bytes"),
            RequestError::NotUtf8 => f.write_str("request is not UTF-8"),
            RequestError::Bad(e) => write!(f, "bad request: {e}"),
        }
    }
}

impl std::error::Error for RequestError {}

/// Parses one request line (without or with its newline).
pub fn parse_request(line: &[u8]) -> Result<Request, RequestError> {
    if line.len() > MAX_REQUEST {
        return Err(RequestError::TooLong);
    }
    let text = std::str::from_utf8(line).map_err(|_| RequestError::NotUtf8)?;
    serde_json::from_str(text.trim_end()).map_err(RequestError::Bad)
}

/// Why a call failed.
#[derive(Debug)]
pub enum ClientError {
    /// The socket could not be reached.
    Connect { path: PathBuf, err: std::io::Error },
    /// The connection broke.
    Io(std::io::Error),
    /// vfsrd's answer could not be read.
    Protocol(String),
    /// vfsrd refused the request.
    Refused(String),
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Connect { path, err } => match err.kind() {
                std::io::ErrorKind::PermissionDenied => write!(
                    f,
                    "{}: permission denied (the socket is for root and the group set in \
                     vfsrd's [api] group; run as one of them)",
                    path.display()
                ),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => write!(
                    f,
                    "{}: vfsrd is not running there ({err}; the path is vfsrd's [api] socket)",
                    path.display()
                ),
                _ => write!(f, "{}: {err}", path.display()),
            },
            ClientError::Io(e) => write!(f, "talking to vfsrd: {e}"),
            ClientError::Protocol(e) => write!(f, "vfsrd's answer: {e}"),
            ClientError::Refused(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for ClientError {}

/// A connection to vfsrd.
pub struct Client {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Client {
    /// Connects to the socket at `path`.
    pub fn connect(path: &Path) -> Result<Client, ClientError> {
        let s = UnixStream::connect(path).map_err(|err| ClientError::Connect {
            path: path.to_path_buf(),
            err,
        })?;
        let _ = s.set_read_timeout(Some(Duration::from_secs(30)));
        let writer = s.try_clone().map_err(ClientError::Io)?;
        Ok(Client {
            reader: BufReader::new(s),
            writer,
        })
    }

    /// Sends a request, waits for its answer.
    pub fn call(&mut self, req: &Request) -> Result<Value, ClientError> {
        let line = req
            .to_line()
            .map_err(|e| ClientError::Protocol(e.to_string()))?;
        self.call_raw(line.as_bytes())
    }

    /// Sends raw bytes as a request (for scripts and tests), waits for the answer.
    pub fn call_raw(&mut self, bytes: &[u8]) -> Result<Value, ClientError> {
        self.writer.write_all(bytes).map_err(ClientError::Io)?;
        let mut answer = String::new();
        let n = self
            .reader
            .read_line(&mut answer)
            .map_err(ClientError::Io)?;
        if n == 0 {
            return Err(ClientError::Protocol("vfsrd closed the connection".into()));
        }
        let a: Answer = serde_json::from_str(answer.trim_end())
            .map_err(|e| ClientError::Protocol(e.to_string()))?;
        if a.ok {
            Ok(a.data.unwrap_or(Value::Null))
        } else {
            Err(ClientError::Refused(
                a.error.unwrap_or_else(|| "refused".into()),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_and_bad_ones_are_errors() {
        let reqs = [
            Request::ShowInterfaces,
            Request::ShowRoute {
                prefix: Some("10.0.0.0/8".into()),
                source: None,
            },
            Request::RouteGet {
                addr: "192.0.2.1".into(),
            },
            Request::RouteAdd {
                prefix: "198.51.100.0/24".into(),
                via: vec!["10.9.0.2".into()],
                blackhole: false,
            },
            Request::ShowCounters { nonzero: true },
            Request::Reload,
        ];
        for r in reqs {
            let line = r.to_line().unwrap();
            assert!(
                line.ends_with('\n') && line.matches('\n').count() == 1,
                "{line}"
            );
            assert_eq!(parse_request(line.as_bytes()).unwrap(), r, "{line}");
        }
        assert_eq!(
            parse_request(br#"{"cmd":"show-interfaces"}"#).unwrap(),
            Request::ShowInterfaces
        );
        assert_eq!(
            parse_request(br#"{"cmd":"show-route"}"#).unwrap(),
            Request::ShowRoute {
                prefix: None,
                source: None
            }
        );
        for bad in [
            &br#"{"cmd":"bogus"}"#[..],
            br#"{"cmd":"route-get"}"#,
            br#"{"cmd":"route-get","addr":"192.0.2.1","extra":1}"#,
            b"not json",
            b"\xff\xfe",
        ] {
            assert!(
                parse_request(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let big = vec![b' '; MAX_REQUEST + 1];
        let e = parse_request(&big).unwrap_err();
        assert!(matches!(e, RequestError::TooLong));
        assert!(e.to_string().contains("longer"), "{e}");
        let e = parse_request(b"\xff\xfe").unwrap_err();
        assert_eq!(e.to_string(), "request is not UTF-8");
        assert!(parse_request(b"not json")
            .unwrap_err()
            .to_string()
            .starts_with("bad request: "));
    }

    #[test]
    fn answers_are_one_line() {
        let a = Answer::data(serde_json::json!({"x": "a\nb"}));
        let line = a.to_line();
        assert_eq!(line.matches('\n').count(), 1);
        assert_eq!(serde_json::from_str::<Answer>(line.trim_end()).unwrap(), a);
        assert!(Answer::error("no").to_line().contains(r#""ok":false"#));
    }
}
