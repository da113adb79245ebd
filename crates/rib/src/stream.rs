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
//! [`ApplyError`] then; an index of a group re-announces all its members as ECMP). A `#` at
//! the start of any other field starts a comment; blank lines are ignored; spaces, tabs and a
//! trailing `\r` are tolerated between fields.
//!
//! A bad line is a [`ParseError`] with its line number and [`StreamError`] reason; with
//! [`StreamOptions::skip_bad`] the [`UpdateReader`] skips it and counts it by reason in its
//! [`StreamReport`]. The reader never panics, whatever the bytes.

use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, BufRead, Read};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use vfsr_fib::nexthop::Forward;
use vfsr_lpm::{Key, Prefix, PrefixError};

use crate::rib::{RibError, RibFamily, RibRoute, Source};
use crate::Rib;

/// A prefix of either family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IpPrefix {
    V4(Prefix<u32>),
    V6(Prefix<u128>),
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
    fn make<K: Key>(addr: K, len: u8) -> Result<Prefix<K>, StreamError> {
        Prefix::new(addr, len).map_err(|e| match e {
            PrefixError::LengthTooLong { .. } => StreamError::BadPrefix,
            PrefixError::HostBitsSet => StreamError::HostBitsSet,
        })
    }
    let (addr, len) = s.split_once('/').ok_or(StreamError::BadPrefix)?;
    if len.is_empty() || len.len() > 3 || !len.bytes().all(|b| b.is_ascii_digit()) {
        return Err(StreamError::BadPrefix);
    }
    let len: u8 = len.parse().map_err(|_| StreamError::BadPrefix)?;
    if addr.contains(':') {
        let a: Ipv6Addr = addr.parse().map_err(|_| StreamError::BadPrefix)?;
        make(u128::from(a), len).map(IpPrefix::V6)
    } else {
        let a: Ipv4Addr = addr.parse().map_err(|_| StreamError::BadPrefix)?;
        make(u32::from(a), len).map(IpPrefix::V4)
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

/// Reads the next line into `buf` (without its `\n`). `None` at the end of the input;
/// `Some(true)` when the line was longer than `max` bytes (the rest of it is discarded).
fn next_line<R: BufRead>(r: &mut R, buf: &mut Vec<u8>, max: usize) -> io::Result<Option<bool>> {
    buf.clear();
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    let n = (&mut *r).take(limit).read_until(b'\n', buf)?;
    if n == 0 {
        return Ok(None);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
        return Ok(Some(false));
    }
    if buf.len() <= max {
        return Ok(Some(false));
    }
    // Too long: discard up to and including the next newline.
    loop {
        let avail = r.fill_buf()?;
        if avail.is_empty() {
            break;
        }
        if let Some(i) = avail.iter().position(|&b| b == b'\n') {
            r.consume(i.saturating_add(1));
            break;
        }
        let n = avail.len();
        r.consume(n);
    }
    Ok(Some(true))
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
            let too_long = match next_line(&mut self.input, &mut self.buf, self.opts.max_line_len) {
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
                    Forward::Group { members } => members
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
