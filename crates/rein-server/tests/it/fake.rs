//! An in-memory `Backend` for router tests: owners, an in-flight lock, events with replay.
//!
//! A message whose text is `block` starts a turn that runs until the session is interrupted,
//! so tests can see the 409 and the stop; any other text is answered at once with a tool call
//! (`lookup`), its result, and the text `You said: <text>` streamed in two deltas. A message
//! `approve me` also requests an approval and creates a task.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
};

use async_trait::async_trait;
use futures::StreamExt as _;
use rein_protocol::{AgentEvent, Message, ToolCall, ToolOutput, TurnEnding, Usage};
use rein_server::{
    Agent, AgentTool, Approval, Backend, BackendError, CreateSession, DeletedSession, EventStream,
    Interrupted, ModelEntry, ModelList, PendingCheckpoint, Principal, RunResponse, SendMessage,
    Session, SessionEvent, SessionList, SessionPage, SessionSettings, SessionSummary, Task,
    ToolResultEntry, ViewContext, ViewContextInput,
};
use tokio::sync::{Notify, broadcast};

#[derive(Default)]
struct FakeSession {
    owner: String,
    agent: String,
    model: Option<String>,
    settings: BTreeMap<String, serde_json::Value>,
    messages: Vec<Message>,
    events: Vec<SessionEvent>,
    in_flight: bool,
    checkpoint: Option<String>,
    view_context_id: Option<String>,
}

#[derive(Default)]
struct Inner {
    sessions: BTreeMap<String, FakeSession>,
    tasks: BTreeMap<String, Task>,
    approvals: BTreeMap<String, Approval>,
    views: BTreeMap<(String, String), ViewContext>,
    channels: BTreeMap<String, broadcast::Sender<SessionEvent>>,
    next: u64,
}

/// The fake runtime.
#[derive(Default, Clone)]
pub(crate) struct Fake {
    inner: Arc<Mutex<Inner>>,
    stop: Arc<Notify>,
    /// Fires once a blocking turn has started.
    pub started: Arc<Notify>,
}

const NOW: &str = "2026-01-01T00:00:00.000Z";

impl Fake {
    fn emit(&self, session_id: &str, event: AgentEvent) {
        let mut inner = self.inner.lock().unwrap();
        let Some(session) = inner.sessions.get_mut(session_id) else { return };
        let event = SessionEvent { id: session.events.len() as u64 + 1, event };
        session.events.push(event.clone());
        if let Some(sender) = inner.channels.get(session_id) {
            let _ = sender.send(event);
        }
    }

