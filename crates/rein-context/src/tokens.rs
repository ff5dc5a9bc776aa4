//! Token counting: tiktoken encoders built once on first use, and a documented estimate.

use std::sync::OnceLock;

use rein_protocol::{Content, ContentPart, Message, ModelInfo, ToolSpec};
use tiktoken_rs::CoreBPE;

/// Tokens added for each message on top of its text (role, separators), as OpenAI's chat
/// format spends them.
pub(crate) const MESSAGE_OVERHEAD: u64 = 4;
/// Tokens added for each tool call on top of its name and arguments (id, type, wrappers).
pub(crate) const CALL_OVERHEAD: u64 = 8;
/// Tokens added for each offered tool on top of its name, description and schema.
pub(crate) const TOOL_SPEC_OVERHEAD: u64 = 8;
/// Tokens counted for an image part, whatever its size (a high-detail 1024 px image costs
/// OpenAI 765; other providers are in the same range).
pub(crate) const IMAGE_TOKENS: u64 = 1_000;
/// The estimate for unknown tokenizers: one token per this many UTF-8 bytes, times ten.
/// 3.5 bytes per token is a little denser than OpenAI's (about 4 for English), which keeps
/// the estimate on the safe side for Anthropic's and Gemini's tokenizers.
const ESTIMATE_BYTES_PER_TOKEN_X10: u64 = 35;

/// Which tokenizer counts a model's tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Tokenizer {
    /// OpenAI's `o200k_base` (GPT-4o, GPT-4.1, GPT-5, o-series); the default.
    #[default]
    O200kBase,
    /// OpenAI's `cl100k_base` (GPT-4, GPT-3.5).
    Cl100kBase,
    /// No public tokenizer (Anthropic, Gemini): `ceil(utf8_bytes / 3.5)` per text, corrected
    /// by the provider's reported usage (see [`crate::ContextBudget::record_usage`]).
    Estimate,
}

impl Tokenizer {
    /// The tokenizer for a tokenizer family name (`o200k_base`, `cl100k_base`, `estimate`);
    /// `None` for other names.
    pub fn from_name(name: &str) -> Option<Tokenizer> {
        match name.trim().to_ascii_lowercase().as_str() {
            "o200k_base" | "o200k_harmony" | "o200k" => Some(Tokenizer::O200kBase),
            "cl100k_base" | "cl100k" => Some(Tokenizer::Cl100kBase),
            "estimate" => Some(Tokenizer::Estimate),
            _ => None,
        }
    }

    /// The tokenizer for a model: its `tokenizer` field when set (an unknown family gives the
    /// estimate), else by name: OpenAI model names map as tiktoken maps them, names with
    /// `claude` or `gemini` get the estimate, and everything else `o200k_base`.
    pub fn for_model(model: &ModelInfo) -> Tokenizer {
        if let Some(name) = model.tokenizer.as_deref() {
            return Tokenizer::from_name(name).unwrap_or(Tokenizer::Estimate);
        }
        let name = model.name.trim().to_ascii_lowercase();
        if name.contains("claude") || name.contains("gemini") || name.contains("anthropic") {
            return Tokenizer::Estimate;
        }
        let base = name.rsplit('/').next().unwrap_or(&name);
        match tiktoken_rs::tokenizer::get_tokenizer(base) {
            Some(tiktoken_rs::tokenizer::Tokenizer::Cl100kBase) => Tokenizer::Cl100kBase,
            _ => Tokenizer::O200kBase,
        }
    }

    /// The number of tokens in `text` (special-token text counts as ordinary text).
    pub fn count(self, text: &str) -> u64 {
        if text.is_empty() {
            return 0;
        }
        match self.encoder() {
            Some(bpe) => bpe.encode_ordinary(text).len() as u64,
            None => estimate(text),
        }
    }

    /// Builds the encoder now, so that the first count does not wait for it (about half a
    /// second): for a host to call at start, on a thread of its own, before requests come.
    pub fn prepare(self) {
        let _ = self.encoder();
    }

    /// The encoder, built on first use (about half a second each); `None` for the estimate,
    /// or if the bundled vocabulary failed to load (then the estimate is used).
    fn encoder(self) -> Option<&'static CoreBPE> {
        static O200K: OnceLock<Option<CoreBPE>> = OnceLock::new();
        static CL100K: OnceLock<Option<CoreBPE>> = OnceLock::new();
        match self {
            Tokenizer::O200kBase => O200K.get_or_init(|| tiktoken_rs::o200k_base().ok()).as_ref(),
            Tokenizer::Cl100kBase => {
                CL100K.get_or_init(|| tiktoken_rs::cl100k_base().ok()).as_ref()
            }
            Tokenizer::Estimate => None,
        }
    }

    /// Tokens of a message as sent: overhead, text, images, tool calls. Reasoning is not
    /// counted (it is not sent back as text).
    pub fn count_message(self, message: &Message) -> u64 {
        MESSAGE_OVERHEAD
            + match message {
                Message::System { content } | Message::User { content } => {
                    self.count_content(content)
                }
                Message::Tool { content, tool_call_id, .. } => {
                    self.count_content(content) + self.count(tool_call_id)
                }
                Message::Assistant { content, tool_calls, .. } => {
                    content.as_ref().map_or(0, |content| self.count_content(content))
                        + tool_calls
                            .iter()
                            .map(|call| {
                                CALL_OVERHEAD
                                    + self.count(&call.name)
                                    + self.count(&call.arguments_json())
                            })
                            .sum::<u64>()
                }
                _ => self.count(&message.text()),
            }
    }

    /// Tokens of message content: its text parts plus a fixed count per image.
    pub fn count_content(self, content: &Content) -> u64 {
        match content {
            Content::Text(text) => self.count(text),
            Content::Parts(parts) => parts
                .iter()
                .map(|part| match part {
                    ContentPart::Text { text } => self.count(text),
                    _ => IMAGE_TOKENS,
                })
                .sum(),
        }
    }

    /// Tokens of the offered tools: name, description and input schema of each.
    pub fn count_tools(self, tools: &[ToolSpec]) -> u64 {
        tools
            .iter()
            .map(|tool| {
                TOOL_SPEC_OVERHEAD
                    + self.count(&tool.name)
                    + self.count(&tool.description)
                    + self.count(&serde_json::Value::Object(tool.input_schema.clone()).to_string())
            })
            .sum()
    }
}

/// The documented estimate: `ceil(utf8_bytes / 3.5)`.
fn estimate(text: &str) -> u64 {
    (text.len() as u64 * 10).div_ceil(ESTIMATE_BYTES_PER_TOKEN_X10)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimate_rounds_up() {
        assert_eq!(estimate("abcdefg"), 2);
        assert_eq!(estimate("abcdefgh"), 3);
        assert_eq!(Tokenizer::Estimate.count(""), 0);
    }

    #[test]
    fn tiktoken_counts_known_text() {
        // "hello world" is two tokens in both OpenAI vocabularies.
        assert_eq!(Tokenizer::O200kBase.count("hello world"), 2);
        assert_eq!(Tokenizer::Cl100kBase.count("hello world"), 2);
    }
}
