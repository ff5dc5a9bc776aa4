//! The authorizer of a web host (`rein serve`): authorizations wait for a browser to come back to
//! the host's own callback, and only a browser the authorization's principal sent may complete
//! one.
//!
//! The protocol of one authorization:
//!
//! 1. **Waiting.** A connection that needs a token calls [`AuthorizeFlow::authorize`]; the
//!    prompt (server, URL, principal) is kept with the URL's `state` and listed by
//!    [`CallbackAuthorizer::pending_for_principal`] (the host shows it as `needs_auth`). A newer
//!    authorization of the same server and principal replaces it. It waits at most `wait`.
//! 2. **Connect.** The principal's own authenticated client asks to connect the server
//!    ([`CallbackAuthorizer::connect`]): the principal's own waiting authorization, else the
//!    server's own (shared) one. It gets the URL and a fresh random secret that the host keeps in
//!    that browser (an `HttpOnly` cookie); the secret is remembered with the authorization and the
//!    principal it was given to (at most [`MAX_BROWSERS`] per authorization, the oldest dropped).
//! 3. **Callback.** The authorization server sends the browser back with `code` and `state`;
//!    [`CallbackAuthorizer::complete`] finds the authorization by `state` and takes the redirect
//!    only with one of its secrets (compared in constant time). Without one, the redirect is
//!    refused and the authorization keeps waiting: a URL handed to another person's browser
//!    cannot file that person's token under the principal who handed it over.
//! 4. **Done.** The redirect goes to the waiting connection, which exchanges the code; the
//!    authorization and its secrets are gone, so the same redirect again is refused.

use std::{
    sync::{Mutex, MutexGuard, PoisonError},
    time::{Duration, Instant},
};

use tokio::sync::{oneshot, watch};

use crate::oauth::{AuthorizationPrompt, AuthorizeFlow, query_param};

/// How many browsers may hold a secret for one authorization (Connect clicked in several tabs
/// or browsers); a further Connect drops the oldest.
pub const MAX_BROWSERS: usize = 4;

/// The bytes of randomness in a browser's secret (43 base64url characters).
const SECRET_BYTES: usize = 32;

/// The authorizer of a web host: see the module's protocol. The host lists the
/// [`pending`](Self::pending) URLs, hands out browser secrets with [`connect`](Self::connect) and
/// each redirect it receives to [`complete`](Self::complete).
pub struct CallbackAuthorizer {
    redirect_uri: String,
    wait: Duration,
    pending: Mutex<Vec<PendingAuthorization>>,
    changes: watch::Sender<u64>,
}

struct PendingAuthorization {
    prompt: AuthorizationPrompt,
    state: String,
    /// When the waiting connection gives up (its secrets are no use after it).
    deadline: Instant,
    /// The browsers that may complete it, oldest first.
    browsers: Vec<Browser>,
    answer: Option<oneshot::Sender<String>>,
}

/// A secret handed to one principal's browser by Connect.
struct Browser {
    secret: String,
    principal: String,
}

impl PendingAuthorization {
    /// Whether the authorization still waits (its connect was not dropped).
    fn waits(&self) -> bool {
        self.answer.as_ref().is_some_and(|answer| !answer.is_closed())
    }
}

/// What Connect hands the principal's browser: the URL to open, and the secret the host keeps in
/// that browser for the callback to bring back.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BrowserBinding {
    /// The configured server name.
    pub server: String,
    /// The authorization URL to open.
    pub url: String,
    /// The URL's `state` (the callback's redirect carries it).
    pub state: String,
    /// The secret only this browser gets (base64url).
    pub secret: String,
    /// How long the authorization still waits (the secret is useless after it).
    pub expires_in: Duration,
}

impl std::fmt::Debug for BrowserBinding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrowserBinding")
            .field("server", &self.server)
            .field("expires_in", &self.expires_in)
            .finish_non_exhaustive()
    }
}

/// An authorization the callback completed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Completed {
    /// The configured server name.
    pub server: String,
    /// Whose tokens they are: `Some(principal)`, or `None` for the server's own connection
    /// (shared by every principal).
    pub principal: Option<String>,
    /// The principal whose Connect started the browser that completed it.
    pub connected_by: String,
}

/// Why Connect or the callback could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CallbackError {
    /// The redirect has no `state`.
    #[error("the redirect has no `state`")]
    NoState,
    /// No authorization waits for the redirect's `state`.
    #[error("no authorization waits for this `state` (it may have expired or been used)")]
    NotWaiting,
    /// One waits for it, but the browser did not bring a secret Connect gave for it.
    #[error(
        "this browser did not start this authorization with Connect in the chat of the principal \
         it is for"
    )]
    OtherBrowser,
    /// Connect: no authorization of the server waits for this principal (nor a shared one).
    #[error("no authorization of MCP server `{server}` waits for you")]
    NothingToConnect {
        /// The server asked for.
        server: String,
    },
}

