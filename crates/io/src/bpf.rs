//! Loading and attaching the XDP programs: a safe API over the system libbpf (1.1 or later),
//! called through the `libbpf-sys` crate's bindings.
//!
//! The programs live in `bpf/*.c`; `build.rs` compiles each one with clang and embeds the
//! object in [`objects`] (`bpf/xsk_steer.c` becomes [`objects::XSK_STEER`]). At run time:
//!
//! ```text
//!  objects::XSK_STEER ──BpfObject::load──▶ programs + maps in the kernel
//!                                           │ prog_fd("xsk_steer")   map_fd("xsks")
//!                                           ▼                        ▼
//!                      XdpAttachment::attach(ifindex)      map_update(fd, key, value)
//!                      (detached again on Drop)
//! ```
//!
//! The calls and structures come from the `libbpf-sys` crate, built without its default
//! features so that it links the system libbpf (Debian 12's `libbpf-dev`, libbpf 1.1, which
//! brings `libelf-dev` and `zlib1g-dev`) instead of compiling a copy of its own. Its
//! bindings follow a newer libbpf than the one linked. The calls are no problem: all of them
//! are in libbpf 1.1 (hence `bpf_obj_get_info_by_fd` and not 1.2's
//! `bpf_prog_get_info_by_fd`), and a call libbpf 1.1 lacked would fail the link, not the
//! run. The option structures need care: libbpf keeps them compatible across versions by
//! their size, `sz`, which is the bindings' (larger) size here, and libbpf 1.1 refuses a
//! structure whose bytes past the fields it knows are not zero. So every option structure
//! (and the `bpf_prog_info` the kernel fills) starts from `Default`, which zeroes all of it,
//! padding included (the bindings spell padding out as fields), and only fields libbpf 1.1
//! has are set; `option_structs_are_valid_for_libbpf_1_1` checks the bytes past them stay
//! zero. libbpf 1.x returns negative error numbers (and `NULL` with `errno` for pointers);
//! every failure becomes an [`IoError`] naming the object, program, map or interface
//! involved.
//!
//! An attachment uses `XDP_FLAGS_UPDATE_IF_NOEXIST`, so a program someone else attached is
//! never replaced (the error says so and how to remove it), and detaches with
//! `XDP_FLAGS_REPLACE` against its own program, so it never removes someone else's either.
//!
//! [`prog_test_run`] runs a program on a frame in the kernel (`BPF_PROG_TEST_RUN`); with
//! [`BPF_F_TEST_XDP_LIVE_FRAMES`] and an `xdp_md` context naming an interface, the frames
//! a program redirects or sends back are really transmitted, which is how a traffic
//! generator can send millions of frames a second without a socket.

use std::ffi::{c_char, c_int, CStr, CString};
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::Once;

use libbpf_sys as sys;

use crate::IoError;

/// The programs compiled from `bpf/*.c`, one constant per file.
pub mod objects {
    include!(concat!(env!("OUT_DIR"), "/objects.rs"));
}

/// `BPF_F_TEST_XDP_LIVE_FRAMES`: frames of an XDP test run are really transmitted.
pub const BPF_F_TEST_XDP_LIVE_FRAMES: u32 = sys::BPF_F_TEST_XDP_LIVE_FRAMES;

/// libbpf's own error numbers start here (`LIBBPF_ERRNO__START`, which the bindings leave
/// out).
const LIBBPF_ERRNO_START: c_int = 4000;

/// The options of `bpf_object__open_mem`: the object's name, everything else zero.
fn open_opts(name: &CStr) -> sys::bpf_object_open_opts {
    sys::bpf_object_open_opts {
        sz: size_of::<sys::bpf_object_open_opts>() as sys::size_t,
        object_name: name.as_ptr(),
        ..Default::default()
    }
}

/// The options of `bpf_xdp_detach`: the program to remove (libbpf adds `XDP_FLAGS_REPLACE`
/// for it), everything else zero.
fn detach_opts(old_prog_fd: RawFd) -> sys::bpf_xdp_attach_opts {
    sys::bpf_xdp_attach_opts {
        sz: size_of::<sys::bpf_xdp_attach_opts>() as sys::size_t,
        old_prog_fd,
        ..Default::default()
    }
}

