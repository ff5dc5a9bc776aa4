//! The module-cycle check of `cargo xtask tidy`: no two modules of one crate import each other.
//!
//! Per crate root (`crates/*/src/lib.rs`, `crates/*/src/main.rs`, `xtask/src/main.rs`) it builds
//! a graph whose nodes are the crate's file modules, found by following `mod NAME;` from the root
//! (honouring `#[path]`), and whose edges are what one module's code names in another:
//!
//! - the leaves of `use` trees that start with `crate`, `super`, `self` or a child module,
//! - paths in code that start with `crate::`, `$crate::`, `super::`, `self::` or a child module
//!   (or a name a `use` brought in, such as `use crate::normalize::{self}`),
//! - a path is followed through `use` re-exports (`pub use foo::Foo` in `lib.rs`, any nesting of
//!   braces) to the module that defines the item, so `use crate::Foo` is an edge to `foo`.
//!
//! What is not an edge: declaring a module (`mod foo;`); a `pub use` re-export in itself (it is
//! an alias; it becomes an edge only where the re-exporting module's own code names the item);
//! references inside one file (inline modules belong to their file); and anything under
//! `#[cfg(test)]`, such as the `mod tests { use super::*; }` blocks. Comments, doc comments and
//! string literals are lexed away before anything is read, so a path in a doc example is no edge.
//!
//! Each strongly connected component (Tarjan) is reported once, with its shortest cycle and the
//! first line behind each edge of it, so the reader knows what to move.

use std::{
    collections::{BTreeMap, BTreeSet, VecDeque, btree_map::Entry},
    path::{Path, PathBuf},
};

use anyhow::Context as _;

/// Module cycles in every workspace crate under `crates/` and in xtask itself.
pub(super) fn check_module_cycles(root: &Path) -> anyhow::Result<Vec<String>> {
    let mut dirs = Vec::new();
    for entry in std::fs::read_dir(root.join("crates")).context("reading crates/")? {
        let path = entry?.path();
        if path.is_dir() {
            dirs.push(path);
        }
    }
    dirs.sort();
    dirs.push(root.join("xtask"));
    let mut problems = Vec::new();
    for dir in dirs {
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let roots: Vec<PathBuf> = ["lib.rs", "main.rs"]
            .iter()
            .map(|file| dir.join("src").join(file))
            .filter(|path| path.is_file())
            .collect();
        for root_file in &roots {
            let label = match root_file.file_stem() {
                Some(stem) if roots.len() > 1 => format!("{name} ({})", stem.to_string_lossy()),
                _ => name.clone(),
            };
            problems.extend(crate_cycles(&label, root_file)?);
        }
    }
    Ok(problems)
}

/// One problem line per cycle among the modules of the crate whose root file is `root_file`.
pub(super) fn crate_cycles(label: &str, root_file: &Path) -> anyhow::Result<Vec<String>> {
    let krate = Crate::load(root_file)?;
    Ok(krate.cycles(label))
}

// ---------------------------------------------------------------------------------------------
// The lexer: identifiers, `::`, punctuation and string contents; comments and literals gone.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Ident,
    /// A string literal; `text` holds its contents (escapes left as written).
    Str,
    Punct,
    /// Numbers, character literals and lifetimes: never part of a path.
    Other,
}

#[derive(Debug, Clone)]
struct Token {
    kind: Kind,
    text: String,
    line: usize,
}

fn is_ident_start(c: char) -> bool {
    c == '_' || c.is_alphabetic()
}

