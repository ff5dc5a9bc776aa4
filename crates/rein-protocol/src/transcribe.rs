//! `Transcriber`: speech to text, the port behind voice input (GLEN's `transcription_model`).
//! The model crate implements it over an OpenAI-compatible `/v1/audio/transcriptions`; the
//! server's `POST /agent/api/runtime/transcriptions` calls it.

use async_trait::async_trait;

/// A recording to transcribe.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Audio {
    /// The encoded audio (WAV, WebM/Opus, Ogg, MP3, …).
    pub bytes: Vec<u8>,
    /// Its media type (`audio/webm`, `audio/wav`, …).
    pub media_type: String,
    /// A file name with an extension that names the format (`speech.webm`); providers read it.
    pub file_name: String,
}

impl Audio {
    /// A recording of `media_type` named `file_name`.
    pub fn new(
        bytes: Vec<u8>,
        media_type: impl Into<String>,
        file_name: impl Into<String>,
    ) -> Self {
        Audio { bytes, media_type: media_type.into(), file_name: file_name.into() }
    }
}

/// Why a transcription failed (its message is already scrubbed of credentials).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
#[non_exhaustive]
pub struct TranscriptionError {
    /// What went wrong, for a person.
    pub message: String,
}

impl TranscriptionError {
    /// An error saying `message`.
    pub fn new(message: impl Into<String>) -> Self {
        TranscriptionError { message: message.into() }
    }
}

/// Turns speech into text.
#[async_trait]
pub trait Transcriber: Send + Sync {
    /// The name of the model it uses (for logs and `GET /models`).
    fn model(&self) -> &str;

    /// The text spoken in `audio`.
    async fn transcribe(&self, audio: Audio) -> Result<String, TranscriptionError>;
}
