//! Nomad's list `filter` language: the boolean expressions of HashiCorp's go-bexpr (v0.1.16, the
//! version Nomad builds with), parsed here and evaluated against the JSON of a listed object.
//!
//! No crate implements go-bexpr's grammar and its matching rules (the coercion of the literal
//! to the field's type, a missing map key answering by operator, `in` over strings, lists and
//! maps), so it is written here: [`parse`] follows the PEG grammar rule for rule and reports
//! errors as its generated parser does (`1:13 (12): no match found, expected: ...`, `rule
//! string: invalid syntax`, `Unmatched parentheses`), and [`Filter::matches`] follows
//! `evaluate.go`.
//!
//! One difference is deliberate and unavoidable: go-bexpr walks Go structs by reflection, drover
//! walks the object's JSON. A JSON object is both Go's struct and Go's map, so a missing key is a
//! missing map key ("not present", answered by the operator) below the top level and an unknown
//! field (an error) at the top level; a JSON integer is Go's `int64` (`uint64` past its range).
//!
//! Not here: which objects a list offers the filter, pagination (see `crate::paginate`).

mod eval;
mod parse;

pub use eval::EvalError;
pub use parse::ParseError;

use std::sync::OnceLock;

/// A parsed filter expression.
#[derive(Debug)]
pub struct Filter {
    expression: Expr,
}

impl Filter {
    /// Parses a filter expression.
    pub fn parse(source: &str) -> Result<Filter, ParseError> {
        parse::parse(source).map(|expression| Filter { expression })
    }

    /// Whether `datum` (a listed object's JSON) matches. An error is what go-bexpr answers for
    /// a selector that names no field, or a literal that does not convert to the field's type.
    pub fn matches(&self, datum: &serde_json::Value) -> Result<bool, EvalError> {
        eval::evaluate(&self.expression, datum, &mut Vec::new())
    }
}

/// A node of the expression tree.
#[derive(Debug)]
pub(crate) enum Expr {
    Or(Box<Expr>, Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    Match(Match),
    Collection(Collection),
}

/// `selector <op> value`, `value in selector`, `selector is empty`, ...
#[derive(Debug)]
pub(crate) struct Match {
    pub selector: Selector,
    pub operator: MatchOp,
    /// The literal as written (`None` for `is empty` and `is nil`).
    pub value: Option<String>,
    /// The compiled regular expression of `matches`, made at first use as go-bexpr does (an
    /// invalid one is an error only when an object is evaluated).
    pub regex: OnceLock<Result<regex::Regex, String>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MatchOp {
    Equal,
    NotEqual,
    /// `in` and `contains`.
    In,
    /// `not in` and `not contains`.
    NotIn,
    IsEmpty,
    IsNotEmpty,
    Matches,
    NotMatches,
    IsNil,
    IsNotNil,
}

/// A path into the object: `Job.Meta["a b"]`, `Tags.0`, or a JSON pointer `"/Job/Meta/a"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Selector {
    pub json_pointer: bool,
    pub path: Vec<String>,
}

impl Selector {
    /// The selector as go-bexpr prints it (dotted, or slashed for a JSON pointer); also the raw
    /// value of a bare word on the right of an operator (`Status == running`).
    pub fn display(&self) -> String {
        self.path.join(if self.json_pointer { "/" } else { "." })
    }
}

/// `any Selector as v { ... }` and `all Selector as k, v { ... }`.
#[derive(Debug)]
pub(crate) struct Collection {
    pub all: bool,
    pub selector: Selector,
    pub binding: Binding,
    pub inner: Box<Expr>,
}

/// The names a collection expression binds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Binding {
    /// `as v`: the value of a list's element, the key of a map's entry.
    Default(String),
    IndexAndValue(String, String),
    Index(String),
    Value(String),
}

#[cfg(test)]
mod tests;
