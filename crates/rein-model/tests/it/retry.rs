//! Timeouts and retries: what is retried (once at once, or after a `Retry-After`), what is not,
//! the retry deltas, and that every attempt sends the same bytes.

use std::time::Duration;

use rein_protocol::{ModelErrorKind, ReplyDelta};
use serde_json::json;

use crate::fixtures::{hello, tool_round};
use crate::server::{Reply, Server, complete, model, raw_server, registry};

fn ok() -> Reply {
    Reply::json(
        200,
        json!({"choices": [{"message": {"content": "fine"}, "finish_reason": "stop"}]}),
    )
}

#[tokio::test]
async fn a_5xx_is_retried_once_with_identical_bytes() {
    let server = Server::start(vec![Reply::text(502, "bad gateway"), ok()]).await;
    let model = model(&server, "openai", json!({"stream": false}), json!({}));
    assert_eq!(complete(&model, &tool_round()).await.0.unwrap().content, "fine");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].raw_body, requests[1].raw_body);
}

#[tokio::test]
async fn the_retrys_error_propagates() {
    let server =
        Server::start(vec![Reply::text(500, "first"), Reply::text(503, "second"), ok()]).await;
    let model = model(&server, "openai", json!({"stream": false}), json!({}));
    let error = complete(&model, &hello()).await.0.unwrap_err();
    assert_eq!(
        (error.kind, error.status, error.message.as_str()),
        (ModelErrorKind::Retryable, Some(503), "second")
    );
    assert_eq!(server.requests().len(), 2, "exactly one retry");
}

