//! # vfsr-netlink: rtnetlink and FPM messages for the route sources

pub mod msg;
