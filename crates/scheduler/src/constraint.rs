//! Constraint evaluation against one node: target interpolation (`${attr.…}`, `${meta.…}`,
//! `${node.…}`) and the operands Nomad defines.
//!
//! Operands: `=`, `==`, `is`, `!=`, `not`, `<`, `<=`, `>`, `>=` (as integers when both sides
//! parse as integers, else as floats, else lexically), `regexp`, `version`, `semver`,
//! `set_contains` (= `set_contains_all`), `set_contains_any`, `is_set`, `is_not_set`. The
//! placement-wide operands `distinct_hosts` and `distinct_property` pass here and are enforced by
//! `feasible`, which sees the other placements. An unknown operand never matches.
//!
//! A target that does not resolve (a missing attribute, an unknown `${…}`) is "not found": the
//! comparison operands then fail, `!=` compares it as the empty string, `is_not_set` holds.
//!
//! Not here: iterating nodes or recording metrics.

use std::collections::BTreeMap;

use drover_structs::Node;
use regex::Regex;

use drover_structs::version::{Version, VersionConstraint, VersionFlavor};

/// Operand names as they appear in job specifications.
pub mod operand {
    pub const DISTINCT_HOSTS: &str = "distinct_hosts";
    pub const DISTINCT_PROPERTY: &str = "distinct_property";
    pub const REGEXP: &str = "regexp";
    pub const VERSION: &str = "version";
    pub const SEMVER: &str = "semver";
    pub const SET_CONTAINS: &str = "set_contains";
    pub const SET_CONTAINS_ALL: &str = "set_contains_all";
    pub const SET_CONTAINS_ANY: &str = "set_contains_any";
    pub const IS_SET: &str = "is_set";
    pub const IS_NOT_SET: &str = "is_not_set";
}

/// Compiled regular expressions and version constraints, kept for one scheduling pass so that a
/// constraint checked against ten thousand nodes is parsed once. A pattern that does not compile
/// is remembered as `None` and never matches.
#[derive(Debug, Default)]
pub struct ConstraintCache {
    regexes: BTreeMap<String, Option<Regex>>,
    versions: BTreeMap<(VersionFlavor, String), Option<VersionConstraint>>,
}

impl ConstraintCache {
    fn regex(&mut self, pattern: &str) -> Option<&Regex> {
        if !self.regexes.contains_key(pattern) {
            self.regexes
                .insert(pattern.to_string(), Regex::new(pattern).ok());
        }
        self.regexes.get(pattern).and_then(Option::as_ref)
    }

    fn version_constraint(
        &mut self,
        flavor: VersionFlavor,
        text: &str,
    ) -> Option<&VersionConstraint> {
        let key = (flavor, text.to_string());
        if !self.versions.contains_key(&key) {
            let parsed = VersionConstraint::parse(text, flavor);
            self.versions.insert(key.clone(), parsed);
        }
        self.versions.get(&key).and_then(Option::as_ref)
    }
}

/// Resolves a constraint target against a node. A target that does not start with `${` is a
/// literal. `None` means "not found".
pub fn resolve_target<'node>(target: &'node str, node: &'node Node) -> Option<&'node str> {
    let Some(inner) = target.strip_prefix("${") else {
        return Some(target);
    };
    let inner = inner.strip_suffix('}')?;
    match inner {
        "node.unique.id" => Some(node.id.as_str()),
        "node.datacenter" => Some(node.datacenter.as_str()),
        "node.unique.name" => Some(node.name.as_str()),
        "node.class" => Some(node.node_class.as_str()),
        "node.pool" => Some(node.node_pool.as_str()),
        _ => {
            if let Some(attribute) = inner.strip_prefix("attr.") {
                node.attributes.get(attribute).map(String::as_str)
            } else if let Some(key) = inner.strip_prefix("meta.") {
                node.meta.get(key).map(String::as_str)
            } else {
                None
            }
        }
    }
}

/// Whether `operand` holds between the resolved left and right values (`None` = not found).
pub fn check_operand(
    cache: &mut ConstraintCache,
    operand: &str,
    left: Option<&str>,
    right: Option<&str>,
) -> bool {
    match operand {
        operand::DISTINCT_HOSTS | operand::DISTINCT_PROPERTY => true,
        "=" | "==" | "is" => matches!((left, right), (Some(l), Some(r)) if l == r),
        "!=" | "not" => left.unwrap_or("") != right.unwrap_or(""),
        "<" | "<=" | ">" | ">=" => match (left, right) {
            (Some(l), Some(r)) => check_order(operand, l, r),
            _ => false,
        },
        operand::IS_SET => left.is_some(),
        operand::IS_NOT_SET => left.is_none(),
        operand::VERSION | operand::SEMVER => {
            let (Some(l), Some(r)) = (left, right) else {
                return false;
            };
            let flavor = if operand == operand::VERSION {
                VersionFlavor::Lenient
            } else {
                VersionFlavor::Semver
            };
            let Some(version) = Version::parse(l) else {
                return false;
            };
            cache
                .version_constraint(flavor, r)
                .is_some_and(|constraint| constraint.matches(&version))
        }
        operand::REGEXP => match (left, right) {
            (Some(l), Some(r)) => cache.regex(r).is_some_and(|regex| regex.is_match(l)),
            _ => false,
        },
        operand::SET_CONTAINS | operand::SET_CONTAINS_ALL => match (left, right) {
            (Some(l), Some(r)) => {
                let have = comma_set(l);
                r.split(',').all(|wanted| have.contains(&wanted.trim()))
            }
            _ => false,
        },
        operand::SET_CONTAINS_ANY => match (left, right) {
            (Some(l), Some(r)) => {
                let have = comma_set(l);
                r.split(',').any(|wanted| have.contains(&wanted.trim()))
            }
            _ => false,
        },
        _ => false,
    }
}

