//! Peers: the LPM engines users would otherwise pick, behind the same trait.
