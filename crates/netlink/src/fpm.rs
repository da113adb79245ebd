//! FPM framing: how zebra's `dplane_fpm_nl` module sends netlink messages over TCP.
//!
//! FRR's `fpm/fpm.h` puts a 4-byte header before each message:
//!
//! ```text
//!  0          1          2                     4
//!  +----------+----------+---------------------+------------------------------+
//!  | version  | msg_type | msg_len (u16, BE)   | netlink message(s) ...       |
//!  |    1     |  1 = nl  | header included     |                              |
//!  +----------+----------+---------------------+------------------------------+
//!  |<------------------------------ msg_len ---------------------------------->|
//! ```
//!
//! `msg_type` 2 (protobuf) is refused: this crate reads netlink only. Each frame carries one
//! or more netlink messages (zebra sends a route change as `RTM_DELROUTE` + `RTM_NEWROUTE` in
//! one frame when it cannot be a replace), so a frame is at least 4 + 16 bytes and at most
//! 65,535.
//!
//! # Reading
//!
//! [`FpmReader`] turns a byte stream into frames. Its buffer has a fixed capacity (256 KiB
//! by default, never less than one largest frame); the caller either reads straight into it
//! ([`FpmReader::spare`], then [`FpmReader::filled`]: no copy) or hands it bytes it already
//! has ([`FpmReader::push`]: one copy; the buffer then grows as needed). [`FpmReader::next_frame`]
//! returns the payload of each complete frame in turn, borrowed from the buffer.
//!
//! [`FpmStream`] adds the netlink decoder and the counters, so that the loop of a route
//! source over a nonblocking socket is short:
//!
//! ```no_run
//! # use std::io::ErrorKind;
//! # use vfsr_netlink::{FpmStream, Message, PumpStatus};
//! # fn apply(_: &[Message]) {}
//! # fn count(_: &'static str) {}
//! # let mut socket = std::net::TcpStream::connect("127.0.0.1:2620").unwrap();
//! let mut stream = FpmStream::new();
//! let mut messages = Vec::new();
//! loop {
//!     // ... after poll() says the socket is readable:
//!     messages.clear();
//!     let result = stream.pump(&mut socket, &mut messages, 1 << 20);
//!     apply(&messages); // what was decoded before any error is good
//!     match result {
//!         Ok(PumpStatus::WouldBlock) | Ok(PumpStatus::Budget) => continue,
//!         Ok(PumpStatus::Eof) => break,             // zebra closed the connection
//!         Err(e) => { count(e.reason()); break }     // close it, count why
//!     }
//! }
//! ```
//!
//! # Errors
//!
//! A frame header that is not version 1, not type 1, or shorter than 20 bytes is an
//! [`FpmError`]; the stream cannot be resynchronised after it (there is no marker to look
//! for), so the reader stays failed and the connection is to be closed. Zebra reconnects and
//! replays its whole table.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::IpAddr;

use crate::consts::{NLMSG_HDRLEN, RTPROT_BGP, RT_TABLE_MAIN};
use crate::decode::{decode_into, DecodeError, DecodeStats};
use crate::encode::encode_into;
use crate::msg::{Message, NextHop, NextHopMsg, NextHopObject, Op, Route, RouteType};

/// Length of the FPM header.
pub const FPM_HEADER_LEN: usize = 4;
/// The only FPM version (`FPM_PROTO_VERSION`).
pub const FPM_VERSION: u8 = 1;
/// `FPM_MSG_TYPE_NETLINK`.
pub const FPM_MSG_TYPE_NETLINK: u8 = 1;
/// `FPM_MSG_TYPE_PROTOBUF` (refused).
pub const FPM_MSG_TYPE_PROTOBUF: u8 = 2;
/// The largest frame, header included (`msg_len` is 16 bits).
pub const FPM_MAX_FRAME: usize = u16::MAX as usize;
/// The smallest acceptable frame: the FPM header and one netlink header.
pub const FPM_MIN_FRAME: usize = FPM_HEADER_LEN + NLMSG_HDRLEN;
/// The reader's default buffer capacity.
pub const DEFAULT_CAPACITY: usize = 256 * 1024;

