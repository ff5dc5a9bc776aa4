//! `POST /transcriptions` (voice input) through the router with a scripted transcriber: a
//! recording to text, the media types and size it refuses, and no transcriber configured.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use axum::{
    body::Body,
    http::{Request, StatusCode, header},
};
use rein_protocol::{Audio, Transcriber, TranscriptionError};
use rein_server::ServerConfig;
use serde_json::Value;

use crate::{
    call,
    scripted::{ByPrompt, app},
    send,
};

const PATH: &str = "/agent/api/runtime/transcriptions";

/// Answers every recording with one text and remembers what it was sent.
#[derive(Default)]
pub(crate) struct ScriptedTranscriber {
    pub(crate) heard: Mutex<Vec<Audio>>,
}

#[async_trait]
impl Transcriber for ScriptedTranscriber {
    fn model(&self) -> &str {
        "scripted-whisper"
    }

    async fn transcribe(&self, audio: Audio) -> Result<String, TranscriptionError> {
        self.heard.lock().unwrap().push(audio);
        Ok(" paint the map \n".to_owned())
    }
}

/// A WAV file of `samples` samples of a 440 Hz tone (16-bit mono, 16 kHz).
pub(crate) fn wav(samples: usize) -> Vec<u8> {
    let data_len = (samples * 2) as u32;
    let mut out = Vec::with_capacity(44 + samples * 2);
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&(36 + data_len).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    out.extend_from_slice(&16u32.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes()); // PCM
    out.extend_from_slice(&1u16.to_le_bytes()); // mono
    out.extend_from_slice(&16_000u32.to_le_bytes());
    out.extend_from_slice(&32_000u32.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&16u16.to_le_bytes());
    out.extend_from_slice(b"data");
    out.extend_from_slice(&data_len.to_le_bytes());
    for n in 0..samples {
        let t = n as f64 / 16_000.0;
        let sample = ((t * 440.0 * std::f64::consts::TAU).sin() * 8000.0) as i16;
        out.extend_from_slice(&sample.to_le_bytes());
    }
    out
}

fn form(media_type: &str, bytes: &[u8]) -> Request<Body> {
    let mut body = Vec::new();
    body.extend_from_slice(b"--rein-test\r\nContent-Disposition: form-data; name=\"file\"; filename=\"speech.wav\"\r\n");
    body.extend_from_slice(format!("Content-Type: {media_type}\r\n\r\n").as_bytes());
    body.extend_from_slice(bytes);
    body.extend_from_slice(b"\r\n--rein-test--\r\n");
    Request::builder()
        .method("POST")
        .uri(PATH)
        .header(header::CONTENT_TYPE, "multipart/form-data; boundary=rein-test")
        .body(Body::from(body))
        .unwrap()
}

fn with_transcriber() -> (axum::Router, Arc<ScriptedTranscriber>, impl Drop) {
    let transcriber = Arc::new(ScriptedTranscriber::default());
    let mut config = ServerConfig::default().with_transcriber(transcriber.clone());
    config.max_audio_bytes = 64 * 1024;
    let (app, _runtime, dir) = app(&config, ByPrompt::new([]));
    (app, transcriber, dir)
}

#[tokio::test]
async fn a_recording_becomes_text_for_the_composer() {
    let (app, transcriber, _dir) = with_transcriber();
    let audio = wav(16_000);
    assert!(audio.len() > 1024 * 1024 / 40, "bigger than a JSON body would need");
    let (status, body) = send(&app, form("audio/wav", &audio)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["text"], "paint the map");
    {
        let heard = transcriber.heard.lock().unwrap();
        assert_eq!(heard[0].bytes, audio);
        assert_eq!(heard[0].media_type, "audio/wav");
        assert_eq!(heard[0].file_name, "speech.wav");
    }
    let (_, models) = call(&app, "GET", "/agent/api/runtime/models", None).await;
    assert_eq!(models["transcriptionModel"], "scripted-whisper");
}

#[tokio::test]
async fn bad_recordings_are_refused() {
    let (app, transcriber, _dir) = with_transcriber();
    let (status, body) = send(&app, form("text/plain", b"not audio")).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::UNSUPPORTED_MEDIA_TYPE, Some("unsupported_media_type"))
    );
    let (status, body) = call(&app, "POST", PATH, Some(serde_json::json!({ "file": "x" }))).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::UNSUPPORTED_MEDIA_TYPE, Some("unsupported_media_type"))
    );
    let (status, body) = send(&app, form("audio/wav", &wav(40_000))).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::PAYLOAD_TOO_LARGE, Some("payload_too_large"))
    );
    let (status, body) = send(&app, form("audio/wav", b"")).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("validation_error"))
    );
    assert!(transcriber.heard.lock().unwrap().is_empty(), "nothing refused reached the model");
}

#[tokio::test]
async fn without_a_transcription_model_there_is_no_voice_input() {
    let (app, _runtime, _dir) = app(&ServerConfig::default(), ByPrompt::new([]));
    let (status, body) = send(&app, form("audio/wav", &wav(100))).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, Some("hosted_transcription_not_configured"))
    );
    let (_, models) = call(&app, "GET", "/agent/api/runtime/models", None).await;
    assert_eq!(models["transcriptionModel"], Value::Null);
}
