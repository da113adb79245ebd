pub mod daemons;