/// A broken FPM stream (or, for [`FpmError::TooLong`], a payload [`frame`] cannot send).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FpmError {
    /// The header's version is not 1.
    BadVersion(u8),
    /// The header's type is not 1 (netlink); 2 is protobuf.
    BadType(u8),
    /// `msg_len` is shorter than the FPM header and a netlink header.
    BadLength(u16),
    /// A netlink payload longer than a frame can hold (65,535 − 4 bytes).
    TooLong(usize),
}

impl FpmError {
    /// A short stable name, for counters.
    pub fn reason(&self) -> &'static str {
        match self {
            FpmError::BadVersion(_) => "bad_version",
            FpmError::BadType(_) => "bad_type",
            FpmError::BadLength(_) => "bad_length",
            FpmError::TooLong(_) => "too_long",
        }
    }
}

impl fmt::Display for FpmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FpmError::BadVersion(v) => write!(f, "FPM version {v}, expected {FPM_VERSION}"),
            FpmError::BadType(FPM_MSG_TYPE_PROTOBUF) => {
                write!(f, "FPM message type 2 (protobuf): only netlink (1) is read")
            }
            FpmError::BadType(t) => write!(f, "FPM message type {t}, expected 1 (netlink)"),
            FpmError::BadLength(n) => write!(
                f,
                "FPM message length {n}, shorter than the {FPM_MIN_FRAME} bytes \
                 of an FPM and a netlink header"
            ),
            FpmError::TooLong(n) => write!(
                f,
                "netlink payload of {n} bytes does not fit in an FPM frame (at most {})",
                FPM_MAX_FRAME - FPM_HEADER_LEN
            ),
        }
    }
}

impl std::error::Error for FpmError {}

/// Appends one FPM frame carrying `netlink` to `out`.
pub fn frame(netlink: &[u8], out: &mut Vec<u8>) -> Result<(), FpmError> {
    let total = netlink.len() + FPM_HEADER_LEN;
    let len = u16::try_from(total).map_err(|_| FpmError::TooLong(netlink.len()))?;
    out.reserve(total);
    out.extend_from_slice(&[FPM_VERSION, FPM_MSG_TYPE_NETLINK]);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(netlink);
    Ok(())
}

/// Splits a byte stream into FPM frames. See the [module docs](self).
#[derive(Debug)]
pub struct FpmReader {
    /// Storage; `buf.len()` is the capacity, all of it initialised.
    buf: Vec<u8>,
    /// The first byte not yet returned in a frame.
    start: usize,
    /// The end of the bytes received.
    end: usize,
    /// Set by the first error, then returned forever.
    failed: Option<FpmError>,
}

impl Default for FpmReader {
    fn default() -> Self {
        Self::new()
    }
}

impl FpmReader {
    /// A reader with the default capacity (256 KiB).
    pub fn new() -> Self {
        Self::with_capacity(DEFAULT_CAPACITY)
    }

    /// A reader whose buffer holds `capacity` bytes (at least one largest frame, 65,535).
    pub fn with_capacity(capacity: usize) -> Self {
        FpmReader {
            buf: vec![0; capacity.max(FPM_MAX_FRAME)],
            start: 0,
            end: 0,
            failed: None,
        }
    }

    /// Bytes received and not yet returned in a frame.
    pub fn buffered(&self) -> usize {
        self.end - self.start
    }

    /// The error the reader failed with, if it did.
    pub fn error(&self) -> Option<FpmError> {
        self.failed
    }

