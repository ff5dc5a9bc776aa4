//! The context budget: level choice, what each level keeps, counting cache, usage correction.

use rein_context::{
    BudgetConfig, ContextBudget, Level, PrepareInput, Prepared, Provider, Tokenizer, validate,
};
use rein_protocol::{Message, ModelInfo, ToolCall, ToolSpec, Usage};

/// A model counted by the byte estimate (fast and easy to reason about) with a window.
fn model(window: u64) -> ModelInfo {
    let mut model = ModelInfo::named("test-model");
    model.context_window = Some(window);
    model.tokenizer = Some("estimate".into());
    model
}

fn config() -> BudgetConfig {
    let mut config = BudgetConfig::default();
    config.answer_reserve = Some(0);
    config
}

fn prepare(
    budget: &mut ContextBudget,
    system: &[Message],
    history: &[Message],
    model: &ModelInfo,
    min: Level,
) -> Prepared {
    let prepared = budget.prepare(&PrepareInput {
        system,
        history,
        pinned: &[],
        tools: &[],
        model,
        min_level: min,
    });
    validate(&prepared.messages, budget.config().provider)
        .expect("prepared messages are well formed");
    prepared
}

/// `pairs` user/assistant exchanges of about 150 estimated tokens per message.
fn chat(pairs: usize) -> Vec<Message> {
    let text = "word ".repeat(100);
    (0..pairs)
        .flat_map(|i| {
            [Message::user(format!("q{i} {text}")), Message::assistant(format!("a{i} {text}"))]
        })
        .chain([Message::user("the current question")])
        .collect()
}

fn system() -> Vec<Message> {
    vec![Message::system("You are a careful assistant.")]
}

#[test]
fn each_level_keeps_what_it_says() {
    let history = chat(30); // 61 messages, about 9,000 tokens
    let cases = [
        (20_000, Level::Full, 61),
        (6_000, Level::Compact, 27 + 1),
        (3_000, Level::Tight, 11 + 1),
        (1_000, Level::Minimal, 3 + 1),
    ];
    for (window, level, kept) in cases {
        let mut budget = ContextBudget::new(config());
        let prepared = prepare(&mut budget, &system(), &history, &model(window), Level::Full);
        assert_eq!(prepared.level, level, "window {window}");
        assert!(prepared.fits);
        assert!(prepared.estimated_tokens <= window);
        assert_eq!(prepared.budget_tokens, window);
        let conversation = &prepared.messages[1..];
        let note = usize::from(level != Level::Full);
        assert_eq!(conversation.len(), kept + note, "window {window}");
        assert_eq!(prepared.dropped_messages, 61 - kept);
        assert_eq!(prepared.messages[0], system()[0]);
        assert_eq!(prepared.messages.last(), history.last(), "the current message is last");
        if note == 1 {
            let text = conversation[0].text();
            assert!(text.starts_with(&format!("[{} earlier messages", 61 - kept)), "{text}");
        }
    }
}

#[test]
fn min_level_is_never_loosened() {
    let history = chat(30);
    let mut budget = ContextBudget::new(config());
    let prepared = prepare(&mut budget, &system(), &history, &model(1_000_000), Level::Tight);
    assert_eq!(prepared.level, Level::Tight);
    assert_eq!(prepared.retry_level(), Some(Level::Minimal));
    let prepared = prepare(&mut budget, &system(), &history, &model(1_000_000), Level::Minimal);
    assert_eq!(prepared.level, Level::Minimal);
    assert_eq!(prepared.retry_level(), None);
}

#[test]
fn minimal_drops_more_until_it_fits_but_keeps_the_fixed_part() {
    let history = chat(30);
    let mut budget = ContextBudget::new(config());
    let prepared = prepare(&mut budget, &system(), &history, &model(60), Level::Full);
    assert_eq!(prepared.level, Level::Minimal);
    assert!(prepared.fits, "{} > 60", prepared.estimated_tokens);
    assert_eq!(prepared.messages, vec![system()[0].clone(), Message::user("the current question")]);

    // Even when nothing fits, the system prompt and the current message are sent.
    let prepared = prepare(&mut budget, &system(), &history, &model(5), Level::Full);
    assert!(!prepared.fits);
    assert_eq!(prepared.messages, vec![system()[0].clone(), Message::user("the current question")]);
}

