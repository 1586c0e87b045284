//! Version numbers and version constraints for the `version` and `semver` constraint operands.
//!
//! Two flavours, as Nomad has them:
//! - **version** (lenient, the behaviour of HashiCorp's go-version): any number of numeric
//!   segments (`1`, `1.2`, `1.2.3.4`), an optional `v` prefix, a pre-release written with or
//!   without a dash (`1.2.3-beta.1`, `1.2.3beta`), build metadata after `+`. Constraints are
//!   comma-separated `op version` terms with `=`, `!=`, `>`, `>=`, `<`, `<=` and the pessimistic
//!   `~>`. A pre-release version only satisfies an ordering term whose own version is a
//!   pre-release of the same core version, so `>= 1.0` does not match `1.5.0-beta`.
//! - **semver** (strict): constraint versions must be Semantic Versioning 2.0 with at most three
//!   segments, there is no `~>`, and ordering is plain semver precedence with no special
//!   pre-release rule (`>= 1.0.0` matches `1.5.0-beta`).
//!
//! Build metadata never takes part in comparisons. Not here: resolving node attributes (the
//! scheduler's `constraint`). The jobspec's validation parses constraints with the same rules.

use std::cmp::Ordering;

/// A parsed version: numeric segments (padded to at least three), the pre-release text without
/// its leading dash, and the build metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    segments: Vec<u64>,
    /// How many segments were written (before padding): `~> 1.2` and `~> 1.2.0` differ.
    written_segment_count: usize,
    prerelease: String,
    metadata: String,
}

fn is_identifier_char(character: char) -> bool {
    character.is_ascii_alphanumeric() || character == '-' || character == '~'
}

/// Dot-separated, non-empty parts of identifier characters.
fn is_dotted_identifier(text: &str) -> bool {
    !text.is_empty()
        && text
            .split('.')
            .all(|part| !part.is_empty() && part.chars().all(is_identifier_char))
}

impl Version {
    /// Parses a version leniently (go-version's `NewVersion`).
    pub fn parse(text: &str) -> Option<Version> {
        Self::parse_with(text, false)
    }

    /// Parses a strict semantic version (go-version's `NewSemver`): at most three numeric
    /// segments, pre-release only after a dash.
    pub fn parse_semver(text: &str) -> Option<Version> {
        Self::parse_with(text, true)
    }

    fn parse_with(text: &str, strict: bool) -> Option<Version> {
        let rest = text.strip_prefix('v').unwrap_or(text);
        let core_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (core, tail) = rest.split_at(core_end);
        // Every dot must separate two numbers: "1.", "1..2" and "1.2.a" are not versions.
        if core.ends_with('.') {
            return None;
        }
        if core.is_empty() {
            return None;
        }
        let mut segments = Vec::new();
        for segment in core.split('.') {
            if segment.is_empty() {
                return None;
            }
            segments.push(
                segment
                    .parse::<u64>()
                    .ok()
                    .filter(|value| i64::try_from(*value).is_ok())?,
            );
        }
        if strict && segments.len() > 3 {
            return None;
        }
        let (before_metadata, metadata) = match tail.split_once('+') {
            Some((before, metadata)) => {
                if !is_dotted_identifier(metadata) {
                    return None;
                }
                (before, metadata)
            }
            None => (tail, ""),
        };
        let prerelease = if before_metadata.is_empty() {
            ""
        } else if let Some(after_dash) = before_metadata.strip_prefix('-') {
            if !is_dotted_identifier(after_dash) {
                return None;
            }
            after_dash
        } else {
            // Without a dash (lenient only) the pre-release must start with a letter, '-' or '~'.
            let starts_well = before_metadata
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '~');
            if strict || !starts_well || !is_dotted_identifier(before_metadata) {
                return None;
            }
            before_metadata
        };
        let written_segment_count = segments.len();
        while segments.len() < 3 {
            segments.push(0);
        }
        Some(Version {
            segments,
            written_segment_count,
            prerelease: prerelease.to_string(),
            metadata: metadata.to_string(),
        })
    }

    /// The pre-release text (empty when this is a release).
    pub fn prerelease(&self) -> &str {
        &self.prerelease
    }

    /// The build metadata (empty when there is none).
    pub fn metadata(&self) -> &str {
        &self.metadata
    }

    /// Precedence: numeric segments (missing ones count as zero), then a release above its
    /// pre-releases, then pre-releases part by part. Metadata is ignored.
    pub fn compare(&self, other: &Version) -> Ordering {
        if self.segments == other.segments {
            return match (self.prerelease.is_empty(), other.prerelease.is_empty()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => compare_prereleases(&self.prerelease, &other.prerelease),
            };
        }
        let longest = self.segments.len().max(other.segments.len());
        for index in 0..longest {
            let left = self.segments.get(index).copied().unwrap_or(0);
            let right = other.segments.get(index).copied().unwrap_or(0);
            match left.cmp(&right) {
                Ordering::Equal => continue,
                unequal => return unequal,
            }
        }
        Ordering::Equal
    }
}

