//! OAuth 2.1 for Streamable HTTP servers, on rmcp's `auth` support: when a server answers 401
//! (or 403 `insufficient_scope`), rein discovers its authorization server, registers, has the
//! person authorize in a browser and retries the request with the token.
//!
//! The protocol of one authorization (`OAuthSession::authorize`):
//!
//! 1. **Discovery** from the challenge's `resource_metadata` (else the well-known
//!    protected-resource URLs, then the older spec's authorization-server metadata on the
//!    server's origin and its `/authorize` / `/token` / `/register` defaults), with the
//!    `resource` and `issuer` checks rmcp makes.
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
//! A request is authorized at most [`MAX_AUTHORIZATIONS`] times (a server that keeps asking for
//! more scope is refused after that). Tokens are refreshed by rmcp shortly before they expire.
//! Nothing here logs a token; the store's file is mode 0600.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use rmcp::transport::auth::{
    AuthError, AuthorizationManager, AuthorizationRequest, ClientCredentialsConfig,
    CredentialStore, OAuthState, StoredCredentials,
};
use serde::{Deserialize, Serialize};

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
    /// `client_id` and the secret of `client_secret_env`; default `authorization_code`.
    #[serde(default, skip_serializing_if = "OAuthGrant::is_default")]
    pub grant: OAuthGrant,
}

/// How rein obtains a token: a person authorizes, or the client authenticates as itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum OAuthGrant {
    /// The authorization-code flow with PKCE, through the [`Authorizer`].
    #[default]
    AuthorizationCode,
    /// The client-credentials flow (SEP-1046), with a client secret.
    ClientCredentials,
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

/// The authorizer of a web host (`rein serve`): each authorization waits (at most `wait`) for
/// the browser to come back to `redirect_uri` on the host's own address; the host lists the
/// [`pending`](Self::pending) URLs (a server that "needs auth", with a "Connect" button) and
/// hands each redirect it receives to [`complete`](Self::complete), matched by its `state`.
pub struct CallbackAuthorizer {
    redirect_uri: String,
    wait: std::time::Duration,
    pending: std::sync::Mutex<Vec<PendingAuthorization>>,
    changes: tokio::sync::watch::Sender<u64>,
}

struct PendingAuthorization {
    prompt: AuthorizationPrompt,
    state: String,
    answer: Option<tokio::sync::oneshot::Sender<String>>,
}

impl PendingAuthorization {
    /// Whether the authorization still waits (its connect was not dropped).
    fn waits(&self) -> bool {
        self.answer.as_ref().is_some_and(|answer| !answer.is_closed())
    }
}

impl CallbackAuthorizer {
    /// An authorizer whose redirects come back to `redirect_uri` (for example
    /// `https://host/agent/api/runtime/mcp/oauth/callback`).
    pub fn new(redirect_uri: impl Into<String>, wait: std::time::Duration) -> Self {
        CallbackAuthorizer {
            redirect_uri: redirect_uri.into(),
            wait,
            pending: std::sync::Mutex::new(Vec::new()),
            changes: tokio::sync::watch::Sender::new(0),
        }
    }