impl CallbackAuthorizer {
    /// An authorizer whose redirects come back to `redirect_uri` (for example
    /// `https://host/agent/api/runtime/mcp/oauth/callback`); each authorization waits at most
    /// `wait`.
    pub fn new(redirect_uri: impl Into<String>, wait: Duration) -> Self {
        CallbackAuthorizer {
            redirect_uri: redirect_uri.into(),
            wait,
            pending: Mutex::new(Vec::new()),
            changes: watch::Sender::new(0),
        }
    }

    /// A receiver whose value changes whenever an authorization starts waiting or stops: read
    /// [`pending`](Self::pending) again then.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    fn changed(&self) {
        self.changes.send_modify(|generation| *generation += 1);
    }

    fn lock(&self) -> MutexGuard<'_, Vec<PendingAuthorization>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The authorizations waiting for a person, oldest first (one whose waiting connect was
    /// given up, by its timeout or a shutdown, is not).
    pub fn pending(&self) -> Vec<AuthorizationPrompt> {
        self.lock().iter().filter(|p| p.waits()).map(|pending| pending.prompt.clone()).collect()
    }

    /// The authorization URL `server` waits on for its own tokens, if any.
    pub fn pending_for(&self, server: &str) -> Option<String> {
        self.pending_for_principal(server, None)
    }

    /// The authorization URL `server` waits on for the tokens of `principal` (`None`: the
    /// server's own), if any.
    pub fn pending_for_principal(&self, server: &str, principal: Option<&str>) -> Option<String> {
        self.lock()
            .iter()
            .find(|p| {
                p.prompt.server == server && p.prompt.principal.as_deref() == principal && p.waits()
            })
            .map(|p| p.prompt.url.clone())
    }

    /// Connect, for `principal`'s authenticated client: `principal`'s own waiting authorization
    /// of `server`, else the server's own, bound to a fresh secret for that principal's browser.
    pub fn connect(&self, server: &str, principal: &str) -> Result<BrowserBinding, CallbackError> {
        let mut pending = self.lock();
        let waiting = |p: &PendingAuthorization, whose: Option<&str>| {
            p.prompt.server == server && p.prompt.principal.as_deref() == whose && p.waits()
        };
        let found = pending
            .iter()
            .position(|p| waiting(p, Some(principal)))
            .or_else(|| pending.iter().position(|p| waiting(p, None)))
            .ok_or_else(|| CallbackError::NothingToConnect { server: server.to_owned() })?;
        let authorization = &mut pending[found];
        let secret = oauth2::CsrfToken::new_random_len(SECRET_BYTES as u32).into_secret();
        if authorization.browsers.len() >= MAX_BROWSERS {
            authorization.browsers.remove(0);
        }
        authorization
            .browsers
            .push(Browser { secret: secret.clone(), principal: principal.to_owned() });
        Ok(BrowserBinding {
            server: server.to_owned(),
            url: authorization.prompt.url.clone(),
            state: authorization.state.clone(),
            secret,
            expires_in: authorization.deadline.saturating_duration_since(Instant::now()),
        })
    }

    /// Hands the redirect `callback_url` (the full URL, or its path and query) to the
    /// authorization whose `state` it carries, when `secret` (what the browser brought back) is
    /// one Connect gave for it; otherwise the authorization keeps waiting.
    pub fn complete(
        &self,
        callback_url: &str,
        secret: Option<&str>,
    ) -> Result<Completed, CallbackError> {
        let state = query_param(callback_url, "state").ok_or(CallbackError::NoState)?;
        let mut pending = self.lock();
        let index = pending
            .iter()
            .position(|p| p.state == state && p.waits())
            .ok_or(CallbackError::NotWaiting)?;
        let presented = secret.unwrap_or("");
        // Every secret is compared, so the time taken does not say which one nearly matched.
        let mut browser = None;
        for candidate in &pending[index].browsers {
            if constant_time_eq(candidate.secret.as_bytes(), presented.as_bytes()) {
                browser = Some(candidate.principal.clone());
            }
        }
        let connected_by = browser.ok_or(CallbackError::OtherBrowser)?;
        let mut found = pending.remove(index);
        drop(pending);
        self.changed();
        let full = if callback_url.starts_with('/') {
            let origin = self.redirect_uri.split('/').take(3).collect::<Vec<_>>().join("/");
            format!("{origin}{callback_url}")
        } else {
            callback_url.to_owned()
        };
        match found.answer.take().map(|answer| answer.send(full)) {
            Some(Ok(())) => Ok(Completed {
                server: found.prompt.server,
                principal: found.prompt.principal,
                connected_by,
            }),
            _ => Err(CallbackError::NotWaiting),
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
        let (answer, redirect) = oneshot::channel();
        {
            let mut pending = self.lock();
            // One authorization per server and principal: a newer one replaces the one left
            // open.
            pending.retain(|p| {
                p.prompt.server != prompt.server || p.prompt.principal != prompt.principal
            });
            pending.push(PendingAuthorization {
                prompt,
                state: state.clone(),
                deadline: Instant::now() + self.wait,
                browsers: Vec::new(),
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

/// Whether `a` and `b` are equal, looking at every byte of the longer one.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut differ = u8::from(a.len() != b.len());
    for index in 0..a.len().max(b.len()) {
        differ |= a.get(index).copied().unwrap_or(0) ^ b.get(index).copied().unwrap_or(0);
    }
    differ == 0
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    type Shared = Arc<CallbackAuthorizer>;

    const CALLBACK: &str = "/agent/api/runtime/mcp/oauth/callback";

    fn authorizer(wait_secs: u64) -> Shared {
        Arc::new(CallbackAuthorizer::new(
            format!("https://rein.example{CALLBACK}"),
            Duration::from_secs(wait_secs),
        ))
    }

    /// Starts an authorization of `server` for `principal` with `state`; its task.
    fn ask(
        authorizer: &Shared,
        server: &str,
        principal: Option<&str>,
        state: &str,
    ) -> tokio::task::JoinHandle<Result<String, String>> {
        let authorizer = authorizer.clone();
        let mut prompt =
            AuthorizationPrompt::new(server, format!("https://as.example/authorize?state={state}"));
        prompt.principal = principal.map(str::to_owned);
        tokio::spawn(async move { authorizer.authorize(prompt).await })
    }

    async fn until_pending(authorizer: &CallbackAuthorizer, count: usize) {
        while authorizer.pending().len() < count {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn a_redirect_is_taken_only_with_the_secret_connect_gave_its_browser() {
        let authorizer = authorizer(5);
        let waiting = ask(&authorizer, "gh", None, "s%2B1");
        until_pending(&authorizer, 1).await;
        assert!(authorizer.pending_for("gh").is_some_and(|url| url.contains("as.example")));
        let redirect = format!("{CALLBACK}?code=abc&state=s%2B1");
        // Without Connect, no browser may complete it; it keeps waiting.
        assert_eq!(authorizer.complete(&redirect, None), Err(CallbackError::OtherBrowser));
        let binding = authorizer.connect("gh", "local").expect("it waits");
        assert_eq!((binding.state.as_str(), binding.secret.len()), ("s+1", 43));
        assert!(binding.expires_in <= Duration::from_secs(5), "{binding:?}");
        assert!(!format!("{binding:?}").contains(&binding.secret));
        assert_eq!(
            authorizer.complete(&redirect, Some("not-the-secret")),
            Err(CallbackError::OtherBrowser)
        );
        assert_eq!(
            authorizer.complete(&format!("{CALLBACK}?code=1&state=other"), Some(&binding.secret)),
            Err(CallbackError::NotWaiting)
        );
        assert_eq!(
            authorizer.complete(&format!("{CALLBACK}?code=1"), None),
            Err(CallbackError::NoState)
        );
        let completed = authorizer.complete(&redirect, Some(&binding.secret)).expect("matched");
        assert_eq!(
            completed,
            Completed { server: "gh".into(), principal: None, connected_by: "local".into() }
        );
        let url = waiting.await.expect("joined").expect("the redirect");
        assert_eq!(url, format!("https://rein.example{redirect}"));
        assert!(authorizer.pending().is_empty());
        // Used: the same redirect and secret again are refused.
        assert_eq!(
            authorizer.complete(&redirect, Some(&binding.secret)),
            Err(CallbackError::NotWaiting)
        );
    }

    #[tokio::test]
    async fn another_principals_browser_cannot_complete_an_authorization() {
        let authorizer = authorizer(60);
        let bob = ask(&authorizer, "gh", Some("bob"), "bob-state");
        until_pending(&authorizer, 1).await;
        // Alice has nothing of her own waiting, and cannot take Bob's.
        assert_eq!(
            authorizer.connect("gh", "alice"),
            Err(CallbackError::NothingToConnect { server: "gh".into() })
        );
        // Alice's browser comes back with Bob's state (Bob sent her his URL): refused, even
        // with a secret of hers for another authorization.
        let alice = ask(&authorizer, "gh", Some("alice"), "alice-state");
        until_pending(&authorizer, 2).await;
        let hers = authorizer.connect("gh", "alice").expect("her own");
        assert_eq!(hers.state, "alice-state");
        let stolen = format!("{CALLBACK}?code=alices-code&state=bob-state");
        assert_eq!(
            authorizer.complete(&stolen, Some(&hers.secret)),
            Err(CallbackError::OtherBrowser)
        );
        assert_eq!(
            authorizer.pending_for_principal("gh", Some("bob")).as_deref(),
            Some("https://as.example/authorize?state=bob-state"),
            "Bob's still waits"
        );
        // Bob's own browser completes it, and the page can say whose it was.
        let his = authorizer.connect("gh", "bob").expect("his own");
        let done = authorizer
            .complete(&format!("{CALLBACK}?code=bobs-code&state=bob-state"), Some(&his.secret))
            .expect("his browser");
        assert_eq!((done.principal.as_deref(), done.connected_by.as_str()), (Some("bob"), "bob"));
        assert!(bob.await.expect("joined").is_ok());
        alice.abort();
    }

    #[tokio::test]
    async fn connect_gives_the_principals_own_authorization_before_the_shared_one() {
        let authorizer = authorizer(60);
        let shared = ask(&authorizer, "gh", None, "s0");
        until_pending(&authorizer, 1).await;
        assert_eq!(authorizer.connect("gh", "alice").expect("the shared one").state, "s0");
        let own = ask(&authorizer, "gh", Some("alice"), "s1");
        until_pending(&authorizer, 2).await;
        assert_eq!(authorizer.connect("gh", "alice").expect("her own").state, "s1");
        assert_eq!(authorizer.connect("gh", "bob").expect("the shared one").state, "s0");
        assert!(matches!(
            authorizer.connect("other", "alice"),
            Err(CallbackError::NothingToConnect { .. })
        ));
        // At most MAX_BROWSERS secrets per authorization: the oldest is dropped.
        let first = authorizer.connect("gh", "bob").expect("shared");
        for _ in 0..MAX_BROWSERS {
            authorizer.connect("gh", "bob").expect("shared");
        }
        let redirect = format!("{CALLBACK}?code=c&state=s0");
        assert_eq!(
            authorizer.complete(&redirect, Some(&first.secret)),
            Err(CallbackError::OtherBrowser)
        );
        shared.abort();
        own.abort();
    }

    #[tokio::test]
    async fn a_given_up_authorization_is_not_pending_and_changes_are_signalled() {
        let authorizer = authorizer(60);
        let mut changes = authorizer.changes();
        let waiting = ask(&authorizer, "gh", None, "abc");
        changes.changed().await.expect("a change when it starts waiting");
        assert_eq!(
            authorizer.pending_for("gh").as_deref(),
            Some("https://as.example/authorize?state=abc")
        );
        let binding = authorizer.connect("gh", "local").expect("waits");
        // The connect waiting on it is dropped (its timeout, a shutdown): no longer pending,
        // and its redirect is refused.
        waiting.abort();
        let _ = waiting.await;
        assert!(authorizer.pending().is_empty() && authorizer.pending_for("gh").is_none());
        assert_eq!(
            authorizer.complete(&format!("{CALLBACK}?state=abc"), Some(&binding.secret)),
            Err(CallbackError::NotWaiting)
        );
        assert!(authorizer.connect("gh", "local").is_err());
    }

    #[tokio::test]
    async fn a_principals_authorization_is_pending_for_that_principal_only() {
        let authorizer = authorizer(60);
        let server = ask(&authorizer, "gh", None, "s0");
        let alice = ask(&authorizer, "gh", Some("alice"), "s1");
        until_pending(&authorizer, 2).await;
        let url = |state: &str| format!("https://as.example/authorize?state={state}");
        assert_eq!(authorizer.pending_for("gh"), Some(url("s0")), "the server's own");
        assert_eq!(authorizer.pending_for_principal("gh", Some("alice")), Some(url("s1")));
        assert_eq!(authorizer.pending_for_principal("gh", Some("bob")), None);
        // A newer authorization of alice's replaces hers only.
        let again = ask(&authorizer, "gh", Some("alice"), "s2");
        while authorizer.pending_for_principal("gh", Some("alice")) != Some(url("s2")) {
            tokio::task::yield_now().await;
        }
        assert!(alice.await.expect("joined").is_err(), "replaced");
        assert_eq!(authorizer.pending_for("gh"), Some(url("s0")));
        let binding = authorizer.connect("gh", "alice").expect("hers");
        let done = authorizer
            .complete(&format!("{CALLBACK}?code=c&state=s2"), Some(&binding.secret))
            .expect("hers");
        assert_eq!(done.server, "gh");
        assert!(again.await.expect("joined").is_ok());
        server.abort();
    }

    #[test]
    fn secrets_compare_whole() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
        assert!(!constant_time_eq(b"", b"a"));
        assert!(constant_time_eq(b"", b""));
    }
}
