//! Intentions: which service may open connections to which, in Consul's shape
//! (`/v1/connect/intentions`), and the one decision a destination's sidecar makes for each
//! new connection.
//!
//! An intention names a source and a destination, each `<namespace>/<name>` where either part
//! may be `*` (a name `*` matches every service of the namespace; a namespace `*` needs the
//! name `*` too). Of the intentions that match a connection, the most precise decides, as
//! Consul's precedence: the destination's precision first, then the source's (exact 3,
//! `<ns>/*` 2, `*/*` 1; precedence = 3 × (destination − 1) + source, 1 to 9). No match: the
//! default (`server { mesh_default_intention }`, allow unless set to deny).

pub use drover_structs::intention::{Intention, IntentionAction};

use crate::error::MeshError;

/// A source or destination as written in a request: `name` or `namespace/name`, in
/// `default_namespace` when none is given.
pub fn parse_endpoint(text: &str, default_namespace: &str) -> Result<(String, String), MeshError> {
    let (namespace, name) = match text.split_once('/') {
        Some((namespace, name)) => (namespace, name),
        None => (default_namespace, text),
    };
    let valid = |part: &str| {
        part == "*"
            || (!part.is_empty()
                && part
                    .bytes()
                    .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.')))
    };
    if !valid(namespace) || !valid(name) {
        return Err(MeshError::Intention(format!(
            "{text:?} is not a service name or <namespace>/<name> (letters, digits, '-', '_', '.', or '*')"
        )));
    }
    if namespace == "*" && name != "*" {
        return Err(MeshError::Intention(format!(
            "{text:?}: a wildcard namespace needs a wildcard name"
        )));
    }
    Ok((namespace.to_owned(), name.to_owned()))
}

/// How precisely one side names services: exact 3, `<ns>/*` 2, `*/*` 1.
fn precision(namespace: &str, name: &str) -> u32 {
    match (namespace, name) {
        ("*", _) => 1,
        (_, "*") => 2,
        _ => 3,
    }
}

/// Consul's precedence of an intention between these two sides.
pub fn precedence(source: (&str, &str), destination: (&str, &str)) -> u32 {
    3 * (precision(destination.0, destination.1) - 1) + precision(source.0, source.1)
}

fn side_matches(pattern: (&str, &str), service: (&str, &str)) -> bool {
    (pattern.0 == "*" || pattern.0 == service.0) && (pattern.1 == "*" || pattern.1 == service.1)
}

/// Whether `source` may open a connection to `destination` (each `(namespace, name)`): the
/// most precise matching intention's action, else `default_allow`.
pub fn allowed(
    intentions: &[Intention],
    source: (&str, &str),
    destination: (&str, &str),
    default_allow: bool,
) -> bool {
    intentions
        .iter()
        .filter(|intention| {
            side_matches((&intention.source_ns, &intention.source_name), source)
                && side_matches(
                    (&intention.destination_ns, &intention.destination_name),
                    destination,
                )
        })
        .max_by_key(|intention| {
            precedence(
                (&intention.source_ns, &intention.source_name),
                (&intention.destination_ns, &intention.destination_name),
            )
        })
        .map_or(default_allow, |intention| {
            intention.action == IntentionAction::Allow
        })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn intention(source: &str, destination: &str, action: IntentionAction) -> Intention {
        let (source_ns, source_name) = parse_endpoint(source, "default").unwrap();
        let (destination_ns, destination_name) = parse_endpoint(destination, "default").unwrap();
        Intention {
            id: format!("{source}->{destination}"),
            description: String::new(),
            precedence: precedence(
                (&source_ns, &source_name),
                (&destination_ns, &destination_name),
            ),
            source_ns,
            source_name,
            destination_ns,
            destination_name,
            source_type: "consul".to_owned(),
            action,
            meta: BTreeMap::new(),
            created_at: String::new(),
            updated_at: String::new(),
            create_index: 1,
            modify_index: 1,
        }
    }

    #[test]
    fn no_intention_leaves_the_default() {
        assert!(allowed(&[], ("default", "web"), ("default", "api"), true));
        assert!(!allowed(&[], ("default", "web"), ("default", "api"), false));
    }

    #[test]
    fn the_most_precise_intention_decides() {
        use IntentionAction::{Allow, Deny};
        let rules = vec![
            intention("*/*", "api", Deny),
            intention("web", "api", Allow),
            intention("default/*", "*/*", Deny),
        ];
        assert!(allowed(
            &rules,
            ("default", "web"),
            ("default", "api"),
            true
        ));
        assert!(!allowed(
            &rules,
            ("default", "db"),
            ("default", "api"),
            true
        ));
        assert!(!allowed(
            &rules,
            ("default", "web"),
            ("default", "cache"),
            true
        ));
        assert!(allowed(
            &rules,
            ("other", "web"),
            ("default", "cache"),
            true
        ));
        // A deny of exactly web → api beats an allow of the whole namespace to api.
        let rules = vec![
            intention("default/*", "api", Allow),
            intention("web", "api", Deny),
        ];
        assert!(!allowed(
            &rules,
            ("default", "web"),
            ("default", "api"),
            false
        ));
        assert!(allowed(
            &rules,
            ("default", "db"),
            ("default", "api"),
            false
        ));
    }

    #[test]
    fn precedence_is_consuls() {
        assert_eq!(precedence(("default", "web"), ("default", "api")), 9);
        assert_eq!(precedence(("*", "*"), ("default", "api")), 7);
        assert_eq!(precedence(("default", "web"), ("default", "*")), 6);
        assert_eq!(precedence(("*", "*"), ("*", "*")), 1);
    }

    #[test]
    fn endpoints_are_checked() {
        assert_eq!(
            parse_endpoint("web", "prod").unwrap(),
            ("prod".to_owned(), "web".to_owned())
        );
        assert!(parse_endpoint("*/web", "default").is_err());
        assert!(parse_endpoint("we b", "default").is_err());
        assert!(parse_endpoint("", "default").is_err());
    }
}
