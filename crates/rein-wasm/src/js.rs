//! The JavaScript side: values held for Rust by handle, JSON both ways, and work run on the JS
//! event loop.
//!
//! rein's ports are `Send + Sync` and JavaScript values are not, so Rust structs hold a
//! [`Held`] (an index into a table of this thread's values) and JavaScript work runs in
//! `spawn_local`, answering through a oneshot channel. wasm32 has one thread, so a handle is
//! always read on the thread that made it.

use std::cell::RefCell;
use std::future::Future;

use futures::channel::oneshot;
use js_sys::{Function, JSON, Object, Promise, Reflect};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

thread_local! {
    static VALUES: RefCell<Vec<Option<JsValue>>> = const { RefCell::new(Vec::new()) };
}

/// A JavaScript value kept alive for Rust until the handle is dropped.
#[derive(Debug)]
pub(crate) struct Held(usize);

impl Held {
    pub(crate) fn new(value: JsValue) -> Held {
        VALUES.with(|values| {
            let mut values = values.borrow_mut();
            if let Some(free) = values.iter().position(Option::is_none) {
                values[free] = Some(value);
                Held(free)
            } else {
                values.push(Some(value));
                Held(values.len() - 1)
            }
        })
    }

    pub(crate) fn get(&self) -> JsValue {
        VALUES
            .with(|values| values.borrow().get(self.0).cloned().flatten())
            .unwrap_or(JsValue::UNDEFINED)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        VALUES.with(|values| {
            if let Some(slot) = values.borrow_mut().get_mut(self.0) {
                *slot = None;
            }
        });
    }
}

/// Runs `work` on the JavaScript event loop; the receiver answers with its output (or is
/// cancelled when the page drops the task, which it does not).
pub(crate) fn on_js<T, F, Fut>(work: F) -> oneshot::Receiver<T>
where
    T: 'static,
    F: FnOnce() -> Fut + 'static,
    Fut: Future<Output = T> + 'static,
{
    let (tx, rx) = oneshot::channel();
    wasm_bindgen_futures::spawn_local(async move {
        let _ = tx.send(work().await);
    });
    rx
}

/// A JSON value as a JavaScript value.
pub(crate) fn to_js(value: &serde_json::Value) -> JsValue {
    JSON::parse(&value.to_string()).unwrap_or(JsValue::NULL)
}

/// A JavaScript value as JSON (`undefined` and functions are `null`).
pub(crate) fn from_js(value: &JsValue) -> serde_json::Value {
    if value.is_undefined() {
        return serde_json::Value::Null;
    }
    JSON::stringify(value)
        .ok()
        .and_then(|text| text.as_string())
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or(serde_json::Value::Null)
}

/// What a thrown JavaScript value says.
pub(crate) fn error_text(error: &JsValue) -> String {
    if let Some(text) = error.as_string() {
        return text;
    }
    Reflect::get(error, &"message".into())
        .ok()
        .and_then(|message| message.as_string())
        .unwrap_or_else(|| format!("{error:?}"))
}

/// A JavaScript `Error` with this message.
pub(crate) fn js_error(message: &str) -> JsValue {
    js_sys::Error::new(message).into()
}

/// Awaits a value that may be a promise.
pub(crate) async fn settle(value: JsValue) -> Result<JsValue, JsValue> {
    JsFuture::from(Promise::resolve(&value)).await
}

/// The function at `object[name]`, if there is one.
pub(crate) fn method(object: &JsValue, name: &str) -> Option<Function> {
    Reflect::get(object, &name.into()).ok()?.dyn_into::<Function>().ok()
}

/// Sets `object[key] = value` (on an object made here, so it cannot fail).
pub(crate) fn set(object: &Object, key: &str, value: &JsValue) {
    let _ = Reflect::set(object, &key.into(), value);
}
