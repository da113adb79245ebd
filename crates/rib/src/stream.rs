//! The update stream: a text format of announcements and withdrawals, one per line.
//!
//! ```text
//!   # announce or replace (the source's routes for the prefix become this one route)
//!   a 10.0.0.0/8        192.0.2.1
//!   a 2001:db8::/32     2001:db8::1
//!   a 192.0.2.0/24      blackhole     # also: unreachable, local
//!   a 198.51.100.0/24   #5            # the existing next hop with index 5
//!   w 10.0.0.0/8                      # withdraw the source's routes for the prefix
//! ```
//!
//! A line is a verb (`a` or `w`), a prefix (host bits clear) and, for `a`, a next hop: a
//! gateway of the prefix's family, `blackhole`, `unreachable`, `local`, or `#N`, the next hop
//! that index `N` names when the update is applied (an index that is no live next hop is an
//! [`ApplyError`] then; an index of a group re-announces all its members as ECMP). Any other
//! `#` starts a comment that runs to the end of the line; blank lines are ignored; spaces, tabs
//! and a trailing `\r` are tolerated between fields.
//!
//! A bad line is a [`ParseError`] with its line number and [`StreamError`] reason; with
//! [`StreamOptions::skip_bad`] the [`UpdateReader`] skips it and counts it by reason in its
//! [`StreamReport`]. The reader never panics, whatever the bytes.

use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, BufRead};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use vfsr_fib::nexthop::Forward;
use vfsr_lpm::prefix::parse_addr_len;
use vfsr_lpm::{Prefix, PrefixError};

use crate::rib::{RibError, RibFamily, RibRoute, Source};
use crate::Rib;

/// A prefix of either family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IpPrefix {
    V4(Prefix<u32>),
    V6(Prefix<u128>),
}

impl IpPrefix {
    /// The prefix's address and length.
    pub fn addr_len(&self) -> (IpAddr, u8) {
        match self {
            IpPrefix::V4(p) => (IpAddr::V4(Ipv4Addr::from(p.addr())), p.len()),
            IpPrefix::V6(p) => (IpAddr::V6(Ipv6Addr::from(p.addr())), p.len()),
        }
    }

    /// Whether this is an IPv4 prefix.
    pub fn is_v4(&self) -> bool {
        matches!(self, IpPrefix::V4(_))
    }
}

impl std::str::FromStr for IpPrefix {
    type Err = StreamError;

    /// `address/length` of either family; host bits must be clear
    /// ([`StreamError::HostBitsSet`]), anything else malformed is [`StreamError::BadPrefix`].
    fn from_str(s: &str) -> Result<IpPrefix, StreamError> {
        parse_prefix(s.trim())
    }
}

impl From<Prefix<u32>> for IpPrefix {
    fn from(p: Prefix<u32>) -> Self {
        IpPrefix::V4(p)
    }
}

impl From<Prefix<u128>> for IpPrefix {
    fn from(p: Prefix<u128>) -> Self {
        IpPrefix::V6(p)
    }
}

impl fmt::Display for IpPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IpPrefix::V4(p) => p.fmt(f),
            IpPrefix::V6(p) => p.fmt(f),
        }
    }
}

/// The next hop of an announcement, as written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NextHopSpec {
    Gateway(IpAddr),
    Blackhole,
    Unreachable,
    Local,
    /// `#N`: the live next hop (or group) with index `N` when applied.
    Index(u32),
}

impl fmt::Display for NextHopSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NextHopSpec::Gateway(a) => a.fmt(f),
            NextHopSpec::Blackhole => f.write_str("blackhole"),
            NextHopSpec::Unreachable => f.write_str("unreachable"),
            NextHopSpec::Local => f.write_str("local"),
            NextHopSpec::Index(n) => write!(f, "#{n}"),
        }
    }
}

/// One line of the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Update {
    Announce {
        prefix: IpPrefix,
        nexthop: NextHopSpec,
    },
    Withdraw {
        prefix: IpPrefix,
    },
}

impl fmt::Display for Update {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Update::Announce { prefix, nexthop } => write!(f, "a {prefix} {nexthop}"),
            Update::Withdraw { prefix } => write!(f, "w {prefix}"),
        }
    }
}

