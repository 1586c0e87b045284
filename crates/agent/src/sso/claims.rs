//! From a login's claims to a token's grants, as Nomad's `lib/auth` does it: the method's
//! `ClaimMappings` and `ListClaimMappings` pick claims (by name, or by JSON pointer when the
//! name starts with `/`) into `value.<name>` and `list.<name>`; each binding rule of the method
//! whose `Selector` (go-bexpr, evaluated by `drover_api::bexpr` over `{"value":…,"list":…}`)
//! matches contributes its role, its policy, or management; bind names and the token name
//! interpolate `${…}` variables.
//!
//! Interpolation is the part of HIL that Nomad's documentation uses: `${name}` of a known
//! variable. Anything else inside `${…}` (HIL's functions, arithmetic, conditionals) is refused
//! by name rather than evaluated differently.
//!
//! Not here: verifying the token (see `jwt` and `oidc`), writing the ACL token.

use std::collections::BTreeMap;

use drover_state::acl_tables::AclTables;
use drover_structs::acl_sso::{
    AclAuthMethod, BIND_TYPE_MANAGEMENT, BIND_TYPE_POLICY, BIND_TYPE_ROLE,
    DEFAULT_TOKEN_NAME_FORMAT,
};
use serde_json::{Map, Value, json};

use super::SsoError;

/// The claims a login's rules see: `value` (one string each) and `list` (strings each).
#[derive(Debug, Clone, Default)]
pub struct AuthClaims {
    pub value: BTreeMap<String, String>,
    pub list: BTreeMap<String, Vec<String>>,
}

impl AuthClaims {
    fn selector_data(&self) -> Value {
        json!({"value": self.value, "list": self.list})
    }
}

/// What the matching rules grant.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bindings {
    pub management: bool,
    /// Role IDs.
    pub roles: Vec<String>,
    pub policies: Vec<String>,
}

impl Bindings {
    pub fn none(&self) -> bool {
        self.roles.is_empty() && self.policies.is_empty()
    }
}

/// Merges user-info claims over the ID token's (keeping the token's `iss` and `sub`), then
/// maps them by the method's claim mappings.
pub fn selector_data(
    method: &AclAuthMethod,
    mut token_claims: Map<String, Value>,
    user_claims: Option<Map<String, Value>>,
) -> Result<AuthClaims, SsoError> {
    if let Some(user_claims) = user_claims.filter(|claims| !claims.is_empty()) {
        let issuer = token_claims.get("iss").cloned();
        let subject = token_claims.get("sub").cloned();
        token_claims.extend(user_claims);
        if let Some(issuer) = issuer {
            token_claims.insert("iss".to_owned(), issuer);
        }
        if let Some(subject) = subject {
            token_claims.insert("sub".to_owned(), subject);
        }
    }
    let all = Value::Object(token_claims);
    let config = method.config.clone().unwrap_or_default();
    let mut claims = AuthClaims::default();
    for (source, target) in &config.claim_mappings {
        let Some(raw) = claim(&all, source) else {
            continue;
        };
        let text = stringify(raw).ok_or_else(|| {
            SsoError::Claims(format!(
                "error converting claim '{source}' to string from unknown type {}",
                go_type_name(raw)
            ))
        })?;
        claims.value.insert(target.clone(), text);
    }
    for (source, target) in &config.list_claim_mappings {
        let Some(raw) = claim(&all, source) else {
            continue;
        };
        let items: Vec<&Value> = match raw {
            Value::Array(items) => items.iter().collect(),
            Value::Object(_) => {
                return Err(SsoError::Claims(format!(
                    "{source:?} list claim could not be converted to string list"
                )));
            }
            one => vec![one],
        };
        let mut list = Vec::new();
        for item in items {
            let text = stringify(item).ok_or_else(|| {
                SsoError::Claims(format!(
                    "value {item} in {source:?} list claim could not be parsed as string"
                ))
            })?;
            if !text.is_empty() {
                list.push(text);
            }
        }
        claims.list.insert(target.clone(), list);
    }
    Ok(claims)
}

fn claim<'a>(all: &'a Value, name: &str) -> Option<&'a Value> {
    let found = if name.starts_with('/') {
        all.pointer(name)
    } else {
        all.get(name)
    };
    found.filter(|value| !value.is_null())
}

fn go_type_name(value: &Value) -> &'static str {
    match value {
        Value::Object(_) => "map[string]interface {}",
        _ => "interface {}",
    }
}

/// A claim as Nomad's `stringifyClaimValue` writes it (numbers as integers, lists as JSON).
fn stringify(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Bool(flag) => Some(flag.to_string()),
        Value::Number(number) => Some(match number.as_i64() {
            Some(integer) => integer.to_string(),
            None => (number.as_f64().unwrap_or(0.0) as i64).to_string(),
        }),
        Value::Array(_) => serde_json::to_string(value).ok(),
        _ => None,
    }
}