    /// Moves the unread bytes to the front of the buffer when that frees useful room.
    fn compact(&mut self) {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.start > 0 && self.buf.len() - self.end < FPM_MAX_FRAME {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
    }

    /// The free tail of the buffer, to read into; report how much was written with
    /// [`FpmReader::filled`]. Empty only when the buffer is full of complete frames the
    /// caller has not taken with [`FpmReader::next_frame`].
    pub fn spare(&mut self) -> &mut [u8] {
        self.compact();
        let end = self.end;
        self.buf.get_mut(end..).unwrap_or_default()
    }

    /// Records that `n` bytes were written at the start of [`FpmReader::spare`] (clamped to
    /// its length).
    pub fn filled(&mut self, n: usize) {
        self.end = (self.end + n).min(self.buf.len());
    }

    /// Appends `bytes` (copied), growing the buffer when they do not fit.
    pub fn push(&mut self, bytes: &[u8]) {
        self.compact();
        let need = self.end + bytes.len();
        if need > self.buf.len() {
            self.buf.resize(need, 0);
        }
        if let Some(dst) = self.buf.get_mut(self.end..need) {
            dst.copy_from_slice(bytes);
            self.end = need;
        }
    }

    fn fail(&mut self, e: FpmError) -> Result<Option<&[u8]>, FpmError> {
        self.failed = Some(e);
        Err(e)
    }

    /// The netlink payload of the next complete frame; `Ok(None)` when more bytes are
    /// needed. After an error, every call returns that error.
    pub fn next_frame(&mut self) -> Result<Option<&[u8]>, FpmError> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let avail = self.buf.get(self.start..self.end).unwrap_or_default();
        let available = avail.len();
        let len = match *avail {
            [] => return Ok(None),
            [v, ..] if v != FPM_VERSION => return self.fail(FpmError::BadVersion(v)),
            [_, t, ..] if t != FPM_MSG_TYPE_NETLINK => return self.fail(FpmError::BadType(t)),
            [_, _, l0, l1, ..] => u16::from_be_bytes([l0, l1]),
            _ => return Ok(None),
        };
        if usize::from(len) < FPM_MIN_FRAME {
            return self.fail(FpmError::BadLength(len));
        }
        let len = usize::from(len);
        if available < len {
            return Ok(None);
        }
        let payload = self.start + FPM_HEADER_LEN..self.start + len;
        self.start += len;
        Ok(self.buf.get(payload))
    }
}

/// An error that ends an FPM connection.
#[derive(Debug)]
pub enum StreamError {
    /// The framing is broken.
    Fpm(FpmError),
    /// A frame's netlink bytes cannot be decoded.
    Decode(DecodeError),
    /// Reading the socket failed.
    Io(io::Error),
}

impl StreamError {
    /// A short stable name, for counters: the [`FpmError`] or [`DecodeError`] reason, or
    /// `io`.
    pub fn reason(&self) -> &'static str {
        match self {
            StreamError::Fpm(e) => e.reason(),
            StreamError::Decode(e) => e.reason(),
            StreamError::Io(_) => "io",
        }
    }
}

impl fmt::Display for StreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StreamError::Fpm(e) => write!(f, "FPM framing: {e}"),
            StreamError::Decode(e) => write!(f, "FPM frame: {e}"),
            StreamError::Io(e) => write!(f, "FPM read: {e}"),
        }
    }
}

impl std::error::Error for StreamError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StreamError::Fpm(e) => Some(e),
            StreamError::Decode(e) => Some(e),
            StreamError::Io(e) => Some(e),
        }
    }
}

impl From<FpmError> for StreamError {
    fn from(e: FpmError) -> Self {
        StreamError::Fpm(e)
    }
}

impl From<DecodeError> for StreamError {
    fn from(e: DecodeError) -> Self {
        StreamError::Decode(e)
    }
}

/// How [`FpmStream::pump`] stopped (without an error).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PumpStatus {
    /// The source has nothing more now (`WouldBlock`): wait for readability.
    WouldBlock,
    /// The byte budget was used up; more may be waiting.
    Budget,
    /// The peer closed the connection (a partial frame may remain: see
    /// [`FpmReader::buffered`]).
    Eof,
}

/// An [`FpmReader`] with the netlink decoder and the counters of one connection.
#[derive(Debug, Default)]
pub struct FpmStream {
    reader: FpmReader,
    stats: DecodeStats,
    frames: u64,
    bytes: u64,
}

