//! MRT TABLE_DUMP_V2 RIB dumps (RFC 6396), read with checked reads, and a small writer.
//!
//! An MRT file is a sequence of records, each a 12-byte header and a body:
//!
//! ```text
//!    0                   1                   2                   3
//!   +---------------------------------------------------------------+
//!   |                           Timestamp                           |
//!   +-------------------------------+-------------------------------+
//!   |          Type (13)            |  Subtype (1, 2, 4 are read)   |
//!   +-------------------------------+-------------------------------+
//!   |                     Length (of the body)                      |
//!   +---------------------------------------------------------------+
//!   |                         Body ...                              |
//! ```
//!
//! Of TABLE_DUMP_V2 (type 13) three subtypes are read (RFC 6396 4.3):
//!
//! ```text
//!   PEER_INDEX_TABLE (1)   collector id (4) | view name len (2) + name | peer count (2) |
//!                          peers: type (1: bit 0 = IPv6 address, bit 1 = 4-byte AS)
//!                                 | bgp id (4) | address (4/16) | AS (2/4)
//!   RIB_IPV4_UNICAST (2)   sequence (4) | prefix len (1) + prefix bytes (ceil(len/8)) |
//!   RIB_IPV6_UNICAST (4)   entry count (2) | entries:
//!                          peer index (2) | originated (4) | attr len (2) | BGP attributes
//! ```
//!
//! The next hop of an IPv4 entry is its NEXT_HOP attribute (type 3); of an IPv6 entry the
//! next-hop field of its MP_REACH_NLRI attribute (type 14), which TABLE_DUMP_V2 abbreviates
//! to `next-hop length (1) | next hop` (RFC 6396 4.3.4; the full RFC 4760 form written by
//! some dumpers is accepted too; of a 32-byte global + link-local pair the global address is
//! used). **One route per prefix:** the first entry of the record that has a usable next hop;
//! a prefix seen again in a later record keeps its first route (counted as a duplicate). The
//! gateways become next-hop indices through the table's
//! [`TableGateways`](crate::TableGateways).
//!
//! **Untrusted input.** Every field is read through a bounds-checked cursor; the crate denies
//! `unwrap`, `panic!` and unchecked indexing, so malformed input yields an [`Error`] or, with
//! [`ReadOptions::skip_bad`], a counted skip ([`MrtReport::bad_records`]) — never a panic.
//! Limits: the decompressed size ([`ReadOptions::max_bytes`]), the length of one record
//! ([`ReadOptions::max_record_len`], which also bounds the entries of a record) and the
//! number of routes ([`ReadOptions::max_routes`]). Other MRT types and other TABLE_DUMP_V2
//! subtypes (multicast, RIB_GENERIC, ADD-PATH) are skipped and counted, whatever the options.
//!
//! Why not a crate: the well-known MRT crates parse every BGP attribute (a large surface this
//! crate could not put under its no-panic lints) and drop malformed entries with a log line
//! instead of returning a value the caller can count. The subset needed here is small.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::io::{self, BufRead, BufWriter, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;

use vfsr_lpm::{Key, Prefix, Route};

use crate::error::{Error, WriteError};
use crate::input::{self, read_up_to};
use crate::{ReadOptions, Table};

/// MRT type TABLE_DUMP_V2.
pub const TABLE_DUMP_V2: u16 = 13;
/// TABLE_DUMP_V2 subtype PEER_INDEX_TABLE.
pub const PEER_INDEX_TABLE: u16 = 1;
/// TABLE_DUMP_V2 subtype RIB_IPV4_UNICAST.
pub const RIB_IPV4_UNICAST: u16 = 2;
/// TABLE_DUMP_V2 subtype RIB_IPV6_UNICAST.
pub const RIB_IPV6_UNICAST: u16 = 4;

/// Length of the MRT common header.
const HEADER_LEN: usize = 12;

/// BGP path attribute flag: the length field is two bytes.
const ATTR_EXTENDED_LENGTH: u8 = 0x10;
/// BGP path attribute type ORIGIN.
const ATTR_ORIGIN: u8 = 1;
/// BGP path attribute type AS_PATH.
const ATTR_AS_PATH: u8 = 2;
/// BGP path attribute type NEXT_HOP.
const ATTR_NEXT_HOP: u8 = 3;
/// BGP path attribute type MP_REACH_NLRI.
const ATTR_MP_REACH_NLRI: u8 = 14;

/// Why an MRT record is bad.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MrtError {
    /// The input ends inside a record header.
    TruncatedHeader,
    /// The input ends inside a record body.
    TruncatedRecord,
    /// The header's length is above [`ReadOptions::max_record_len`].
    RecordTooLarge,
    /// A field runs past the end of its record.
    Truncated,
    /// Bytes are left over after the last field of a record.
    TrailingBytes,
    /// A prefix length is longer than the address.
    BadPrefixLength,
    /// A PEER_INDEX_TABLE is malformed.
    BadPeerTable,
    /// A RIB record comes before any PEER_INDEX_TABLE.
    NoPeerTable,
    /// A RIB entry names a peer the PEER_INDEX_TABLE does not have.
    BadPeerIndex,
    /// A BGP attribute overruns its entry or has an impossible length.
    BadAttribute,
}

