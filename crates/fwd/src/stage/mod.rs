//! The forwarding stages, one per file, in the order a packet meets them.
//!
//! ```text
//!   eth_input ─▶ ip4_input / ip6_input ─▶ classify ─▶ ttl ─▶ route ─▶ ecmp ─▶ neighbor
//!                                            │                                  │
//!                                          punt                                mtu ─▶ rewrite ─▶ tx
//! ```
//!
//! Each stage is a function from what it reads to an outcome enum; drops carry their
//! [`DropReason`](crate::counters::DropReason). The worker (`worker/`) strings them
//! together, counts, and sends ICMP errors.

pub mod classify;
pub mod ecmp;
pub mod eth_input;
pub mod ip4_input;
pub mod ip6_input;
pub mod mtu;
pub mod neighbor;
pub mod rewrite;
pub mod route;
pub mod ttl;
