//! The client the MCP conformance suite drives: `conformance_client <server-url>`.
//!
//! `cargo xtask conformance` runs it once per client scenario with `MCP_CONFORMANCE_SCENARIO` set
//! (and `MCP_CONFORMANCE_CONTEXT` for scenarios that hand the client credentials). It connects
//! over Streamable HTTP through `McpToolSource`, exactly as rein does (both spec eras, OAuth),
//! lists the tools and calls the ones the context's `toolCalls` names (else each one: `add_numbers`
//! with `a = 5, b = 3`, every other tool without arguments), printing what it got. Exits non-zero when connecting or listing fails.
//!
//! The person in the browser is played by [`Headless`]: it opens the authorization URL without
//! following the redirect and hands back the `Location` (the suite's authorization server
//! approves at once). The context's `client_id` / `client_secret` become the server's `oauth`
//! key, as a person would configure a pre-registered client; so do its `private_key_pem` (a
//! key file, `private_key_jwt`) and its `idp_*` identity provider (cross-app access, with the
//! ID token in a variable).

use std::time::Duration;

use rein_mcp::{
    AuthorizationPrompt, AuthorizeFlow, Authorizer, ClientOptions, ElicitFlow, ElicitationAnswer,
    ElicitationRequest, Elicitor, HttpServer, IdpConfig, McpToolSource, OAuthConfig, OAuthGrant,
};
use rein_protocol::{CancellationToken, JsonObject};

/// Where the secret of a pre-registered client is passed (the `oauth.client_secret_env`).
const SECRET_ENV: &str = "REIN_CONFORMANCE_CLIENT_SECRET";
/// Where the person's enterprise ID token is passed (the `oauth.idp.id_token_env`).
const ID_TOKEN_ENV: &str = "REIN_CONFORMANCE_ID_TOKEN";
/// The client ID metadata document URL the suite expects.
const CLIENT_METADATA_URL: &str = "https://conformance-test.local/client-metadata.json";

/// Plays the person answering a server's question: accepts the form as it is (the defaults).
struct AcceptDefaults;

#[async_trait::async_trait]
impl ElicitFlow for AcceptDefaults {
    async fn elicit(&self, request: ElicitationRequest) -> ElicitationAnswer {
        eprintln!("elicitation from {}: {}", request.server, request.message);
        ElicitationAnswer::Accept(request.defaults())
    }
}

/// Plays the person: follows the authorization URL one step and returns the redirect.
struct Headless;

#[async_trait::async_trait]
impl AuthorizeFlow for Headless {
    fn redirect_uri(&self) -> String {
        "http://localhost:3000/callback".into()
    }

    async fn authorize(&self, prompt: AuthorizationPrompt) -> Result<String, String> {
        eprintln!("authorizing {}", prompt.server);
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|error| error.to_string())?;
        let response = http.get(&prompt.url).send().await.map_err(|error| error.to_string())?;
        response
            .headers()
            .get("location")
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
            .ok_or_else(|| {
                format!("no redirect from the authorization server ({})", response.status())
            })
    }
}

fn main() -> anyhow::Result<()> {
    let url = std::env::args()
        .nth(1)
        .ok_or_else(|| anyhow::anyhow!("usage: conformance_client <server-url>"))?;
    let context: serde_json::Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default();
    // A secret (or an ID token) is configured as the name of a variable: run again with it set.
    let secrets: Vec<(&str, &str)> =
        [(SECRET_ENV, "client_secret"), (ID_TOKEN_ENV, "idp_id_token")]
            .into_iter()
            .filter_map(|(variable, key)| Some((variable, context[key].as_str()?)))
            .collect();
    if !secrets.is_empty()
        && std::env::var_os(SECRET_ENV).is_none()
        && std::env::var_os(ID_TOKEN_ENV).is_none()
    {
        let status = std::process::Command::new(std::env::current_exe()?)
            .arg(&url)
            .envs(secrets)
            .status()?;
        std::process::exit(status.code().unwrap_or(1));
    }
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "rein_mcp=info,rmcp=warn".into()),
        )
        .init();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?
        .block_on(run(url, context))
}

