//! The expression tree a filter parses into and is evaluated from; no behaviour beyond
//! printing a selector.

use std::sync::OnceLock;

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
