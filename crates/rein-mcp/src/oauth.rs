//! OAuth 2.1 for Streamable HTTP servers, on rmcp's `auth` support: when a server answers 401
//! (or 403 `insufficient_scope`), rein discovers its authorization server, registers, has the
//! person authorize in a browser and retries the request with the token.
//!
//! The protocol of one authorization (`OAuthSession::authorize`):
//!
//! 1. **Discovery** from the challenge's `resource_metadata` (else the well-known
//!    protected-resource URLs, then the older spec's authorization-server metadata on the
//!    server's origin and its `/authorize` / `/token` / `/register` defaults), with the
//!    `resource` and `issuer` checks rmcp makes, but for one the 2025-03-26 spec allows:
//!    metadata on the server's origin may name an issuer elsewhere on that origin
//!    (`legacy_issuer_accepted`).
//! 2. **Registration**, in this order: the configured `client_id` (pre-registered, with the
//!    secret read from `client_secret_env`), else the client ID metadata document
//!    (`client_metadata_url`) when the authorization server supports it, else dynamic
//!    registration.
//! 3. **Scopes**: the configured `scopes`, else the challenge's `scope`, else the server's
//!    `scopes_supported` (with `offline_access` when the authorization server offers it).
//! 4. **Authorization code with PKCE**: the [`Authorizer`] shows the URL to the person and
//!    returns the redirect it came back with; the code is exchanged (the `iss` of the redirect
//!    checked) and the tokens saved in the [`TokenStore`].
//!
//! Two grants need no person (`oauth.grant`): **client credentials** (SEP-1046), with the
//! secret of `client_secret_env` (rmcp's request) or a `private_key_jwt` assertion signed with
//! `private_key_file` (rein's own request, `src/client_assertion.rs`); and **cross-app access**
//! (SEP-990), where the ID token of `oauth.idp` is exchanged at the identity provider for an
//! identity assertion (RFC 8693) and that at the authorization server for the token (RFC 7523,
//! rmcp's `enterprise` exchange). Their tokens go to the same store.
//!
//! A request is authorized at most [`MAX_AUTHORIZATIONS`] times (a server that keeps asking for
//! more scope is refused after that). Tokens are refreshed by rmcp shortly before they expire.
//! Nothing here logs a token; the store's file is mode 0600.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use rmcp::transport::auth::{
    AuthError, AuthorizationManager, AuthorizationMetadata, AuthorizationRequest,
    AuthorizationSession, ClientCredentialsConfig, CredentialStore, InMemoryCredentialStore,
    OAuthState, OAuthTokenResponse, StoredCredentials, default_oauth_http_client,
    enterprise::{
        EmaAuthorizationServer, EmaClientAssertion, EmaClientAssertionProvider,
        EmaClientAuthentication, EmaExchangeRequest,
    },
};
use serde::{Deserialize, Serialize};

use crate::client_assertion::SigningAlgorithm;

/// How many times one request may send the person to authorize (scope step-up included): with
/// the first authorization of the connection, at most three in a row.
pub const MAX_AUTHORIZATIONS: u32 = 2;

/// A server's `oauth` key: all optional; without it a server that asks for OAuth still gets it,
/// with dynamic registration.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OAuthConfig {
    /// A client ID registered with the authorization server out of band.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// The environment variable holding that client's secret (a confidential client).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret_env: Option<String>,
    /// The scopes to ask for; empty: the challenge's, else the server's `scopes_supported`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// The HTTPS URL of rein's client ID metadata document, used when the authorization server
    /// supports such documents and no `client_id` is configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_metadata_url: Option<String>,
    /// `client_credentials`: rein authenticates as itself (no person, no browser) with
    /// `client_id` and the secret of `client_secret_env` (or the key of `private_key_file`);
    /// `cross_app_access`: rein trades the person's enterprise ID token (see `idp`) for an
    /// access token, with no browser; default `authorization_code`.
    #[serde(default, skip_serializing_if = "OAuthGrant::is_default")]
    pub grant: OAuthGrant,
    /// A PEM private key file (PKCS#8, or PKCS#1 for RSA, SEC1 for EC): with
    /// `grant = "client_credentials"` (or `"cross_app_access"`, at the authorization server),
    /// rein authenticates with a signed JWT assertion (`private_key_jwt`, RFC 7523) instead of
    /// the secret of `client_secret_env`. The key stays in the file; it is read when a token is
    /// needed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private_key_file: Option<PathBuf>,
    /// The algorithm the assertion of `private_key_file` is signed with; default `RS256`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing_algorithm: Option<SigningAlgorithm>,
    /// The enterprise identity provider of `grant = "cross_app_access"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idp: Option<IdpConfig>,
}

/// `oauth.idp`: the enterprise identity provider that vouches for the person in the cross-app
/// access grant (SEP-990). rein sends it the person's ID token (RFC 8693 token exchange) for an
/// identity assertion grant (ID-JAG) naming the MCP server's authorization server, and hands
/// that to the authorization server (RFC 7523 JWT bearer grant) with its own `client_id` and
/// `client_secret_env` for the access token.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdpConfig {
    /// The identity provider's issuer identifier (the ID-JAG's `iss`).
    pub issuer: String,
    /// Its token endpoint, where the token exchange goes.
    pub token_endpoint: String,
    /// rein's client ID at the identity provider.
    pub client_id: String,
    /// The environment variable holding that client's secret; without it rein is a public
    /// client there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret_env: Option<String>,
    /// The environment variable holding the person's ID token from the identity provider (the
    /// single sign-on that is not rein's to run); read when a token is needed.
    pub id_token_env: String,
}

/// How rein obtains a token: a person authorizes, or the client authenticates as itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum OAuthGrant {
    /// The authorization-code flow with PKCE, through the [`Authorizer`].
    #[default]
    AuthorizationCode,
    /// The client-credentials flow (SEP-1046), with a client secret or a signed assertion.
    ClientCredentials,
    /// Cross-app access (SEP-990, enterprise-managed authorization): the person's ID token
    /// from `oauth.idp` is exchanged for an identity assertion, and that for the access token.
    CrossAppAccess,
}

impl OAuthGrant {
    fn is_default(&self) -> bool {
        *self == OAuthGrant::AuthorizationCode
    }
}

/// What the person is asked to do: open `url` to let rein reach `server`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AuthorizationPrompt {
    /// The configured server name.
    pub server: String,
    /// The authorization URL to open in a browser.
    pub url: String,
    /// The principal whose tokens these are ([`ClientOptions::tokens_per_principal`]); `None`
    /// for the server's own.
    ///
    /// [`ClientOptions::tokens_per_principal`]: crate::ClientOptions::tokens_per_principal
    pub principal: Option<String>,
}

impl AuthorizationPrompt {
    /// A prompt for the server's own tokens.
    pub fn new(server: impl Into<String>, url: impl Into<String>) -> Self {
        AuthorizationPrompt { server: server.into(), url: url.into(), principal: None }
    }
}

/// Shows an authorization URL to the person and waits for the redirect back.
///
/// `rein chat` prints the URL and listens on a loopback port; `rein serve` shows it in the web
/// chat and receives the redirect at `/agent/api/runtime/mcp/oauth/callback`.
#[async_trait::async_trait]
pub trait AuthorizeFlow: Send + Sync {
    /// The redirect URI registered for rein (where the browser is sent back).
    fn redirect_uri(&self) -> String;
    /// Shows `prompt` and returns the full URL the browser was redirected to (with `code`,
    /// `state` and maybe `iss`), or why there is none.
    async fn authorize(&self, prompt: AuthorizationPrompt) -> Result<String, String>;
}

/// [`ClientOptions::authorizer`](crate::ClientOptions::authorizer): a shared [`AuthorizeFlow`].
#[derive(Clone)]
pub struct Authorizer(pub Arc<dyn AuthorizeFlow>);

impl std::fmt::Debug for Authorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Authorizer(..)")
    }
}

