//! The form of a question: its requested schema read into typed fields, and an answer checked
//! against every rule of them.
//!
//! The vocabulary is what MCP allows in an elicitation's `requestedSchema` (`schema.ts` of the
//! 2025-11-25 and 2026-07-28 revisions; rmcp parses a server's schema into exactly this and
//! drops anything else):
//!
//! | property | rules |
//! |---|---|
//! | `{type: "string"}` | `minLength`, `maxLength` (characters), `format`: `email`, `uri`, `date`, `date-time` |
//! | `{type: "number" \| "integer"}` | `minimum`, `maximum` (inclusive) |
//! | `{type: "boolean"}` | none |
//! | one choice: `{type: "string", enum}` (labels in the legacy `enumNames`) or `{type: "string", oneOf: [{const, title}]}` | `enum` / `oneOf` |
//! | several choices: `{type: "array", items: {enum}}` or `{items: {anyOf: [{const, title}]}}` | `items`, `minItems`, `maxItems` |
//!
//! and on the form, `required` (and no property it does not name: `additionalProperties`).
//! `title`, `description`, `default` and `enumNames` are shown, never checked. rein declares
//! `schemaValidation` to servers, so a schema outside this vocabulary (a nested object, an
//! unknown type or format, a bound that is not a number) is refused when the question is asked
//! ([`Form::read`]) rather than passed on unchecked. An answer that breaks a rule is an
//! [`AnswerMisfit`] naming the property and the rule ([`FormRule`]).

use serde_json::{Number, Value};

use rein_protocol::JsonObject;

/// The rule of a requested schema an answer broke: the JSON Schema keyword it is spelled with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FormRule {
    /// A property the schema's `required` names is missing.
    Required,
    /// A property the schema does not name (the form is closed).
    AdditionalProperties,
    /// A value of the wrong `type`.
    Type,
    /// A string shorter than `minLength` characters.
    MinLength,
    /// A string longer than `maxLength` characters.
    MaxLength,
    /// A string not of its `format`.
    Format,
    /// A number below `minimum`.
    Minimum,
    /// A number above `maximum`.
    Maximum,
    /// A value not among the property's `enum`.
    Enum,
    /// A value not among the `const`s of the property's `oneOf`.
    OneOf,
    /// A chosen item not among the choices of the property's `items`.
    Items,
    /// Fewer choices than `minItems`.
    MinItems,
    /// More choices than `maxItems`.
    MaxItems,
}

impl FormRule {
    /// The keyword, as the schema spells it (`minLength`, `required`, ...).
    pub fn keyword(self) -> &'static str {
        match self {
            FormRule::Required => "required",
            FormRule::AdditionalProperties => "additionalProperties",
            FormRule::Type => "type",
            FormRule::MinLength => "minLength",
            FormRule::MaxLength => "maxLength",
            FormRule::Format => "format",
            FormRule::Minimum => "minimum",
            FormRule::Maximum => "maximum",
            FormRule::Enum => "enum",
            FormRule::OneOf => "oneOf",
            FormRule::Items => "items",
            FormRule::MinItems => "minItems",
            FormRule::MaxItems => "maxItems",
        }
    }
}

impl std::fmt::Display for FormRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.keyword())
    }
}

/// An answer that does not fit its question's form: the property, the rule it broke, and what
/// the rule asks for.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("`{field}` {says} ({rule})")]
#[non_exhaustive]
pub struct AnswerMisfit {
    /// The property of the answer (or of the schema, for a missing one).
    pub field: String,
    /// The rule it broke.
    pub rule: FormRule,
    /// What the rule asks for, as a phrase after the property's name ("must be at least 18").
    pub says: String,
}

impl AnswerMisfit {
    fn new(field: &str, rule: FormRule, says: impl Into<String>) -> Self {
        AnswerMisfit { field: field.to_owned(), rule, says: says.into() }
    }
}

/// A requested schema outside the vocabulary: which property, and what about it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("the requested schema cannot be checked: {0}")]
pub(crate) struct FormError(String);