/// The error for libbpf's return value `ret` (negative) while doing `what`.
fn libbpf_error(what: String, ret: c_int) -> IoError {
    let err = ret.checked_neg().unwrap_or(libc::EINVAL);
    if err >= LIBBPF_ERRNO_START {
        let mut buf = [0 as c_char; 128];
        // SAFETY: `buf` is writable for its length; libbpf NUL-terminates within it.
        unsafe { sys::libbpf_strerror(err, buf.as_mut_ptr(), buf.len() as sys::size_t) };
        // SAFETY: NUL-terminated above (the last byte is never written over by libbpf).
        let text = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy();
        return IoError::Unsupported(format!("{what}: {text} (libbpf error {err})"));
    }
    let e = std::io::Error::from_raw_os_error(err);
    if matches!(err, libc::EPERM | libc::EACCES) {
        return IoError::Unsupported(format!(
            "{what}: {e}; needs root or CAP_NET_ADMIN+CAP_BPF (and CAP_PERFMON on some kernels)"
        ));
    }
    IoError::Os { what, err: e }
}

/// Raises `RLIMIT_MEMLOCK` to infinity once per process: kernels before 5.11 charge BPF maps
/// and AF_XDP memory against it. Failure is ignored (newer kernels do not need it, and the
/// load that follows reports any real problem).
pub fn raise_memlock_limit() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let lim = libc::rlimit {
            rlim_cur: libc::RLIM_INFINITY,
            rlim_max: libc::RLIM_INFINITY,
        };
        // SAFETY: plain system call on a valid struct.
        unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &lim) };
    });
}

/// The number of possible CPUs: the number of values a per-CPU map holds per key.
pub fn possible_cpus() -> Result<usize, IoError> {
    // SAFETY: no arguments; libbpf reads /sys/devices/system/cpu/possible.
    let n = unsafe { sys::libbpf_num_possible_cpus() };
    if n <= 0 {
        return Err(libbpf_error("counting possible CPUs".into(), n));
    }
    Ok(n as usize)
}

/// A loaded BPF object: its programs and maps live in the kernel until it is dropped (and
/// longer while attached: an attachment holds its own reference to its program).
pub struct BpfObject {
    obj: NonNull<sys::bpf_object>,
    name: String,
}

// SAFETY: the object is only read after load (lookups by name), never shared by reference
// across threads by libbpf itself; moving it between threads is fine.
unsafe impl Send for BpfObject {}
// SAFETY: after load, `&self` methods only look programs and maps up by name, which reads
// the object and never changes it, so concurrent calls are fine (a stats thread reading
// counters while the control plane updates maps through their descriptors).
unsafe impl Sync for BpfObject {}

impl BpfObject {
    /// Opens and loads the ELF object `bytes` (see [`objects`]) under the name `name`.
    pub fn load(name: &str, bytes: &[u8]) -> Result<BpfObject, IoError> {
        raise_memlock_limit();
        let cname = CString::new(name)
            .map_err(|_| IoError::Unsupported(format!("BPF object name {name:?} has a NUL")))?;
        let opts = open_opts(&cname);
        // SAFETY: `bytes`, `opts` and the name it points to are valid for the call; libbpf
        // copies the buffer and the name.
        let obj = unsafe {
            sys::bpf_object__open_mem(bytes.as_ptr().cast(), bytes.len() as sys::size_t, &opts)
        };
        let Some(obj) = NonNull::new(obj) else {
            let errno = std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EINVAL);
            return Err(libbpf_error(format!("opening BPF object {name}"), -errno));
        };
        let object = BpfObject {
            obj,
            name: name.to_string(),
        };
        // SAFETY: `obj` is a valid, not yet loaded object.
        let ret = unsafe { sys::bpf_object__load(object.obj.as_ptr()) };
        if ret < 0 {
            return Err(libbpf_error(
                format!("loading BPF object {name} (the verifier log, if any, is on stderr)"),
                ret,
            ));
        }
        Ok(object)
    }

    /// The name given at load.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The descriptor of program `prog` (the C function's name).
    pub fn prog_fd(&self, prog: &str) -> Result<RawFd, IoError> {
        let missing =
            || IoError::Unsupported(format!("BPF object {} has no program {prog:?}", self.name));
        let c = CString::new(prog).map_err(|_| missing())?;
        // SAFETY: valid object and C string.
        let p = unsafe { sys::bpf_object__find_program_by_name(self.obj.as_ptr(), c.as_ptr()) };
        if p.is_null() {
            return Err(missing());
        }
        // SAFETY: `p` belongs to the loaded object.
        let fd = unsafe { sys::bpf_program__fd(p) };
        if fd < 0 {
            return Err(libbpf_error(format!("program {prog} of {}", self.name), fd));
        }
        Ok(fd)
    }

    /// The descriptor of map `map`.
    pub fn map_fd(&self, map: &str) -> Result<RawFd, IoError> {
        let missing =
            || IoError::Unsupported(format!("BPF object {} has no map {map:?}", self.name));
        let c = CString::new(map).map_err(|_| missing())?;
        // SAFETY: valid object and C string.
        let m = unsafe { sys::bpf_object__find_map_by_name(self.obj.as_ptr(), c.as_ptr()) };
        if m.is_null() {
            return Err(missing());
        }
        // SAFETY: `m` belongs to the loaded object.
        let fd = unsafe { sys::bpf_map__fd(m) };
        if fd < 0 {
            return Err(libbpf_error(format!("map {map} of {}", self.name), fd));
        }
        Ok(fd)
    }
}