impl PartialEq for Authorizer {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// The authorizer of a terminal host (`rein chat`): prints the URL on stderr and waits on a
/// loopback port for the browser's redirect (`http://127.0.0.1:PORT/callback`).
pub struct LoopbackAuthorizer {
    listener: tokio::sync::Mutex<tokio::net::TcpListener>,
    port: u16,
}

impl LoopbackAuthorizer {
    /// Listens on a free loopback port.
    pub async fn bind() -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let port = listener.local_addr()?.port();
        Ok(LoopbackAuthorizer { listener: tokio::sync::Mutex::new(listener), port })
    }
}

#[async_trait::async_trait]
impl AuthorizeFlow for LoopbackAuthorizer {
    fn redirect_uri(&self) -> String {
        format!("http://127.0.0.1:{}/callback", self.port)
    }

    async fn authorize(&self, prompt: AuthorizationPrompt) -> Result<String, String> {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        eprintln!(
            "MCP server `{}` needs authorization: open this URL in a browser:\n  {}",
            prompt.server, prompt.url
        );
        let listener = self.listener.lock().await;
        loop {
            let (mut stream, _) = listener.accept().await.map_err(|error| error.to_string())?;
            let mut buffer = vec![0; 8192];
            let read = stream.read(&mut buffer).await.map_err(|error| error.to_string())?;
            let head = String::from_utf8_lossy(&buffer[..read]).into_owned();
            let target = head.split_whitespace().nth(1).unwrap_or("").to_owned();
            if !target.starts_with("/callback?") {
                let _ =
                    stream.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n").await;
                continue;
            }
            let body = "rein is authorized; you can close this tab.";
            let reply = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(reply.as_bytes()).await;
            return Ok(format!("http://127.0.0.1:{}{target}", self.port));
        }
    }
}

/// The value of `name` in a URL's query, percent-decoded for `%XX`.
pub(crate) fn query_param(url: &str, name: &str) -> Option<String> {
    let query = url.split_once('?')?.1.split('#').next().unwrap_or("");
    let raw = query.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=')?;
        (key == name).then_some(value)
    })?;
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|hex| u8::from_str_radix(hex, 16).ok()) {
                    Some(byte) => {
                        out.push(byte);
                        i += 3;
                    }
                    None => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            byte => {
                out.push(byte);
                i += 1;
            }
        }
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

/// One server's tokens in a JSON file of their own under the token directory, written with
/// mode 0600 (replaced atomically). Its `Debug` names the file only.
#[derive(Clone)]
pub struct TokenStore {
    path: PathBuf,
}

impl std::fmt::Debug for TokenStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenStore").field("path", &self.path).finish()
    }
}

impl TokenStore {
    /// The store of server `name` at `url` under `dir`: one file per name and URL (a server
    /// moved to another URL starts without tokens).
    pub fn for_server(dir: &Path, name: &str, url: &str) -> Self {
        let safe: String = name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
            .collect();
        TokenStore { path: dir.join(format!("{safe}-{:016x}.json", fnv1a(url.as_bytes()))) }
    }

    /// The store of `principal`'s tokens for server `name` at `url` under `dir` (a file of
    /// its own beside the server's; the principal's name is hashed, never written out).
    pub fn for_principal(dir: &Path, name: &str, url: &str, principal: &str) -> Self {
        let server = Self::for_server(dir, name, url);
        let stem = server.path.file_stem().map(|s| s.to_string_lossy().into_owned());
        let file =
            format!("{}-p{:016x}.json", stem.unwrap_or_default(), fnv1a(principal.as_bytes()));
        TokenStore { path: dir.join(file) }
    }

    /// The file the tokens are kept in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn read(&self) -> Result<Option<StoredCredentials>, AuthError> {
        match std::fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|error| {
                AuthError::InternalError(format!("{}: {error}", self.path.display()))
            }),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => {
                Err(AuthError::InternalError(format!("{}: {error}", self.path.display())))
            }
        }
    }

    fn write(&self, credentials: &StoredCredentials) -> Result<(), AuthError> {
        let fail = |error: std::io::Error| {
            AuthError::InternalError(format!("{}: {error}", self.path.display()))
        };
        if let Some(dir) = self.path.parent() {
            let mut builder = std::fs::DirBuilder::new();
            builder.recursive(true);
            #[cfg(unix)]
            std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
            builder.create(dir).map_err(fail)?;
        }
        let bytes = serde_json::to_vec(credentials)
            .map_err(|error| AuthError::InternalError(error.to_string()))?;
        let temporary = self.path.with_extension("json.tmp");
        let _ = std::fs::remove_file(&temporary);
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(&temporary).map_err(fail)?;
        std::io::Write::write_all(&mut file, &bytes).map_err(fail)?;
        file.sync_all().map_err(fail)?;
        drop(file);
        std::fs::rename(&temporary, &self.path).map_err(fail)
    }
}

#[async_trait::async_trait]
impl CredentialStore for TokenStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        self.read()
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        self.write(&credentials)
    }

    async fn clear(&self) -> Result<(), AuthError> {
        match std::fs::remove_file(&self.path) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                Err(AuthError::InternalError(format!("{}: {error}", self.path.display())))
            }
            _ => Ok(()),
        }
    }
}

/// The `scope="a b"` parameter of a `WWW-Authenticate` challenge, split.
fn challenge_scopes(www_authenticate: &str) -> Vec<String> {
    let Some(start) = www_authenticate.find("scope=\"") else {
        return Vec::new();
    };
    let rest = &www_authenticate[start + "scope=\"".len()..];
    rest.split('"').next().unwrap_or("").split_whitespace().map(str::to_owned).collect()
}

/// FNV-1a, 64 bits: a stable file name for a URL (not a secret, only a name).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The value of the environment variable `variable` (named by config key `key`).
fn secret_from(variable: &str, key: &str) -> Result<String, String> {
    std::env::var(variable).map_err(|_| format!("`{variable}` (`{key}`) is not set"))
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_secs())
        .unwrap_or(0)
}

/// `scheme://host[:port]` of a URL, lowercased (`None` when it has no host).
fn origin_of(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    (!host.is_empty()).then(|| format!("{scheme}://{host}").to_ascii_lowercase())
}

/// Whether an authorization server whose metadata, fetched at `expected_issuer`'s well-known
/// URL, names `received_issuer` may still be used for the server at `server_url`.
///
/// RFC 8414 wants the two equal, and so does every spec since 2025-06-18. The 2025-03-26 spec
/// has no protected-resource metadata: the authorization server is the MCP server's origin
/// ("discard any existing path component"), its metadata at that origin's
/// `/.well-known/oauth-authorization-server`, with no word on `issuer`. So this accepts the
/// mismatch only when the metadata was fetched at the server's own origin and the issuer it
/// names is on that same origin (`https://mcp.example/oauth` for `https://mcp.example/mcp`): the
/// same party, so no mix-up. Another origin stays refused.
fn legacy_issuer_accepted(server_url: &str, expected_issuer: &str, received_issuer: &str) -> bool {
    let Some(origin) = origin_of(server_url) else {
        return false;
    };
    expected_issuer.trim_end_matches('/').to_ascii_lowercase() == origin
        && origin_of(received_issuer).as_deref() == Some(origin.as_str())
}

/// The client rein's own requests to an authorization server use: no redirects followed (an
/// answer is read from the address asked), 30 s for the whole request.
fn authorization_server_client() -> Result<reqwest::Client, reqwest::Error> {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(std::time::Duration::from_secs(30))
        .build()
}

/// The authorization server metadata at the root well-known URL of `origin`, whose issuer
/// [`legacy_issuer_accepted`] allowed (it must still name `issuer`).
async fn origin_metadata(origin: &str, issuer: &str) -> Result<AuthorizationMetadata, String> {
    let url = format!("{}/.well-known/oauth-authorization-server", origin.trim_end_matches('/'));
    let fail = |error: &dyn std::fmt::Display| format!("{url}: {error}");
    let http = authorization_server_client().map_err(|error| fail(&error))?;
    let response = http.get(&url).send().await.map_err(|error| fail(&error))?;
    if !response.status().is_success() {
        return Err(fail(&response.status()));
    }
    let body = response.bytes().await.map_err(|error| fail(&error))?;
    let metadata: AuthorizationMetadata =
        serde_json::from_slice(&body).map_err(|error| fail(&error))?;
    if metadata.issuer.as_deref() != Some(issuer) {
        return Err(fail(&"the metadata changed while it was read"));
    }
    Ok(metadata)
}