    fn owned<'a>(
        inner: &'a mut Inner,
        owner: &Principal,
        id: &str,
    ) -> Result<&'a mut FakeSession, BackendError> {
        match inner.sessions.get_mut(id) {
            Some(session) if session.owner == owner.as_str() => Ok(session),
            _ => Err(BackendError::SessionNotFound(id.to_owned())),
        }
    }

    fn view(inner: &mut Inner, owner: &Principal, id: &str) -> Result<Session, BackendError> {
        let tasks: Vec<Task> =
            inner.tasks.values().filter(|t| t.session_id == id).cloned().collect();
        let approvals: Vec<Approval> =
            inner.approvals.values().filter(|a| a.session_id == id).cloned().collect();
        let session = Self::owned(inner, owner, id)?;
        let mut metadata = serde_json::Map::new();
        metadata.insert("turnInFlight".into(), session.in_flight.into());
        metadata.insert("turnUnfinished".into(), serde_json::Value::Null);
        if let Some(view) = &session.view_context_id {
            metadata.insert("viewContextId".into(), view.clone().into());
        }
        Ok(Session {
            session_id: id.to_owned(),
            agent_name: session.agent.clone(),
            created_at: NOW.into(),
            updated_at: NOW.into(),
            metadata,
            runtime_model: session.model.clone(),
            policy: session.settings.clone().into_iter().collect(),
            checkpoint: session.checkpoint.clone().map(|summary| PendingCheckpoint { summary }),
            tasks,
            approvals,
            tools: vec![],
            messages: session.messages.clone(),
        })
    }

    fn next_id(&self, prefix: &str) -> String {
        let mut inner = self.inner.lock().unwrap();
        inner.next += 1;
        format!("{prefix}:{:04}", inner.next)
    }

    async fn run_turn(
        &self,
        owner: &Principal,
        id: &str,
        text: &str,
    ) -> Result<RunResponse, BackendError> {
        {
            let mut inner = self.inner.lock().unwrap();
            let session = Self::owned(&mut inner, owner, id)?;
            if session.in_flight {
                return Err(BackendError::TurnInFlight(id.to_owned()));
            }
            session.in_flight = true;
            session.messages.push(Message::user(text));
        }
        self.emit(id, AgentEvent::TurnStarted { text: text.to_owned() });
        let (ending, answer, results) = if text == "block" {
            self.emit(id, AgentEvent::TextDelta { text: "Working".into() });
            self.started.notify_one();
            self.stop.notified().await;
            (TurnEnding::Interrupted, "Stopped.".to_owned(), vec![])
        } else {
            let (tool, args, found, answer) = if text == "hello" {
                let answer = "**Hello** from the scripted model. It is sunny in Lisbon.".to_owned();
                ("weather", serde_json::json!({ "city": "Lisbon" }), "sunny, 24 °C", answer)
            } else {
                ("lookup", serde_json::json!({ "q": text }), "found", format!("You said: {text}"))
            };
            let call = ToolCall::new("call_1", tool, args.as_object().cloned().unwrap_or_default());
            self.emit(
                id,
                AgentEvent::ToolProposal { calls: vec![call.clone()], text: String::new() },
            );
            if text == "approve me" {
                let approval_id = self.next_id("approval");
                let task_id = self.next_id("task");
                let mut inner = self.inner.lock().unwrap();
                inner.approvals.insert(
                    approval_id.clone(),
                    Approval {
                        approval_id: approval_id.clone(),
                        session_id: id.to_owned(),
                        tool_name: tool.into(),
                        status: "pending".into(),
                        ..Approval::default()
                    },
                );
                inner.tasks.insert(
                    task_id.clone(),
                    Task {
                        task_id: task_id.clone(),
                        session_id: id.to_owned(),
                        capability_name: tool.into(),
                        status: "running".into(),
                        ..Task::default()
                    },
                );
                drop(inner);
                self.emit(id, AgentEvent::ApprovalRequested { approval_id, call: call.clone() });
            }
            let output = ToolOutput::text(found);
            self.emit(
                id,
                AgentEvent::ToolResult { call_id: "call_1".into(), name: tool.into(), output },
            );
            let (a, b) = answer.split_at(4);
            self.emit(id, AgentEvent::TextDelta { text: a.to_owned() });
            self.emit(id, AgentEvent::TextDelta { text: b.to_owned() });
            let result = ToolResultEntry {
                tool_name: tool.into(),
                call_id: "call_1".into(),
                payload: found.into(),
                is_error: false,
            };
            (TurnEnding::Answered, answer, vec![result])
        };
        self.emit(
            id,
            AgentEvent::TurnEnd { ending, text: answer.clone(), usage: Usage::default() },
        );
        let mut inner = self.inner.lock().unwrap();
        let session = Self::owned(&mut inner, owner, id)?;
        session.in_flight = false;
        session.messages.push(Message::assistant(answer.clone()));
        let agent_name = session.agent.clone();
        Ok(RunResponse {
            session_id: id.to_owned(),
            agent_name,
            steps: 1,
            final_message: answer.clone(),
            turn_ending: ending,
            messages_added: vec![Message::user(text), Message::assistant(answer)],
            tool_results: results,
            usage: Usage::default(),
            session: Self::view(&mut inner, owner, id)?,
        })
    }
}

#[async_trait]
impl Backend for Fake {
    async fn agents(&self) -> Result<Vec<Agent>, BackendError> {
        Ok(vec![Agent {
            name: "assistant".into(),
            description: "A test agent.".into(),
            runtime_model: Some("scripted".into()),
            runtime_configured: true,
            tools: vec![AgentTool { name: "lookup".into(), ..AgentTool::default() }],
            ..Agent::default()
        }])
    }

    async fn models(&self) -> Result<ModelList, BackendError> {
        Ok(ModelList {
            models: vec![ModelEntry { name: "scripted".into(), ..ModelEntry::default() }],
            default_model: Some("scripted".into()),
        })
    }

    async fn create_session(
        &self,
        owner: &Principal,
        request: CreateSession,
    ) -> Result<Session, BackendError> {
        if request.agent_name != "assistant" {
            return Err(BackendError::AgentNotFound(request.agent_name));
        }
        let id = match request.session_id {
            Some(id) => id,
            None => self.next_id("session"),
        };
        let mut inner = self.inner.lock().unwrap();
        if inner.sessions.contains_key(&id) {
            return Err(BackendError::SessionExists(id));
        }
        let view_context_id =
            request.metadata.get("viewContextId").and_then(|v| v.as_str()).map(str::to_owned);
        inner.sessions.insert(
            id.clone(),
            FakeSession {
                owner: owner.as_str().to_owned(),
                agent: request.agent_name,
                model: request.runtime_model.or(Some("scripted".into())),
                view_context_id,
                ..FakeSession::default()
            },
        );
        inner.channels.insert(id.clone(), broadcast::channel(256).0);
        Self::view(&mut inner, owner, &id)
    }

