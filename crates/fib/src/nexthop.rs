//! The next-hop table as the forwarding path sees it (published snapshots).
