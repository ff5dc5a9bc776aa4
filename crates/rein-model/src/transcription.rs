//! `OpenAiTranscriber`: voice input over an OpenAI-compatible `POST {endpoint}/audio/transcriptions`
//! (OpenAI, whisper.cpp's server, vLLM, LocalAI), GLEN's `transcription_model`: a multipart form
//! with `model`, `response_format=json` and the recording as `file`, answered `{text}`. Errors
//! say which endpoint failed and are scrubbed of the key.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt as _;
use futures::future::{Either, select};
use rein_protocol::{Audio, Redactor, Transcriber, TranscriptionError};

use crate::transport::{HttpRequest, HttpTransport, TransportError};
use crate::{ConfigError, ProviderKind, registry::ModelRegistry};

/// How long one transcription may take.
const TIMEOUT: Duration = Duration::from_secs(120);

/// The largest answer read (a transcript is text; anything bigger is not one).
const MAX_ANSWER_BYTES: usize = 1024 * 1024;

/// A transcription model at an OpenAI-compatible endpoint.
pub struct OpenAiTranscriber {
    model: String,
    endpoint: String,
    api_key: Option<String>,
    transport: Arc<dyn HttpTransport>,
    redactor: Redactor,
}

impl std::fmt::Debug for OpenAiTranscriber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiTranscriber")
            .field("model", &self.model)
            .field("endpoint", &self.redactor.redact(&self.endpoint))
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .finish()
    }
}

impl ModelRegistry {
    /// The transcriber of `name` (GLEN's `transcription_model`): the entry of that name, or,
    /// for a name without one, the first entry's endpoint and key (as [`ModelRegistry::select`]).
    /// Only OpenAI-compatible endpoints transcribe.
    pub fn transcriber(&self, name: &str) -> Result<OpenAiTranscriber, ConfigError> {
        let model = self.select(name)?;
        if model.kind != ProviderKind::OpenAi {
            return Err(ConfigError::InvalidEndpoint {
                model: name.to_owned(),
                endpoint: model.redactor.redact(&model.endpoint).into_owned(),
                reason:
                    "transcription needs an OpenAI-compatible endpoint (`provider = \"openai\"`)"
                        .to_owned(),
            });
        }
        Ok(OpenAiTranscriber {
            model: model.model.clone(),
            endpoint: model.endpoint.clone(),
            api_key: model.api_key.clone(),
            transport: Arc::clone(&model.transport),
            redactor: model.redactor.clone(),
        })
    }
}

/// A multipart boundary that does not occur in `bytes`.
fn boundary_for(bytes: &[u8]) -> String {
    let mut n: u64 = 0x005e_ed0f_7e1b;
    loop {
        let boundary = format!("rein-{n:016x}");
        if !bytes.windows(boundary.len()).any(|w| w == boundary.as_bytes()) {
            return boundary;
        }
        n = n.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
    }
}

/// `file_name` as a quoted-string parameter (no quotes, no line breaks).
fn safe_name(file_name: &str) -> String {
    let name: String =
        file_name.chars().filter(|c| !matches!(c, '"' | '\r' | '\n' | '\\')).take(100).collect();
    if name.is_empty() { "speech.webm".to_owned() } else { name }
}

/// The form: `model`, `response_format`, `file`. Built around the recording's own buffer:
/// the fields and the file's header go in front of it in place (one move of the bytes, no
/// second buffer), so a recording is held once while it is sent.
fn form(model: &str, audio: Audio) -> (String, Vec<u8>) {
    let boundary = boundary_for(&audio.bytes);
    let mut head = String::with_capacity(512);
    for (name, value) in [("model", model), ("response_format", "json")] {
        head.push_str(&format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
        ));
    }
    head.push_str(&format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{}\"\r\nContent-Type: {}\r\n\r\n",
        safe_name(&audio.file_name),
        audio.media_type.replace(['\r', '\n'], "")
    ));
    let tail = format!("\r\n--{boundary}--\r\n");
    let mut body = audio.bytes;
    let len = body.len();
    body.reserve_exact(head.len() + tail.len());
    body.resize(len + head.len(), 0);
    body.copy_within(..len, head.len());
    body[..head.len()].copy_from_slice(head.as_bytes());
    body.extend_from_slice(tail.as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

#[async_trait]
impl Transcriber for OpenAiTranscriber {
    fn model(&self) -> &str {
        &self.model
    }

    async fn transcribe(&self, audio: Audio) -> Result<String, TranscriptionError> {
        let url = format!("{}/audio/transcriptions", self.endpoint);
        let fail = |what: String| {
            let endpoint = self.redactor.redact(&url).into_owned();
            TranscriptionError::new(
                self.redactor.redact(&format!("{endpoint}: {what}")).into_owned(),
            )
        };
        let (content_type, body) = form(&self.model, audio);
        let mut headers = vec![("content-type".to_owned(), content_type)];
        if let Some(key) = &self.api_key {
            headers.push(("authorization".to_owned(), format!("Bearer {key}")));
        }
        let request = HttpRequest { url: url.clone(), headers, body };
        let exchange = async {
            let response = self.transport.post(request).await?;
            let mut bytes = Vec::new();
            let mut pieces = response.body;
            while let Some(piece) = pieces.next().await {
                bytes.extend_from_slice(&piece?);
                if bytes.len() > MAX_ANSWER_BYTES {
                    bytes.truncate(MAX_ANSWER_BYTES);
                    break;
                }
            }
            Ok::<_, TransportError>((response.status, bytes))
        };
        let (status, bytes) =
            match select(std::pin::pin!(exchange), self.transport.sleep(TIMEOUT)).await {
                Either::Left((answer, _)) => answer.map_err(|error| fail(error.to_string()))?,
                Either::Right(_) => {
                    return Err(fail(format!("no answer within {} s", TIMEOUT.as_secs())));
                }
            };
        let text = String::from_utf8_lossy(&bytes).into_owned();
        if !(200..300).contains(&status) {
            let excerpt: String = text.chars().take(300).collect();
            return Err(fail(format!("HTTP {status}: {excerpt}")));
        }
        let value: serde_json::Value = serde_json::from_str(&text)
            .map_err(|error| fail(format!("the answer is not JSON ({error})")))?;
        value
            .get("text")
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| fail("the answer has no `text`".to_owned()))
    }
}