impl MrtError {
    /// Short human text.
    pub fn as_str(self) -> &'static str {
        match self {
            MrtError::TruncatedHeader => "input ends inside a record header",
            MrtError::TruncatedRecord => "input ends inside a record body",
            MrtError::RecordTooLarge => "record longer than the limit",
            MrtError::Truncated => "field runs past the end of the record",
            MrtError::TrailingBytes => "bytes left over after the last field",
            MrtError::BadPrefixLength => "prefix length longer than the address",
            MrtError::BadPeerTable => "malformed PEER_INDEX_TABLE",
            MrtError::NoPeerTable => "RIB record before any PEER_INDEX_TABLE",
            MrtError::BadPeerIndex => "peer index not in the PEER_INDEX_TABLE",
            MrtError::BadAttribute => "malformed BGP attribute",
        }
    }
}

impl fmt::Display for MrtError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::error::Error for MrtError {}

/// What an MRT read did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MrtReport {
    /// Records read (of every type, including skipped and bad ones).
    pub records: u64,
    /// PEER_INDEX_TABLE records read.
    pub peer_tables: u64,
    /// Peers of the last PEER_INDEX_TABLE.
    pub peers: usize,
    /// RIB_IPV4_UNICAST and RIB_IPV6_UNICAST records read.
    pub rib_records: u64,
    /// RIB entries in them.
    pub rib_entries: u64,
    /// IPv4 routes added.
    pub v4: usize,
    /// IPv6 routes added.
    pub v6: usize,
    /// Prefixes none of whose entries had a usable next hop (no route added).
    pub no_nexthop: u64,
    /// Prefixes met again in a later record of this input (the first route is kept).
    pub duplicates: u64,
    /// Records of MRT types other than TABLE_DUMP_V2, by type.
    pub skipped_types: BTreeMap<u16, u64>,
    /// TABLE_DUMP_V2 records of other subtypes than 1, 2 and 4, by subtype.
    pub skipped_subtypes: BTreeMap<u16, u64>,
    /// Bad records skipped, by reason (only with [`ReadOptions::skip_bad`]).
    pub bad_records: BTreeMap<MrtError, u64>,
}

impl MrtReport {
    /// Bad records skipped, all reasons together.
    pub fn bad_total(&self) -> u64 {
        self.bad_records.values().sum()
    }

    /// Records of other types or subtypes skipped.
    pub fn skipped_total(&self) -> u64 {
        self.skipped_types.values().sum::<u64>() + self.skipped_subtypes.values().sum::<u64>()
    }
}

impl fmt::Display for MrtReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} records ({} RIB, {} entries), {} IPv4 and {} IPv6 routes",
            self.records, self.rib_records, self.rib_entries, self.v4, self.v6
        )?;
        if self.no_nexthop > 0 {
            write!(
                f,
                "; {} prefixes without a usable next hop",
                self.no_nexthop
            )?;
        }
        if self.duplicates > 0 {
            write!(f, "; {} duplicate prefixes", self.duplicates)?;
        }
        for (t, n) in &self.skipped_types {
            write!(f, "; skipped {n} records of MRT type {t}")?;
        }
        for (s, n) in &self.skipped_subtypes {
            write!(f, "; skipped {n} TABLE_DUMP_V2 records of subtype {s}")?;
        }
        for (reason, n) in &self.bad_records {
            write!(f, "; skipped {n} bad records ({reason})")?;
        }
        Ok(())
    }
}

/// A bounds-checked cursor over a record body.
struct Cursor<'a> {
    rest: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Cursor { rest: buf }
    }

    fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    fn bytes(&mut self, n: usize) -> Result<&'a [u8], MrtError> {
        let (head, tail) = self.rest.split_at_checked(n).ok_or(MrtError::Truncated)?;
        self.rest = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], MrtError> {
        self.bytes(N)?.try_into().map_err(|_| MrtError::Truncated)
    }

    fn u8(&mut self) -> Result<u8, MrtError> {
        Ok(u8::from_be_bytes(self.array()?))
    }

    fn u16(&mut self) -> Result<u16, MrtError> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    fn u32(&mut self) -> Result<u32, MrtError> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    fn finish(&self) -> Result<(), MrtError> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(MrtError::TrailingBytes)
        }
    }
}

/// The number of peers of a PEER_INDEX_TABLE body.
fn parse_peer_table(body: &[u8]) -> Result<usize, MrtError> {
    let mut c = Cursor::new(body);
    let bad = |_| MrtError::BadPeerTable;
    let _collector = c.u32().map_err(bad)?;
    let name_len = c.u16().map_err(bad)?;
    c.bytes(usize::from(name_len)).map_err(bad)?;
    let count = c.u16().map_err(bad)?;
    for _ in 0..count {
        let peer_type = c.u8().map_err(bad)?;
        let _bgp_id = c.u32().map_err(bad)?;
        let addr_len = if peer_type & 0x01 != 0 { 16 } else { 4 };
        c.bytes(addr_len).map_err(bad)?;
        let as_len = if peer_type & 0x02 != 0 { 4 } else { 2 };
        c.bytes(as_len).map_err(bad)?;
    }
    c.finish().map_err(bad)?;
    Ok(usize::from(count))
}

