//! Column lists and row decoders: where SQLite rows become store records.

use rusqlite::{Row, types::Type};
use serde_json::Value;

use rein_protocol::JsonObject;

use crate::{
    Approval, ApprovalRule, ApprovalScope, ApprovalStatus, AuditEntry, Session, StopRequest, Task,
    TaskStatus, Timestamp, TurnUnfinished, ViewContext,
};

pub(super) const SESSION_COLS: &str = "id, owner, agent_id, model, title, parent_id, hidden, created_at, \
     updated_at, turn_in_flight, turn_owner, turn_expires_at, turn_unfinished, view_context_id, metadata";

pub(super) const TASK_COLS: &str = "id, session_id, tool, args, status, lease_owner, lease_expires_at, \
     attempts, restart_limit, stage, result, error, cancel_requested, delivered, origin_call_id, created_at, \
     updated_at, started_at, finished_at";

pub(super) const APPROVAL_COLS: &str = "id, session_id, fingerprint, tool, args, status, scope, reason, note, \
     created_at, updated_at, resolved_at, consumed_at";

pub(super) const AUDIT_COLS: &str =
    "seq, id, session_id, at, action, tool, outcome, reason, metadata";

fn bad(index: usize, detail: String) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(index, Type::Text, detail.into())
}

fn json(row: &Row<'_>, index: usize) -> rusqlite::Result<Value> {
    let text: String = row.get(index)?;
    serde_json::from_str(&text).map_err(|e| bad(index, format!("stored JSON does not parse: {e}")))
}

fn opt_json(row: &Row<'_>, index: usize) -> rusqlite::Result<Option<Value>> {
    let text: Option<String> = row.get(index)?;
    text.map(|t| {
        serde_json::from_str(&t).map_err(|e| bad(index, format!("stored JSON does not parse: {e}")))
    })
    .transpose()
}

fn object(row: &Row<'_>, index: usize) -> rusqlite::Result<JsonObject> {
    match json(row, index)? {
        Value::Object(map) => Ok(map),
        other => Err(bad(index, format!("stored metadata is not a JSON object: {other}"))),
    }
}

fn time(row: &Row<'_>, index: usize) -> rusqlite::Result<Timestamp> {
    row.get(index).map(Timestamp)
}

fn opt_time(row: &Row<'_>, index: usize) -> rusqlite::Result<Option<Timestamp>> {
    row.get::<_, Option<i64>>(index).map(|t| t.map(Timestamp))
}

fn count(row: &Row<'_>, index: usize) -> rusqlite::Result<u32> {
    let value: i64 = row.get(index)?;
    u32::try_from(value).map_err(|_| bad(index, format!("count out of range: {value}")))
}

fn parsed<T>(row: &Row<'_>, index: usize, parse: fn(&str) -> Option<T>) -> rusqlite::Result<T> {
    let text: String = row.get(index)?;
    parse(&text).ok_or_else(|| bad(index, format!("unknown value `{text}`")))
}

pub(super) fn session_from_row(row: &Row<'_>) -> rusqlite::Result<Session> {
    let unfinished: Option<String> = row.get(12)?;
    Ok(Session {
        id: row.get(0)?,
        owner: row.get(1)?,
        agent_id: row.get(2)?,
        model: row.get(3)?,
        title: row.get(4)?,
        parent_id: row.get(5)?,
        hidden: row.get(6)?,
        created_at: time(row, 7)?,
        updated_at: time(row, 8)?,
        turn_in_flight: row.get(9)?,
        turn_owner: row.get(10)?,
        turn_expires_at: opt_time(row, 11)?,
        turn_unfinished: unfinished
            .map(|u| {
                TurnUnfinished::parse(&u).ok_or_else(|| bad(12, format!("unknown value `{u}`")))
            })
            .transpose()?,
        view_context_id: row.get(13)?,
        metadata: object(row, 14)?,
    })
}

pub(super) fn task_from_row(row: &Row<'_>) -> rusqlite::Result<Task> {
    Ok(Task {
        id: row.get(0)?,
        session_id: row.get(1)?,
        tool: row.get(2)?,
        args: json(row, 3)?,
        status: parsed(row, 4, TaskStatus::parse)?,
        lease_owner: row.get(5)?,
        lease_expires_at: opt_time(row, 6)?,
        attempts: count(row, 7)?,
        restart_limit: count(row, 8)?,
        stage: row.get(9)?,
        result: opt_json(row, 10)?,
        error: row.get(11)?,
        cancel_requested: row.get(12)?,
        delivered: row.get(13)?,
        origin_call_id: row.get(14)?,
        created_at: time(row, 15)?,
        updated_at: time(row, 16)?,
        started_at: opt_time(row, 17)?,
        finished_at: opt_time(row, 18)?,
    })
}

pub(super) fn approval_from_row(row: &Row<'_>) -> rusqlite::Result<Approval> {
    Ok(Approval {
        id: row.get(0)?,
        session_id: row.get(1)?,
        fingerprint: row.get(2)?,
        tool: row.get(3)?,
        args: json(row, 4)?,
        status: parsed(row, 5, ApprovalStatus::parse)?,
        scope: parsed(row, 6, ApprovalScope::parse)?,
        reason: row.get(7)?,
        note: row.get(8)?,
        created_at: time(row, 9)?,
        updated_at: time(row, 10)?,
        resolved_at: opt_time(row, 11)?,
        consumed_at: opt_time(row, 12)?,
    })
}

/// An approval rule from `id, owner, agent_id, tool, created_at` (`owner` '' reads as `None`).
pub(super) fn rule_from_row(row: &Row<'_>) -> rusqlite::Result<ApprovalRule> {
    let owner: String = row.get(1)?;
    Ok(ApprovalRule {
        id: row.get(0)?,
        owner: (!owner.is_empty()).then_some(owner),
        agent_id: row.get(2)?,
        tool: row.get(3)?,
        created_at: time(row, 4)?,
    })
}

pub(super) fn audit_from_row(row: &Row<'_>) -> rusqlite::Result<AuditEntry> {
    Ok(AuditEntry {
        seq: row.get(0)?,
        id: row.get(1)?,
        session_id: row.get(2)?,
        at: time(row, 3)?,
        action: row.get(4)?,
        tool: row.get(5)?,
        outcome: row.get(6)?,
        reason: row.get(7)?,
        metadata: object(row, 8)?,
    })
}

pub(super) fn view_context_from_row(row: &Row<'_>) -> rusqlite::Result<ViewContext> {
    Ok(ViewContext {
        id: row.get(0)?,
        payload: json(row, 1)?,
        created_at: time(row, 2)?,
        updated_at: time(row, 3)?,
    })
}

pub(super) fn stop_from_row(row: &Row<'_>) -> rusqlite::Result<StopRequest> {
    Ok(StopRequest { session_id: row.get(0)?, requested_at: time(row, 1)?, reason: row.get(2)? })
}
