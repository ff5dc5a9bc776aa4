//! `cargo xtask bench recover`: recovery throughput on a realistic corpus, and time per adversarial shape.
//!
//! Wall-clock figures (`_ms`, `_mb_per_s`) are best-of-N; on a shared machine they are stretched
//! by other load, so the CPU-time figures (`_cpu_ms`, `_cpu_mb_per_s`) are reported beside them.

use std::time::Instant;

use rein_protocol::RawToolCall;
use rein_recover::{RawReply, fuzz, recover};

use super::{Figures, rng::Rng};

const TOOLS: &[&str] =
    &["query", "show_layer", "hide_layer", "list_datasets", "get_schema", "fly_to", "set_style"];
const CORPUS_BYTES: usize = 10 * 1024 * 1024 + 64 * 1024;

const WORDS: &[&str] = &[
    "the",
    "protected",
    "areas",
    "in",
    "California",
    "cover",
    "about",
    "percent",
    "of",
    "land",
    "and",
    "most",
    "are",
    "managed",
    "by",
    "federal",
    "agencies",
    "I",
    "will",
    "look",
    "at",
    "dataset",
    "layer",
    "map",
    "shows",
    "which",
    "counties",
    "have",
    "highest",
    "share",
    "(see",
    "table)",
    "results:",
    "query",
    "returned",
    "rows",
    "with",
    "a",
    "median",
    "value",
    "{approx.}",
    "[1]",
    "note",
    "that",
    "\"name\"",
    "field",
    "is",
    "the",
    "label",
    "<b>bold</b>",
];

fn sentence(rng: &mut Rng) -> String {
    let length = 6 + rng.below(18);
    let words: Vec<&str> = (0..length).map(|_| rng.pick(WORDS)).collect();
    format!("{}.", words.join(" "))
}

fn paragraph(rng: &mut Rng) -> String {
    (0..2 + rng.below(5)).map(|_| sentence(rng)).collect::<Vec<_>>().join(" ")
}

fn call_text(rng: &mut Rng) -> String {
    let tool = rng.pick(TOOLS);
    let arguments = format!(
        r#"{{"sql":"SELECT name, area FROM parks WHERE state = 'CA' LIMIT {}","layer_id":"parks"}}"#,
        rng.below(100)
    );
    match rng.below(10) {
        0 => format!(
            "<tool_call>\n{{\"name\": \"{tool}\", \"arguments\": {arguments}}}\n</tool_call>"
        ),
        1 => format!(
            "<tool_call>{{\"type\":\"function\",\"function\":{{\"name\":\"{tool}\",\"arguments\":{}}}}}</parameter>",
            serde_json::json!(arguments)
        ),
        2 => {
            format!("<tool_code>{{\"name\": \"{tool}\", \"parameters\": {arguments}}}</tool_code>")
        }
        3 => format!("```json\n{{\"name\": \"{tool}\", \"arguments\": {arguments}}}\n```"),
        4 => format!(
            "<tool_call>\n<function={tool}>\n<parameter=layer_id>\nparks\n</parameter>\n<parameter=sql>\nSELECT 1\n</parameter>\n</function>\n</tool_call>"
        ),
        5 => format!(
            "<function_calls>\n<invoke name=\"{tool}\">\n<parameter name=\"layer_id\">parks</parameter>\n</invoke>\n</function_calls>"
        ),
        6 => format!(
            "<tool_call>{tool}\n<arg_key>layer_id</arg_key>\n<arg_value>parks</arg_value>\n</tool_call>"
        ),
        7 => format!("{tool}(layer_id=\"parks\", zoom=5)"),
        8 => format!("<tool_call>[{{\"name\": \"{tool}\", \"arguments\": {arguments}}}]"),
        _ => format!("<function={tool}>{arguments}</function>"),
    }
}

fn message(rng: &mut Rng) -> String {
    let mut parts = Vec::new();
    if rng.below(4) == 0 {
        parts.push(format!("<think>\n{}\n</think>", paragraph(rng)));
    }
    for _ in 0..1 + rng.below(4) {
        parts.push(paragraph(rng));
    }
    if rng.below(3) == 0 {
        parts.push(call_text(rng));
        if rng.below(2) == 0 {
            parts.push(paragraph(rng));
        }
    }
    parts.join("\n\n")
}

fn corpus() -> Vec<String> {
    let mut rng = Rng::new(0x5EED_CAFE_F00D_1234);
    let mut messages = Vec::new();
    let mut total = 0;
    while total < CORPUS_BYTES {
        let message = message(&mut rng);
        total += message.len();
        messages.push(message);
    }
    messages
}