impl Drop for BpfObject {
    fn drop(&mut self) {
        // SAFETY: the object is valid and closed once.
        unsafe { sys::bpf_object__close(self.obj.as_ptr()) };
    }
}

/// Sets `key` to `value` in map `fd` (creating or replacing it). The lengths must be the
/// map's key and value sizes (the kernel reads exactly that many bytes, so a short slice
/// is refused here rather than read past).
pub fn map_update(fd: RawFd, key: &[u8], value: &[u8]) -> Result<(), IoError> {
    check_sizes(fd, key.len(), value.len())?;
    // SAFETY: the slices are valid for the sizes the map was checked to have.
    let ret =
        unsafe { sys::bpf_map_update_elem(fd, key.as_ptr().cast(), value.as_ptr().cast(), 0) };
    if ret < 0 {
        return Err(libbpf_error(format!("updating BPF map (fd {fd})"), ret));
    }
    Ok(())
}

/// Reads `key` of map `fd` into `value` (for a per-CPU map, `value` holds one value per
/// possible CPU, 8-byte aligned each). `Ok(false)` when the key is absent.
pub fn map_lookup(fd: RawFd, key: &[u8], value: &mut [u8]) -> Result<bool, IoError> {
    let (k, v, percpu) = map_sizes(fd)?;
    let need = if percpu {
        v.div_ceil(8) * 8 * possible_cpus()?
    } else {
        v
    };
    if key.len() != k || value.len() < need {
        return Err(IoError::Unsupported(format!(
            "BPF map (fd {fd}) lookup: key is {} bytes (map: {k}), value buffer {} bytes \
             (needs {need})",
            key.len(),
            value.len()
        )));
    }
    // SAFETY: the buffers are at least the sizes the kernel reads and writes.
    let ret =
        unsafe { sys::bpf_map_lookup_elem(fd, key.as_ptr().cast(), value.as_mut_ptr().cast()) };
    if ret == -libc::ENOENT {
        return Ok(false);
    }
    if ret < 0 {
        return Err(libbpf_error(format!("looking up BPF map (fd {fd})"), ret));
    }
    Ok(true)
}

/// Removes `key` from map `fd`; `Ok(false)` when it was absent.
pub fn map_delete(fd: RawFd, key: &[u8]) -> Result<bool, IoError> {
    let (k, _, _) = map_sizes(fd)?;
    if key.len() != k {
        return Err(IoError::Unsupported(format!(
            "BPF map (fd {fd}) delete: key is {} bytes (map: {k})",
            key.len()
        )));
    }
    // SAFETY: the key is the map's key size.
    let ret = unsafe { sys::bpf_map_delete_elem(fd, key.as_ptr().cast()) };
    if ret == -libc::ENOENT {
        return Ok(false);
    }
    if ret < 0 {
        return Err(libbpf_error(
            format!("deleting from BPF map (fd {fd})"),
            ret,
        ));
    }
    Ok(true)
}

fn check_sizes(fd: RawFd, key: usize, value: usize) -> Result<(), IoError> {
    let (k, v, _) = map_sizes(fd)?;
    if key != k || value != v {
        return Err(IoError::Unsupported(format!(
            "BPF map (fd {fd}) update: key/value are {key}/{value} bytes, the map's are {k}/{v}"
        )));
    }
    Ok(())
}

