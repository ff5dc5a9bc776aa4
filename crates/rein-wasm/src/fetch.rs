//! rein-model's HTTP port over the JavaScript host: `fetch` for requests (the body read piece by
//! piece from its stream), `setTimeout` for the timeouts and `Retry-After` waits, `Date.now`.
//!
//! A request runs as a task on the JavaScript event loop; Rust holds only channel ends, which
//! are `Send` as the port asks. The task watches a guard channel whose sender Rust keeps for as
//! long as it may read: when the `post` future or the body stream is dropped (a turn stopped, a
//! timeout), the task sees the guard go and aborts the `fetch` with its `AbortController`, so
//! nothing is read or kept after that. A timer is cleared when its sleep is dropped, so a
//! finished request leaves no timer that keeps Node alive.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use futures::channel::{mpsc, oneshot};
use futures::future::{Either, select};
use futures::{Stream, StreamExt as _};
use js_sys::{Object, Promise, Reflect, Uint8Array};
use rein_model::{HttpRequest, HttpResponse, HttpTransport, TransportError};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

use crate::js::{Held, error_text, set};

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_name = fetch, catch)]
    fn fetch_with(url: &str, init: &JsValue) -> Result<Promise, JsValue>;

    #[derive(Clone)]
    type AbortController;
    #[wasm_bindgen(constructor)]
    fn new() -> AbortController;
    #[wasm_bindgen(method, getter)]
    fn signal(this: &AbortController) -> JsValue;
    #[wasm_bindgen(method)]
    fn abort(this: &AbortController);

    type FetchResponse;
    #[wasm_bindgen(method, getter)]
    fn status(this: &FetchResponse) -> u16;
    #[wasm_bindgen(method, getter)]
    fn headers(this: &FetchResponse) -> JsValue;
    /// The body's `ReadableStream`, or `null`.
    #[wasm_bindgen(method, getter)]
    fn body(this: &FetchResponse) -> JsValue;

    type BodyReader;
    #[wasm_bindgen(method, catch)]
    fn read(this: &BodyReader) -> Result<Promise, JsValue>;

    #[wasm_bindgen(js_name = setTimeout)]
    fn set_timeout(callback: &JsValue, ms: f64) -> JsValue;
    #[wasm_bindgen(js_name = clearTimeout)]
    fn clear_timeout(id: &JsValue);
}

/// The longest delay `setTimeout` takes (2^31 - 1 ms, about 24.8 days); a longer one would fire
/// at once, so it is waited in full steps of this.
const MAX_TIMER_MS: f64 = 2_147_483_647.0;

/// [`HttpTransport`] over the host's `fetch` and timers.
#[derive(Debug, Default)]
pub(crate) struct FetchTransport;

/// What the task answers first: the status and headers, or why there are none.
type Head = Result<(u16, Vec<(String, String)>), TransportError>;

#[async_trait]
impl HttpTransport for FetchTransport {
    async fn post(&self, request: HttpRequest) -> Result<HttpResponse, TransportError> {
        let (head_tx, head_rx) = oneshot::channel::<Head>();
        let (piece_tx, piece_rx) = mpsc::unbounded();
        // Never sent on: the task reads its end's cancellation as "Rust let go".
        let (guard, released) = oneshot::channel::<()>();
        wasm_bindgen_futures::spawn_local(exchange(request, head_tx, piece_tx, released));
        let (status, headers) = head_rx.await.map_err(|_| {
            TransportError::Network("the fetch ended without an answer".to_owned())
        })??;
        let body = Body { pieces: piece_rx, _guard: guard };
        Ok(HttpResponse::new(status, headers, body.boxed()))
    }

    async fn sleep(&self, delay: Duration) {
        let mut left = delay.as_secs_f64() * 1000.0;
        loop {
            let step = left.min(MAX_TIMER_MS);
            let (fired, woken) = oneshot::channel::<()>();
            let timer = Timer::start(step, fired);
            let _ = woken.await;
            drop(timer);
            left -= step;
            if left <= 0.0 {
                return;
            }
        }
    }

    fn now(&self) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs_f64(js_sys::Date::now().max(0.0) / 1000.0)
    }
}

/// A `setTimeout` that is cleared when dropped.
struct Timer(Held);

impl Timer {
    fn start(ms: f64, fired: oneshot::Sender<()>) -> Timer {
        let callback = Closure::once_into_js(move || {
            let _ = fired.send(());
        });
        Timer(Held::new(set_timeout(&callback, ms)))
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        clear_timeout(&self.0.get());
    }
}