fn compare_prereleases(left: &str, right: &str) -> Ordering {
    if left == right {
        return Ordering::Equal;
    }
    let left_parts: Vec<&str> = left.split('.').collect();
    let right_parts: Vec<&str> = right.split('.').collect();
    for index in 0..left_parts.len().max(right_parts.len()) {
        let left_part = left_parts.get(index).copied().unwrap_or("");
        let right_part = right_parts.get(index).copied().unwrap_or("");
        match compare_prerelease_part(left_part, right_part) {
            Ordering::Equal => continue,
            unequal => return unequal,
        }
    }
    Ordering::Equal
}

/// One dot-separated pre-release part: numbers below words, numbers numerically, words lexically;
/// a missing part is below a word and above a number (go-version's rule).
fn compare_prerelease_part(left: &str, right: &str) -> Ordering {
    if left == right {
        return Ordering::Equal;
    }
    let left_number = left.parse::<i64>().ok();
    let right_number = right.parse::<i64>().ok();
    if left.is_empty() {
        return if right_number.is_some() {
            Ordering::Less
        } else {
            Ordering::Greater
        };
    }
    if right.is_empty() {
        return if left_number.is_some() {
            Ordering::Greater
        } else {
            Ordering::Less
        };
    }
    match (left_number, right_number) {
        (Some(a), Some(b)) => a.cmp(&b),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => left.cmp(right),
    }
}

/// Which rules a constraint follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum VersionFlavor {
    /// go-version rules (the `version` operand).
    Lenient,
    /// Strict semver rules (the `semver` operand).
    Semver,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum VersionOperator {
    Equal,
    NotEqual,
    Greater,
    GreaterOrEqual,
    Less,
    LessOrEqual,
    Pessimistic,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct VersionTerm {
    operator: VersionOperator,
    version: Version,
}

/// A parsed constraint such as `">= 1.2, < 2.0"`: every term must hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionConstraint {
    flavor: VersionFlavor,
    terms: Vec<VersionTerm>,
}

impl VersionConstraint {
    /// Parses a comma-separated list of terms; `None` when any term is malformed.
    pub fn parse(text: &str, flavor: VersionFlavor) -> Option<VersionConstraint> {
        let mut terms = Vec::new();
        for term in text.split(',') {
            terms.push(parse_term(term.trim(), flavor)?);
        }
        Some(VersionConstraint { flavor, terms })
    }

    /// Whether `version` satisfies every term.
    pub fn matches(&self, version: &Version) -> bool {
        self.terms
            .iter()
            .all(|term| term_matches(self.flavor, term, version))
    }
}