/// Key size, value size and whether the map is per-CPU, read from `/proc/self/fdinfo`
/// (which every kernel with BPF provides, without another libbpf declaration).
fn map_sizes(fd: RawFd) -> Result<(usize, usize, bool), IoError> {
    let path = format!("/proc/self/fdinfo/{fd}");
    let text = std::fs::read_to_string(&path).map_err(|err| IoError::Os {
        what: format!("reading {path} (is {fd} a BPF map?)"),
        err,
    })?;
    let field = |name: &str| -> Option<usize> {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
    };
    let percpu = [
        sys::BPF_MAP_TYPE_PERCPU_HASH,
        sys::BPF_MAP_TYPE_PERCPU_ARRAY,
        sys::BPF_MAP_TYPE_LRU_PERCPU_HASH,
    ];
    match (field("key_size:"), field("value_size:"), field("map_type:")) {
        (Some(k), Some(v), Some(t)) => Ok((k, v, percpu.iter().any(|p| *p as usize == t))),
        _ => Err(IoError::Unsupported(format!(
            "descriptor {fd} is not a BPF map"
        ))),
    }
}

/// How an XDP program runs on an interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XdpMode {
    /// In the driver, before any socket buffer exists (`XDP_FLAGS_DRV_MODE`).
    Native,
    /// In the generic receive path, after the socket buffer is built (`XDP_FLAGS_SKB_MODE`):
    /// works on every interface, slower.
    Generic,
}

impl XdpMode {
    /// The name used in configuration and logs.
    pub fn name(self) -> &'static str {
        match self {
            XdpMode::Native => "native",
            XdpMode::Generic => "generic",
        }
    }

    fn flag(self) -> u32 {
        match self {
            XdpMode::Native => sys::XDP_FLAGS_DRV_MODE,
            XdpMode::Generic => sys::XDP_FLAGS_SKB_MODE,
        }
    }
}

