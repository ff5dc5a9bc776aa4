//! Conversation messages in the OpenAI Chat Completions shape.

use std::borrow::Cow;

use serde::{Deserialize, Deserializer, Serialize, Serializer, de, ser::SerializeStruct};

use crate::{Arguments, ArgumentsError};

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions from the application.
    System,
    /// The person (or program) talking to the agent.
    User,
    /// The model.
    Assistant,
    /// The result of a tool call.
    Tool,
}

/// One message of a conversation.
///
/// Serializes as the OpenAI wire message: `{"role": "...", "content": ..., ...}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
#[non_exhaustive]
pub enum Message {
    /// A system prompt.
    System {
        /// The instructions.
        content: Content,
    },
    /// A user message.
    User {
        /// What the user said.
        content: Content,
    },
    /// A model reply: text, reasoning and tool calls.
    Assistant {
        /// The visible text, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<Content>,
        /// Reasoning the model reported apart from its text. Kept for display and storage;
        /// providers decide whether it is ever sent back.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reasoning_content: Option<String>,
        /// Tool calls the model made.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
        /// What the provider needs back with this message in later requests (Anthropic's
        /// thinking blocks with their signatures, Gemini's thought signatures by call id),
        /// opaque to everyone else: kept and stored with the message, sent back only by the
        /// provider that wrote it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider_data: Option<serde_json::Value>,
    },
    /// The result of one tool call.
    Tool {
        /// The id of the call this answers.
        tool_call_id: String,
        /// The result as the model will read it.
        content: Content,
        /// Whether the tool reported a failure. Not part of the OpenAI wire format; providers
        /// that know the notion (Anthropic's `is_error`) send it.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
}

impl Message {
    /// A system message with plain text.
    pub fn system(text: impl Into<String>) -> Self {
        Message::System { content: Content::Text(text.into()) }
    }

    /// A user message with plain text.
    pub fn user(text: impl Into<String>) -> Self {
        Message::User { content: Content::Text(text.into()) }
    }

    /// An assistant message with plain text and no calls.
    pub fn assistant(text: impl Into<String>) -> Self {
        Message::Assistant {
            content: Some(Content::Text(text.into())),
            reasoning_content: None,
            tool_calls: Vec::new(),
            provider_data: None,
        }
    }

    /// An assistant message that makes tool calls, with optional text beside them.
    pub fn assistant_calls(text: Option<String>, tool_calls: Vec<ToolCall>) -> Self {
        Message::Assistant {
            content: text.map(Content::Text),
            reasoning_content: None,
            tool_calls,
            provider_data: None,
        }
    }

    /// The same message carrying `data` as its provider data (an assistant message; any other
    /// is returned as it is).
    pub fn with_provider_data(mut self, data: Option<serde_json::Value>) -> Self {
        if let Message::Assistant { provider_data, .. } = &mut self {
            *provider_data = data;
        }
        self
    }

    /// The provider data of an assistant message (see [`Message::Assistant`]).
    pub fn provider_data(&self) -> Option<&serde_json::Value> {
        match self {
            Message::Assistant { provider_data, .. } => provider_data.as_ref(),
            _ => None,
        }
    }

    /// A tool result.
    pub fn tool(tool_call_id: impl Into<String>, text: impl Into<String>, is_error: bool) -> Self {
        Message::Tool {
            tool_call_id: tool_call_id.into(),
            content: Content::Text(text.into()),
            is_error,
        }
    }

    /// The role of this message.
    pub fn role(&self) -> Role {
        match self {
            Message::System { .. } => Role::System,
            Message::User { .. } => Role::User,
            Message::Assistant { .. } => Role::Assistant,
            Message::Tool { .. } => Role::Tool,
        }
    }

    /// The text of this message: text parts joined, empty when there is none.
    pub fn text(&self) -> String {
        match self {
            Message::System { content } | Message::User { content } => content.text(),
            Message::Tool { content, .. } => content.text(),
            Message::Assistant { content, .. } => {
                content.as_ref().map(Content::text).unwrap_or_default()
            }
        }
    }

    /// The tool calls of an assistant message; empty for every other role.
    pub fn tool_calls(&self) -> &[ToolCall] {
        match self {
            Message::Assistant { tool_calls, .. } => tool_calls,
            _ => &[],
        }
    }
}

/// Message content: a plain string, or a list of typed parts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Content {
    /// Plain text (the common case; serializes as a JSON string).
    Text(String),
    /// Typed parts (serializes as a JSON array).
    Parts(Vec<ContentPart>),
}