/// Reads an NLRI-encoded prefix: length byte and `ceil(len / 8)` address bytes. Bits past
/// the length in the last byte are cleared (RFC 4271: they are irrelevant).
fn read_prefix<K: Key>(c: &mut Cursor<'_>) -> Result<Prefix<K>, MrtError> {
    let len = c.u8()?;
    if len > K::BITS {
        return Err(MrtError::BadPrefixLength);
    }
    let bytes = c.bytes(usize::from(len).div_ceil(8))?;
    let mut left = [0u8; 16];
    for (dst, src) in left.iter_mut().zip(bytes) {
        *dst = *src;
    }
    Ok(Prefix::new_masked(
        K::from_u128_left(u128::from_be_bytes(left)),
        len,
    ))
}

/// The next-hop address field of an MP_REACH_NLRI attribute value, abbreviated
/// (`len | next hop`) or full (`afi | safi | len | next hop | ...`).
fn mp_reach_nexthop(value: &[u8]) -> Result<&[u8], MrtError> {
    let mut c = Cursor::new(value);
    let nh_len = c.u8().map_err(|_| MrtError::BadAttribute)?;
    if usize::from(nh_len) == c.rest.len() {
        return Ok(c.rest);
    }
    let mut c = Cursor::new(value);
    let afi = c.u16().map_err(|_| MrtError::BadAttribute)?;
    let _safi = c.u8().map_err(|_| MrtError::BadAttribute)?;
    let nh_len = c.u8().map_err(|_| MrtError::BadAttribute)?;
    if afi != 1 && afi != 2 {
        return Err(MrtError::BadAttribute);
    }
    c.bytes(usize::from(nh_len))
        .map_err(|_| MrtError::BadAttribute)
}

/// The usable next hop of one RIB entry's attributes for family `K`, if any.
fn entry_nexthop<K: Key>(attrs: &[u8]) -> Result<Option<IpAddr>, MrtError> {
    let v6 = K::BITS == 128;
    let mut c = Cursor::new(attrs);
    let mut next_hop = None;
    let mut mp_next_hop = None;
    while !c.is_empty() {
        let err = |_| MrtError::BadAttribute;
        let flags = c.u8().map_err(err)?;
        let kind = c.u8().map_err(err)?;
        let len = if flags & ATTR_EXTENDED_LENGTH != 0 {
            usize::from(c.u16().map_err(err)?)
        } else {
            usize::from(c.u8().map_err(err)?)
        };
        let value = c.bytes(len).map_err(err)?;
        match kind {
            ATTR_NEXT_HOP => {
                let a: [u8; 4] = value.try_into().map_err(|_| MrtError::BadAttribute)?;
                next_hop = Some(IpAddr::V4(Ipv4Addr::from(a)));
            }
            ATTR_MP_REACH_NLRI => {
                let nh = mp_reach_nexthop(value)?;
                mp_next_hop = match nh.len() {
                    4 => <[u8; 4]>::try_from(nh)
                        .ok()
                        .map(|a| IpAddr::V4(Ipv4Addr::from(a))),
                    16 | 32 => nh
                        .get(..16)
                        .and_then(|g| <[u8; 16]>::try_from(g).ok())
                        .map(|a| IpAddr::V6(Ipv6Addr::from(a))),
                    _ => return Err(MrtError::BadAttribute),
                };
            }
            _ => {}
        }
    }
    let usable = |a: &IpAddr| a.is_ipv6() == v6;
    Ok(if v6 {
        mp_next_hop.filter(usable)
    } else {
        next_hop.or(mp_next_hop).filter(usable)
    })
}

/// One parsed RIB record.
struct RibRecord<K: Key> {
    prefix: Prefix<K>,
    entries: u16,
    nexthop: Option<IpAddr>,
}

/// Parses a RIB_IPV4_UNICAST / RIB_IPV6_UNICAST body; `peers` is the peer count of the
/// current PEER_INDEX_TABLE.
fn parse_rib<K: Key>(body: &[u8], peers: Option<usize>) -> Result<RibRecord<K>, MrtError> {
    let peers = peers.ok_or(MrtError::NoPeerTable)?;
    let mut c = Cursor::new(body);
    let _sequence = c.u32()?;
    let prefix = read_prefix::<K>(&mut c)?;
    let entries = c.u16()?;
    let mut nexthop = None;
    for _ in 0..entries {
        let peer = c.u16()?;
        let _originated = c.u32()?;
        let attr_len = c.u16()?;
        let attrs = c.bytes(usize::from(attr_len))?;
        if usize::from(peer) >= peers {
            return Err(MrtError::BadPeerIndex);
        }
        let nh = entry_nexthop::<K>(attrs)?;
        if nexthop.is_none() {
            nexthop = nh;
        }
    }
    c.finish()?;
    Ok(RibRecord {
        prefix,
        entries,
        nexthop,
    })
}