#[tokio::test]
async fn a_200_without_choices_is_retried_once() {
    let server =
        Server::start(vec![Reply::json(200, json!({"object": "chat.completion"})), ok()]).await;
    let model = model(&server, "openai", json!({"stream": false}), json!({}));
    assert_eq!(complete(&model, &hello()).await.0.unwrap().content, "fine");
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn a_4xx_is_never_retried_not_even_429_without_retry_after() {
    for status in [400, 404, 422, 429] {
        let server = Server::start(vec![Reply::text(status, "no"), ok()]).await;
        let model = model(&server, "openai", json!({"stream": false}), json!({}));
        let error = complete(&model, &hello()).await.0.unwrap_err();
        assert_eq!(error.status, Some(status));
        assert_eq!(server.requests().len(), 1, "{status}");
    }
}

#[tokio::test]
async fn a_timeout_is_retried_once() {
    let server = Server::start(vec![ok().delayed(Duration::from_secs(30)), ok()]).await;
    let model =
        model(&server, "openai", json!({"stream": false, "llm_timeout_seconds": 0.3}), json!({}));
    assert_eq!(complete(&model, &hello()).await.0.unwrap().content, "fine");
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn two_timeouts_are_a_retryable_timeout_error() {
    let slow = ok().delayed(Duration::from_secs(30));
    let server = Server::start(vec![slow.clone(), slow]).await;
    let model = model(&server, "openai", json!({"llm_timeout_seconds": 0.2}), json!({}));
    let error = complete(&model, &hello()).await.0.unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Retryable);
    assert!(error.message.contains("timed out"), "{}", error.message);
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn a_stream_that_stalls_times_out() {
    let server = Server::start(vec![
        Reply::sse_pieces(vec![b": waiting\n\n".to_vec()]).delayed(Duration::from_secs(30)),
        Reply::sse(&[
            r#"{"choices":[{"delta":{"content":"late"},"finish_reason":"stop"}]}"#,
            "[DONE]",
        ]),
    ])
    .await;
    let model = model(&server, "openai", json!({"llm_timeout_seconds": 0.3}), json!({}));
    assert_eq!(complete(&model, &hello()).await.0.unwrap().content, "late");
}

#[tokio::test]
async fn a_network_error_is_retried_once_then_typed() {
    // A port that was just free: nothing listens there.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let config = json!({"llm_models": [{"value": "m", "endpoint": format!("http://127.0.0.1:{port}/v1"), "llm_timeout_seconds": 5}]});
    let error = complete(&registry(config).default_model(), &hello()).await.0.unwrap_err();
    assert_eq!((error.kind, error.status), (ModelErrorKind::Retryable, None));
}

#[tokio::test]
async fn a_dropped_request_abandons_the_call() {
    // Cancel-safety: the loop stops a turn by dropping the future.
    let server = Server::start(vec![ok().delayed(Duration::from_secs(30))]).await;
    let model = model(&server, "openai", json!({"stream": false}), json!({}));
    let request = hello();
    let arrived = async {
        while server.requests().is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::select! {
        _ = complete(&model, &request) => panic!("the reply is 30 s away"),
        () = arrived => {}
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(server.requests().len(), 1, "no retry after a drop");
}

/// The retry deltas among `deltas`: (attempt, delay in ms, reason).
fn retries(deltas: &[ReplyDelta]) -> Vec<(u32, u64, String)> {
    deltas
        .iter()
        .filter_map(|delta| match delta {
            ReplyDelta::Retry { attempt, delay_ms, reason } => {
                Some((*attempt, *delay_ms, reason.clone()))
            }
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_429_with_retry_after_waits_then_retries_and_says_so() {
    for stream in [false, true] {
        let limited = Reply::text(429, "slow down").with_header("retry-after", "1");
        let server = Server::start(vec![limited, ok()]).await;
        let model = model(&server, "openai", json!({"stream": stream}), json!({}));
        let started = std::time::Instant::now();
        let (reply, deltas) = complete(&model, &hello()).await;
        assert_eq!(reply.unwrap().content, "fine");
        assert!(started.elapsed() >= Duration::from_millis(900), "waited {:?}", started.elapsed());
        assert_eq!(retries(&deltas), [(2, 1000, "HTTP 429: slow down".to_owned())]);
        let requests = server.requests();
        assert_eq!(requests.len(), 2);
        assert_eq!(requests[0].raw_body, requests[1].raw_body);
    }
}

#[tokio::test]
async fn a_503_with_a_retry_after_date_waits_until_then() {
    let soon = std::time::SystemTime::now() + Duration::from_secs(2);
    let date = http_date(soon);
    let server = Server::start(vec![
        Reply::text(503, "maintenance").with_header("retry-after", &date),
        ok(),
    ])
    .await;
    let model = model(&server, "openai", json!({"stream": false}), json!({}));
    let (reply, deltas) = complete(&model, &hello()).await;
    assert_eq!(reply.unwrap().content, "fine");
    let retries = retries(&deltas);
    assert_eq!(retries.len(), 1, "{retries:?}");
    // The date has whole seconds: the wait is up to 2 s, less the time the request took.
    assert!((500..=2000).contains(&retries[0].1), "{retries:?}");
}

#[tokio::test]
async fn a_retry_after_longer_than_max_retry_wait_is_not_waited_for() {
    let server =
        Server::start(vec![Reply::text(429, "later").with_header("retry-after", "120"), ok()])
            .await;
    let patient = model(&server, "openai", json!({"stream": false}), json!({}));
    let started = std::time::Instant::now();
    let (reply, deltas) = complete(&patient, &hello()).await;
    let error = reply.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!((error.kind, error.status), (ModelErrorKind::RateLimit, Some(429)));
    assert!(error.message.contains("max_retry_wait_seconds"), "{}", error.message);
    assert_eq!(error.retry_after, Some(Duration::from_secs(120)));
    assert!(retries(&deltas).is_empty());
    assert_eq!(server.requests().len(), 1);

    // `max_retry_wait_seconds` raises (or lowers) the bound.
    let server =
        Server::start(vec![Reply::text(503, "later").with_header("retry-after", "1"), ok()]).await;
    let impatient =
        model(&server, "openai", json!({"stream": false, "max_retry_wait_seconds": 0}), json!({}));
    assert!(complete(&impatient, &hello()).await.0.is_err());
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn retry_after_retries_are_bounded_by_max_attempts() {
    let limited = || Reply::text(429, "again").with_header("retry-after-ms", "10");
    let server = Server::start(vec![limited(), limited(), limited(), ok()]).await;
    let model = model(&server, "openai", json!({"stream": false}), json!({}));
    let (reply, deltas) = complete(&model, &hello()).await;
    assert_eq!(reply.unwrap_err().status, Some(429));
    assert_eq!(server.requests().len() as u32, rein_model::MAX_ATTEMPTS);
    let attempts: Vec<u32> = retries(&deltas).iter().map(|(attempt, ..)| *attempt).collect();
    assert_eq!(attempts, [2, 3]);
}

#[tokio::test]
async fn a_connection_closed_before_the_first_byte_is_retried_once() {
    let ok_raw = |text: &str| {
        let body = json!({"choices": [{"message": {"content": text}, "finish_reason": "stop"}]})
            .to_string();
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    };
    let (url, served, _task) = raw_server(vec![Vec::new(), ok_raw("second try")]).await;
    let config =
        json!({"llm_models": [{"value": "m", "endpoint": format!("{url}/v1"), "stream": false}]});
    let model = registry(config).default_model();
    let (reply, deltas) = complete(&model, &hello()).await;
    assert_eq!(reply.unwrap().content, "second try");
    assert_eq!(*served.lock().unwrap(), 2);
    let retries = retries(&deltas);
    assert_eq!(retries.len(), 1, "{retries:?}");
    assert_eq!((retries[0].0, retries[0].1), (2, 0));

    // Closed twice: the second failure is shown.
    let (url, served, _task) = raw_server(vec![Vec::new(), Vec::new(), ok_raw("never")]).await;
    let config =
        json!({"llm_models": [{"value": "m", "endpoint": format!("{url}/v1"), "stream": false}]});
    let error = complete(&registry(config).default_model(), &hello()).await.0.unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Retryable);
    assert_eq!(*served.lock().unwrap(), 2);
}

/// `t` as an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`).
fn http_date(t: std::time::SystemTime) -> String {
    let secs = t.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let weekday = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][days.rem_euclid(7) as usize];
    let months =
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    format!(
        "{weekday}, {day:02} {} {year} {:02}:{:02}:{:02} GMT",
        months[(month - 1) as usize],
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}
