//! The lexer: template text into tokens, as Go's `text/template/parse` lexer cuts it.
//!
//! It runs over the whole input at once into a list; the first error ends the list (an
//! [`Kind::Error`] token carrying Go's message), so the parser meets a lexical error exactly
//! where Go's would. Text between actions is handed on as byte ranges of the input with trim
//! markers (`{{- `, ` -}}`) already applied; comments are dropped. Spaces inside actions are
//! tokens because they separate a command's operands (`.a.b` is one operand, `.a .b` two).

use std::borrow::Cow;

/// What a token is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Error,
    Eof,
    Text,
    LeftDelim,
    RightDelim,
    Space,
    Identifier,
    Field,
    Variable,
    Bool,
    Number,
    CharConstant,
    String,
    RawString,
    LeftParen,
    RightParen,
    Pipe,
    Declare,
    Assign,
    /// Another printable ASCII character (`,` in `range $i, $v :=`).
    Char,
    // Keywords (Go prints these as `<word>` in errors).
    Dot,
    Nil,
    Block,
    Break,
    Continue,
    Define,
    Else,
    End,
    If,
    Range,
    Template,
    With,
}

/// One token: its kind, byte offset, line (1-based) and text (for an error, the message).
#[derive(Debug, Clone)]
pub(crate) struct Token<'a> {
    pub kind: Kind,
    pub pos: usize,
    pub line: usize,
    pub text: Cow<'a, str>,
}

impl std::fmt::Display for Token<'_> {
    /// As Go's parser names a token in `unexpected … in …`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind {
            Kind::Eof => f.write_str("EOF"),
            Kind::Error => f.write_str(&self.text),
            kind if kind as u8 >= Kind::Dot as u8 => write!(f, "<{}>", self.text),
            _ if self.text.chars().count() > 10 => {
                let head: String = self.text.chars().take(10).collect();
                write!(f, "{}...", crate::fmt::quote(&head, false))
            }
            _ => f.write_str(&crate::fmt::quote(&self.text, false)),
        }
    }
}

/// Go's white space inside actions and for trim markers.
pub(crate) fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r' | '\n')
}

fn is_alphanumeric(c: char) -> bool {
    c == '_' || c.is_alphabetic() || c.is_numeric()
}

/// A rune as Go's `%#U` prints it: `U+0023 '#'`.
pub(crate) fn rune_u(c: char) -> String {
    if c.is_control() {
        format!("U+{:04X}", c as u32)
    } else {
        format!("U+{:04X} '{c}'", c as u32)
    }
}

/// Cuts `input` into tokens, actions between `left` and `right`.
pub(crate) fn lex<'a>(input: &'a str, left: &'a str, right: &'a str) -> Vec<Token<'a>> {
    let mut lexer = Lexer {
        input,
        left,
        right,
        pos: 0,
        start: 0,
        start_line: 1,
        paren_depth: 0,
        tokens: Vec::new(),
    };
    lexer.run();
    lexer.tokens
}

struct Lexer<'a> {
    input: &'a str,
    left: &'a str,
    right: &'a str,
    pos: usize,
    start: usize,
    /// The line `start` is on.
    start_line: usize,
    paren_depth: usize,
    tokens: Vec<Token<'a>>,
}

/// Whether the lexer goes on after a step.
type Step = Result<(), ()>;

impl<'a> Lexer<'a> {
    fn run(&mut self) {
        while self.text().is_ok() {
            if self.action().is_err() {
                return;
            }
        }
    }

    fn rest(&self) -> &'a str {
        &self.input[self.pos..]
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn next(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        Some(c)
    }

    fn backup(&mut self, c: char) {
        self.pos -= c.len_utf8();
    }

    /// Moves `start` to `pos`, counting the lines passed.
    fn ignore(&mut self) {
        self.start_line += self.input[self.start..self.pos].matches('\n').count();
        self.start = self.pos;
    }

    fn emit(&mut self, kind: Kind) {
        self.emit_range(kind, self.start, self.pos);
        self.ignore();
    }

    fn emit_range(&mut self, kind: Kind, from: usize, to: usize) {
        self.tokens.push(Token {
            kind,
            pos: from,
            line: self.start_line,
            text: Cow::Borrowed(&self.input[from..to]),
        });
    }

    fn error(&mut self, message: String) -> Step {
        self.tokens.push(Token {
            kind: Kind::Error,
            pos: self.start,
            line: self.start_line,
            text: Cow::Owned(message),
        });
        Err(())
    }

