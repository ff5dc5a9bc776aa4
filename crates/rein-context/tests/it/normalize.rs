//! Data-driven normalizer cases: each `test_data/normalize/*.json` holds an input transcript
//! and the expected output per provider.

use std::collections::BTreeMap;

use rein_context::{Provider, normalize, validate};
use rein_protocol::Message;

#[derive(serde::Deserialize)]
struct Case {
    rule: String,
    input: Vec<Message>,
    /// Keyed by space-separated provider names (`openai`, `anthropic`, `gemini`) or `all`.
    expected: BTreeMap<String, Vec<Message>>,
}

fn provider_name(provider: Provider) -> &'static str {
    match provider {
        Provider::OpenAi => "openai",
        Provider::Anthropic => "anthropic",
        Provider::Gemini => "gemini",
        _ => "other",
    }
}

fn expected_for(case: &Case, provider: Provider) -> Option<&Vec<Message>> {
    case.expected.iter().find_map(|(key, messages)| {
        key.split_whitespace()
            .any(|name| name == "all" || name == provider_name(provider))
            .then_some(messages)
    })
}

fn check(name: &str, case: &Case) {
    for provider in Provider::ALL {
        let expected = expected_for(case, provider)
            .unwrap_or_else(|| panic!("{name}: no expected output for {provider:?}"));
        let input_before = case.input.clone();
        let actual = normalize(&case.input, provider);
        assert_eq!(case.input, input_before, "{name}: the input was changed");
        assert_eq!(
            &actual,
            expected,
            "{name} ({provider:?}): {}\nactual:\n{}",
            case.rule,
            serde_json::to_string_pretty(&actual).unwrap()
        );
        validate(&actual, provider)
            .unwrap_or_else(|error| panic!("{name} ({provider:?}): {error}"));
        // Normalizing is idempotent.
        assert_eq!(normalize(&actual, provider), actual, "{name} ({provider:?}): not idempotent");
    }
}

#[test]
fn cases() {
    let mut seen = 0;
    let mut entries: Vec<_> = std::fs::read_dir(crate::test_data("normalize"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let case: Case = serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
            .unwrap_or_else(|error| panic!("{name}: {error}"));
        check(&name, &case);
        seen += 1;
    }
    assert!(seen >= 10, "only {seen} normalizer cases found");
}

#[test]
fn validate_names_the_problem() {
    let transcript = vec![
        Message::user("go"),
        Message::assistant_calls(
            None,
            vec![rein_protocol::ToolCall::new("a", "f", rein_protocol::Arguments::new())],
        ),
        Message::user("next"),
    ];
    let error = validate(&transcript, Provider::OpenAi).unwrap_err();
    assert_eq!(
        error.to_string(),
        "malformed transcript at message 1: tool call `a` is not followed by its result"
    );
    let error = validate(&[Message::assistant("hi")], Provider::Anthropic).unwrap_err();
    assert_eq!(
        error.to_string(),
        "malformed transcript at message 0: the first message after the system text is not a user message"
    );
    assert!(validate(&[Message::assistant("hi")], Provider::OpenAi).is_ok());
}

#[test]
fn providers_by_name() {
    assert_eq!(Provider::from_name("OpenAI"), Some(Provider::OpenAi));
    assert_eq!(Provider::from_name("anthropic"), Some(Provider::Anthropic));
    assert_eq!(Provider::from_name(" google "), Some(Provider::Gemini));
    assert_eq!(Provider::from_name("cohere"), None);
}
