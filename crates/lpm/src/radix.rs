//! radix (in progress)
