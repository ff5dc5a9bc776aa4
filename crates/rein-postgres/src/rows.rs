//! Column lists and row decoders: where PostgreSQL rows become store records.

use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_postgres::Row;

use rein_protocol::JsonObject;
use rein_store::{
    Approval, ApprovalRule, AuditEntry, Session, StopRequest, StoreError, Task, Timestamp,
    ViewContext,
};

use crate::fail::FResult;

pub(crate) const SESSION_COLS: &str = "id, owner, agent_id, model, title, parent_id, hidden, \
     created_at, updated_at, turn_in_flight, turn_owner, turn_expires_at, turn_unfinished, \
     view_context_id, metadata";

pub(crate) const TASK_COLS: &str = "id, session_id, tool, args, status, lease_owner, \
     lease_expires_at, attempts, restart_limit, stage, result, error, cancel_requested, delivered, \
     origin_call_id, created_at, updated_at, started_at, finished_at";

pub(crate) const APPROVAL_COLS: &str = "id, session_id, fingerprint, tool, args, status, scope, \
     reason, note, created_at, updated_at, resolved_at, consumed_at";

pub(crate) const AUDIT_COLS: &str =
    "seq, id, session_id, at, action, tool, outcome, reason, metadata";

pub(crate) const RULE_COLS: &str = "id, owner, agent_id, tool, created_at";

fn bad(column: &str, detail: String) -> StoreError {
    StoreError::Database { detail: format!("stored column `{column}` is unreadable: {detail}") }
}

fn get<'a, T: tokio_postgres::types::FromSql<'a>>(row: &'a Row, index: usize) -> FResult<T> {
    Ok(row.try_get(index)?)
}

fn time(row: &Row, index: usize) -> FResult<Timestamp> {
    get::<i64>(row, index).map(Timestamp)
}

fn opt_time(row: &Row, index: usize) -> FResult<Option<Timestamp>> {
    get::<Option<i64>>(row, index).map(|t| t.map(Timestamp))
}

fn object(row: &Row, index: usize) -> FResult<JsonObject> {
    match get::<Value>(row, index)? {
        Value::Object(map) => Ok(map),
        other => Err(bad("metadata", format!("not a JSON object: {other}")).into()),
    }
}

fn count(row: &Row, index: usize) -> FResult<u32> {
    let value: i32 = get(row, index)?;
    u32::try_from(value).map_err(|_| bad("count", format!("out of range: {value}")).into())
}

/// A stored name (`queued`, `mid-tool`, ...) read through the type's own serde names.
fn named<T: DeserializeOwned>(row: &Row, index: usize) -> FResult<T> {
    let text: String = get(row, index)?;
    serde_json::from_value(Value::String(text.clone()))
        .map_err(|_| bad("status", format!("unknown value `{text}`")).into())
}

fn opt_named<T: DeserializeOwned>(row: &Row, index: usize) -> FResult<Option<T>> {
    let text: Option<String> = get(row, index)?;
    text.map(|text| {
        serde_json::from_value(Value::String(text.clone()))
            .map_err(|_| bad("turn_unfinished", format!("unknown value `{text}`")).into())
    })
    .transpose()
}

pub(crate) fn session(row: &Row) -> FResult<Session> {
    Ok(Session {
        id: get(row, 0)?,
        owner: get(row, 1)?,
        agent_id: get(row, 2)?,
        model: get(row, 3)?,
        title: get(row, 4)?,
        parent_id: get(row, 5)?,
        hidden: get(row, 6)?,
        created_at: time(row, 7)?,
        updated_at: time(row, 8)?,
        turn_in_flight: get(row, 9)?,
        turn_owner: get(row, 10)?,
        turn_expires_at: opt_time(row, 11)?,
        turn_unfinished: opt_named(row, 12)?,
        view_context_id: get(row, 13)?,
        metadata: object(row, 14)?,
    })
}

pub(crate) fn task(row: &Row) -> FResult<Task> {
    Ok(Task {
        id: get(row, 0)?,
        session_id: get(row, 1)?,
        tool: get(row, 2)?,
        args: get(row, 3)?,
        status: named(row, 4)?,
        lease_owner: get(row, 5)?,
        lease_expires_at: opt_time(row, 6)?,
        attempts: count(row, 7)?,
        restart_limit: count(row, 8)?,
        stage: get(row, 9)?,
        result: get(row, 10)?,
        error: get(row, 11)?,
        cancel_requested: get(row, 12)?,
        delivered: get(row, 13)?,
        origin_call_id: get(row, 14)?,
        created_at: time(row, 15)?,
        updated_at: time(row, 16)?,
        started_at: opt_time(row, 17)?,
        finished_at: opt_time(row, 18)?,
    })
}

pub(crate) fn approval(row: &Row) -> FResult<Approval> {
    Ok(Approval {
        id: get(row, 0)?,
        session_id: get(row, 1)?,
        fingerprint: get(row, 2)?,
        tool: get(row, 3)?,
        args: get(row, 4)?,
        status: named(row, 5)?,
        scope: named(row, 6)?,
        reason: get(row, 7)?,
        note: get(row, 8)?,
        created_at: time(row, 9)?,
        updated_at: time(row, 10)?,
        resolved_at: opt_time(row, 11)?,
        consumed_at: opt_time(row, 12)?,
    })
}

/// A rule from [`RULE_COLS`] (`owner` '' reads as `None`).
pub(crate) fn rule(row: &Row) -> FResult<ApprovalRule> {
    let owner: String = get(row, 1)?;
    Ok(ApprovalRule {
        id: get(row, 0)?,
        owner: (!owner.is_empty()).then_some(owner),
        agent_id: get(row, 2)?,
        tool: get(row, 3)?,
        created_at: time(row, 4)?,
    })
}

pub(crate) fn audit(row: &Row) -> FResult<AuditEntry> {
    Ok(AuditEntry {
        seq: get(row, 0)?,
        id: get(row, 1)?,
        session_id: get(row, 2)?,
        at: time(row, 3)?,
        action: get(row, 4)?,
        tool: get(row, 5)?,
        outcome: get(row, 6)?,
        reason: get(row, 7)?,
        metadata: object(row, 8)?,
    })
}

pub(crate) fn view_context(row: &Row) -> FResult<ViewContext> {
    Ok(ViewContext {
        id: get(row, 0)?,
        payload: get(row, 1)?,
        created_at: time(row, 2)?,
        updated_at: time(row, 3)?,
    })
}

pub(crate) fn stop(row: &Row) -> FResult<StopRequest> {
    Ok(StopRequest { session_id: get(row, 0)?, requested_at: time(row, 1)?, reason: get(row, 2)? })
}