/// A `format` of a string property.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Format {
    Email,
    Uri,
    Date,
    DateTime,
}

impl Format {
    fn of(name: &str) -> Option<Format> {
        match name {
            "email" => Some(Format::Email),
            "uri" => Some(Format::Uri),
            "date" => Some(Format::Date),
            "date-time" => Some(Format::DateTime),
            _ => None,
        }
    }

    fn fits(self, text: &str) -> bool {
        match self {
            Format::Email => is_email(text),
            Format::Uri => is_uri(text),
            Format::Date => is_date(text),
            Format::DateTime => is_date_time(text),
        }
    }

    fn says(self) -> &'static str {
        match self {
            Format::Email => "must be an email address",
            Format::Uri => "must be an absolute URI (`scheme:...`)",
            Format::Date => "must be a date (YYYY-MM-DD)",
            Format::DateTime => "must be a date and time with its offset (2025-11-25T09:30:00Z)",
        }
    }
}

/// The values a property (or an array's items) may take, and the keyword that lists them.
#[derive(Debug, Clone, PartialEq)]
struct Choices {
    rule: FormRule,
    values: Vec<Value>,
}

impl Choices {
    /// `enum`'s values, or the `const`s of `one_of` (`oneOf`, or `anyOf` for an array's items),
    /// when the schema has either.
    fn of(schema: &JsonObject, one_of: &str, name: &str) -> Result<Option<Choices>, FormError> {
        if let Some(values) = schema.get("enum") {
            let Value::Array(values) = values else {
                return Err(FormError(format!("`{name}`: `enum` is not a list")));
            };
            return Ok(Some(Choices { rule: FormRule::Enum, values: values.clone() }));
        }
        let Some(options) = schema.get(one_of) else { return Ok(None) };
        let constants = options.as_array().and_then(|options| {
            options.iter().map(|option| option.get("const").cloned()).collect::<Option<Vec<_>>>()
        });
        let Some(values) = constants else {
            return Err(FormError(format!("`{name}`: `{one_of}` is not a list of `const`s")));
        };
        Ok(Some(Choices { rule: FormRule::OneOf, values }))
    }

    fn allows(&self, value: &Value) -> bool {
        self.values.contains(value)
    }

    fn says(&self) -> String {
        format!("must be one of {}", Value::Array(self.values.clone()))
    }
}

/// What a property holds, with the rules of its kind.
#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Text {
        min_length: Option<u64>,
        max_length: Option<u64>,
        format: Option<Format>,
    },
    Number {
        integer: bool,
        minimum: Option<Number>,
        maximum: Option<Number>,
    },
    Boolean,
    /// Several of `items`' choices (a multi-select).
    Selection {
        items: Choices,
        min_items: Option<u64>,
        max_items: Option<u64>,
    },
}

/// One property of the form.
#[derive(Debug, Clone, PartialEq)]
struct Field {
    name: String,
    kind: Kind,
    /// For one choice: the values it may take.
    choices: Option<Choices>,
}

/// A requested schema, read: its properties in order and the ones `required` names.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Form {
    fields: Vec<Field>,
    required: Vec<String>,
}

/// A non-negative whole number under `key` of `schema`, if the key is there.
fn count(schema: &JsonObject, key: &str, name: &str) -> Result<Option<u64>, FormError> {
    match schema.get(key) {
        None => Ok(None),
        Some(value) => value.as_u64().map(Some).ok_or_else(|| {
            FormError(format!("`{name}`: `{key}` is not a non-negative integer ({value})"))
        }),
    }
}

/// A number under `key` of `schema`, if the key is there.
fn bound(schema: &JsonObject, key: &str, name: &str) -> Result<Option<Number>, FormError> {
    match schema.get(key) {
        None => Ok(None),
        Some(Value::Number(number)) => Ok(Some(number.clone())),
        Some(value) => Err(FormError(format!("`{name}`: `{key}` is not a number ({value})"))),
    }
}

