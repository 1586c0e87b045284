//! The cases of Nomad's `acl/policy_test.go` and `acl/acl_test.go`, in drover's terms.

use super::policy::{capability, parse};
use super::*;

const READ_ALL: &str = r#"
namespace "default" { policy = "read" }
agent { policy = "read" }
node { policy = "read" }
operator { policy = "read" }
quota { policy = "read" }
"#;

const WRITE_ALL: &str = r#"
namespace "default" { policy = "write" }
agent { policy = "write" }
node { policy = "write" }
operator { policy = "write" }
quota { policy = "write" }
"#;

#[test]
fn a_coarse_read_policy_expands_to_its_capabilities() {
    let policy = parse("namespace \"default\" {\n  policy = \"read\"\n}\n").unwrap();
    assert_eq!(policy.namespaces.len(), 1);
    assert_eq!(policy.namespaces[0].name, "default");
    assert_eq!(
        policy.namespaces[0].capabilities,
        [
            "list-jobs",
            "parse-job",
            "read-job",
            "csi-list-volume",
            "csi-read-volume",
            "read-job-scaling",
            "list-scaling-policies",
            "read-scaling-policy"
        ]
    );
}

#[test]
fn every_block_parses_and_capabilities_come_before_the_expansion() {
    let policy = parse(
        r#"
        namespace "default" { policy = "read" }
        namespace "other" { policy = "write" }
        namespace "secret" { capabilities = ["deny", "read-logs"] }
        namespace "autoscaler" { policy = "scale" }
        agent { policy = "read" }
        node { policy = "write" }
        operator { policy = "deny" }
        quota { policy = "read" }
        plugin { policy = "read" }
        "#,
    )
    .unwrap();
    let names: Vec<&str> = policy
        .namespaces
        .iter()
        .map(|ns| ns.name.as_str())
        .collect();
    assert_eq!(names, ["default", "other", "secret", "autoscaler"]);
    assert_eq!(policy.namespaces[2].capabilities, ["deny", "read-logs"]);
    assert_eq!(
        policy.namespaces[3].capabilities,
        [
            "list-scaling-policies",
            "read-scaling-policy",
            "read-job-scaling",
            "scale-job"
        ]
    );
    assert!(
        policy.namespaces[1]
            .capabilities
            .contains(&"submit-job".to_owned())
    );
    assert_eq!(policy.agent.as_deref(), Some("read"));
    assert_eq!(policy.node.as_deref(), Some("write"));
    assert_eq!(policy.operator.as_deref(), Some("deny"));
    assert_eq!(policy.plugin.as_deref(), Some("read"));
}

#[test]
fn bad_policies_are_refused_with_nomads_messages() {
    for (rules, message) in [
        (
            "namespace \"default\" { policy = \"foo\" }",
            "Invalid namespace policy",
        ),
        (
            "namespace \"default\" { capabilities = [\"deny\", \"foo\"] }",
            "Invalid namespace capability",
        ),
        ("agent { policy = \"foo\" }", "Invalid agent policy"),
        ("node { policy = \"foo\" }", "Invalid node policy"),
        ("operator { policy = \"foo\" }", "Invalid operator policy"),
        ("quota { policy = \"foo\" }", "Invalid quota policy"),
        (
            r#"{"Name": "my-policy", "Description": "great", "Rules": "anything"}"#,
            "unsupported block",
        ),
        (
            "namespace \"has a space\" { policy = \"read\" }",
            "Invalid namespace name",
        ),
        (
            "host_volume \"volume has a space\" { capabilities = [\"mount-readwrite\"] }",
            "Invalid host volume name",
        ),
        ("plugin { policy = \"reader\" }", "Invalid plugin policy"),
        ("namespace \"\\500\" {}", "Failed to parse ACL Policy"),
        ("namespace \"default\" {", "Failed to parse ACL Policy"),
        (
            "namespace \"default\" {\n  variables {\n  }\n}\n",
            "Invalid variable policy: no variable paths in namespace default",
        ),
        (
            "namespace \"default\" {\n  variables {\n    path \"a/*\" { capabilities = [\"sudo\"] }\n  }\n}\n",
            "Invalid variable capability 'sudo' in namespace default",
        ),
    ] {
        let error = parse(rules).expect_err(rules).to_string();
        assert!(error.contains(message), "{rules}: {error}");
    }
    assert!(parse("").unwrap().is_empty());
}