    async fn list_sessions(
        &self,
        owner: &Principal,
        page: SessionPage,
    ) -> Result<SessionList, BackendError> {
        let inner = self.inner.lock().unwrap();
        let sessions = inner
            .sessions
            .iter()
            .filter(|(_, s)| s.owner == owner.as_str())
            .take(page.limit)
            .map(|(id, s)| SessionSummary {
                session_id: id.clone(),
                agent_name: s.agent.clone(),
                message_count: s.messages.len() as u64,
                title: s.messages.first().map(|m| m.text().chars().take(72).collect()),
                ..SessionSummary::default()
            })
            .collect();
        Ok(SessionList { sessions, next_cursor: None })
    }

    async fn session_count(&self, owner: &Principal) -> Result<usize, BackendError> {
        let inner = self.inner.lock().unwrap();
        Ok(inner.sessions.values().filter(|s| s.owner == owner.as_str()).count())
    }

    async fn session(&self, owner: &Principal, id: &str) -> Result<Session, BackendError> {
        Self::view(&mut self.inner.lock().unwrap(), owner, id)
    }

    async fn update_session(
        &self,
        owner: &Principal,
        id: &str,
        settings: SessionSettings,
    ) -> Result<Session, BackendError> {
        let mut inner = self.inner.lock().unwrap();
        let session = Self::owned(&mut inner, owner, id)?;
        if let Some(model) = settings.runtime_model {
            if model != "scripted" {
                return Err(BackendError::ModelNotFound(model));
            }
            session.model = Some(model);
        }
        if let Some(auto) = settings.auto_approve {
            session.settings.insert("autoApprove".into(), auto.into());
        }
        if let Some(reasoning) = settings.reasoning {
            session.settings.insert("reasoning".into(), reasoning.into());
        }
        Self::view(&mut inner, owner, id)
    }

    async fn delete_session(
        &self,
        owner: &Principal,
        id: &str,
    ) -> Result<DeletedSession, BackendError> {
        let mut inner = self.inner.lock().unwrap();
        Self::owned(&mut inner, owner, id)?;
        if inner.tasks.values().any(|t| t.session_id == id && t.status == "running") {
            return Err(BackendError::ActiveTasks(id.to_owned()));
        }
        inner.sessions.remove(id);
        Ok(DeletedSession { session_id: id.to_owned(), deleted_at: NOW.into() })
    }

    async fn send_message(
        &self,
        owner: &Principal,
        id: &str,
        message: SendMessage,
    ) -> Result<RunResponse, BackendError> {
        if let Some(view) = &message.view_context_id {
            let mut inner = self.inner.lock().unwrap();
            Self::owned(&mut inner, owner, id)?.view_context_id = Some(view.clone());
        }
        self.run_turn(owner, id, &message.content).await
    }

    async fn continue_turn(
        &self,
        owner: &Principal,
        id: &str,
    ) -> Result<RunResponse, BackendError> {
        {
            let mut inner = self.inner.lock().unwrap();
            if Self::owned(&mut inner, owner, id)?.checkpoint.take().is_none() {
                return Err(BackendError::NoCheckpoint(id.to_owned()));
            }
        }
        self.run_turn(owner, id, "continue").await
    }

    async fn discard_checkpoint(
        &self,
        owner: &Principal,
        id: &str,
    ) -> Result<Session, BackendError> {
        let mut inner = self.inner.lock().unwrap();
        if Self::owned(&mut inner, owner, id)?.checkpoint.take().is_none() {
            return Err(BackendError::NoCheckpoint(id.to_owned()));
        }
        Self::view(&mut inner, owner, id)
    }

    async fn interrupt(&self, owner: &Principal, id: &str) -> Result<Interrupted, BackendError> {
        let in_flight = Self::owned(&mut self.inner.lock().unwrap(), owner, id)?.in_flight;
        if in_flight {
            self.stop.notify_one();
        }
        Ok(Interrupted {
            session_id: id.to_owned(),
            turn_in_flight: in_flight,
            requested_at: NOW.into(),
        })
    }

    async fn session_tasks(&self, owner: &Principal, id: &str) -> Result<Vec<Task>, BackendError> {
        Ok(self.session(owner, id).await?.tasks)
    }

    async fn session_approvals(
        &self,
        owner: &Principal,
        id: &str,
    ) -> Result<Vec<Approval>, BackendError> {
        Ok(self.session(owner, id).await?.approvals)
    }