fn is_ident_char(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

/// Splits Rust source into tokens. Never fails: unterminated comments and literals run to the
/// end of the text.
fn lex(src: &str) -> Vec<Token> {
    let chars: Vec<char> = src.chars().collect();
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    let mut tokens = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let start_line = line;
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c == '/' && at(i + 1) == '/' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && at(i + 1) == '*' {
            let mut depth = 0usize;
            while i < chars.len() {
                if chars[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    line += usize::from(chars[i] == '\n');
                    i += 1;
                }
            }
        } else if c == '"' {
            let (text, end) = string(&chars, i + 1, &mut line);
            tokens.push(Token { kind: Kind::Str, text, line: start_line });
            i = end;
        } else if c == '\'' {
            i = quote(&chars, i);
            tokens.push(Token { kind: Kind::Other, text: "'".into(), line: start_line });
        } else if c == '$' && chars[i + 1..].starts_with(&['c', 'r', 'a', 't', 'e']) {
            // `$crate` in a macro body names the defining crate.
            i += 1;
        } else if is_ident_start(c) {
            let begin = i;
            while i < chars.len() && is_ident_char(chars[i]) {
                i += 1;
            }
            let word: String = chars[begin..i].iter().collect();
            match (word.as_str(), at(i)) {
                ("r" | "br" | "cr", '#' | '"') => {
                    let mut k = i;
                    while at(k) == '#' {
                        k += 1;
                    }
                    let hashes = k - i;
                    if at(k) == '"' {
                        let (text, end) = raw_string(&chars, k + 1, hashes, &mut line);
                        tokens.push(Token { kind: Kind::Str, text, line: start_line });
                        i = end;
                    } else if word == "r" && hashes == 1 && is_ident_start(at(k)) {
                        let begin = k;
                        i = k;
                        while i < chars.len() && is_ident_char(chars[i]) {
                            i += 1;
                        }
                        let text = chars[begin..i].iter().collect();
                        tokens.push(Token { kind: Kind::Ident, text, line: start_line });
                    } else {
                        tokens.push(Token { kind: Kind::Ident, text: word, line: start_line });
                    }
                }
                ("b" | "c", '"') => {
                    let (text, end) = string(&chars, i + 1, &mut line);
                    tokens.push(Token { kind: Kind::Str, text, line: start_line });
                    i = end;
                }
                ("b", '\'') => {
                    i = quote(&chars, i);
                    tokens.push(Token { kind: Kind::Other, text: "'".into(), line: start_line });
                }
                _ => tokens.push(Token { kind: Kind::Ident, text: word, line: start_line }),
            }
        } else if c.is_ascii_digit() {
            while i < chars.len() && is_ident_char(chars[i]) {
                i += 1;
            }
            if at(i) == '.' && at(i + 1).is_ascii_digit() {
                i += 1;
                while i < chars.len() && is_ident_char(chars[i]) {
                    i += 1;
                }
            }
            tokens.push(Token { kind: Kind::Other, text: "0".into(), line: start_line });
        } else if c == ':' && at(i + 1) == ':' {
            tokens.push(Token { kind: Kind::Punct, text: "::".into(), line: start_line });
            i += 2;
        } else {
            tokens.push(Token { kind: Kind::Punct, text: c.to_string(), line: start_line });
            i += 1;
        }
    }
    tokens
}

/// A string body from `i` (just after the opening quote): its text and the index after it.
fn string(chars: &[char], mut i: usize, line: &mut usize) -> (String, usize) {
    let mut text = String::new();
    while let Some(&c) = chars.get(i) {
        match c {
            '"' => return (text, i + 1),
            '\\' => {
                text.push(c);
                if let Some(&next) = chars.get(i + 1) {
                    text.push(next);
                    *line += usize::from(next == '\n');
                }
                i += 2;
            }
            _ => {
                text.push(c);
                *line += usize::from(c == '\n');
                i += 1;
            }
        }
    }
    (text, i)
}

/// A raw string body from `i` that ends with `"` and `hashes` times `#`.
fn raw_string(chars: &[char], mut i: usize, hashes: usize, line: &mut usize) -> (String, usize) {
    let mut text = String::new();
    while let Some(&c) = chars.get(i) {
        if c == '"' && (1..=hashes).all(|k| chars.get(i + k) == Some(&'#')) {
            return (text, i + 1 + hashes);
        }
        text.push(c);
        *line += usize::from(c == '\n');
        i += 1;
    }
    (text, i)
}

