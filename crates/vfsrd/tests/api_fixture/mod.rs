//! A router in memory for the control API's tests and its fuzz target (`fuzz/fuzz_targets/
//! api_requests.rs` includes this file): two ports, a configured route, no workers, and a
//! reload that finds nothing to change.

use serde_json::Value;
use vfsr_lpm::radix::Radix;
use vfsr_rib::{IpPrefix, Source};
use vfsr_wire::MacAddr;
use vfsrd::api::{Answers, View};
use vfsrd::config::{self, Plan, PuntSection};
use vfsrd::control::Control;
use vfsrd::error::Error;

/// The control plane the API serves.
pub type C = Control<Radix<u32>, Radix<u128>>;

const CONFIG: &str = r#"
[[interface]]
name = "p0"
addresses = ["10.0.0.1/24", "fd00::1/64"]

[[interface]]
name = "p1"
addresses = ["192.0.2.1/24", "2001:db8::1/64"]

[[route]]
prefix = "198.51.100.0/24"
via = "10.0.0.2"
"#;

const MACS: [MacAddr; 2] = [MacAddr([2, 0, 0, 0, 0, 1]), MacAddr([2, 0, 0, 0, 0, 2])];

/// One client's view of the API: the control plane, its configuration and what answers.
pub struct Api {
    /// The control plane, its router and RIB.
    pub c: C,
    /// The configuration in force.
    pub plan: Plan,
    /// The answering state (the counters' zero points).
    pub answers: Answers,
}

impl Api {
    /// The router of [`CONFIG`], no request answered yet.
    pub fn new() -> Api {
        let plan = config::parse(CONFIG, None).expect("the fixed configuration checks");
        let (c, _, _) = C::in_memory(&plan, &MACS, &[], &PuntSection::default())
            .expect("the fixed router builds");
        Api {
            c,
            plan,
            answers: Answers::default(),
        }
    }

    /// Answers the complete lines in `inbuf` into `out`, as the server does for a client (see
    /// `Answers::take_lines`); `true` when the connection is to be closed.
    pub fn take_lines(&mut self, inbuf: &mut Vec<u8>, out: &mut Vec<u8>) -> bool {
        // A reload that finds nothing to change, as vfsrd's does for an unchanged file.
        let mut reload = |_: &mut C, _: &mut Plan| -> Result<Value, Error> {
            Ok(serde_json::json!({"applied": [], "restart_needed": []}))
        };
        let mut view = View {
            control: &mut self.c,
            plan: &mut self.plan,
            shared: &[],
            wstats: &[],
            fast: &[],
            backends: &[],
            tids: &[],
            uptime: std::time::Duration::from_secs(1),
            reload: &mut reload,
        };
        self.answers.take_lines(inbuf, out, &mut view)
    }
}

/// The API's routes for `p` in the RIB, resolved or not.
pub fn api_routes(c: &C, p: &IpPrefix) -> usize {
    let details = match p {
        IpPrefix::V4(x) => c.router.rib().route_details(x),
        IpPrefix::V6(x) => c.router.rib().route_details(x),
    };
    details
        .iter()
        .filter(|d| d.route.source == Source::Api)
        .count()
}