impl Field {
    fn read(name: &str, property: &Value) -> Result<Field, FormError> {
        let Some(schema) = property.as_object() else {
            return Err(FormError(format!("`{name}` is not a schema ({property})")));
        };
        let kind = match schema.get("type").and_then(Value::as_str) {
            Some("string") => {
                let format = match schema.get("format") {
                    None => None,
                    Some(format) => {
                        Some(format.as_str().and_then(Format::of).ok_or_else(|| {
                            FormError(format!("`{name}`: unknown `format` {format}"))
                        })?)
                    }
                };
                Kind::Text {
                    min_length: count(schema, "minLength", name)?,
                    max_length: count(schema, "maxLength", name)?,
                    format,
                }
            }
            Some(kind @ ("number" | "integer")) => Kind::Number {
                integer: kind == "integer",
                minimum: bound(schema, "minimum", name)?,
                maximum: bound(schema, "maximum", name)?,
            },
            Some("boolean") => Kind::Boolean,
            Some("array") => {
                let items = schema.get("items").and_then(Value::as_object);
                // `anyOf` is the spec's; rmcp also reads `oneOf` there.
                let choices = match items {
                    Some(items) if items.contains_key("oneOf") => {
                        Choices::of(items, "oneOf", name)?
                    }
                    Some(items) => Choices::of(items, "anyOf", name)?,
                    None => None,
                };
                let Some(mut items) = choices else {
                    return Err(FormError(format!(
                        "`{name}`: an array's `items` must list its choices (`enum` or `anyOf`)"
                    )));
                };
                items.rule = FormRule::Items;
                Kind::Selection {
                    items,
                    min_items: count(schema, "minItems", name)?,
                    max_items: count(schema, "maxItems", name)?,
                }
            }
            Some(other) => {
                return Err(FormError(format!("`{name}`: type `{other}` is not a form field")));
            }
            None => return Err(FormError(format!("`{name}` has no `type`"))),
        };
        let choices = match kind {
            Kind::Selection { .. } => None,
            _ => Choices::of(schema, "oneOf", name)?,
        };
        Ok(Field { name: name.to_owned(), kind, choices })
    }

    /// Whether `value` keeps every rule of this property.
    fn check(&self, value: &Value) -> Result<(), AnswerMisfit> {
        let name = &self.name;
        match &self.kind {
            Kind::Text { min_length, max_length, format } => {
                let Some(text) = value.as_str() else {
                    return Err(AnswerMisfit::new(name, FormRule::Type, "must be a string"));
                };
                let length = text.chars().count() as u64;
                if let Some(min) = min_length
                    && length < *min
                {
                    let says = format!("must have at least {min} characters");
                    return Err(AnswerMisfit::new(name, FormRule::MinLength, says));
                }
                if let Some(max) = max_length
                    && length > *max
                {
                    let says = format!("must have at most {max} characters");
                    return Err(AnswerMisfit::new(name, FormRule::MaxLength, says));
                }
                if let Some(format) = format
                    && !format.fits(text)
                {
                    return Err(AnswerMisfit::new(name, FormRule::Format, format.says()));
                }
            }
            Kind::Number { integer, minimum, maximum } => {
                let Value::Number(number) = value else {
                    let says = if *integer { "must be an integer" } else { "must be a number" };
                    return Err(AnswerMisfit::new(name, FormRule::Type, says));
                };
                if *integer && number.as_i64().is_none() && number.as_u64().is_none() {
                    return Err(AnswerMisfit::new(name, FormRule::Type, "must be an integer"));
                }
                if let Some(min) = minimum
                    && compare(number, min).is_lt()
                {
                    let says = format!("must be at least {min}");
                    return Err(AnswerMisfit::new(name, FormRule::Minimum, says));
                }
                if let Some(max) = maximum
                    && compare(number, max).is_gt()
                {
                    let says = format!("must be at most {max}");
                    return Err(AnswerMisfit::new(name, FormRule::Maximum, says));
                }
            }
            Kind::Boolean => {
                if !value.is_boolean() {
                    return Err(AnswerMisfit::new(name, FormRule::Type, "must be true or false"));
                }
            }
            Kind::Selection { items, min_items, max_items } => {
                let Some(chosen) = value.as_array() else {
                    return Err(AnswerMisfit::new(name, FormRule::Type, "must be a list"));
                };
                if let Some(outside) = chosen.iter().find(|item| !items.allows(item)) {
                    let says = format!("has {outside}, and each choice {}", items.says());
                    return Err(AnswerMisfit::new(name, FormRule::Items, says));
                }
                let chosen = chosen.len() as u64;
                if let Some(min) = min_items
                    && chosen < *min
                {
                    let says = format!("must have at least {min} choices");
                    return Err(AnswerMisfit::new(name, FormRule::MinItems, says));
                }
                if let Some(max) = max_items
                    && chosen > *max
                {
                    let says = format!("must have at most {max} choices");
                    return Err(AnswerMisfit::new(name, FormRule::MaxItems, says));
                }
            }
        }
        if let Some(choices) = &self.choices
            && !choices.allows(value)
        {
            return Err(AnswerMisfit::new(name, choices.rule, choices.says()));
        }
        Ok(())
    }
}