fn comma_set(text: &str) -> Vec<&str> {
    text.split(',').map(str::trim).collect()
}

/// Parses a decimal integer the way Go's `strconv.ParseInt(s, 10, 64)` does (optional sign, no
/// spaces, no underscores).
fn parse_go_int(text: &str) -> Option<i64> {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse::<i64>().ok()
}

/// Parses a float roughly as Go's `strconv.ParseFloat(s, 64)`: decimal forms, exponents, `inf`,
/// `infinity` and `nan` in any case, no surrounding spaces.
fn parse_go_float(text: &str) -> Option<f64> {
    if text.is_empty() || text.trim() != text || text.contains('_') {
        return None;
    }
    text.parse::<f64>().ok()
}

fn order_holds<T: PartialOrd>(operand: &str, left: T, right: T) -> bool {
    match operand {
        "<" => left < right,
        "<=" => left <= right,
        ">" => left > right,
        ">=" => left >= right,
        _ => false,
    }
}

fn check_order(operand: &str, left: &str, right: &str) -> bool {
    if let (Some(l), Some(r)) = (parse_go_int(left), parse_go_int(right)) {
        return order_holds(operand, l, r);
    }
    if let (Some(l), Some(r)) = (parse_go_float(left), parse_go_float(right)) {
        return order_holds(operand, l, r);
    }
    order_holds(operand, left, right)
}

/// Whether a `distinct_hosts` constraint is switched on: an empty right target means yes, as does
/// anything that is not a Go boolean; `false`, `0`, `f`… switch it off.
pub fn distinct_hosts_enabled(right_target: &str) -> bool {
    parse_go_bool(right_target).unwrap_or(true)
}

/// Go's `strconv.ParseBool`.
pub fn parse_go_bool(text: &str) -> Option<bool> {
    match text {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(operand: &str, left: Option<&str>, right: Option<&str>) -> bool {
        check_operand(&mut ConstraintCache::default(), operand, left, right)
    }

    #[test]
    fn equality_operands() {
        for op in ["=", "==", "is"] {
            assert!(check(op, Some("linux"), Some("linux")));
            assert!(!check(op, Some("linux"), Some("darwin")));
            assert!(!check(op, None, Some("")), "a missing target never equals");
        }
        for op in ["!=", "not"] {
            assert!(check(op, Some("linux"), Some("darwin")));
            assert!(!check(op, Some("linux"), Some("linux")));
            assert!(
                check(op, None, Some("linux")),
                "a missing target differs from a value"
            );
            assert!(
                !check(op, None, Some("")),
                "a missing target compares as the empty string"
            );
        }
    }

    #[test]
    fn ordering_is_numeric_when_both_sides_are_numbers() {
        assert!(check("<", Some("9"), Some("10")));
        assert!(check(">", Some("10"), Some("9")));
        assert!(check("<=", Some("2.5"), Some("10")));
        assert!(check(">=", Some("10"), Some("10")));
        // Lexical when either side is not a number.
        assert!(check("<", Some("10"), Some("9a")));
        assert!(check(">", Some("b"), Some("a")));
        assert!(!check("<", None, Some("1")));
        assert!(!check("<", Some("1"), None));
    }

    #[test]
    fn regexp_operand() {
        assert!(check("regexp", Some("amd64"), Some("^amd")));
        assert!(
            check("regexp", Some("x86_amd64"), Some("amd")),
            "unanchored like Go's MatchString"
        );
        assert!(!check("regexp", Some("arm64"), Some("^amd")));
        assert!(
            !check("regexp", Some("arm64"), Some("(")),
            "a bad pattern never matches"
        );
    }

    #[test]
    fn version_operands() {
        assert!(check("version", Some("1.7.2"), Some(">= 1.2, < 2.0")));
        assert!(!check("version", Some("2.0.0"), Some(">= 1.2, < 2.0")));
        assert!(!check("version", Some("1.7.2-beta"), Some(">= 1.2")));
        assert!(check("semver", Some("1.7.2-beta"), Some(">= 1.2.0")));
        assert!(!check("version", None, Some(">= 1.2")));
    }

    #[test]
    fn set_operands() {
        assert!(check("set_contains", Some("a, b,c"), Some("c,a")));
        assert!(check("set_contains_all", Some("a,b,c"), Some("b")));
        assert!(!check("set_contains", Some("a,b"), Some("a,d")));
        assert!(check("set_contains_any", Some("a,b"), Some("d, b")));
        assert!(!check("set_contains_any", Some("a,b"), Some("d,e")));
    }

    #[test]
    fn presence_and_unknown_operands() {
        assert!(check("is_set", Some(""), None));
        assert!(!check("is_set", None, None));
        assert!(check("is_not_set", None, None));
        assert!(check("distinct_hosts", None, None));
        assert!(!check("bogus", Some("a"), Some("a")));
    }

    #[test]
    fn distinct_hosts_switch() {
        assert!(distinct_hosts_enabled(""));
        assert!(distinct_hosts_enabled("true"));
        assert!(distinct_hosts_enabled("yes"));
        assert!(!distinct_hosts_enabled("false"));
        assert!(!distinct_hosts_enabled("0"));
    }
}