fn call(id: &str) -> Message {
    Message::assistant_calls(None, vec![ToolCall::new(id, "read", rein_protocol::Arguments::new())])
}

#[test]
fn long_tool_results_are_cut_with_a_pointer_at_every_level() {
    let long = "x".repeat(20_000);
    let history =
        vec![Message::user("read the log"), call("c1"), Message::tool("c1", long.clone(), false)];
    let mut budget = ContextBudget::new(config());
    let prepared = prepare(&mut budget, &system(), &history, &model(1_000_000), Level::Full);
    assert_eq!(prepared.level, Level::Full);
    let Message::Tool { content, .. } = &prepared.messages[3] else { panic!("a tool result") };
    let text = content.text();
    assert_eq!(
        text,
        format!(
            "{}\n[... 4000 more characters: read_tool_result(\"c1\", 16000, 16000)]",
            &long[..16_000]
        )
    );
    assert_eq!(history[2].text(), long, "the stored result is whole");
    assert_eq!(prepared.cut_results, 1, "the loop offers read_tool_result");

    let prepared = prepare(&mut budget, &system(), &history, &model(1_000_000), Level::Compact);
    assert!(
        prepared.messages[3]
            .text()
            .ends_with("[... 17800 more characters: read_tool_result(\"c1\", 2200, 2200)]")
    );
    let prepared = prepare(&mut budget, &system(), &history, &model(1_000_000), Level::Minimal);
    assert!(
        prepared.messages[3]
            .text()
            .ends_with("[... 19600 more characters: read_tool_result(\"c1\", 400, 400)]")
    );

    let mut small = config();
    small.tool_result_max_chars = 100;
    let mut budget = ContextBudget::new(small);
    let prepared = prepare(&mut budget, &system(), &history, &model(1_000_000), Level::Full);
    assert!(
        prepared.messages[3]
            .text()
            .ends_with("[... 19900 more characters: read_tool_result(\"c1\", 100, 100)]")
    );
}

#[test]
fn a_prompt_without_a_cut_result_says_so() {
    let history = vec![
        Message::user("read the log"),
        call("c1"),
        Message::tool("c1", "short", false),
        Message::assistant("read"),
    ];
    let mut budget = ContextBudget::new(config());
    for level in [Level::Full, Level::Minimal] {
        let prepared = prepare(&mut budget, &system(), &history, &model(1_000_000), level);
        assert_eq!(prepared.cut_results, 0, "{level:?}");
    }
}

#[test]
fn the_current_turn_keeps_its_user_message_and_calls_stay_with_results() {
    // An old exchange, then the current message followed by twenty call/result pairs.
    let mut history = chat(3);
    for i in 0..20 {
        history.push(call(&format!("c{i}")));
        history.push(Message::tool(format!("c{i}"), format!("result {i}"), false));
    }
    let mut budget = ContextBudget::new(config());
    let prepared = prepare(&mut budget, &system(), &history, &model(1_000_000), Level::Compact);
    // system, note, current user message, then the newest 14 pairs (28 messages).
    assert_eq!(prepared.messages.len(), 2 + 1 + 28);
    assert_eq!(prepared.messages[2], Message::user("the current question"));
    assert_eq!(prepared.messages[3], call("c6"));
    let prepared = prepare(&mut budget, &system(), &history, &model(1_000_000), Level::Minimal);
    assert_eq!(prepared.messages[2], Message::user("the current question"));
    assert_eq!(&prepared.messages[3..], &history[history.len() - 4..]);

    // A group larger than the level's count is kept whole when it is the newest.
    let calls: Vec<ToolCall> = (0..6)
        .map(|i| ToolCall::new(format!("p{i}"), "read", rein_protocol::Arguments::new()))
        .collect();
    let mut history = vec![Message::user("six at once"), Message::assistant_calls(None, calls)];
    history.extend((0..6).map(|i| Message::tool(format!("p{i}"), "ok", false)));
    let prepared = prepare(&mut budget, &system(), &history, &model(1_000_000), Level::Minimal);
    assert_eq!(&prepared.messages[1..], &history[..]);
}

