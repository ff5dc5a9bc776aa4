//! Fresh record ids: a prefix and 32 hex digits (`task:9f2c...`), unique without a random-number crate.

use std::{
    collections::hash_map::RandomState,
    hash::{BuildHasher, Hasher},
    sync::atomic::{AtomicU64, Ordering},
    time::{SystemTime, UNIX_EPOCH},
};

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A new id `<prefix>:<32 hex>`. Two SipHash states with per-process random keys mix a counter,
/// the time and the process id, so ids do not repeat across threads, processes or restarts.
pub fn new_id(prefix: &str) -> String {
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos =
        SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or_default();
    let mut halves = [0u64; 2];
    for (salt, half) in halves.iter_mut().enumerate() {
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_u64(count);
        hasher.write_u128(nanos);
        hasher.write_u32(std::process::id());
        hasher.write_usize(salt);
        *half = hasher.finish();
    }
    format!("{prefix}:{:016x}{:016x}", halves[0], halves[1])
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_are_prefixed_and_distinct() {
        let ids: std::collections::HashSet<String> =
            (0..10_000).map(|_| super::new_id("task")).collect();
        assert_eq!(ids.len(), 10_000);
        assert!(ids.iter().all(|id| id.starts_with("task:") && id.len() == 5 + 32));
    }
}
