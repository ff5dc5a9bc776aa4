//! Session and transcript storage. Work in progress: see issue 6.

#![warn(missing_docs, unreachable_pub)]