/// A character literal (`'x'`, `'\n'`, the quote of `b'x'`) or a lifetime (`'a`) starting at
/// the quote at `i`; returns the index after it.
fn quote(chars: &[char], i: usize) -> usize {
    match (chars.get(i + 1), chars.get(i + 2)) {
        (Some('\\'), _) => {
            // An escape: the closing quote follows within the line (`'\''`, `'\u{1F600}'`).
            let mut k = i + 3;
            while let Some(&c) = chars.get(k) {
                match c {
                    '\'' => return k + 1,
                    '\n' => return k,
                    _ => k += 1,
                }
            }
            k
        }
        (Some(_), Some('\'')) => i + 3,
        _ => {
            let mut k = i + 1;
            while chars.get(k).is_some_and(|&c| is_ident_char(c)) {
                k += 1;
            }
            k
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The scanner: what one file declares, imports and names, per (inline) module scope.

/// `mod NAME;` in a file.
#[derive(Debug)]
struct ModDecl {
    scope: usize,
    name: String,
    path_attr: Option<String>,
}

/// One leaf of a `use` tree: `use crate::{a::B as C}` gives path `crate a B`, name `C`.
#[derive(Debug, PartialEq, Eq)]
struct UseLeaf {
    scope: usize,
    path: Vec<String>,
    /// The name it binds; `None` for a glob.
    name: Option<String>,
    public: bool,
    line: usize,
}

/// A path in code: `crate::a::f`, `super::X`, `child::g`.
#[derive(Debug)]
struct PathRef {
    scope: usize,
    path: Vec<String>,
    line: usize,
}

#[derive(Debug, Default)]
struct Scan {
    /// Inline module paths relative to the file's module; index 0 is the file itself.
    scopes: Vec<Vec<String>>,
    mods: Vec<ModDecl>,
    uses: Vec<UseLeaf>,
    paths: Vec<PathRef>,
    /// Names used in code (not in `use`, `mod` or attributes), with their line.
    idents: Vec<(String, usize)>,
    /// Names of items defined, per scope.
    items: Vec<(usize, String)>,
}

struct Parser<'a> {
    tokens: &'a [Token],
    i: usize,
    /// Open inline modules: (scope index, brace depth inside it).
    stack: Vec<(usize, usize)>,
    depth: usize,
    scan: Scan,
}

fn scan(src: &str) -> Scan {
    let tokens = lex(src);
    let mut parser = Parser {
        tokens: &tokens,
        i: 0,
        stack: Vec::new(),
        depth: 0,
        scan: Scan { scopes: vec![Vec::new()], ..Scan::default() },
    };
    parser.run();
    parser.scan
}

const ITEM_KEYWORDS: &[&str] =
    &["fn", "struct", "enum", "trait", "type", "const", "static", "union"];

impl Parser<'_> {
    fn text(&self, i: usize) -> &str {
        self.tokens.get(i).map_or("", |t| t.text.as_str())
    }

    fn is_ident(&self, i: usize) -> bool {
        self.tokens.get(i).is_some_and(|t| t.kind == Kind::Ident)
    }

    fn line(&self, i: usize) -> usize {
        self.tokens.get(i).or(self.tokens.last()).map_or(1, |t| t.line)
    }

    fn scope(&self) -> usize {
        self.stack.last().map_or(0, |&(scope, _)| scope)
    }

    /// Whether token `i` continues a path or a field access (`a::b`, `x.b`).
    fn continues(&self, i: usize) -> bool {
        i > 0 && matches!(self.text(i - 1), "::" | ".")
    }

    fn run(&mut self) {
        let mut test_item = false;
        let mut path_attr = None;
        while self.i < self.tokens.len() {
            let i = self.i;
            if self.text(i) == "#" && (self.text(i + 1) == "[" || self.text(i + 1) == "!") {
                let (is_test, path) = self.attribute();
                test_item |= is_test;
                path_attr = path.or(path_attr);
                continue;
            }
            if test_item {
                self.skip_item();
                test_item = false;
                path_attr = None;
                continue;
            }
            let text = self.text(i).to_owned();
            let ident = self.is_ident(i);
            match text.as_str() {
                "mod" if self.is_ident(i + 1) => {
                    self.module(path_attr.take());
                    continue;
                }
                "use" if self.text(i + 1) != "<" => {
                    self.use_decl();
                    continue;
                }
                "{" => self.depth += 1,
                "}" => {
                    if self.stack.last().is_some_and(|&(_, depth)| depth == self.depth) {
                        self.stack.pop();
                    }
                    self.depth = self.depth.saturating_sub(1);
                }
                ";" => path_attr = None,
                "crate" | "super" | "self" => {
                    // Not `pub(in crate::a)`, which is a visibility, not a use.
                    let before = i.checked_sub(1).map_or("", |k| self.text(k));
                    if self.text(i + 1) == "::" && !self.continues(i) && before != "in" {
                        self.path_ref();
                        continue;
                    }
                }
                "macro_rules" if self.text(i + 1) == "!" && self.is_ident(i + 2) => {
                    let name = self.text(i + 2).to_owned();
                    self.scan.items.push((self.scope(), name));
                }
                keyword if ITEM_KEYWORDS.contains(&keyword) && self.is_ident(i + 1) => {
                    let name = self.text(i + 1).to_owned();
                    self.scan.items.push((self.scope(), name));
                }
                _ if ident && !self.continues(i) => {
                    self.scan.idents.push((text.clone(), self.line(i)));
                    if self.text(i + 1) == "::" && self.is_ident(i + 2) {
                        self.path_ref();
                        continue;
                    }
                }
                _ => {}
            }
            self.i += 1;
        }
    }

    /// Reads `#[...]` or `#![...]` at `self.i`: whether it is an outer `#[cfg(test)]`, and the
    /// path of a `#[path = "..."]`.
    fn attribute(&mut self) -> (bool, Option<String>) {
        let inner = self.text(self.i + 1) == "!";
        let open = self.i + 1 + usize::from(inner);
        if self.text(open) != "[" {
            self.i += 1;
            return (false, None);
        }
        let mut depth = 0usize;
        let mut k = open;
        while k < self.tokens.len() {
            match self.text(k) {
                "[" => depth += 1,
                "]" => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                _ => {}
            }
            k += 1;
        }
        let body = self.tokens.get(open + 1..k).unwrap_or_default();
        let texts: Vec<&str> = body.iter().map(|t| t.text.as_str()).collect();
        let is_test = !inner && texts == ["cfg", "(", "test", ")"];
        let path = match body {
            [name, eq, value]
                if name.text == "path" && eq.text == "=" && value.kind == Kind::Str =>
            {
                Some(value.text.clone())
            }
            _ => None,
        };
        self.i = k + 1;
        (is_test, path)
    }

    /// Skips the item (or statement, field, arm) at `self.i`: up to a `;` or `,` at its own
    /// level, or the end of its first block; stops before a closing bracket it did not open.
    fn skip_item(&mut self) {
        let mut depth = 0usize;
        while self.i < self.tokens.len() {
            match self.text(self.i) {
                "(" | "[" | "{" => depth += 1,
                ")" | "]" | "}" => {
                    if depth == 0 {
                        return;
                    }
                    depth -= 1;
                    if depth == 0 && self.text(self.i) == "}" {
                        self.i += 1;
                        return;
                    }
                }
                ";" | "," if depth == 0 => {
                    self.i += 1;
                    return;
                }
                _ => {}
            }
            self.i += 1;
        }
    }

    /// `mod NAME;` or `mod NAME {` at `self.i`.
    fn module(&mut self, path_attr: Option<String>) {
        let name = self.text(self.i + 1).to_owned();
        let scope = self.scope();
        self.scan.items.push((scope, name.clone()));
        match self.text(self.i + 2) {
            ";" => {
                self.scan.mods.push(ModDecl { scope, name, path_attr });
                self.i += 3;
            }
            "{" => {
                let mut path = self.scan.scopes[scope].clone();
                path.push(name);
                self.scan.scopes.push(path);
                self.depth += 1;
                self.stack.push((self.scan.scopes.len() - 1, self.depth));
                self.i += 3;
            }
            _ => self.i += 1,
        }
    }

    /// A `use` declaration at `self.i`, up to its `;`.
    fn use_decl(&mut self) {
        let mut before = self.i.checked_sub(1);
        if let Some(close) = before.filter(|&k| self.text(k) == ")") {
            let mut k = close;
            while k > 0 && self.text(k) != "(" {
                k -= 1;
            }
            before = k.checked_sub(1);
        }
        let public = before.is_some_and(|k| self.text(k) == "pub");
        self.i += 1;
        let mut leaves = Vec::new();
        self.use_tree(Vec::new(), &mut leaves);
        let scope = self.scope();
        for (path, name, line) in leaves {
            self.scan.uses.push(UseLeaf { scope, path, name, public, line });
        }
        while self.i < self.tokens.len() && self.text(self.i) != ";" {
            self.i += 1;
        }
        self.i += 1;
    }

    /// One use tree at `self.i` under `prefix`; pushes its leaves as (path, bound name, line).
    fn use_tree(
        &mut self,
        mut prefix: Vec<String>,
        out: &mut Vec<(Vec<String>, Option<String>, usize)>,
    ) {
        if self.text(self.i) == "::" {
            prefix.push("::".into());
            self.i += 1;
        }
        loop {
            let i = self.i;
            match self.text(i) {
                "*" => {
                    self.i += 1;
                    out.push((prefix, None, self.line(i)));
                    return;
                }
                "{" => {
                    self.i += 1;
                    while self.i < self.tokens.len() {
                        if self.text(self.i) == "}" {
                            self.i += 1;
                            return;
                        }
                        let before = self.i;
                        self.use_tree(prefix.clone(), out);
                        if self.text(self.i) == "," {
                            self.i += 1;
                        } else if self.i == before {
                            return;
                        }
                    }
                    return;
                }
                _ if self.is_ident(i) => {
                    prefix.push(self.text(i).to_owned());
                    self.i += 1;
                    if self.text(self.i) == "::" {
                        self.i += 1;
                        continue;
                    }
                    if prefix.last().is_some_and(|last| last == "self") && prefix.len() > 1 {
                        prefix.pop();
                    }
                    let mut name = prefix.last().cloned();
                    if self.text(self.i) == "as" {
                        name = Some(self.text(self.i + 1).to_owned());
                        self.i += 2;
                    }
                    out.push((prefix, name, self.line(i)));
                    return;
                }
                _ => return,
            }
        }
    }

    /// A path in code at `self.i`: `first (:: ident)*`.
    fn path_ref(&mut self) {
        let line = self.line(self.i);
        let mut path = vec![self.text(self.i).to_owned()];
        self.i += 1;
        while self.text(self.i) == "::" && self.is_ident(self.i + 1) {
            path.push(self.text(self.i + 1).to_owned());
            self.i += 2;
        }
        self.scan.paths.push(PathRef { scope: self.scope(), path, line });
    }
}

// ---------------------------------------------------------------------------------------------
// The crate: its modules, what their `use`s bind, the edges and the cycles.

struct Module {
    /// The module's path from the root (`[]` for the root).
    path: Vec<String>,
    /// Its file, relative to the root file's directory.
    file: String,
    scan: Scan,
}

struct Crate {
    modules: Vec<Module>,
    /// Every module path, file or inline, to the index of the file module it is in.
    owner: BTreeMap<Vec<String>, usize>,
    /// Per module path: the names its `use`s bind, to the absolute path they stand for.
    aliases: BTreeMap<Vec<String>, BTreeMap<String, Vec<String>>>,
    /// Per module path: the absolute paths its glob `use`s read.
    globs: BTreeMap<Vec<String>, Vec<Vec<String>>>,
    /// Per module path: the names of the items it defines.
    items: BTreeMap<Vec<String>, BTreeSet<String>>,
}

/// The first line behind an edge.
#[derive(Debug, Clone)]
struct Evidence {
    line: usize,
    /// What was named, as `module::Item`.
    named: String,
}

fn display(path: &[String]) -> String {
    if path.is_empty() { "crate".to_owned() } else { path.join("::") }
}

impl Crate {
    /// Follows `mod` declarations from `root_file`; declared files that are missing are skipped.
    fn load(root_file: &Path) -> anyhow::Result<Crate> {
        let src_dir = root_file.parent().unwrap_or(Path::new("."));
        let mut modules = Vec::new();
        let mut queue = VecDeque::from([(Vec::new(), root_file.to_path_buf(), true)]);
        let mut seen = BTreeSet::new();
        while let Some((path, file, owns_dir)) = queue.pop_front() {
            if !seen.insert(file.clone()) {
                continue;
            }
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("reading {}", file.display()))?;
            let scan = scan(&text);
            let here = file.parent().unwrap_or(src_dir).to_path_buf();
            // Where this file's child modules live: beside it for lib.rs, main.rs, mod.rs and
            // `#[path]` files, else in the directory named after it.
            let children = if owns_dir {
                here.clone()
            } else {
                here.join(file.file_stem().unwrap_or_default())
            };
            for decl in &scan.mods {
                let inline = &scan.scopes[decl.scope];
                let mut child_path = path.clone();
                child_path.extend(inline.iter().cloned());
                child_path.push(decl.name.clone());
                let mut dir = children.clone();
                dir.extend(inline);
                let candidates = match &decl.path_attr {
                    Some(attr) if inline.is_empty() => vec![(here.join(attr), true)],
                    Some(attr) => vec![(dir.join(attr), true)],
                    None => vec![
                        (dir.join(format!("{}.rs", decl.name)), false),
                        (dir.join(&decl.name).join("mod.rs"), true),
                    ],
                };
                if let Some((found, owns)) = candidates.into_iter().find(|(c, _)| c.is_file()) {
                    queue.push_back((child_path, found, owns));
                }
            }
            let shown = file.strip_prefix(src_dir).unwrap_or(&file).display().to_string();
            modules.push(Module { path, file: shown, scan });
        }
        let mut krate = Crate {
            modules,
            owner: BTreeMap::new(),
            aliases: BTreeMap::new(),
            globs: BTreeMap::new(),
            items: BTreeMap::new(),
        };
        for (index, module) in krate.modules.iter().enumerate() {
            for scope in &module.scan.scopes {
                krate.owner.insert(absolute(&module.path, scope), index);
            }
        }
        for index in 0..krate.modules.len() {
            let module = &krate.modules[index];
            let mut aliases: Vec<(Vec<String>, String, Vec<String>)> = Vec::new();
            let mut globs: Vec<(Vec<String>, Vec<String>)> = Vec::new();
            for leaf in &module.scan.uses {
                let Some(target) = krate.absolute_path(index, leaf.scope, &leaf.path, true) else {
                    continue;
                };
                let scope = absolute(&module.path, &module.scan.scopes[leaf.scope]);
                match &leaf.name {
                    Some(name) if name != "_" => aliases.push((scope, name.clone(), target)),
                    Some(_) => {}
                    None => globs.push((scope, target)),
                }
            }
            let items: Vec<(Vec<String>, String)> = module
                .scan
                .items
                .iter()
                .map(|(scope, name)| {
                    (absolute(&module.path, &module.scan.scopes[*scope]), name.clone())
                })
                .collect();
            for (scope, name, target) in aliases {
                krate.aliases.entry(scope).or_default().insert(name, target);
            }
            for (scope, target) in globs {
                krate.globs.entry(scope).or_default().push(target);
            }
            for (scope, name) in items {
                krate.items.entry(scope).or_default().insert(name);
            }
        }
        Ok(krate)
    }

    /// The absolute path (from the crate root) that `path`, written in scope `scope` of module
    /// `index`, stands for; `None` for paths into other crates and for local names.
    fn absolute_path(
        &self,
        index: usize,
        scope: usize,
        path: &[String],
        in_use: bool,
    ) -> Option<Vec<String>> {
        let module = &self.modules[index];
        let mut base = absolute(&module.path, &module.scan.scopes[scope]);
        let (first, rest) = path.split_first()?;
        match first.as_str() {
            "::" => None,
            "crate" => Some(rest.to_vec()),
            "self" => {
                base.extend_from_slice(rest);
                Some(base)
            }
            "super" => {
                let mut k = 0;
                while path.get(k).is_some_and(|s| s == "super") {
                    base.pop()?;
                    k += 1;
                }
                base.extend_from_slice(&path[k..]);
                Some(base)
            }
            name => {
                let mut child = base.clone();
                child.push(name.to_owned());
                if self.owner.contains_key(&child) {
                    child.extend_from_slice(rest);
                    return Some(child);
                }
                if in_use {
                    return None;
                }
                let mut target = self.aliases.get(&base)?.get(name)?.clone();
                target.extend_from_slice(rest);
                Some(target)
            }
        }
    }

    /// The module an absolute path ends in after following re-exports, and the rest of it.
    fn resolve(&self, mut path: Vec<String>) -> (Vec<String>, Vec<String>) {
        // Re-exports can chain (`lib.rs` re-exports what `foo/mod.rs` re-exports); a bound
        // keeps a cycle of re-exports (which rustc rejects) from looping here.
        for _ in 0..32 {
            let (module, rest) = self.resolve_shallow(&path);
            let Some((name, tail)) = rest.split_first() else {
                return (module, rest);
            };
            let next = if let Some(target) = self.aliases.get(&module).and_then(|a| a.get(name)) {
                Some(target.clone())
            } else if self.items.get(&module).is_some_and(|items| items.contains(name)) {
                None
            } else {
                self.globs.get(&module).into_iter().flatten().find_map(|glob| {
                    let (glob_module, glob_rest) = self.resolve_shallow(glob);
                    let binds = glob_rest.is_empty()
                        && (self.items.get(&glob_module).is_some_and(|i| i.contains(name))
                            || self
                                .aliases
                                .get(&glob_module)
                                .is_some_and(|a| a.contains_key(name)));
                    binds.then(|| [glob_module, vec![name.clone()]].concat())
                })
            };
            match next {
                Some(mut next) => {
                    next.extend_from_slice(tail);
                    if next == path {
                        break;
                    }
                    path = next;
                }
                None => return (module, rest),
            }
        }
        self.resolve_shallow(&path)
    }

    /// The longest module prefix of `path`, without following re-exports.
    fn resolve_shallow(&self, path: &[String]) -> (Vec<String>, Vec<String>) {
        let k = (0..=path.len()).rev().find(|&k| self.owner.contains_key(&path[..k]));
        let (module, rest) = path.split_at(k.unwrap_or(0));
        (module.to_vec(), rest.to_vec())
    }

    /// Edges between file modules, each with the first line behind it.
    fn edges(&self) -> BTreeMap<(usize, usize), Evidence> {
        let mut edges: BTreeMap<(usize, usize), Evidence> = BTreeMap::new();
        for (index, module) in self.modules.iter().enumerate() {
            let mut add = |absolute: Vec<String>, line: usize| {
                let (target, rest) = self.resolve(absolute);
                let Some(&to) = self.owner.get(&target) else { return };
                if to == index {
                    return;
                }
                let mut named = target[self.modules[to].path.len()..].to_vec();
                named.extend(rest);
                let shown = display(&self.modules[to].path);
                let named =
                    if named.is_empty() { shown } else { format!("{shown}::{}", named.join("::")) };
                let entry =
                    edges.entry((index, to)).or_insert(Evidence { line, named: named.clone() });
                if line < entry.line {
                    *entry = Evidence { line, named };
                }
            };
            for leaf in &module.scan.uses {
                let Some(target) = self.absolute_path(index, leaf.scope, &leaf.path, true) else {
                    continue;
                };
                let line = if leaf.public {
                    // A re-export is an edge only where this module's code names the item.
                    let Some(name) = leaf.name.as_ref().filter(|n| *n != "_") else { continue };
                    let used = module.scan.idents.iter().find(|(ident, _)| ident == name);
                    let Some(&(_, line)) = used else { continue };
                    line
                } else {
                    leaf.line
                };
                add(target, line);
            }
            for reference in &module.scan.paths {
                if let Some(target) =
                    self.absolute_path(index, reference.scope, &reference.path, false)
                {
                    add(target, reference.line);
                }
            }
        }
        edges
    }

    /// One line per strongly connected component of more than one module.
    fn cycles(&self, label: &str) -> Vec<String> {
        let edges = self.edges();
        let count = self.modules.len();
        let mut successors = vec![Vec::new(); count];
        for &(from, to) in edges.keys() {
            successors[from].push(to);
        }
        let name = |m: usize| display(&self.modules[m].path);
        let mut components = strongly_connected(&successors);
        for component in &mut components {
            component.sort_by_key(|&m| name(m));
        }
        components.sort_by_key(|component| component.first().map(|&m| name(m)));
        let mut problems = Vec::new();
        for component in components.iter().filter(|c| c.len() > 1) {
            let members: BTreeSet<usize> = component.iter().copied().collect();
            let Some(cycle) = component
                .iter()
                .filter_map(|&start| shortest_cycle(start, &successors, &members))
                .min_by_key(Vec::len)
            else {
                continue;
            };
            let route: Vec<String> = cycle.iter().map(|&m| name(m)).collect();
            let because: Vec<String> = cycle
                .windows(2)
                .map(|pair| {
                    let evidence = &edges[&(pair[0], pair[1])];
                    format!(
                        "{}:{} uses {}",
                        self.modules[pair[0]].file, evidence.line, evidence.named
                    )
                })
                .collect();
            let mut problem =
                format!("module cycle in {label}: {} ({})", route.join(" -> "), because.join(", "));
            let others: Vec<String> =
                component.iter().filter(|m| !cycle.contains(m)).map(|&m| name(m)).collect();
            if !others.is_empty() {
                problem.push_str(&format!("; its component also holds {}", others.join(", ")));
            }
            problems.push(problem);
        }
        problems
    }
}

