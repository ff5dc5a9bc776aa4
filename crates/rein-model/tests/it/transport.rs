//! A host's own `HttpTransport` (what `rein-wasm` plugs in over `fetch`): the model sends
//! through it, waits on its timer and reads its clock, with the same shaping, retry and
//! streaming rules as over reqwest. The transport here is scripted, because the host's
//! `fetch` cannot be reached from a native test.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use futures::StreamExt as _;
use rein_model::{
    HttpRequest, HttpResponse, HttpTransport, ModelRegistry, ModelsConfig, RETRY_TIMEOUT_CAP,
    RegistryOptions, TransportError,
};
use rein_protocol::{Model as _, ModelErrorKind, ReplyDelta};
use serde_json::json;

use crate::fixtures::hello;
use crate::server::sse_body;

/// One scripted answer: status, headers and body pieces, or a transport failure.
type Answer = Result<(u16, Vec<(&'static str, String)>, Vec<Vec<u8>>), TransportError>;

/// Answers in order; records the requests and every wait asked for. The per-attempt timeouts
/// (600 s by default, at most `RETRY_TIMEOUT_CAP` for a retry) never fire.
#[derive(Debug, Default)]
struct Scripted {
    answers: Mutex<VecDeque<Answer>>,
    requests: Mutex<Vec<HttpRequest>>,
    waits: Mutex<Vec<Duration>>,
}

/// The host's clock: 2015-10-21 07:28:00 UTC.
fn clock() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480)
}

#[async_trait]
impl HttpTransport for Scripted {
    async fn post(&self, request: HttpRequest) -> Result<HttpResponse, TransportError> {
        self.requests.lock().unwrap().push(request);
        let answer = self.answers.lock().unwrap().pop_front().expect("a scripted answer");
        let (status, headers, pieces) = answer?;
        let headers = headers.into_iter().map(|(name, value)| (name.to_owned(), value)).collect();
        let body = futures::stream::iter(pieces.into_iter().map(Ok)).boxed();
        Ok(HttpResponse::new(status, headers, body))
    }

    async fn sleep(&self, delay: Duration) {
        if delay >= RETRY_TIMEOUT_CAP {
            return futures::future::pending().await;
        }
        self.waits.lock().unwrap().push(delay);
    }

    fn now(&self) -> SystemTime {
        clock()
    }
}

fn model_over(transport: &Arc<Scripted>) -> Arc<rein_model::ProviderModel> {
    let config: ModelsConfig = serde_json::from_value(json!({
        "llm_models": [{"value": "m", "endpoint": "http://host.test/v1", "api_key": "k-1"}],
    }))
    .unwrap();
    let options = RegistryOptions::default()
        .with_unreachable_hint("http://host.test/v1", "Start the host's model.");
    let transport: Arc<dyn HttpTransport> = transport.clone();
    ModelRegistry::from_config_with_transport(&config, &options, |_| None, transport)
        .unwrap()
        .default_model()
}

#[tokio::test]
async fn a_host_transport_gets_the_same_request_waits_on_its_clock_and_streams() {
    let transport = Arc::new(Scripted::default());
    let stream = sse_body(&[
        r#"{"choices":[{"index":0,"delta":{"content":"Hel"}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"lo."},"finish_reason":"stop"}]}"#,
        "[DONE]",
    ]);
    let (first, second) = stream.split_at(stream.len() / 2);
    transport.answers.lock().unwrap().extend([
        // A Retry-After that is a date, 30 s after the host's clock.
        Ok((429, vec![("Retry-After", "Wed, 21 Oct 2015 07:28:30 GMT".to_owned())], vec![])),
        Ok((
            200,
            vec![("content-type", "text/event-stream".to_owned())],
            vec![first.to_vec(), second.to_vec()],
        )),
    ]);
    let model = model_over(&transport);
    let deltas = Mutex::new(Vec::new());
    let reply = model
        .complete(&hello(), &|delta| deltas.lock().unwrap().push(delta))
        .await
        .expect("the retry answers");
    assert_eq!(reply.content, "Hello.");
    assert_eq!(*transport.waits.lock().unwrap(), [Duration::from_secs(30)]);
    let deltas = deltas.into_inner().unwrap();
    assert!(
        matches!(&deltas[0], ReplyDelta::Retry { attempt: 2, delay_ms: 30_000, .. }),
        "{deltas:?}"
    );
    let requests = transport.requests.lock().unwrap();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0], requests[1], "a retry sends the same request");
    let request = &requests[0];
    assert_eq!(request.url, "http://host.test/v1/chat/completions");
    assert_eq!(request.header("Content-Type"), Some("application/json"));
    assert_eq!(request.header("accept"), Some("text/event-stream"));
    assert_eq!(request.header("authorization"), Some("Bearer k-1"));
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&request.body).unwrap(),
        model.request_body(&hello())
    );
}

#[tokio::test]
async fn a_connection_the_host_could_not_make_names_the_endpoint_and_the_hint() {
    let transport = Arc::new(Scripted::default());
    transport.answers.lock().unwrap().extend([
        Err(TransportError::Connect("Failed to fetch".into())),
        Err(TransportError::Request("invalid header value".into())),
    ]);
    let error = model_over(&transport).complete(&hello(), &|_| {}).await.unwrap_err();
    // Retried once at once, as a refused connection is natively; then what can't be built is
    // shown as it is.
    assert_eq!(transport.requests.lock().unwrap().len(), 2);
    assert_eq!(
        (error.kind, error.message.as_str()),
        (ModelErrorKind::Other, "invalid header value")
    );

    let transport = Arc::new(Scripted::default());
    transport.answers.lock().unwrap().extend([
        Err(TransportError::Connect("Failed to fetch".into())),
        Err(TransportError::Connect("Failed to fetch".into())),
    ]);
    let error = model_over(&transport).complete(&hello(), &|_| {}).await.unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Retryable);
    assert_eq!(
        error.message,
        "cannot reach the model endpoint http://host.test/v1 (Failed to fetch). \
         Start the host's model."
    );
}