fn parse_term(term: &str, flavor: VersionFlavor) -> Option<VersionTerm> {
    let operators: &[(&str, VersionOperator)] = &[
        ("~>", VersionOperator::Pessimistic),
        (">=", VersionOperator::GreaterOrEqual),
        ("<=", VersionOperator::LessOrEqual),
        ("!=", VersionOperator::NotEqual),
        (">", VersionOperator::Greater),
        ("<", VersionOperator::Less),
        ("=", VersionOperator::Equal),
    ];
    let (operator, rest) = operators
        .iter()
        .find_map(|(symbol, operator)| term.strip_prefix(symbol).map(|rest| (*operator, rest)))
        .unwrap_or((VersionOperator::Equal, term));
    if operator == VersionOperator::Pessimistic && flavor == VersionFlavor::Semver {
        return None;
    }
    let version_text = rest.trim();
    let version = match flavor {
        VersionFlavor::Lenient => Version::parse(version_text)?,
        VersionFlavor::Semver => Version::parse_semver(version_text)?,
    };
    Some(VersionTerm { operator, version })
}

/// go-version's pre-release rule for ordering terms: a pre-release version matches only a term
/// that names a pre-release of the same core version.
fn prerelease_allows(version: &Version, bound: &Version) -> bool {
    match (version.prerelease.is_empty(), bound.prerelease.is_empty()) {
        (false, false) => version.segments == bound.segments,
        (false, true) => false,
        _ => true,
    }
}

fn term_matches(flavor: VersionFlavor, term: &VersionTerm, version: &Version) -> bool {
    let bound = &term.version;
    let ordering = version.compare(bound);
    let allowed = flavor == VersionFlavor::Semver || prerelease_allows(version, bound);
    match term.operator {
        VersionOperator::Equal => ordering == Ordering::Equal,
        VersionOperator::NotEqual => ordering != Ordering::Equal,
        VersionOperator::Greater => allowed && ordering == Ordering::Greater,
        VersionOperator::GreaterOrEqual => allowed && ordering != Ordering::Less,
        VersionOperator::Less => allowed && ordering == Ordering::Less,
        VersionOperator::LessOrEqual => allowed && ordering != Ordering::Greater,
        VersionOperator::Pessimistic => pessimistic_matches(version, bound),
    }
}