/// This process's CPU time (user + system) in ms, from `/proc/self/stat` (Linux; 10 ms ticks).
fn cpu_ms() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks * 10.0)
}

/// CPU ms per run of `run`, repeated until at least `min_cpu_ms` of CPU time is spent (the wall
/// clock is stretched on a shared machine; CPU time is what the code costs).
fn cpu_ms_per_run(min_cpu_ms: f64, max_runs: usize, mut run: impl FnMut()) -> Option<f64> {
    let start = cpu_ms()?;
    let mut runs = 0;
    loop {
        run();
        runs += 1;
        let spent = cpu_ms()? - start;
        if spent >= min_cpu_ms || runs >= max_runs {
            return Some(spent / runs as f64);
        }
    }
}

fn time_ms(runs: usize, mut run: impl FnMut()) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..runs {
        let start = Instant::now();
        run();
        best = best.min(start.elapsed().as_secs_f64() * 1000.0);
    }
    best
}

pub(crate) fn run() -> anyhow::Result<Figures> {
    let mut figures = Figures::new();
    let messages = corpus();
    let bytes: usize = messages.iter().map(String::len).sum();
    let native = [RawToolCall::new("call_1", "query", r#"{"sql":"SELECT 1"}}"#)];
    let mut calls = 0usize;
    let ms = time_ms(3, || {
        calls = 0;
        for (index, content) in messages.iter().enumerate() {
            let tool_calls: &[RawToolCall] = if index % 16 == 0 { &native } else { &[] };
            let reply = RawReply { content, reasoning_content: None, tool_calls };
            calls += recover(&reply, TOOLS).calls.len();
        }
    });
    let mb = bytes as f64 / (1024.0 * 1024.0);
    let cpu = cpu_ms_per_run(1000.0, 20, || {
        for content in &messages {
            std::hint::black_box(recover(&RawReply { content, ..RawReply::default() }, TOOLS));
        }
    });
    if let Some(cpu) = cpu {
        println!("realistic corpus: {cpu:.1} CPU ms per pass");
        figures.push(("realistic_cpu_ms".into(), cpu));
        figures.push(("realistic_cpu_mb_per_s".into(), mb / (cpu / 1000.0)));
    }
    println!(
        "realistic corpus: {} messages, {mb:.2} MiB, {calls} calls, {ms:.1} ms",
        messages.len()
    );
    figures.push(("realistic_corpus_mb".into(), mb));
    figures.push(("realistic_messages_count".into(), messages.len() as f64));
    figures.push(("realistic_calls_count".into(), calls as f64));
    figures.push(("realistic_ms".into(), ms));
    figures.push(("realistic_mb_per_s".into(), mb / (ms / 1000.0)));

    let mut worst_1mb: f64 = 0.0;
    let mut worst_1mb_cpu: f64 = 0.0;
    for shape in fuzz::ADVERSARIAL_SHAPES {
        for (label, size, runs) in
            [("100kb", 100 * 1024, 5), ("1mb", 1024 * 1024, 3), ("4mb", 4 * 1024 * 1024, 1)]
        {
            let Some(content) = fuzz::adversarial(shape, size) else {
                anyhow::bail!("unknown shape {shape}")
            };
            let ms = time_ms(runs, || {
                std::hint::black_box(recover(
                    &RawReply { content: &content, ..RawReply::default() },
                    TOOLS,
                ));
            });
            let mut cpu_note = String::new();
            if label == "1mb" {
                worst_1mb = worst_1mb.max(ms);
                let cpu = cpu_ms_per_run(200.0, 200, || {
                    std::hint::black_box(recover(
                        &RawReply { content: &content, ..RawReply::default() },
                        TOOLS,
                    ));
                });
                if let Some(cpu) = cpu {
                    worst_1mb_cpu = worst_1mb_cpu.max(cpu);
                    cpu_note = format!(" ({cpu:.2} CPU ms)");
                    figures.push((format!("adv_{shape}_1mb_cpu_ms"), cpu));
                }
            }
            println!("  {shape:<36} {label:>5} {ms:>9.2} ms{cpu_note}");
            figures.push((format!("adv_{shape}_{label}_ms"), ms));
        }
    }
    figures.push(("adv_worst_1mb_ms".into(), worst_1mb));
    figures.push(("adv_worst_1mb_cpu_ms".into(), worst_1mb_cpu));
    Ok(figures)
}
