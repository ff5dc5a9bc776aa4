//! `cargo xtask bench context`: request preparation for long sessions, cold and warm, and
//! token counting throughput.

use std::time::Instant;

use rein_context::{
    BudgetConfig, ContextBudget, Level, PrepareInput, Provider, Tokenizer, normalize,
};
use rein_protocol::{JsonObject, Message, ModelInfo, ToolCall, ToolSpec};

use super::{Figures, rng::Rng};

const WORDS: &[&str] = &[
    "the",
    "revenue",
    "grew",
    "by",
    "percent",
    "in",
    "quarter",
    "while",
    "margins",
    "fell",
    "because",
    "of",
    "higher",
    "costs",
    "Überblick",
    "データ",
    "cash",
    "flow",
    "segment",
    "guidance",
    "{\"ticker\":",
    "\"AAPL\"}",
    "2024-06-30",
    "12.5%",
    "report",
    "filing",
    "section",
    "risk",
    "factors",
    "and",
];

fn prose(rng: &mut Rng, chars: usize) -> String {
    let mut text = String::with_capacity(chars + 16);
    while text.len() < chars {
        text.push_str(WORDS[rng.below(WORDS.len())]);
        text.push(if rng.below(12) == 0 { '\n' } else { ' ' });
    }
    text
}

/// One exchange: a question, one to three steps of tool calls with results, an answer.
fn exchange(rng: &mut Rng, turn: usize, out: &mut Vec<Message>) {
    let size = 80 + rng.below(300);
    out.push(Message::user(prose(rng, size)));
    for step in 0..rng.below(3) {
        let calls: Vec<ToolCall> = (0..1 + rng.below(2))
            .map(|k| {
                let mut arguments = JsonObject::new();
                arguments.insert("query".into(), prose(rng, 30).into());
                ToolCall::new(format!("call_{turn}_{step}_{k}"), "search_filings", arguments)
            })
            .collect();
        let ids: Vec<String> = calls.iter().map(|call| call.id.clone()).collect();
        out.push(Message::assistant_calls(None, calls));
        for id in ids {
            let size = if rng.below(20) == 0 { 20_000 } else { 300 + rng.below(2_500) };
            out.push(Message::tool(id, prose(rng, size), false));
        }
    }
    let size = 200 + rng.below(800);
    out.push(Message::assistant(prose(rng, size)));
}

fn session(messages: usize, seed: u64) -> Vec<Message> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::with_capacity(messages + 16);
    let mut turn = 0;
    while out.len() < messages {
        exchange(&mut rng, turn, &mut out);
        turn += 1;
    }
    out.truncate(messages);
    out.push(Message::user("What changed since the last filing?"));
    out
}

fn tools() -> Vec<ToolSpec> {
    (0..12)
        .map(|i| {
            ToolSpec::without_arguments(
                format!("tool_{i}"),
                format!("Tool number {i}, which does a thing."),
            )
        })
        .collect()
}

fn millis(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e3
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Cold (first prepare, every count new) and warm (two new messages, then prepare) times.
fn prepare_times(messages: usize, window: u64, rounds: usize) -> (f64, f64, Level, u64) {
    let mut history = session(messages, 42 + messages as u64);
    let system = vec![Message::system("You are a financial research assistant. Cite filings.")];
    let tools = tools();
    let mut model = ModelInfo::named("gpt-4o");
    model.context_window = Some(window);
    model.max_output_tokens = Some(16_384);
    let mut budget = ContextBudget::new(BudgetConfig::default().with_provider(Provider::OpenAi));

    let start = Instant::now();
    let prepared = budget.prepare(&PrepareInput {
        system: &system,
        history: &history,
        pinned: &[],
        tools: &tools,
        model: &model,
        min_level: Level::Full,
    });
    let cold = millis(start);
    std::hint::black_box(&prepared);

    let mut rng = Rng::new(7);
    let mut warm = Vec::with_capacity(rounds);
    let mut level = prepared.level;
    let mut estimated = prepared.estimated_tokens;
    for _ in 0..rounds {
        history.push(Message::assistant(prose(&mut rng, 300)));
        history.push(Message::user(prose(&mut rng, 120)));
        let start = Instant::now();
        let prepared = budget.prepare(&PrepareInput {
            system: &system,
            history: &history,
            pinned: &[],
            tools: &tools,
            model: &model,
            min_level: Level::Full,
        });
        warm.push(millis(start));
        level = prepared.level;
        estimated = prepared.estimated_tokens;
        std::hint::black_box(&prepared);
    }
    (cold, median(warm), level, estimated)
}

/// Token counting throughput in MB/s over the texts of a session.
fn counting_rate(tokenizer: Tokenizer, texts: &[String]) -> f64 {
    let bytes: usize = texts.iter().map(String::len).sum();
    let start = Instant::now();
    let tokens: u64 = texts.iter().map(|text| tokenizer.count(text)).sum();
    std::hint::black_box(tokens);
    bytes as f64 / 1e6 / start.elapsed().as_secs_f64()
}

pub(crate) fn run() -> anyhow::Result<Figures> {
    let mut figures = Figures::new();

    // Building an encoder happens once per process, on first use.
    for (name, tokenizer) in [("o200k", Tokenizer::O200kBase), ("cl100k", Tokenizer::Cl100kBase)] {
        let start = Instant::now();
        std::hint::black_box(tokenizer.count("warm up"));
        figures.push((format!("encoder_build_{name}_ms"), millis(start)));
    }

    let texts: Vec<String> = session(2_000, 1).iter().map(Message::text).collect();
    let megabytes = texts.iter().map(String::len).sum::<usize>() as f64 / 1e6;
    figures.push(("count_corpus_mb".into(), megabytes));
    figures.push(("count_o200k_mb_per_s".into(), counting_rate(Tokenizer::O200kBase, &texts)));
    figures.push(("count_cl100k_mb_per_s".into(), counting_rate(Tokenizer::Cl100kBase, &texts)));
    figures.push(("count_estimate_mb_per_s".into(), counting_rate(Tokenizer::Estimate, &texts)));

    for (label, messages, rounds) in [("1k", 1_000, 21), ("10k", 10_000, 21), ("100k", 100_000, 5)]
    {
        let (cold, warm, level, estimated) = prepare_times(messages, 128_000, rounds);
        figures.push((format!("prepare_{label}_cold_ms"), cold));
        figures.push((format!("prepare_{label}_warm_ms"), warm));
        figures.push((format!("prepare_{label}_level"), level_number(level)));
        figures.push((format!("prepare_{label}_estimated_tokens"), estimated as f64));
    }

    // The whole 10k session at `Full` (a window large enough for it): every message is copied.
    let (_, warm, level, _) = prepare_times(10_000, 100_000_000, 11);
    anyhow::ensure!(level == Level::Full, "expected the full level, got {level}");
    figures.push(("prepare_10k_full_level_warm_ms".into(), warm));

    let history = session(10_000, 3);
    let start = Instant::now();
    std::hint::black_box(normalize(&history, Provider::Anthropic));
    figures.push(("normalize_10k_ms".into(), millis(start)));
    Ok(figures)
}

/// Levels as numbers for the figures file: 0 full, 1 compact, 2 tight, 3 minimal.
fn level_number(level: Level) -> f64 {
    Level::ALL.iter().position(|l| *l == level).unwrap_or(0) as f64
}
