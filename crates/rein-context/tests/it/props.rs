//! Properties: the normalizer always yields a well-formed transcript, the prepared request
//! fits whenever its fixed part does, and slices concatenate back to the original.

use proptest::prelude::*;
use rein_context::{
    BudgetConfig, ContextBudget, Level, PrepareInput, Provider, normalize, read_tool_result,
    validate,
};
use rein_protocol::{JsonObject, Message, ModelInfo, ToolCall};

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z ]{0,40}",
        1 => Just(String::new()),
        1 => Just(" \n\t ".to_owned()),
        2 => "\\PC{0,30}",
        1 => (any::<char>(), 16_000usize..24_000).prop_map(|(c, n)| std::iter::repeat_n(c, n).collect()),
    ]
}

/// A call id from a small pool (so that ids repeat and results go astray), or empty.
fn id() -> impl Strategy<Value = String> {
    (0u8..7).prop_map(|n| if n == 6 { String::new() } else { format!("id{n}") })
}

fn message() -> impl Strategy<Value = Message> {
    prop_oneof![
        1 => text().prop_map(Message::system),
        3 => text().prop_map(Message::user),
        2 => text().prop_map(Message::assistant),
        3 => (proptest::option::of(text()), prop::collection::vec((id(), "[a-z]{1,6}", text()), 1..4)).prop_map(
            |(content, calls)| {
                let calls = calls
                    .into_iter()
                    .map(|(id, name, value)| {
                        let mut arguments = JsonObject::new();
                        arguments.insert("q".into(), value.into());
                        ToolCall::new(id, name, arguments)
                    })
                    .collect();
                Message::assistant_calls(content, calls)
            }
        ),
        4 => (id(), text(), any::<bool>()).prop_map(|(id, text, error)| Message::tool(id, text, error)),
    ]
}

fn transcript() -> impl Strategy<Value = Vec<Message>> {
    prop::collection::vec(message(), 0..40)
}

fn provider() -> impl Strategy<Value = Provider> {
    prop::sample::select(Provider::ALL.to_vec())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn normalized_transcripts_are_well_formed(transcript in transcript()) {
        let before = transcript.clone();
        for provider in Provider::ALL {
            let normalized = normalize(&transcript, provider);
            if let Err(error) = validate(&normalized, provider) {
                return Err(TestCaseError::fail(format!("{provider:?}: {error}")));
            }
            prop_assert_eq!(&normalize(&normalized, provider), &normalized, "idempotent");
        }
        prop_assert_eq!(transcript, before, "the input is never changed");
    }

    #[test]
    fn slices_concatenate_to_the_original(text in "\\PC{0,200}", limit in 1usize..50, start in 0usize..10) {
        let total = text.chars().count();
        let start = start.min(total);
        let mut joined: String = text.chars().take(start).collect();
        let mut offset = start;
        loop {
            let slice = read_tool_result(&text, offset, limit);
            prop_assert_eq!(slice.total_chars, total);
            prop_assert_eq!(slice.offset, offset);
            prop_assert!(slice.text.chars().count() <= limit);
            joined.push_str(&slice.text);
            match slice.next_offset {
                Some(next) => {
                    prop_assert_eq!(next, offset + limit);
                    offset = next;
                }
                None => break,
            }
        }
        prop_assert_eq!(joined, text);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn prepared_requests_fit_when_the_fixed_part_fits(
        system in "[a-z ]{0,200}",
        history in transcript(),
        pinned in proptest::option::of("[a-z ]{1,80}"),
        window in 20u64..3_000,
        provider in provider(),
        min_level in prop::sample::select(Level::ALL.to_vec()),
        real_tokenizer in proptest::bool::weighted(0.2),
    ) {
        let system = vec![Message::system(system)];
        let pinned: Vec<Message> = pinned.into_iter().map(Message::user).collect();
        let mut model = ModelInfo::named("gpt-4o");
        model.context_window = Some(window);
        if !real_tokenizer {
            model.tokenizer = Some("estimate".into());
        }
        let config = BudgetConfig::default().with_provider(provider);
        fn input<'a>(system: &'a [Message], history: &'a [Message], pinned: &'a [Message], model: &'a ModelInfo, min_level: Level) -> PrepareInput<'a> {
            PrepareInput { system, history, pinned, tools: &[], model, min_level }
        }
        let prepared = ContextBudget::new(config.clone()).prepare(&input(&system, &history, &pinned, &model, min_level));
        if let Err(error) = validate(&prepared.messages, provider) {
            return Err(TestCaseError::fail(format!("{provider:?}: {error}")));
        }
        prop_assert!(prepared.level >= min_level);
        prop_assert_eq!(&prepared.messages[0], &system[0], "the system prompt leads");

        // The fixed part: system prompt, pinned context and the current (last non-blank) user message.
        let current: Vec<Message> = history
            .iter()
            .rev()
            .find(|m| matches!(m, Message::User { .. }) && !m.text().trim().is_empty())
            .cloned()
            .into_iter()
            .collect();
        let fixed = ContextBudget::new(config).prepare(&input(&system, &current, &pinned, &model, min_level));
        if fixed.fits {
            prop_assert!(prepared.fits, "fixed part {} fits but the request {} > {}", fixed.estimated_tokens, prepared.estimated_tokens, prepared.budget_tokens);
            prop_assert!(prepared.estimated_tokens <= prepared.budget_tokens);
        }
        if let Some(current) = current.first() {
            let text = current.text();
            prop_assert!(prepared.messages.iter().any(|m| m.text().contains(&text)), "the current message is sent");
        }
        // A blank pin is dropped as every blank user message is (see `normalize`).
        for pin in pinned.iter().filter(|pin| !pin.text().trim().is_empty()) {
            let text = pin.text();
            prop_assert!(prepared.messages.iter().any(|m| m.text().contains(&text)), "pinned context is sent");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// A budget kept between requests (counts and plan extended as the history grows, or
    /// rebuilt when it is replaced) prepares exactly what a fresh one does.
    #[test]
    fn cached_preparation_equals_fresh(
        history in transcript(),
        other in transcript(),
        cuts in prop::collection::vec(0usize..40, 1..5),
        window in 200u64..4_000,
        provider in provider(),
    ) {
        let system = vec![Message::system("Be brief.")];
        let mut model = ModelInfo::named("claude-test");
        model.context_window = Some(window);
        let config = BudgetConfig::default().with_provider(provider);
        let mut kept = ContextBudget::new(config.clone());
        let mut lengths: Vec<usize> = cuts.into_iter().map(|cut| cut.min(history.len())).collect();
        lengths.sort_unstable();
        lengths.push(history.len());
        let mut steps: Vec<&[Message]> = lengths.iter().map(|&len| &history[..len]).collect();
        // Then a replaced history, then the first one again.
        steps.push(&other);
        steps.push(&history);
        for step in steps {
            let input = PrepareInput { system: &system, history: step, pinned: &[], tools: &[], model: &model, min_level: Level::Full };
            let cached = kept.prepare(&input);
            let fresh = ContextBudget::new(config.clone()).prepare(&input);
            prop_assert_eq!(cached, fresh);
        }
    }
}
