//! Entry points for the fuzz targets in `fuzz/` (thin wrappers call these).

use rein_protocol::ReplyDelta;

use crate::config::ProviderKind;
use crate::provider::new_assembler;
pub use crate::sse::{SseDecoder, SseEvent};

/// Decodes `data` as an SSE stream cut into pieces at arbitrary points (the first byte picks
/// the piece length) and runs every provider's stream assembler over the events.
///
/// It must never panic: any outcome, reply or typed error, is fine. It also checks that the
/// split does not change the events.
pub fn sse_decoder(data: &[u8]) {
    let Some((&split, stream)) = data.split_first() else { return };
    let piece = usize::from(split % 17) + 1;
    let whole = decode_pieces(&[stream]);
    let pieces: Vec<&[u8]> = stream.chunks(piece).collect();
    let split_events = decode_pieces(&pieces);
    assert_eq!(whole, split_events, "splitting the stream changed the events");
    for kind in [ProviderKind::OpenAi, ProviderKind::Anthropic, ProviderKind::Gemini] {
        let mut assembler = new_assembler(kind);
        let sink = |_: ReplyDelta| {};
        for event in &whole {
            match assembler.event(event, &sink) {
                Ok(true) | Err(_) => break,
                Ok(false) => {}
            }
        }
        let _ = assembler.finish();
    }
}

fn decode_pieces(pieces: &[&[u8]]) -> Vec<SseEvent> {
    let mut decoder = SseDecoder::new();
    let mut events = Vec::new();
    for piece in pieces {
        decoder.feed(piece, &mut events);
    }
    decoder.finish(&mut events);
    events
}

/// Decodes a whole SSE body with one provider's assembler, as the streaming path does; for
/// benchmarks and tests. Returns the number of events and whether a reply came out.
pub fn decode_stream(kind: ProviderKind, body: &[u8]) -> (usize, bool) {
    let mut decoder = SseDecoder::new();
    let mut events = Vec::new();
    decoder.feed(body, &mut events);
    decoder.finish(&mut events);
    let mut assembler = new_assembler(kind);
    let sink = |_: ReplyDelta| {};
    let count = events.len();
    for event in &events {
        match assembler.event(event, &sink) {
            Ok(true) => break,
            Ok(false) => {}
            Err(_) => return (count, false),
        }
    }
    (count, assembler.finish().is_ok())
}
