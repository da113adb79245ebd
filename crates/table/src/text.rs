//! The text table format: one route per line.
//!
//! ```text
//!   # full-line comment
//!   10.0.0.0/8                      # no gateway: the next hop is nh64(10.0.0.0/8) = 22
//!   192.0.2.0/24   198.51.100.1     # gateway: the next hop is its TableGateways index (65..)
//!   2001:db8::/32  2001:db8::1      # both families may be mixed in one file
//! ```
//!
//! A line is `PREFIX [GATEWAY]`: an address, `/`, a decimal length, and optionally a gateway
//! address of the same family. Anything after `#` is a comment; blank lines are ignored;
//! spaces, tabs and a trailing `\r` (CRLF files) are tolerated anywhere between fields. Host
//! bits past the length must be clear. Gzip input is recognised by its magic bytes.
//!
//! A bad line is an [`Error::Line`] naming the file, the line number and the
//! [`LineError`]; with [`ReadOptions::skip_bad`] it is skipped and counted by reason in the
//! [`TextReport`] instead. Routes are kept in file order; a prefix given twice is kept twice
//! (`vfsr_lpm::canonicalize` lets the later line win).
//!
//! [`write_text`] writes a [`Table`] back in this format: the gateway where the next hop is a
//! gateway index, nothing where it is the prefix's nh64 value.

use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, BufRead, BufWriter, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;

use vfsr_lpm::prefix::parse_addr_len;
use vfsr_lpm::{Key, NextHop, Prefix, PrefixError, Route};

use crate::error::{Error, WriteError};
use crate::input;
use crate::nh64::nh64;
use crate::{ReadOptions, Table};

/// Why a line of a text table is bad.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LineError {
    /// The line is not UTF-8.
    NotUtf8,
    /// The line is longer than [`ReadOptions::max_line_len`].
    TooLong,
    /// The prefix's address does not parse.
    BadAddress,
    /// The length is missing, not a number, or longer than the address.
    BadLength,
    /// Bits past the prefix length are set (`10.0.0.1/8`).
    HostBitsSet,
    /// The gateway does not parse as an address.
    BadGateway,
    /// The gateway is of the other family than the prefix.
    WrongFamilyGateway,
    /// More than two fields before the comment.
    TrailingJunk,
}

impl LineError {
    /// Every reason, in report order.
    pub const ALL: [LineError; 8] = [
        LineError::NotUtf8,
        LineError::TooLong,
        LineError::BadAddress,
        LineError::BadLength,
        LineError::HostBitsSet,
        LineError::BadGateway,
        LineError::WrongFamilyGateway,
        LineError::TrailingJunk,
    ];

    /// Short human text.
    pub fn as_str(self) -> &'static str {
        match self {
            LineError::NotUtf8 => "not UTF-8",
            LineError::TooLong => "line too long",
            LineError::BadAddress => "bad address",
            LineError::BadLength => "bad prefix length",
            LineError::HostBitsSet => "host bits set past the prefix length",
            LineError::BadGateway => "bad gateway address",
            LineError::WrongFamilyGateway => "gateway of the other address family",
            LineError::TrailingJunk => "trailing junk after the gateway",
        }
    }
}

impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::error::Error for LineError {}

/// One parsed route line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Line {
    V4 {
        prefix: Prefix<u32>,
        gateway: Option<Ipv4Addr>,
    },
    V6 {
        prefix: Prefix<u128>,
        gateway: Option<Ipv6Addr>,
    },
}

/// What a text read did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TextReport {
    /// Lines read (including blank and comment lines).
    pub lines: u64,
    /// IPv4 routes added.
    pub v4: usize,
    /// IPv6 routes added.
    pub v6: usize,
    /// Bad lines skipped, by reason (only with [`ReadOptions::skip_bad`]).
    pub skipped: BTreeMap<LineError, u64>,
}

impl TextReport {
    /// Bad lines skipped, all reasons together.
    pub fn skipped_total(&self) -> u64 {
        self.skipped.values().sum()
    }
}

impl fmt::Display for TextReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} lines, {} IPv4 and {} IPv6 routes",
            self.lines, self.v4, self.v6
        )?;
        if !self.skipped.is_empty() {
            write!(f, "; skipped {} bad lines (", self.skipped_total())?;
            for (i, (reason, n)) in self.skipped.iter().enumerate() {
                let sep = if i == 0 { "" } else { ", " };
                write!(f, "{sep}{n} {reason}")?;
            }
            write!(f, ")")?;
        }
        Ok(())
    }
}

