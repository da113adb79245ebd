//! The pcap reader (`vfsr_io::pcap::PcapReader`, what `vfsr replay` plays) on arbitrary
//! files. The bytes are written to a memory file (`memfd`) and opened by path, as a capture
//! is. Nothing may panic; every record read is whole (captured ≤ original length, at most
//! `MAX_RECORD` bytes, a valid fraction of a second); the receive queue
//! (`Backend::recv`, in batches) yields exactly the records that fit a packet buffer
//! uncut, received on the reader's port, and fails where reading records failed; and what
//! was read, written again by `PcapWriter`, reads back the same.

#![no_main]

use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use vfsr_io::pcap::{PcapReader, PcapWriter, Record, Resolution, MAX_RECORD};
use vfsr_io::Backend;
use vfsr_packet::{Packet, DEFAULT_BUFFER};

/// A memory file and the path it opens by.
struct MemFile {
    file: File,
    path: PathBuf,
}

impl MemFile {
    fn new(name: &std::ffi::CStr) -> MemFile {
        // SAFETY: a NUL-terminated name and plain flags; the result is checked.
        let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
        assert!(fd >= 0, "memfd_create: {}", std::io::Error::last_os_error());
        // SAFETY: `fd` was just created and is owned by nothing else.
        let file = unsafe { File::from_raw_fd(fd) };
        let path = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
        MemFile { file, path }
    }

    fn fill(&self, data: &[u8]) {
        self.file.set_len(0).expect("truncate memfd");
        self.file.write_all_at(data, 0).expect("write memfd");
    }
}

fn files() -> &'static (MemFile, MemFile) {
    static FILES: OnceLock<(MemFile, MemFile)> = OnceLock::new();
    FILES.get_or_init(|| (MemFile::new(c"pcap-in"), MemFile::new(c"pcap-out")))
}

/// Every record, and whether reading ended in an error.
fn records(path: &std::path::Path) -> Option<(Vec<Record>, bool)> {
    let mut r = PcapReader::open(path, 7).ok()?;
    let mut out = Vec::new();
    loop {
        match r.next_record() {
            Ok(Some(rec)) => out.push(rec),
            Ok(None) => return Some((out, false)),
            Err(_) => {
                // A failed reader stays at its end.
                assert!(matches!(r.next_record(), Ok(None)));
                return Some((out, true));
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let (input, output) = files();
    input.fill(data);
    let Some((recs, failed)) = records(&input.path) else {
        return;
    };
    for rec in &recs {
        assert!(rec.data.len() <= rec.orig_len as usize);
        assert!(rec.data.len() <= MAX_RECORD as usize);
    }

    // The receive queue, in batches of a size the file's length picks.
    let batch = data.len() % 7 + 1;
    let Ok(mut q) = PcapReader::open(&input.path, 7) else {
        panic!("the file opened once and not twice");
    };
    let fits = Packet::with_capacity(DEFAULT_BUFFER).capacity();
    let want: Vec<&[u8]> = recs
        .iter()
        .filter(|r| r.data.len() <= fits && r.data.len() == r.orig_len as usize)
        .map(|r| r.data.as_slice())
        .collect();
    let mut got: Vec<Packet> = Vec::new();
    let mut pool: Vec<Packet> = Vec::new();
    let mut q_failed = false;
    loop {
        let before = got.len();
        match q.recv(&mut got, batch, &mut pool) {
            Ok(0) => break,
            Ok(n) => {
                assert!(n <= batch);
                assert_eq!(got.len(), before + n);
            }
            Err(_) => {
                q_failed = true;
                break;
            }
        }
    }
    assert_eq!(q_failed, failed);
    assert_eq!(got.len(), want.len());
    for (p, w) in got.iter().zip(&want) {
        assert_eq!(p.frame(), *w);
        assert_eq!(p.iif, 7);
    }
    assert_eq!(q.stats().rx, want.len() as u64);

    // Written again (nanosecond stamps keep every time exactly), read back the same.
    let Ok(mut w) = PcapWriter::create(&output.path, Resolution::Nano) else {
        panic!("creating the output file");
    };
    for r in &recs {
        assert_eq!(w.write_frame(r.ts_ns, &r.data).ok(), Some(true));
    }
    w.finish().expect("flushing the output file");
    let Some((again, false)) = records(&output.path) else {
        panic!("the written file does not read back");
    };
    assert_eq!(again.len(), recs.len());
    for (a, r) in again.iter().zip(&recs) {
        assert_eq!(a.data, r.data);
        assert_eq!(a.orig_len as usize, r.data.len());
        // The writer's seconds are 32 bits, as the format's.
        if r.ts_ns / 1_000_000_000 <= u64::from(u32::MAX) {
            assert_eq!(a.ts_ns, r.ts_ns);
        }
    }
});