/// `~> 1.2` allows `>= 1.2, < 2.0`; `~> 1.2.3` allows `>= 1.2.3, < 1.3`.
fn pessimistic_matches(version: &Version, bound: &Version) -> bool {
    if !prerelease_allows(version, bound)
        || (!bound.prerelease.is_empty() && version.prerelease.is_empty())
    {
        return false;
    }
    if version.compare(bound) == Ordering::Less {
        return false;
    }
    let written = bound.written_segment_count;
    if written == 0 || written > version.written_segment_count.max(3) {
        return false;
    }
    let fixed = written - 1;
    if version.segments[..fixed] != bound.segments[..fixed] {
        return false;
    }
    bound.segments[fixed] <= version.segments[fixed]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lenient(constraint: &str, version: &str) -> bool {
        let parsed_constraint = VersionConstraint::parse(constraint, VersionFlavor::Lenient);
        let parsed_version = Version::parse(version);
        match (parsed_constraint, parsed_version) {
            (Some(c), Some(v)) => c.matches(&v),
            _ => false,
        }
    }

    fn semver(constraint: &str, version: &str) -> bool {
        let parsed_constraint = VersionConstraint::parse(constraint, VersionFlavor::Semver);
        let parsed_version = Version::parse(version);
        match (parsed_constraint, parsed_version) {
            (Some(c), Some(v)) => c.matches(&v),
            _ => false,
        }
    }

    #[test]
    fn lenient_parsing_accepts_go_version_forms() {
        for text in [
            "1",
            "1.2",
            "1.2.3",
            "v1.2.3",
            "1.2.3.4",
            "1.2.3-beta.1",
            "1.2.3beta",
            "1.2.3+build.5",
            "1.2-rc1+x",
        ] {
            assert!(Version::parse(text).is_some(), "{text} should parse");
        }
        for text in [
            "",
            "v",
            "1.",
            "1..2",
            "a.b",
            "1.2.3-",
            "1.2.3+",
            "1.2.a",
            " 1.2",
            "1.2.3-be$ta",
        ] {
            assert!(Version::parse(text).is_none(), "{text} should not parse");
        }
        let version = Version::parse("1.2.3beta+meta").unwrap();
        assert_eq!(version.prerelease(), "beta");
        assert_eq!(version.metadata(), "meta");
    }

    #[test]
    fn strict_parsing_rejects_what_semver_forbids() {
        assert!(Version::parse_semver("1.2.3-beta.1").is_some());
        assert!(Version::parse_semver("1.2.3.4").is_none());
        assert!(Version::parse_semver("1.2.3beta").is_none());
    }

    #[test]
    fn ordering_follows_precedence() {
        let order = [
            "1.0.0-1",
            "1.0.0-alpha",
            "1.0.0-alpha.1",
            "1.0.0-alpha.beta",
            "1.0.0-beta",
            "1.0.0-beta.2",
            "1.0.0-beta.11",
            "1.0.0-rc.1",
            "1.0.0",
            "1.0.1",
            "1.1",
            "2",
        ];
        for pair in order.windows(2) {
            let a = Version::parse(pair[0]).unwrap();
            let b = Version::parse(pair[1]).unwrap();
            assert_eq!(a.compare(&b), Ordering::Less, "{} < {}", pair[0], pair[1]);
            assert_eq!(
                b.compare(&a),
                Ordering::Greater,
                "{} > {}",
                pair[1],
                pair[0]
            );
        }
        let a = Version::parse("1.2").unwrap();
        let b = Version::parse("1.2.0.0+meta").unwrap();
        assert_eq!(a.compare(&b), Ordering::Equal);
    }

    #[test]
    fn lenient_constraints() {
        assert!(lenient(">= 1.2, < 2.0", "1.5.0"));
        assert!(lenient(">= 1.2, < 2.0", "1.2"));
        assert!(!lenient(">= 1.2, < 2.0", "2.0.0"));
        assert!(!lenient(">= 1.2, < 2.0", "1.1.9"));
        assert!(lenient("= 1.2.3", "1.2.3+meta"));
        assert!(lenient("1.2.3", "v1.2.3"));
        assert!(lenient("!= 1.2.3", "1.2.4"));
        assert!(lenient(">1.0,<=1.1", "1.1.0"));
        assert!(!lenient("garbage", "1.0"));
        assert!(!lenient(">= 1.0", "not-a-version"));
    }

    #[test]
    fn lenient_prerelease_handling() {
        // A pre-release only satisfies ordering terms naming a pre-release of the same core.
        assert!(!lenient(">= 1.0", "1.5.0-beta"));
        assert!(lenient(">= 1.5.0-alpha", "1.5.0-beta"));
        assert!(!lenient(">= 1.4.0-alpha", "1.5.0-beta"));
        assert!(lenient(">= 1.0.0-beta", "1.5.0"));
        assert!(lenient("= 1.5.0-beta", "1.5.0-beta"));
    }

    #[test]
    fn pessimistic_operator() {
        assert!(lenient("~> 1.2", "1.9.0"));
        assert!(!lenient("~> 1.2", "2.0.0"));
        assert!(!lenient("~> 1.2", "1.1.0"));
        assert!(lenient("~> 1.2.3", "1.2.9"));
        assert!(!lenient("~> 1.2.3", "1.3.0"));
        assert!(!lenient("~> 1.2.3", "1.2.4-beta"));
        assert!(lenient("~> 1.2.3-beta", "1.2.3-beta.2"));
        assert!(!lenient("~> 1.2.3-beta", "1.2.4"));
    }

    #[test]
    fn semver_constraints_order_prereleases_plainly() {
        assert!(semver(">= 1.0.0", "1.5.0-beta"));
        assert!(semver(">= 1.0, < 2.0", "1.5.0-beta"));
        assert!(!semver(">= 1.0.0-rc.1", "1.0.0-beta"));
        assert!(
            !semver("~> 1.0", "1.0.1"),
            "semver has no pessimistic operator"
        );
        assert!(
            !semver(">= 1.0.0.0", "1.0.0"),
            "strict constraint versions have at most three segments"
        );
    }
}