    async fn task(&self, owner: &Principal, task_id: &str) -> Result<Task, BackendError> {
        let mut inner = self.inner.lock().unwrap();
        let task = inner
            .tasks
            .get(task_id)
            .cloned()
            .ok_or_else(|| BackendError::TaskNotFound(task_id.into()))?;
        Self::owned(&mut inner, owner, &task.session_id)
            .map_err(|_| BackendError::TaskNotFound(task_id.into()))?;
        Ok(task)
    }

    async fn cancel_task(&self, owner: &Principal, task_id: &str) -> Result<Task, BackendError> {
        self.task(owner, task_id).await?;
        let mut inner = self.inner.lock().unwrap();
        let task = inner
            .tasks
            .get_mut(task_id)
            .ok_or_else(|| BackendError::TaskNotFound(task_id.into()))?;
        if task.status == "running" || task.status == "pending" {
            task.status = "cancelled".into();
            task.error = Some("Task cancelled.".into());
        }
        Ok(task.clone())
    }

    async fn approval(
        &self,
        owner: &Principal,
        approval_id: &str,
    ) -> Result<Approval, BackendError> {
        let mut inner = self.inner.lock().unwrap();
        let approval = inner
            .approvals
            .get(approval_id)
            .cloned()
            .ok_or_else(|| BackendError::ApprovalNotFound(approval_id.into()))?;
        Self::owned(&mut inner, owner, &approval.session_id)
            .map_err(|_| BackendError::ApprovalNotFound(approval_id.into()))?;
        Ok(approval)
    }

    async fn decide_approval(
        &self,
        owner: &Principal,
        approval_id: &str,
        approve: bool,
        note: Option<String>,
    ) -> Result<Approval, BackendError> {
        self.approval(owner, approval_id).await?;
        let mut inner = self.inner.lock().unwrap();
        let approval = inner
            .approvals
            .get_mut(approval_id)
            .ok_or_else(|| BackendError::ApprovalNotFound(approval_id.into()))?;
        if approval.status != "pending" {
            return Err(BackendError::ApprovalResolved(approval_id.into()));
        }
        approval.status = if approve { "approved" } else { "denied" }.into();
        approval.decision_note = note;
        approval.resolved_at = Some(NOW.into());
        Ok(approval.clone())
    }

    async fn put_view_context(
        &self,
        owner: &Principal,
        id: &str,
        context: ViewContextInput,
    ) -> Result<ViewContext, BackendError> {
        let view = ViewContext {
            context_id: id.to_owned(),
            created_at: NOW.into(),
            updated_at: NOW.into(),
            route: context.route,
            page_type: context.page_type,
            title: context.title,
            summary: context.summary,
            selection: context.selection,
            entities: context.entities,
            metadata: context.metadata,
        };
        self.inner
            .lock()
            .unwrap()
            .views
            .insert((owner.as_str().to_owned(), id.to_owned()), view.clone());
        Ok(view)
    }

    async fn view_context(&self, owner: &Principal, id: &str) -> Result<ViewContext, BackendError> {
        self.inner
            .lock()
            .unwrap()
            .views
            .get(&(owner.as_str().to_owned(), id.to_owned()))
            .cloned()
            .ok_or_else(|| BackendError::ViewContextNotFound(id.to_owned()))
    }

    async fn events(
        &self,
        owner: &Principal,
        id: &str,
        after: Option<u64>,
    ) -> Result<EventStream, BackendError> {
        let mut inner = self.inner.lock().unwrap();
        let stored: Vec<SessionEvent> = Self::owned(&mut inner, owner, id)?
            .events
            .iter()
            .filter(|e| e.id > after.unwrap_or(0))
            .cloned()
            .collect();
        let last = stored.last().map(|e| e.id).or(after).unwrap_or(0);
        let receiver = inner
            .channels
            .get(id)
            .map(|s| s.subscribe())
            .ok_or_else(|| BackendError::SessionNotFound(id.into()))?;
        let live = tokio_stream_from(receiver).filter(move |e| std::future::ready(e.id > last));
        Ok(futures::stream::iter(stored).chain(live).boxed())
    }
}

fn tokio_stream_from(
    receiver: broadcast::Receiver<SessionEvent>,
) -> impl futures::Stream<Item = SessionEvent> {
    futures::stream::unfold(receiver, |mut receiver| async move {
        loop {
            match receiver.recv().await {
                Ok(event) => return Some((event, receiver)),
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    })
}

impl Fake {
    /// Puts a paused turn on a session.
    pub(crate) fn pause(&self, id: &str, summary: &str) {
        self.inner.lock().unwrap().sessions.get_mut(id).unwrap().checkpoint =
            Some(summary.to_owned());
    }
}