/// The PEM private key of `oauth.private_key_file`.
fn read_key(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path)
        .map_err(|error| format!("`{}` (`oauth.private_key_file`): {error}", path.display()))
}

/// Signs a fresh assertion for each request of the cross-app access exchange that
/// authenticates with `oauth.private_key_file`.
struct KeyFileAssertions {
    key: Vec<u8>,
    algorithm: SigningAlgorithm,
}

#[async_trait::async_trait]
impl EmaClientAssertionProvider for KeyFileAssertions {
    async fn create_assertion(
        &self,
        server: &EmaAuthorizationServer,
    ) -> Result<EmaClientAssertion, Box<dyn std::error::Error + Send + Sync>> {
        let assertion = crate::client_assertion::sign(
            &server.client_id,
            &server.issuer,
            &self.key,
            self.algorithm,
            unix_now(),
        )?;
        Ok(EmaClientAssertion::new(assertion))
    }
}

/// Whether a token endpoint may be sent client credentials: HTTPS, or plain HTTP on loopback
/// for a server on loopback (a local development setup, as rmcp allows).
pub fn token_endpoint_allowed(server_url: &str, token_endpoint: &str) -> bool {
    let loopback = |url: &str| {
        let Some(origin) = origin_of(url) else {
            return false;
        };
        let host = origin.split_once("://").map_or("", |(_, host)| host);
        let host = match host.strip_prefix('[') {
            Some(v6) => v6.split(']').next().unwrap_or(""),
            None => host.split(':').next().unwrap_or(""),
        };
        host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
    };
    token_endpoint.to_ascii_lowercase().starts_with("https://")
        || (token_endpoint.to_ascii_lowercase().starts_with("http://")
            && loopback(server_url)
            && loopback(token_endpoint))
}

/// Why credentials are not sent to `endpoint` (`what`): see [`token_endpoint_allowed`].
fn not_https(what: &str, endpoint: &str) -> String {
    format!("{what} `{endpoint}` is not HTTPS (nor loopback for a server on loopback)")
}

/// POSTs the form `pairs` to a token endpoint and returns its JSON answer; an OAuth error
/// answer becomes its `error` code and description.
async fn token_request(
    endpoint: &str,
    pairs: &[(&str, &str)],
) -> Result<serde_json::Value, String> {
    let fail = |error: &dyn std::fmt::Display| format!("token request to {endpoint}: {error}");
    let http = authorization_server_client().map_err(|error| fail(&error))?;
    let response = http
        .post(endpoint)
        .header(http::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header(http::header::ACCEPT, "application/json")
        .body(crate::client_assertion::form_encode(pairs))
        .send()
        .await
        .map_err(|error| fail(&error))?;
    let status = response.status();
    let body = response.bytes().await.map_err(|error| fail(&error))?;
    let json: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    if !status.is_success() {
        let code = json["error"].as_str().unwrap_or("no OAuth error code");
        let description = json["error_description"].as_str().unwrap_or("");
        return Err(fail(&format!("{status}: {code} {description}").trim_end()));
    }
    if !json.is_object() {
        return Err(fail(&"the answer is not a JSON object"));
    }
    Ok(json)
}

/// What the host gives every server's OAuth: its name, authorizer and token directory.
pub(crate) struct OAuthHost<'a> {
    pub(crate) client_name: &'a str,
    pub(crate) authorizer: Option<&'a Authorizer>,
    pub(crate) token_dir: Option<&'a Path>,
    /// Whose tokens (`None`: the server's own).
    pub(crate) principal: Option<&'a str>,
}

/// The OAuth state of one HTTP server, shared by its connections.
pub(crate) struct OAuthSession {
    server: String,
    /// Whose tokens these are (`None`: the server's own).
    principal: Option<String>,
    url: String,
    config: OAuthConfig,
    store: Option<TokenStore>,
    authorizer: Option<Authorizer>,
    client_name: String,
    manager: tokio::sync::Mutex<Option<AuthorizationManager>>,
    /// Held while one authorization runs, so that parallel requests refused at once (a POST and
    /// the GET stream) send the person to the browser once.
    authorizing: tokio::sync::Mutex<()>,
    /// Step-ups (403 `insufficient_scope`) since a request last passed after an authorization:
    /// at [`MAX_AUTHORIZATIONS`] the server is not sent to the browser again for more scope.
    failed_step_ups: std::sync::atomic::AtomicU32,
}

impl OAuthSession {
    /// The state of server `server` at `url`, with its `oauth` key; `host` names rein's own
    /// part: its client name, authorizer and token directory.
    pub(crate) fn new(
        server: &str,
        url: &str,
        config: Option<&OAuthConfig>,
        host: OAuthHost<'_>,
    ) -> Self {
        let store = host.token_dir.map(|dir| match host.principal {
            Some(principal) => TokenStore::for_principal(dir, server, url, principal),
            None => TokenStore::for_server(dir, server, url),
        });
        OAuthSession {
            server: server.to_owned(),
            principal: host.principal.map(str::to_owned),
            url: url.to_owned(),
            config: config.cloned().unwrap_or_default(),
            store,
            authorizer: host.authorizer.cloned(),
            client_name: host.client_name.to_owned(),
            manager: tokio::sync::Mutex::new(None),
            authorizing: tokio::sync::Mutex::new(()),
            failed_step_ups: std::sync::atomic::AtomicU32::new(0),
        }
    }

    /// Whether the server uses OAuth here: it has an `oauth` key, or it asked for a token (one
    /// was had, or is kept in the store). A server that never did needs no per-principal
    /// connections.
    pub(crate) fn engaged(&self) -> bool {
        self.config != OAuthConfig::default()
            || self.manager.try_lock().map_or(true, |manager| manager.is_some())
            || self.store.as_ref().is_some_and(|store| store.path().exists())
    }

    /// Whether another step-up authorization is allowed.
    pub(crate) fn may_step_up(&self) -> bool {
        self.failed_step_ups.load(std::sync::atomic::Ordering::Relaxed) < MAX_AUTHORIZATIONS
    }

    /// A request refused for its token went through after an authorization.
    pub(crate) fn authorized_request_passed(&self) {
        self.failed_step_ups.store(0, std::sync::atomic::Ordering::Relaxed);
    }

    /// The access token to send, if there is one (refreshed first when it is about to expire);
    /// tokens left in the store by an earlier run are picked up.
    pub(crate) async fn token(&self) -> Option<String> {
        let mut manager = self.manager.lock().await;
        if manager.is_none()
            && let Some(store) = &self.store
            && store.read().ok().flatten().is_some_and(|stored| stored.token_response.is_some())
        {
            match self.manager_with_metadata(None).await {
                Ok((mut loaded, _)) => match loaded.initialize_from_store().await {
                    Ok(true) => *manager = Some(loaded),
                    Ok(false) => {}
                    Err(error) => {
                        tracing::info!(server = %self.server, %error, "stored OAuth tokens not used")
                    }
                },
                Err(error) => {
                    tracing::info!(server = %self.server, %error, "OAuth discovery failed")
                }
            }
        }
        let manager = manager.as_ref()?;
        match manager.get_access_token().await {
            Ok(token) => Some(token),
            Err(error) => {
                tracing::info!(server = %self.server, %error, "no usable OAuth token");
                None
            }
        }
    }

    async fn manager_with_store(&self) -> Result<AuthorizationManager, AuthError> {
        let mut manager = AuthorizationManager::new(self.url.as_str()).await?;
        if let Some(store) = &self.store {
            manager.set_credential_store(store.clone());
        }
        Ok(manager)
    }