/// The name of interface `ifindex`, or its number when it has none any more.
pub(crate) fn ifname_of(ifindex: u32) -> String {
    let mut buf = [0 as c_char; libc::IF_NAMESIZE];
    // SAFETY: `buf` is IF_NAMESIZE long, as if_indextoname requires.
    let p = unsafe { libc::if_indextoname(ifindex, buf.as_mut_ptr()) };
    if p.is_null() {
        return format!("ifindex {ifindex}");
    }
    // SAFETY: if_indextoname wrote a NUL-terminated name into `buf`.
    unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

/// An XDP program attached to an interface; detached when dropped.
pub struct XdpAttachment {
    ifindex: u32,
    mode: XdpMode,
    /// Our own reference to the program: the detach names it, so only this program is
    /// ever removed.
    prog: OwnedFd,
    /// Set once [`XdpAttachment::detach`] has run, so dropping does not detach twice.
    detached: bool,
}

impl XdpAttachment {
    /// Attaches program `prog_fd` to interface `ifindex` in `mode`, refusing to replace a
    /// program already there.
    pub fn attach(ifindex: u32, prog_fd: RawFd, mode: XdpMode) -> Result<XdpAttachment, IoError> {
        XdpAttachment::try_attach(ifindex, prog_fd, mode).map_err(|(_, e)| e)
    }

    /// [`XdpAttachment::attach`], with the error number of a refused attach (0 for other
    /// failures).
    fn try_attach(
        ifindex: u32,
        prog_fd: RawFd,
        mode: XdpMode,
    ) -> Result<XdpAttachment, (c_int, IoError)> {
        let name = ifname_of(ifindex);
        // SAFETY: duplicating a descriptor the caller holds open.
        let dup = unsafe { libc::fcntl(prog_fd, libc::F_DUPFD_CLOEXEC, 0) };
        if dup < 0 {
            return Err((
                0,
                IoError::last(format!("duplicating XDP program fd {prog_fd} for {name}")),
            ));
        }
        // SAFETY: `dup` is a fresh descriptor owned from here on.
        let prog = unsafe { OwnedFd::from_raw_fd(dup) };
        let ifi = c_int::try_from(ifindex)
            .map_err(|_| (0, IoError::NoSuchInterface(format!("ifindex {ifindex}"))))?;
        // SAFETY: plain call; no options.
        let ret = unsafe {
            sys::bpf_xdp_attach(
                ifi,
                prog.as_raw_fd(),
                sys::XDP_FLAGS_UPDATE_IF_NOEXIST | mode.flag(),
                std::ptr::null(),
            )
        };
        if ret < 0 {
            let m = mode.name();
            let err = -ret;
            return Err((
                err,
                match err {
                    libc::EBUSY | libc::EEXIST => IoError::Unsupported(format!(
                        "{name}: an XDP program is already attached; remove it with \
                         `ip link set dev {name} xdp off` (or xdpgeneric off) if it is stale"
                    )),
                    libc::EOPNOTSUPP if mode == XdpMode::Native => IoError::Unsupported(format!(
                        "{name}: no native XDP support (EOPNOTSUPP); set backend = \
                             \"packet\" or mode = \"generic\""
                    )),
                    _ => libbpf_error(format!("{name}: attaching XDP program ({m} mode)"), ret),
                },
            ));
        }
        Ok(XdpAttachment {
            ifindex,
            mode,
            prog,
            detached: false,
        })
    }

    /// Attaches in native mode, falling back to generic mode when the driver refuses
    /// native XDP (but not when another program is attached or permission is missing:
    /// those fail the same way in both modes).
    pub fn attach_auto(ifindex: u32, prog_fd: RawFd) -> Result<XdpAttachment, IoError> {
        match XdpAttachment::try_attach(ifindex, prog_fd, XdpMode::Native) {
            Ok(a) => Ok(a),
            Err((libc::EBUSY | libc::EEXIST | libc::EPERM | libc::EACCES | 0, e)) => Err(e),
            Err((_, native)) => {
                XdpAttachment::attach(ifindex, prog_fd, XdpMode::Generic).map_err(|generic| {
                    IoError::Unsupported(format!("{generic} (native mode failed first: {native})"))
                })
            }
        }
    }

    /// The interface.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// The mode it runs in.
    pub fn mode(&self) -> XdpMode {
        self.mode
    }

    /// Detaches now, reporting an error (dropping detaches too, silently).
    pub fn detach(mut self) -> Result<(), IoError> {
        self.detached = true;
        self.detach_inner()
    }

    /// Removes a program named `name` that an earlier run left attached to `ifindex` (a
    /// process killed with SIGKILL detaches nothing). Returns whether there was one. The
    /// caller has bound its AF_XDP sockets first: a live process with the program holds the
    /// queues, and the bind fails before this is reached.
    pub fn remove_stale(ifindex: u32, name: &str) -> Result<bool, IoError> {
        let ifi = c_int::try_from(ifindex)
            .map_err(|_| IoError::NoSuchInterface(format!("ifindex {ifindex}")))?;
        for mode in [XdpMode::Native, XdpMode::Generic] {
            let Some((prog, attached)) = attached_program(ifi, mode) else {
                continue;
            };
            if attached != name {
                continue;
            }
            let opts = detach_opts(prog.as_raw_fd());
            // SAFETY: valid options naming the program found; libbpf adds XDP_FLAGS_REPLACE,
            // so only that program is removed.
            let ret = unsafe { sys::bpf_xdp_detach(ifi, mode.flag(), &opts) };
            if ret < 0 {
                return Err(libbpf_error(
                    format!("{}: removing a stale {name} program", ifname_of(ifindex)),
                    ret,
                ));
            }
            return Ok(true);
        }
        Ok(false)
    }

    fn detach_inner(&self) -> Result<(), IoError> {
        let opts = detach_opts(self.prog.as_raw_fd());
        let ifi = c_int::try_from(self.ifindex).unwrap_or(0);
        // SAFETY: valid options; libbpf adds XDP_FLAGS_REPLACE for `old_prog_fd`.
        let ret = unsafe { sys::bpf_xdp_detach(ifi, self.mode.flag(), &opts) };
        // ENODEV: the interface is gone, and the program with it.
        if ret < 0 && ret != -libc::ENODEV {
            return Err(libbpf_error(
                format!("{}: detaching XDP program", ifname_of(self.ifindex)),
                ret,
            ));
        }
        Ok(())
    }
}

/// The program attached to `ifindex` in `mode`, with its name, if one is.
fn attached_program(ifindex: c_int, mode: XdpMode) -> Option<(OwnedFd, String)> {
    let mut id = 0u32;
    // SAFETY: `id` is a live u32 the call writes.
    let ret = unsafe { sys::bpf_xdp_query_id(ifindex, mode.flag() as c_int, &mut id) };
    if ret < 0 || id == 0 {
        return None;
    }
    // SAFETY: plain call; the result is checked.
    let fd = unsafe { sys::bpf_prog_get_fd_by_id(id) };
    if fd < 0 {
        return None;
    }
    // SAFETY: a fresh descriptor owned from here on.
    let prog = unsafe { OwnedFd::from_raw_fd(fd) };
    // Zeroed: a kernel whose structure is shorter than the bindings' checks that the bytes
    // it does not know are zero, and fills only what it has (up to `len`).
    let mut info = sys::bpf_prog_info::default();
    let mut len = u32::try_from(size_of::<sys::bpf_prog_info>()).ok()?;
    // SAFETY: `info` is `len` writable bytes of the structure the kernel fills.
    // (`bpf_obj_get_info_by_fd`: libbpf 1.1 has no `bpf_prog_get_info_by_fd`.)
    let ret = unsafe { sys::bpf_obj_get_info_by_fd(fd, (&raw mut info).cast(), &mut len) };
    if ret < 0 {
        return None;
    }
    // `name` is NUL-terminated by the kernel when shorter than BPF_OBJ_NAME_LEN.
    let raw = info.name.map(|c| c as u8);
    let end = raw.iter().position(|b| *b == 0).unwrap_or(raw.len());
    let name = String::from_utf8_lossy(raw.get(..end)?).into_owned();
    Some((prog, name))
}

impl Drop for XdpAttachment {
    fn drop(&mut self) {
        if !self.detached {
            let _ = self.detach_inner();
        }
    }
}

/// Runs program `prog_fd` on `data` `repeat` times in the kernel (`BPF_PROG_TEST_RUN`) with
/// test-run `flags` and an optional context (for XDP, a `struct xdp_md`, e.g. with
/// `ingress_ifindex` set). Returns the program's return value and the mean duration of one
/// run in nanoseconds.
pub fn prog_test_run(
    prog_fd: RawFd,
    data: &[u8],
    repeat: u32,
    flags: u32,
    ctx: Option<&[u8]>,
) -> Result<(u32, u32), IoError> {
    let (retval, duration, _) = test_run(prog_fd, data, None, repeat, flags, ctx)?;
    Ok((retval, duration))
}

/// Whether this kernel lets this process transmit frames with an XDP test run
/// ([`BPF_F_TEST_XDP_LIVE_FRAMES`]), which the traffic generator of `vfsr fwd bench --veth`,
/// `vfsr stress` and `vfsr soak` sends with. Some kernels refuse it even to root with every
/// BPF capability (`EPERM` while other test runs work), so tests that need the generator ask
/// first and skip, saying why, where it is refused. The probe loads a two-instruction program
/// that drops every frame and runs it once, live, on a zeroed frame at the loopback interface
/// of the caller's network namespace: nothing is sent. Asked once per process.
pub fn live_frames_usable() -> Result<(), String> {
    static ANSWER: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    ANSWER
        .get_or_init(|| probe_live_frames().map_err(|e| e.to_string()))
        .clone()
}

/// [`live_frames_usable`]'s refusal as one sentence for a user or a skipped test, naming the
/// feature and the kernel's answer; `None` where live-frames test runs work.
pub fn live_frames_refusal() -> Option<String> {
    live_frames_usable().err().map(|why| {
        format!(
            "this kernel refuses XDP test runs on live frames (BPF_F_TEST_XDP_LIVE_FRAMES): {why}"
        )
    })
}

fn probe_live_frames() -> Result<(), IoError> {
    raise_memlock_limit();
    // r0 = XDP_DROP; exit. Both instructions name register 0 only, so the register bit
    // fields stay zero.
    let insns = [
        sys::bpf_insn {
            code: (sys::BPF_ALU64 | sys::BPF_MOV | sys::BPF_K) as u8,
            imm: sys::XDP_DROP as i32,
            ..Default::default()
        },
        sys::bpf_insn {
            code: (sys::BPF_JMP | sys::BPF_EXIT) as u8,
            ..Default::default()
        },
    ];
    // SAFETY: the name and licence are NUL-terminated; `insns` holds `insns.len()`
    // instructions and outlives the call; no options (NULL) is allowed.
    let fd = unsafe {
        sys::bpf_prog_load(
            sys::BPF_PROG_TYPE_XDP,
            c"vfsr_probe".as_ptr(),
            c"GPL".as_ptr(),
            insns.as_ptr(),
            insns.len() as sys::size_t,
            std::ptr::null_mut(),
        )
    };
    if fd < 0 {
        return Err(libbpf_error("loading the live-frames probe".into(), fd));
    }
    // SAFETY: a descriptor libbpf just returned, owned by nothing else.
    let prog = unsafe { OwnedFd::from_raw_fd(fd) };
    let frame = [0u8; 64];
    let ctx = xdp_md_ctx(1, 0, frame.len() as u32);
    prog_test_run(
        prog.as_raw_fd(),
        &frame,
        1,
        BPF_F_TEST_XDP_LIVE_FRAMES,
        Some(&ctx),
    )
    .map(|_| ())
}

/// Runs `prog_fd` once on `data` (no context, no flags) and returns the program's verdict
/// with the frame as the program left it (at most `data.len() + 256` bytes).
pub fn prog_test_run_data(prog_fd: RawFd, data: &[u8]) -> Result<(u32, Vec<u8>), IoError> {
    let mut out = vec![0u8; data.len() + 256];
    let (retval, _, len) = test_run(prog_fd, data, Some(&mut out), 1, 0, None)?;
    out.truncate(len);
    Ok((retval, out))
}

/// `bpf_prog_test_run_opts`: (verdict, nanoseconds per run, bytes written to `out`).
fn test_run(
    prog_fd: RawFd,
    data: &[u8],
    out: Option<&mut [u8]>,
    repeat: u32,
    flags: u32,
    ctx: Option<&[u8]>,
) -> Result<(u32, u32, usize), IoError> {
    let too_big = |what: &str| IoError::Unsupported(format!("BPF test run: {what} too large"));
    let (ctx_ptr, ctx_len) = match ctx {
        Some(c) => (
            c.as_ptr().cast(),
            u32::try_from(c.len()).map_err(|_| too_big("context"))?,
        ),
        None => (std::ptr::null(), 0),
    };
    let (out_ptr, out_len) = match out {
        Some(o) => (
            o.as_mut_ptr().cast(),
            u32::try_from(o.len()).map_err(|_| too_big("output"))?,
        ),
        None => (std::ptr::null_mut(), 0),
    };
    // Zero but for the fields set (all of them in libbpf 1.1's structure).
    let mut opts = sys::bpf_test_run_opts {
        sz: size_of::<sys::bpf_test_run_opts>() as sys::size_t,
        data_in: data.as_ptr().cast(),
        data_out: out_ptr,
        data_size_in: u32::try_from(data.len()).map_err(|_| too_big("frame"))?,
        data_size_out: out_len,
        ctx_in: ctx_ptr,
        ctx_size_in: ctx_len,
        repeat: c_int::try_from(repeat).map_err(|_| too_big("repeat count"))?,
        flags,
        ..Default::default()
    };
    // SAFETY: the input buffers outlive the call; the output buffer, if any, is writable for
    // `data_size_out` bytes, which the kernel does not exceed.
    let ret = unsafe { sys::bpf_prog_test_run_opts(prog_fd, &mut opts) };
    if ret < 0 {
        return Err(libbpf_error(
            format!("BPF test run of program fd {prog_fd}"),
            ret,
        ));
    }
    Ok((
        opts.retval,
        opts.duration,
        (opts.data_size_out as usize).min(out_len as usize),
    ))
}

/// The `struct xdp_md` context for an XDP test run of a `frame_len`-byte frame arriving on
/// `ingress_ifindex` queue `rx_queue_index` (pass it as `ctx` to [`prog_test_run`]). The
/// kernel wants `data` 0, `data_end` equal to the frame's length, no metadata and no egress
/// interface; in live-frames mode the interface must exist in the caller's namespace and
/// the frames the program transmits (`XDP_TX`) leave through it.
pub fn xdp_md_ctx(ingress_ifindex: u32, rx_queue_index: u32, frame_len: u32) -> [u8; 24] {
    let fields = [0, frame_len, 0, ingress_ifindex, rx_queue_index, 0];
    let mut out = [0u8; 24];
    for (chunk, v) in out.chunks_exact_mut(4).zip(fields) {
        chunk.copy_from_slice(&v.to_ne_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes of an option structure.
    fn bytes_of<T>(opts: &T) -> Vec<u8> {
        // SAFETY: the bindings' structures spell their padding out as fields, so every
        // byte of a value made from `Default` is initialised.
        unsafe { std::slice::from_raw_parts((opts as *const T).cast::<u8>(), size_of::<T>()) }
            .to_vec()
    }

    /// libbpf 1.1 accepts an option structure whose `sz` covers its own and whose bytes
    /// past the fields it knows (`offsetofend` of its last field, from
    /// /usr/include/bpf/{bpf,libbpf}.h on x86_64) are zero.
    fn assert_valid_for_libbpf_1_1<T>(opts: &T, sz: sys::size_t, known: usize) {
        assert_eq!(sz as usize, size_of::<T>(), "sz is the bindings' size");
        assert!(
            size_of::<T>() >= known,
            "smaller than libbpf 1.1's structure"
        );
        let bytes = bytes_of(opts);
        assert!(
            bytes
                .get(known..)
                .is_some_and(|tail| tail.iter().all(|b| *b == 0)),
            "bytes past libbpf 1.1's fields are not zero: {:?}",
            bytes.get(known..)
        );
    }

    #[test]
    fn the_live_frames_probe_answers_and_agrees_with_a_second_ask() {
        // Without root the load is refused: the probe must say so, not panic. With root the
        // answer depends on the kernel; either way it is the same when asked again.
        let first = live_frames_usable();
        if let Err(why) = &first {
            assert!(why.contains("probe") || why.contains("test run"), "{why}");
        }
        assert_eq!(live_frames_usable(), first);
        // The sentence for users says the same, in full.
        match (&first, live_frames_refusal()) {
            (Ok(()), None) => {}
            (Err(why), Some(said)) => {
                assert!(said.starts_with("this kernel refuses XDP test runs on live frames"));
                assert!(said.ends_with(why.as_str()), "{said}");
            }
            (a, b) => panic!("the probe said {a:?}, the sentence {b:?}"),
        }
        println!("live-frames XDP test runs here: {first:?}");
    }

    #[test]
    fn option_structs_are_valid_for_libbpf_1_1() {
        let name = CString::new("xsk_steer").unwrap();
        let open = open_opts(&name);
        // libbpf 1.1's last field is `kernel_log_level`, a __u32 at 72; the bindings'
        // newer structure goes on past it (`bpf_token_path`).
        assert_eq!(
            std::mem::offset_of!(sys::bpf_object_open_opts, kernel_log_level),
            72
        );
        assert_valid_for_libbpf_1_1(&open, open.sz, 76);
        assert_eq!(open.object_name, name.as_ptr());
        assert!(!open.relaxed_maps);

        let detach = detach_opts(7);
        assert_valid_for_libbpf_1_1(&detach, detach.sz, 12);
        assert_eq!(detach.old_prog_fd, 7);

        // libbpf 1.1's `bpf_test_run_opts` ends with `batch_size` at 76.
        assert_eq!(std::mem::offset_of!(sys::bpf_test_run_opts, retval), 56);
        assert_eq!(std::mem::offset_of!(sys::bpf_test_run_opts, batch_size), 76);
        let run = sys::bpf_test_run_opts::default();
        assert_valid_for_libbpf_1_1(&run, size_of_val(&run) as sys::size_t, 80);
        assert!(bytes_of(&run).iter().all(|b| *b == 0));
    }

    #[test]
    fn the_prog_info_name_is_where_the_kernel_puts_it() {
        // include/uapi/linux/bpf.h: `name[BPF_OBJ_NAME_LEN]` follows the map pointer.
        assert_eq!(std::mem::offset_of!(sys::bpf_prog_info, name), 64);
        assert_eq!(sys::BPF_OBJ_NAME_LEN, 16);
    }

    #[test]
    fn the_xdp_md_context_has_the_kernel_layout() {
        assert_eq!(size_of::<sys::xdp_md>(), 24);
        assert_eq!(std::mem::offset_of!(sys::xdp_md, ingress_ifindex), 12);
        let c = xdp_md_ctx(7, 2, 60);
        assert_eq!(&c[4..8], &60u32.to_ne_bytes(), "data_end");
        assert_eq!(&c[12..16], &7u32.to_ne_bytes(), "ingress_ifindex");
        assert_eq!(&c[16..20], &2u32.to_ne_bytes(), "rx_queue_index");
        assert_eq!(&c[..4], &[0; 4]);
        assert_eq!(&c[20..], &[0; 4]);
    }

    #[test]
    fn the_steering_program_is_embedded() {
        assert!(objects::XSK_STEER.starts_with(b"\x7fELF"));
    }

    #[test]
    fn a_garbage_object_is_an_error_naming_it() {
        let e = match BpfObject::load("garbage", b"not an ELF file") {
            Err(e) => e.to_string(),
            Ok(_) => panic!("garbage loaded"),
        };
        assert!(e.contains("garbage"), "{e}");
    }

    #[test]
    fn a_bad_descriptor_is_not_a_map() {
        let e = map_update(-1, &[0; 4], &[0; 4]).unwrap_err().to_string();
        assert!(e.contains("-1"), "{e}");
    }
}
