//! The handle's session API: create, list, read, change settings, delete.

use rein_store::{NewSession, Session, SessionCursor, SessionFilter, SessionPatch};
use serde_json::json;

use crate::{
    error::{Result, RuntimeError, StoreResult as _},
    events::TurnLines,
    offer::{Offer, ViewLink},
    session_meta::SessionMeta,
    transcript::kind,
    types::{CreateSession, SessionSettings, SessionSummary, SessionView},
};

impl super::Runtime {
    /// Creates a session. The model is pinned now (the resolver's default when none is asked
    /// for) and only ever changed by [`Runtime::update_session`](super::Runtime::update_session).
    pub async fn create_session(&self, request: CreateSession) -> Result<SessionView> {
        let core = self.core();
        let agents = &core.config().agents;
        let agent_name = request.agent_name.clone().unwrap_or_else(|| agents[0].name.clone());
        let Some(definition) = agents.iter().find(|agent| agent.name == agent_name) else {
            return Err(RuntimeError::AgentNotFound(agent_name));
        };
        // The store's one rule, checked before anything is written (the store checks again).
        if let Some(id) = &request.session_id {
            rein_store::check_session_id(id).map_store_err()?;
        }
        let model = request
            .model
            .clone()
            .or_else(|| definition.model.clone())
            .or_else(|| core.models().default_model());
        if let Some(name) = &model
            && core.models().resolve(name).is_none()
        {
            return Err(RuntimeError::ModelNotFound(name.clone()));
        }
        let metadata = SessionMeta::new_session(
            request.metadata.clone(),
            &request.settings,
            request.system_prompt.as_deref(),
        );
        let new = NewSession {
            id: request.session_id.clone(),
            owner: request.owner.clone(),
            agent_id: definition.name.clone(),
            model: model.clone(),
            view_context_id: request.view_context_id.clone(),
            metadata,
            ..NewSession::default()
        };
        let session = core.store().create_session(new).map_store_err()?;
        core.events().bookkeeping(
            &session.id,
            kind::SESSION_HEADER,
            json!({"agentName": session.agent_id, "model": model}),
        )?;
        self.view(session, None, None).await
    }

    /// The public sessions, newest first; `owner` narrows to one principal's. Light: no
    /// transcript is read.
    pub async fn list_sessions(&self, owner: Option<&str>) -> Result<Vec<SessionSummary>> {
        let filter = SessionFilter { owner: owner.map(str::to_owned), ..SessionFilter::default() };
        let sessions = self.core().store().list_sessions(&filter).map_store_err()?;
        sessions.into_iter().filter(|s| !s.hidden).map(|session| self.summary(session)).collect()
    }

    /// One page of the public sessions, newest first: at most `limit` after `before` (from the
    /// start when `None`), and the cursor of the next page when there is one. `owner` narrows
    /// to one principal's. Light: no transcript is read.
    pub async fn list_sessions_page(
        &self,
        owner: Option<&str>,
        limit: usize,
        before: Option<SessionCursor>,
    ) -> Result<(Vec<SessionSummary>, Option<SessionCursor>)> {
        let filter = SessionFilter {
            owner: owner.map(str::to_owned),
            limit: Some(limit.saturating_add(1)),
            before,
            ..SessionFilter::default()
        };
        let mut sessions = self.core().store().list_sessions(&filter).map_store_err()?;
        let next = if sessions.len() > limit {
            sessions.truncate(limit);
            sessions.last().map(Session::cursor)
        } else {
            None
        };
        let summaries =
            sessions.into_iter().map(|session| self.summary(session)).collect::<Result<_>>()?;
        Ok((summaries, next))
    }

    /// How many public sessions `owner` has (every owner's when `None`).
    pub fn count_sessions(&self, owner: Option<&str>) -> Result<usize> {
        self.core().store().count_sessions(owner, false).map_store_err()
    }

    /// One public session's light record (no transcript is read).
    pub async fn session_summary(&self, id: &str) -> Result<SessionSummary> {
        let session = self.public_session(id)?;
        self.summary(session)
    }

    fn summary(&self, session: Session) -> Result<SessionSummary> {
        let core = self.core();
        let active = core.store().count_active_tasks(&session.id).map_store_err()?;
        let meta = SessionMeta::read(&session.metadata);
        Ok(SessionSummary {
            turn_in_flight: session.turn_live(core.now()),
            last_message_preview: meta.last_message_preview().map(str::to_owned),
            last_message_at: meta.last_message_at().map(str::to_owned),
            message_count: meta.message_count(),
            active_task_count: active as u64,
            id: session.id,
            owner: session.owner,
            agent_name: session.agent_id,
            model: session.model,
            title: session.title,
            created_at: session.created_at,
            updated_at: session.updated_at,
        })
    }

    /// One public session with its visible conversation and derived turn state.
    pub async fn session(&self, id: &str) -> Result<SessionView> {
        let session = self.public_session(id)?;
        self.view(session, None, None).await
    }

    /// The owner of a session, task's session or approval's session (for hosts that check
    /// ownership); `None` when it has none. Not found for hidden sessions.
    pub fn owner_of(&self, session_id: &str) -> Result<Option<String>> {
        Ok(self.public_session(session_id)?.owner)
    }

