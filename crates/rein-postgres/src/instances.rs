//! Which lease holders (runtime instances) are alive, told by session-level advisory locks.
//!
//! Protocol: [`register`] takes `pg_try_advisory_lock(hashtext('rein-instance:' || schema),
//! hashtext(id))` on a dedicated connection, opened on first use and held for the life of the
//! database handle, and records the id in `instances`. The lock lives exactly as long as that
//! connection: when the process dies, the kernel closes its socket and PostgreSQL drops the lock.
//! [`is_gone`] is true only for a recorded id whose lock another session can take (tried with
//! `pg_try_advisory_xact_lock` on a pooled connection, let go at once by the commit); this
//! handle's own ids are never gone. If the dedicated connection is lost, the next registration
//! opens a new one and takes every held id's lock again.

use std::sync::{Arc, PoisonError};

use tokio::sync::Mutex as AsyncMutex;
use tokio_postgres::NoTls;

use rein_store::{Result, StoreError};

use crate::{
    bridge::{Bridge, transaction},
    fail::{FResult, Fail},
};

const LOCK: &str = "pg_try_advisory_lock(hashtext('rein-instance:' || $1), hashtext($2))";
const UNLOCK: &str = "pg_advisory_unlock(hashtext('rein-instance:' || $1), hashtext($2))";
const PROBE: &str = "pg_try_advisory_xact_lock(hashtext('rein-instance:' || $1), hashtext($2))";

/// The dedicated connection and the ids this handle holds.
#[derive(Default)]
pub(crate) struct Instances {
    conn: Arc<AsyncMutex<Option<tokio_postgres::Client>>>,
    held: Arc<std::sync::Mutex<Vec<String>>>,
}

impl Instances {
    pub(crate) fn new() -> Self {
        Instances::default()
    }

    fn holds(&self, instance: &str) -> bool {
        self.held.lock().unwrap_or_else(PoisonError::into_inner).iter().any(|id| id == instance)
    }
}

/// Takes `instance`'s lock for as long as this handle lives.
pub(crate) fn register(inner: &Bridge, instances: &Instances, instance: &str) -> Result<()> {
    if instance.is_empty() || instance.len() > 512 || instance.chars().any(char::is_control) {
        return Err(StoreError::InvalidInput {
            what: "instance id",
            detail: format!("must be 1..=512 bytes without control characters, got {instance:?}"),
        });
    }
    if instances.holds(instance) {
        return Ok(());
    }
    let conn = instances.conn.clone();
    let held = instances.held.clone();
    let (pg, schema, instance) = (inner.pg.clone(), inner.schema.clone(), instance.to_owned());
    let now = inner.now().as_millis();
    inner.run(async move {
        let mut slot = conn.lock().await;
        if slot.as_ref().is_none_or(tokio_postgres::Client::is_closed) {
            let (client, connection) = pg.connect(NoTls).await?;
            tokio::spawn(async move {
                if let Err(error) = connection.await {
                    tracing::warn!(%error, "the instance-lock connection was lost");
                }
            });
            // A new connection: the locks of the old one are gone; take them again.
            let again: Vec<String> = held.lock().unwrap_or_else(PoisonError::into_inner).clone();
            for id in again {
                let row = client.query_one(&format!("SELECT {LOCK}"), &[&schema, &id]).await?;
                if !row.try_get::<_, bool>(0)? {
                    tracing::warn!(instance = %id, "could not take an instance lock again after reconnecting");
                }
            }
            *slot = Some(client);
        }
        let Some(client) = slot.as_ref() else {
            return Err(Fail::Store(StoreError::Database { detail: "no instance connection".into() }));
        };
        let taken: bool =
            client.query_one(&format!("SELECT {LOCK}"), &[&schema, &instance]).await?.try_get(0)?;
        if !taken {
            return Err(Fail::Store(StoreError::InvalidInput {
                what: "instance id",
                detail: format!("`{instance}` is held by another process"),
            }));
        }
        client
            .execute(
                "INSERT INTO instances (id, registered_at) VALUES ($1, $2) \
                 ON CONFLICT (id) DO UPDATE SET registered_at = excluded.registered_at",
                &[&instance, &now],
            )
            .await?;
        held.lock().unwrap_or_else(PoisonError::into_inner).push(instance);
        Ok(())
    })
}

/// Lets go of `instance` and forgets it (a clean shutdown).
pub(crate) fn release(inner: &Bridge, instances: &Instances, instance: &str) {
    if !instances.holds(instance) {
        return;
    }
    let conn = instances.conn.clone();
    let held = instances.held.clone();
    let (schema, instance) = (inner.schema.clone(), instance.to_owned());
    let outcome = inner.run(async move {
        held.lock().unwrap_or_else(PoisonError::into_inner).retain(|id| *id != instance);
        let slot = conn.lock().await;
        if let Some(client) = slot.as_ref() {
            client.execute("DELETE FROM instances WHERE id = $1", &[&instance]).await?;
            client.execute(&format!("SELECT {UNLOCK}"), &[&schema, &instance]).await?;
        }
        Ok(())
    });
    if let Err(error) = outcome {
        tracing::warn!(%error, "could not release an instance lock");
    }
}

/// Whether `instance` registered and nobody holds its lock any more.
pub(crate) fn is_gone(inner: &Bridge, instances: &Instances, instance: &str) -> bool {
    if instances.holds(instance) {
        return false;
    }
    let pool = inner.pool.clone();
    let (schema, id) = (inner.schema.clone(), instance.to_owned());
    let gone = inner.run(async move {
        let instance = id;
        transaction!(pool, |tx| {
            let row = tx.query_opt("SELECT 1 FROM instances WHERE id = $1", &[&instance]).await?;
            if row.is_none() {
                return Ok(false);
            }
            let free: bool = tx
                .query_one(&format!("SELECT {PROBE}"), &[&schema, &instance])
                .await?
                .try_get(0)?;
            FResult::Ok(free)
        })
        .await
    });
    gone.unwrap_or_else(|error| {
        tracing::warn!(%error, instance, "could not tell whether an instance is gone");
        false
    })
}

/// Forgets a gone instance (its row), once its leases were taken over.
pub(crate) fn forget(inner: &Bridge, instances: &Instances, instance: &str) {
    if instances.holds(instance) {
        return;
    }
    let pool = inner.pool.clone();
    let (schema, instance) = (inner.schema.clone(), instance.to_owned());
    let outcome = inner.run(async move {
        transaction!(pool, |tx| {
            let free: bool = tx
                .query_one(&format!("SELECT {PROBE}"), &[&schema, &instance])
                .await?
                .try_get(0)?;
            if free {
                tx.execute("DELETE FROM instances WHERE id = $1", &[&instance]).await?;
            }
            FResult::Ok(())
        })
        .await
    });
    if let Err(error) = outcome {
        tracing::warn!(%error, "could not forget an instance");
    }
}