#[test]
fn sentinel_override_host_volumes_and_plugin_list_parse() {
    let policy = parse("namespace \"default\" { capabilities = [\"sentinel-override\"] }").unwrap();
    assert_eq!(policy.namespaces[0].capabilities, ["sentinel-override"]);
    let policy =
        parse("host_volume \"production-tls-*\" { capabilities = [\"mount-readonly\"] }").unwrap();
    assert_eq!(policy.host_volumes[0].capabilities, ["mount-readonly"]);
    let policy = parse("host_volume \"prod\" { policy = \"write\" }").unwrap();
    assert_eq!(
        policy.host_volumes[0].capabilities,
        ["mount-readonly", "mount-readwrite"]
    );
    assert_eq!(
        parse("plugin { policy = \"list\" }")
            .unwrap()
            .plugin
            .as_deref(),
        Some("list")
    );
}

#[test]
fn json_policies_parse_like_hcl() {
    let json = parse(
        r#"{"namespace": {"default": {"policy": "read", "variables": {"path": {"nomad/*": {"capabilities": ["read"]}}}}}, "node": {"policy": "write"}}"#,
    )
    .unwrap();
    let hcl = parse(
        r#"
        namespace "default" {
          policy = "read"
          variables {
            path "nomad/*" { capabilities = ["read"] }
          }
        }
        node { policy = "write" }
        "#,
    )
    .unwrap();
    assert_eq!(json, hcl);
    assert_eq!(
        hcl.namespaces[0].variables.as_ref().unwrap()[0].capabilities,
        ["read", "list"]
    );
}

#[test]
fn merging_read_and_write_gives_write_and_blank_adds_nothing() {
    let acl = Acl::new(&[parse(READ_ALL).unwrap(), parse(WRITE_ALL).unwrap()]);
    assert!(acl.allow_namespace_operation("default", capability::LIST_JOBS));
    assert!(acl.allow_namespace_operation("default", capability::SUBMIT_JOB));
    assert!(acl.allow_namespace("default"));
    assert!(!acl.allow_namespace_operation("foo", capability::LIST_JOBS));
    assert!(!acl.allow_namespace("foo"));
    assert!(!acl.is_management());
    assert!(acl.allow_agent_write() && acl.allow_node_write());
    assert!(acl.allow_operator_write() && acl.allow_quota_write());

    let acl = Acl::new(&[parse(READ_ALL).unwrap(), parse("").unwrap()]);
    assert!(acl.allow_namespace_operation("default", capability::LIST_JOBS));
    assert!(!acl.allow_namespace_operation("default", capability::SUBMIT_JOB));
    assert!(acl.allow_agent_read() && !acl.allow_agent_write());
    assert!(acl.allow_node_read() && !acl.allow_node_write());

    let management = Acl::management();
    assert!(management.allow_namespace_operation("anything", capability::SUBMIT_JOB));
    assert!(management.allow_operator_write() && management.allow_plugin_list());
}

#[test]
fn deny_wins_within_a_namespace_and_in_coarse_blocks() {
    let acl = Acl::new(&[
        parse("namespace \"default\" { policy = \"write\" }\nnode { policy = \"write\" }").unwrap(),
        parse("namespace \"default\" { policy = \"deny\" }\nnode { policy = \"deny\" }").unwrap(),
        parse("namespace \"default\" { policy = \"read\" }").unwrap(),
    ]);
    assert!(!acl.allow_namespace("default"));
    assert!(!acl.allow_namespace_operation("default", capability::LIST_JOBS));
    assert!(!acl.allow_node_read());
    assert_eq!(max_privilege("read", "write"), "write");
    assert_eq!(max_privilege("list", ""), "list");
    assert_eq!(max_privilege("write", "deny"), "deny");
}

