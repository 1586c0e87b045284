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

mod ast;
mod eval;
mod parse;

pub use eval::EvalError;
pub use parse::ParseError;

use ast::Expr;

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

#[cfg(test)]
mod tests;
