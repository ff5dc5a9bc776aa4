//! The streaming recoverer against `recover`: every data case split at every char boundary, in
//! deltas of fixed sizes and at random chunkings ends in the state `recover` gives on the whole
//! text; what it shows while streaming is the final visible text, free of markup, and the calls
//! it releases while streaming are the final calls (or it says the text must be replaced).

use proptest::prelude::*;
use rein_recover::{
    RawReply, Recovered, StreamEvent, StreamRecoverer, ToolSchemas, recover, recover_typed,
};

use crate::{DEFAULT_TOOLS, test_data};

/// A data case that streams: its content, tools and schemas.
struct Case {
    name: String,
    tools: Vec<String>,
    schemas: ToolSchemas,
    content: String,
}

impl Case {
    fn tools(&self) -> Vec<&str> {
        self.tools.iter().map(String::as_str).collect()
    }
}

/// The data cases (those with native calls or a reasoning field are about what does not
/// stream, and are skipped).
fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    let mut dirs = vec![test_data().join("cases")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("cases dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|ext| ext != "txt") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("UTF-8 case");
            let mut tools: Vec<String> = DEFAULT_TOOLS.iter().map(|t| t.to_string()).collect();
            let mut schemas = ToolSchemas::new();
            let mut rest = text.as_str();
            let mut skip = false;
            while rest.starts_with("//- ") {
                let Some((line, after)) = rest.split_once('\n') else { break };
                let (key, value) = line[4..].split_once(':').expect("header");
                match key.trim() {
                    "tools" if value.trim() == "none" => tools.clear(),
                    "tools" => tools = value.split(',').map(|t| t.trim().to_owned()).collect(),
                    "schema" => {
                        let (tool, schema) =
                            value.trim().split_once(' ').expect("`//- schema: NAME {..}`");
                        schemas.insert(tool, serde_json::from_str(schema).expect("a schema"));
                    }
                    _ => skip = true,
                }
                rest = after;
            }
            if !skip {
                let content = rest.strip_suffix('\n').unwrap_or(rest).to_owned();
                out.push(Case { name: path.display().to_string(), tools, schemas, content });
            }
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// `content` in deltas of `size` bytes (a delta grown to the next char boundary).
fn chunks(content: &str, size: usize) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut at = 0;
    while at < content.len() {
        let mut end = (at + size).min(content.len());
        while !content.is_char_boundary(end) {
            end += 1;
        }
        pieces.push(&content[at..end]);
        at = end;
    }
    pieces
}

/// What streaming a reply through the recoverer gave, against `recover` on the whole text.
struct Streamed {
    /// The end state is `recover`'s.
    same_end: bool,
    /// The text shown while streaming is the final visible text, or `replaced` says otherwise.
    consistent: bool,
    /// `replaced` is false, yet the calls released while streaming (ids, names, arguments,
    /// order) are not the first of the final recovery's: something acting on calls as they
    /// stream would have acted on wrong ones. What differs, if so.
    calls_differ: Option<String>,
    /// Text released while streaming holds raw markup the final visible text does not (a
    /// tag, a token, a JSON call). What, if so.
    markup_shown: Option<String>,
    replaced: bool,
    /// `finish_deltas` (the end for a caller that recovers the reply itself; `finish_with`
    /// gives the same deltas, asserted as it runs) gave other deltas
    /// than `finish`, which did not say the final message replaces what was shown: what each
    /// gave, if so.
    last_deltas_differ: Option<String>,
}

/// What only markup holds: the tags and tokens of the dialects, a JSON call's `{"name"`.
fn markup_in(text: &str) -> Option<&'static str> {
    const MARKUP: [&str; 26] = [
        "```",
        "<tool_call",
        "</tool_call>",
        "<tool_code",
        "<invoke",
        "<function=",
        "<function_calls",
        "<parameter",
        "<arg_key>",
        "<arg_value>",
        "<think>",
        "</think>",
        "[THINK]",
        "[/THINK]",
        "<seed:",
        "<minimax:",
        "<start_function_call>",
        "<escape>",
        "<TOOLCALL>",
        "<steptml:",
        "<longcat",
        "<|",
        "<｜",
        "[TOOL_CALLS]",
        "[ARGS]",
        "{\"name\"",
    ];
    MARKUP.into_iter().find(|marker| text.contains(marker))
}