/// Why a line of the stream is bad.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StreamError {
    /// The line is not UTF-8.
    NotUtf8,
    /// The line is longer than [`StreamOptions::max_line_len`].
    TooLong,
    /// The verb is neither `a` nor `w`.
    BadVerb,
    /// The prefix does not parse (address, `/`, length of the address's family).
    BadPrefix,
    /// Bits past the prefix length are set.
    HostBitsSet,
    /// The prefix or (for `a`) the next hop is missing.
    MissingField,
    /// More fields than the verb takes.
    ExtraField,
    /// The next hop is no address, keyword or `#N` with `N` in `1..=u32::MAX`.
    BadNextHop,
    /// The gateway is of the other family than the prefix.
    WrongFamily,
}

impl StreamError {
    /// Every reason, in report order.
    pub const ALL: [StreamError; 9] = [
        StreamError::NotUtf8,
        StreamError::TooLong,
        StreamError::BadVerb,
        StreamError::BadPrefix,
        StreamError::HostBitsSet,
        StreamError::MissingField,
        StreamError::ExtraField,
        StreamError::BadNextHop,
        StreamError::WrongFamily,
    ];

    /// Short human text.
    pub fn as_str(self) -> &'static str {
        match self {
            StreamError::NotUtf8 => "not UTF-8",
            StreamError::TooLong => "line too long",
            StreamError::BadVerb => "bad verb (a or w)",
            StreamError::BadPrefix => "bad prefix",
            StreamError::HostBitsSet => "host bits set past the prefix length",
            StreamError::MissingField => "missing field",
            StreamError::ExtraField => "extra field",
            StreamError::BadNextHop => "bad next hop",
            StreamError::WrongFamily => "next hop of the other address family",
        }
    }
}

impl fmt::Display for StreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::error::Error for StreamError {}

/// A bad line: where, why, and its start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// Line number, from 1.
    pub line: u64,
    pub reason: StreamError,
    /// The start of the line (at most 80 bytes, lossy UTF-8).
    pub text: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}: `{}`", self.line, self.reason, self.text)
    }
}

impl std::error::Error for ParseError {}

/// Why reading the stream stopped.
#[derive(Debug)]
pub enum ReadError {
    Io(io::Error),
    Parse(ParseError),
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Io(e) => write!(f, "read error: {e}"),
            ReadError::Parse(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ReadError {}

/// Why an update could not be applied. The RIB is unchanged when one is returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApplyError {
    /// `#N` names no live next hop.
    UnknownNextHop(u32),
    /// The RIB refused the route.
    Rib(RibError),
}

impl fmt::Display for ApplyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApplyError::UnknownNextHop(n) => write!(f, "no next hop with index {n}"),
            ApplyError::Rib(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ApplyError {}

impl From<RibError> for ApplyError {
    fn from(e: RibError) -> Self {
        ApplyError::Rib(e)
    }
}

/// Options of the [`UpdateReader`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamOptions {
    /// Skip bad lines and count them instead of stopping at the first.
    pub skip_bad: bool,
    /// Longest line in bytes (default 4096).
    pub max_line_len: usize,
}

impl Default for StreamOptions {
    fn default() -> Self {
        StreamOptions {
            skip_bad: false,
            max_line_len: 4096,
        }
    }
}

/// What a read did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamReport {
    /// Lines read (including blank and comment lines).
    pub lines: u64,
    /// Updates returned.
    pub updates: u64,
    /// Bad lines skipped, by reason (only with [`StreamOptions::skip_bad`]).
    pub skipped: BTreeMap<StreamError, u64>,
}

impl StreamReport {
    /// Bad lines skipped, all reasons together.
    pub fn skipped_total(&self) -> u64 {
        self.skipped.values().sum()
    }
}

impl fmt::Display for StreamReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} lines, {} updates", self.lines, self.updates)?;
        if !self.skipped.is_empty() {
            write!(f, "; skipped {} bad lines (", self.skipped_total())?;
            for (i, (reason, n)) in self.skipped.iter().enumerate() {
                let sep = if i == 0 { "" } else { ", " };
                write!(f, "{sep}{n} {reason}")?;
            }
            f.write_str(")")?;
        }
        Ok(())
    }
}

