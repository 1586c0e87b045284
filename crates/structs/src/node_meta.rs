//! Dynamic node metadata (Nomad 1.5+): `GET|POST /v1/client/metadata`. A client node's `Meta`
//! is its agent configuration's (`Static`) with what the API applied (`Dynamic`) laid over it;
//! a `null` value in an apply unsets the key (a static key stays unset, remembered as a `null`
//! in `Dynamic`).
//!
//! Not here: where a node keeps its dynamic metadata (the client) or how the request reaches
//! the node (the agent's forwarding).

use std::collections::BTreeMap;

use crate::lenient::wire_struct;

wire_struct! {
    /// Nomad's `NodeMetaApplyRequest`: the node (empty: the agent receiving the request) and
    /// the keys to set, or with `null` to unset.
    pub struct NodeMetaApplyRequest {
        #[serde(rename = "NodeID")]
        pub node_id: String,
        pub meta: BTreeMap<String, Option<String>>,
    }
}

wire_struct! {
    /// Nomad's `NodeMetaResponse`.
    pub struct NodeMetaResponse {
        /// Static and dynamic merged: what the node registers.
        pub meta: BTreeMap<String, String>,
        /// What the API applied; `null` marks an unset static key.
        pub dynamic: BTreeMap<String, Option<String>>,
        /// The agent configuration's `client { meta }`.
        pub r#static: BTreeMap<String, String>,
    }
}

impl NodeMetaApplyRequest {
    /// Nomad's `NodeMetaApplyRequest.Validate`: something to apply, and every key a dotted
    /// HCL identifier (keys are read in constraints as `${meta.<key>}`).
    pub fn validate(&self) -> Result<(), String> {
        if self.meta.is_empty() {
            return Err("missing required Meta object".to_owned());
        }
        for key in self.meta.keys() {
            if key.is_empty() {
                return Err("metadata keys must not be empty".to_owned());
            }
            if !key.split('.').all(is_hcl_identifier) {
                return Err(format!(
                    "{key:?} is invalid; metadata keys must be valid dotted hcl identifiers"
                ));
            }
        }
        Ok(())
    }
}

/// HCL's identifier: a letter (Unicode `ID_Start`) or `_`, then letters, digits, `_` or `-`
/// (Unicode `ID_Continue`, and the dash).
pub fn is_hcl_identifier(text: &str) -> bool {
    let mut characters = text.chars();
    let Some(first) = characters.next() else {
        return false;
    };
    (unicode_ident::is_xid_start(first) || first == '_')
        && characters.all(|character| unicode_ident::is_xid_continue(character) || character == '-')
}

/// The static metadata with the dynamic laid over it: a value sets the key, a `null` removes
/// it.
pub fn merged_meta(
    static_meta: &BTreeMap<String, String>,
    dynamic: &BTreeMap<String, Option<String>>,
) -> BTreeMap<String, String> {
    let mut merged = static_meta.clone();
    for (key, value) in dynamic {
        match value {
            Some(value) => {
                merged.insert(key.clone(), value.clone());
            }
            None => {
                merged.remove(key);
            }
        }
    }
    merged
}

/// An apply laid over the stored dynamic metadata, as Nomad's client keeps it: set keys are
/// set, and a `null` is remembered only for a static key (so its removal survives a restart);
/// a `null` for any other key just removes it.
pub fn apply_dynamic(
    static_meta: &BTreeMap<String, String>,
    dynamic: &BTreeMap<String, Option<String>>,
    applied: &BTreeMap<String, Option<String>>,
) -> BTreeMap<String, Option<String>> {
    let mut next = dynamic.clone();
    for (key, value) in applied {
        if value.is_none() && !static_meta.contains_key(key) {
            next.remove(key);
        } else {
            next.insert(key.clone(), value.clone());
        }
    }
    next
}

/// The dynamic metadata a restarted node keeps: a `null` for a key no longer static is
/// forgotten, as Nomad's client does at start.
pub fn restored_dynamic(
    static_meta: &BTreeMap<String, String>,
    stored: BTreeMap<String, Option<String>>,
) -> BTreeMap<String, Option<String>> {
    stored
        .into_iter()
        .filter(|(key, value)| value.is_some() || static_meta.contains_key(key))
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed expectation is a failed test
mod tests {
    use super::*;

    fn map<V: Clone>(pairs: &[(&str, V)]) -> BTreeMap<String, V> {
        pairs
            .iter()
            .map(|(key, value)| ((*key).to_owned(), value.clone()))
            .collect()
    }

    #[test]
    fn keys_are_dotted_hcl_identifiers() {
        let request = |key: &str| NodeMetaApplyRequest {
            meta: map(&[(key, Some("v".to_owned()))]),
            ..NodeMetaApplyRequest::default()
        };
        for good in ["rack", "_x", "a.b-c", "zone_1.sub", "dc-2", "héllo"] {
            assert_eq!(request(good).validate(), Ok(()), "{good}");
        }
        assert_eq!(
            request("").validate().unwrap_err(),
            "metadata keys must not be empty"
        );
        for bad in ["1rack", "a..b", "a b", "-x", "a.", "x$"] {
            assert_eq!(
                request(bad).validate().unwrap_err(),
                format!("{bad:?} is invalid; metadata keys must be valid dotted hcl identifiers"),
            );
        }
        assert_eq!(
            NodeMetaApplyRequest::default().validate().unwrap_err(),
            "missing required Meta object"
        );
    }

    #[test]
    fn nulls_unset_and_are_kept_only_for_static_keys() {
        let static_meta = map(&[("zone", "a".to_owned()), ("tier", "web".to_owned())]);
        let dynamic = apply_dynamic(
            &static_meta,
            &BTreeMap::new(),
            &map(&[
                ("rack", Some("r1".to_owned())),
                ("zone", None),
                ("ghost", None),
            ]),
        );
        assert_eq!(
            dynamic,
            map(&[("rack", Some("r1".to_owned())), ("zone", None)])
        );
        assert_eq!(
            merged_meta(&static_meta, &dynamic),
            map(&[("rack", "r1".to_owned()), ("tier", "web".to_owned())])
        );
        let dynamic = apply_dynamic(&static_meta, &dynamic, &map(&[("rack", None)]));
        assert_eq!(dynamic, map(&[("zone", None)]));
        // Restarted with `zone` no longer in the configuration: its null is forgotten.
        let restored = restored_dynamic(&map(&[("tier", "web".to_owned())]), dynamic);
        assert!(restored.is_empty());
    }

    #[test]
    fn a_null_value_decodes_as_an_unset() {
        let request: NodeMetaApplyRequest = crate::lenient::from_value_ignoring_key_case(
            serde_json::json!({"nodeid": "n1", "Meta": {"a": "1", "b": null}}),
        )
        .unwrap();
        assert_eq!(request.node_id, "n1");
        assert_eq!(
            request.meta,
            map(&[("a", Some("1".to_owned())), ("b", None)])
        );
        let response = NodeMetaResponse {
            dynamic: map(&[("b", None)]),
            ..NodeMetaResponse::default()
        };
        assert_eq!(
            serde_json::to_value(&response).unwrap(),
            serde_json::json!({"Meta": {}, "Dynamic": {"b": null}, "Static": {}})
        );
    }
}
