//! Opening inputs: gzip detection by magic bytes, a cap on the decompressed size, and a peek
//! at the first bytes so the caller can tell text from MRT.
//!
//! ```text
//!   raw bytes ──(1f 8b?)──▶ MultiGzDecoder ──▶ Capped(max_bytes) ──▶ BufReader ──▶ parser
//!             └─(no)─────────────────────────▶┘
//! ```

use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Cursor, Read};
use std::path::Path;

use flate2::read::MultiGzDecoder;

use crate::error::Error;

/// The two bytes every gzip member starts with (RFC 1952 2.3.1).
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// How many decompressed bytes are peeked for format detection.
const HEAD_LEN: usize = 16;

/// Buffer size of the reader handed to the parsers.
const BUF_LEN: usize = 64 * 1024;

/// The payload of the `io::Error` a [`Capped`] reader returns once the cap is passed.
#[derive(Debug)]
struct CapExceeded;

impl fmt::Display for CapExceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "input exceeds the size limit")
    }
}

impl std::error::Error for CapExceeded {}

/// A reader that fails once more than `remaining` bytes have come through.
struct Capped<R> {
    inner: R,
    remaining: u64,
}

impl<R: Read> Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        // Ask for at most one byte past the cap: getting it proves the input is too large.
        let want = usize::try_from(self.remaining.saturating_add(1))
            .unwrap_or(usize::MAX)
            .min(buf.len());
        let n = match buf.get_mut(..want) {
            Some(part) => self.inner.read(part)?,
            None => 0,
        };
        let n64 = u64::try_from(n).unwrap_or(u64::MAX);
        if n64 > self.remaining {
            return Err(io::Error::new(io::ErrorKind::InvalidData, CapExceeded));
        }
        self.remaining -= n64;
        Ok(n)
    }
}

/// Whether `e` is the error of a passed size cap.
pub(crate) fn is_cap_exceeded(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<CapExceeded>())
}

/// Maps an I/O error of a reader built by [`open`] to an [`Error`].
pub(crate) fn read_error(file: &str, e: io::Error, max_bytes: u64) -> Error {
    if is_cap_exceeded(&e) {
        Error::TooLarge {
            file: file.to_owned(),
            limit: max_bytes,
        }
    } else {
        Error::Io {
            file: file.to_owned(),
            error: e,
        }
    }
}

/// Reads until `buf` is full or the input ends; returns how many bytes were read.
pub(crate) fn read_up_to<R: Read + ?Sized>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while let Some(rest) = buf.get_mut(filled..) {
        if rest.is_empty() {
            break;
        }
        match r.read(rest) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// An input ready to parse.
pub(crate) struct Opened<'a> {
    /// The decompressed, capped byte stream (from its first byte).
    pub reader: Box<dyn BufRead + 'a>,
    /// Up to the first 16 decompressed bytes (also still in `reader`).
    pub head: Vec<u8>,
}

/// [`open`] for a reader of `opts`, naming `file` in the error.
pub(crate) fn open_input<'a, R: Read + 'a>(
    raw: R,
    file: &str,
    opts: &crate::ReadOptions,
) -> Result<Opened<'a>, Error> {
    open(raw, opts.max_bytes).map_err(|e| read_error(file, e, opts.max_bytes))
}

/// Reads into a new [`Table`](crate::Table) with `read`, returning the table and the report.
pub(crate) fn into_new_table<T>(
    read: impl FnOnce(&mut crate::Table) -> Result<T, Error>,
) -> Result<(crate::Table, T), Error> {
    let mut table = crate::Table::new();
    let report = read(&mut table)?;
    Ok((table, report))
}