fn parse_prefix(s: &str) -> Result<IpPrefix, StreamError> {
    let (addr, len) = parse_addr_len(s).map_err(|_| StreamError::BadPrefix)?;
    let host_bits = |e| match e {
        PrefixError::HostBitsSet => StreamError::HostBitsSet,
        _ => StreamError::BadPrefix,
    };
    match addr {
        IpAddr::V4(a) => Prefix::new(u32::from(a), len)
            .map(IpPrefix::V4)
            .map_err(host_bits),
        IpAddr::V6(a) => Prefix::new(u128::from(a), len)
            .map(IpPrefix::V6)
            .map_err(host_bits),
    }
}

fn parse_nexthop(s: &str, prefix: &IpPrefix) -> Result<NextHopSpec, StreamError> {
    match s {
        "blackhole" => return Ok(NextHopSpec::Blackhole),
        "unreachable" => return Ok(NextHopSpec::Unreachable),
        "local" => return Ok(NextHopSpec::Local),
        _ => {}
    }
    if let Some(n) = s.strip_prefix('#') {
        if n.is_empty() || n.len() > 10 || !n.bytes().all(|b| b.is_ascii_digit()) {
            return Err(StreamError::BadNextHop);
        }
        return match n.parse::<u32>() {
            Ok(0) | Err(_) => Err(StreamError::BadNextHop),
            Ok(n) => Ok(NextHopSpec::Index(n)),
        };
    }
    let a: IpAddr = s.parse().map_err(|_| StreamError::BadNextHop)?;
    let same = matches!(
        (prefix, a),
        (IpPrefix::V4(_), IpAddr::V4(_)) | (IpPrefix::V6(_), IpAddr::V6(_))
    );
    if same {
        Ok(NextHopSpec::Gateway(a))
    } else {
        Err(StreamError::WrongFamily)
    }
}

/// Parses one line (without its newline). `Ok(None)` for blank and comment lines.
pub fn parse_update(line: &str) -> Result<Option<Update>, StreamError> {
    // Fields up to the first one that starts a comment; `#N` in the next-hop position of an
    // announcement is a next hop, not a comment.
    let mut fields: [&str; 4] = [""; 4];
    let mut n = 0usize;
    for field in line.split_ascii_whitespace() {
        let is_index = n == 2
            && fields.first() == Some(&"a")
            && field.starts_with('#')
            && field.as_bytes().get(1).is_some_and(u8::is_ascii_digit);
        let field = if is_index {
            field
        } else {
            match field.split_once('#') {
                Some(("", _)) => break,
                Some((before, _)) => {
                    if let Some(slot) = fields.get_mut(n) {
                        *slot = before;
                    }
                    n = n.saturating_add(1);
                    break;
                }
                None => field,
            }
        };
        match fields.get_mut(n) {
            Some(slot) => *slot = field,
            None => return Err(StreamError::ExtraField),
        }
        n = n.saturating_add(1);
    }
    let [verb, prefix, nexthop, extra] = fields;
    match (n, verb) {
        (0, _) => Ok(None),
        (_, "a") => {
            if n < 3 {
                // A bad prefix is reported as such even when the next hop is missing too.
                let bad_prefix = if n == 2 {
                    parse_prefix(prefix).err()
                } else {
                    None
                };
                return Err(bad_prefix.unwrap_or(StreamError::MissingField));
            }
            if n > 3 || !extra.is_empty() {
                return Err(StreamError::ExtraField);
            }
            let prefix = parse_prefix(prefix)?;
            let nexthop = parse_nexthop(nexthop, &prefix)?;
            Ok(Some(Update::Announce { prefix, nexthop }))
        }
        (_, "w") => {
            if n < 2 {
                return Err(StreamError::MissingField);
            }
            if n > 2 {
                return Err(StreamError::ExtraField);
            }
            Ok(Some(Update::Withdraw {
                prefix: parse_prefix(prefix)?,
            }))
        }
        _ => Err(StreamError::BadVerb),
    }
}

fn snippet(line: &[u8]) -> String {
    const MAX: usize = 80;
    String::from_utf8_lossy(line.get(..MAX).unwrap_or(line))
        .trim()
        .to_owned()
}

/// Reads updates from a stream: an iterator of `(line number, update)`. It stops after the
/// first error (I/O, or a bad line unless [`StreamOptions::skip_bad`]).
pub struct UpdateReader<R: BufRead> {
    input: R,
    opts: StreamOptions,
    report: StreamReport,
    buf: Vec<u8>,
    done: bool,
}

impl<R: BufRead> UpdateReader<R> {
    pub fn new(input: R, opts: StreamOptions) -> Self {
        UpdateReader {
            input,
            opts,
            report: StreamReport::default(),
            buf: Vec::with_capacity(128),
            done: false,
        }
    }

