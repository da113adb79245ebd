//! Route tables in and out.
