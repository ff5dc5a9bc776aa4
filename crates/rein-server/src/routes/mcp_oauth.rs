//! MCP OAuth through rein's own address: Connect (`POST /mcp/servers/{name}/connect`) binds
//! the caller's browser to a waiting authorization with a cookie, and the callback (`GET
//! /mcp/oauth/callback`) takes the authorization server's redirect only from that browser.

use axum::{
    Json,
    extract::{Path, Request, State},
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};

use super::extract::{AppState, Caller};
use crate::{assets, auth::query_value, error::ApiError};

/// Where the OAuth callback's cookies live: only the callback is sent them.
const OAUTH_COOKIE_PATH: &str = "/agent/api/runtime/mcp/oauth/callback";

/// The name of the cookie that binds a browser to the authorization of `state`: one per
/// authorization, so that two servers connected at once keep theirs (FNV-1a of the `state`, a
/// name only, not a secret).
fn oauth_cookie_name(state: &str) -> String {
    let hash = state.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("rein-mcp-oauth-{hash:016x}")
}

/// The value of cookie `name` among the request's `Cookie` headers.
fn request_cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.trim().to_owned())
}

/// `Set-Cookie` for the binding cookie of `state`: `secret` for `max_age` seconds (0 clears it).
/// `HttpOnly` (no script reads it), `SameSite=Lax` (sent on the authorization server's top-level
/// redirect back, not on a cross-site subrequest), and only to the callback's path.
fn oauth_cookie(state: &str, secret: &str, max_age: u64) -> Option<HeaderValue> {
    let cookie = format!(
        "{}={secret}; Path={OAUTH_COOKIE_PATH}; Max-Age={max_age}; HttpOnly; SameSite=Lax",
        oauth_cookie_name(state)
    );
    HeaderValue::from_str(&cookie).ok()
}

/// Connect: the caller's waiting authorization of MCP server `name` (else the server's shared
/// one), with a cookie that binds this browser to it; the callback takes the authorization
/// server's redirect only from a browser with that cookie, so a URL handed to someone else
/// cannot file their authorization under the caller.
pub(super) async fn connect(
    State(s): State<AppState>,
    Caller(principal): Caller,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let not_found = |message: String| {
        ApiError::new(StatusCode::NOT_FOUND, "mcp_authorization_not_found", message)
            .with_details(serde_json::json!({ "server": name }))
    };
    let Some(connect) = &s.config.mcp_oauth_connect.0 else {
        return Err(not_found(
            "This rein does not authorize MCP servers through its own address.".to_owned(),
        ));
    };
    let start = connect(principal.as_str(), &name).map_err(|why| not_found(format!("{why}.")))?;
    let cookie = oauth_cookie(&start.state, &start.secret, start.expires_in.as_secs().max(1))
        .ok_or_else(|| ApiError::internal("The host gave a secret that cannot be a cookie."))?;
    let body = crate::api::McpAuthorization {
        server: name.clone(),
        authorization_url: start.authorization_url,
        expires_in_seconds: start.expires_in.as_secs(),
    };
    let mut response = Json(body).into_response();
    response.headers_mut().append(header::SET_COOKIE, cookie);
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

/// The browser's redirect after a person authorized an MCP server: handed to the host's MCP
/// client with the secret of the browser's binding cookie (see [`connect`]); no token
/// is asked for, the browser comes from the authorization server. Answers a small page either
/// way, with the chat page's security headers.
pub(super) async fn callback(State(s): State<AppState>, request: Request) -> Response {
    let Some(complete) = &s.config.mcp_oauth.0 else {
        return oauth_page(
            StatusCode::NOT_FOUND,
            "Not connected",
            "This rein does not authorize MCP servers through its own address.",
        );
    };
    // The whole path (this handler sees it without the `/agent/api/runtime` it is nested
    // under): the host rebuilds the redirect URI from it.
    let uri = request.uri();
    let query = uri.query().unwrap_or("");
    let target =
        format!("/agent/api/runtime{}", uri.path_and_query().map_or("", |target| target.as_str()));
    let error = query_value(query, "error");
    let state = query_value(query, "state");
    let secret = state
        .as_deref()
        .and_then(|state| request_cookie(request.headers(), &oauth_cookie_name(state)));
    let outcome = complete(&target, secret.as_deref());
    let mut response = match (outcome, error) {
        (Ok(connected), None) => {
            let whose = match &connected.principal {
                Some(principal) => format!("for the principal \u{201c}{principal}\u{201d}"),
                None => format!(
                    "over its connection shared by every principal (authorized from the chat of \
                     \u{201c}{}\u{201d})",
                    connected.connected_by
                ),
            };
            oauth_page(
                StatusCode::OK,
                "Connected",
                &format!(
                    "rein can now reach the MCP server \u{201c}{}\u{201d} {whose}. You can close \
                     this tab.",
                    connected.server
                ),
            )
        }
        (Ok(connected), Some(error)) => oauth_page(
            StatusCode::BAD_REQUEST,
            "Not connected",
            &format!(
                "The authorization server refused access to \u{201c}{}\u{201d}: {error}.",
                connected.server
            ),
        ),
        (Err(crate::config::McpOAuthRefusal::OtherBrowser(why)), _) => oauth_page(
            StatusCode::FORBIDDEN,
            "Not connected",
            &format!(
                "rein did not use this authorization: {why}. An authorization is taken only from \
                 the browser that opened it with Connect in its principal's chat."
            ),
        ),
        (Err(crate::config::McpOAuthRefusal::NotWaiting(why)), _) => oauth_page(
            StatusCode::BAD_REQUEST,
            "Not connected",
            &format!(
                "This authorization could not be used: {why}. Open the chat and use Connect again."
            ),
        ),
    };
    if let (Some(state), Some(_)) = (&state, &secret)
        && let Some(clear) = oauth_cookie(state, "", 0)
    {
        response.headers_mut().append(header::SET_COOKIE, clear);
    }
    response
}

/// A small HTML page with a title and one sentence (escaped).
fn oauth_page(status: StatusCode, title: &str, text: &str) -> Response {
    let escape = |text: &str| {
        text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
    };
    // No inline style: the page has the chat's Content-Security-Policy.
    let body = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>rein: {title}</title></head>\
         <body><h1>{title}</h1><p>{text}</p></body></html>",
        title = escape(title),
        text = escape(text),
    );
    let mut response = (status, body).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    assets::page_headers(response.headers_mut());
    response
}
