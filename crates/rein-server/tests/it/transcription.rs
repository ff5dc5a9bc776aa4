//! `POST /transcriptions` (voice input) through the router with a scripted transcriber: a
//! recording to text, the media types and size it refuses (an oversize or non-audio body
//! before it is read whole), the cap on recordings held at once, and no transcriber configured.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use async_trait::async_trait;
use axum::{
    body::Body,
    http::{Request, StatusCode, header},
};
use futures::StreamExt as _;
use rein_protocol::{Audio, Transcriber, TranscriptionError};
use rein_server::ServerConfig;
use serde_json::Value;
use tower::ServiceExt as _;

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

/// The body of a form with `bytes` as its `file` part of type `media_type`.
fn form_body(media_type: &str, bytes: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(b"--rein-test\r\nContent-Disposition: form-data; name=\"file\"; filename=\"speech.wav\"\r\n");
    body.extend_from_slice(format!("Content-Type: {media_type}\r\n\r\n").as_bytes());
    body.extend_from_slice(bytes);
    body.extend_from_slice(b"\r\n--rein-test--\r\n");
    body
}

fn form(media_type: &str, bytes: &[u8]) -> Request<Body> {
    Request::builder()
        .method("POST")
        .uri(PATH)
        .header(header::CONTENT_TYPE, "multipart/form-data; boundary=rein-test")
        .body(Body::from(form_body(media_type, bytes)))
        .unwrap()
}

/// `body` as a request that streams it in pieces of `size` bytes, announcing `length` (if
/// any) as its `Content-Length`; the counter says how many pieces the server has pulled.
fn streamed(
    body: Vec<u8>,
    size: usize,
    length: Option<usize>,
) -> (Request<Body>, Arc<AtomicUsize>) {
    let pulled = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&pulled);
    let pieces: Vec<Vec<u8>> = body.chunks(size).map(<[u8]>::to_vec).collect();
    let stream = futures::stream::iter(pieces).map(move |piece| {
        counter.fetch_add(1, Ordering::SeqCst);
        Ok::<_, std::io::Error>(piece)
    });
    let mut request = Request::builder()
        .method("POST")
        .uri(PATH)
        .header(header::CONTENT_TYPE, "multipart/form-data; boundary=rein-test");
    if let Some(length) = length {
        request = request.header(header::CONTENT_LENGTH, length);
    }
    (request.body(Body::from_stream(stream)).unwrap(), pulled)
}

fn with_transcriber() -> (axum::Router, Arc<ScriptedTranscriber>, impl Drop) {
    let transcriber = Arc::new(ScriptedTranscriber::default());
    let mut config = ServerConfig::default().with_transcriber(transcriber.clone());
    config.max_audio_bytes = 64 * 1024;
    let (app, _runtime, dir) = app(&config, ByPrompt::new([]));
    (app, transcriber, dir)
}

/// Holds every recording until the test opens the gate, counting those it holds.
struct GatedTranscriber {
    holding: AtomicUsize,
    gate: tokio::sync::Semaphore,
}

#[async_trait]
impl Transcriber for GatedTranscriber {
    fn model(&self) -> &str {
        "gated-whisper"
    }

    async fn transcribe(&self, audio: Audio) -> Result<String, TranscriptionError> {
        self.holding.fetch_add(1, Ordering::SeqCst);
        self.gate.acquire().await.expect("the gate stays open").forget();
        Ok(format!("{} bytes", audio.bytes.len()))
    }
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

#[tokio::test]
async fn a_recording_sent_in_pieces_arrives_whole_in_one_buffer() {
    let (app, transcriber, _dir) = with_transcriber();
    let audio = wav(20_000);
    let body = form_body("audio/wav", &audio);
    let length = body.len();
    let (request, pulled) = streamed(body, 1000, Some(length));
    let (status, body) = send(&app, request).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(pulled.load(Ordering::SeqCst), length.div_ceil(1000));
    let heard = transcriber.heard.lock().unwrap();
    assert_eq!(heard[0].bytes, audio);
    // The buffer was made from the announced length: it never grew (by doubling, or by a
    // second copy of the whole) and is handed on as it was.
    assert!(heard[0].bytes.capacity() <= length, "{} > {length}", heard[0].bytes.capacity());
}

#[tokio::test]
async fn an_oversize_upload_is_refused_before_it_is_read_whole() {
    let (app, transcriber, _dir) = with_transcriber();
    let body = form_body("audio/wav", &wav(200_000));
    let length = body.len();
    assert!(length > 6 * 64 * 1024);

    // Announced too large: refused before a byte of the body is read.
    let (request, pulled) = streamed(body.clone(), 4096, Some(length));
    let (status, answer) = send(&app, request).await;
    assert_eq!(
        (status, answer["error"]["code"].as_str()),
        (StatusCode::PAYLOAD_TOO_LARGE, Some("payload_too_large"))
    );
    assert_eq!(pulled.load(Ordering::SeqCst), 0);

    // Not announced (chunked): refused as soon as what arrived passes 64 KiB.
    let (request, pulled) = streamed(body, 4096, None);
    let (status, answer) = send(&app, request).await;
    assert_eq!(
        (status, answer["error"]["code"].as_str()),
        (StatusCode::PAYLOAD_TOO_LARGE, Some("payload_too_large"))
    );
    assert_eq!(pulled.load(Ordering::SeqCst), 64 * 1024 / 4096 + 1, "of {}", length.div_ceil(4096));

    // A file that says it is not audio: refused once its header is in.
    let (request, pulled) = streamed(form_body("text/plain", &[b'x'; 60_000]), 1024, None);
    let (status, answer) = send(&app, request).await;
    assert_eq!(
        (status, answer["error"]["code"].as_str()),
        (StatusCode::UNSUPPORTED_MEDIA_TYPE, Some("unsupported_media_type"))
    );
    assert_eq!(pulled.load(Ordering::SeqCst), 1);
    assert!(transcriber.heard.lock().unwrap().is_empty(), "nothing refused reached the model");
}

#[tokio::test]
async fn the_cap_refuses_an_upload_beyond_it_while_others_are_in_flight() {
    let transcriber = Arc::new(GatedTranscriber {
        holding: AtomicUsize::new(0),
        gate: tokio::sync::Semaphore::new(0),
    });
    let mut config = ServerConfig::default().with_transcriber(transcriber.clone());
    config.max_concurrent_transcriptions = Some(2);
    let (app, _runtime, _dir) = app(&config, ByPrompt::new([]));
    let audio = wav(1000);

    let in_flight: Vec<_> =
        (0..2).map(|_| tokio::spawn(app.clone().oneshot(form("audio/wav", &audio)))).collect();
    tokio::time::timeout(Duration::from_secs(10), async {
        while transcriber.holding.load(Ordering::SeqCst) < 2 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("both recordings reach the transcriber");

    // A third while both are held: refused before its body is read.
    let (request, pulled) = streamed(form_body("audio/wav", &audio), 512, None);
    let (status, body) = send(&app, request).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::TOO_MANY_REQUESTS, Some("too_many_transcriptions")),
        "{body}"
    );
    assert_eq!(pulled.load(Ordering::SeqCst), 0);
    assert_eq!(transcriber.holding.load(Ordering::SeqCst), 2);

    // The two end; their slots are free again.
    transcriber.gate.add_permits(3);
    for answer in in_flight {
        assert_eq!(answer.await.unwrap().unwrap().status(), StatusCode::OK);
    }
    let (status, body) = send(&app, form("audio/wav", &audio)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["text"], format!("{} bytes", audio.len()));
}