/// The line's prefix, read by the one reader of prefix text.
fn read_prefix(text: &str) -> Result<(IpAddr, u8), LineError> {
    parse_addr_len(text).map_err(|e| match e {
        PrefixError::BadAddress => LineError::BadAddress,
        _ => LineError::BadLength,
    })
}

fn make_prefix<K: Key>(addr: K, len: u8) -> Result<Prefix<K>, LineError> {
    Prefix::new(addr, len).map_err(|e| match e {
        PrefixError::HostBitsSet => LineError::HostBitsSet,
        _ => LineError::BadLength,
    })
}

/// Parses one line (without its newline). `Ok(None)` for blank and comment lines.
pub fn parse_line(line: &str) -> Result<Option<Line>, LineError> {
    let content = match line.split_once('#') {
        Some((before, _comment)) => before,
        None => line,
    };
    let mut fields = content.split_ascii_whitespace();
    let Some(prefix) = fields.next() else {
        return Ok(None);
    };
    let gateway = fields.next();
    if fields.next().is_some() {
        return Err(LineError::TrailingJunk);
    }
    let (addr, len) = read_prefix(prefix)?;
    let gateway = match gateway {
        Some(g) => Some(g.parse::<IpAddr>().map_err(|_| LineError::BadGateway)?),
        None => None,
    };
    match addr {
        IpAddr::V6(a) => {
            let prefix = make_prefix(u128::from(a), len)?;
            let gateway = match gateway {
                None => None,
                Some(IpAddr::V6(g)) => Some(g),
                Some(IpAddr::V4(_)) => return Err(LineError::WrongFamilyGateway),
            };
            Ok(Some(Line::V6 { prefix, gateway }))
        }
        IpAddr::V4(a) => {
            let prefix = make_prefix(u32::from(a), len)?;
            let gateway = match gateway {
                None => None,
                Some(IpAddr::V4(g)) => Some(g),
                Some(IpAddr::V6(_)) => return Err(LineError::WrongFamilyGateway),
            };
            Ok(Some(Line::V4 { prefix, gateway }))
        }
    }
}

/// Reads the next line into `buf` (without its `\n`). `None` at the end of the input;
/// `Some(true)` when the line was longer than `max` bytes (the rest of it is discarded), so a
/// hostile input without newlines never makes a line buffer grow past `max`. Shared by the
/// line-based readers of outside input (tables here, the update stream in `vfsr-rib`).
pub fn next_line(r: &mut dyn BufRead, buf: &mut Vec<u8>, max: usize) -> io::Result<Option<bool>> {
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
        // The last line of an input without a final newline.
        return Ok(Some(false));
    }
    loop {
        let avail = r.fill_buf()?;
        if avail.is_empty() {
            break;
        }
        match avail.iter().position(|&b| b == b'\n') {
            Some(i) => {
                r.consume(i.saturating_add(1));
                break;
            }
            None => {
                let n = avail.len();
                r.consume(n);
            }
        }
    }
    Ok(Some(true))
}

/// The start of a line, for error messages.
fn snippet(line: &[u8]) -> String {
    const MAX: usize = 80;
    let s = String::from_utf8_lossy(line.get(..MAX).unwrap_or(line));
    s.trim().to_owned()
}

/// Adds one parsed line to the table.
fn add_line(table: &mut Table, line: Line, file: &str) -> Result<(), Error> {
    let intern = |table: &mut Table, gw: IpAddr| {
        table
            .nexthops
            .intern(gw)
            .ok_or_else(|| Error::NextHopsExhausted {
                file: file.to_owned(),
            })
    };
    match line {
        Line::V4 { prefix, gateway } => {
            let nh = match gateway {
                Some(g) => intern(table, IpAddr::V4(g))?,
                None => nh64(&prefix),
            };
            table.v4.push(Route::new(prefix, nh));
        }
        Line::V6 { prefix, gateway } => {
            let nh = match gateway {
                Some(g) => intern(table, IpAddr::V6(g))?,
                None => nh64(&prefix),
            };
            table.v6.push(Route::new(prefix, nh));
        }
    }
    Ok(())
}