#[test]
fn counts_are_cached_per_message() {
    let mut history = chat(50);
    let mut budget = ContextBudget::new(config());
    let first = prepare(&mut budget, &system(), &history, &model(1_000_000), Level::Full);
    assert_eq!(budget.last_counted(), history.len() + 1);
    let again = prepare(&mut budget, &system(), &history, &model(1_000_000), Level::Full);
    assert_eq!(budget.last_counted(), 0);
    assert_eq!(again.estimated_tokens, first.estimated_tokens);

    history.push(Message::assistant("an answer"));
    history.push(Message::user("another question"));
    prepare(&mut budget, &system(), &history, &model(1_000_000), Level::Full);
    assert_eq!(budget.last_counted(), 2, "only the new messages are counted");

    // A replaced history is counted again where it differs.
    history[10] = Message::user("edited");
    let replaced = prepare(&mut budget, &system(), &history, &model(1_000_000), Level::Full);
    assert_eq!(budget.last_counted(), 1);
    let mut fresh = ContextBudget::new(config());
    let recount = prepare(&mut fresh, &system(), &history, &model(1_000_000), Level::Full);
    assert_eq!(replaced.estimated_tokens, recount.estimated_tokens);

    // Another tokenizer starts over.
    let mut gpt = model(1_000_000);
    gpt.tokenizer = None;
    gpt.name = "gpt-4o".into();
    prepare(&mut budget, &system(), &history, &gpt, Level::Full);
    assert_eq!(budget.last_counted(), history.len() + 1);
}

#[test]
fn only_what_a_level_needs_is_counted() {
    // 2,001 messages of about 150 tokens: deciding that the whole does not fit a 6,000-token
    // window stops counting after the newest few dozen.
    let history = chat(1_000);
    let mut budget = ContextBudget::new(config());
    let prepared = prepare(&mut budget, &system(), &history, &model(6_000), Level::Full);
    assert_eq!(prepared.level, Level::Compact);
    assert!(budget.last_counted() < 60, "counted {}", budget.last_counted());
}

#[test]
fn reported_usage_corrects_the_estimate() {
    let history = chat(5);
    let mut budget = ContextBudget::new(config());
    let first = prepare(&mut budget, &system(), &history, &model(1_000_000), Level::Full);
    budget.record_usage(&Usage::new(first.estimated_tokens * 2, 10));
    assert!((budget.correction() - 2.0).abs() < 1e-9);
    let second = prepare(&mut budget, &system(), &history, &model(1_000_000), Level::Full);
    assert_eq!(second.estimated_tokens, first.estimated_tokens * 2);
    // With the correction, a window that fitted before no longer does at full.
    let tighter =
        prepare(&mut budget, &system(), &history, &model(first.estimated_tokens + 10), Level::Full);
    assert_ne!(tighter.level, Level::Full);
    // Absurd reports are clamped.
    budget.record_usage(&Usage::new(1, 0));
    assert!((budget.correction() - 0.5).abs() < 1e-9);
    budget.record_usage(&Usage::default());
    assert!((budget.correction() - 0.5).abs() < 1e-9, "no prompt tokens, no change");
}

#[test]
fn tools_and_pinned_context_count_and_survive() {
    let history = chat(10);
    let tools = vec![ToolSpec::without_arguments("now", "The current time.")];
    let pinned = vec![Message::user("The user is looking at AAPL.")];
    let mut budget = ContextBudget::new(config().with_provider(Provider::Anthropic));
    let input = |model: &ModelInfo, tools: &[ToolSpec]| {
        let mut budget = ContextBudget::new(config());
        budget.prepare(&PrepareInput {
            system: &system(),
            history: &history,
            pinned: &pinned,
            tools,
            model,
            min_level: Level::Full,
        })
    };
    let without = input(&model(1_000_000), &[]);
    let with = input(&model(1_000_000), &tools);
    assert!(with.estimated_tokens > without.estimated_tokens);
    assert_eq!(without.messages[1], pinned[0]);

    let system = system();
    let prepared = budget.prepare(&PrepareInput {
        system: &system,
        history: &history,
        pinned: &pinned,
        tools: &tools,
        model: &model(80),
        min_level: Level::Full,
    });
    assert_eq!(prepared.level, Level::Minimal);
    validate(&prepared.messages, Provider::Anthropic).unwrap();
    // Anthropic: the pinned user text and the current message merge into one user turn.
    assert_eq!(prepared.messages.len(), 2);
    assert_eq!(prepared.messages[1].text(), "The user is looking at AAPL.\n\nthe current question");
}