/// Streams `pieces` of `case` and compares with `recover` on the whole text (see [`Streamed`]).
fn check(pieces: &[&str], case: &Case) -> Streamed {
    let tools = case.tools();
    let whole: String = pieces.concat();
    let mut recoverer = StreamRecoverer::new(&tools, case.schemas.clone());
    let mut shown = String::new();
    let mut streamed_calls = Vec::new();
    let mut take = |events: Vec<StreamEvent>, streaming: bool| {
        for event in events {
            match event {
                StreamEvent::Text(text) => shown.push_str(&text),
                StreamEvent::Call(call) if streaming => streamed_calls.push(call),
                _ => {}
            }
        }
    };
    for piece in pieces {
        take(recoverer.push(piece), true);
    }
    let reply = RawReply { content: &whole, ..RawReply::default() };
    let expected: Recovered = if case.schemas.is_empty() {
        recover(&reply, &tools)
    } else {
        recover_typed(&reply, &tools, &case.schemas)
    };
    let last_deltas = recoverer.clone().finish_deltas();
    // Ended with the caller's recovery of the whole text, the deltas are those it recovers.
    assert_eq!(
        recoverer.clone().finish_with(&expected),
        last_deltas,
        "finish_with ends otherwise than finish_deltas: {pieces:?}"
    );
    let end = recoverer.finish(None, &[]);
    let last_deltas_differ = (!end.replaced && last_deltas != end.events)
        .then(|| format!("finish_deltas {last_deltas:?}, finish {:?}", end.events));
    let replaced = end.replaced;
    take(end.events, false);
    let same_end = end.recovered == expected;
    let consistent = replaced || shown == expected.visible_text;
    // The calls released while streaming are the first of the final ones, in order, with the
    // same ids, names and arguments (the rest come with `finish`).
    let calls_differ = (!replaced
        && expected.calls.get(..streamed_calls.len()) != Some(&streamed_calls[..]))
    .then(|| format!("streamed {streamed_calls:?}, final {:?}", expected.calls));
    // Markup the final visible text shows too (a tag named in prose) is prose.
    let markup_shown = markup_in(&shown)
        .filter(|marker| !expected.visible_text.contains(marker))
        .map(|marker| format!("{marker:?} shown in {shown:?}"));
    Streamed { same_end, consistent, calls_differ, markup_shown, replaced, last_deltas_differ }
}

/// Collects what went wrong streaming cases, for one assertion at the end that lists them.
#[derive(Default)]
struct Faults {
    inconsistent: Vec<String>,
    wrong_calls: Vec<String>,
    markup_shown: Vec<String>,
    last_deltas: Vec<String>,
}

impl Faults {
    fn note(&mut self, place: &str, streamed: Streamed) {
        assert!(streamed.same_end, "{place}: the end state differs from recover");
        if let Some(differ) = streamed.last_deltas_differ {
            self.last_deltas.push(format!("{place}: {differ}"));
        }
        if !streamed.consistent {
            self.inconsistent.push(place.to_owned());
        }
        if let Some(differ) = streamed.calls_differ {
            self.wrong_calls.push(format!("{place}: {differ}"));
        }
        if let Some(markup) = streamed.markup_shown {
            self.markup_shown.push(format!("{place}: {markup}"));
        }
    }

    fn assert_none(&self) {
        for (what, faults) in [
            ("showed text that is not the final text, not replaced", &self.inconsistent),
            ("released calls that are not the final calls, not replaced", &self.wrong_calls),
            ("showed markup", &self.markup_shown),
            ("ended with other deltas by finish_deltas than by finish", &self.last_deltas),
        ] {
            assert!(
                faults.is_empty(),
                "{} streams {what}: {:#?}",
                faults.len(),
                &faults[..faults.len().min(20)]
            );
        }
    }
}

#[test]
fn every_case_split_at_every_boundary_ends_as_recover() {
    let mut faults = Faults::default();
    let mut replaced_names = std::collections::BTreeSet::new();
    let mut checked = 0;
    let mut cases_checked = 0;
    for case in cases() {
        let content = case.content.as_str();
        if content.len() > 4096 {
            continue;
        }
        cases_checked += 1;
        for split in (0..=content.len()).filter(|&i| content.is_char_boundary(i)) {
            let streamed = check(&[&content[..split], &content[split..]], &case);
            if streamed.replaced {
                replaced_names.insert(case.name.clone());
            }
            faults.note(&format!("{} split at {split}", case.name), streamed);
            checked += 1;
        }
    }
    assert!(checked > 10_000, "only {checked} splits checked");
    eprintln!(
        "{} of the {cases_checked} cases needed their shown text replaced at some split: \
         {replaced_names:?}",
        replaced_names.len()
    );
    // The cases where some split shows text the final recovery reclassifies (an orphan
    // `</think>`, a bare JSON array, a Python call with a JSON argument, …): the end state is
    // still right and `replaced` says the shown text must be replaced. A regression guard.
    assert!(
        replaced_names.len() * 8 <= cases_checked,
        "{} of {cases_checked} cases replaced: {replaced_names:?}",
        replaced_names.len()
    );
    faults.assert_none();
}

