//! The parser of filter expressions: go-bexpr's PEG grammar (`grammar/grammar.peg`), one
//! method per rule, alternatives tried in order with backtracking, and errors as its generated
//! parser reports them: the farthest position any rule reached with what it expected there, or
//! the first error a rule raised (`Unmatched parentheses`, `Invalid number literal`, a string
//! escape that does not unquote), each prefixed with `line:col (offset)`.
//!
//! Not here: what an expression means (`eval`).

use std::collections::BTreeSet;
use std::sync::OnceLock;

use super::ast::{Binding, Collection, Expr, Match, MatchOp, Selector};

/// A filter that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ParseError {
    /// The message as go-bexpr words it, position first.
    pub message: String,
    /// Byte offset of the error.
    pub offset: usize,
}

pub(super) fn parse(source: &str) -> Result<Expr, ParseError> {
    let mut parser = Parser {
        src: source,
        max_fail: 0,
        expected: BTreeSet::new(),
        invert: false,
        rules: Vec::new(),
        errors: Vec::new(),
        depth: 0,
    };
    let result = parser.input();
    if let Some((offset, message)) = parser.errors.first().cloned() {
        return Err(ParseError { message, offset });
    }
    match result {
        Some(expr) => Ok(expr),
        None => {
            let mut expected: Vec<String> = parser.expected.iter().cloned().collect();
            let eof = expected.iter().position(|want| want == "!.");
            if let Some(at) = eof {
                expected.remove(at);
                expected.push("EOF".to_string());
            }
            let offset = parser.max_fail;
            Err(ParseError {
                message: format!(
                    "{}: no match found, expected: {}",
                    position(source, offset),
                    join_or(&expected)
                ),
                offset,
            })
        }
    }
}

/// `a, b or c`, as pigeon lists what it expected.
fn join_or(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

/// `line:col (offset)` of a byte offset, counted as pigeon counts: columns in characters, a
/// newline belonging to the line it ends... at column 0 of the next.
fn position(source: &str, offset: usize) -> String {
    let before = &source[..offset.min(source.len())];
    let mut line = 1 + before.matches('\n').count();
    let last_line = before.rsplit('\n').next().unwrap_or("");
    let mut column = last_line.chars().count() + 1;
    if source[offset.min(source.len())..].starts_with('\n') {
        line += 1;
        column = 0;
    }
    format!("{line}:{column} ({offset})")
}

type Parsed<T> = Option<(T, usize)>;

/// How deeply expressions (parentheses, collection bodies) may nest: each level is a few frames
/// of recursion, so a filter of thousands of `(` would otherwise exhaust the stack of the
/// thread parsing it.
const MAX_NESTING: usize = 64;

struct Parser<'s> {
    src: &'s str,
    /// The farthest offset a terminal failed at, and what was expected there.
    max_fail: usize,
    expected: BTreeSet<String>,
    /// Inside a `!` lookahead: a terminal that matches is the failure.
    invert: bool,
    /// The display names of the rules being parsed, innermost last.
    rules: Vec<&'static str>,
    /// Errors rules raised: (offset, message).
    errors: Vec<(usize, String)>,
    /// How many `OrExpression`s are being parsed, outermost included.
    depth: usize,
}

impl<'s> Parser<'s> {
    fn fail_at(&mut self, failed: bool, at: usize, want: &str) {
        if failed != self.invert {
            if at < self.max_fail {
                return;
            }
            if at > self.max_fail {
                self.max_fail = at;
                self.expected.clear();
            }
            let want = if self.invert {
                format!("!{want}")
            } else {
                want.to_string()
            };
            self.expected.insert(want);
        }
    }

    fn raise(&mut self, at: usize, message: &str) {
        let mut text = position(self.src, at);
        if let Some(rule) = self.rules.last() {
            text.push_str(": rule ");
            text.push_str(rule);
        }
        text.push_str(": ");
        text.push_str(message);
        if !self.errors.iter().any(|(_, known)| *known == text) {
            self.errors.push((at, text));
        }
    }

