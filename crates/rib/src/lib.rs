//! # vfsr-rib: the routing information base (control plane)
