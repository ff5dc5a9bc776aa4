//! Context budget and transcript normalizer (pure, no I/O). Work in progress: see issue 5.

#![warn(missing_docs, unreachable_pub)]