impl FpmStream {
    /// A stream with the default buffer capacity.
    pub fn new() -> Self {
        Self::default()
    }

    /// A stream whose reader holds `capacity` bytes (see [`FpmReader::with_capacity`]).
    pub fn with_capacity(capacity: usize) -> Self {
        FpmStream {
            reader: FpmReader::with_capacity(capacity),
            ..Self::default()
        }
    }

    /// The reader, to feed it directly ([`FpmReader::spare`]/[`FpmReader::filled`] or
    /// [`FpmReader::push`]).
    pub fn reader(&mut self) -> &mut FpmReader {
        &mut self.reader
    }

    /// What the decoder saw so far.
    pub fn stats(&self) -> &DecodeStats {
        &self.stats
    }

    /// Complete frames decoded so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Bytes read so far (through [`FpmStream::read_from`] and [`FpmStream::pump`]).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// One `read` from `src` into the reader's free space. `Ok(0)` is the end of the stream;
    /// `WouldBlock` and the other errors are `src`'s. Fails with `OutOfMemory` if the buffer
    /// holds only complete frames nobody took: call [`FpmStream::decode`] between reads.
    pub fn read_from<R: Read>(&mut self, src: &mut R) -> io::Result<usize> {
        let spare = self.reader.spare();
        if spare.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::OutOfMemory,
                "FPM buffer full of undecoded frames",
            ));
        }
        let n = src.read(spare)?;
        self.reader.filled(n);
        self.bytes += n as u64;
        Ok(n)
    }

    /// Decodes every complete frame buffered, pushing the messages onto `out`; returns how
    /// many were pushed. On error, the messages of the frames before the bad one stay in
    /// `out` (apply them), none of the bad frame's; the connection is to be closed.
    pub fn decode(&mut self, out: &mut Vec<Message>) -> Result<usize, StreamError> {
        let first = out.len();
        while let Some(netlink) = self.reader.next_frame()? {
            decode_into(netlink, out, &mut self.stats)?;
            self.frames += 1;
        }
        Ok(out.len() - first)
    }

    /// Reads from `src` and decodes, until `src` would block, closes, or `budget` bytes were
    /// read. Messages are pushed onto `out`; on error, those decoded before it stay there.
    pub fn pump<R: Read>(
        &mut self,
        src: &mut R,
        out: &mut Vec<Message>,
        budget: usize,
    ) -> Result<PumpStatus, StreamError> {
        let mut read = 0usize;
        loop {
            if read >= budget {
                return Ok(PumpStatus::Budget);
            }
            match self.read_from(src) {
                Ok(0) => {
                    self.decode(out)?;
                    return Ok(PumpStatus::Eof);
                }
                Ok(n) => read += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    return Ok(PumpStatus::WouldBlock)
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(StreamError::Io(e)),
            }
            self.decode(out)?;
        }
    }
}

/// One route of a table to replay (see [`write_table_stream`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableRoute {
    /// The prefix's address.
    pub addr: IpAddr,
    /// The prefix's length.
    pub len: u8,
    /// The gateway (of either family).
    pub gateway: IpAddr,
    /// The output interface index.
    pub oif: u32,
}

/// How [`write_table_stream`] writes a table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableStreamOptions {
    /// Next-hop-object mode (`fpm use-next-hop-groups`): one `RTM_NEWNEXTHOP` per distinct
    /// (gateway, interface) first, ids from 1 in order of first use, then each route with
    /// `RTA_NH_ID` instead of a gateway.
    pub nexthop_objects: bool,
    /// `rtm_protocol` (186, bgp).
    pub protocol: u8,
    /// The table (254, main).
    pub table: u32,
    /// `RTA_PRIORITY` (20, zebra's metric for routes of other daemons), if any.
    pub priority: Option<u32>,
}

impl Default for TableStreamOptions {
    fn default() -> Self {
        TableStreamOptions {
            nexthop_objects: false,
            protocol: RTPROT_BGP,
            table: u32::from(RT_TABLE_MAIN),
            priority: Some(20),
        }
    }
}