/// Reads text routes from an opened (decompressed) stream into `table`.
pub(crate) fn read_stream(
    table: &mut Table,
    r: &mut dyn BufRead,
    file: &str,
    opts: &ReadOptions,
) -> Result<TextReport, Error> {
    let mut report = TextReport::default();
    let mut buf = Vec::with_capacity(256);
    let start = table.len();
    loop {
        let too_long = match next_line(r, &mut buf, opts.max_line_len) {
            Ok(Some(t)) => t,
            Ok(None) => break,
            Err(e) => return Err(input::read_error(file, e, opts.max_bytes)),
        };
        report.lines = report.lines.saturating_add(1);
        let parsed = if too_long {
            Err(LineError::TooLong)
        } else {
            match std::str::from_utf8(&buf) {
                Ok(s) => parse_line(s),
                Err(_) => Err(LineError::NotUtf8),
            }
        };
        match parsed {
            Ok(None) => {}
            Ok(Some(line)) => {
                if table.len().saturating_sub(start) >= opts.max_routes {
                    return Err(Error::TooManyRoutes {
                        file: file.to_owned(),
                        limit: opts.max_routes,
                    });
                }
                match line {
                    Line::V4 { .. } => report.v4 = report.v4.saturating_add(1),
                    Line::V6 { .. } => report.v6 = report.v6.saturating_add(1),
                }
                add_line(table, line, file)?;
            }
            Err(reason) if opts.skip_bad => {
                let n = report.skipped.entry(reason).or_insert(0);
                *n = n.saturating_add(1);
            }
            Err(reason) => {
                return Err(Error::Line {
                    file: file.to_owned(),
                    line: report.lines,
                    reason,
                    text: snippet(&buf),
                })
            }
        }
    }
    Ok(report)
}

/// Reads a text table (plain or gzip) and adds its routes to `table`, sharing its
/// [`TableGateways`](crate::TableGateways). On error `table` may hold part of the input.
/// `file` names the input in errors.
pub fn read_text_into<R: Read>(
    table: &mut Table,
    input: R,
    file: &str,
    opts: &ReadOptions,
) -> Result<TextReport, Error> {
    let mut reader = input::open_input(input, file, opts)?.reader;
    read_stream(table, &mut reader, file, opts)
}

/// Reads a text table (plain or gzip) into a new [`Table`]. `file` names the input in errors.
pub fn read_text<R: Read>(
    input: R,
    file: &str,
    opts: &ReadOptions,
) -> Result<(Table, TextReport), Error> {
    input::into_new_table(|t| read_text_into(t, input, file, opts))
}

/// Reads a text table file (plain or gzip).
pub fn read_text_file(path: &Path, opts: &ReadOptions) -> Result<(Table, TextReport), Error> {
    let f = input::open_file(path)?;
    read_text(f, &path.display().to_string(), opts)
}

/// Writes one route line.
fn write_route<K: Key>(
    out: &mut impl Write,
    table: &Table,
    prefix: &Prefix<K>,
    nexthop: NextHop,
) -> Result<(), WriteError>
where
    Prefix<K>: fmt::Display,
{
    let same_family = |gw: &IpAddr| gw.is_ipv4() == (K::BITS == 32);
    match table.nexthops.gateway(nexthop) {
        Some(gw) if same_family(&gw) => writeln!(out, "{prefix} {gw}")?,
        _ if nexthop == nh64(prefix) => writeln!(out, "{prefix}")?,
        _ => {
            return Err(WriteError::Unrepresentable {
                route: prefix.to_string(),
                nexthop,
            })
        }
    }
    Ok(())
}