    /// A manager with the authorization server's metadata discovered (from the challenge's
    /// `resource_metadata` when there is one), accepting what the 2025-03-26 spec allows for
    /// metadata on the server's own origin (see [`legacy_issuer_accepted`]).
    async fn manager_with_metadata(
        &self,
        www_authenticate: Option<&str>,
    ) -> Result<(AuthorizationManager, AuthorizationMetadata), String> {
        let mut manager = self.manager_with_store().await.map_err(|error| error.to_string())?;
        let metadata = match manager.resolve_metadata_from_challenge(www_authenticate).await {
            Ok(resolution) => resolution.metadata,
            Err(AuthError::AuthorizationServerMismatch { expected_issuer, received_issuer })
                if legacy_issuer_accepted(&self.url, &expected_issuer, &received_issuer) =>
            {
                tracing::info!(
                    server = %self.server,
                    issuer = %received_issuer,
                    "authorization server metadata on the server's origin names an issuer on \
                     that origin (2025-03-26 discovery)"
                );
                origin_metadata(&expected_issuer, &received_issuer).await?
            }
            Err(error) => return Err(error.to_string()),
        };
        manager.set_metadata(metadata.clone());
        Ok((manager, metadata))
    }

    /// Runs one authorization for the challenge `www_authenticate` (the header of a 401 or of a
    /// 403 `insufficient_scope`) and returns the new access token. `None` when there is no
    /// authorizer (the server then stays failed with the 401) or the authorization failed.
    /// `sent` is the token the refused request carried: when another request has authorized in
    /// the meantime, its token is returned without asking again.
    pub(crate) async fn authorize(
        &self,
        www_authenticate: &str,
        sent: Option<&str>,
    ) -> Option<String> {
        let unattended = self.config.grant != OAuthGrant::AuthorizationCode;
        if !unattended && self.authorizer.is_none() {
            return None;
        }
        let _one_at_a_time = self.authorizing.lock().await;
        let insufficient_scope = www_authenticate.contains("insufficient_scope");
        if insufficient_scope {
            self.failed_step_ups.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        if !insufficient_scope
            && let Some(current) = self.token().await
            && Some(current.as_str()) != sent
        {
            return Some(current);
        }
        let run = match (self.config.grant, &self.authorizer) {
            (OAuthGrant::ClientCredentials, _) => self.run_client_credentials().await,
            (OAuthGrant::CrossAppAccess, _) => self.run_cross_app_access(www_authenticate).await,
            (_, Some(authorizer)) => self.run_authorization(authorizer, www_authenticate).await,
            (_, None) => return None,
        };
        match run {
            Ok(token) => Some(token),
            Err(error) => {
                tracing::warn!(server = %self.server, %error, "OAuth authorization failed");
                None
            }
        }
    }

    /// The client-credentials grant: no person involved. The client authenticates with the
    /// secret of `client_secret_env`, or with an assertion signed by `private_key_file`.
    async fn run_client_credentials(&self) -> Result<String, String> {
        let client_id = self.config.client_id.clone().ok_or_else(|| {
            "`oauth.grant = client_credentials` needs `oauth.client_id`".to_owned()
        })?;
        let variable = match (&self.config.private_key_file, &self.config.client_secret_env) {
            (Some(_), Some(_)) => {
                return Err("`oauth.private_key_file` and `oauth.client_secret_env` are both \
                            set; give one"
                    .to_owned());
            }
            (Some(path), None) => return self.run_client_credentials_jwt(client_id, path).await,
            (None, Some(variable)) => variable,
            (None, None) => {
                return Err("`oauth.grant = client_credentials` needs `oauth.client_secret_env` \
                            or `oauth.private_key_file`"
                    .to_owned());
            }
        };
        let config = ClientCredentialsConfig::ClientSecret {
            client_id,
            client_secret: secret_from(variable, "oauth.client_secret_env")?,
            scopes: self.config.scopes.clone(),
            // RFC 8707: the token is for this server.
            resource: Some(self.url.clone()),
        };
        let manager = self.manager_with_store().await.map_err(|error| error.to_string())?;
        let mut state = OAuthState::Unauthorized(manager);
        state.authenticate_client_credentials(config).await.map_err(|error| error.to_string())?;
        let manager = state
            .into_authorization_manager()
            .ok_or_else(|| "the client-credentials grant did not complete".to_owned())?;
        let token = manager.get_access_token().await.map_err(|error| error.to_string())?;
        *self.manager.lock().await = Some(manager);
        Ok(token)
    }

    /// Cross-app access (SEP-990): the person's ID token from `oauth.idp` becomes an identity
    /// assertion grant at the identity provider (RFC 8693), which the server's authorization
    /// server trades for the access token (RFC 7523), authenticating rein's `client_id` with
    /// the secret of `client_secret_env` (HTTP Basic) or an assertion signed with
    /// `private_key_file`. No browser, no refresh token: when the token expires the exchange
    /// runs again with the ID token then in the variable.
    async fn run_cross_app_access(&self, www_authenticate: &str) -> Result<String, String> {
        let idp = self
            .config
            .idp
            .as_ref()
            .ok_or_else(|| "`oauth.grant = cross_app_access` needs `oauth.idp`".to_owned())?;
        let client_id =
            self.config.client_id.clone().ok_or_else(|| {
                "`oauth.grant = cross_app_access` needs `oauth.client_id`".to_owned()
            })?;
        // The ID token and the client secrets go to both token endpoints: HTTPS only (plain
        // HTTP on loopback for a server on loopback), as for the other grants.
        if !token_endpoint_allowed(&self.url, &idp.token_endpoint) {
            return Err(not_https("`oauth.idp.token_endpoint`", &idp.token_endpoint));
        }
        let id_token = secret_from(&idp.id_token_env, "oauth.idp.id_token_env")?;
        let challenge = Some(www_authenticate).filter(|header| !header.trim().is_empty());
        let (manager, metadata) = self.manager_with_metadata(challenge).await?;
        if !token_endpoint_allowed(&self.url, &metadata.token_endpoint) {
            return Err(not_https(
                "the authorization server's token endpoint",
                &metadata.token_endpoint,
            ));
        }
        let issuer = metadata.issuer.clone().ok_or_else(|| {
            "the authorization server's metadata has no `issuer` (the identity assertion's \
             audience)"
                .to_owned()
        })?;
        let client_auth = |variable: Option<&String>, key: &str| -> Result<_, String> {
            Ok(match variable {
                Some(variable) => EmaClientAuthentication::ClientSecretBasic(
                    oauth2::ClientSecret::new(secret_from(variable, key)?),
                ),
                None => EmaClientAuthentication::None,
            })
        };
        let idp_server =
            EmaAuthorizationServer::new(&idp.issuer, &idp.token_endpoint, &idp.client_id)
                .with_client_authentication(client_auth(
                    idp.client_secret_env.as_ref(),
                    "oauth.idp.client_secret_env",
                )?);
        let resource_auth = match &self.config.private_key_file {
            Some(path) => EmaClientAuthentication::JwtAssertion(Arc::new(KeyFileAssertions {
                key: read_key(path)?,
                algorithm: self.config.signing_algorithm.unwrap_or_default(),
            })),
            None => client_auth(self.config.client_secret_env.as_ref(), "oauth.client_secret_env")?,
        };
        let resource_server =
            EmaAuthorizationServer::new(&issuer, &metadata.token_endpoint, &client_id)
                .with_client_authentication(resource_auth);
        let http = default_oauth_http_client().map_err(|error| error.to_string())?;
        let token = EmaExchangeRequest::new_with_id_token(
            idp_server,
            resource_server,
            &self.url,
            &id_token,
        )
        .with_scopes(self.config.scopes.iter().cloned())
        .exchange(&http, &http)
        .await
        .map_err(|error| format!("cross-app access: {error}"))?;
        let mut response = serde_json::json!({
            "access_token": token.access_token.secret(),
            "token_type": "Bearer",
        });
        if let Some(lifetime) = token.expires_in {
            response["expires_in"] = lifetime.as_secs().into();
        }
        let mut scopes: Vec<String> = token.scopes.into_iter().collect();
        scopes.sort_unstable();
        if !scopes.is_empty() {
            response["scope"] = scopes.join(" ").into();
        }
        self.install_token(manager, &client_id, response, Some(issuer)).await
    }

    /// The client-credentials grant with a `private_key_jwt` assertion signed by the key in
    /// `path` (rein's own request: rmcp's is not `Send`, see Cargo.toml).
    async fn run_client_credentials_jwt(
        &self,
        client_id: String,
        path: &Path,
    ) -> Result<String, String> {
        let key = read_key(path)?;
        let algorithm = self.config.signing_algorithm.unwrap_or_default();
        let (manager, metadata) = self.manager_with_metadata(None).await?;
        let advertised = |field: &str| -> Option<Vec<String>> {
            let values = metadata.additional_fields.get(field)?.as_array()?;
            Some(values.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
        };
        if let Some(methods) = advertised("token_endpoint_auth_methods_supported")
            && !methods.iter().any(|method| method == "private_key_jwt")
        {
            return Err(format!(
                "the authorization server does not take `private_key_jwt` (only {methods:?})"
            ));
        }
        if let Some(algorithms) = advertised("token_endpoint_auth_signing_alg_values_supported")
            && !algorithms.iter().any(|name| name == algorithm.name())
        {
            return Err(format!(
                "the authorization server does not take {} assertions (only {algorithms:?}): \
                 set `oauth.signing_algorithm`",
                algorithm.name()
            ));
        }
        let issuer = metadata.issuer.clone().ok_or_else(|| {
            "the authorization server's metadata has no `issuer` (the assertion's audience)"
                .to_owned()
        })?;
        if !token_endpoint_allowed(&self.url, &metadata.token_endpoint) {
            return Err(not_https("the token endpoint", &metadata.token_endpoint));
        }
        let assertion =
            crate::client_assertion::sign(&client_id, &issuer, &key, algorithm, unix_now())?;
        let scope = self.config.scopes.join(" ");
        // RFC 7523 section 3: the client is the assertion's `sub`, so no `client_id` here;
        // RFC 8707: the token is for this server.
        let mut form = vec![
            ("grant_type", "client_credentials"),
            ("client_assertion_type", crate::client_assertion::JWT_BEARER_ASSERTION),
            ("client_assertion", assertion.as_str()),
            ("resource", self.url.as_str()),
        ];
        if !scope.is_empty() {
            form.push(("scope", scope.as_str()));
        }
        let response = token_request(&metadata.token_endpoint, &form).await?;
        self.install_token(manager, &client_id, response, Some(issuer)).await
    }

    /// Keeps `response` (a token endpoint's JSON) as the credentials of `client_id` in the
    /// server's store (or in memory), so that `manager` serves and refreshes it from there.
    async fn install_token(
        &self,
        mut manager: AuthorizationManager,
        client_id: &str,
        response: serde_json::Value,
        issuer: Option<String>,
    ) -> Result<String, String> {
        let scopes: Vec<String> = response["scope"]
            .as_str()
            .map(|scope| scope.split_whitespace().map(str::to_owned).collect())
            .unwrap_or_else(|| self.config.scopes.clone());
        let response: OAuthTokenResponse = serde_json::from_value(response)
            .map_err(|error| format!("the token response is not valid: {error}"))?;
        let credentials =
            StoredCredentials::new(client_id.to_owned(), Some(response), scopes, Some(unix_now()))
                .with_issuer(issuer);
        let saved = match &self.store {
            Some(store) => store.save(credentials).await,
            None => {
                let memory = InMemoryCredentialStore::new();
                let saved = memory.save(credentials).await;
                manager.set_credential_store(memory);
                saved
            }
        };
        saved.map_err(|error| error.to_string())?;
        manager.configure_client_id(client_id).map_err(|error| error.to_string())?;
        let token = manager.get_access_token().await.map_err(|error| error.to_string())?;
        *self.manager.lock().await = Some(manager);
        Ok(token)
    }

    async fn run_authorization(
        &self,
        authorizer: &Authorizer,
        www_authenticate: &str,
    ) -> Result<String, String> {
        // A step-up asks for what was granted before and what the challenge names (SEP-2350).
        let mut scopes = self.config.scopes.clone();
        if www_authenticate.contains("insufficient_scope") {
            if let Some(current) = self.manager.lock().await.as_ref() {
                scopes.extend(current.get_current_scopes().await);
            }
            scopes.extend(challenge_scopes(www_authenticate));
        }
        let mut unique = Vec::new();
        for scope in scopes {
            if !unique.contains(&scope) {
                unique.push(scope);
            }
        }
        let challenge = Some(www_authenticate).filter(|header| !header.trim().is_empty());
        let (manager, _) = self.manager_with_metadata(challenge).await?;
        let mut request = AuthorizationRequest::new(authorizer.0.redirect_uri())
            .with_client_name(self.client_name.clone());
        if !unique.is_empty() {
            request = request.with_scopes(unique);
        }
        if let Some(client_id) = &self.config.client_id {
            request = request.with_preregistered_client(client_id.clone());
            if let Some(variable) = &self.config.client_secret_env {
                request =
                    request.with_client_secret(secret_from(variable, "oauth.client_secret_env")?);
            }
        }
        if let Some(url) = &self.config.client_metadata_url {
            request = request.with_client_metadata_url(url.clone());
        }
        // What `OAuthState::start_authorization` does, on the metadata resolved above.
        let session = AuthorizationSession::new(manager, request)
            .await
            .map_err(|(_, error)| error.to_string())?;
        let mut state = OAuthState::Session(session);
        let url = state.get_authorization_url().await.map_err(|error| error.to_string())?;
        let prompt = AuthorizationPrompt {
            server: self.server.clone(),
            url,
            principal: self.principal.clone(),
        };
        let redirect = authorizer.0.authorize(prompt).await?;
        state.handle_callback_url(&redirect).await.map_err(|error| error.to_string())?;
        let manager = state
            .into_authorization_manager()
            .ok_or_else(|| "the authorization did not complete".to_owned())?;
        let token = manager.get_access_token().await.map_err(|error| error.to_string())?;
        *self.manager.lock().await = Some(manager);
        Ok(token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credentials(token: &str, expires_in: Option<u64>) -> StoredCredentials {
        let mut response = serde_json::json!({
            "access_token": token, "token_type": "Bearer", "refresh_token": "refresh-1"
        });
        if let Some(seconds) = expires_in {
            response["expires_in"] = seconds.into();
        }
        serde_json::from_value(serde_json::json!({
            "client_id": "rein-client",
            "token_response": response,
            "granted_scopes": ["mcp"],
            "token_received_at": 1_000,
        }))
        .expect("valid stored credentials")
    }

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("rein-oauth-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[tokio::test]
    async fn tokens_round_trip_in_a_private_file() {
        let dir = temp_dir("round-trip");
        let store = TokenStore::for_server(&dir, "git hub", "https://mcp.example.org/mcp");
        assert!(store.load().await.expect("load").is_none());
        store.save(credentials("secret-access", Some(3600))).await.expect("save");
        let loaded = store.load().await.expect("load").expect("saved");
        assert_eq!(loaded.client_id, "rein-client");
        let text = serde_json::to_string(&loaded.token_response).expect("json");
        assert!(text.contains("secret-access") && text.contains("refresh-1"), "{text}");
        let name = store.path().file_name().and_then(|name| name.to_str()).expect("a name");
        assert!(name.starts_with("git_hub-") && name.ends_with(".json"), "{name}");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(store.path()).expect("file").permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
            // Saved again (a refresh), the file is replaced and stays private.
            store.save(credentials("secret-access-2", Some(3600))).await.expect("save");
            let mode = std::fs::metadata(store.path()).expect("file").permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert!(!format!("{store:?}").contains("secret"));
        store.clear().await.expect("clear");
        assert!(store.load().await.expect("load").is_none());
        store.clear().await.expect("clearing twice is fine");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn the_loopback_authorizer_returns_the_redirect() {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let authorizer = Arc::new(LoopbackAuthorizer::bind().await.expect("a loopback port"));
        let redirect = authorizer.redirect_uri();
        assert!(redirect.starts_with("http://127.0.0.1:") && redirect.ends_with("/callback"));
        let waiting = tokio::spawn({
            let authorizer = authorizer.clone();
            async move {
                let prompt = AuthorizationPrompt::new("s", "https://as/authorize");
                authorizer.authorize(prompt).await
            }
        });
        let address =
            redirect.trim_start_matches("http://").trim_end_matches("/callback").to_owned();
        for target in ["/favicon.ico", "/callback?code=abc&state=xyz&iss=https%3A%2F%2Fas"] {
            let mut stream = tokio::net::TcpStream::connect(&address).await.expect("connect");
            let request = format!("GET {target} HTTP/1.1\r\nhost: {address}\r\n\r\n");
            stream.write_all(request.as_bytes()).await.expect("send");
            let mut reply = String::new();
            stream.read_to_string(&mut reply).await.expect("reply");
        }
        let url = waiting.await.expect("joined").expect("a redirect");
        assert_eq!(url, format!("{redirect}?code=abc&state=xyz&iss=https%3A%2F%2Fas"));
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn the_token_directory_is_made_private() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = temp_dir("private-dir").join("mcp-tokens");
        let store = TokenStore::for_server(&dir, "s", "https://mcp.example.org/mcp");
        store.save(credentials("t", Some(3600))).await.expect("save");
        let mode = std::fs::metadata(&dir).expect("dir").permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        let _ = std::fs::remove_dir_all(dir.parent().expect("a parent"));
    }

    #[test]
    fn each_server_and_url_has_its_own_file() {
        let dir = Path::new("/data/mcp-tokens");
        let a = TokenStore::for_server(dir, "a", "https://one.example/mcp");
        assert_eq!(a.path(), TokenStore::for_server(dir, "a", "https://one.example/mcp").path());
        assert_ne!(a.path(), TokenStore::for_server(dir, "a", "https://two.example/mcp").path());
        assert_ne!(a.path(), TokenStore::for_server(dir, "b", "https://one.example/mcp").path());
        // A principal's tokens: a file of their own beside the server's, the name not in it.
        let alice = TokenStore::for_principal(dir, "a", "https://one.example/mcp", "alice");
        let bob = TokenStore::for_principal(dir, "a", "https://one.example/mcp", "bob");
        assert_ne!(alice.path(), a.path());
        assert_ne!(alice.path(), bob.path());
        assert_eq!(alice.path().parent(), Some(dir));
        assert!(!alice.path().to_string_lossy().contains("alice"), "{:?}", alice.path());
    }

    #[tokio::test]
    async fn a_token_about_to_expire_is_refreshed_and_a_fresh_one_is_used() {
        // A stored token far from expiry is used as it is; one past its expiry goes to the token
        // endpoint with the refresh token (here none is reachable, so it is refused: the
        // server then asks for authorization again instead of being sent a stale token).
        let dir = temp_dir("expiry");
        let url = "http://127.0.0.1:9/mcp";
        let store = TokenStore::for_server(&dir, "s", url);
        let mut fresh = credentials("fresh-token", Some(3600));
        fresh.token_received_at = Some(now());
        store.save(fresh).await.expect("save");
        let mut manager = AuthorizationManager::new(url).await.expect("manager");
        manager.set_credential_store(store.clone());
        assert_eq!(manager.get_access_token().await.expect("fresh"), "fresh-token");
        let mut stale = credentials("stale-token", Some(60));
        stale.token_received_at = Some(now() - 3600);
        store.save(stale).await.expect("save");
        let refreshed = manager.get_access_token().await;
        assert!(
            !matches!(&refreshed, Ok(token) if token == "stale-token"),
            "an expired token must not be sent: {refreshed:?}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn now() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|elapsed| elapsed.as_secs())
            .unwrap_or(0)
    }

    #[test]
    fn the_config_key_takes_four_optional_fields() {
        let config: OAuthConfig = serde_json::from_value(serde_json::json!({
            "client_id": "abc", "client_secret_env": "GH_SECRET", "scopes": ["repo"],
            "client_metadata_url": "https://rein.example/client.json"
        }))
        .expect("valid");
        assert_eq!(config.client_id.as_deref(), Some("abc"));
        assert_eq!(config.scopes, ["repo"]);
        assert_eq!(
            serde_json::from_value::<OAuthConfig>(serde_json::json!({})).ok(),
            Some(OAuthConfig::default())
        );
        assert!(serde_json::from_value::<OAuthConfig>(serde_json::json!({"secret": "x"})).is_err());
    }

    #[test]
    fn the_unattended_grants_take_a_key_file_or_an_identity_provider() {
        let config: OAuthConfig = serde_json::from_value(serde_json::json!({
            "client_id": "svc", "grant": "client_credentials",
            "private_key_file": "/etc/rein/key.pem", "signing_algorithm": "ES256"
        }))
        .expect("valid");
        assert_eq!(config.grant, OAuthGrant::ClientCredentials);
        assert_eq!(config.private_key_file.as_deref(), Some(Path::new("/etc/rein/key.pem")));
        assert_eq!(config.signing_algorithm, Some(SigningAlgorithm::ES256));
        let config: OAuthConfig = serde_json::from_value(serde_json::json!({
            "client_id": "rein", "client_secret_env": "AS_SECRET", "grant": "cross_app_access",
            "idp": {
                "issuer": "https://idp.example", "token_endpoint": "https://idp.example/token",
                "client_id": "rein-at-idp", "id_token_env": "REIN_ID_TOKEN"
            }
        }))
        .expect("valid");
        assert_eq!(config.grant, OAuthGrant::CrossAppAccess);
        let idp = config.idp.expect("an identity provider");
        assert_eq!((idp.client_id.as_str(), idp.client_secret_env), ("rein-at-idp", None));
        for wrong in [
            serde_json::json!({"signing_algorithm": "HS256"}),
            serde_json::json!({"idp": {"issuer": "https://idp.example"}}),
            serde_json::json!({"idp": {
                "issuer": "i", "token_endpoint": "t", "client_id": "c", "id_token_env": "E",
                "id_token": "a token written into the config"
            }}),
        ] {
            assert!(serde_json::from_value::<OAuthConfig>(wrong.clone()).is_err(), "{wrong}");
        }
    }

    #[test]
    fn the_older_spec_issuer_on_the_server_origin_is_accepted_and_no_other() {
        let server = "http://localhost:4100/mcp";
        // (metadata fetched for this issuer, the issuer it named, accepted?)
        let cases = [
            ("http://localhost:4100/", "http://localhost:4100/oauth", true),
            ("http://localhost:4100", "http://LOCALHOST:4100/auth/v1", true),
            // Another origin: a different party, a mix-up.
            ("http://localhost:4100/", "https://as.example/oauth", false),
            ("http://localhost:4100/", "http://localhost:4101/oauth", false),
            ("http://localhost:4100/", "https://localhost:4100/oauth", false),
            // Fetched at a path-inserted well-known URL (RFC 8414 proper): no leniency.
            ("http://localhost:4100/mcp", "http://localhost:4100/oauth", false),
            // Metadata of another origin than the server's.
            ("https://as.example/", "https://as.example/oauth", false),
            ("http://localhost:4100/", "not a url", false),
        ];
        for (expected, received, accepted) in cases {
            assert_eq!(
                legacy_issuer_accepted(server, expected, received),
                accepted,
                "{expected} -> {received}"
            );
        }
        assert!(!legacy_issuer_accepted("not a url", "x", "y"));
    }

    #[test]
    fn credentials_go_to_https_token_endpoints_or_loopback_ones() {
        let loopback = "http://127.0.0.1:9000/mcp";
        assert!(token_endpoint_allowed("https://mcp.example/mcp", "https://as.example/token"));
        assert!(token_endpoint_allowed(loopback, "http://localhost:9001/token"));
        assert!(token_endpoint_allowed("http://[::1]:9000/mcp", "http://[::1]:9001/token"));
        assert!(!token_endpoint_allowed("https://mcp.example/mcp", "http://as.example/token"));
        assert!(!token_endpoint_allowed(loopback, "http://as.example/token"));
        assert!(!token_endpoint_allowed("http://mcp.example/mcp", "http://127.0.0.1/token"));
    }

    /// One request a [`FakeServer`] received.
    #[derive(Debug, Clone)]
    struct Seen {
        method: String,
        path: String,
        head: String,
        body: String,
    }

    /// A loopback HTTP server answering each request with `answer(request)` (status, JSON),
    /// keeping every request it saw.
    struct FakeServer {
        origin: String,
        seen: Arc<std::sync::Mutex<Vec<Seen>>>,
    }

    impl FakeServer {
        async fn start(
            answer: impl Fn(&str, &Seen) -> (u16, serde_json::Value) + Send + Sync + 'static,
        ) -> Self {
            use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await.expect("bind");
            let origin =
                format!("http://127.0.0.1:{}", listener.local_addr().expect("addr").port());
            let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
            let (answer, log, base) = (Arc::new(answer), seen.clone(), origin.clone());
            tokio::spawn(async move {
                while let Ok((mut stream, _)) = listener.accept().await {
                    let (answer, log, base) = (answer.clone(), log.clone(), base.clone());
                    tokio::spawn(async move {
                        let mut bytes = Vec::new();
                        let mut buffer = [0; 4096];
                        let request = loop {
                            let Ok(read) = stream.read(&mut buffer).await else { return };
                            if read == 0 {
                                return;
                            }
                            bytes.extend_from_slice(&buffer[..read]);
                            let text = String::from_utf8_lossy(&bytes).into_owned();
                            let Some((head, body)) = text.split_once("\r\n\r\n") else {
                                continue;
                            };
                            let length = head
                                .lines()
                                .filter_map(|line| line.split_once(':'))
                                .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
                                .and_then(|(_, value)| value.trim().parse::<usize>().ok())
                                .unwrap_or(0);
                            if body.len() >= length {
                                let mut words = head.split_whitespace();
                                break Seen {
                                    method: words.next().unwrap_or("").to_owned(),
                                    path: words.next().unwrap_or("").to_owned(),
                                    head: head.to_ascii_lowercase(),
                                    body: body.to_owned(),
                                };
                            }
                        };
                        let (status, json) = answer(&base, &request);
                        log.lock().expect("log").push(request);
                        let body = json.to_string();
                        let reply = format!(
                            "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n\
                             content-length: {}\r\nconnection: close\r\n\r\n{body}",
                            body.len()
                        );
                        let _ = stream.write_all(reply.as_bytes()).await;
                    });
                }
            });
            FakeServer { origin, seen }
        }

        fn seen(&self, path: &str) -> Vec<Seen> {
            let seen = self.seen.lock().expect("log");
            seen.iter().filter(|request| request.path == path).cloned().collect()
        }
    }

    fn not_found() -> (u16, serde_json::Value) {
        (404, serde_json::json!({"error": "not_found"}))
    }

    fn token(value: &str) -> (u16, serde_json::Value) {
        (
            200,
            serde_json::json!({"access_token": value, "token_type": "Bearer", "expires_in": 3600}),
        )
    }

    fn session(url: &str, config: OAuthConfig, authorizer: Option<&Authorizer>) -> OAuthSession {
        let host =
            OAuthHost { client_name: "rein-test", authorizer, token_dir: None, principal: None };
        OAuthSession::new("s", url, Some(&config), host)
    }

    /// Approves at once: the redirect carries a code and the authorization URL's `state`.
    struct Approve;

    #[async_trait::async_trait]
    impl AuthorizeFlow for Approve {
        fn redirect_uri(&self) -> String {
            "http://127.0.0.1:1/callback".into()
        }

        async fn authorize(&self, prompt: AuthorizationPrompt) -> Result<String, String> {
            let state = query_param(&prompt.url, "state").ok_or("no state")?;
            Ok(format!("http://127.0.0.1:1/callback?code=the-code&state={state}"))
        }
    }

    /// The 2025-03-26 layout: no protected-resource metadata, the authorization server's
    /// metadata at the server's origin naming an issuer on it, `oauth_issuer` (a path, or another
    /// origin), and its endpoints under `/oauth`.
    async fn older_spec_server(issuer_path: &'static str) -> FakeServer {
        FakeServer::start(move |base, request| match request.path.as_str() {
            "/.well-known/oauth-authorization-server" => (
                200,
                serde_json::json!({
                    "issuer": format!("{base}{issuer_path}").replace("OTHER", "https://as.example"),
                    "authorization_endpoint": format!("{base}/oauth/authorize"),
                    "token_endpoint": format!("{base}/oauth/token"),
                    "response_types_supported": ["code"],
                    "code_challenge_methods_supported": ["S256"],
                }),
            ),
            "/oauth/token" => token("older-spec-token"),
            _ => not_found(),
        })
        .await
    }

    #[tokio::test]
    async fn the_older_spec_metadata_on_the_server_origin_is_used() {
        let server = older_spec_server("/oauth").await;
        let authorizer = Authorizer(Arc::new(Approve));
        let config = OAuthConfig { client_id: Some("pre".into()), ..OAuthConfig::default() };
        let session = session(&format!("{}/mcp", server.origin), config, Some(&authorizer));
        assert_eq!(session.authorize("Bearer", None).await.as_deref(), Some("older-spec-token"));
        let exchange = server.seen("/oauth/token");
        assert_eq!(exchange.len(), 1);
        assert!(exchange[0].body.contains("code=the-code"), "{}", exchange[0].body);
        assert_eq!(session.token().await.as_deref(), Some("older-spec-token"));
    }

    #[tokio::test]
    async fn an_issuer_on_another_origin_is_still_refused() {
        let server = older_spec_server("OTHER/oauth").await;
        let authorizer = Authorizer(Arc::new(Approve));
        let config = OAuthConfig { client_id: Some("pre".into()), ..OAuthConfig::default() };
        let session = session(&format!("{}/mcp", server.origin), config, Some(&authorizer));
        assert_eq!(session.authorize("Bearer", None).await, None);
        assert!(server.seen("/oauth/token").is_empty());
    }

    /// A server with protected-resource metadata naming its own origin as the authorization
    /// server, whose metadata adds `extra`; `/token` answers with `token_answer(request)`.
    async fn resource_server(
        extra: serde_json::Value,
        token_answer: impl Fn(&Seen) -> (u16, serde_json::Value) + Send + Sync + 'static,
    ) -> FakeServer {
        FakeServer::start(move |base, request| match request.path.as_str() {
            "/.well-known/oauth-protected-resource/mcp" => (
                200,
                serde_json::json!({"resource": format!("{base}/mcp"), "authorization_servers": [base]}),
            ),
            "/.well-known/oauth-authorization-server" => {
                let mut metadata = serde_json::json!({
                    "issuer": base,
                    "authorization_endpoint": format!("{base}/authorize"),
                    "token_endpoint": format!("{base}/token"),
                });
                for (key, value) in extra.as_object().into_iter().flatten() {
                    metadata[key] = value.clone();
                }
                (200, metadata)
            }
            "/token" => token_answer(request),
            _ => not_found(),
        })
        .await
    }

    fn form(body: &str) -> std::collections::BTreeMap<String, String> {
        body.split('&')
            .filter_map(|pair| pair.split_once('='))
            .map(|(key, value)| {
                (key.to_owned(), query_param(&format!("?v={value}"), "v").unwrap_or_default())
            })
            .collect()
    }

    #[tokio::test]
    async fn client_credentials_with_a_key_file_send_a_signed_assertion() {
        let extra = serde_json::json!({
            "grant_types_supported": ["client_credentials"],
            "token_endpoint_auth_methods_supported": ["private_key_jwt"],
            "token_endpoint_auth_signing_alg_values_supported": ["ES256"],
        });
        let server = resource_server(extra, |_| token("cc-token")).await;
        let dir = temp_dir("jwt-key");
        std::fs::create_dir_all(&dir).expect("dir");
        let key_file = dir.join("key.pem");
        std::fs::write(&key_file, include_str!("../test_data/keys/es256-private.pem"))
            .expect("key");
        let config = OAuthConfig {
            client_id: Some("svc".into()),
            grant: OAuthGrant::ClientCredentials,
            private_key_file: Some(key_file),
            signing_algorithm: Some(SigningAlgorithm::ES256),
            scopes: vec!["read".into(), "write".into()],
            ..OAuthConfig::default()
        };
        let url = format!("{}/mcp", server.origin);
        let session = session(&url, config.clone(), None);
        assert_eq!(session.authorize("Bearer", None).await.as_deref(), Some("cc-token"));
        let requests = server.seen("/token");
        assert_eq!(requests[0].method, "POST");
        let sent = form(&requests[0].body);
        assert_eq!(sent["grant_type"], "client_credentials");
        assert_eq!(sent["client_assertion_type"], crate::client_assertion::JWT_BEARER_ASSERTION);
        assert_eq!(
            (sent["resource"].as_str(), sent["scope"].as_str()),
            (url.as_str(), "read write")
        );
        assert!(!sent.contains_key("client_id") && !sent.contains_key("client_secret"));
        let public = include_str!("../test_data/keys/es256-public.pem");
        let key = jsonwebtoken::DecodingKey::from_ec_pem(public.as_bytes()).expect("public key");
        let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::ES256);
        validation.set_audience(&[server.origin.as_str()]);
        let claims =
            jsonwebtoken::decode::<serde_json::Value>(&sent["client_assertion"], &key, &validation)
                .expect("an assertion signed by the key, for the authorization server")
                .claims;
        assert_eq!((claims["iss"].as_str(), claims["sub"].as_str()), (Some("svc"), Some("svc")));
        // An algorithm the authorization server does not take is refused before any request.
        let config = OAuthConfig { signing_algorithm: Some(SigningAlgorithm::RS256), ..config };
        assert_eq!(session_with(&url, config).authorize("Bearer", None).await, None);
        assert_eq!(server.seen("/token").len(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn session_with(url: &str, config: OAuthConfig) -> OAuthSession {
        session(url, config, None)
    }

    #[tokio::test]
    async fn cross_app_access_trades_the_id_token_for_an_assertion_then_a_token() {
        // The identity provider: checks the exchange and issues an ID-JAG for the server's
        // authorization server, signed with the test key.
        let (as_issuer, resource) = (
            Arc::new(std::sync::OnceLock::<String>::new()),
            Arc::new(std::sync::OnceLock::<String>::new()),
        );
        let (audience, target) = (as_issuer.clone(), resource.clone());
        let idp = FakeServer::start(move |base, request| {
            let sent = form(&request.body);
            if sent.get("subject_token") != std::env::var("PATH").ok().as_ref()
                || sent["requested_token_type"] != "urn:ietf:params:oauth:token-type:id-jag"
                || sent.get("audience") != audience.get()
                || sent.get("resource") != target.get()
            {
                return (400, serde_json::json!({"error": "invalid_request"}));
            }
            let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
            header.typ = Some("oauth-id-jag+jwt".into());
            let now = unix_now();
            let claims = serde_json::json!({
                "iss": base, "sub": "person@example.com", "aud": sent["audience"],
                "client_id": "rein", "resource": sent["resource"], "jti": "j-1",
                "iat": now, "exp": now + 300,
            });
            let key = include_str!("../test_data/keys/es256-private.pem");
            let key = jsonwebtoken::EncodingKey::from_ec_pem(key.as_bytes()).expect("key");
            let jag = jsonwebtoken::encode(&header, &claims, &key).expect("signed");
            (
                200,
                serde_json::json!({
                    "access_token": jag,
                    "issued_token_type": "urn:ietf:params:oauth:token-type:id-jag",
                    "token_type": "N_A",
                }),
            )
        })
        .await;
        let server = resource_server(serde_json::json!({}), |request| {
            let sent = form(&request.body);
            if !request.head.contains("authorization: basic ")
                || sent["grant_type"] != "urn:ietf:params:oauth:grant-type:jwt-bearer"
                || !sent.contains_key("assertion")
            {
                return (401, serde_json::json!({"error": "invalid_client"}));
            }
            token("xaa-token")
        })
        .await;
        let url = format!("{}/mcp", server.origin);
        as_issuer.set(server.origin.clone()).expect("once");
        resource.set(url.clone()).expect("once");
        // Tests cannot set variables (`unsafe` is forbidden): `PATH` stands in for the client
        // secret and the ID token.
        let (secret_env, token_env) = ("PATH", "PATH");
        let config = OAuthConfig {
            client_id: Some("rein".into()),
            client_secret_env: Some(secret_env.into()),
            grant: OAuthGrant::CrossAppAccess,
            idp: Some(IdpConfig {
                issuer: idp.origin.clone(),
                token_endpoint: format!("{}/token", idp.origin),
                client_id: "rein-at-idp".into(),
                client_secret_env: None,
                id_token_env: token_env.into(),
            }),
            ..OAuthConfig::default()
        };
        let session = session_with(&url, config);
        assert_eq!(session.authorize("Bearer", None).await.as_deref(), Some("xaa-token"));
        assert_eq!(idp.seen("/token").len(), 1);
        let redeemed = form(&server.seen("/token")[0].body);
        assert_eq!(redeemed["assertion"].split('.').count(), 3);
        assert_eq!(session.token().await.as_deref(), Some("xaa-token"));
    }

    /// A cross-app access config for the server at `url`, with the identity provider's token
    /// endpoint `idp_token_endpoint` (`PATH` standing in for the secret and the ID token).
    fn cross_app_config(idp_token_endpoint: &str) -> OAuthConfig {
        OAuthConfig {
            client_id: Some("rein".into()),
            client_secret_env: Some("PATH".into()),
            grant: OAuthGrant::CrossAppAccess,
            idp: Some(IdpConfig {
                issuer: "https://idp.example".into(),
                token_endpoint: idp_token_endpoint.into(),
                client_id: "rein-at-idp".into(),
                client_secret_env: Some("PATH".into()),
                id_token_env: "PATH".into(),
            }),
            ..OAuthConfig::default()
        }
    }

    #[tokio::test]
    async fn cross_app_access_sends_nothing_to_a_token_endpoint_that_is_not_https() {
        // The identity provider's endpoint over plain HTTP beyond loopback: refused before any
        // request (no metadata fetched, the ID token never sent).
        let idp = FakeServer::start(|_, _| token("never")).await;
        let server = resource_server(serde_json::json!({}), |_| token("never")).await;
        let url = format!("{}/mcp", server.origin);
        let config = cross_app_config("http://idp.example/token");
        assert_eq!(session_with(&url, config).authorize("Bearer", None).await, None);
        assert!(server.seen.lock().expect("log").is_empty(), "nothing was asked");

        // The authorization server's token endpoint over plain HTTP beyond loopback: refused
        // once the metadata names it, before the ID token goes to the identity provider.
        let server = resource_server(
            serde_json::json!({"token_endpoint": "http://as.example/token"}),
            |_| token("never"),
        )
        .await;
        let url = format!("{}/mcp", server.origin);
        let config = cross_app_config(&format!("{}/token", idp.origin));
        assert_eq!(session_with(&url, config).authorize("Bearer", None).await, None);
        assert!(idp.seen("/token").is_empty(), "the ID token was not sent");

        // A server beyond loopback may not use a loopback identity provider over plain HTTP.
        assert!(!token_endpoint_allowed(
            "https://mcp.example/mcp",
            &format!("{}/token", idp.origin)
        ));
    }
}
