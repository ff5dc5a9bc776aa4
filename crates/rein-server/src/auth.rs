//! Bearer-token authentication: each configured token names a principal that owns sessions.

use std::{collections::BTreeMap, fmt, sync::Arc};

use axum::http::{HeaderMap, header};

/// Who is calling: the owner of the sessions they create. Another principal's session is
/// reported as not found.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Principal(Arc<str>);

impl Principal {
    /// The principal of local single-user mode (no tokens configured).
    pub(crate) const LOCAL: &'static str = rein_runtime::LOCAL_OWNER;

    /// A principal by name.
    pub(crate) fn new(name: &str) -> Self {
        Principal(Arc::from(name))
    }

    /// Its name.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    /// The stored id of this principal's session or view context `id`: in its own namespace
    /// when it has one (`rein_runtime::scoped_id`; `local` keeps ids as they are).
    pub(crate) fn scope(&self, id: &str) -> String {
        rein_runtime::scoped_id(Some(self.as_str()), id)
    }

    /// The id this principal knows the stored `key` by (`rein_runtime::unscoped_id`).
    pub(crate) fn unscope<'a>(&self, key: &'a str) -> &'a str {
        rein_runtime::unscoped_id(Some(self.as_str()), key)
    }

    /// Whether this principal's ids are stored in a namespace of its own.
    pub(crate) fn is_namespaced(&self) -> bool {
        self.scope("x") != "x"
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Whether a token may not name `principal`: [`Principal::LOCAL`] is local mode's, whose ids
/// are stored without a namespace, so a token naming it would see local mode's sessions.
pub(crate) fn is_reserved(principal: &str) -> bool {
    principal == Principal::LOCAL
}

/// Why a request has no principal (both answer `401 unauthorized`; the log tells them apart).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// No bearer token was presented.
    NoToken,
    /// The token presented is not configured.
    UnknownToken,
}

impl Refusal {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Refusal::NoToken => "no token",
            Refusal::UnknownToken => "unknown token",
        }
    }
}

/// The percent-decoded value of the first `name=` pair of a query string. `+` stays `+`: a
/// token never holds a space, and a client that encodes its token writes `+` as `%2B`.
pub(crate) fn query_value(query: &str, name: &str) -> Option<String> {
    let raw = query.split('&').find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))?;
    percent_decode(raw)
}

/// Decodes `%XX` escapes; `None` for a malformed escape or bytes that are not UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
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

    /// The principal of a request: from `Authorization: Bearer <token>`, or, only where
    /// `query_token_allowed` (the event stream: EventSource cannot set headers), from the
    /// percent-decoded `access_token` query parameter; `local` when no tokens are configured.
    pub(crate) fn principal(
        &self,
        headers: &HeaderMap,
        query: Option<&str>,
        query_token_allowed: bool,
    ) -> Result<Principal, Refusal> {
        if !self.required() {
            return Ok(self.local.clone());
        }
        let from_header = headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| {
                value.strip_prefix("Bearer ").or_else(|| value.strip_prefix("bearer "))
            })
            .map(|token| token.trim().to_owned());
        let from_query = query
            .filter(|_| query_token_allowed)
            .and_then(|query| query_value(query, "access_token"))
            .filter(|token| !token.is_empty());
        let token = from_header.or(from_query).ok_or(Refusal::NoToken)?;
        // A token naming the reserved principal is never one (`serve` refuses such a config; a
        // host mounting the router gets a 401 instead of local mode's sessions).
        self.lookup(&token)
            .filter(|principal| !is_reserved(principal.as_str()))
            .ok_or(Refusal::UnknownToken)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values_are_percent_decoded_and_plus_is_kept() {
        assert_eq!(
            query_value("a=1&access_token=ab%2Bc%2F%3D", "access_token").as_deref(),
            Some("ab+c/=")
        );
        assert_eq!(query_value("access_token=a+b", "access_token").as_deref(), Some("a+b"));
        assert_eq!(query_value("xaccess_token=a", "access_token"), None);
        assert_eq!(query_value("access_token=%zz", "access_token"), None);
        assert_eq!(query_value("access_token=%e2%82", "access_token"), None);
    }
}
