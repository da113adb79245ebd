//! pcap files as queues: [`PcapReader`] is a receive queue that plays a capture,
//! [`PcapWriter`] a transmit queue that records what is sent. `vfsr replay` forwards a
//! capture through the pipeline with the two; tests use them to keep traffic as files.
//!
//! The format is the classic one (libpcap's `savefile`, also written by `tcpdump -w` and
//! `editcap -F pcap`): a 24-byte file header, then records of a 16-byte header and the
//! captured bytes:
//!
//! ```text
//!  file header   magic u32 | major u16 | minor u16 | zone i32 | sigfigs u32 | snaplen u32 | linktype u32
//!                 a1b2c3d4: microseconds, a1b23c4d: nanoseconds; read in either byte order
//!  record        seconds u32 | fraction u32 | captured length u32 | original length u32 | bytes
//! ```
//!
//! Only Ethernet captures (linktype 1) are read: the pipeline takes Ethernet frames. pcapng
//! files (magic `0a0d0d0a`) are refused with the command that converts them; supporting the
//! block format would add a second reader for a conversion `editcap` does in one line.
//!
//! A capture is outside input and is read as hostile: a record whose header is cut short
//! by the end of the file, or whose captured length exceeds its original length, or which
//! is larger than a packet buffer is counted in [`IoStats::rx_invalid`] and skipped; a
//! record claiming more than [`MAX_RECORD`] bytes means the file is not what its header
//! says (no record boundary can be trusted after it), so reading stops with an error naming
//! the file and the record's offset. Nothing a file contains makes the reader allocate more
//! than one record of at most [`MAX_RECORD`] bytes.

use std::fs::File;
use std::io::{BufReader, BufWriter, ErrorKind, Read, Write};
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use vfsr_packet::Packet;

use crate::rx::RxBatch;
use crate::{Backend, IoError, IoStats, Kind};

/// The largest record accepted: larger than any frame a link carries (libpcap's own
/// maximum snapshot length).
pub const MAX_RECORD: u32 = 262_144;

const MAGIC_US: u32 = 0xa1b2_c3d4;
const MAGIC_NS: u32 = 0xa1b2_3c4d;
const MAGIC_PCAPNG: u32 = 0x0a0d_0d0a;
const LINKTYPE_ETHERNET: u32 = 1;
const FILE_HEADER: usize = 24;
const RECORD_HEADER: usize = 16;

/// Timestamp precision of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resolution {
    /// Microseconds (magic `a1b2c3d4`), what most tools write.
    Micro,
    /// Nanoseconds (magic `a1b23c4d`).
    Nano,
}

/// One record of a capture.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Time since the Unix epoch, in nanoseconds.
    pub ts_ns: u64,
    /// The frame's length on the wire (at least `data.len()`).
    pub orig_len: u32,
    /// The captured bytes.
    pub data: Vec<u8>,
}

/// Reads a classic pcap file of Ethernet frames.
pub struct PcapReader {
    name: String,
    path: PathBuf,
    ifindex: u32,
    input: BufReader<File>,
    /// Offset of the next record in the file.
    offset: u64,
    swapped: bool,
    resolution: Resolution,
    done: bool,
    /// An error met after frames were appended in the same `recv`, reported by the next.
    pending: Option<IoError>,
    stats: IoStats,
}

fn file_err(path: &Path, what: impl std::fmt::Display) -> IoError {
    IoError::File(format!("{}: {what}", path.display()))
}

/// Reads until `buf` is full or the input ends; the number of bytes read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        let Some(rest) = buf.get_mut(n..) else { break };
        match r.read(rest) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

fn u32_at(b: &[u8], at: usize, swapped: bool) -> u32 {
    let mut w = [0u8; 4];
    if let Some(s) = b.get(at..at + 4) {
        w.copy_from_slice(s);
    }
    if swapped {
        u32::from_be_bytes(w)
    } else {
        u32::from_le_bytes(w)
    }
}

fn u16_at(b: &[u8], at: usize, swapped: bool) -> u16 {
    let mut w = [0u8; 2];
    if let Some(s) = b.get(at..at + 2) {
        w.copy_from_slice(s);
    }
    if swapped {
        u16::from_be_bytes(w)
    } else {
        u16::from_le_bytes(w)
    }
}

impl PcapReader {
    /// Opens `path`; frames it yields are received on `ifindex`. Errors name the file and
    /// say what is wrong with it.
    pub fn open(path: &Path, ifindex: u32) -> Result<PcapReader, IoError> {
        let f = File::open(path).map_err(|e| file_err(path, e))?;
        PcapReader::from_file(f, path, ifindex)
    }