    /// A receiver whose value changes whenever an authorization starts waiting or stops: read
    /// [`pending`](Self::pending) again then.
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    fn changed(&self) {
        self.changes.send_modify(|generation| *generation += 1);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<PendingAuthorization>> {
        self.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The authorizations waiting for the person, oldest first (one whose waiting connect was
    /// given up, by its timeout or a shutdown, is not).
    pub fn pending(&self) -> Vec<AuthorizationPrompt> {
        self.lock().iter().filter(|p| p.waits()).map(|pending| pending.prompt.clone()).collect()
    }

    /// The authorization URL `server` waits on, if any.
    pub fn pending_for(&self, server: &str) -> Option<String> {
        self.lock()
            .iter()
            .find(|p| p.prompt.server == server && p.waits())
            .map(|p| p.prompt.url.clone())
    }

    /// Hands the redirect `callback_url` (the full URL, or its path and query) to the
    /// authorization whose `state` it carries; the server's name, or why not.
    pub fn complete(&self, callback_url: &str) -> Result<String, String> {
        let state = query_param(callback_url, "state").ok_or("the redirect has no `state`")?;
        let mut pending = self.lock();
        let index = pending
            .iter()
            .position(|p| p.state == state)
            .ok_or("no authorization waits for this `state` (it may have expired)")?;
        let mut found = pending.remove(index);
        let full = if callback_url.starts_with('/') {
            let origin = self.redirect_uri.split('/').take(3).collect::<Vec<_>>().join("/");
            format!("{origin}{callback_url}")
        } else {
            callback_url.to_owned()
        };
        drop(pending);
        self.changed();
        match found.answer.take().map(|answer| answer.send(full)) {
            Some(Ok(())) => Ok(found.prompt.server),
            _ => Err("the authorization no longer waits (it may have expired)".to_owned()),
        }
    }
}

#[async_trait::async_trait]
impl AuthorizeFlow for CallbackAuthorizer {
    fn redirect_uri(&self) -> String {
        self.redirect_uri.clone()
    }

    async fn authorize(&self, prompt: AuthorizationPrompt) -> Result<String, String> {
        let state =
            query_param(&prompt.url, "state").ok_or("the authorization URL has no `state`")?;
        let (answer, redirect) = tokio::sync::oneshot::channel();
        {
            let mut pending = self.lock();
            // One authorization per server: a newer one replaces the one left open.
            pending.retain(|p| p.prompt.server != prompt.server);
            pending.push(PendingAuthorization {
                prompt,
                state: state.clone(),
                answer: Some(answer),
            });
        }
        self.changed();
        let outcome = tokio::time::timeout(self.wait, redirect).await;
        self.lock().retain(|p| p.state != state);
        self.changed();
        match outcome {
            Ok(Ok(url)) => Ok(url),
            Ok(Err(_)) => Err("the authorization was replaced by a newer one".to_owned()),
            Err(_) => Err(format!("not authorized within {} s", self.wait.as_secs())),
        }
    }
}

/// The value of `name` in a URL's query, percent-decoded for `%XX`.
fn query_param(url: &str, name: &str) -> Option<String> {
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

/// What the host gives every server's OAuth: its name, authorizer and token directory.
pub(crate) struct OAuthHost<'a> {
    pub(crate) client_name: &'a str,
    pub(crate) authorizer: Option<&'a Authorizer>,
    pub(crate) token_dir: Option<&'a Path>,
}

/// The OAuth state of one HTTP server, shared by its connections.
pub(crate) struct OAuthSession {
    server: String,
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
        OAuthSession {
            server: server.to_owned(),
            url: url.to_owned(),
            config: config.cloned().unwrap_or_default(),
            store: host.token_dir.map(|dir| TokenStore::for_server(dir, server, url)),
            authorizer: host.authorizer.cloned(),
            client_name: host.client_name.to_owned(),
            manager: tokio::sync::Mutex::new(None),
            authorizing: tokio::sync::Mutex::new(()),
            failed_step_ups: std::sync::atomic::AtomicU32::new(0),
        }
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
            match self.manager_with_store().await {
                Ok(mut loaded) => match loaded.initialize_from_store().await {
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
        let client_credentials = self.config.grant == OAuthGrant::ClientCredentials;
        if !client_credentials && self.authorizer.is_none() {
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
        let run = match &self.authorizer {
            _ if client_credentials => self.run_client_credentials().await,
            Some(authorizer) => self.run_authorization(authorizer, www_authenticate).await,
            None => return None,
        };
        match run {
            Ok(token) => Some(token),
            Err(error) => {
                tracing::warn!(server = %self.server, %error, "OAuth authorization failed");
                None
            }
        }
    }

    /// The client-credentials grant: no person involved.
    async fn run_client_credentials(&self) -> Result<String, String> {
        let client_id = self.config.client_id.clone().ok_or_else(|| {
            "`oauth.grant = client_credentials` needs `oauth.client_id`".to_owned()
        })?;
        let variable = self.config.client_secret_env.as_deref().ok_or_else(|| {
            "`oauth.grant = client_credentials` needs `oauth.client_secret_env`".to_owned()
        })?;
        let client_secret = std::env::var(variable)
            .map_err(|_| format!("`{variable}` (`oauth.client_secret_env`) is not set"))?;
        let manager = self.manager_with_store().await.map_err(|error| error.to_string())?;
        let mut state = OAuthState::Unauthorized(manager);
        let config = ClientCredentialsConfig::ClientSecret {
            client_id,
            client_secret,
            scopes: self.config.scopes.clone(),
            // RFC 8707: the token is for this server.
            resource: Some(self.url.clone()),
        };
        state.authenticate_client_credentials(config).await.map_err(|error| error.to_string())?;
        let manager = state
            .into_authorization_manager()
            .ok_or_else(|| "the client-credentials grant did not complete".to_owned())?;
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
        let manager = self.manager_with_store().await.map_err(|error| error.to_string())?;
        let mut state = OAuthState::Unauthorized(manager);
        let mut request = AuthorizationRequest::new(authorizer.0.redirect_uri())
            .with_client_name(self.client_name.clone());
        if !www_authenticate.trim().is_empty() {
            request = request.with_challenge(www_authenticate);
        }
        if !unique.is_empty() {
            request = request.with_scopes(unique);
        }
        if let Some(client_id) = &self.config.client_id {
            request = request.with_preregistered_client(client_id.clone());
            if let Some(variable) = &self.config.client_secret_env {
                let secret = std::env::var(variable)
                    .map_err(|_| format!("`{variable}` (`oauth.client_secret_env`) is not set"))?;
                request = request.with_client_secret(secret);
            }
        }
        if let Some(url) = &self.config.client_metadata_url {
            request = request.with_client_metadata_url(url.clone());
        }
        state.start_authorization(request).await.map_err(|error| error.to_string())?;
        let url = state.get_authorization_url().await.map_err(|error| error.to_string())?;
        let prompt = AuthorizationPrompt { server: self.server.clone(), url };
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
                let prompt =
                    AuthorizationPrompt { server: "s".into(), url: "https://as/authorize".into() };
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

    #[tokio::test]
    async fn the_callback_authorizer_matches_the_redirect_by_state() {
        let authorizer = Arc::new(CallbackAuthorizer::new(
            "https://rein.example/agent/api/runtime/mcp/oauth/callback",
            std::time::Duration::from_secs(5),
        ));
        let waiting = tokio::spawn({
            let authorizer = authorizer.clone();
            async move {
                let url = "https://as.example/authorize?client_id=c&state=s%2B1&code_challenge=x";
                authorizer
                    .authorize(AuthorizationPrompt { server: "gh".into(), url: url.into() })
                    .await
            }
        });
        while authorizer.pending().is_empty() {
            tokio::task::yield_now().await;
        }
        assert!(authorizer.pending_for("gh").is_some_and(|url| url.contains("as.example")));
        assert!(
            authorizer
                .complete("/agent/api/runtime/mcp/oauth/callback?code=1&state=other")
                .is_err()
        );
        let server = authorizer
            .complete("/agent/api/runtime/mcp/oauth/callback?code=abc&state=s%2B1")
            .expect("matched");
        assert_eq!(server, "gh");
        let redirect = waiting.await.expect("joined").expect("the redirect");
        assert_eq!(
            redirect,
            "https://rein.example/agent/api/runtime/mcp/oauth/callback?code=abc&state=s%2B1"
        );
        assert!(authorizer.pending().is_empty());
    }

    #[tokio::test]
    async fn a_given_up_authorization_is_not_pending_and_changes_are_signalled() {
        let authorizer = Arc::new(CallbackAuthorizer::new(
            "http://127.0.0.1:8080/agent/api/runtime/mcp/oauth/callback",
            std::time::Duration::from_secs(60),
        ));
        let mut changes = authorizer.changes();
        let waiting = tokio::spawn({
            let authorizer = authorizer.clone();
            async move {
                let url = "https://as.example/authorize?state=abc";
                authorizer
                    .authorize(AuthorizationPrompt { server: "gh".into(), url: url.into() })
                    .await
            }
        });
        changes.changed().await.expect("a change when it starts waiting");
        assert_eq!(
            authorizer.pending_for("gh").as_deref(),
            Some("https://as.example/authorize?state=abc")
        );
        // The connect waiting on it is dropped (its timeout, a shutdown): no longer pending,
        // and its redirect is refused.
        waiting.abort();
        let _ = waiting.await;
        assert!(authorizer.pending().is_empty() && authorizer.pending_for("gh").is_none());
        assert!(authorizer.complete("/agent/api/runtime/mcp/oauth/callback?state=abc").is_err());
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
}