#[test]
fn concrete_namespaces_beat_globs_and_the_closest_glob_wins() {
    for (rules, allow) in [
        ("namespace \"prod-api-*\" { policy = \"write\" }", true),
        ("namespace \"prod-api\" { policy = \"write\" }", false),
        (
            "namespace \"prod-api-services\" { policy = \"deny\" }\nnamespace \"prod-api-*\" { policy = \"write\" }",
            false,
        ),
        (
            "namespace \"prod-api-*\" { policy = \"deny\" }\nnamespace \"prod-api-services\" { policy = \"write\" }",
            true,
        ),
        (
            "namespace \"*-api-services\" { policy = \"deny\" }\nnamespace \"prod-api-*\" { policy = \"write\" }",
            false,
        ),
        (
            "namespace \"prod-api-*\" { policy = \"write\" }\nnamespace \"*-api-services\" { policy = \"deny\" }",
            false,
        ),
    ] {
        let acl = Acl::new(&[parse(rules).unwrap()]);
        assert_eq!(acl.allow_namespace("prod-api-services"), allow, "{rules}");
    }
    for (pattern, name, difference) in [
        ("production-*", "production-api", 3),
        ("production-*", "production-admin-api", 9),
        ("production-**", "production-admin-api", 9),
        ("*", "production-admin-api", 20),
        ("*admin*", "production-admin-api", 15),
    ] {
        assert!(glob_matches(pattern, name));
        assert_eq!(glob_difference(pattern, name), difference, "{pattern}");
    }
    assert!(!glob_matches("prod-*-x", "prod-a-y"));
    assert!(glob_matches("a*b*c", "abbc"));
}

#[test]
fn variables_rules_take_the_closest_path_and_coarse_policies_imply_access() {
    let acl = Acl::new(&[parse(
        r#"
        namespace "default" {
          policy = "read"
          variables {
            path "project/*" { capabilities = ["write", "read"] }
            path "project/secret" { capabilities = ["deny"] }
          }
        }
        namespace "dev" { policy = "write" }
        "#,
    )
    .unwrap()]);
    assert!(acl.allow_variable_operation("default", "project/a", "write"));
    assert!(acl.allow_variable_operation("default", "project/a", "list"));
    assert!(!acl.allow_variable_operation("default", "project/secret", "read"));
    assert!(acl.allow_variable_operation("default", "other", "read"));
    assert!(!acl.allow_variable_operation("default", "other", "write"));
    assert!(acl.allow_variable_operation("dev", "any/path", "destroy"));
    assert!(!acl.allow_variable_operation("prod", "any/path", "read"));
}

/// The hashes Nomad's `SetHash` methods compute for these records: BLAKE2b-256 over the
/// same bytes in the same order (the values were computed with Go's
/// `golang.org/x/crypto/blake2b.New256` writing the fields as Nomad does), base64 as Go's JSON
/// encodes a `[]byte`.
#[test]
fn hashes_are_nomads_blake2b_256_over_its_fields() {
    use drover_structs::acl::{
        AclPolicy, AclRole, AclRolePolicyLink, AclToken, AclTokenRoleLink, JobAcl,
    };
    let rules = r#"namespace "default" { policy = "read" }"#;
    let policy = AclPolicy {
        name: "readonly".to_owned(),
        description: "Read only".to_owned(),
        rules: rules.to_owned(),
        ..AclPolicy::default()
    };
    assert_eq!(
        policy_hash(&policy),
        "rG+YeDYukGlHikwxDkUeAeTmbvLIaUYVDrQsJyxB77M="
    );
    let bound = AclPolicy {
        name: "web-reader".to_owned(),
        rules: rules.to_owned(),
        job_acl: Some(JobAcl {
            namespace: "default".to_owned(),
            job_id: "web".to_owned(),
            group: "frontend".to_owned(),
            task: "server".to_owned(),
        }),
        ..AclPolicy::default()
    };
    assert_eq!(
        policy_hash(&bound),
        "dqPqM0PMRMbvCUydSMh6RcN98XXz+MO2dH9m9CL6hSc="
    );

    let bootstrap = AclToken {
        name: "Bootstrap Token".to_owned(),
        token_type: "management".to_owned(),
        global: true,
        // Not hashed: the secret, the accessor, the expiry.
        secret_id: "9d5c1f3e-0000-4000-8000-000000000000".to_owned(),
        ..AclToken::default()
    };
    assert_eq!(
        token_hash(&bootstrap),
        "BUJ3BerTfrqFVm1P+vZr1gz9ubOkd+JAvYjNAJyaU9Y="
    );
    let client = AclToken {
        name: "ci".to_owned(),
        token_type: "client".to_owned(),
        policies: Some(vec!["readonly".to_owned(), "submit".to_owned()]),
        roles: Some(vec![AclTokenRoleLink {
            id: "8b1c6d2e-0000-4000-8000-000000000001".to_owned(),
            name: "renamed roles do not change the hash".to_owned(),
        }]),
        ..AclToken::default()
    };
    assert_eq!(
        token_hash(&client),
        "D1RLGKvG32z2FMNWNPH7/sS0CJOMHArKtDvjKmHBPCE="
    );

    let role = AclRole {
        name: "operators".to_owned(),
        description: "Operations team".to_owned(),
        policies: vec![
            AclRolePolicyLink {
                name: "readonly".to_owned(),
            },
            AclRolePolicyLink {
                name: "submit".to_owned(),
            },
        ],
        ..AclRole::default()
    };
    assert_eq!(
        role_hash(&role),
        "7ThcKbM+MH7cgKQIrX3M7sXwOx52SpEpniXNZPcZd7c="
    );
}

