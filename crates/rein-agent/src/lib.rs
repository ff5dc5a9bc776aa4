//! The agent loop. Work in progress: see issue 9.

#![warn(missing_docs, unreachable_pub)]