/// Deltas of a few fixed sizes, so that held constructs grow over many deltas (a split in two
/// releases at most twice).
#[test]
fn every_case_in_deltas_of_fixed_sizes_ends_as_recover() {
    let mut faults = Faults::default();
    for case in cases() {
        if case.content.len() > 4096 {
            continue;
        }
        for size in [1usize, 2, 3, 5, 7, 11, 20] {
            let streamed = check(&chunks(&case.content, size), &case);
            faults.note(&format!("{} in deltas of {size}", case.name), streamed);
        }
    }
    faults.assert_none();
}

proptest! {
    #[test]
    fn random_chunkings_end_as_recover(seed in any::<u64>(), case in 0usize..1000) {
        let cases = cases();
        let case = &cases[case % cases.len()];
        let content = case.content.as_str();
        let mut pieces = Vec::new();
        let mut state = seed | 1;
        let mut at = 0;
        while at < content.len() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let mut end = (at + 1 + (state % 24) as usize).min(content.len());
            while !content.is_char_boundary(end) {
                end += 1;
            }
            pieces.push(&content[at..end]);
            at = end;
        }
        let streamed = check(&pieces, case);
        prop_assert!(streamed.same_end, "{} chunked: the end state differs from recover", case.name);
        prop_assert!(
            streamed.calls_differ.is_none(),
            "{} chunked {:?}: {:?}", case.name, pieces, streamed.calls_differ
        );
        prop_assert!(
            streamed.last_deltas_differ.is_none(),
            "{} chunked {:?}: {:?}", case.name, pieces, streamed.last_deltas_differ
        );
        prop_assert!(
            streamed.markup_shown.is_none(),
            "{} chunked {:?}: {:?}", case.name, pieces, streamed.markup_shown
        );
    }
}

/// The reasoning released while streaming is the final reasoning (up to trailing whitespace,
/// which a delta may release before the block's end trims it), at every chunk size: a delta
/// of reasoning released without a recovery must not be the end of the block.
#[test]
fn reasoning_streams_as_the_final_reasoning() {
    let mut bad = Vec::new();
    for case in cases() {
        if case.content.len() > 4096 {
            continue;
        }
        for size in [1usize, 2, 3, 5, 7, 11, 20] {
            let mut recoverer = StreamRecoverer::new(&case.tools(), case.schemas.clone());
            let mut reasoning = String::new();
            for piece in chunks(&case.content, size) {
                for event in recoverer.push(piece) {
                    if let StreamEvent::Reasoning(r) = event {
                        reasoning.push_str(&r);
                    }
                }
            }
            let end = recoverer.finish(None, &[]);
            for event in end.events {
                if let StreamEvent::Reasoning(r) = event {
                    reasoning.push_str(&r);
                }
            }
            let expected = end.recovered.reasoning.unwrap_or_default();
            if reasoning.trim_end() != expected {
                bad.push(format!("{} size {size}: {reasoning:?} vs {expected:?}", case.name));
            }
        }
    }
    assert!(bad.is_empty(), "{} mismatches: {:#?}", bad.len(), &bad[..bad.len().min(10)]);
}

/// Texts the settled point cannot move through (one long line dense with brackets, tags or
/// calls) run the stream out of its recovery budget, so its recoveries wait for the text to
/// grow: what it releases meanwhile is still the final text and calls, and its end is
/// `recover`'s. (Its cost is `cargo xtask bench recover`'s `stream_adv_*` figures.)
#[test]
fn streams_over_the_recovery_budget_still_end_as_recover() {
    let mut faults = Faults::default();
    let call = r#"<tool_call>{"name": "query", "arguments": {"sql": "SELECT 1"}}</tool_call> "#;
    let mut texts: Vec<(String, String)> = rein_recover::fuzz::ADVERSARIAL_SHAPES
        .iter()
        .map(|shape| {
            let text = rein_recover::fuzz::adversarial(shape, 48 * 1024).expect("known shape");
            ((*shape).to_owned(), text)
        })
        .collect();
    texts.push(("calls on one line".to_owned(), format!("Calling. {}Done.", call.repeat(400))));
    for (name, content) in texts {
        let case = Case {
            name: name.clone(),
            tools: DEFAULT_TOOLS.iter().map(|tool| (*tool).to_owned()).collect(),
            schemas: ToolSchemas::new(),
            content,
        };
        let streamed = check(&chunks(&case.content, 20), &case);
        faults.note(&case.name, streamed);
    }
    faults.assert_none();
}