    fn rule<T>(&mut self, name: &'static str, body: impl FnOnce(&mut Self) -> T) -> T {
        self.rules.push(name);
        let result = body(self);
        self.rules.pop();
        result
    }

    fn rest(&self, at: usize) -> &'s str {
        &self.src[at..]
    }

    fn lit(&mut self, at: usize, text: &str) -> Option<usize> {
        let matched = self.rest(at).starts_with(text);
        self.fail_at(!matched, at, &format!("{text:?}"));
        matched.then_some(at + text.len())
    }

    fn class(&mut self, at: usize, name: &str, accepts: impl Fn(char) -> bool) -> Option<usize> {
        let next = self.rest(at).chars().next();
        let matched = next.filter(|c| accepts(*c));
        self.fail_at(matched.is_none(), at, name);
        matched.map(|c| at + c.len_utf8())
    }

    fn any_char(&mut self, at: usize) -> Option<usize> {
        let next = self.rest(at).chars().next();
        self.fail_at(next.is_none(), at, ".");
        next.map(|c| at + c.len_utf8())
    }

    /// `!expr`: succeeds, consuming nothing, where `expr` fails.
    fn not<T>(&mut self, at: usize, expr: impl FnOnce(&mut Self, usize) -> Option<T>) -> bool {
        self.invert = !self.invert;
        let matched = expr(self, at).is_some();
        self.invert = !self.invert;
        !matched
    }

    fn eof(&mut self, at: usize) -> bool {
        self.not(at, |parser, at| parser.any_char(at))
    }

    /// `_`: one or more of space, tab, CR, LF.
    fn ws(&mut self, at: usize) -> Option<usize> {
        self.rule("whitespace", |parser| {
            let mut pos = parser.class(at, "[ \\t\\r\\n]", is_space)?;
            while let Some(next) = parser.class(pos, "[ \\t\\r\\n]", is_space) {
                pos = next;
            }
            Some(pos)
        })
    }

    /// `_?`
    fn ws_opt(&mut self, at: usize) -> usize {
        self.ws(at).unwrap_or(at)
    }

    fn input(&mut self) -> Option<Expr> {
        // _? "(" _? OrExpression _? ")" _? EOF
        let start = self.ws_opt(0);
        if let Some(pos) = self.lit(start, "(") {
            let pos = self.ws_opt(pos);
            if let Some((expr, pos)) = self.or_expression(pos) {
                let pos = self.ws_opt(pos);
                if let Some(pos) = self.lit(pos, ")") {
                    let pos = self.ws_opt(pos);
                    if self.eof(pos) {
                        return Some(expr);
                    }
                }
            }
        }
        // _? OrExpression _? EOF
        let (expr, pos) = self.or_expression(start)?;
        let pos = self.ws_opt(pos);
        self.eof(pos).then_some(expr)
    }

    // Each rule below parses its first operand once and reuses it for its second alternative
    // (the grammar's `A _ "or" _ B / A`): parsing it again gives the same answer, and doing so
    // at every level made nested parentheses cost exponential time.
    fn or_expression(&mut self, at: usize) -> Parsed<Expr> {
        if self.depth >= MAX_NESTING {
            self.raise(
                at,
                &format!("expressions nest deeper than {MAX_NESTING} levels"),
            );
            return None;
        }
        self.depth += 1;
        let parsed = self.or_expression_within(at);
        self.depth -= 1;
        parsed
    }

    fn or_expression_within(&mut self, at: usize) -> Parsed<Expr> {
        let Some((left, pos)) = self.and_expression(at) else {
            return self.collection_expression(at);
        };
        let right = self
            .ws(pos)
            .and_then(|pos| self.lit(pos, "or"))
            .and_then(|pos| self.ws(pos))
            .and_then(|pos| self.or_expression(pos));
        match right {
            Some((right, end)) => Some((Expr::Or(Box::new(left), Box::new(right)), end)),
            None => Some((left, pos)),
        }
    }

    fn and_expression(&mut self, at: usize) -> Parsed<Expr> {
        let (left, pos) = self.not_expression(at)?;
        let right = self
            .ws(pos)
            .and_then(|pos| self.lit(pos, "and"))
            .and_then(|pos| self.ws(pos))
            .and_then(|pos| self.and_expression(pos));
        match right {
            Some((right, end)) => Some((Expr::And(Box::new(left), Box::new(right)), end)),
            None => Some((left, pos)),
        }
    }

    fn not_expression(&mut self, at: usize) -> Parsed<Expr> {
        let negated = self
            .lit(at, "not")
            .and_then(|pos| self.ws(pos))
            .and_then(|pos| self.not_expression(pos));
        if let Some((inner, pos)) = negated {
            // `not not x` is `x`, as go-bexpr folds it.
            return Some(match inner {
                Expr::Not(operand) => (*operand, pos),
                other => (Expr::Not(Box::new(other)), pos),
            });
        }
        self.parenthesized_expression(at)
    }

    fn collection_expression(&mut self, at: usize) -> Parsed<Expr> {
        let (all, pos) = if let Some(pos) = self.lit(at, "any").and_then(|pos| self.ws(pos)) {
            (false, pos)
        } else {
            (true, self.lit(at, "all").and_then(|pos| self.ws(pos))?)
        };
        let (selector, pos) = self.selector(pos)?;
        let pos = self.ws(pos)?;
        let pos = self.lit(pos, "as")?;
        let pos = self.ws(pos)?;
        let (binding, pos) = self.collection_identifiers(pos)?;
        let pos = self.ws_opt(pos);
        let pos = self.lit(pos, "{")?;
        let pos = self.ws_opt(pos);
        let (inner, pos) = self.or_expression(pos)?;
        let pos = self.ws_opt(pos);
        let pos = self.lit(pos, "}")?;
        Some((
            Expr::Collection(Collection {
                all,
                selector,
                binding,
                inner: Box::new(inner),
            }),
            pos,
        ))
    }

    fn collection_identifiers(&mut self, at: usize) -> Parsed<Binding> {
        self.rule("collection-identifiers", |parser| {
            if let Some((first, pos)) = parser.identifier(at) {
                let pos = parser.ws_opt(pos);
                if let Some(pos) = parser.lit(pos, ",") {
                    let pos = parser.ws_opt(pos);
                    if let Some((second, end)) = parser.identifier(pos) {
                        return Some((Binding::IndexAndValue(first, second), end));
                    }
                    if let Some(end) = parser.lit(pos, "_") {
                        return Some((Binding::Index(first), end));
                    }
                }
            }
            if let Some(pos) = parser.lit(at, "_") {
                let pos = parser.ws_opt(pos);
                if let Some(pos) = parser.lit(pos, ",") {
                    let pos = parser.ws_opt(pos);
                    if let Some((second, end)) = parser.identifier(pos) {
                        return Some((Binding::Value(second), end));
                    }
                }
            }
            let (name, end) = parser.identifier(at)?;
            Some((Binding::Default(name), end))
        })
    }

    fn parenthesized_expression(&mut self, at: usize) -> Parsed<Expr> {
        self.rule("grouping", |parser| {
            // Where a parsed `( expression` ends without its `)`.
            let mut unclosed = None;
            if let Some(pos) = parser.lit(at, "(") {
                let pos = parser.ws_opt(pos);
                if let Some((expr, pos)) = parser.or_expression(pos) {
                    let pos = parser.ws_opt(pos);
                    if let Some(end) = parser.lit(pos, ")") {
                        return Some((expr, end));
                    }
                    unclosed = Some(pos);
                }
            }
            if let Some(parsed) = parser.match_expression(at) {
                return Some(parsed);
            }
            let pos = unclosed?;
            if parser.not(pos, |parser, pos| parser.lit(pos, ")")) {
                parser.raise(pos, "Unmatched parentheses");
            }
            None
        })
    }

    fn match_expression(&mut self, at: usize) -> Parsed<Expr> {
        self.rule("match", |parser| {
            parser
                .match_selector_op_value(at)
                .or_else(|| parser.match_selector_op(at))
                .or_else(|| parser.match_value_op_selector(at))
        })
    }

    fn match_selector_op_value(&mut self, at: usize) -> Parsed<Expr> {
        let (selector, pos) = self.selector(at)?;
        let (operator, pos) = self
            .op_equal(pos)
            .or_else(|| self.op_not_equal(pos))
            .or_else(|| self.op_words(pos, &["contains"], MatchOp::In))
            .or_else(|| self.op_words(pos, &["not", "contains"], MatchOp::NotIn))
            .or_else(|| self.op_words(pos, &["matches"], MatchOp::Matches))
            .or_else(|| self.op_words(pos, &["not", "matches"], MatchOp::NotMatches))?;
        let (value, pos) = self.value(pos)?;
        Some((new_match(selector, operator, Some(value)), pos))
    }

    fn match_selector_op(&mut self, at: usize) -> Parsed<Expr> {
        let (selector, pos) = self.selector(at)?;
        let (operator, pos) = self
            .op_words_closed(pos, &["is", "empty"], MatchOp::IsEmpty)
            .or_else(|| self.op_words_closed(pos, &["is", "not", "empty"], MatchOp::IsNotEmpty))
            .or_else(|| self.op_words_closed(pos, &["is", "nil"], MatchOp::IsNil))
            .or_else(|| self.op_words_closed(pos, &["is", "not", "nil"], MatchOp::IsNotNil))?;
        Some((new_match(selector, operator, None), pos))
    }

    fn match_value_op_selector(&mut self, at: usize) -> Parsed<Expr> {
        let (value, pos) = self.value(at)?;
        let (operator, pos) = self
            .op_words(pos, &["in"], MatchOp::In)
            .or_else(|| self.op_words(pos, &["not", "in"], MatchOp::NotIn))?;
        if let Some((selector, end)) = self.selector(pos) {
            return Some((new_match(selector, operator, Some(value)), end));
        }
        if self.not(pos, |parser, pos| parser.selector(pos)) {
            self.raise(pos, "Invalid selector");
        }
        None
    }

    fn op_equal(&mut self, at: usize) -> Parsed<MatchOp> {
        let pos = self.ws_opt(at);
        let pos = self.lit(pos, "==")?;
        Some((MatchOp::Equal, self.ws_opt(pos)))
    }

    fn op_not_equal(&mut self, at: usize) -> Parsed<MatchOp> {
        let pos = self.ws_opt(at);
        let pos = self.lit(pos, "!=")?;
        Some((MatchOp::NotEqual, self.ws_opt(pos)))
    }

    /// `_ word _ word ... _`
    fn op_words(&mut self, at: usize, words: &[&str], op: MatchOp) -> Parsed<MatchOp> {
        let pos = self.op_words_closed(at, words, op)?.1;
        Some((op, self.ws(pos)?))
    }

    /// `_ word _ word`, with no whitespace after the last word.
    fn op_words_closed(&mut self, at: usize, words: &[&str], op: MatchOp) -> Parsed<MatchOp> {
        let mut pos = at;
        for word in words {
            pos = self.ws(pos)?;
            pos = self.lit(pos, word)?;
        }
        Some((op, pos))
    }

    fn selector(&mut self, at: usize) -> Parsed<Selector> {
        self.rule("selector", |parser| {
            if let Some((first, mut pos)) = parser.identifier(at) {
                let mut path = vec![first];
                while let Some((part, next)) = parser.selector_or_index(pos) {
                    path.push(part);
                    pos = next;
                }
                return Some((
                    Selector {
                        json_pointer: false,
                        path,
                    },
                    pos,
                ));
            }
            let mut pos = parser.lit(at, "\"")?;
            let mut path = Vec::new();
            while let Some((segment, next)) = parser.json_pointer_segment(pos) {
                path.push(segment);
                pos = next;
            }
            let end = parser.lit(pos, "\"")?;
            Some((
                Selector {
                    json_pointer: true,
                    path,
                },
                end,
            ))
        })
    }

    fn json_pointer_segment(&mut self, at: usize) -> Parsed<String> {
        let start = self.lit(at, "/")?;
        let mut pos = self.class(start, "[\\pL\\pN-_.~:|]", is_pointer_char)?;
        while let Some(next) = self.class(pos, "[\\pL\\pN-_.~:|]", is_pointer_char) {
            pos = next;
        }
        // A JSON pointer's escapes: `~1` is `/`, `~0` is `~`.
        let segment = self.src[start..pos].replace("~1", "/").replace("~0", "~");
        Some((segment, pos))
    }

    fn identifier(&mut self, at: usize) -> Parsed<String> {
        let mut pos = self.class(at, "[a-zA-Z]", |c| c.is_ascii_alphabetic())?;
        while let Some(next) = self.class(pos, "[a-zA-Z0-9_/]", is_identifier_char) {
            pos = next;
        }
        Some((self.src[at..pos].to_string(), pos))
    }

    fn selector_or_index(&mut self, at: usize) -> Parsed<String> {
        if let Some(parsed) = self.lit(at, ".").and_then(|pos| self.identifier(pos)) {
            return Some(parsed);
        }
        if let Some(parsed) = self.index_expression(at) {
            return Some(parsed);
        }
        let start = self.lit(at, ".")?;
        let mut pos = self.class(start, "[0-9]", |c| c.is_ascii_digit())?;
        while let Some(next) = self.class(pos, "[0-9]", |c| c.is_ascii_digit()) {
            pos = next;
        }
        Some((self.src[start..pos].to_string(), pos))
    }

    fn index_expression(&mut self, at: usize) -> Parsed<String> {
        self.rule("index", |parser| {
            let open = parser.lit(at, "[")?;
            let pos = parser.ws_opt(open);
            if let Some((literal, after)) = parser.string_literal(pos) {
                let after = parser.ws_opt(after);
                if let Some(end) = parser.lit(after, "]") {
                    return Some((literal, end));
                }
                if parser.not(after, |parser, at| parser.lit(at, "]")) {
                    parser.raise(after, "Unclosed index expression");
                }
                return None;
            }
            if parser.not(pos, |parser, at| parser.string_literal(at)) {
                parser.raise(pos, "Invalid index");
            }
            None
        })
    }

    fn value(&mut self, at: usize) -> Parsed<String> {
        self.rule("value", |parser| {
            if let Some((selector, pos)) = parser.selector(at) {
                return Some((selector.display(), pos));
            }
            if let Some(parsed) = parser.number_literal(at) {
                return Some(parsed);
            }
            parser.string_literal(at)
        })
    }

    fn number_literal(&mut self, at: usize) -> Parsed<String> {
        self.rule("number", |parser| {
            let start = parser.lit(at, "-").unwrap_or(at);
            let pos = parser.integer_or_float(start)?;
            if parser.after_numbers(pos) {
                return Some((parser.src[at..pos].to_string(), pos));
            }
            parser.raise(pos, "Invalid number literal");
            None
        })
    }

    /// `&(_ / EOF / ")")`
    fn after_numbers(&mut self, at: usize) -> bool {
        self.ws(at).is_some() || self.eof(at) || self.lit(at, ")").is_some()
    }

    fn integer_or_float(&mut self, at: usize) -> Option<usize> {
        let mut pos = if let Some(pos) = self.lit(at, "0") {
            pos
        } else {
            let mut pos = self.class(at, "[1-9]", |c| ('1'..='9').contains(&c))?;
            while let Some(next) = self.class(pos, "[0-9]", |c| c.is_ascii_digit()) {
                pos = next;
            }
            pos
        };
        if let Some(dot) = self.lit(pos, ".")
            && let Some(mut fraction) = self.class(dot, "[0-9]", |c| c.is_ascii_digit())
        {
            while let Some(next) = self.class(fraction, "[0-9]", |c| c.is_ascii_digit()) {
                fraction = next;
            }
            pos = fraction;
        }
        Some(pos)
    }

    fn string_literal(&mut self, at: usize) -> Parsed<String> {
        self.rule("string", |parser| {
            for quote in ["`", "\""] {
                let Some(open) = parser.lit(at, quote) else {
                    continue;
                };
                let mut pos = open;
                while parser.not(pos, |parser, at| parser.lit(at, quote))
                    && let Some(next) = parser.any_char(pos)
                {
                    pos = next;
                }
                if let Some(end) = parser.lit(pos, quote) {
                    let text = &parser.src[at..end];
                    let value = match go_unquote(text) {
                        Ok(value) => value,
                        Err(()) => {
                            parser.raise(at, "invalid syntax");
                            String::new()
                        }
                    };
                    return Some((value, end));
                }
                if parser.eof(pos) {
                    parser.raise(pos, "Unterminated string literal");
                }
                return None;
            }
            None
        })
    }
}