fn absolute(module: &[String], scope: &[String]) -> Vec<String> {
    module.iter().chain(scope).cloned().collect()
}

/// Tarjan's strongly connected components.
fn strongly_connected(successors: &[Vec<usize>]) -> Vec<Vec<usize>> {
    struct State<'a> {
        successors: &'a [Vec<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        components: Vec<Vec<usize>>,
    }
    fn visit(state: &mut State<'_>, v: usize) {
        state.index[v] = Some(state.next);
        state.low[v] = state.next;
        state.next += 1;
        state.stack.push(v);
        state.on_stack[v] = true;
        for &w in &state.successors[v] {
            match state.index[w] {
                None => {
                    visit(state, w);
                    state.low[v] = state.low[v].min(state.low[w]);
                }
                Some(index) if state.on_stack[w] => state.low[v] = state.low[v].min(index),
                Some(_) => {}
            }
        }
        if Some(state.low[v]) == state.index[v] {
            let mut component = Vec::new();
            while let Some(w) = state.stack.pop() {
                state.on_stack[w] = false;
                component.push(w);
                if w == v {
                    break;
                }
            }
            state.components.push(component);
        }
    }
    let count = successors.len();
    let mut state = State {
        successors,
        index: vec![None; count],
        low: vec![0; count],
        on_stack: vec![false; count],
        stack: Vec::new(),
        next: 0,
        components: Vec::new(),
    };
    for v in 0..count {
        if state.index[v].is_none() {
            visit(&mut state, v);
        }
    }
    state.components
}

