//! `ModelRegistry::transcriber` against a scripted OpenAI-compatible
//! `/v1/audio/transcriptions`: the multipart form it sends, the text it reads, errors scrubbed.

use rein_model::{ModelRegistry, ModelsConfig, RegistryOptions};
use rein_protocol::{Audio, Transcriber};
use serde_json::json;

use crate::server::{Reply, Server};

fn registry(url: &str) -> ModelRegistry {
    let config: ModelsConfig = serde_json::from_value(json!({
        "llm_models": [
            { "value": "chat", "endpoint": format!("{url}/v1"), "api_key": "sk-test-0123456789abcdef" },
            { "value": "whisper-1", "endpoint": format!("{url}/v1"), "api_key": "sk-test-0123456789abcdef" },
            { "value": "claude", "provider": "anthropic", "endpoint": format!("{url}/anthropic") }
        ]
    }))
    .unwrap();
    ModelRegistry::from_config_with_env(&config, &RegistryOptions::default(), |_| None).unwrap()
}

#[tokio::test]
async fn a_recording_is_posted_as_a_form_and_its_text_read() {
    let server = Server::start(vec![Reply::json(200, json!({ "text": "paint the map" }))]).await;
    let transcriber = registry(&server.url).transcriber("whisper-1").unwrap();
    assert_eq!(transcriber.model(), "whisper-1");
    let audio = Audio::new(b"RIFF\0\0fake wav\r\n--x".to_vec(), "audio/wav", "speech.wav");
    let text = transcriber.transcribe(audio).await.unwrap();
    assert_eq!(text, "paint the map");

    let seen = server.request();
    assert_eq!((seen.method.as_str(), seen.path.as_str()), ("POST", "/v1/audio/transcriptions"));
    assert_eq!(
        seen.headers.get("authorization").map(String::as_str),
        Some("Bearer sk-test-0123456789abcdef")
    );
    let content_type = seen.all_headers.get("content-type").unwrap();
    let boundary = content_type.strip_prefix("multipart/form-data; boundary=").unwrap();
    let body = String::from_utf8_lossy(&seen.raw_body);
    assert!(body.contains("name=\"model\"\r\n\r\nwhisper-1\r\n"), "{body}");
    assert!(body.contains("name=\"response_format\"\r\n\r\njson\r\n"), "{body}");
    assert!(
        body.contains(
            "name=\"file\"; filename=\"speech.wav\"\r\nContent-Type: audio/wav\r\n\r\nRIFF"
        ),
        "{body}"
    );
    assert!(body.ends_with(&format!("fake wav\r\n--x\r\n--{boundary}--\r\n")), "{body}");
}

#[tokio::test]
async fn a_failure_names_the_endpoint_without_the_key() {
    let server = Server::start(vec![Reply::text(401, "bad key sk-test-0123456789abcdef")]).await;
    let transcriber = registry(&server.url).transcriber("whisper-1").unwrap();
    let error = transcriber
        .transcribe(Audio::new(vec![1, 2, 3], "audio/webm", "a.webm"))
        .await
        .unwrap_err();
    let message = error.to_string();
    assert!(message.contains("/v1/audio/transcriptions") && message.contains("401"), "{message}");
    assert!(!message.contains("sk-test-0123456789abcdef"), "{message}");
}

#[test]
fn only_openai_compatible_endpoints_transcribe() {
    let error = registry("http://127.0.0.1:9").transcriber("claude").unwrap_err();
    assert!(error.to_string().contains("OpenAI-compatible"), "{error}");
}
