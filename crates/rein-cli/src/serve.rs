//! `rein serve`: the HTTP API and the web chat over the hosted runtime.

use std::{net::SocketAddr, process::ExitCode};

use anyhow::Context as _;
use rein_server::ServerConfig;

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
    let (config, wired) = args.common.wire().await?;
    // (`wire` has checked the tokens: 16 characters at least, principals that name a namespace.)
    let addr = match args.addr {
        Some(addr) => addr,
        None => {
            config.addr().parse().with_context(|| format!("server address `{}`", config.addr()))?
        }
    };
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
    server.max_sessions_per_principal = config.server.max_sessions_per_principal;
    server.insecure_no_auth = args.insecure_no_auth;
    let dispatcher = wired.runtime.start_dispatcher();
    let model = wired.default_model.clone();
    let data = wired.paths.session_db.parent().map(|p| p.display().to_string()).unwrap_or_default();
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
    dispatcher.shutdown().await;
    Ok(ExitCode::SUCCESS)
}
