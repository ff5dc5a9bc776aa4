//! `POST /transcriptions`: a recording to text by the host's transcriber, with its memory
//! bounded per upload and across uploads.
//!
//! In order, for each request:
//! 1. Refusals that need no body: no transcriber (`503`), not `multipart/form-data` (`415`), a
//!    `Content-Length` above `max_audio_bytes` (`413`).
//! 2. A slot: at most `max_concurrent_transcriptions` recordings are held at once; without a
//!    free slot the answer is `429 too_many_transcriptions`, before the body is read. The slot
//!    is held until the model has answered.
//! 3. The body, piece by piece as it arrives, through the streaming form reader: the `file`
//!    part goes into one buffer (made the announced length at once, so it is never copied to
//!    grow), every other part is dropped. Reading stops with `413` as soon as the body passes
//!    `max_audio_bytes`, and with `415` as soon as the file's header says it is not audio.
//! 4. That buffer is handed to the transcriber as it is (no copy).

use std::sync::Arc;

use axum::{
    extract::Request,
    http::{StatusCode, header},
};
use futures::StreamExt as _;
use rein_protocol::{Audio, Transcriber};
use tokio::sync::Semaphore;

use crate::{
    api::TranscriptionResult,
    config::ServerConfig,
    error::ApiError,
    multipart::{FileHead, FormReader},
};

/// The transcriber, its limits and its slots, shared by every request.
pub(crate) struct Transcriptions {
    transcriber: Option<Arc<dyn Transcriber>>,
    max_audio_bytes: usize,
    /// One permit per recording that may be held at once; `None` for no limit.
    slots: Option<Arc<Semaphore>>,
}

impl Transcriptions {
    pub(crate) fn new(config: &ServerConfig) -> Self {
        Transcriptions {
            transcriber: config.transcription.0.clone(),
            max_audio_bytes: config.max_audio_bytes,
            slots: config.max_concurrent_transcriptions.map(|n| Arc::new(Semaphore::new(n))),
        }
    }

    /// The text spoken in the recording `request` carries (see the module doc).
    pub(crate) async fn transcribe(
        &self,
        request: Request,
    ) -> Result<TranscriptionResult, ApiError> {
        let Some(transcriber) = &self.transcriber else {
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "hosted_transcription_not_configured",
                "This server has no transcription model (`transcription_model`).",
            ));
        };
        let headers = request.headers();
        let content_type =
            headers.get(header::CONTENT_TYPE).and_then(|value| value.to_str().ok()).unwrap_or("");
        let Some(boundary) = crate::multipart::boundary(content_type) else {
            return Err(unsupported(
                "Send the recording as `multipart/form-data` with a `file` part.",
            ));
        };
        let announced = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.trim().parse::<u64>().ok());
        if announced.is_some_and(|length| length > self.max_audio_bytes as u64) {
            return Err(self.too_large());
        }
        let _slot = match &self.slots {
            Some(slots) => Some(Arc::clone(slots).try_acquire_owned().map_err(|_| busy())?),
            None => None,
        };
        let announced = announced.and_then(|length| usize::try_from(length).ok());
        let upload = self.read(request, &boundary, announced).await?;
        if upload.bytes.is_empty() {
            return Err(ApiError::validation("The recording is empty.").with_details(file_field()));
        }
        let media_type = audio_type(&upload.head).ok_or_else(not_audio)?;
        let file_name = upload.head.file_name.unwrap_or_else(|| "speech.webm".to_owned());
        let audio = Audio::new(upload.bytes, media_type, file_name);
        match transcriber.transcribe(audio).await {
            Ok(text) => Ok(TranscriptionResult { text: text.trim().to_owned() }),
            Err(error) => Err(ApiError::new(
                StatusCode::BAD_GATEWAY,
                "hosted_transcription_failed",
                format!("The transcription model failed: {error}"),
            )),
        }
    }

    /// Reads the body through the form reader, refusing it as soon as it is too large or its
    /// file is not audio.
    async fn read(
        &self,
        request: Request,
        boundary: &str,
        announced: Option<usize>,
    ) -> Result<crate::multipart::Upload, ApiError> {
        let mut reader = FormReader::new(boundary, announced);
        let mut received = 0usize;
        let mut pieces = request.into_body().into_data_stream();
        while let Some(piece) = pieces.next().await {
            let piece = piece.map_err(|error| {
                ApiError::bad_request(format!("The body could not be read: {error}"))
            })?;
            received = received.saturating_add(piece.len());
            if received > self.max_audio_bytes {
                return Err(self.too_large());
            }
            reader.feed(&piece).map_err(malformed)?;
            if reader.file_head().is_some_and(|head| audio_type(head).is_none()) {
                return Err(not_audio());
            }
        }
        reader.finish().map_err(malformed)?.ok_or_else(|| {
            ApiError::validation("The form has no `file` part.").with_details(file_field())
        })
    }

    fn too_large(&self) -> ApiError {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!(
                "The recording is larger than {} bytes, the most this server accepts.",
                self.max_audio_bytes
            ),
        )
    }
}

/// The file's media type when it is audio (`audio/*`, or `video/webm`, which some browsers
/// name their recordings), lowercased and without parameters.
fn audio_type(head: &FileHead) -> Option<String> {
    let media = head.content_type.as_deref().unwrap_or_default();
    let media_type = media.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    (media_type.starts_with("audio/") || media_type == "video/webm").then_some(media_type)
}

fn unsupported(message: &str) -> ApiError {
    ApiError::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type", message.to_owned())
}

fn not_audio() -> ApiError {
    unsupported(
        "The `file` part must be audio (`audio/webm`, `audio/wav`, `audio/ogg`, `audio/mpeg`, …).",
    )
}

fn malformed(error: crate::multipart::FormError) -> ApiError {
    ApiError::bad_request(format!("The body is not a well-formed multipart form: {error}."))
}

fn busy() -> ApiError {
    ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        "too_many_transcriptions",
        "This server is transcribing as many recordings as it takes at once \
         (`server.max_concurrent_transcriptions`); try again shortly.",
    )
}

fn file_field() -> serde_json::Value {
    serde_json::json!({ "field": "file" })
}
