pub use vfsrd::daemons;
