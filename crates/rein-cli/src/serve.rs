//! `rein serve`: the HTTP API and the web chat over the hosted runtime.

use std::{net::SocketAddr, process::ExitCode, sync::Arc, time::Duration};

use anyhow::Context as _;
use rein_mcp::CallbackError;
use rein_model::ProviderModel;
use rein_server::{McpOAuthConnected, McpOAuthRefusal, McpOAuthStart, ModelCheck, ServerConfig};

use crate::args::CommonArgs;

/// Arguments of `rein serve`.
#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// The address to bind (default 127.0.0.1:8080).
    #[arg(long, value_name = "HOST:PORT")]
    addr: Option<SocketAddr>,
    /// Serve a non-loopback address without `server.tokens`: anyone who can reach it gets the
    /// whole API. Only for a network you trust.
    #[arg(long)]
    insecure_no_auth: bool,
}

pub(crate) async fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    // The address is settled before the MCP servers start: an OAuth redirect URI names it.
    let mut chosen = None;
    let (config, wired) = args
        .common
        .wire_with(|config| {
            let addr =
                fixed_port(serve_addr(&args, config)?, !config.all_mcp_servers().is_empty())?;
            chosen = Some(addr);
            let redirect_uri = format!("{}{OAUTH_CALLBACK_PATH}", own_origin(addr));
            let tokens_per_principal = !config.server.tokens.is_empty();
            Ok(crate::wire::McpHost::Web { redirect_uri, tokens_per_principal })
        })
        .await?;
    // (`wire` has checked the tokens: 16 characters at least, principals that name a namespace.)
    let addr = chosen.expect("`wire_with` calls its closure before it returns");
    if let Some(problem) = crate::config::unauthenticated_exposure(&config, addr) {
        if !args.insecure_no_auth {
            anyhow::bail!("{}", problem.message);
        }
        eprintln!("rein: warning: serving {addr} without tokens (--insecure-no-auth)");
    }
    let mut server = ServerConfig::default().with_addr(addr);
    for (token, principal) in &config.server.tokens {
        server = server.with_token(token.clone(), principal.clone());
    }
    for origin in &config.server.cors_origins {
        server = server.with_cors_origin(origin.clone());
    }
    server.allowed_hosts = config.server.allowed_hosts.clone();
    server.allow_client_system_prompt = config.allow_client_system_prompt;
    server.client_may_auto_approve = config.client_may_auto_approve;
    // Absent: the server's default quota; 0 lifts it.
    if let Some(limit) = config.server.max_sessions_per_principal {
        server.max_sessions_per_principal = (limit > 0).then_some(limit);
    }
    // Both apply before a request is read (before auth); 0 turns one off.
    if let Some(seconds) = config.server.header_read_timeout_seconds {
        server.header_read_timeout = (seconds > 0).then(|| Duration::from_secs(seconds));
    }
    if let Some(limit) = config.server.max_connections_per_client {
        server.max_connections_per_client = (limit > 0).then_some(limit);
    }
    if let Some(limit) = config.server.max_concurrent_transcriptions {
        server.max_concurrent_transcriptions = (limit > 0).then_some(limit);
    }
    server.insecure_no_auth = args.insecure_no_auth;
    if let Some(authorizations) = &wired.mcp_authorizations {
        // Connect binds the caller's browser to the authorization; the callback takes a redirect
        // only from such a browser (`rein_mcp::CallbackAuthorizer`'s protocol).
        let (connecting, completing) = (Arc::clone(authorizations), Arc::clone(authorizations));
        server = server.with_mcp_oauth(
            move |principal, name| {
                let binding = connecting.connect(name, principal).map_err(|e| e.to_string())?;
                Ok(McpOAuthStart::new(
                    binding.url,
                    binding.state,
                    binding.secret,
                    binding.expires_in,
                ))
            },
            move |redirect, secret| match completing.complete(redirect, secret) {
                Ok(done) => {
                    Ok(McpOAuthConnected::new(done.server, done.principal, done.connected_by))
                }
                Err(error @ CallbackError::OtherBrowser) => {
                    Err(McpOAuthRefusal::OtherBrowser(error.to_string()))
                }
                Err(error) => Err(McpOAuthRefusal::NotWaiting(error.to_string())),
            },
        );
        if !config.server.tokens.is_empty() {
            // Per-principal tokens: each principal sees the authorizations of its own calls.
            let own = Arc::clone(authorizations);
            server = server.with_mcp_principal_authorizations(move |principal, name| {
                own.pending_for_principal(name, Some(principal))
            });
        }
    }
    if let Some(transcriber) = &wired.transcriber {
        server = server.with_transcriber(Arc::clone(transcriber));
    }
    // Checked beside the server, which listens at once: the chat shows the outcome.
    let check = tokio::spawn(check_default_model(
        wired.default_model.clone(),
        wired.default_provider.clone(),
        server.model_check.clone(),
    ));
    let dispatcher = wired.runtime.start_dispatcher();
    let model = wired.default_model.clone();
    let data = wired.storage.to_string();
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    rein_server::serve_until(
        server,
        wired.runtime.clone(),
        |bound| {
            println!(
                "rein is serving the web chat at http://{bound}/ (model {model}, data in {data})"
            );
        },
        shutdown,
    )
    .await
    .context("serving")?;
    check.abort();
    dispatcher.shutdown().await;
    Ok(ExitCode::SUCCESS)
}

