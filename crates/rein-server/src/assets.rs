//! The web chat: static files embedded in the binary and served at `/`, `/assets/*` and
//! `/widget.js` (the same chat for a host page of another origin, see `assets/widget.js`).

use axum::{
    extract::Path,
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};

use crate::error::ApiError;

/// One embedded file: its name under `/assets/`, its media type and its bytes.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

const ASSETS: &[Asset] = &[
    Asset {
        name: "index.html",
        content_type: "text/html; charset=utf-8",
        body: include_bytes!("../assets/index.html"),
    },
    Asset {
        name: "app.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../assets/app.js"),
    },
    Asset {
        name: "markdown.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../assets/markdown.js"),
    },
    Asset {
        name: "chat.css",
        content_type: "text/css; charset=utf-8",
        body: include_bytes!("../assets/chat.css"),
    },
    Asset {
        name: "widget.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../assets/widget.js"),
    },
    Asset {
        name: "icon.svg",
        content_type: "image/svg+xml",
        body: include_bytes!("../assets/icon.svg"),
    },
];

/// The page's Content-Security-Policy: everything from this origin only, no inline script, no
/// frames, no plugins. Model text can never bring in script or load anything from outside.
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; \
                   form-action 'self'";

fn serve(asset: &Asset) -> Response {
    let mut response = (StatusCode::OK, asset.body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(asset.content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    page_headers(headers);
    response
}

/// The security headers of every page rein serves (the chat, and the OAuth callback's page):
/// the [`CSP`], no content-type sniffing, no referrer.
pub(crate) fn page_headers(headers: &mut HeaderMap) {
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
}

/// `GET /`: the chat page.
pub(crate) async fn index() -> Response {
    serve(&ASSETS[0])
}

/// `GET /widget.js`: the embeddable chat, for a host page's `<script>` tag.
pub(crate) async fn widget() -> Response {
    match ASSETS.iter().find(|asset| asset.name == "widget.js") {
        Some(asset) => serve(asset),
        None => ApiError::not_found("asset_not_found", "Asset", "widget.js").into_response(),
    }
}

/// `GET /assets/{name}`.
pub(crate) async fn asset(Path(name): Path<String>) -> Response {
    match ASSETS.iter().find(|asset| asset.name == name) {
        Some(asset) => serve(asset),
        None => ApiError::not_found("asset_not_found", "Asset", &name).into_response(),
    }
}