async fn run(url: String, context: serde_json::Value) -> anyhow::Result<()> {
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    eprintln!("scenario `{scenario}` against {url}");
    // A private key is configured as a file: a temporary one for this run, removed after.
    let key_file = match context["private_key_pem"].as_str() {
        Some(pem) => {
            let path = std::env::temp_dir()
                .join(format!("rein-conformance-key-{}.pem", std::process::id()));
            std::fs::write(&path, pem)?;
            Some(path)
        }
        None => None,
    };
    let idp = context["idp_issuer"].as_str().map(|issuer| IdpConfig {
        issuer: issuer.to_owned(),
        token_endpoint: context["idp_token_endpoint"].as_str().unwrap_or_default().to_owned(),
        client_id: context["idp_client_id"].as_str().unwrap_or_default().to_owned(),
        client_secret_env: None,
        id_token_env: ID_TOKEN_ENV.to_owned(),
    });
    let oauth = OAuthConfig {
        client_id: context["client_id"].as_str().map(str::to_owned),
        client_secret_env: context["client_secret"].as_str().map(|_| SECRET_ENV.to_owned()),
        client_metadata_url: Some(CLIENT_METADATA_URL.into()),
        // The client-credentials and cross-app scenarios configure rein as a service would be.
        grant: if scenario.starts_with("auth/client-credentials") {
            OAuthGrant::ClientCredentials
        } else if idp.is_some() {
            OAuthGrant::CrossAppAccess
        } else {
            OAuthGrant::AuthorizationCode
        },
        private_key_file: key_file.clone(),
        signing_algorithm: context["signing_algorithm"]
            .as_str()
            .map(|name| serde_json::from_value(name.into()))
            .transpose()?,
        idp,
        ..OAuthConfig::default()
    };
    let outcome = connect_and_call(url, context, oauth).await;
    if let Some(path) = key_file {
        let _ = std::fs::remove_file(path);
    }
    outcome
}

async fn connect_and_call(
    url: String,
    context: serde_json::Value,
    oauth: OAuthConfig,
) -> anyhow::Result<()> {
    let options = ClientOptions {
        call_timeout: Duration::from_secs(20),
        authorizer: Some(Authorizer(std::sync::Arc::new(Headless))),
        elicitor: Some(Elicitor(std::sync::Arc::new(AcceptDefaults))),
        ..ClientOptions::default()
    };
    let server = HttpServer { oauth: Some(oauth), ..HttpServer::new(url) };
    let source = McpToolSource::new("conformance", server, options);
    let tools = source.tools().await?;
    eprintln!("tools: {:?}", tools.iter().map(|tool| tool.name.as_str()).collect::<Vec<_>>());
    // The calls the scenario asks for (`toolCalls` in the context), else every tool once.
    let calls: Vec<(String, JsonObject)> = match context["toolCalls"].as_array() {
        Some(calls) => calls
            .iter()
            .filter_map(|call| {
                let name = call["name"].as_str()?.to_owned();
                Some((name, call["arguments"].as_object().cloned().unwrap_or_default()))
            })
            .collect(),
        None => tools
            .iter()
            .map(|tool| {
                let mut arguments = JsonObject::new();
                if tool.name == "add_numbers" {
                    arguments.insert("a".into(), 5.into());
                    arguments.insert("b".into(), 3.into());
                }
                (tool.name.clone(), arguments)
            })
            .collect(),
    };
    for (name, arguments) in calls {
        match source.call(&name, arguments, &CancellationToken::new()).await {
            Ok(output) => {
                eprintln!("{name}: {}{}", if output.is_error { "error: " } else { "" }, output.text)
            }
            Err(error) => eprintln!("{name}: {error}"),
        }
    }
    source.close().await;
    Ok(())
}