/// What [`write_table_stream`] wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TableStreamSummary {
    /// Frames (one message each).
    pub frames: u64,
    /// Bytes.
    pub bytes: u64,
    /// `RTM_NEWNEXTHOP` frames among them.
    pub nexthop_objects: u64,
}

/// Writes an FPM byte stream announcing `v4` then `v6` as zebra's `dplane_fpm_nl` would
/// (`RTM_NEWROUTE`, unicast, one frame per route, sequence numbers from 1), for replays and
/// benchmarks. Writes go to `out` in chunks of about 64 KiB.
pub fn write_table_stream<W: Write>(
    v4: &[TableRoute],
    v6: &[TableRoute],
    opts: &TableStreamOptions,
    out: &mut W,
) -> io::Result<TableStreamSummary> {
    const CHUNK: usize = 64 * 1024;
    let mut summary = TableStreamSummary::default();
    let mut chunk = Vec::with_capacity(CHUNK + FPM_MAX_FRAME);
    let mut netlink = Vec::with_capacity(256);
    let mut seq = 0u32;
    let mut ids: std::collections::HashMap<(IpAddr, u32), u32> = std::collections::HashMap::new();

    let mut put = |msg: &Message, chunk: &mut Vec<u8>, summary: &mut TableStreamSummary| {
        seq = seq.wrapping_add(1);
        netlink.clear();
        encode_into(msg, seq, &mut netlink);
        let before = chunk.len();
        frame(&netlink, chunk).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        summary.frames += 1;
        summary.bytes += (chunk.len() - before) as u64;
        Ok::<(), io::Error>(())
    };

    let routes = v4.iter().chain(v6);
    if opts.nexthop_objects {
        for r in routes.clone() {
            let next = u32::try_from(ids.len() + 1).unwrap_or(u32::MAX);
            let id = *ids.entry((r.gateway, r.oif)).or_insert(next);
            if id == next {
                let obj = Message::NextHop(NextHopMsg {
                    op: Op::New,
                    replace: false,
                    id,
                    protocol: opts.protocol,
                    object: NextHopObject::Single(NextHop {
                        gateway: Some(r.gateway),
                        oif: Some(r.oif),
                        weight: 1,
                        onlink: false,
                    }),
                });
                put(&obj, &mut chunk, &mut summary)?;
                summary.nexthop_objects += 1;
                if chunk.len() >= CHUNK {
                    out.write_all(&chunk)?;
                    chunk.clear();
                }
            }
        }
    }
    for r in routes {
        let (nexthops, nhid) = if opts.nexthop_objects {
            (Vec::new(), ids.get(&(r.gateway, r.oif)).copied())
        } else {
            let nh = NextHop {
                gateway: Some(r.gateway),
                oif: Some(r.oif),
                weight: 1,
                onlink: false,
            };
            (vec![nh], None)
        };
        let msg = Message::Route(Route {
            op: Op::New,
            replace: false,
            dst: (r.addr, r.len),
            table: opts.table,
            protocol: opts.protocol,
            scope: 0,
            kind: RouteType::Unicast,
            priority: opts.priority,
            nexthops,
            nhid,
            src_len: 0,
        });
        put(&msg, &mut chunk, &mut summary)?;
        if chunk.len() >= CHUNK {
            out.write_all(&chunk)?;
            chunk.clear();
        }
    }
    out.write_all(&chunk)?;
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode::encode;
    use crate::msg::Link;
    use std::net::Ipv4Addr;

    fn route(op: Op, gw: u8) -> Route {
        Route {
            op,
            replace: false,
            dst: (IpAddr::V4(Ipv4Addr::new(10, 1, 0, 0)), 16),
            table: 254,
            protocol: 186,
            scope: 0,
            kind: RouteType::Unicast,
            priority: Some(20),
            nexthops: if op == Op::New {
                vec![NextHop {
                    gateway: Some(IpAddr::V4(Ipv4Addr::new(192, 0, 2, gw))),
                    oif: Some(2),
                    weight: 1,
                    onlink: false,
                }]
            } else {
                vec![]
            },
            nhid: None,
            src_len: 0,
        }
    }

    /// Three frames: a DELROUTE + NEWROUTE pair, a next-hop object, a link.
    fn stream() -> (Vec<u8>, Vec<Message>) {
        let msgs = vec![
            Message::Route(route(Op::Del, 1)),
            Message::Route(route(Op::New, 2)),
            Message::NextHop(NextHopMsg {
                op: Op::New,
                replace: true,
                id: 9,
                protocol: 186,
                object: NextHopObject::Group(vec![(1, 1), (2, 5)]),
            }),
            Message::Link(Link {
                op: Op::Del,
                ifindex: 4,
                name: Some("eth3".into()),
                admin_up: false,
                lower_up: false,
                mac: None,
                mtu: Some(9000),
            }),
        ];
        let mut pair = encode(&msgs[0], 1);
        pair.extend(encode(&msgs[1], 2));
        let mut bytes = Vec::new();
        frame(&pair, &mut bytes).unwrap();
        frame(&encode(&msgs[2], 3), &mut bytes).unwrap();
        frame(&encode(&msgs[3], 4), &mut bytes).unwrap();
        (bytes, msgs)
    }

    fn drain(reader: &mut FpmReader, out: &mut Vec<Message>, stats: &mut DecodeStats) {
        while let Some(netlink) = reader.next_frame().unwrap() {
            decode_into(netlink, out, stats).unwrap();
        }
    }

    #[test]
    fn frame_header_is_version_type_and_big_endian_length() {
        let mut out = Vec::new();
        frame(&[0xaa; 300], &mut out).unwrap();
        assert_eq!(&out[..4], &[1, 1, 0x01, 0x30]); // 304 = 0x130
        assert_eq!(out.len(), 304);
        assert_eq!(
            frame(&vec![0; FPM_MAX_FRAME - 3], &mut out),
            Err(FpmError::TooLong(FPM_MAX_FRAME - 3))
        );
        assert_eq!(out.len(), 304, "nothing written on error");
        frame(&vec![0; FPM_MAX_FRAME - 4], &mut out).unwrap();
        assert_eq!(&out[304..308], &[1, 1, 0xff, 0xff]);
    }

    #[test]
    fn delete_and_add_pair_in_one_frame() {
        let (bytes, msgs) = stream();
        let mut reader = FpmReader::new();
        reader.push(&bytes);
        let first = reader.next_frame().unwrap().unwrap().to_vec();
        let mut stats = DecodeStats::default();
        let got = crate::decode::decode(&first, &mut stats).unwrap();
        assert_eq!(got, msgs[..2].to_vec());
        assert_eq!(stats.routes, 2);
    }

    #[test]
    fn splitting_the_stream_anywhere_gives_the_same_messages() {
        let (bytes, msgs) = stream();
        for cut in 0..=bytes.len() {
            let mut reader = FpmReader::with_capacity(0);
            let mut out = Vec::new();
            let mut stats = DecodeStats::default();
            reader.push(&bytes[..cut]);
            drain(&mut reader, &mut out, &mut stats);
            reader.push(&bytes[cut..]);
            drain(&mut reader, &mut out, &mut stats);
            assert_eq!(out, msgs, "cut at {cut}");
            assert_eq!(reader.buffered(), 0);
        }
        // one byte at a time
        let mut reader = FpmReader::new();
        let mut out = Vec::new();
        let mut stats = DecodeStats::default();
        for b in &bytes {
            reader.push(std::slice::from_ref(b));
            drain(&mut reader, &mut out, &mut stats);
        }
        assert_eq!(out, msgs);
    }

    #[test]
    fn spare_and_filled_read_without_copy_and_compact() {
        // a stream longer than the reader's buffer, fed through spare() in odd sizes
        let (one, msgs) = stream();
        let copies = 4 * FPM_MAX_FRAME / one.len();
        let bytes = one.repeat(copies);
        let mut reader = FpmReader::with_capacity(FPM_MAX_FRAME);
        let mut out = Vec::new();
        let mut stats = DecodeStats::default();
        let mut at = 0;
        let mut step = 1;
        while at < bytes.len() {
            let spare = reader.spare();
            assert!(!spare.is_empty());
            let n = spare.len().min(step).min(bytes.len() - at);
            spare[..n].copy_from_slice(&bytes[at..at + n]);
            reader.filled(n);
            at += n;
            step = step * 7 % 1999 + 1;
            drain(&mut reader, &mut out, &mut stats);
        }
        assert_eq!(out.len(), msgs.len() * copies);
        assert_eq!(&out[out.len() - msgs.len()..], msgs.as_slice());
        assert_eq!(reader.buf.len(), FPM_MAX_FRAME, "the buffer did not grow");
    }

    #[test]
    fn bad_headers_fail_the_reader_for_good() {
        let cases: [(&[u8], FpmError); 7] = [
            (&[2, 1, 0, 20], FpmError::BadVersion(2)),
            (&[0], FpmError::BadVersion(0)),
            (&[1, 2, 0, 20], FpmError::BadType(2)),
            (&[1, 0], FpmError::BadType(0)),
            (&[1, 1, 0, 0], FpmError::BadLength(0)),
            (&[1, 1, 0, 3], FpmError::BadLength(3)),
            (&[1, 1, 0, 19], FpmError::BadLength(19)),
        ];
        let (good, _) = stream();
        for (bytes, want) in cases {
            let mut reader = FpmReader::new();
            reader.push(bytes);
            assert_eq!(reader.next_frame(), Err(want), "{bytes:?}");
            reader.push(&good);
            assert_eq!(reader.next_frame(), Err(want), "stays failed");
            assert_eq!(reader.error(), Some(want));
        }
        for n in 1..=3u16 {
            assert_eq!(FpmError::BadLength(n).reason(), "bad_length");
        }
        assert_eq!(FpmError::BadVersion(2).reason(), "bad_version");
        assert_eq!(FpmError::BadType(2).reason(), "bad_type");
        assert!(FpmError::BadType(2).to_string().contains("protobuf"));
        // a good frame first: it is returned, then the error
        let mut reader = FpmReader::new();
        reader.push(&good);
        reader.push(&[1, 1, 0, 2]);
        for _ in 0..3 {
            assert!(reader.next_frame().unwrap().is_some());
        }
        assert_eq!(reader.next_frame(), Err(FpmError::BadLength(2)));
    }

    #[test]
    fn truncated_netlink_header_inside_a_good_frame_is_a_decode_error() {
        let (good, msgs) = stream();
        let mut netlink = encode(&msgs[1], 7);
        netlink.extend_from_slice(&[40, 0, 0, 0, 24, 0]); // 6 bytes of a header
        let mut bytes = good.clone();
        frame(&netlink, &mut bytes).unwrap();
        bytes.extend_from_slice(&good);
        let mut stream = FpmStream::new();
        stream.reader().push(&bytes);
        let mut out = Vec::new();
        let err = stream.decode(&mut out).unwrap_err();
        assert_eq!(err.reason(), "truncated");
        assert!(matches!(
            err,
            StreamError::Decode(DecodeError::Truncated {
                len: None,
                available: 6,
                ..
            })
        ));
        // the three good frames before it were decoded, nothing of the bad frame
        assert_eq!(out, msgs);
        assert_eq!(stream.frames(), 3);
        assert_eq!(stream.stats().routes, 2);
    }

    /// A source that hands out its bytes in fixed chunks, with `WouldBlock` in between.
    struct Trickle {
        bytes: Vec<u8>,
        at: usize,
        chunk: usize,
        block_next: bool,
    }

    impl Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let block = self.block_next;
            self.block_next = !block;
            if block {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let n = buf.len().min(self.chunk).min(self.bytes.len() - self.at);
            buf[..n].copy_from_slice(&self.bytes[self.at..self.at + n]);
            self.at += n;
            Ok(n)
        }
    }

    #[test]
    fn pump_reads_until_would_block_budget_or_eof() {
        let (bytes, msgs) = stream();
        let mut src = Trickle {
            bytes: bytes.clone(),
            at: 0,
            chunk: 13,
            block_next: false,
        };
        let mut stream = FpmStream::new();
        let mut out = Vec::new();
        let mut statuses = Vec::new();
        loop {
            let status = stream.pump(&mut src, &mut out, 26).unwrap();
            statuses.push(status);
            if status == PumpStatus::Eof {
                break;
            }
        }
        assert_eq!(out, msgs);
        assert_eq!(stream.bytes(), bytes.len() as u64);
        assert!(statuses.contains(&PumpStatus::WouldBlock));
        assert_eq!(stream.reader().buffered(), 0);

        // the budget stops a source that never blocks
        let mut stream = FpmStream::new();
        let mut src = io::Cursor::new(bytes.repeat(10));
        let mut out = Vec::new();
        let status = stream.pump(&mut src, &mut out, 1).unwrap();
        assert_eq!(status, PumpStatus::Budget);
        assert!(stream.bytes() >= 1);
    }

    #[test]
    fn pump_keeps_what_came_before_a_framing_error() {
        let (mut bytes, msgs) = stream();
        bytes.extend_from_slice(&[1, 2, 0, 20]); // protobuf
        let mut stream = FpmStream::new();
        let mut out = Vec::new();
        let err = stream
            .pump(&mut io::Cursor::new(bytes), &mut out, usize::MAX)
            .unwrap_err();
        assert_eq!(err.reason(), "bad_type");
        assert_eq!(out, msgs);
    }

    #[test]
    fn table_stream_in_both_modes() {
        let gw1 = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
        let gw6 = IpAddr::V6("2001:db8::1".parse().unwrap());
        let v4: Vec<TableRoute> = (0..100u32)
            .map(|i| TableRoute {
                addr: IpAddr::V4(Ipv4Addr::from(0x0a00_0000 | (i << 8))),
                len: 24,
                gateway: gw1,
                oif: 1 + i % 2,
            })
            .collect();
        let v6 = vec![TableRoute {
            addr: IpAddr::V6("2001:db8:1::".parse().unwrap()),
            len: 48,
            gateway: gw6,
            oif: 1,
        }];
        for nexthop_objects in [false, true] {
            let opts = TableStreamOptions {
                nexthop_objects,
                ..TableStreamOptions::default()
            };
            let mut bytes = Vec::new();
            let summary = write_table_stream(&v4, &v6, &opts, &mut bytes).unwrap();
            assert_eq!(summary.bytes, bytes.len() as u64);
            let objects = if nexthop_objects { 3 } else { 0 };
            assert_eq!(summary.nexthop_objects, objects);
            assert_eq!(summary.frames, 101 + objects);

            let mut stream = FpmStream::new();
            stream.reader().push(&bytes);
            let mut out = Vec::new();
            stream.decode(&mut out).unwrap();
            assert_eq!(out.len() as u64, summary.frames);
            let routes: Vec<&Route> = out
                .iter()
                .filter_map(|m| match m {
                    Message::Route(r) => Some(r),
                    _ => None,
                })
                .collect();
            assert_eq!(routes.len(), 101);
            let r = routes[1];
            assert_eq!(r.dst, (IpAddr::V4(Ipv4Addr::new(10, 0, 1, 0)), 24));
            assert_eq!(
                (r.table, r.protocol, r.kind),
                (254, 186, RouteType::Unicast)
            );
            if nexthop_objects {
                assert!(matches!(&out[0], Message::NextHop(n) if n.id == 1));
                assert_eq!(r.nhid, Some(2), "oif 2 is the second distinct pair");
                assert!(r.nexthops.is_empty());
                assert_eq!(routes[100].nhid, Some(3));
            } else {
                assert_eq!(r.nexthops[0].gateway, Some(gw1));
                assert_eq!(r.nexthops[0].oif, Some(2));
                assert_eq!(routes[100].nexthops[0].gateway, Some(gw6));
            }
        }
    }
}