#[test]
fn the_budget_is_the_window_less_the_answer_reserve() {
    let config = BudgetConfig::default();
    let mut model = ModelInfo::named("claude-sonnet-4");
    assert_eq!(config.budget_tokens(&model), 32_768 - 4_096, "no window: the default");
    model.context_window = Some(200_000);
    model.max_output_tokens = Some(64_000);
    assert_eq!(config.budget_tokens(&model), 136_000);
    model.max_output_tokens = Some(150_000);
    assert_eq!(config.budget_tokens(&model), 100_000, "the reserve is at most half the window");
}

#[test]
fn tokenizers_by_model() {
    let tokenizer = |name: &str| Tokenizer::for_model(&ModelInfo::named(name));
    assert_eq!(tokenizer("gpt-4o-mini"), Tokenizer::O200kBase);
    assert_eq!(tokenizer("openai/gpt-4.1"), Tokenizer::O200kBase);
    assert_eq!(tokenizer("gpt-4-0613"), Tokenizer::Cl100kBase);
    assert_eq!(tokenizer("gpt-3.5-turbo"), Tokenizer::Cl100kBase);
    assert_eq!(tokenizer("claude-sonnet-4-5"), Tokenizer::Estimate);
    assert_eq!(tokenizer("gemini-2.5-flash"), Tokenizer::Estimate);
    assert_eq!(tokenizer("qwen3-8b"), Tokenizer::O200kBase, "unknown: the default");
    let mut model = ModelInfo::named("gpt-4o");
    model.tokenizer = Some("cl100k_base".into());
    assert_eq!(Tokenizer::for_model(&model), Tokenizer::Cl100kBase);
    model.tokenizer = Some("llama3".into());
    assert_eq!(Tokenizer::for_model(&model), Tokenizer::Estimate);
    assert_eq!(Tokenizer::O200kBase.count("The quick brown fox jumps over the lazy dog."), 10);
    assert_eq!(Tokenizer::Estimate.count("0123456789"), 3);
}

#[test]
fn a_replaced_history_that_fools_the_cache_is_still_sent_well_formed() {
    // Two histories of the same shape (roles and lengths everywhere) whose old results answer
    // different calls: the cache trusts old messages by shape, and the output check catches it.
    let build = |first: &str, second: &str| {
        let mut history = vec![
            Message::user("go"),
            call("aa"),
            Message::tool(first, "r1", false),
            call("bb"),
            Message::tool(second, "r2", false),
        ];
        history.extend(chat(40));
        history
    };
    let original = build("aa", "bb");
    let replaced = build("bb", "aa");
    let mut budget = ContextBudget::new(config());
    prepare(&mut budget, &system(), &original, &model(1_000_000), Level::Full);
    let cached = prepare(&mut budget, &system(), &replaced, &model(1_000_000), Level::Full);
    // Rebuilt from scratch: every message counted again but the orphan, which is not sent.
    assert_eq!(budget.last_counted(), replaced.len() - 1);
    let fresh = prepare(
        &mut ContextBudget::new(config()),
        &system(),
        &replaced,
        &model(1_000_000),
        Level::Full,
    );
    assert_eq!(cached, fresh);
    // `bb` was answered before its call (an orphan, dropped); `aa` got the later result.
    assert_eq!(
        &cached.messages[1..5],
        &[Message::user("go"), call("aa"), Message::tool("aa", "r2", false), call("bb")]
    );
}
