//! Latency through and to the router: `ping` from the generator's namespace to the sink
//! (average, loss) and one-byte TCP request/response from the generator's namespace to a
//! server on the router's own address (median, requests unanswered).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use vfsrd::netlab::NetLab;

use super::{Error, Lab3, ROUTER_A, SINK};

/// Average microseconds and percent lost of `count` pings from the generator to the sink.
pub(super) fn ping_avg_us(lab: &NetLab, count: u32) -> (f64, f64) {
    let c = count.to_string();
    let o = lab
        .exec(
            "gen",
            &["ping", "-n", "-q", "-c", &c, "-i", "0.01", "-W", "1", SINK],
        )
        .ok();
    let text = o
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let avg = text
        .lines()
        .find(|l| l.contains("min/avg/max"))
        .and_then(|l| l.split('=').nth(1))
        .and_then(|v| v.trim().split('/').nth(1))
        .and_then(|v| v.parse::<f64>().ok())
        .map(|ms| ms * 1000.0)
        .unwrap_or(f64::NAN);
    let loss = text
        .split(',')
        .find_map(|p| p.trim().strip_suffix("% packet loss"))
        .and_then(|p| p.trim().parse::<f64>().ok())
        .unwrap_or(100.0);
    (avg, loss)
}

/// A request/response server on the router's address (one connection, echoes bytes). It
/// waits for that connection at most `ACCEPT_WAIT`, so a client that never connects (the
/// router too busy to answer its handshake) cannot leave the benchmark waiting forever.
fn rr_server(lab: &NetLab) -> Result<std::thread::JoinHandle<()>, Error> {
    let listener = lab
        .in_ns("rtr", || {
            let l = TcpListener::bind((ROUTER_A, 7000))?;
            l.set_nonblocking(true)?;
            Ok::<_, std::io::Error>(l)
        })?
        .map_err(Error::Listen)?;
    Ok(std::thread::spawn(move || {
        let t0 = Instant::now();
        let mut s = loop {
            match listener.accept() {
                Ok((s, _)) => break s,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if t0.elapsed() > ACCEPT_WAIT {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(_) => return,
            }
        };
        let _ = s.set_nonblocking(false);
        let _ = s.set_nodelay(true);
        let _ = s.set_read_timeout(Some(Duration::from_secs(3)));
        let mut b = [0u8; 1];
        while s.read_exact(&mut b).is_ok() {
            if s.write_all(&b).is_err() {
                break;
            }
        }
    }))
}

/// How long the request/response server waits for its client.
const ACCEPT_WAIT: Duration = Duration::from_secs(6);

/// Median microseconds of `n` one-byte round trips to the router's address, and how many
/// requests got no answer within a second. Each request carries a sequence byte and stale
/// answers (to requests already given up) are skipped, so one lost segment costs one
/// sample, not the measurement. NaN when the connection cannot be made.
fn tcp_rr_us(lab: &NetLab, n: usize) -> (f64, u32) {
    let server = match rr_server(lab) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("vfsr: tcp_rr: {e}");
            return (f64::NAN, 0);
        }
    };
    let r = lab.in_ns("gen", move || -> std::io::Result<(Vec<f64>, u32)> {
        let addr: SocketAddr = format!("{ROUTER_A}:7000")
            .parse()
            .map_err(|_| std::io::Error::other("address"))?;
        let mut c = TcpStream::connect_timeout(&addr, Duration::from_secs(3))?;
        c.set_nodelay(true)?;
        c.set_read_timeout(Some(Duration::from_secs(1)))?;
        let mut v = Vec::with_capacity(n);
        let mut timeouts = 0u32;
        for i in 0..n {
            let seq = (i % 251) as u8 + 1;
            let t = Instant::now();
            c.write_all(&[seq])?;
            let mut b = [0u8; 1];
            loop {
                match c.read_exact(&mut b) {
                    Ok(()) if b[0] == seq => {
                        v.push(t.elapsed().as_secs_f64() * 1e6);
                        break;
                    }
                    Ok(()) => continue,
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) =>
                    {
                        timeouts += 1;
                        break;
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        Ok((v, timeouts))
    });
    let _ = server.join();
    match r {
        Ok(Ok((mut v, timeouts))) if !v.is_empty() => {
            v.sort_by(|a, b| a.total_cmp(b));
            (v[v.len() / 2], timeouts)
        }
        Ok(Ok((_, timeouts))) => (f64::NAN, timeouts),
        Ok(Err(e)) => {
            eprintln!("vfsr: tcp_rr: {e}");
            (f64::NAN, 0)
        }
        Err(e) => {
            eprintln!("vfsr: tcp_rr: {e}");
            (f64::NAN, 0)
        }
    }
}

/// Ping through the router (average µs, % lost) and TCP request/response to it (median µs,
/// requests unanswered).
pub(super) fn latency_probe(l: &Lab3) -> (f64, f64, f64, u32) {
    let (p, loss) = ping_avg_us(&l.lab, 200);
    let (rr, timeouts) = tcp_rr_us(&l.lab, 200);
    (p, loss, rr, timeouts)
}

/// Answers each byte with itself, one connection at a time, until `stop` (the long-running
/// request/response server of `cp flood` and `stress`, on a non-blocking `listener`).
pub(crate) fn echo_server(listener: TcpListener, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        let mut s = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            }
            Err(_) => {
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        let _ = s.set_nonblocking(false);
        let _ = s.set_nodelay(true);
        let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
        let mut b = [0u8; 1];
        while !stop.load(Ordering::Relaxed) {
            match s.read(&mut b) {
                Ok(1) => {
                    if s.write_all(&b).is_err() {
                        break;
                    }
                }
                Ok(_) => break,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => break,
            }
        }
    }
}

/// What a closed-loop request/response client measured.
#[derive(Clone, Debug, Default)]
pub(crate) struct RrOutcome {
    /// Round trips of the answered transactions, µs, in the order they were made (sorted
    /// after [`RrOutcome::sorted`]).
    pub(crate) samples: Vec<f64>,
    /// Transactions given up on (no answer within the pace's `give_up`).
    pub(crate) unanswered: u32,
    /// What ended the client early, if anything did.
    pub(crate) error: Option<String>,
}

impl RrOutcome {
    /// The same, with the samples sorted (for [`RrOutcome::pct`]).
    pub(crate) fn sorted(mut self) -> RrOutcome {
        self.samples.sort_by(f64::total_cmp);
        self
    }

    /// Nearest-rank percentile `p` of the samples, which must be [`RrOutcome::sorted`].
    pub(crate) fn pct(&self, p: f64) -> Option<f64> {
        percentile(&self.samples, p)
    }
}

/// How a request/response client paces itself and waits.
pub(crate) struct RrPace {
    /// A transaction starts this long after the previous one started, at the earliest.
    pub(crate) every: Duration,
    /// How often a wait for the answer wakes (to see whether to give up or stop).
    pub(crate) read_timeout: Duration,
    /// An answer later than this counts the transaction unanswered.
    pub(crate) give_up: Duration,
}

/// Closed-loop one-byte transactions on `c` for `secs` (or until `stop()`), paced by
/// `pace`: each writes a sequence byte and waits for the server to echo it.
pub(crate) fn rr_client(
    mut c: TcpStream,
    secs: f64,
    pace: &RrPace,
    stop: impl Fn() -> bool,
) -> RrOutcome {
    let mut out = RrOutcome::default();
    let _ = c.set_nodelay(true);
    let _ = c.set_read_timeout(Some(pace.read_timeout));
    let t0 = Instant::now();
    let mut next = t0;
    let mut seq: u8 = 0;
    while t0.elapsed().as_secs_f64() < secs && !stop() {
        let now = Instant::now();
        if now < next {
            std::thread::sleep(next - now);
        }
        seq = seq % 250 + 1;
        let t = Instant::now();
        next = t + pace.every;
        if let Err(e) = c.write_all(&[seq]) {
            out.error = Some(format!("send: {e}"));
            return out;
        }
        let mut b = [0u8; 1];
        loop {
            match c.read(&mut b) {
                Ok(1) if b[0] == seq => {
                    out.samples.push(t.elapsed().as_secs_f64() * 1e6);
                    break;
                }
                Ok(1) => continue,
                Ok(_) => {
                    out.error = Some("the server closed the connection".into());
                    return out;
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    if t.elapsed() > pace.give_up || stop() {
                        out.unanswered += 1;
                        break;
                    }
                }
                Err(e) => {
                    out.error = Some(format!("receive: {e}"));
                    return out;
                }
            }
        }
    }
    out
}

/// Nearest-rank percentile `p` (0..=1) of sorted `v`; `None` when empty.
pub(crate) fn percentile(v: &[f64], p: f64) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let k = ((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
    v.get(k).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), Some(50.0));
        assert_eq!(percentile(&v, 0.99), Some(99.0));
        assert_eq!(percentile(&v, 1.0), Some(100.0));
        assert_eq!(percentile(&v, 0.0), Some(1.0));
        assert_eq!(percentile(&[], 0.5), None);
    }
}