fn bump<T: Ord>(map: &mut BTreeMap<T, u64>, key: T) {
    let n = map.entry(key).or_insert(0);
    *n = n.saturating_add(1);
}

/// Reader state across records.
struct Reader<'a> {
    file: &'a str,
    opts: &'a ReadOptions,
    report: MrtReport,
    peers: Option<usize>,
    seen_v4: HashSet<Prefix<u32>>,
    seen_v6: HashSet<Prefix<u128>>,
    added: usize,
    record: u64,
    offset: u64,
}

impl Reader<'_> {
    /// A bad record: counted with `skip_bad`, an error otherwise.
    fn bad(&mut self, reason: MrtError) -> Result<(), Error> {
        if self.opts.skip_bad {
            bump(&mut self.report.bad_records, reason);
            Ok(())
        } else {
            Err(Error::Mrt {
                file: self.file.to_owned(),
                record: self.record,
                offset: self.offset,
                reason,
            })
        }
    }

    fn io(&self, e: io::Error) -> Error {
        input::read_error(self.file, e, self.opts.max_bytes)
    }

    /// Adds the route of a parsed RIB record (first route per prefix wins).
    fn add<K: Key>(
        &mut self,
        rec: RibRecord<K>,
        table: &mut Table,
        seen: fn(&mut Self) -> &mut HashSet<Prefix<K>>,
        routes: fn(&mut Table) -> &mut Vec<Route<K>>,
    ) -> Result<bool, Error> {
        self.report.rib_records = self.report.rib_records.saturating_add(1);
        self.report.rib_entries = self
            .report
            .rib_entries
            .saturating_add(u64::from(rec.entries));
        let Some(gw) = rec.nexthop else {
            self.report.no_nexthop = self.report.no_nexthop.saturating_add(1);
            return Ok(false);
        };
        if !seen(self).insert(rec.prefix) {
            self.report.duplicates = self.report.duplicates.saturating_add(1);
            return Ok(false);
        }
        if self.added >= self.opts.max_routes {
            return Err(Error::TooManyRoutes {
                file: self.file.to_owned(),
                limit: self.opts.max_routes,
            });
        }
        let nh = table
            .nexthops
            .intern(gw)
            .ok_or_else(|| Error::NextHopsExhausted {
                file: self.file.to_owned(),
            })?;
        routes(table).push(Route::new(rec.prefix, nh));
        self.added = self.added.saturating_add(1);
        Ok(true)
    }

    fn record(&mut self, table: &mut Table, kind: u16, sub: u16, body: &[u8]) -> Result<(), Error> {
        match (kind, sub) {
            (TABLE_DUMP_V2, PEER_INDEX_TABLE) => match parse_peer_table(body) {
                Ok(n) => {
                    self.peers = Some(n);
                    self.report.peers = n;
                    self.report.peer_tables = self.report.peer_tables.saturating_add(1);
                    Ok(())
                }
                Err(e) => self.bad(e),
            },
            (TABLE_DUMP_V2, RIB_IPV4_UNICAST) => match parse_rib::<u32>(body, self.peers) {
                Ok(rec) => {
                    if self.add(rec, table, |s| &mut s.seen_v4, |t| &mut t.v4)? {
                        self.report.v4 = self.report.v4.saturating_add(1);
                    }
                    Ok(())
                }
                Err(e) => self.bad(e),
            },
            (TABLE_DUMP_V2, RIB_IPV6_UNICAST) => match parse_rib::<u128>(body, self.peers) {
                Ok(rec) => {
                    if self.add(rec, table, |s| &mut s.seen_v6, |t| &mut t.v6)? {
                        self.report.v6 = self.report.v6.saturating_add(1);
                    }
                    Ok(())
                }
                Err(e) => self.bad(e),
            },
            (TABLE_DUMP_V2, s) => {
                bump(&mut self.report.skipped_subtypes, s);
                Ok(())
            }
            (t, _) => {
                bump(&mut self.report.skipped_types, t);
                Ok(())
            }
        }
    }
}