/// `a` against `b`, exactly for two integers, else as floating point.
fn compare(a: &Number, b: &Number) -> std::cmp::Ordering {
    if let (Some(a), Some(b)) = (a.as_i64(), b.as_i64()) {
        return a.cmp(&b);
    }
    if let (Some(a), Some(b)) = (a.as_u64(), b.as_u64()) {
        return a.cmp(&b);
    }
    let float = |n: &Number| n.as_f64().unwrap_or(f64::NAN);
    float(a).partial_cmp(&float(b)).unwrap_or(std::cmp::Ordering::Equal)
}

impl Form {
    /// Reads a requested schema (an empty one is a form of no fields, as a URL question has).
    pub(crate) fn read(schema: &JsonObject) -> Result<Form, FormError> {
        if let Some(kind) = schema.get("type")
            && kind != "object"
        {
            return Err(FormError(format!("the form's type is {kind}, not \"object\"")));
        }
        let fields = match schema.get("properties") {
            None => Vec::new(),
            Some(Value::Object(properties)) => properties
                .iter()
                .map(|(name, property)| Field::read(name, property))
                .collect::<Result<_, _>>()?,
            Some(other) => {
                return Err(FormError(format!("`properties` is not an object ({other})")));
            }
        };
        let required = match schema.get("required") {
            None => Vec::new(),
            Some(Value::Array(names)) => names
                .iter()
                .map(|name| match name.as_str() {
                    Some(name) if fields.iter().any(|field| field.name == name) => {
                        Ok(name.to_owned())
                    }
                    _ => {
                        Err(FormError(format!("`required` names {name}, which is not a property")))
                    }
                })
                .collect::<Result<_, _>>()?,
            Some(other) => return Err(FormError(format!("`required` is not a list ({other})"))),
        };
        Ok(Form { fields, required })
    }

    /// Whether `content` answers the form: every required property given, no other property,
    /// each value keeping every rule of its property. The first misfit found is the answer.
    pub(crate) fn check(&self, content: &JsonObject) -> Result<(), AnswerMisfit> {
        if let Some(missing) = self.required.iter().find(|name| !content.contains_key(*name)) {
            return Err(AnswerMisfit::new(missing, FormRule::Required, "is required"));
        }
        for (name, value) in content {
            let Some(field) = self.fields.iter().find(|field| &field.name == name) else {
                return Err(AnswerMisfit::new(
                    name,
                    FormRule::AdditionalProperties,
                    "is not asked for",
                ));
            };
            field.check(value)?;
        }
        Ok(())
    }
}