    fn from_file(f: File, path: &Path, ifindex: u32) -> Result<PcapReader, IoError> {
        let mut input = BufReader::with_capacity(1 << 16, f);
        let mut h = [0u8; FILE_HEADER];
        let got = read_full(&mut input, &mut h).map_err(|e| file_err(path, e))?;
        let magic_le = u32_at(&h, 0, false);
        if got >= 4 && magic_le == MAGIC_PCAPNG {
            return Err(file_err(
                path,
                "pcapng is not supported; convert with editcap -F pcap IN OUT",
            ));
        }
        if got < FILE_HEADER {
            return Err(file_err(
                path,
                format!("not a pcap file: {got} bytes, shorter than the 24-byte file header"),
            ));
        }
        let (swapped, resolution) = match (magic_le, u32_at(&h, 0, true)) {
            (MAGIC_US, _) => (false, Resolution::Micro),
            (MAGIC_NS, _) => (false, Resolution::Nano),
            (_, MAGIC_US) => (true, Resolution::Micro),
            (_, MAGIC_NS) => (true, Resolution::Nano),
            _ => {
                return Err(file_err(
                    path,
                    format!("not a pcap file: magic number {magic_le:08x}"),
                ))
            }
        };
        let major = u16_at(&h, 4, swapped);
        if major != 2 {
            return Err(file_err(
                path,
                format!("pcap version {major} is not supported (only 2.x)"),
            ));
        }
        let linktype = u32_at(&h, 20, swapped) & 0xffff;
        if linktype != LINKTYPE_ETHERNET {
            return Err(file_err(
                path,
                format!("link type {linktype} is not Ethernet (1); only Ethernet captures can be replayed"),
            ));
        }
        let name = format!("pcap:{}", path.display());
        Ok(PcapReader {
            name,
            path: path.to_path_buf(),
            ifindex,
            input,
            offset: FILE_HEADER as u64,
            swapped,
            resolution,
            done: false,
            pending: None,
            stats: IoStats::default(),
        })
    }

    /// The file's timestamp precision.
    pub fn resolution(&self) -> Resolution {
        self.resolution
    }

    /// The next well-formed record, `None` at the end of the file. Malformed records are
    /// counted in [`IoStats::rx_invalid`] and skipped; an impossible length is an error.
    pub fn next_record(&mut self) -> Result<Option<Record>, IoError> {
        loop {
            if self.done {
                return Ok(None);
            }
            let at = self.offset;
            let mut h = [0u8; RECORD_HEADER];
            let got = read_full(&mut self.input, &mut h).map_err(|e| self.err_at(at, e))?;
            if got == 0 {
                self.done = true;
                return Ok(None);
            }
            if got < RECORD_HEADER {
                // The file ends inside a record header.
                self.stats.rx_invalid += 1;
                self.done = true;
                return Ok(None);
            }
            let secs = u64::from(u32_at(&h, 0, self.swapped));
            let frac = u64::from(u32_at(&h, 4, self.swapped));
            let incl = u32_at(&h, 8, self.swapped);
            let orig = u32_at(&h, 12, self.swapped);
            if incl > MAX_RECORD {
                self.done = true;
                return Err(self.err_at(
                    at,
                    format!(
                        "record claims {incl} captured bytes (more than {MAX_RECORD}); \
                         the file is corrupt"
                    ),
                ));
            }
            let mut data = vec![0u8; incl as usize];
            let got = read_full(&mut self.input, &mut data).map_err(|e| self.err_at(at, e))?;
            self.offset = at + RECORD_HEADER as u64 + got as u64;
            if got < data.len() {
                // The file ends inside the record's bytes.
                self.stats.rx_invalid += 1;
                self.done = true;
                return Ok(None);
            }
            let frac_ns = match self.resolution {
                Resolution::Micro => frac.saturating_mul(1000),
                Resolution::Nano => frac,
            };
            if incl > orig || frac_ns >= 1_000_000_000 {
                self.stats.rx_invalid += 1;
                continue;
            }
            return Ok(Some(Record {
                ts_ns: secs * 1_000_000_000 + frac_ns,
                orig_len: orig,
                data,
            }));
        }
    }

    fn err_at(&self, at: u64, what: impl std::fmt::Display) -> IoError {
        file_err(&self.path, format!("record at offset {at}: {what}"))
    }
}

impl Backend for PcapReader {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> Kind {
        Kind::Pcap
    }

    fn recv(
        &mut self,
        out: &mut Vec<Packet>,
        max: usize,
        pool: &mut Vec<Packet>,
    ) -> Result<usize, IoError> {
        if let Some(e) = self.pending.take() {
            return Err(e);
        }
        let mut rx = RxBatch::new(out, pool, self.ifindex);
        while rx.got() < max {
            let r = match self.next_record() {
                Ok(Some(r)) => r,
                Ok(None) => break,
                // The frames already appended are delivered; the error comes next call.
                Err(e) if rx.got() > 0 => {
                    self.pending = Some(e);
                    break;
                }
                Err(e) => {
                    rx.finish(&mut self.stats);
                    return Err(e);
                }
            };
            if r.data.len() < r.orig_len as usize {
                // Cut short by the capture's snapshot length: forwarding a partial frame
                // would send something that was never sent.
                rx.invalid(1);
                continue;
            }
            // Too large for a buffer: counted invalid too.
            rx.push_copy(&r.data);
        }
        Ok(rx.finish(&mut self.stats))
    }