/// Reads MRT records from an opened (decompressed) stream into `table`.
pub(crate) fn read_stream(
    table: &mut Table,
    r: &mut dyn BufRead,
    file: &str,
    opts: &ReadOptions,
) -> Result<MrtReport, Error> {
    let mut rd = Reader {
        file,
        opts,
        report: MrtReport::default(),
        peers: None,
        seen_v4: HashSet::new(),
        seen_v6: HashSet::new(),
        added: 0,
        record: 0,
        offset: 0,
    };
    let mut body = Vec::new();
    loop {
        let mut header = [0u8; HEADER_LEN];
        let n = read_up_to(r, &mut header).map_err(|e| rd.io(e))?;
        if n == 0 {
            break;
        }
        rd.record = rd.record.saturating_add(1);
        rd.report.records = rd.record;
        if n < HEADER_LEN {
            rd.bad(MrtError::TruncatedHeader)?;
            break;
        }
        let mut h = Cursor::new(&header);
        let (_time, kind, sub, len) = match (h.u32(), h.u16(), h.u16(), h.u32()) {
            (Ok(t), Ok(k), Ok(s), Ok(l)) => (t, k, s, l),
            _ => {
                rd.bad(MrtError::TruncatedHeader)?;
                break;
            }
        };
        let len64 = u64::from(len);
        if len > opts.max_record_len {
            rd.bad(MrtError::RecordTooLarge)?;
            let skipped =
                io::copy(&mut (&mut *r).take(len64), &mut io::sink()).map_err(|e| rd.io(e))?;
            if skipped < len64 {
                break;
            }
        } else {
            let len = usize::try_from(len).unwrap_or(usize::MAX);
            body.clear();
            body.resize(len, 0);
            let got = read_up_to(r, &mut body).map_err(|e| rd.io(e))?;
            if got < len {
                rd.bad(MrtError::TruncatedRecord)?;
                break;
            }
            rd.record(table, kind, sub, &body)?;
        }
        rd.offset = rd
            .offset
            .saturating_add(HEADER_LEN as u64)
            .saturating_add(len64);
    }
    Ok(rd.report)
}

/// Reads an MRT TABLE_DUMP_V2 dump (plain or gzip) and adds its routes to `table`, sharing
/// its [`TableGateways`](crate::TableGateways). Duplicates are detected within this input only.
/// On error `table` may hold part of the input. `file` names the input in errors.
pub fn read_mrt_into<R: Read>(
    table: &mut Table,
    input: R,
    file: &str,
    opts: &ReadOptions,
) -> Result<MrtReport, Error> {
    let mut reader = input::open_input(input, file, opts)?.reader;
    read_stream(table, &mut reader, file, opts)
}

/// Reads an MRT TABLE_DUMP_V2 dump (plain or gzip) into a new [`Table`].
pub fn read_mrt<R: Read>(
    input: R,
    file: &str,
    opts: &ReadOptions,
) -> Result<(Table, MrtReport), Error> {
    input::into_new_table(|t| read_mrt_into(t, input, file, opts))
}

/// Reads an MRT TABLE_DUMP_V2 dump file (plain or gzip).
pub fn read_mrt_file(path: &Path, opts: &ReadOptions) -> Result<(Table, MrtReport), Error> {
    let f = input::open_file(path)?;
    read_mrt(f, &path.display().to_string(), opts)
}

/// A peer of a PEER_INDEX_TABLE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MrtPeer {
    pub bgp_id: Ipv4Addr,
    pub address: IpAddr,
    pub asn: u32,
}

/// One RIB entry to write: the peer's index, the time the route was learnt, and the raw BGP
/// path attributes (see [`attributes_v4`], [`attributes_v6`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RibEntry {
    pub peer_index: u16,
    pub originated: u32,
    pub attributes: Vec<u8>,
}

/// Appends one BGP path attribute (with the extended-length flag when the value is longer
/// than 255 bytes), for building RIB entries by hand.
pub fn push_attribute(
    out: &mut Vec<u8>,
    flags: u8,
    kind: u8,
    value: &[u8],
) -> Result<(), WriteError> {
    if let Ok(len) = u8::try_from(value.len()) {
        out.extend_from_slice(&[flags & !ATTR_EXTENDED_LENGTH, kind, len]);
    } else {
        let len = u16::try_from(value.len()).map_err(|_| WriteError::TooLong("BGP attribute"))?;
        out.extend_from_slice(&[flags | ATTR_EXTENDED_LENGTH, kind]);
        out.extend_from_slice(&len.to_be_bytes());
    }
    out.extend_from_slice(value);
    Ok(())
}

/// ORIGIN IGP and an AS_PATH of one 4-byte AS (RFC 6396 4.3.4: TABLE_DUMP_V2 always uses
/// 4-byte AS numbers).
fn common_attributes(origin_as: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(32);
    // Both values are a handful of bytes, far below the one-byte length limit.
    out.extend_from_slice(&[0x40, ATTR_ORIGIN, 1, 0]);
    out.extend_from_slice(&[0x40, ATTR_AS_PATH, 6, 2, 1]);
    out.extend_from_slice(&origin_as.to_be_bytes());
    out
}

/// Attributes of an IPv4 RIB entry: ORIGIN, AS_PATH (`origin_as`), NEXT_HOP.
pub fn attributes_v4(origin_as: u32, nexthop: Ipv4Addr) -> Vec<u8> {
    let mut out = common_attributes(origin_as);
    out.extend_from_slice(&[0x40, ATTR_NEXT_HOP, 4]);
    out.extend_from_slice(&nexthop.octets());
    out
}

/// Attributes of an IPv6 RIB entry: ORIGIN, AS_PATH (`origin_as`), and the abbreviated
/// MP_REACH_NLRI of RFC 6396 4.3.4 (next-hop length and next hop only).
pub fn attributes_v6(origin_as: u32, nexthop: Ipv6Addr) -> Vec<u8> {
    let mut out = common_attributes(origin_as);
    out.extend_from_slice(&[0x80, ATTR_MP_REACH_NLRI, 17, 16]);
    out.extend_from_slice(&nexthop.octets());
    out
}