    /// What the reader has done so far.
    pub fn report(&self) -> &StreamReport {
        &self.report
    }

    /// The report, consuming the reader.
    pub fn into_report(self) -> StreamReport {
        self.report
    }
}

impl<R: BufRead> Iterator for UpdateReader<R> {
    type Item = Result<(u64, Update), ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            let too_long = match vfsr_table::text::next_line(
                &mut self.input,
                &mut self.buf,
                self.opts.max_line_len,
            ) {
                Ok(Some(t)) => t,
                Ok(None) => {
                    self.done = true;
                    return None;
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(ReadError::Io(e)));
                }
            };
            self.report.lines = self.report.lines.saturating_add(1);
            let parsed = if too_long {
                Err(StreamError::TooLong)
            } else {
                match std::str::from_utf8(&self.buf) {
                    Ok(s) => parse_update(s),
                    Err(_) => Err(StreamError::NotUtf8),
                }
            };
            match parsed {
                Ok(None) => {}
                Ok(Some(u)) => {
                    self.report.updates = self.report.updates.saturating_add(1);
                    return Some(Ok((self.report.lines, u)));
                }
                Err(reason) if self.opts.skip_bad => {
                    let n = self.report.skipped.entry(reason).or_insert(0);
                    *n = n.saturating_add(1);
                }
                Err(reason) => {
                    self.done = true;
                    return Some(Err(ReadError::Parse(ParseError {
                        line: self.report.lines,
                        reason,
                        text: snippet(&self.buf),
                    })));
                }
            }
        }
        None
    }
}

/// Reads a whole stream into a list.
pub fn read_updates<R: BufRead>(
    input: R,
    opts: StreamOptions,
) -> Result<(Vec<Update>, StreamReport), ReadError> {
    let mut reader = UpdateReader::new(input, opts);
    let mut out = Vec::new();
    for item in reader.by_ref() {
        out.push(item?.1);
    }
    Ok((out, reader.into_report()))
}

impl Rib {
    /// The forwards a next-hop spec stands for now (several for a group's index).
    fn resolve(&self, spec: NextHopSpec) -> Result<Vec<Forward>, ApplyError> {
        Ok(match spec {
            NextHopSpec::Gateway(addr) => vec![Forward::Gateway {
                addr,
                ifindex: None,
            }],
            NextHopSpec::Blackhole => vec![Forward::Blackhole],
            NextHopSpec::Unreachable => vec![Forward::Unreachable],
            NextHopSpec::Local => vec![Forward::Local],
            NextHopSpec::Index(n) => {
                let nh = self.nexthops();
                let entry = nh
                    .id_of_index(n)
                    .and_then(|id| nh.get(id))
                    .ok_or(ApplyError::UnknownNextHop(n))?;
                match &entry.forward {
                    Forward::Group { members, .. } => members
                        .iter()
                        .map(|&m| {
                            nh.id_of_index(m)
                                .and_then(|id| nh.get(id))
                                .map(|e| e.forward.clone())
                                .ok_or(ApplyError::UnknownNextHop(m))
                        })
                        .collect::<Result<Vec<_>, _>>()?,
                    single => vec![single.clone()],
                }
            }
        })
    }

    fn apply_family<K: RibFamily>(
        &mut self,
        prefix: Prefix<K>,
        nexthop: Option<NextHopSpec>,
        source: Source,
    ) -> Result<(), ApplyError> {
        match nexthop {
            None => {
                self.withdraw(prefix, source);
                Ok(())
            }
            Some(spec) => {
                let routes: Vec<RibRoute> = self
                    .resolve(spec)?
                    .into_iter()
                    .map(|f| RibRoute::new(source, f))
                    .collect();
                self.replace(prefix, source, &routes)?;
                Ok(())
            }
        }
    }

