//! Bearer-token authentication: each configured token names a principal that owns sessions.

use std::{collections::BTreeMap, fmt, sync::Arc};

use axum::http::{HeaderMap, header};

use crate::error::ApiError;

/// Who is calling: the owner of the sessions they create. Another principal's session is
/// reported as not found.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Principal(Arc<str>);

impl Principal {
    /// The principal of local single-user mode (no tokens configured).
    pub const LOCAL: &'static str = "local";

    /// A principal by name.
    pub fn new(name: &str) -> Self {
        Principal(Arc::from(name))
    }

    /// Its name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Maps bearer tokens to principals.
#[derive(Debug, Clone)]
pub(crate) struct Auth {
    tokens: BTreeMap<String, Principal>,
    local: Principal,
}

impl Auth {
    pub(crate) fn new(tokens: &BTreeMap<String, String>) -> Self {
        Auth {
            tokens: tokens
                .iter()
                .map(|(token, name)| (token.clone(), Principal::new(name)))
                .collect(),
            local: Principal::new(Principal::LOCAL),
        }
    }

    /// Whether callers must present a token.
    pub(crate) fn required(&self) -> bool {
        !self.tokens.is_empty()
    }

    /// The principal of a request: from `Authorization: Bearer <token>`, or from the
    /// `access_token` query parameter (EventSource cannot set headers), or `local` when no
    /// tokens are configured.
    pub(crate) fn principal(
        &self,
        headers: &HeaderMap,
        query: Option<&str>,
    ) -> Result<Principal, ApiError> {
        if !self.required() {
            return Ok(self.local.clone());
        }
        let from_header = headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| {
                value.strip_prefix("Bearer ").or_else(|| value.strip_prefix("bearer "))
            })
            .map(str::trim);
        let from_query = query.and_then(|query| {
            query
                .split('&')
                .find_map(|pair| pair.strip_prefix("access_token="))
                .filter(|t| !t.is_empty())
        });
        let token = from_header.or(from_query).ok_or_else(ApiError::unauthorized)?;
        self.lookup(token).ok_or_else(ApiError::unauthorized)
    }

    /// Compares the presented token with every configured one without stopping early.
    fn lookup(&self, presented: &str) -> Option<Principal> {
        let mut found = None;
        for (token, principal) in &self.tokens {
            if constant_time_eq(token.as_bytes(), presented.as_bytes()) {
                found = Some(principal.clone());
            }
        }
        found
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