/// Opens a byte stream: un-gzips it when it starts with the gzip magic bytes, caps the
/// decompressed size at `max_bytes`, and peeks at the first bytes. The raw (compressed)
/// bytes are capped too, a little above `max_bytes` since incompressible data grows slightly
/// in gzip, so that not even the gzip header (whose name and comment fields are unbounded)
/// can make the reader take more than its limit.
pub(crate) fn open<'a, R: Read + 'a>(raw: R, max_bytes: u64) -> io::Result<Opened<'a>> {
    let raw_limit = max_bytes
        .saturating_add(max_bytes / 16)
        .saturating_add(4096);
    let mut raw = Capped {
        inner: raw,
        remaining: raw_limit,
    };
    let mut magic = [0u8; 2];
    let n = read_up_to(&mut raw, &mut magic)?;
    let magic_read = magic.get(..n).unwrap_or_default().to_vec();
    let is_gzip = n == 2 && magic == GZIP_MAGIC;
    let raw = Cursor::new(magic_read).chain(raw);
    let stream: Box<dyn Read + 'a> = if is_gzip {
        Box::new(MultiGzDecoder::new(BufReader::with_capacity(BUF_LEN, raw)))
    } else {
        Box::new(raw)
    };
    let mut capped = Capped {
        inner: stream,
        remaining: max_bytes,
    };
    let mut head = [0u8; HEAD_LEN];
    let h = read_up_to(&mut capped, &mut head)?;
    let head = head.get(..h).unwrap_or_default().to_vec();
    let reader = BufReader::with_capacity(BUF_LEN, Cursor::new(head.clone()).chain(capped));
    Ok(Opened {
        reader: Box::new(reader),
        head,
    })
}

/// Opens a file for reading, naming it in the error.
pub(crate) fn open_file(path: &Path) -> Result<File, Error> {
    File::open(path).map_err(|error| Error::Io {
        file: path.display().to_string(),
        error,
    })
}

/// The two table formats the readers understand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// One route per line, see [`crate::text`].
    Text,
    /// MRT TABLE_DUMP_V2, see [`crate::mrt`].
    Mrt,
}

/// Tells the formats apart by the first decompressed bytes: an MRT record starts with a
/// 4-byte timestamp and a 2-byte type below 256, so its fifth byte is `0`; text never holds a
/// NUL byte. Inputs shorter than five bytes are text.
pub fn detect_format(head: &[u8]) -> Format {
    match head.get(4) {
        Some(0) => Format::Mrt,
        _ => Format::Text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn read_all(o: Opened<'_>) -> io::Result<Vec<u8>> {
        let mut v = Vec::new();
        let mut r = o.reader;
        r.read_to_end(&mut v)?;
        Ok(v)
    }

    #[test]
    fn plain_and_gzip_read_the_same() {
        let data = b"10.0.0.0/8\n2001:db8::/32\n".repeat(100);
        let plain = open(&data[..], 1 << 20).unwrap();
        assert_eq!(plain.head, data[..16].to_vec());
        assert_eq!(read_all(plain).unwrap(), data);
        let gz = gzip(&data);
        let o = open(&gz[..], 1 << 20).unwrap();
        assert_eq!(o.head, data[..16].to_vec());
        assert_eq!(read_all(o).unwrap(), data);
    }

    #[test]
    fn short_inputs() {
        for data in [&b""[..], b"1", b"\x1f", b"\x1f\x8b"] {
            let o = open(data, 100);
            if data == b"\x1f\x8b" {
                // A gzip magic with nothing after it is a broken gzip stream.
                assert!(o.is_err() || read_all(o.unwrap()).is_err());
            } else {
                assert_eq!(read_all(o.unwrap()).unwrap(), data.to_vec());
            }
        }
    }

    #[test]
    fn the_cap_holds_for_plain_and_gzip() {
        let data = vec![b'x'; 1000];
        assert_eq!(
            read_all(open(&data[..], 1000).unwrap()).unwrap().len(),
            1000
        );
        let e = read_all(open(&data[..], 999).unwrap()).unwrap_err();
        assert!(is_cap_exceeded(&e));
        let gz = gzip(&vec![0u8; 1 << 20]);
        let e = match open(&gz[..], 4096) {
            Ok(o) => read_all(o).unwrap_err(),
            Err(e) => e,
        };
        assert!(is_cap_exceeded(&e));
        // A gzip header with an endless file name stops at the raw cap.
        let mut header = vec![0x1f, 0x8b, 8, 0x08, 0, 0, 0, 0, 0, 3];
        header.extend(vec![b'a'; 100_000]);
        let e = match open(&header[..], 1000) {
            Ok(o) => read_all(o).unwrap_err(),
            Err(e) => e,
        };
        assert!(is_cap_exceeded(&e), "{e}");
    }

    #[test]
    fn formats() {
        assert_eq!(detect_format(b"10.0.0.0/8\n"), Format::Text);
        assert_eq!(detect_format(b""), Format::Text);
        assert_eq!(detect_format(&[0, 0, 0, 0, 0, 13, 0, 1]), Format::Mrt);
    }
}
