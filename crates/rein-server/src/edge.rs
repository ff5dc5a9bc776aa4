//! The edge every request crosses before a handler: `Host` and `Origin` checks, the caller's
//! principal, and the access log.
//!
//! In order, for each request:
//! 1. **Host** (local mode only, where no token stands between a page and the API): the `Host`
//!    must be `localhost`, the bound IP address (any loopback address when bound to loopback,
//!    any address when bound to every interface), or a name in `allowed_hosts`. A DNS
//!    rebinding page sends its own domain, so it is refused with `403 host_not_allowed`.
//! 2. **Origin** (every mode), for `POST`, `PUT`, `PATCH` and `DELETE`: a request that carries
//!    `Origin` must come from the server's own origin or one in `cors_origins`, else
//!    `403 origin_not_allowed`. Bodiless cross-origin posts (approve, interrupt, cancel) need no
//!    CORS preflight, so only this check stops them. No `Origin` means no browser: allowed.
//! 3. **Principal**: from the bearer token, or on the event stream only from `access_token`;
//!    put in the request's extensions as [`Authenticated`] for the `Caller` extractor. A
//!    request without one is not refused here: routes that need none (the page, health) serve it.
//! 4. **Access log**: one `info` line per request (method, route template, status, principal,
//!    latency, request id) under the target `rein_server::access`; a `401` also gets a `warn`
//!    line saying why (no token, unknown token) and from which peer.

use std::{
    net::{IpAddr, SocketAddr},
    sync::Arc,
    time::Instant,
};

use axum::{
    extract::{ConnectInfo, MatchedPath, Request, State},
    http::{HeaderMap, Method, StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Response},
};

use crate::{
    auth::{Auth, Principal, Refusal},
    config::ServerConfig,
    error::{ApiError, current_request_id},
};

/// What the edge checks against, built once per router.
#[derive(Debug)]
pub(crate) struct Edge {
    auth: Arc<Auth>,
    bound: SocketAddr,
    allowed_hosts: Vec<String>,
    cors_origins: Vec<String>,
}

/// The principal the edge found for a request (`Err` says why there is none).
#[derive(Debug, Clone)]
pub(crate) struct Authenticated(pub(crate) Result<Principal, Refusal>);

impl Edge {
    pub(crate) fn new(config: &ServerConfig, auth: Arc<Auth>, bound: SocketAddr) -> Self {
        let lower = |items: &[String]| -> Vec<String> {
            items
                .iter()
                .map(|item| item.trim().trim_end_matches('/').to_ascii_lowercase())
                .collect()
        };
        Edge {
            auth,
            bound,
            allowed_hosts: lower(&config.allowed_hosts),
            cors_origins: lower(&config.cors_origins),
        }
    }

    /// Whether a `Host` header value may be served in local mode.
    fn host_allowed(&self, host: &str) -> bool {
        let host = host.trim().to_ascii_lowercase();
        let (name, port) = split_host(&host);
        if name == "localhost" {
            return true;
        }
        if let Ok(ip) = name.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>() {
            let bound = self.bound.ip();
            return bound.is_unspecified()
                || ip == bound
                || (ip.is_loopback() && bound.is_loopback());
        }
        self.allowed_hosts.iter().any(|allowed| match split_host(allowed) {
            (allowed_name, None) => allowed_name == name,
            (allowed_name, Some(allowed_port)) => {
                allowed_name == name && Some(allowed_port) == port.or(Some("80"))
            }
        })
    }

    /// Whether a state-changing request from `origin` may be served; `host` is the request's
    /// `Host` (the server's own origin is `http(s)://<host>`).
    fn origin_allowed(&self, origin: &str, host: Option<&str>) -> bool {
        let origin = origin.trim().trim_end_matches('/').to_ascii_lowercase();
        if self.cors_origins.contains(&origin) {
            return true;
        }
        let authority = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://"));
        match (authority, host) {
            (Some(authority), Some(host)) => authority == host.trim().to_ascii_lowercase(),
            _ => false,
        }
    }
}

