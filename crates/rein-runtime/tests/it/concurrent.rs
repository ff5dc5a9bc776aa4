//! Concurrent sessions: turns of different sessions run at once without mixing their
//! transcripts, and each stays well-formed.

use std::sync::Arc;

use async_trait::async_trait;
use rein_protocol::{
    DeltaSink, Message, Model, ModelError, ModelInfo, ModelReply, ModelRequest, RawToolCall,
    StopReason,
};
use rein_runtime::{CreateSession, Runtime, RuntimeParts, StaticModels};
use rein_store::{
    Durability, JsonlTranscriptStore, SqliteConfig, SqliteSessionStore, TranscriptConfig,
};
use std::sync::Mutex;

use crate::support::{capabilities, default_config};

/// Calls `lookup` with the user's text once, then echoes it, yielding in between.
struct Echo {
    info: ModelInfo,
}

#[async_trait]
impl Model for Echo {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        _deltas: DeltaSink<'_>,
    ) -> Result<ModelReply, ModelError> {
        tokio::task::yield_now().await;
        let last_user = request
            .messages
            .iter()
            .rev()
            .find(|m| matches!(m, Message::User { .. }))
            .map(Message::text)
            .unwrap_or_default();
        let mut reply = ModelReply::default();
        if matches!(request.messages.last(), Some(Message::User { .. })) {
            reply.tool_calls = vec![RawToolCall::new(
                format!("call-{last_user}"),
                "lookup",
                serde_json::json!({"symbol": last_user}).to_string(),
            )];
            reply.stop_reason = StopReason::ToolCalls;
        } else {
            reply.content = format!("echo {last_user}");
        }
        Ok(reply)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_sessions_keep_their_own_transcripts() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(
        SqliteSessionStore::open(&SqliteConfig::at(dir.path().join("db.sqlite3"))).unwrap(),
    );
    let mut tc = TranscriptConfig::at(dir.path().join("t"));
    tc.durability = Durability::OsBuffered;
    let transcripts = Arc::new(JsonlTranscriptStore::open(&tc).unwrap());
    let models =
        StaticModels::new().with("echo", Arc::new(Echo { info: ModelInfo::named("echo") }));
    let calls = Arc::new(Mutex::new(Vec::new()));
    let rt = Runtime::new(
        RuntimeParts::new(store, transcripts, Arc::new(models))
            .config(default_config())
            .capabilities(capabilities(&calls)),
    )
    .unwrap();
    let sessions = 8;
    let turns = 5;
    for s in 0..sessions {
        rt.create_session(CreateSession::agent("assistant").id(format!("s{s}"))).await.unwrap();
    }
    let mut handles = Vec::new();
    for s in 0..sessions {
        let rt = rt.clone();
        handles.push(tokio::spawn(async move {
            for t in 0..turns {
                let text = format!("s{s}t{t}");
                let report = rt.send_message(&format!("s{s}"), &text, None).await.unwrap();
                assert_eq!(report.final_message, format!("echo {text}"));
            }
        }));
    }
    for handle in handles {
        handle.await.unwrap();
    }
    for s in 0..sessions {
        let view = rt.session(&format!("s{s}")).await.unwrap();
        rein_testkit::check_well_formed(&view.messages).unwrap();
        assert_eq!(view.messages.len(), turns * 4);
        for message in &view.messages {
            let text = message.text();
            assert!(
                text.is_empty() || text.contains(&format!("s{s}t")),
                "session s{s} holds {text}"
            );
        }
        let events = rt.replay(&format!("s{s}"), None).unwrap();
        assert!(events.windows(2).all(|w| w[0].id < w[1].id));
    }
    assert_eq!(calls.lock().unwrap().len(), sessions * turns);
}