    /// Applies one update as routes of `source`: an announcement replaces the source's routes
    /// of the prefix, a withdrawal removes them (withdrawing nothing is no error).
    pub fn apply(&mut self, update: &Update, source: Source) -> Result<(), ApplyError> {
        let (prefix, nexthop) = match *update {
            Update::Announce { prefix, nexthop } => (prefix, Some(nexthop)),
            Update::Withdraw { prefix } => (prefix, None),
        };
        match prefix {
            IpPrefix::V4(p) => self.apply_family(p, nexthop, source),
            IpPrefix::V6(p) => self.apply_family(p, nexthop, source),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(s: &str) -> IpPrefix {
        match parse_prefix(s).unwrap() {
            p @ IpPrefix::V4(_) => p,
            IpPrefix::V6(_) => panic!("not v4"),
        }
    }

    #[test]
    fn good_lines() {
        assert_eq!(parse_update(""), Ok(None));
        assert_eq!(parse_update(" \t\r"), Ok(None));
        assert_eq!(parse_update("# a 10.0.0.0/8 1.2.3.4"), Ok(None));
        assert_eq!(
            parse_update("a\t10.0.0.0/8  192.0.2.1 # core\r"),
            Ok(Some(Update::Announce {
                prefix: v4("10.0.0.0/8"),
                nexthop: NextHopSpec::Gateway("192.0.2.1".parse().unwrap()),
            }))
        );
        assert_eq!(
            parse_update("a 10.0.0.0/8 #12"),
            Ok(Some(Update::Announce {
                prefix: v4("10.0.0.0/8"),
                nexthop: NextHopSpec::Index(12),
            }))
        );
        assert_eq!(
            parse_update("w 10.0.0.0/8#gone"),
            Ok(Some(Update::Withdraw {
                prefix: v4("10.0.0.0/8")
            }))
        );
        assert_eq!(
            parse_update("w 0.0.0.0/0 # default"),
            Ok(Some(Update::Withdraw {
                prefix: v4("0.0.0.0/0")
            }))
        );
        for (kw, spec) in [
            ("blackhole", NextHopSpec::Blackhole),
            ("unreachable", NextHopSpec::Unreachable),
            ("local", NextHopSpec::Local),
        ] {
            let line = format!("a 2001:db8::/32 {kw}");
            let u = parse_update(&line).unwrap().unwrap();
            assert!(matches!(u, Update::Announce { nexthop, .. } if nexthop == spec));
            assert_eq!(u.to_string(), line);
        }
        let u = parse_update("a ::/0 ::1").unwrap().unwrap();
        assert_eq!(u.to_string(), "a ::/0 ::1");
    }

    #[test]
    fn every_reason() {
        let cases = [
            ("x 10.0.0.0/8 1.2.3.4", StreamError::BadVerb),
            ("announce 10.0.0.0/8 1.2.3.4", StreamError::BadVerb),
            ("A 10.0.0.0/8 1.2.3.4", StreamError::BadVerb),
            ("a 10.0.0.300/8 1.2.3.4", StreamError::BadPrefix),
            ("a 10.0.0.0 1.2.3.4", StreamError::BadPrefix),
            ("a 10.0.0.0/33 1.2.3.4", StreamError::BadPrefix),
            ("a 10.0.0.0/+8 1.2.3.4", StreamError::BadPrefix),
            ("w 2001:db8::/129", StreamError::BadPrefix),
            ("w 10.0.0.0/", StreamError::BadPrefix),
            ("a 10.0.0.1/8 1.2.3.4", StreamError::HostBitsSet),
            ("w 2001:db8::1/32", StreamError::HostBitsSet),
            ("a", StreamError::MissingField),
            ("a 10.0.0.0/8", StreamError::MissingField),
            ("a 10.0.0.1/8", StreamError::HostBitsSet),
            ("w", StreamError::MissingField),
            ("w # nothing", StreamError::MissingField),
            ("a 10.0.0.0/8 1.2.3.4 5", StreamError::ExtraField),
            ("a 10.0.0.0/8 1.2.3.4 5 6 7", StreamError::ExtraField),
            ("w 10.0.0.0/8 1.2.3.4", StreamError::ExtraField),
            ("a 10.0.0.0/8 gw", StreamError::BadNextHop),
            ("a 10.0.0.0/8 #0", StreamError::BadNextHop),
            ("a 10.0.0.0/8 #4294967296", StreamError::BadNextHop),
            ("a 10.0.0.0/8 #5x", StreamError::BadNextHop),
            ("a 10.0.0.0/8 2001:db8::1", StreamError::WrongFamily),
            ("a 2001:db8::/32 192.0.2.1", StreamError::WrongFamily),
        ];
        for (line, want) in cases {
            assert_eq!(parse_update(line), Err(want), "{line}");
        }
        // Anywhere else a `#` starts a comment, inside a field too.
        assert!(matches!(
            parse_update("a 10.0.0.0/8 1.2.3.4#c"),
            Ok(Some(Update::Announce { .. }))
        ));
        assert_eq!(
            parse_update("a 10.0.0.0/8 #x"),
            Err(StreamError::MissingField)
        );
    }

    #[test]
    fn reader_counts_and_stops() {
        let input = b"a 10.0.0.0/8 192.0.2.1\r\n\n# c\nq\nw 10.0.0.1/8\n\xff\nw 10.0.0.0/8";
        let opts = StreamOptions {
            skip_bad: true,
            ..StreamOptions::default()
        };
        let (u, r) = read_updates(&input[..], opts).unwrap();
        assert_eq!(u.len(), 2);
        assert_eq!(r.lines, 7);
        assert_eq!(r.updates, 2);
        assert_eq!(r.skipped_total(), 3);
        assert_eq!(r.skipped.get(&StreamError::NotUtf8), Some(&1));
        assert_eq!(r.skipped.get(&StreamError::BadVerb), Some(&1));
        assert!(r.to_string().contains("skipped 3 bad lines"));

        let mut it = UpdateReader::new(&input[..], StreamOptions::default());
        assert_eq!(it.next().unwrap().unwrap().0, 1);
        match it.next() {
            Some(Err(ReadError::Parse(e))) => {
                assert_eq!(e.line, 4);
                assert_eq!(e.reason, StreamError::BadVerb);
                assert_eq!(e.to_string(), "line 4: bad verb (a or w): `q`");
            }
            other => panic!("{other:?}"),
        }
        assert!(it.next().is_none());
    }

    #[test]
    fn long_lines() {
        let input = format!("a 10.0.0.0/8 local # {}\nw 10.0.0.0/8\n", "x".repeat(5000));
        let e = read_updates(input.as_bytes(), StreamOptions::default()).unwrap_err();
        assert!(matches!(
            e,
            ReadError::Parse(ParseError {
                line: 1,
                reason: StreamError::TooLong,
                ..
            })
        ));
        let opts = StreamOptions {
            skip_bad: true,
            max_line_len: 100,
        };
        let (u, r) = read_updates(input.as_bytes(), opts).unwrap();
        assert_eq!(u.len(), 1);
        assert_eq!(r.skipped.get(&StreamError::TooLong), Some(&1));
    }

    #[test]
    fn apply_to_the_rib() {
        let mut rib = Rib::new();
        let up = |s: &str| parse_update(s).unwrap().unwrap();
        rib.apply(&up("a 10.0.0.0/8 192.0.2.1"), Source::Fpm)
            .unwrap();
        rib.apply(&up("a 11.0.0.0/8 #1"), Source::Fpm).unwrap();
        let IpPrefix::V4(p11) = v4("11.0.0.0/8") else {
            panic!("11.0.0.0/8 is IPv4")
        };
        assert_eq!(rib.fib_value(&p11), 1);
        assert_eq!(
            rib.apply(&up("a 12.0.0.0/8 #9"), Source::Fpm),
            Err(ApplyError::UnknownNextHop(9))
        );
        rib.apply(&up("a 2001:db8::/32 2001:db8::1"), Source::Fpm)
            .unwrap();
        // Index 2 is an IPv6 gateway: not for an IPv4 prefix.
        assert_eq!(
            rib.apply(&up("a 12.0.0.0/8 #2"), Source::Fpm),
            Err(ApplyError::Rib(RibError::WrongFamily))
        );
        assert_eq!(rib.v4().len(), 2);
        // A group index re-announces its members.
        rib.replace(
            p11,
            Source::Static,
            &[
                RibRoute::new(Source::Static, Forward::Blackhole),
                RibRoute::new(Source::Static, Forward::Local),
            ],
        )
        .unwrap();
        let g = rib.fib_value(&p11);
        rib.apply(&up(&format!("a 13.0.0.0/8 #{g}")), Source::Static)
            .unwrap();
        let IpPrefix::V4(p13) = v4("13.0.0.0/8") else {
            panic!("13.0.0.0/8 is IPv4")
        };
        assert_eq!(rib.fib_value(&p13), g);
        rib.apply(&up("w 10.0.0.0/8"), Source::Fpm).unwrap();
        rib.apply(&up("w 10.0.0.0/8"), Source::Fpm).unwrap();
        assert_eq!(rib.v4().len(), 2);
    }
}