impl Content {
    /// The text parts joined without separator.
    pub fn text(&self) -> String {
        match self {
            Content::Text(text) => text.clone(),
            Content::Parts(parts) => parts
                .iter()
                .filter_map(|part| match part {
                    ContentPart::Text { text } => Some(text.as_str()),
                    ContentPart::ImageUrl { .. } => None,
                })
                .collect(),
        }
    }

    /// Whether the content holds no text and no other part.
    pub fn is_empty(&self) -> bool {
        match self {
            Content::Text(text) => text.is_empty(),
            Content::Parts(parts) => parts.is_empty(),
        }
    }
}

impl From<String> for Content {
    fn from(text: String) -> Self {
        Content::Text(text)
    }
}

impl From<&str> for Content {
    fn from(text: &str) -> Self {
        Content::Text(text.to_owned())
    }
}

/// One typed part of message content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ContentPart {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// An image by URL (an `https:` or `data:` URL).
    ImageUrl {
        /// The image reference.
        image_url: ImageUrl,
    },
}

/// An image reference in the OpenAI shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImageUrl {
    /// The URL.
    pub url: String,
    /// Optional detail hint (`low`, `high`, `auto`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// A tool call the model made.
///
/// The arguments are always a JSON object inside rein. On the wire they are a JSON *string*
/// (`{"id", "type": "function", "function": {"name", "arguments": "<json>"}}`); deserializing
/// accepts either a string holding a JSON object or an object. Arguments that are not a valid
/// JSON object must be repaired (see `rein-recover`) before a `ToolCall` is built.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The provider's id for this call (or a fresh one for a recovered call).
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments (kept as their JSON text until read: see [`Arguments`]).
    pub arguments: Arguments,
}

impl ToolCall {
    /// A call with the given id, name and arguments (an [`Arguments`] or a [`JsonObject`]).
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<Arguments>,
    ) -> Self {
        ToolCall { id: id.into(), name: name.into(), arguments: arguments.into() }
    }

    /// The arguments as compact JSON text, the form providers send.
    pub fn arguments_json(&self) -> Cow<'_, str> {
        self.arguments.as_json()
    }
}

impl Serialize for ToolCall {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        struct Function<'a>(&'a ToolCall);
        impl Serialize for Function<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let mut function = serializer.serialize_struct("Function", 2)?;
                function.serialize_field("name", &self.0.name)?;
                function.serialize_field("arguments", &self.0.arguments_json())?;
                function.end()
            }
        }
        let mut call = serializer.serialize_struct("ToolCall", 3)?;
        call.serialize_field("id", &self.id)?;
        call.serialize_field("type", "function")?;
        call.serialize_field("function", &Function(self))?;
        call.end()
    }
}

impl<'de> Deserialize<'de> for ToolCall {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Wire {
            id: String,
            function: WireFunction,
        }
        #[derive(Deserialize)]
        struct WireFunction {
            name: String,
            #[serde(default)]
            arguments: Option<serde_json::Value>,
        }
        let wire = Wire::deserialize(deserializer)?;
        let arguments = match wire.function.arguments {
            None | Some(serde_json::Value::Null) => Arguments::new(),
            Some(serde_json::Value::Object(map)) => Arguments::from(map),
            Some(serde_json::Value::String(text)) if text.trim().is_empty() => Arguments::new(),
            Some(serde_json::Value::String(text)) => match Arguments::from_json(&text) {
                Ok(arguments) => arguments,
                Err(ArgumentsError::NotObject(_)) => {
                    return Err(de::Error::custom(format!(
                        "arguments of tool call {} are not a JSON object",
                        wire.id
                    )));
                }
                Err(ArgumentsError::NotJson(error)) => {
                    return Err(de::Error::custom(format!(
                        "arguments of tool call {} are not valid JSON: {error}",
                        wire.id
                    )));
                }
            },
            Some(_) => {
                return Err(de::Error::custom(format!(
                    "arguments of tool call {} are neither a string nor an object",
                    wire.id
                )));
            }
        };
        Ok(ToolCall { id: wire.id, name: wire.function.name, arguments })
    }
}