/// Nomad's node pool cases (`acl/policy_test.go`, `acl/acl_test.go`): coarse policies
/// expand, names and capabilities are checked, a pool's own block beats the closest glob and
/// deny wins.
#[test]
fn node_pool_blocks_parse_expand_and_decide_by_closest_glob() {
    let policy = parse(
        r#"
node_pool "default" { policy = "read" }
node_pool "prod-*" { policy = "write" }
node_pool "dev" { capabilities = ["read", "write"] }
"#,
    )
    .unwrap();
    let capabilities: Vec<_> = policy
        .node_pools
        .iter()
        .map(|pool| (pool.name.as_str(), pool.capabilities.clone()))
        .collect();
    assert_eq!(
        capabilities,
        [
            ("default", vec!["read".to_owned()]),
            (
                "prod-*",
                vec!["delete".to_owned(), "read".to_owned(), "write".to_owned()]
            ),
            ("dev", vec!["read".to_owned(), "write".to_owned()]),
        ]
    );
    for (rules, message) in [
        (
            "node_pool \"has space\" { policy = \"read\" }",
            "Invalid node pool name 'has space'",
        ),
        (
            "node_pool \"default\" { policy = \"foo\" }",
            "Invalid node pool policy 'foo' for 'default'",
        ),
        (
            "node_pool \"default\" { capabilities = [\"foo\"] }",
            "Invalid node pool capability 'foo' for 'default'",
        ),
        (
            "node_pool \"default\" {\n  policy = \"read\"\n  other = 1\n}\n",
            "other",
        ),
    ] {
        let error = parse(rules).expect_err(rules).to_string();
        assert!(error.contains(message), "{rules}: {error}");
    }

    let acl = Acl::new(&[
        policy,
        parse("node_pool \"prod-secret\" { policy = \"deny\" }\nnode_pool \"*\" { policy = \"read\" }")
            .unwrap(),
    ]);
    assert!(acl.allow_node_pool_operation("default", "read"));
    assert!(!acl.allow_node_pool_operation("default", "write"));
    assert!(acl.allow_node_pool_operation("prod-api", "delete"));
    assert!(
        !acl.allow_node_pool_operation("prod-secret", "read"),
        "deny wins"
    );
    assert!(
        acl.allow_node_pool_operation("elsewhere", "read"),
        "the * glob"
    );
    assert!(!acl.allow_node_pool_operation("elsewhere", "write"));
    assert!(!Acl::new(&[]).allow_node_pool_operation("default", "read"));
    assert!(Acl::management().allow_node_pool_operation("any", "delete"));
}

#[test]
fn rules_json_shows_the_parsed_policy_with_nomads_field_names() {
    let rules = r#"
namespace "default" {
  policy = "read"
  variables {
    path "app/*" {
      capabilities = ["read"]
    }
  }
}
node { policy = "write" }
"#;
    let json = parse(rules).unwrap().rules_json(rules);
    let namespace = &json["Namespaces"][0];
    assert_eq!(namespace["Name"], "default");
    assert_eq!(namespace["Policy"], "read");
    let capabilities: Vec<&str> = namespace["Capabilities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert!(
        capabilities.contains(&capability::READ_JOB),
        "{capabilities:?}"
    );
    assert!(
        !capabilities.contains(&capability::SUBMIT_JOB),
        "{capabilities:?}"
    );
    assert_eq!(namespace["Variables"]["Paths"][0]["PathSpec"], "app/*");
    assert_eq!(json["Node"]["Policy"], "write");
    assert_eq!(json["Agent"], serde_json::Value::Null);
    assert_eq!(json["NodePools"], serde_json::Value::Null);
    assert_eq!(json["Raw"], rules);
}