/// The body as the port reads it; holding it holds the guard that keeps the `fetch` going.
struct Body {
    pieces: mpsc::UnboundedReceiver<Result<Vec<u8>, TransportError>>,
    _guard: oneshot::Sender<()>,
}

impl Stream for Body {
    type Item = Result<Vec<u8>, TransportError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.pieces.poll_next_unpin(cx)
    }
}

/// The `fetch` and the reading of its body, on the JavaScript event loop.
async fn exchange(
    request: HttpRequest,
    head_tx: oneshot::Sender<Head>,
    piece_tx: mpsc::UnboundedSender<Result<Vec<u8>, TransportError>>,
    mut released: oneshot::Receiver<()>,
) {
    let controller = AbortController::new();
    let init = Object::new();
    set(&init, "method", &"POST".into());
    let headers = Object::new();
    for (name, value) in &request.headers {
        set(&headers, name, &value.into());
    }
    set(&init, "headers", &headers);
    set(&init, "body", &Uint8Array::from(request.body.as_slice()).into());
    set(&init, "signal", &controller.signal());
    let promise = match fetch_with(&request.url, &init) {
        Ok(promise) => promise,
        Err(error) => {
            let _ = head_tx.send(Err(TransportError::Request(describe(&error))));
            return;
        }
    };
    let response: FetchResponse = match select(JsFuture::from(promise), &mut released).await {
        Either::Left((Ok(response), _)) => response.unchecked_into(),
        // `fetch` rejects (a TypeError) when no answer came at all: refused, unknown host, or
        // in a browser a request the page's origin may not make (CORS), which looks the same.
        Either::Left((Err(error), _)) => {
            let _ = head_tx.send(Err(TransportError::Connect(describe(&error))));
            return;
        }
        Either::Right(_) => {
            controller.abort();
            return;
        }
    };
    let _ = head_tx.send(Ok((response.status(), header_list(&response.headers()))));
    let body = response.body();
    if body.is_null() || body.is_undefined() {
        return;
    }
    let reader: BodyReader = match crate::js::method(&body, "getReader")
        .and_then(|get_reader| get_reader.call0(&body).ok())
    {
        Some(reader) => reader.unchecked_into(),
        None => {
            let _ = piece_tx.unbounded_send(Err(TransportError::Network(
                "the response body cannot be read".to_owned(),
            )));
            return;
        }
    };
    loop {
        let read = match reader.read() {
            Ok(read) => read,
            Err(error) => {
                let _ = piece_tx.unbounded_send(Err(TransportError::Network(describe(&error))));
                return;
            }
        };
        match select(JsFuture::from(read), &mut released).await {
            Either::Left((Ok(chunk), _)) => {
                let done = Reflect::get(&chunk, &"done".into())
                    .ok()
                    .and_then(|done| done.as_bool())
                    .unwrap_or(true);
                if done {
                    return;
                }
                let value = Reflect::get(&chunk, &"value".into()).unwrap_or(JsValue::UNDEFINED);
                let Ok(bytes) = value.dyn_into::<Uint8Array>() else { continue };
                if piece_tx.unbounded_send(Ok(bytes.to_vec())).is_err() {
                    controller.abort();
                    return;
                }
            }
            Either::Left((Err(error), _)) => {
                let _ = piece_tx.unbounded_send(Err(TransportError::Network(describe(&error))));
                return;
            }
            Either::Right(_) => {
                controller.abort();
                return;
            }
        }
    }
}

/// A `Headers` object as (name, value) pairs.
fn header_list(headers: &JsValue) -> Vec<(String, String)> {
    let Ok(Some(entries)) = js_sys::try_iter(headers) else { return Vec::new() };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let pair: js_sys::Array = entry.dyn_into().ok()?;
            Some((pair.get(0).as_string()?, pair.get(1).as_string()?))
        })
        .collect()
}

/// What a rejected `fetch` says, with its cause (Node puts `ECONNREFUSED` there).
fn describe(error: &JsValue) -> String {
    let mut text = error_text(error);
    let cause = Reflect::get(error, &"cause".into()).unwrap_or(JsValue::UNDEFINED);
    if !cause.is_undefined() && !cause.is_null() {
        text.push_str(": ");
        text.push_str(&error_text(&cause));
    }
    text
}