/// Writes `table` in the text format: IPv4 routes, then IPv6 routes, in table order. A route
/// whose next hop is a gateway index of the table is written with its gateway; one whose next
/// hop is its own nh64 value is written bare. Any other next hop cannot be expressed and is an
/// error ([`WriteError::Unrepresentable`]).
pub fn write_text<W: Write>(table: &Table, out: W) -> Result<(), WriteError> {
    let mut out = BufWriter::new(out);
    for r in &table.v4 {
        write_route(&mut out, table, &r.prefix, r.nexthop)?;
    }
    for r in &table.v6 {
        write_route(&mut out, table, &r.prefix, r.nexthop)?;
    }
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(s: &str) -> Result<(Table, TextReport), Error> {
        read_text(s.as_bytes(), "t.txt", &ReadOptions::default())
    }

    fn skip(s: impl AsRef<[u8]>) -> (Table, TextReport) {
        let opts = ReadOptions {
            skip_bad: true,
            ..ReadOptions::default()
        };
        read_text(s.as_ref(), "t.txt", &opts).unwrap()
    }

    #[test]
    fn lines() {
        assert_eq!(parse_line(""), Ok(None));
        assert_eq!(parse_line("   \t \r"), Ok(None));
        assert_eq!(parse_line("# 10.0.0.0/8"), Ok(None));
        let l = parse_line(" 10.0.0.0/8\t192.0.2.1 # core\r")
            .unwrap()
            .unwrap();
        assert_eq!(
            l,
            Line::V4 {
                prefix: Prefix::new(0x0a00_0000, 8).unwrap(),
                gateway: Some(Ipv4Addr::new(192, 0, 2, 1)),
            }
        );
        let l = parse_line("2001:db8::/32#x").unwrap().unwrap();
        assert!(matches!(l, Line::V6 { gateway: None, .. }));
        assert!(parse_line("0.0.0.0/0").unwrap().is_some());
        assert!(parse_line("::/0 ::1").unwrap().is_some());
    }

    #[test]
    fn bad_lines_have_reasons() {
        let cases = [
            ("10.0.0.300/8", LineError::BadAddress),
            ("10.0.0/8", LineError::BadAddress),
            ("010.0.0.0/8", LineError::BadAddress),
            ("2001:db8:::/32", LineError::BadAddress),
            ("10.0.0.0", LineError::BadLength),
            ("10.0.0.0/", LineError::BadLength),
            ("10.0.0.0/33", LineError::BadLength),
            ("10.0.0.0/+8", LineError::BadLength),
            ("10.0.0.0/0008", LineError::BadLength),
            ("2001:db8::/129", LineError::BadLength),
            ("10.0.0.1/8", LineError::HostBitsSet),
            ("2001:db8::1/32", LineError::HostBitsSet),
            ("10.0.0.0/8 gw", LineError::BadGateway),
            ("10.0.0.0/8 2001:db8::1", LineError::WrongFamilyGateway),
            ("2001:db8::/32 192.0.2.1", LineError::WrongFamilyGateway),
            ("10.0.0.0/8 192.0.2.1 x", LineError::TrailingJunk),
        ];
        for (line, want) in cases {
            assert_eq!(parse_line(line), Err(want), "{line}");
        }
    }

    #[test]
    fn errors_name_file_line_and_reason() {
        let e = read("10.0.0.0/8\n\n# c\n10.0.0.1/8\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "t.txt:4: host bits set past the prefix length: `10.0.0.1/8`"
        );
        let (t, r) = skip(b"10.0.0.0/8\n10.0.0.1/8\nx/1\n1.2.3.4/32 ::1\n\xff\n2001:db8::/32\n");
        assert_eq!((t.v4.len(), t.v6.len()), (1, 1));
        assert_eq!(r.lines, 6);
        assert_eq!(r.skipped_total(), 4);
        assert_eq!(r.skipped.get(&LineError::WrongFamilyGateway), Some(&1));
        assert!(r.to_string().contains("skipped 4 bad lines"));
    }

    #[test]
    fn next_hops_nh64_and_gateways() {
        let (t, r) = read(
            "10.0.0.0/8\n192.0.2.0/24 198.51.100.1\n2001:db8::/32 2001:db8::1\n\
             203.0.113.0/24 198.51.100.1",
        )
        .unwrap();
        assert_eq!((r.v4, r.v6), (3, 1));
        assert_eq!(t.v4[0].nexthop, 22);
        assert_eq!(t.v4[1].nexthop, 65);
        assert_eq!(t.v6[0].nexthop, 66);
        assert_eq!(t.v4[2].nexthop, 65);
        assert_eq!(t.nexthops.len(), 2);
    }

    #[test]
    fn long_lines() {
        let long = format!("10.0.0.0/8 # {}\n11.0.0.0/8\n", "x".repeat(10_000));
        assert!(matches!(
            read(&long),
            Err(Error::Line {
                line: 1,
                reason: LineError::TooLong,
                ..
            })
        ));
        let (t, r) = skip(&long);
        assert_eq!(t.v4.len(), 1);
        assert_eq!(r.lines, 2);
        assert_eq!(r.skipped.get(&LineError::TooLong), Some(&1));
    }

    #[test]
    fn route_cap() {
        let opts = ReadOptions {
            max_routes: 2,
            ..ReadOptions::default()
        };
        let r = read_text(&b"1.0.0.0/8\n2.0.0.0/8\n3.0.0.0/8\n"[..], "t", &opts);
        assert!(matches!(r, Err(Error::TooManyRoutes { limit: 2, .. })));
    }

    #[test]
    fn write_refuses_what_it_cannot_express() {
        let mut t = Table::new();
        let p = Prefix::<u32>::new(0x0a00_0000, 8).unwrap();
        t.v4.push(Route::new(p, 7));
        let mut out = Vec::new();
        assert!(matches!(
            write_text(&t, &mut out),
            Err(WriteError::Unrepresentable { nexthop: 7, .. })
        ));
        // A gateway index of the wrong family is refused too.
        let nh = t.nexthops.intern("::1".parse().unwrap()).unwrap();
        t.v4[0].nexthop = nh;
        assert!(write_text(&t, &mut out).is_err());
    }
}
