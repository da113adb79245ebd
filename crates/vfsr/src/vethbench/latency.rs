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