/// Writes MRT records. Used by tests and to make fuzzing seeds; writes exactly what the
/// reader expects, plus whatever raw records a test wants to inject.
pub struct MrtWriter<W: Write> {
    out: W,
    timestamp: u32,
}

impl<W: Write> MrtWriter<W> {
    /// A writer stamping every record with `timestamp` (seconds since 1970).
    pub fn new(out: W, timestamp: u32) -> Self {
        MrtWriter { out, timestamp }
    }

    /// Writes one record with any type, subtype and body.
    pub fn record(&mut self, kind: u16, subtype: u16, body: &[u8]) -> Result<(), WriteError> {
        let len = u32::try_from(body.len()).map_err(|_| WriteError::TooLong("MRT record"))?;
        let mut header = [0u8; HEADER_LEN];
        let fields = self
            .timestamp
            .to_be_bytes()
            .into_iter()
            .chain(kind.to_be_bytes())
            .chain(subtype.to_be_bytes())
            .chain(len.to_be_bytes());
        for (dst, src) in header.iter_mut().zip(fields) {
            *dst = src;
        }
        self.out.write_all(&header)?;
        self.out.write_all(body)?;
        Ok(())
    }

    /// Writes a PEER_INDEX_TABLE (every peer with a 4-byte AS).
    pub fn peer_index_table(
        &mut self,
        collector: Ipv4Addr,
        view_name: &str,
        peers: &[MrtPeer],
    ) -> Result<(), WriteError> {
        let mut body = Vec::new();
        body.extend_from_slice(&collector.octets());
        let name_len =
            u16::try_from(view_name.len()).map_err(|_| WriteError::TooLong("view name"))?;
        body.extend_from_slice(&name_len.to_be_bytes());
        body.extend_from_slice(view_name.as_bytes());
        let count = u16::try_from(peers.len()).map_err(|_| WriteError::TooLong("peer list"))?;
        body.extend_from_slice(&count.to_be_bytes());
        for p in peers {
            let v6 = p.address.is_ipv6();
            body.push(0x02 | u8::from(v6));
            body.extend_from_slice(&p.bgp_id.octets());
            match p.address {
                IpAddr::V4(a) => body.extend_from_slice(&a.octets()),
                IpAddr::V6(a) => body.extend_from_slice(&a.octets()),
            }
            body.extend_from_slice(&p.asn.to_be_bytes());
        }
        self.record(TABLE_DUMP_V2, PEER_INDEX_TABLE, &body)
    }

    fn rib<K: Key>(
        &mut self,
        subtype: u16,
        sequence: u32,
        prefix: &Prefix<K>,
        entries: &[RibEntry],
    ) -> Result<(), WriteError> {
        let mut body = Vec::new();
        body.extend_from_slice(&sequence.to_be_bytes());
        body.push(prefix.len());
        let n = usize::from(prefix.len()).div_ceil(8);
        let addr = prefix.addr().to_u128_left().to_be_bytes();
        body.extend(addr.iter().take(n));
        let count = u16::try_from(entries.len()).map_err(|_| WriteError::TooLong("RIB entries"))?;
        body.extend_from_slice(&count.to_be_bytes());
        for e in entries {
            body.extend_from_slice(&e.peer_index.to_be_bytes());
            body.extend_from_slice(&e.originated.to_be_bytes());
            let len = u16::try_from(e.attributes.len())
                .map_err(|_| WriteError::TooLong("RIB entry attributes"))?;
            body.extend_from_slice(&len.to_be_bytes());
            body.extend_from_slice(&e.attributes);
        }
        self.record(TABLE_DUMP_V2, subtype, &body)
    }

    /// Writes a RIB_IPV4_UNICAST record.
    pub fn rib_v4(
        &mut self,
        sequence: u32,
        prefix: &Prefix<u32>,
        entries: &[RibEntry],
    ) -> Result<(), WriteError> {
        self.rib(RIB_IPV4_UNICAST, sequence, prefix, entries)
    }

    /// Writes a RIB_IPV6_UNICAST record.
    pub fn rib_v6(
        &mut self,
        sequence: u32,
        prefix: &Prefix<u128>,
        entries: &[RibEntry],
    ) -> Result<(), WriteError> {
        self.rib(RIB_IPV6_UNICAST, sequence, prefix, entries)
    }