/// An email address (RFC 5321 `Mailbox`, its common form): a local part and a domain (names of
/// letters, digits and hyphens, or a bracketed address literal), no spaces or controls.
fn is_email(text: &str) -> bool {
    let Some((local, domain)) = text.rsplit_once('@') else { return false };
    // Unquoted, a local part holds no space, control or special (RFC 5322 `specials`).
    let plain = |c: char| !c.is_whitespace() && !c.is_control() && !"()<>[]\\,;:@\"".contains(c);
    if local.is_empty() || local.chars().count() > 64 || !local.chars().all(plain) {
        return false;
    }
    if let Some(literal) = domain.strip_prefix('[').and_then(|d| d.strip_suffix(']')) {
        return !literal.is_empty()
            && literal.chars().all(|c| c.is_ascii_alphanumeric() || ".:".contains(c));
    }
    !domain.is_empty()
        && domain.chars().count() <= 255
        && domain.split('.').all(|label| {
            !label.is_empty()
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_alphanumeric() || c == '-')
        })
}

/// An absolute URI (RFC 3986): a scheme (a letter, then letters, digits, `+`, `-`, `.`), `:`,
/// then only characters a URI may hold, each `%` starting an escape of two hex digits.
fn is_uri(text: &str) -> bool {
    let Some((scheme, rest)) = text.split_once(':') else { return false };
    let mut scheme_chars = scheme.chars();
    let scheme_ok = scheme_chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && scheme_chars.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
    if !scheme_ok {
        return false;
    }
    let bytes = rest.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        let byte = bytes[at];
        if byte == b'%' {
            let escape = bytes.get(at + 1..at + 3);
            if !escape.is_some_and(|hex| hex.iter().all(u8::is_ascii_hexdigit)) {
                return false;
            }
            at += 3;
            continue;
        }
        let allowed = byte.is_ascii_alphanumeric() || b"-._~:/?#[]@!$&'()*+,;=".contains(&byte);
        if !allowed {
            return false;
        }
        at += 1;
    }
    true
}

/// `YYYY-MM-DD` (RFC 3339 `full-date`), a day its month has.
fn is_date(text: &str) -> bool {
    let bytes = text.as_bytes();
    if bytes.len() != 10 || bytes[4] != b'-' || bytes[7] != b'-' {
        return false;
    }
    let (Some(year), Some(month), Some(day)) =
        (digits(&bytes[0..4]), digits(&bytes[5..7]), digits(&bytes[8..10]))
    else {
        return false;
    };
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&day)
}

/// RFC 3339 `date-time`: a date, `T`, `HH:MM:SS` with an optional fraction, then `Z` or an
/// offset `±HH:MM`.
fn is_date_time(text: &str) -> bool {
    let bytes = text.as_bytes();
    if bytes.len() < 20 || !matches!(bytes[10], b'T' | b't') {
        return false;
    }
    if !is_date(&text[..10]) {
        return false;
    }
    let time = &bytes[11..];
    let clock = |b: &[u8]| -> bool {
        b.len() == 8
            && b[2] == b':'
            && b[5] == b':'
            && digits(&b[0..2]).is_some_and(|h| h <= 23)
            && digits(&b[3..5]).is_some_and(|m| m <= 59)
            // 60: a leap second.
            && digits(&b[6..8]).is_some_and(|s| s <= 60)
    };
    if time.len() < 9 || !clock(&time[..8]) {
        return false;
    }
    let mut rest = &time[8..];
    if let Some(fraction) = rest.strip_prefix(b".") {
        let digits_end =
            fraction.iter().position(|b| !b.is_ascii_digit()).unwrap_or(fraction.len());
        if digits_end == 0 {
            return false;
        }
        rest = &fraction[digits_end..];
    }
    match rest {
        [b'Z' | b'z'] => true,
        [b'+' | b'-', offset @ ..] => {
            offset.len() == 5
                && offset[2] == b':'
                && digits(&offset[0..2]).is_some_and(|h| h <= 23)
                && digits(&offset[3..5]).is_some_and(|m| m <= 59)
        }
        _ => false,
    }
}