/// The shortest cycle from `start` back to it inside `members`, as `start, ..., start`.
fn shortest_cycle(
    start: usize,
    successors: &[Vec<usize>],
    members: &BTreeSet<usize>,
) -> Option<Vec<usize>> {
    let mut parent: BTreeMap<usize, usize> = BTreeMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for &w in &successors[v] {
            if !members.contains(&w) {
                continue;
            }
            if w == start {
                let mut cycle = vec![start, v];
                let mut at = v;
                while let Some(&before) = parent.get(&at) {
                    cycle.push(before);
                    at = before;
                }
                cycle.reverse();
                return Some(cycle);
            }
            if let Entry::Vacant(entry) = parent.entry(w) {
                entry.insert(v);
                queue.push_back(w);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    //! Fixture crates in `xtask/test_data/module_cycles/NAME/src/{lib,main}.rs`, each with the
    //! problems it must give in `NAME/expect.txt` (empty for none). `UPDATE_EXPECT=1 cargo test
    //! -p xtask tidy` rewrites the expectations; review the diff.

    use std::path::Path;

    use super::{UseLeaf, crate_cycles, lex, scan};

    fn check(case: &Path) -> Option<String> {
        let name = case.file_name()?.to_string_lossy().into_owned();
        let root = ["lib.rs", "main.rs"]
            .iter()
            .map(|file| case.join("src").join(file))
            .find(|path| path.is_file())
            .expect("a fixture crate has src/lib.rs or src/main.rs");
        let problems = crate_cycles(&name, &root).expect("fixture crate loads");
        let actual: String = problems.iter().map(|p| format!("{p}\n")).collect();
        let expect_path = case.join("expect.txt");
        let expected = std::fs::read_to_string(&expect_path).unwrap_or_default();
        if actual == expected {
            return None;
        }
        if std::env::var_os("UPDATE_EXPECT").is_some() {
            std::fs::write(&expect_path, &actual).expect("write expectation");
            return None;
        }
        Some(format!("{name}:\n--- expected\n{expected}+++ actual\n{actual}"))
    }

    #[test]
    fn fixture_crates() {
        let dir = crate::project_root().join("xtask/test_data/module_cycles");
        let mut cases: Vec<_> = std::fs::read_dir(&dir)
            .expect("fixture directory")
            .map(|entry| entry.expect("fixture entry").path())
            .filter(|path| path.is_dir())
            .collect();
        cases.sort();
        assert!(cases.len() >= 8, "expected at least 8 fixture crates, found {}", cases.len());
        let failures: Vec<String> = cases.iter().filter_map(|case| check(case)).collect();
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    /// The `use` leaves of `src` as (path with segments joined by spaces, bound name, public).
    fn leaves(src: &str) -> Vec<(String, Option<String>, bool)> {
        scan(src)
            .uses
            .into_iter()
            .map(|UseLeaf { path, name, public, .. }| (path.join(" "), name, public))
            .collect()
    }

    #[test]
    fn use_trees_expand_to_their_leaves() {
        let src = "pub(crate) use crate::{a::{B, c::D as E}, f::*, g::{self}};\nuse ::ext::X;";
        let expected = [
            ("crate a B", Some("B"), true),
            ("crate a c D", Some("E"), true),
            ("crate f", None, true),
            ("crate g", Some("g"), true),
            (":: ext X", Some("X"), false),
        ];
        let expected: Vec<_> = expected
            .iter()
            .map(|(path, name, public)| (path.to_string(), name.map(str::to_owned), *public))
            .collect();
        assert_eq!(leaves(src), expected);
    }

    #[test]
    fn lexing_drops_comments_and_literals() {
        let src = "a /* b /* c */ d */ e // f\n\"g\\\" h\" 'i' '\\'' 'j r#\"k\"# l";
        let idents: Vec<String> = lex(src)
            .into_iter()
            .filter(|token| token.kind == super::Kind::Ident)
            .map(|token| token.text)
            .collect();
        assert_eq!(idents, ["a", "e", "l"]);
        assert_eq!(lex("a\n\"x\ny\"\nb").last().map(|token| token.line), Some(4));
    }

    #[test]
    fn test_items_are_skipped() {
        let src = "#[cfg(test)]\nmod tests {\n    use crate::b::X;\n}\n#[cfg(test)]\nuse crate::c::Y;\nuse crate::d::Z;";
        let paths: Vec<String> = leaves(src).into_iter().map(|(path, ..)| path).collect();
        assert_eq!(paths, ["crate d Z"]);
    }
}
