//! `cargo xtask bench recover`: per-dialect case rates, recovery throughput on a realistic corpus
//! and on short replies in mixed dialects, streaming cost per delta, and time per adversarial
//! shape, recovered whole and streamed.
//!
//! Wall-clock figures (`_ms`, `_mb_per_s`) are best-of-N; on a shared machine they are stretched
//! by other load, so the CPU-time figures (`_cpu_ms`, `_cpu_mb_per_s`) are reported beside them.
//! `cargo xtask bench recover --callgrind` counts instructions instead (with valgrind's
//! callgrind): figures that do not move with the machine, to compare two versions of the code.

use std::time::Instant;

use rein_protocol::RawToolCall;
use rein_recover::{RawReply, Recovered, StreamEvent, StreamRecoverer, ToolSchemas, fuzz, recover};

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

/// A call in one of the special-token dialects (see `rein-recover`'s `embedded/tokens.rs`).
fn dialect_call(rng: &mut Rng) -> String {
    let tool = rng.pick(TOOLS);
    let n = rng.below(100);
    match rng.below(12) {
        0 => format!(
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.{tool}:0<|tool_call_argument_begin|>{{\"layer_id\": \"parks\", \"limit\": {n}}}<|tool_call_end|><|tool_calls_section_end|>"
        ),
        1 => format!(
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>{tool}<｜tool▁sep｜>{{\"layer_id\": \"parks\"}}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
        ),
        2 => format!("[TOOL_CALLS]{tool}[ARGS]{{\"layer_id\": \"parks\", \"limit\": {n}}}"),
        3 => format!(
            "<|channel|>commentary to=functions.{tool} <|constrain|>json<|message|>{{\"layer_id\":\"parks\"}}<|call|>"
        ),
        4 => format!(
            "<|START_ACTION|>[{{\"tool_call_id\": \"0\", \"tool_name\": \"{tool}\", \"parameters\": {{\"layer_id\": \"parks\"}}}}]<|END_ACTION|>"
        ),
        5 => format!(
            "<start_function_call>call:{tool}{{layer_id:<escape>parks<escape>,limit:{n}}}<end_function_call>"
        ),
        6 => format!(
            "<TOOLCALL>[{{\"name\": \"{tool}\", \"arguments\": {{\"layer_id\": \"parks\"}}}}]</TOOLCALL>"
        ),
        7 => format!("<|tool_call|>[{{\"name\": \"{tool}\", \"arguments\": {{\"limit\": {n}}}}}]"),
        8 => format!("[{tool}(layer_id='parks', limit={n})]"),
        9 => format!(
            "<seed:tool_call>\n<function={tool}>\n<parameter=layer_id>parks</parameter>\n</function>\n</seed:tool_call>"
        ),
        10 => format!(
            "<minimax:tool_call>\n<invoke name=\"{tool}\">\n<parameter name=\"layer_id\">parks</parameter>\n</invoke>\n</minimax:tool_call>"
        ),
        _ => call_text(rng),
    }
}

/// A short reply (about 400 bytes): a sentence or two, and one or two calls in mixed dialects.
fn short_reply(rng: &mut Rng) -> String {
    let mut parts = vec![sentence(rng)];
    for _ in 0..rng.below(3) {
        parts.push(sentence(rng));
    }
    for _ in 0..1 + rng.below(2) {
        parts.push(if rng.below(2) == 0 { dialect_call(rng) } else { call_text(rng) });
    }
    if rng.below(4) == 0 {
        parts.insert(0, format!("<think>{}</think>", sentence(rng)));
    }
    parts.join("\n")
}

fn short_corpus() -> Vec<String> {
    let mut rng = Rng::new(0x0005_1207_4EED_0400);
    let mut replies = Vec::new();
    let mut total = 0;
    while total < 2 * 1024 * 1024 {
        let reply = short_reply(&mut rng);
        total += reply.len();
        replies.push(reply);
    }
    replies
}

/// The data cases per dialect folder (`crates/rein-recover/test_data/cases/<dialect>/`): how many
/// give their expected output, of how many.
fn dialect_rates(figures: &mut Figures) -> anyhow::Result<()> {
    const CASE_TOOLS: &[&str] = &[
        "query",
        "show_layer",
        "hide_layer",
        "list_datasets",
        "get_schema",
        "fly_to",
        "set_style",
        "value_stats",
    ];
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../crates/rein-recover/test_data/cases");
    let mut dirs: Vec<_> = std::fs::read_dir(&root)?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.is_dir())
        .collect();
    dirs.sort();
    let (mut all_passed, mut all_total) = (0, 0);
    let mut line = String::new();
    for dir in dirs {
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let (mut passed, mut total) = (0, 0);
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.extension().is_none_or(|ext| ext != "txt") {
                continue;
            }
            total += 1;
            let input = std::fs::read_to_string(&path)?;
            let expected = std::fs::read_to_string(path.with_extension("out")).unwrap_or_default();
            if fuzz::case_output(&input, CASE_TOOLS) == expected {
                passed += 1;
            }
        }
        line.push_str(&format!(" {name} {passed}/{total};"));
        figures.push((format!("dialect_{name}_passed"), passed as f64));
        figures.push((format!("dialect_{name}_total"), total as f64));
        all_passed += passed;
        all_total += total;
    }
    println!("dialect cases passed:{line} all {all_passed}/{all_total}");
    figures.push(("dialect_cases_passed".into(), all_passed as f64));
    figures.push(("dialect_cases_total".into(), all_total as f64));
    Ok(())
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

/// How many timed passes each wall-clock figure is the best of. On a shared machine the passes
/// of one binary vary by half and more (on this project's 2-core machine, 40 passes of the
/// stream figure's work took 385 to 627 ns per delta, 100 passes of the short replies ran at 55
/// to 194 MB/s): the best of three or five measured the load as much as the code. A pass of the
/// short replies takes about 5 ms, of the streams 20 ms: the best of 30 and 15 still moved by a
/// tenth from one run to the next (369 to 425 MB/s, 186 to 209 ns per delta), of 60 and 30 by
/// about 2%.
const REALISTIC_PASSES: usize = 10;
const SHORT_PASSES: usize = 60;
const STREAM_PASSES: usize = 30;
/// Adversarial shapes, by size: 100 KiB, 1 MiB (the `adv_worst_1mb_ms` figure), 4 MiB.
const ADVERSARIAL_PASSES: [usize; 3] = [5, 10, 1];

/// The best wall-clock time of `runs` passes of `run`, in ms.
fn time_ms(runs: usize, mut run: impl FnMut()) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..runs {
        let start = Instant::now();
        run();
        best = best.min(start.elapsed().as_secs_f64() * 1000.0);
    }
    best
}

/// How a stream is ended (see [`stream_reply`]).
#[derive(Clone, Copy)]
enum StreamEnding {
    /// By `finish_with` the reply's own recovery, made before (as the agent loop ends it).
    With,
    /// By `finish_deltas`.
    Deltas,
    /// By `finish`, the whole text recovered.
    Whole,
}

/// Streams `content` through a [`StreamRecoverer`] in 20-byte deltas, the events released
/// drained from `released`, and ends it as `ending` says (`recovered` is the reply's own
/// recovery). How many deltas.
fn stream_reply(
    content: &str,
    recovered: &Recovered,
    released: &mut Vec<StreamEvent>,
    ending: StreamEnding,
) -> usize {
    let mut recoverer = StreamRecoverer::new(TOOLS, ToolSchemas::new());
    let mut deltas = 0;
    let mut at = 0;
    while at < content.len() {
        let mut end = (at + 20).min(content.len());
        while !content.is_char_boundary(end) {
            end += 1;
        }
        recoverer.push_into(&content[at..end], released);
        for event in released.drain(..) {
            std::hint::black_box(event);
        }
        deltas += 1;
        at = end;
    }
    match ending {
        StreamEnding::With => {
            std::hint::black_box(recoverer.finish_with(recovered));
        }
        StreamEnding::Deltas => {
            std::hint::black_box(recoverer.finish_deltas());
        }
        StreamEnding::Whole => {
            std::hint::black_box(recoverer.finish(None, &[]));
        }
    }
    deltas
}

pub(crate) fn run() -> anyhow::Result<Figures> {
    let mut figures = Figures::new();
    dialect_rates(&mut figures)?;
    let messages = corpus();
    let bytes: usize = messages.iter().map(String::len).sum();
    let native = [RawToolCall::new("call_1", "query", r#"{"sql":"SELECT 1"}}"#)];
    let mut calls = 0usize;
    let ms = time_ms(REALISTIC_PASSES, || {
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

    let short = short_corpus();
    let short_bytes: usize = short.iter().map(String::len).sum();
    let short_mb = short_bytes as f64 / (1024.0 * 1024.0);
    let mut short_calls = 0usize;
    let short_ms = time_ms(SHORT_PASSES, || {
        short_calls = 0;
        for content in &short {
            short_calls += recover(&RawReply { content, ..RawReply::default() }, TOOLS).calls.len();
        }
    });
    let mean = short_bytes as f64 / short.len() as f64;
    println!(
        "short replies: {} replies, mean {mean:.0} bytes, {short_calls} calls, {short_ms:.1} ms, {:.0} MB/s, {:.2} us per reply",
        short.len(),
        short_mb / (short_ms / 1000.0),
        short_ms * 1000.0 / short.len() as f64
    );
    if let Some(cpu) = cpu_ms_per_run(1000.0, 50, || {
        for content in &short {
            std::hint::black_box(recover(&RawReply { content, ..RawReply::default() }, TOOLS));
        }
    }) {
        println!(
            "short replies: {cpu:.1} CPU ms per pass, {:.0} CPU MB/s",
            short_mb / (cpu / 1000.0)
        );
        figures.push(("short_cpu_mb_per_s".into(), short_mb / (cpu / 1000.0)));
    }
    figures.push(("short_replies_count".into(), short.len() as f64));
    figures.push(("short_mean_bytes".into(), mean));
    figures.push(("short_calls_count".into(), short_calls as f64));
    figures.push(("short_ms".into(), short_ms));
    figures.push(("short_mb_per_s".into(), short_mb / (short_ms / 1000.0)));
    figures.push(("short_us_per_reply".into(), short_ms * 1000.0 / short.len() as f64));

    // The streaming recoverer, fed the short replies in 20-byte deltas and ended as the agent
    // loop ends it: by `finish_with` the loop's own recovery of the reply, which it makes for
    // every reply, streamed or not (made here before the clock starts: `short_mb_per_s` is its
    // cost). Then ended by `finish_deltas` (for a caller that recovers the reply after), and by
    // `finish`, the whole text recovered too.
    let recoveries = recovered(&short);
    for (figure, ending, label) in [
        ("stream_delta_ns", StreamEnding::With, "finish_with the reply's recovery"),
        ("stream_finish_deltas_delta_ns", StreamEnding::Deltas, "finish_deltas"),
        ("stream_with_recovery_delta_ns", StreamEnding::Whole, "finish, the whole text recovered"),
    ] {
        let mut deltas = 0usize;
        let stream_ms = time_ms(STREAM_PASSES, || {
            deltas = 0;
            // As the loop feeds it: one vector of released events, drained after each delta.
            let mut released = Vec::new();
            for (content, recovered) in short.iter().zip(&recoveries) {
                deltas += stream_reply(content, recovered, &mut released, ending);
            }
        });
        let delta_ns = stream_ms * 1e6 / deltas.max(1) as f64;
        println!(
            "stream: {deltas} deltas of 20 bytes, {stream_ms:.1} ms, {delta_ns:.0} ns per delta (ended by {label})"
        );
        figures.push((figure.into(), delta_ns));
    }

    let mut worst_1mb: f64 = 0.0;
    let mut worst_1mb_cpu: f64 = 0.0;
    for shape in fuzz::ADVERSARIAL_SHAPES {
        for ((label, size), runs) in
            [("100kb", 100 * 1024), ("1mb", 1024 * 1024), ("4mb", 4 * 1024 * 1024)]
                .into_iter()
                .zip(ADVERSARIAL_PASSES)
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

    // The streaming recoverer on each adversarial shape of 1 MiB in 20-byte deltas, ended by
    // `finish_deltas`: one long line the settled point cannot move through, where its
    // recovery budget keeps it linear.
    let mut stream_worst: f64 = 0.0;
    for shape in fuzz::ADVERSARIAL_SHAPES {
        let Some(content) = fuzz::adversarial(shape, 1024 * 1024) else {
            anyhow::bail!("unknown shape {shape}")
        };
        let ms = time_ms(STREAM_ADVERSARIAL_PASSES, || {
            let mut recoverer = StreamRecoverer::new(TOOLS, ToolSchemas::new());
            let mut released = Vec::new();
            let mut at = 0;
            while at < content.len() {
                let mut end = (at + 20).min(content.len());
                while !content.is_char_boundary(end) {
                    end += 1;
                }
                recoverer.push_into(&content[at..end], &mut released);
                released.clear();
                at = end;
            }
            std::hint::black_box(recoverer.finish_deltas());
        });
        println!("  stream {shape:<29}   1mb {ms:>9.2} ms");
        stream_worst = stream_worst.max(ms);
        figures.push((format!("stream_adv_{shape}_1mb_ms"), ms));
    }
    figures.push(("stream_adv_worst_1mb_ms".into(), stream_worst));
    Ok(figures)
}

/// Passes of each adversarial shape streamed (a pass of the slowest takes about 0.3 s).
const STREAM_ADVERSARIAL_PASSES: usize = 2;

/// The passes `--callgrind` counts: what each runs, and the function whose instructions are
/// counted (not inlined, so that callgrind sees it).
const COUNTED_PASSES: [(&str, &str); 4] = [
    ("short", "measured_recover"),
    ("realistic", "measured_recover"),
    ("stream", "measured_stream"),
    ("floor", "measured_floor"),
];

/// `cargo xtask bench recover --callgrind`: instructions per reply of recovering the short
/// replies and the realistic corpus, and of streaming the short replies as the agent loop ends
/// them (`stream_delta_ns`'s work), each counted by callgrind in a run of this program; and the
/// floor under the short replies' figure: building and freeing their recoveries alone.
pub(crate) fn run_callgrind() -> anyhow::Result<Figures> {
    let exe = std::env::current_exe()?;
    let out_dir = crate::project_root().join("target").join("bench");
    std::fs::create_dir_all(&out_dir)?;
    let mut figures = Figures::new();
    let (short_replies, realistic_messages) = (short_corpus().len(), corpus().len());
    for (pass, function) in COUNTED_PASSES {
        let out_file = out_dir.join(format!("callgrind.recover-{pass}.out"));
        let output = std::process::Command::new("valgrind")
            .arg("--tool=callgrind")
            .arg(format!("--callgrind-out-file={}", out_file.display()))
            .arg(format!("--toggle-collect=*{function}*"))
            .arg(&exe)
            .args(["bench", "recover", "--pass", pass])
            .output()
            .map_err(|error| {
                anyhow::anyhow!("valgrind did not run ({error}); install it (Debian: valgrind)")
            })?;
        let log = String::from_utf8_lossy(&output.stderr);
        anyhow::ensure!(
            output.status.success(),
            "the `{pass}` pass under callgrind failed:\n{log}"
        );
        let instructions = callgrind_instructions(&log)
            .ok_or_else(|| anyhow::anyhow!("no instruction count in callgrind's log:\n{log}"))?;
        let replies = if pass == "realistic" { realistic_messages } else { short_replies };
        let per_reply = instructions / replies as f64;
        println!("{pass}: {instructions:.0} instructions counted, {per_reply:.0} per reply");
        figures.push((format!("callgrind_{pass}_instructions_per_reply"), per_reply));
    }
    Ok(figures)
}

/// The instructions callgrind counted, from its log (`==PID== I   refs:      81,988,007`).
fn callgrind_instructions(log: &str) -> Option<f64> {
    log.lines()
        .find_map(|line| line.split_once("refs:"))
        .and_then(|(_, count)| count.trim().replace(',', "").parse().ok())
}

/// One pass of `--callgrind` (run under callgrind by [`run_callgrind`]).
pub(crate) fn run_pass(pass: &str) -> anyhow::Result<()> {
    match pass {
        "short" => measured_recover(&short_corpus()),
        "realistic" => measured_recover(&corpus()),
        "stream" => {
            let short = short_corpus();
            measured_stream(&short, &recovered(&short));
        }
        "floor" => {
            let recoveries: Vec<_> =
                recovered(&short_corpus()).into_iter().map(PlainRecovery::of).collect();
            measured_floor(&recoveries);
        }
        _ => anyhow::bail!("unknown pass `{pass}` (one of: short, realistic, stream, floor)"),
    }
    Ok(())
}

/// Each reply's recovery, made before a measured pass that needs them.
fn recovered(replies: &[String]) -> Vec<Recovered> {
    replies
        .iter()
        .map(|content| recover(&RawReply { content, ..RawReply::default() }, TOOLS))
        .collect()
}

#[inline(never)]
fn measured_recover(replies: &[String]) {
    for content in replies {
        std::hint::black_box(recover(&RawReply { content, ..RawReply::default() }, TOOLS));
    }
}

/// What only building the short replies' recoveries costs, and freeing them: each call's
/// arguments read from their compact JSON into the `Arguments` a `ToolCall` holds (their text,
/// checked), its id and name copied, the visible text copied. No recovery can cost less than
/// this.
#[inline(never)]
fn measured_floor(recoveries: &[PlainRecovery]) {
    for recovery in recoveries {
        let mut calls = Vec::with_capacity(recovery.calls.len());
        for call in &recovery.calls {
            let arguments =
                rein_protocol::Arguments::from_json(&call.arguments).unwrap_or_default();
            calls.push(rein_protocol::ToolCall::new(
                call.id.as_str(),
                call.name.as_str(),
                arguments,
            ));
        }
        std::hint::black_box(Recovered {
            calls,
            visible_text: recovery.visible_text.as_str().to_owned(),
            ..Recovered::default()
        });
    }
}

/// A recovery as text, what [`measured_floor`] builds a [`Recovered`] from.
struct PlainRecovery {
    calls: Vec<PlainCall>,
    visible_text: String,
}

impl PlainRecovery {
    fn of(recovered: Recovered) -> Self {
        let calls = recovered
            .calls
            .iter()
            .map(|call| PlainCall {
                id: call.id.clone(),
                name: call.name.clone(),
                arguments: call.arguments_json().into_owned(),
            })
            .collect();
        PlainRecovery { calls, visible_text: recovered.visible_text }
    }
}

/// A recovered call as text: its arguments as compact JSON.
struct PlainCall {
    id: String,
    name: String,
    arguments: String,
}

#[inline(never)]
fn measured_stream(replies: &[String], recoveries: &[Recovered]) {
    let mut released = Vec::new();
    for (content, recovered) in replies.iter().zip(recoveries) {
        stream_reply(content, recovered, &mut released, StreamEnding::With);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callgrind_instructions_are_read_from_its_log() {
        let log = "==3051== Callgrind, a call-graph generating cache profiler\n\
                   ==3051== Collected : 81988007\n\
                   ==3051== \n\
                   ==3051== I   refs:      81,988,007\n";
        assert_eq!(callgrind_instructions(log), Some(81_988_007.0));
        assert_eq!(callgrind_instructions("==1== no events\n"), None);
    }
}
