//! Properties of `Redactor` on arbitrary text: it never panics, a configured secret or a
//! well-formed key never survives, redacting twice changes nothing, and adversarial inputs
//! are scanned to the end.

use proptest::prelude::*;
use rein_protocol::{REDACTED, Redactor};

/// Text built from pieces that steer the scanner into every path, including broken ones.
fn tricky_text() -> impl Strategy<Value = String> {
    let pieces = prop::sample::select(vec![
        "Bearer ",
        "Basic ",
        "bearer",
        "Authorization",
        "api_key",
        "x-api-key",
        "token",
        "key",
        "=",
        ":",
        ": ",
        "\"",
        "'",
        "\\",
        "\\\"",
        "?",
        "&",
        "sk-",
        "sk-live-",
        "AIza",
        "ghp_",
        "xoxb-",
        "AKIA",
        "eyJ",
        "eyJhbGciOiJIUzI1NiJ9",
        ".",
        "://",
        "@",
        " ",
        "\t",
        "\n",
        "\r\n",
        "abc123",
        "ABCDEFGHIJKLMNOP",
        "0123456789abcdefghij",
        "[redacted]",
        "redacted",
        "é",
        "😀",
        "null",
        "{",
        "}",
        ",",
        "-",
        "_",
        "/",
        "+",
        "==",
    ]);
    prop::collection::vec(pieces, 0..40).prop_map(|pieces| pieces.concat())
}

/// A secret with no `[` or `]`, so that no mix of text and markers can spell it again.
fn secret() -> impl Strategy<Value = String> {
    "[A-Za-z0-9_.:/+=-]{8,40}"
}

/// A well-formed key of a known shape.
fn shaped_key() -> impl Strategy<Value = String> {
    prop_oneof![
        "sk-[A-Za-z0-9]{20,48}",
        "sk-proj-[A-Za-z0-9_-]{20,60}",
        "sk-ant-api03-[A-Za-z0-9_-]{20,60}",
        "AIza[A-Za-z0-9_-]{35}",
        "ghp_[A-Za-z0-9]{36}",
        "github_pat_[A-Za-z0-9_]{40,82}",
        "xox[abpr]-[0-9]{10,12}-[A-Za-z0-9]{24}",
        "AKIA[A-Z0-9]{16}",
        "eyJ[A-Za-z0-9_-]{10,40}\\.eyJ[A-Za-z0-9_-]{10,60}\\.[A-Za-z0-9_-]{0,60}",
    ]
}

/// What may stand between a key and the text around it.
fn separator() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![" ", "\n", "\"", "(", ")", ",", ": ", "'", "\t", "<", ">"])
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn never_panics_on_any_text(
        text in any::<String>(),
        secrets in prop::collection::vec(any::<String>(), 0..4),
    ) {
        let mut redactor = Redactor::default();
        for secret in &secrets {
            redactor.add_secret(secret);
        }
        let _ = redactor.redact(&text);
        let _ = redactor.redact_secrets(&text);
        let mut value = serde_json::json!({"text": text, "api_key": text, "list": [text]});
        redactor.redact_value(&mut value);
    }

    #[test]
    fn tricky_text_is_stable(text in tricky_text()) {
        let redactor = Redactor::default();
        let once = redactor.redact(&text).into_owned();
        prop_assert_eq!(redactor.redact(&once), once.as_str(), "input: {:?}", text);
    }

    #[test]
    fn a_configured_secret_never_survives(
        before in any::<String>(),
        after in any::<String>(),
        noise in tricky_text(),
        secret in secret(),
        other in secret(),
    ) {
        let redactor = Redactor::default().with_secret(&secret).with_secret(&other);
        let text = format!("{before}{secret}{noise}{other}{after}{secret}");
        let redacted = redactor.redact(&text);
        prop_assert!(!redacted.contains(&secret), "{:?} -> {:?}", text, redacted);
        prop_assert!(!redacted.contains(&other), "{:?} -> {:?}", text, redacted);
        let exact = redactor.redact_secrets(&text);
        prop_assert!(!exact.contains(&secret), "{:?} -> {:?}", text, exact);
    }

    #[test]
    fn a_shaped_key_never_survives(
        before in tricky_text(),
        after in tricky_text(),
        open in separator(),
        close in separator(),
        key in shaped_key(),
    ) {
        let text = format!("{before}{open}{key}{close}{after}");
        let redacted = Redactor::default().redact(&text);
        prop_assert!(!redacted.contains(&key), "{:?} -> {:?}", text, redacted);
        prop_assert!(redacted.contains(REDACTED));
    }

    #[test]
    fn an_echoed_authorization_header_never_survives(
        token in "[A-Za-z0-9._~+/=-]{1,60}",
        scheme in prop::sample::select(vec!["Bearer", "bearer", "Basic", "Token"]),
        name in prop::sample::select(vec!["Authorization", "authorization", "x-api-key", "X-Goog-Api-Key"]),
        style in 0..4usize,
    ) {
        // A literal `null`, `true` or `false` is a JSON value, not a credential.
        prop_assume!(!["null", "true", "false"].contains(&token.as_str()));
        let text = match style {
            0 => format!("{name}: {scheme} {token}\r\nhost: example"),
            1 => format!(r#"{{"{name}":"{scheme} {token}"}}"#),
            2 => format!(r#"{{\"{name}\": \"{scheme} {token}\"}}"#),
            _ => format!("{{'{name}': '{scheme} {token}'}}"),
        };
        let redacted = Redactor::default().redact(&text);
        prop_assert!(
            !redacted.contains(&format!("{scheme} {token}")) && redacted.contains(REDACTED),
            "{:?} -> {:?}", text, redacted
        );
    }
}

/// Inputs built to make a backtracking or rescanning matcher quadratic, 200 kB each: the
/// scanner gets through every one and the output stays bounded. (Tests assert no timings; a
/// quadratic matcher would show here as a test that takes minutes.)
#[test]
fn adversarial_inputs_are_scanned_to_the_end() {
    const LEN: usize = 200_000;
    let mut redactor = Redactor::default();
    for index in 0..50 {
        redactor.add_secret(&format!("configured-secret-{index:04}-aaaaaaaa"));
    }
    let patterns = [
        "sk-",
        "Bearer ",
        "Bearer a",
        "api_key=",
        "\"token\": \"",
        "api_key",
        "eyJaaaaaaaaaaaa.",
        "eyJ",
        "://",
        "://a:",
        "?key=",
        "a",
        "-",
        "configured-secret-00",
        "\\\"",
        "AKIA",
    ];
    for pattern in patterns {
        let text = pattern.repeat(LEN / pattern.len());
        let redacted = redactor.redact(&text);
        assert!(redacted.len() <= text.len() + REDACTED.len() * (text.len() / 3 + 1));
    }
}