/// `name` and optional `port` of a `Host` value (`[::1]:8080`, `example:80`, `example`).
fn split_host(host: &str) -> (&str, Option<&str>) {
    if host.starts_with('[') {
        return match host.find(']') {
            Some(end) => (&host[..=end], host[end + 1..].strip_prefix(':')),
            None => (host, None),
        };
    }
    match host.rsplit_once(':') {
        Some((name, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => {
            (name, Some(port))
        }
        _ => (host, None),
    }
}

fn changes_state(method: &Method) -> bool {
    matches!(*method, Method::POST | Method::PUT | Method::PATCH | Method::DELETE)
}

fn header_text(headers: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|value| value.to_str().ok())
}

/// Whether the request is for a session's event stream, the one route that takes
/// `?access_token=` (browsers' EventSource cannot send headers).
fn is_event_stream(path: &str) -> bool {
    path.strip_prefix("/agent/api/runtime/sessions/")
        .and_then(|rest| rest.strip_suffix("/events"))
        .is_some_and(|id| !id.is_empty() && !id.contains('/'))
}

/// The middleware: the checks above, then the handler, then the log line.
pub(crate) async fn edge(
    State(edge): State<Arc<Edge>>,
    mut request: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let method = request.method().clone();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "-".to_owned(), |path| path.as_str().to_owned());
    let peer = request.extensions().get::<ConnectInfo<SocketAddr>>().map(|info| info.0);
    let headers = request.headers();
    let host = header_text(headers, header::HOST)
        .map(str::to_owned)
        .or_else(|| request.uri().authority().map(|a| a.as_str().to_owned()));

    let refused =
        if !edge.auth.required() && host.as_deref().is_some_and(|host| !edge.host_allowed(host)) {
            Some(ApiError::new(
                StatusCode::FORBIDDEN,
                "host_not_allowed",
                "This server answers only requests for its own address; add the name this request \
             used to `server.allowed_hosts` to serve it.",
            ))
        } else if changes_state(&method)
            && header_text(headers, header::ORIGIN)
                .is_some_and(|origin| !edge.origin_allowed(origin, host.as_deref()))
        {
            Some(ApiError::new(
                StatusCode::FORBIDDEN,
                "origin_not_allowed",
                "Requests that change state are accepted only from this server's own page or an \
             origin in `server.cors_origins`.",
            ))
        } else {
            None
        };

    let authenticated = Authenticated(edge.auth.principal(
        headers,
        request.uri().query(),
        is_event_stream(request.uri().path()),
    ));
    let principal = authenticated.0.as_ref().map_or("-", Principal::as_str).to_owned();
    let refusal = authenticated.0.as_ref().err().copied();
    let path = request.uri().path().to_owned();
    let response = match refused {
        Some(error) => {
            tracing::warn!(target: "rein_server::access", method = %method, path, host, peer = ?peer, code = error.code, "request refused");
            error.into_response()
        }
        None => {
            request.extensions_mut().insert(authenticated);
            next.run(request).await
        }
    };
    let status = response.status().as_u16();
    let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
    let request_id = current_request_id();
    tracing::info!(
        target: "rein_server::access",
        method = %method, route, status, principal, latency_ms, request_id,
        "request"
    );
    if status == 401 {
        tracing::warn!(
            target: "rein_server::access",
            method = %method, path, peer = ?peer, reason = refusal.map_or("-", Refusal::as_str), request_id,
            "unauthorized request"
        );
    }
    response
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn edge(bound: &str, allowed: &[&str], cors: &[&str]) -> Edge {
        let config = ServerConfig {
            allowed_hosts: allowed.iter().map(|s| (*s).to_owned()).collect(),
            cors_origins: cors.iter().map(|s| (*s).to_owned()).collect(),
            ..ServerConfig::default()
        };
        Edge::new(&config, Arc::new(Auth::new(&BTreeMap::new())), bound.parse().expect("addr"))
    }

    #[test]
    fn hosts_of_the_bound_loopback_address_and_listed_names_pass() {
        let edge = edge("127.0.0.1:8080", &["rein.internal", "box:9000"], &[]);
        for ok in [
            "127.0.0.1:8080",
            "localhost:8080",
            "LOCALHOST",
            "[::1]:8080",
            "127.0.0.2",
            "rein.internal:1",
            "box:9000",
        ] {
            assert!(edge.host_allowed(ok), "{ok}");
        }
        for bad in [
            "attacker.example",
            "attacker.example:8080",
            "10.0.0.1:8080",
            "box:9001",
            "box",
            "localhost.attacker.example",
        ] {
            assert!(!edge.host_allowed(bad), "{bad}");
        }
    }

    #[test]
    fn origins_must_be_the_servers_own_or_listed() {
        let edge = edge("127.0.0.1:8080", &[], &["https://app.example"]);
        assert!(edge.origin_allowed("http://127.0.0.1:8080", Some("127.0.0.1:8080")));
        assert!(edge.origin_allowed("https://app.example/", Some("127.0.0.1:8080")));
        assert!(!edge.origin_allowed("http://attacker.example", Some("127.0.0.1:8080")));
        assert!(!edge.origin_allowed("null", Some("127.0.0.1:8080")));
        assert!(!edge.origin_allowed("http://127.0.0.1:8080", None));
    }

    #[test]
    fn only_the_event_stream_takes_a_query_token() {
        assert!(is_event_stream("/agent/api/runtime/sessions/s1/events"));
        assert!(!is_event_stream("/agent/api/runtime/sessions"));
        assert!(!is_event_stream("/agent/api/runtime/sessions/s1/messages"));
        assert!(!is_event_stream("/agent/api/runtime/sessions/a/b/events"));
    }
}
