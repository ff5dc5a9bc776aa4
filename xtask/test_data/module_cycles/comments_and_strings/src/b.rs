//! Mentions [`crate::a::alpha`] in docs only.

/// Not built from [`crate::a::alpha`]; see `crate::a`.
pub struct Beta;

/* A block comment /* nested */ still a comment: crate::a::alpha() */

pub fn texts<'a>(x: &'a str) -> [&'a str; 6] {
    let quote = '"'; // a char literal holding a quote opens no string
    let _ = (quote, '\'', b'"', '\u{1F600}');
    [
        x,
        "crate::a::alpha()",
        "escaped \" crate::a::alpha()",
        r#"raw "crate::a::alpha()" "#,
        r"raw crate::a::alpha",
        "multi
line crate::a::alpha",
    ]
}

pub fn byte_strings() -> (&'static [u8], &'static [u8]) {
    (b"crate::a::alpha", br#"crate::a::alpha"#)
}
