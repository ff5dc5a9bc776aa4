//! Model providers implementing rein_protocol::Model. Work in progress: see issue 3.

#![warn(missing_docs, unreachable_pub)]
