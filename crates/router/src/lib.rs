//! # vfsr-router: the router's control-side state