    /// Text up to the next left delimiter (trimmed before a `{{- `); `Err` at the end.
    fn text(&mut self) -> Step {
        let Some(offset) = self.rest().find(self.left) else {
            self.pos = self.input.len();
            if self.pos > self.start {
                self.emit(Kind::Text);
            }
            self.emit(Kind::Eof);
            return Err(());
        };
        let delim = self.pos + offset;
        let after = &self.input[delim + self.left.len()..];
        let mut end = delim;
        if has_left_trim(after) {
            end = self.start
                + self.input[self.start..delim]
                    .trim_end_matches(is_space)
                    .len();
        }
        if end > self.start {
            self.emit_range(Kind::Text, self.start, end);
        }
        self.pos = delim;
        self.ignore();
        Ok(())
    }

    /// A left delimiter, then a comment or an action up to its right delimiter.
    fn action(&mut self) -> Step {
        self.pos += self.left.len();
        let trim = has_left_trim(self.rest());
        let marker = if trim { 2 } else { 0 };
        if self.input[self.pos + marker..].starts_with("/*") {
            self.pos += marker;
            self.ignore();
            return self.comment();
        }
        self.emit(Kind::LeftDelim);
        self.pos += marker;
        self.ignore();
        self.paren_depth = 0;
        self.inside_action()
    }

    fn comment(&mut self) -> Step {
        self.pos += 2;
        let Some(end) = self.rest().find("*/") else {
            return self.error("unclosed comment".into());
        };
        self.pos += end + 2;
        let (delim, trim) = self.at_right_delim();
        if !delim {
            return self.error("comment ends before closing delimiter".into());
        }
        if trim {
            self.pos += 2;
        }
        self.pos += self.right.len();
        if trim {
            self.skip_space();
        }
        self.ignore();
        Ok(())
    }

    /// Whether a right delimiter (and a trim marker before it) starts here.
    fn at_right_delim(&self) -> (bool, bool) {
        let rest = self.rest();
        if has_right_trim(rest) && rest[2..].starts_with(self.right) {
            return (true, true);
        }
        (rest.starts_with(self.right), false)
    }

    fn skip_space(&mut self) {
        while self.peek().is_some_and(is_space) {
            self.pos += 1;
        }
    }

    fn right_delim(&mut self, trim: bool) -> Step {
        if trim {
            self.pos += 2;
            self.ignore();
        }
        self.pos += self.right.len();
        self.emit(Kind::RightDelim);
        if trim {
            self.skip_space();
            self.ignore();
        }
        Ok(())
    }

    fn inside_action(&mut self) -> Step {
        loop {
            let (delim, trim) = self.at_right_delim();
            if delim {
                if self.paren_depth == 0 {
                    return self.right_delim(trim);
                }
                return self.error("unclosed left paren".into());
            }
            let Some(c) = self.next() else {
                return self.error("unclosed action".into());
            };
            match c {
                c if is_space(c) => {
                    if let Some(trim) = self.space() {
                        return self.right_delim(trim);
                    }
                }
                '=' => self.emit(Kind::Assign),
                ':' => {
                    if self.next() != Some('=') {
                        return self.error("expected :=".into());
                    }
                    self.emit(Kind::Declare);
                }
                '|' => self.emit(Kind::Pipe),
                '"' => self.quoted('"', Kind::String, "unterminated quoted string")?,
                '\'' => self.quoted('\'', Kind::CharConstant, "unterminated character constant")?,
                '`' => {
                    let Some(end) = self.rest().find('`') else {
                        return self.error("unterminated raw quoted string".into());
                    };
                    self.pos += end + 1;
                    self.emit(Kind::RawString);
                }
                '$' => self.field_or_variable(Kind::Variable)?,
                '.' if !self.peek().is_some_and(|c| c.is_ascii_digit()) => {
                    self.field_or_variable(Kind::Field)?
                }
                '.' | '+' | '-' | '0'..='9' => {
                    self.backup(c);
                    self.number()?;
                }
                c if is_alphanumeric(c) => self.identifier()?,
                '(' => {
                    self.paren_depth += 1;
                    self.emit(Kind::LeftParen);
                }
                ')' => {
                    // The token goes out first: the parser meets a stray one as `unexpected`.
                    self.emit(Kind::RightParen);
                    if self.paren_depth == 0 {
                        return self.error(format!("unexpected right paren {}", rune_u(c)));
                    }
                    self.paren_depth -= 1;
                }
                c if c.is_ascii() && !c.is_ascii_control() => self.emit(Kind::Char),
                c => {
                    return self.error(format!("unrecognized character in action: {}", rune_u(c)));
                }
            }
        }
    }