/// The number ASCII digits spell, if `bytes` are all digits.
fn digits(bytes: &[u8]) -> Option<u32> {
    if bytes.is_empty() || !bytes.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(bytes.iter().fold(0, |n, b| n * 10 + u32::from(b - b'0')))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// Runs every case file of `test_data/elicitation_forms/`: `{"schema", "answers": [[content,
    /// expect], ...]}`, where `expect` is `"fits"` or `{"field", "rule"}`; or `{"schema",
    /// "refused": "a phrase of the reason"}` for a schema outside the vocabulary.
    #[test]
    fn form_cases() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("test_data/elicitation_forms");
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .expect("the case directory")
            .map(|entry| entry.expect("a directory entry").path())
            .collect();
        files.sort();
        assert!(files.len() > 5, "cases in {}", dir.display());
        let mut failures = Vec::new();
        for file in files {
            let text = std::fs::read_to_string(&file).expect("a case file");
            let case: Value = serde_json::from_str(&text).expect("a JSON case");
            let schema = case["schema"].as_object().cloned().unwrap_or_default();
            let name = file.display();
            let form = match (Form::read(&schema), case["refused"].as_str()) {
                (Err(error), Some(phrase)) if error.to_string().contains(phrase) => continue,
                (Err(error), _) => {
                    failures.push(format!("{name}: {error}"));
                    continue;
                }
                (Ok(_), Some(phrase)) => {
                    failures.push(format!("{name}: read, though it should be refused ({phrase})"));
                    continue;
                }
                (Ok(form), None) => form,
            };
            let answers = case["answers"].as_array().cloned().unwrap_or_default();
            assert!(!answers.is_empty(), "{name} has no answers");
            for answer in answers {
                let content = answer[0].as_object().cloned().unwrap_or_default();
                let got = match form.check(&content) {
                    Ok(()) => Value::from("fits"),
                    Err(misfit) => {
                        serde_json::json!({ "field": misfit.field, "rule": misfit.rule.keyword() })
                    }
                };
                if got != answer[1] {
                    failures.push(format!("{name}: {} gave {got}, not {}", answer[0], answer[1]));
                }
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    #[test]
    fn formats_read_their_rfcs() {
        for (text, fits) in [
            ("2024-02-29", true),
            ("2023-02-29", false),
            ("1900-02-29", false),
            ("2000-02-29", true),
            ("2025-13-01", false),
            ("2025-1-01", false),
            ("２０２５-01-01", false),
        ] {
            assert_eq!(is_date(text), fits, "date {text}");
        }
        for (text, fits) in [
            ("2025-11-25T09:30:00Z", true),
            ("2025-11-25t09:30:00.125+05:30", true),
            ("2016-12-31T23:59:60Z", true),
            ("2025-11-25T09:30:00", false),
            ("2025-11-25T24:00:00Z", false),
            ("2025-11-25T09:30:00.Z", false),
            ("2025-11-25T09:30:00+5:30", false),
            ("2025-11-25é09:30:00Z", false),
        ] {
            assert_eq!(is_date_time(text), fits, "date-time {text}");
        }
        for (text, fits) in [
            ("ada@example.org", true),
            ("ada.lovelace+notes@mail.example.co.uk", true),
            ("ada@localhost", true),
            ("ada@[192.0.2.1]", true),
            ("ada@", false),
            ("@example.org", false),
            ("ada@@example.org", false),
            ("ada @example.org", false),
            ("ada@-example.org", false),
            ("ada@example..org", false),
        ] {
            assert_eq!(is_email(text), fits, "email {text}");
        }
        for (text, fits) in [
            ("https://example.org/a?b=c#d", true),
            ("urn:isbn:0451450523", true),
            ("mailto:ada@example.org", true),
            ("https://example.org/%7Eada", true),
            ("https://example.org/%zz", false),
            ("/relative/path", false),
            ("1http://x", false),
            ("https://exa mple.org", false),
            ("https://example.org/<script>", false),
        ] {
            assert_eq!(is_uri(text), fits, "uri {text}");
        }
    }
}
