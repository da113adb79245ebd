//! dir24 (in progress)