    /// Flushes and returns the inner writer.
    pub fn into_inner(mut self) -> Result<W, WriteError> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// The AS of the single peer [`write_mrt`] declares (from the documentation range).
pub const WRITER_PEER_AS: u32 = 64496;

/// Writes `table` as a TABLE_DUMP_V2 dump: a PEER_INDEX_TABLE with one peer (192.0.2.1,
/// AS 64496), then one RIB record per route (IPv4 first, then IPv6) with a single entry whose
/// next hop is the route's gateway. Every route's next hop must be a gateway of the table's
/// [`TableGateways`](crate::TableGateways) of the route's family.
pub fn write_mrt<W: Write>(table: &Table, out: W) -> Result<(), WriteError> {
    let mut w = MrtWriter::new(BufWriter::new(out), 1_709_251_200);
    let peer_addr = Ipv4Addr::new(192, 0, 2, 1);
    w.peer_index_table(
        Ipv4Addr::new(192, 0, 2, 255),
        "vfsr",
        &[MrtPeer {
            bgp_id: peer_addr,
            address: IpAddr::V4(peer_addr),
            asn: WRITER_PEER_AS,
        }],
    )?;
    let mut sequence: u32 = 0;
    let unrepresentable = |route: String, nexthop| WriteError::Unrepresentable { route, nexthop };
    for r in &table.v4 {
        let Some(IpAddr::V4(gw)) = table.nexthops.gateway(r.nexthop) else {
            return Err(unrepresentable(r.prefix.to_string(), r.nexthop));
        };
        let entry = RibEntry {
            peer_index: 0,
            originated: 1_709_251_200,
            attributes: attributes_v4(WRITER_PEER_AS, gw),
        };
        w.rib_v4(sequence, &r.prefix, &[entry])?;
        sequence = sequence.wrapping_add(1);
    }
    for r in &table.v6 {
        let Some(IpAddr::V6(gw)) = table.nexthops.gateway(r.nexthop) else {
            return Err(unrepresentable(r.prefix.to_string(), r.nexthop));
        };
        let entry = RibEntry {
            peer_index: 0,
            originated: 1_709_251_200,
            attributes: attributes_v6(WRITER_PEER_AS, gw),
        };
        w.rib_v6(sequence, &r.prefix, &[entry])?;
        sequence = sequence.wrapping_add(1);
    }
    w.into_inner()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strict() -> ReadOptions {
        ReadOptions::default()
    }

    fn lenient() -> ReadOptions {
        ReadOptions {
            skip_bad: true,
            ..ReadOptions::default()
        }
    }

    fn sample() -> Vec<u8> {
        let text = "10.0.0.0/8 192.0.2.10\n192.0.2.0/25 192.0.2.11\n0.0.0.0/0 192.0.2.10\n\
                    2001:db8::/32 2001:db8::a\n2001:db8:1::/48 2001:db8::b\n";
        let (t, _) = crate::text::read_text(text.as_bytes(), "s", &strict()).unwrap();
        let mut out = Vec::new();
        write_mrt(&t, &mut out).unwrap();
        out
    }

    #[test]
    fn golden_bytes_of_a_small_record() {
        let mut w = MrtWriter::new(Vec::new(), 0x0102_0304);
        let p = Prefix::<u32>::new(0xc000_0200, 23).unwrap();
        let e = RibEntry {
            peer_index: 0,
            originated: 0,
            attributes: attributes_v4(64496, Ipv4Addr::new(192, 0, 2, 1)),
        };
        w.rib_v4(7, &p, &[e]).unwrap();
        let bytes = w.into_inner().unwrap();
        #[rustfmt::skip]
        let want: Vec<u8> = vec![
            1, 2, 3, 4,  0, 13,  0, 2,  0, 0, 0, 38,        // header: type 13 subtype 2, len 38
            0, 0, 0, 7,  23, 192, 0, 2,  0, 1,              // seq 7, 192.0.2.0/23, 1 entry
            0, 0,  0, 0, 0, 0,  0, 20,                      // peer 0, time 0, 20 attribute bytes
            0x40, 1, 1, 0,                                  // ORIGIN IGP
            0x40, 2, 6, 2, 1, 0, 0, 0xfb, 0xf0,             // AS_PATH [64496]
            0x40, 3, 4, 192, 0, 2, 1,                       // NEXT_HOP 192.0.2.1
        ];
        assert_eq!(bytes, want);
    }

    #[test]
    fn reads_what_it_writes() {
        let bytes = sample();
        let (t, r) = read_mrt(&bytes[..], "s.mrt", &strict()).unwrap();
        assert_eq!((r.v4, r.v6), (3, 2));
        assert_eq!(r.records, 6);
        assert_eq!(r.peer_tables, 1);
        assert_eq!(r.peers, 1);
        let gw = |nh| t.nexthops.gateway(nh).unwrap().to_string();
        assert_eq!(t.v4[0].prefix.to_string(), "10.0.0.0/8");
        assert_eq!(gw(t.v4[0].nexthop), "192.0.2.10");
        assert_eq!(gw(t.v4[1].nexthop), "192.0.2.11");
        assert_eq!(t.v4[2].nexthop, t.v4[0].nexthop);
        assert_eq!(t.v6[1].prefix.to_string(), "2001:db8:1::/48");
        assert_eq!(gw(t.v6[1].nexthop), "2001:db8::b");
    }

    #[test]
    fn first_usable_entry_wins_and_full_mp_reach_is_accepted() {
        let mut w = MrtWriter::new(Vec::new(), 0);
        let peer = MrtPeer {
            bgp_id: Ipv4Addr::new(192, 0, 2, 1),
            address: "2001:db8::1".parse().unwrap(),
            asn: 1,
        };
        w.peer_index_table(Ipv4Addr::UNSPECIFIED, "", &[peer, peer])
            .unwrap();
        let p = Prefix::<u128>::new(0x2001_0db8u128 << 96, 32).unwrap();
        // Entry 0 has no next hop; entry 1 uses the full RFC 4760 form with a link-local.
        let mut full = common_attributes(1);
        let mut value = vec![0, 2, 1, 32];
        value.extend_from_slice(&"2001:db8::99".parse::<Ipv6Addr>().unwrap().octets());
        value.extend_from_slice(&"fe80::1".parse::<Ipv6Addr>().unwrap().octets());
        value.push(0);
        push_attribute(&mut full, 0x80, ATTR_MP_REACH_NLRI, &value).unwrap();
        let entries = [
            RibEntry {
                peer_index: 0,
                originated: 0,
                attributes: common_attributes(1),
            },
            RibEntry {
                peer_index: 1,
                originated: 0,
                attributes: full,
            },
        ];
        w.rib_v6(0, &p, &entries).unwrap();
        w.rib_v6(1, &p, &entries).unwrap();
        let bytes = w.into_inner().unwrap();
        let (t, r) = read_mrt(&bytes[..], "x", &strict()).unwrap();
        assert_eq!(t.v6.len(), 1);
        assert_eq!(r.duplicates, 1);
        assert_eq!(r.rib_entries, 4);
        assert_eq!(
            t.nexthops.gateway(t.v6[0].nexthop).unwrap().to_string(),
            "2001:db8::99"
        );
    }

    #[test]
    fn other_types_and_subtypes_are_skipped_and_counted() {
        let mut bytes = sample();
        let mut w = MrtWriter::new(Vec::new(), 0);
        w.record(16, 4, b"bgp4mp").unwrap();
        w.record(TABLE_DUMP_V2, 3, b"multicast").unwrap();
        w.record(TABLE_DUMP_V2, 6, b"").unwrap();
        w.record(12, 1, b"v1").unwrap();
        bytes.extend(w.into_inner().unwrap());
        let (t, r) = read_mrt(&bytes[..], "x", &strict()).unwrap();
        assert_eq!(t.len(), 5);
        assert_eq!(r.skipped_types.get(&16), Some(&1));
        assert_eq!(r.skipped_types.get(&12), Some(&1));
        assert_eq!(r.skipped_subtypes.get(&3), Some(&1));
        assert_eq!(r.skipped_total(), 4);
        assert!(r.to_string().contains("MRT type 16"));
    }

    #[test]
    fn truncations_are_errors_or_counted() {
        let bytes = sample();
        for cut in 0..bytes.len() {
            let part = &bytes[..cut];
            let strict_result = read_mrt(part, "x", &strict());
            let (t, r) = read_mrt(part, "x", &lenient()).unwrap();
            // Every cut ends inside a record unless it falls on a record boundary.
            match strict_result {
                Ok(_) => assert_eq!(r.bad_total(), 0),
                Err(e) => {
                    assert!(matches!(e, Error::Mrt { .. }), "{e}");
                    assert_eq!(r.bad_total(), 1);
                }
            }
            assert!(t.len() <= 5);
        }
    }

    #[test]
    fn corrupt_fields() {
        let bytes = sample();
        // Prefix length of the first RIB record (offset: peer table record, then 12 + 4).
        let peer_record = 12 + u32::from_be_bytes(bytes[8..12].try_into().unwrap()) as usize;
        let mut b = bytes.clone();
        b[peer_record + 16] = 33;
        let e = read_mrt(&b[..], "x", &strict()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "x: MRT record 2 at byte 37: prefix length longer than the address"
        );
        let (t, r) = read_mrt(&b[..], "x", &lenient()).unwrap();
        assert_eq!(t.len(), 4);
        assert_eq!(r.bad_records.get(&MrtError::BadPrefixLength), Some(&1));
        // Peer index out of range.
        let mut b = bytes.clone();
        b[peer_record + 12 + 4 + 2 + 2] = 0xff;
        let (_, r) = read_mrt(&b[..], "x", &lenient()).unwrap();
        assert_eq!(r.bad_records.get(&MrtError::BadPeerIndex), Some(&1));
        // RIB record before the peer table.
        let (_, r) = read_mrt(&bytes[peer_record..], "x", &lenient()).unwrap();
        assert_eq!(r.bad_records.get(&MrtError::NoPeerTable), Some(&5));
        // A record longer than the cap.
        let opts = ReadOptions {
            max_record_len: 30,
            ..lenient()
        };
        let (t, r) = read_mrt(&bytes[..], "x", &opts).unwrap();
        // The 25-byte peer table fits; the five RIB records (35 bytes and more) do not.
        assert_eq!(r.bad_records.get(&MrtError::RecordTooLarge), Some(&5));
        assert_eq!(r.peer_tables, 1);
        assert!(t.is_empty());
    }
}