/// `${name}` interpolation over `variables`; `lowercase` lowers the values (bind names).
pub fn interpolate(
    format: &str,
    variables: &BTreeMap<String, String>,
    lowercase: bool,
) -> Result<String, SsoError> {
    let mut out = String::new();
    let mut rest = format;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| SsoError::Claims(format!("unterminated interpolation in {format:?}")))?;
        let name = after[..end].trim();
        let valid_name = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if !valid_name {
            return Err(SsoError::Claims(format!(
                "interpolation ${{{name}}} is not supported: drover interpolates variables (${{value.<claim>}}, ${{auth_method_type}}, ${{auth_method_name}}), not HIL expressions"
            )));
        }
        let value = variables
            .get(name)
            .ok_or_else(|| SsoError::Claims(format!("unknown variable accessed: {name}")))?;
        if lowercase {
            out.push_str(&value.to_lowercase());
        } else {
            out.push_str(value);
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn valid_role_name(name: &str) -> bool {
    (1..=128).contains(&name.len()) && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

/// Evaluates the method's binding rules against `claims` (Nomad's `Binder.Bind`): a rule with
/// no selector always matches; a selector that does not parse or evaluate does not match.
pub fn bind(
    tables: &AclTables,
    method: &AclAuthMethod,
    claims: &AuthClaims,
) -> Result<Bindings, SsoError> {
    let config = method.config.clone().unwrap_or_default();
    let mut mappings: BTreeMap<String, String> = config
        .claim_mappings
        .values()
        .map(|target| (format!("value.{target}"), String::new()))
        .collect();
    for (name, value) in &claims.value {
        mappings.insert(format!("value.{name}"), value.clone());
    }
    let data = claims.selector_data();
    let mut bindings = Bindings::default();
    for rule in tables
        .binding_rules
        .values()
        .filter(|rule| rule.auth_method == method.name)
    {
        let matched = rule.selector.is_empty()
            || drover_api::bexpr::Filter::parse(&rule.selector)
                .ok()
                .and_then(|filter| filter.matches(&data).ok())
                .unwrap_or(false);
        if !matched {
            continue;
        }
        let bind_name = interpolate(&rule.bind_name, &mappings, true).map_err(|error| {
            SsoError::Claims(format!(
                "cannot compute {:?} bind name for bind target: {error}",
                rule.bind_type
            ))
        })?;
        let valid = match rule.bind_type.as_str() {
            BIND_TYPE_POLICY => drover_server::acl::is_valid_policy_name(&bind_name),
            BIND_TYPE_ROLE => valid_role_name(&bind_name),
            _ => true,
        };
        if !valid {
            return Err(SsoError::Claims(format!(
                "computed {:?} bind name for bind target is invalid: {bind_name:?}",
                rule.bind_type
            )));
        }
        match rule.bind_type.as_str() {
            BIND_TYPE_ROLE => {
                if let Some(role) = tables.role_by_name(&bind_name)
                    && !bindings.roles.contains(&role.id)
                {
                    bindings.roles.push(role.id.clone());
                }
            }
            BIND_TYPE_POLICY => {
                if tables.policies.contains_key(&bind_name)
                    && !bindings.policies.contains(&bind_name)
                {
                    bindings.policies.push(bind_name);
                }
            }
            BIND_TYPE_MANAGEMENT => {
                return Ok(Bindings {
                    management: true,
                    ..Bindings::default()
                });
            }
            other => {
                return Err(SsoError::Claims(format!(
                    "unknown binding rule bind type: {other}"
                )));
            }
        }
    }
    Ok(bindings)
}

/// The login token's name from the method's `TokenNameFormat`.
pub fn token_name(
    method: &AclAuthMethod,
    method_type: &str,
    claims: &AuthClaims,
) -> Result<String, SsoError> {
    let mut variables = BTreeMap::from([
        ("auth_method_type".to_owned(), method_type.to_owned()),
        ("auth_method_name".to_owned(), method.name.clone()),
    ]);
    for (name, value) in &claims.value {
        variables.insert(format!("value.{name}"), value.clone());
    }
    let format = if method.token_name_format.is_empty() {
        DEFAULT_TOKEN_NAME_FORMAT
    } else {
        method.token_name_format.as_str()
    };
    interpolate(format, &variables, false)
        .map_err(|error| SsoError::Claims(format!("failed to generate ACL token name: {error}")))
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::unwrap_used)] // a failed expectation is a failed test
mod tests {
    use super::*;
    use drover_structs::acl_sso::AclAuthMethodConfig;

    fn method() -> AclAuthMethod {
        AclAuthMethod {
            name: "example".to_owned(),
            config: Some(AclAuthMethodConfig {
                claim_mappings: BTreeMap::from([
                    ("/profile/team".to_owned(), "team".to_owned()),
                    ("admin".to_owned(), "admin".to_owned()),
                    ("sub".to_owned(), "user".to_owned()),
                ]),
                list_claim_mappings: BTreeMap::from([("groups".to_owned(), "groups".to_owned())]),
                ..AclAuthMethodConfig::default()
            }),
            ..AclAuthMethod::default()
        }
    }

    #[test]
    fn claims_map_by_name_and_json_pointer_and_user_info_keeps_the_tokens_subject() {
        let token = json!({"sub": "alice", "iss": "https://a", "profile": {"team": "Infra"}});
        let user = json!({"sub": "mallory", "admin": true, "groups": ["x", "", 7]});
        let claims = selector_data(
            &method(),
            token.as_object().unwrap().clone(),
            Some(user.as_object().unwrap().clone()),
        )
        .unwrap();
        assert_eq!(claims.value["user"], "alice");
        assert_eq!(claims.value["team"], "Infra");
        assert_eq!(claims.value["admin"], "true");
        assert_eq!(claims.list["groups"], vec!["x".to_owned(), "7".to_owned()]);
    }

    #[test]
    fn interpolation_takes_variables_and_refuses_hil_expressions_by_name() {
        let variables = BTreeMap::from([("value.team".to_owned(), "Infra".to_owned())]);
        assert_eq!(
            interpolate("team-${value.team}", &variables, true).unwrap(),
            "team-infra"
        );
        assert!(
            interpolate("${upper(value.team)}", &variables, false)
                .unwrap_err()
                .to_string()
                .contains("not supported")
        );
        assert_eq!(
            interpolate("${value.nope}", &variables, false)
                .unwrap_err()
                .to_string(),
            "unknown variable accessed: value.nope"
        );
    }
}