    /// A session as shown: its replayed conversation, its derived turn state, the checkpoint of
    /// a paused turn. Reads create no in-memory state. `known_end`: the transcript's last id
    /// when the caller knows it (it just wrote there), else the store is asked; `written`: the
    /// lines the caller's turn just appended, when it has them.
    pub(super) async fn view(
        &self,
        session: Session,
        known_end: Option<u64>,
        written: Option<&TurnLines>,
    ) -> Result<SessionView> {
        let core = self.core();
        let transcripts = core.transcripts().as_ref();
        let replayed = self.shared.replays.get(transcripts, &session.id, known_end, written)?;
        let in_flight = session.turn_live(core.now());
        let unfinished =
            if in_flight { None } else { replayed.unfinished.or(session.turn_unfinished) };
        // The paused turn in memory, else the one the transcript stored (after a restart).
        let checkpoint = match self.shared.live.peek(&session.id) {
            Some(live) => match live.try_lock() {
                Ok(live) if live.agent.is_some() => live.checkpoint_summary(),
                _ => replayed.checkpoint.clone(),
            },
            None => replayed.checkpoint.clone(),
        };
        let definition = core.definition(&session.agent_id).unwrap_or_default();
        let is_child = session.parent_id.is_some();
        Ok(SessionView {
            settings: core.settings(&session),
            tools: Offer::new(core, &definition, is_child, ViewLink::of(core, &session)).specs(),
            own_system_prompt: SessionMeta::read(&session.metadata)
                .system_prompt()
                .map(str::to_owned),
            messages: replayed.messages(),
            message_times: replayed.message_times(),
            metadata: SessionMeta::view_metadata(&session.metadata, in_flight, unfinished),
            id: session.id,
            owner: session.owner,
            agent_name: session.agent_id,
            model: session.model,
            title: session.title,
            parent_id: session.parent_id,
            created_at: session.created_at,
            updated_at: session.updated_at,
            turn_in_flight: in_flight,
            turn_unfinished: unfinished,
            view_context_id: session.view_context_id,
            checkpoint,
        })
    }

    /// Whether a new session of `agent_name` (the first agent when `None`) made with
    /// `settings` and client `metadata` (TerraFin's `requireHumanApprovalFor…` keys), or a
    /// change of a session of that agent to `settings`, would need fewer approvals than the
    /// agent's configured policy requires. Hosts that let clients change settings but not lower
    /// the operator's approvals refuse what this calls lowering; raising is never lowering.
    pub fn lowers_approvals(
        &self,
        agent_name: Option<&str>,
        settings: &SessionSettings,
        metadata: &rein_protocol::JsonObject,
    ) -> Result<bool> {
        let core = self.core();
        let agents = &core.config().agents;
        let name = agent_name.unwrap_or_else(|| agents[0].name.as_str());
        let definition =
            core.definition(name).ok_or_else(|| RuntimeError::AgentNotFound(name.to_owned()))?;
        Ok(SessionMeta::lowers(&definition.policy, settings, metadata))
    }

    /// Changes a session's settings: the pinned model (a person's explicit choice), auto-approve,
    /// the reasoning switch, the approval overrides.
    pub async fn update_session(&self, id: &str, settings: SessionSettings) -> Result<SessionView> {
        let core = self.core();
        let session = self.public_session(id)?;
        if let Some(model) = &settings.model
            && session.model.as_deref() != Some(model.as_str())
        {
            if core.models().resolve(model).is_none() {
                return Err(RuntimeError::ModelNotFound(model.clone()));
            }
            let patch =
                SessionPatch { model: Some(Some(model.clone())), ..SessionPatch::default() };
            core.store().update_session(id, &patch).map_store_err()?;
            core.events().bookkeeping(id, kind::RUNTIME_MODEL, json!({"model": model}))?;
        }
        if let Some(patch) = SessionMeta::settings_patch(&settings) {
            core.store().merge_session_metadata(id, &patch).map_store_err()?;
        }
        self.session(id).await
    }

    /// Deletes a session and its hidden persona children with their transcripts. Refused while
    /// any of them has an active task, or while a turn runs in it.
    pub async fn delete_session(&self, id: &str) -> Result<Vec<String>> {
        let shared = &self.shared;
        let core = &shared.core;
        self.public_session(id)?;
        // Held through the delete, so no turn of this session starts meanwhile.
        let live = shared.live.get(id);
        let Ok(turn_lock) = live.try_lock() else {
            return Err(RuntimeError::TurnInFlight(id.to_owned()));
        };
        let deleted = core.store().delete_session(id).map_store_err()?;
        for gone in &deleted {
            if let Err(error) = core.transcripts().delete(gone) {
                tracing::warn!(session = %gone, %error, "could not delete a transcript");
            }
            core.events().forget(gone);
            core.client_tools().forget(std::slice::from_ref(gone));
            shared.replays.forget(std::slice::from_ref(gone));
            if gone != id {
                shared.live.remove(gone);
            }
        }
        drop(turn_lock);
        shared.live.remove(id);
        Ok(deleted)
    }
}
