//! lctrie (in progress)