    /// A run of spaces (the first already read). `Some(trim)` when the run ends in a trimmed
    /// right delimiter it belongs to.
    fn space(&mut self) -> Option<bool> {
        let mut count = 1;
        while self.peek().is_some_and(is_space) {
            self.pos += 1;
            count += 1;
        }
        let before = &self.input[self.pos - 1..];
        if has_right_trim(before) && before[2..].starts_with(self.right) {
            self.pos -= 1;
            if count == 1 {
                return Some(true);
            }
        }
        self.emit(Kind::Space);
        None
    }

    fn quoted(&mut self, quote: char, kind: Kind, unterminated: &str) -> Step {
        loop {
            match self.next() {
                Some('\\') => match self.next() {
                    Some('\n') | None => return self.error(unterminated.into()),
                    Some(_) => {}
                },
                Some('\n') | None => return self.error(unterminated.into()),
                Some(c) if c == quote => break,
                Some(_) => {}
            }
        }
        self.emit(kind);
        Ok(())
    }

    /// Whether the next character ends an operand.
    fn at_terminator(&self) -> bool {
        match self.peek() {
            None => true,
            Some(c) if is_space(c) => true,
            Some('.' | ',' | '|' | ':' | ')' | '(') => true,
            Some(c) => self.right.starts_with(c),
        }
    }

    fn field_or_variable(&mut self, kind: Kind) -> Step {
        if self.at_terminator() {
            self.emit(if kind == Kind::Variable {
                Kind::Variable
            } else {
                Kind::Dot
            });
            return Ok(());
        }
        self.alphanumerics();
        if !self.at_terminator() {
            return self.bad_character();
        }
        self.emit(kind);
        Ok(())
    }

    fn alphanumerics(&mut self) {
        while let Some(c) = self.peek() {
            if !is_alphanumeric(c) {
                break;
            }
            self.pos += c.len_utf8();
        }
    }

    fn bad_character(&mut self) -> Step {
        let c = self.peek().unwrap_or('\0');
        self.pos += c.len_utf8();
        self.error(format!("bad character {}", rune_u(c)))
    }

    fn identifier(&mut self) -> Step {
        self.alphanumerics();
        if !self.at_terminator() {
            return self.bad_character();
        }
        let kind = match &self.input[self.start..self.pos] {
            "block" => Kind::Block,
            "break" => Kind::Break,
            "continue" => Kind::Continue,
            "define" => Kind::Define,
            "else" => Kind::Else,
            "end" => Kind::End,
            "if" => Kind::If,
            "nil" => Kind::Nil,
            "range" => Kind::Range,
            "template" => Kind::Template,
            "with" => Kind::With,
            "true" | "false" => Kind::Bool,
            _ => Kind::Identifier,
        };
        self.emit(kind);
        Ok(())
    }

    fn accept(&mut self, valid: &str) -> bool {
        match self.peek() {
            Some(c) if valid.contains(c) => {
                self.pos += c.len_utf8();
                true
            }
            _ => false,
        }
    }

    fn accept_run(&mut self, valid: &str) {
        while self.accept(valid) {}
    }

    fn number(&mut self) -> Step {
        self.accept("+-");
        let mut digits = "0123456789_";
        let mut decimal = true;
        if self.accept("0") {
            if self.accept("xX") {
                digits = "0123456789abcdefABCDEF_";
                decimal = false;
            } else if self.accept("oO") {
                digits = "01234567_";
                decimal = false;
            } else if self.accept("bB") {
                digits = "01_";
                decimal = false;
            }
        }
        let hex = digits.len() == 23;
        self.accept_run(digits);
        if self.accept(".") {
            self.accept_run(digits);
        }
        if decimal && self.accept("eE") {
            self.accept("+-");
            self.accept_run("0123456789_");
        }
        if hex && self.accept("pP") {
            self.accept("+-");
            self.accept_run("0123456789_");
        }
        self.accept("i");
        if self.peek().is_some_and(is_alphanumeric) {
            self.next();
            let text = self.input[self.start..self.pos].to_string();
            return self.error(format!(
                "bad number syntax: {}",
                crate::fmt::quote(&text, false)
            ));
        }
        self.emit(Kind::Number);
        Ok(())
    }
}

fn has_left_trim(rest: &str) -> bool {
    let mut chars = rest.chars();
    chars.next() == Some('-') && chars.next().is_some_and(is_space)
}

fn has_right_trim(rest: &str) -> bool {
    let mut chars = rest.chars();
    chars.next().is_some_and(is_space) && chars.next() == Some('-')
}