/// Where an MCP server's authorization server sends the browser back (`GET /mcp/oauth/callback`).
const OAUTH_CALLBACK_PATH: &str = "/agent/api/runtime/mcp/oauth/callback";

/// The address to bind: `--addr`, else `server.addr` (`REIN_ADDR`), else 127.0.0.1:8080.
fn serve_addr(args: &ServeArgs, config: &crate::config::Config) -> anyhow::Result<SocketAddr> {
    match args.addr {
        Some(addr) => Ok(addr),
        None => {
            config.addr().parse().with_context(|| format!("server address `{}`", config.addr()))
        }
    }
}

/// `addr`, except that port 0 with MCP servers configured is a free port chosen now (bound and
/// let go): the OAuth redirect URI of the MCP servers names the port before the server binds.
fn fixed_port(addr: SocketAddr, mcp_servers: bool) -> anyhow::Result<SocketAddr> {
    if addr.port() != 0 || !mcp_servers {
        return Ok(addr);
    }
    let probe = std::net::TcpListener::bind(addr).with_context(|| format!("binding {addr}"))?;
    Ok(probe.local_addr()?)
}

/// rein's own origin as a browser on this machine reaches it: `http://ADDR`, with `localhost`
/// for an address of every interface (`0.0.0.0`, `::`).
fn own_origin(addr: SocketAddr) -> String {
    if addr.ip().is_unspecified() {
        format!("http://localhost:{}", addr.port())
    } else {
        format!("http://{addr}")
    }
}

/// How long the check at start waits for the default model's endpoint to take a connection.
const MODEL_CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// Tries the default model's endpoint once; when nothing answers, says in the log what to do
/// and hands the same words to the chat (`GET /models`, `defaultModelStatus`). The check is
/// marked as begun when this is called, before the server listens: a spawned task may start
/// after the first request, which then read `unchecked` for a check about to run.
fn check_default_model(
    name: String,
    model: Arc<ProviderModel>,
    board: ModelCheck,
) -> impl std::future::Future<Output = ()> {
    let endpoint = model.redactor().redact(model.endpoint()).into_owned();
    board.checking(&name, &endpoint);
    async move {
        match model.check_endpoint(MODEL_CHECK_TIMEOUT).await {
            Ok(()) => board.finished(Ok(())),
            Err(error) => {
                let message = format!("The default model `{name}` does not answer: {error}");
                eprintln!("rein: warning: {message}");
                board.finished(Err(message));
            }
        }
    }
}