    fn send(&mut self, _frames: &mut dyn Iterator<Item = &[u8]>) -> Result<usize, IoError> {
        Err(IoError::Unsupported(format!(
            "{} is a capture being read; it cannot send",
            self.path.display()
        )))
    }

    fn fd(&self) -> Option<RawFd> {
        None
    }

    fn stats(&self) -> IoStats {
        self.stats
    }
}

/// Writes frames to a classic pcap file (Ethernet, little-endian).
pub struct PcapWriter {
    name: String,
    path: PathBuf,
    out: BufWriter<File>,
    resolution: Resolution,
    /// Timestamp given to sent frames; the system clock when `None`.
    timestamp: Option<u64>,
    stats: IoStats,
}

impl PcapWriter {
    /// Creates (or truncates) `path` and writes the file header.
    pub fn create(path: &Path, resolution: Resolution) -> Result<PcapWriter, IoError> {
        let f = File::create(path).map_err(|e| file_err(path, e))?;
        let mut out = BufWriter::with_capacity(1 << 16, f);
        let magic = match resolution {
            Resolution::Micro => MAGIC_US,
            Resolution::Nano => MAGIC_NS,
        };
        let mut h = Vec::with_capacity(FILE_HEADER);
        h.extend_from_slice(&magic.to_le_bytes());
        h.extend_from_slice(&2u16.to_le_bytes());
        h.extend_from_slice(&4u16.to_le_bytes());
        h.extend_from_slice(&0i32.to_le_bytes());
        h.extend_from_slice(&0u32.to_le_bytes());
        h.extend_from_slice(&MAX_RECORD.to_le_bytes());
        h.extend_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
        out.write_all(&h).map_err(|e| file_err(path, e))?;
        Ok(PcapWriter {
            name: format!("pcap:{}", path.display()),
            path: path.to_path_buf(),
            out,
            resolution,
            timestamp: None,
            stats: IoStats::default(),
        })
    }

    /// Fixes the timestamp of frames sent through [`Backend::send`] (nanoseconds since the
    /// epoch); `None` goes back to the system clock.
    pub fn set_timestamp(&mut self, ts_ns: Option<u64>) {
        self.timestamp = ts_ns;
    }

    /// Appends one frame stamped `ts_ns`. Frames over [`MAX_RECORD`] bytes are refused
    /// (counted in `tx_dropped`) and give `false`.
    pub fn write_frame(&mut self, ts_ns: u64, frame: &[u8]) -> Result<bool, IoError> {
        let Ok(len) = u32::try_from(frame.len()) else {
            self.stats.tx_dropped += 1;
            return Ok(false);
        };
        if len > MAX_RECORD {
            self.stats.tx_dropped += 1;
            return Ok(false);
        }
        let secs = u32::try_from(ts_ns / 1_000_000_000).unwrap_or(u32::MAX);
        let ns = (ts_ns % 1_000_000_000) as u32;
        let frac = match self.resolution {
            Resolution::Micro => ns / 1000,
            Resolution::Nano => ns,
        };
        let mut h = [0u8; RECORD_HEADER];
        h[0..4].copy_from_slice(&secs.to_le_bytes());
        h[4..8].copy_from_slice(&frac.to_le_bytes());
        h[8..12].copy_from_slice(&len.to_le_bytes());
        h[12..16].copy_from_slice(&len.to_le_bytes());
        self.out
            .write_all(&h)
            .and_then(|()| self.out.write_all(frame))
            .map_err(|e| file_err(&self.path, e))?;
        self.stats.tx += 1;
        Ok(true)
    }

    /// Flushes and closes the file.
    pub fn finish(mut self) -> Result<(), IoError> {
        self.out.flush().map_err(|e| file_err(&self.path, e))
    }
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

impl Backend for PcapWriter {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> Kind {
        Kind::Pcap
    }

    /// A file being written receives nothing.
    fn recv(
        &mut self,
        _out: &mut Vec<Packet>,
        _max: usize,
        _pool: &mut Vec<Packet>,
    ) -> Result<usize, IoError> {
        Ok(0)
    }

    fn send(&mut self, frames: &mut dyn Iterator<Item = &[u8]>) -> Result<usize, IoError> {
        let ts = self.timestamp.unwrap_or_else(now_ns);
        let mut n = 0;
        for f in frames {
            if self.write_frame(ts, f)? {
                n += 1;
            }
        }
        Ok(n)
    }

    fn flush(&mut self) -> Result<(), IoError> {
        self.out.flush().map_err(|e| file_err(&self.path, e))
    }

    fn fd(&self) -> Option<RawFd> {
        None
    }

    fn stats(&self) -> IoStats {
        self.stats
    }
}
