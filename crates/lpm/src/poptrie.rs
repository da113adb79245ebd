//! poptrie (in progress)