fn new_match(selector: Selector, operator: MatchOp, value: Option<String>) -> Expr {
    Expr::Match(Match {
        selector,
        operator,
        value,
        regex: OnceLock::new(),
    })
}

fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r' | '\n')
}

fn is_identifier_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '/'
}

/// `[\pL\pN-_.~:|]`: letters, numbers, `-`, `_`, `.`, `~`, `:`, `|`.
fn is_pointer_char(c: char) -> bool {
    c.is_alphabetic() || c.is_numeric() || matches!(c, '-' | '_' | '.' | '~' | ':' | '|')
}

/// Go's `strconv.Unquote` of a back-quoted or double-quoted literal.
fn go_unquote(text: &str) -> Result<String, ()> {
    if let Some(raw) = text
        .strip_prefix('`')
        .and_then(|rest| rest.strip_suffix('`'))
    {
        return Ok(raw.replace('\r', ""));
    }
    let body = text
        .strip_prefix('"')
        .and_then(|rest| rest.strip_suffix('"'))
        .ok_or(())?;
    let mut out = String::with_capacity(body.len());
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' => return Err(()),
            '\\' => {
                let escape = chars.next().ok_or(())?;
                match escape {
                    'a' => out.push('\u{7}'),
                    'b' => out.push('\u{8}'),
                    'f' => out.push('\u{c}'),
                    'n' => out.push('\n'),
                    'r' => out.push('\r'),
                    't' => out.push('\t'),
                    'v' => out.push('\u{b}'),
                    '\\' => out.push('\\'),
                    '"' => out.push('"'),
                    'x' | 'u' | 'U' => {
                        let digits = match escape {
                            'x' => 2,
                            'u' => 4,
                            _ => 8,
                        };
                        let mut code = 0u32;
                        for _ in 0..digits {
                            let digit = chars.next().and_then(|d| d.to_digit(16)).ok_or(())?;
                            code = code * 16 + digit;
                        }
                        if escape == 'x' {
                            // A byte; only ASCII keeps the result valid UTF-8 text.
                            out.push(char::from_u32(code).filter(char::is_ascii).ok_or(())?);
                        } else {
                            out.push(char::from_u32(code).ok_or(())?);
                        }
                    }
                    '0'..='7' => {
                        let mut code = escape.to_digit(8).ok_or(())?;
                        for _ in 0..2 {
                            let digit = chars.next().and_then(|d| d.to_digit(8)).ok_or(())?;
                            code = code * 8 + digit;
                        }
                        if code > 255 {
                            return Err(());
                        }
                        out.push(char::from_u32(code).filter(char::is_ascii).ok_or(())?);
                    }
                    _ => return Err(()),
                }
            }
            other => out.push(other),
        }
    }
    Ok(out)
}
