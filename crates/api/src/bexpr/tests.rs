//! The filter grammar, operator by operator, against an allocation-shaped object; and the
//! errors, with the positions go-bexpr reports.

#![allow(clippy::expect_used, clippy::unwrap_used)] // a failed expectation is a failed test

use serde_json::{Value, json};

use super::Filter;

fn datum() -> Value {
    json!({
        "ID": "5d0f3c2a-aaaa",
        "JobID": "web-frontend",
        "ClientStatus": "running",
        "Count": 3,
        "CreateIndex": 18446744073709551615u64,
        "Weight": 0.5,
        "Canary": false,
        "Empty": "",
        "Tags": ["a", "b c", "7"],
        "Ports": [80, 443],
        "NoTags": [],
        "Nil": null,
        "Meta": {"owner": "ops", "tier": "", "a b": "spaced"},
        "Job": {"Name": "web", "TaskGroups": [{"Name": "g1", "Count": 2}, {"Name": "g2", "Count": 1}]},
        "TaskStates": {"web": {"State": "running"}, "side": {"State": "dead"}}
    })
}

fn eval(expression: &str) -> bool {
    Filter::parse(expression)
        .unwrap_or_else(|error| panic!("{expression}: {error}"))
        .matches(&datum())
        .unwrap_or_else(|error| panic!("{expression}: {error}"))
}

fn eval_error(expression: &str) -> String {
    Filter::parse(expression)
        .unwrap_or_else(|error| panic!("{expression}: {error}"))
        .matches(&datum())
        .expect_err(expression)
        .to_string()
}

fn parse_error(expression: &str) -> String {
    Filter::parse(expression).expect_err(expression).message
}

#[test]
fn equality_converts_the_literal_to_the_fields_type() {
    assert!(eval(r#"ClientStatus == "running""#));
    assert!(eval("ClientStatus == running"));
    assert!(eval("ClientStatus == `running`"));
    assert!(!eval(r#"ClientStatus != "running""#));
    assert!(eval("Count == 3"));
    assert!(eval("Count == \"0x3\""));
    assert!(eval("Count == `0b11`"));
    assert!(eval("Count == \"3\""));
    assert!(eval("Count != 4"));
    assert!(eval("CreateIndex == 18446744073709551615"));
    assert!(eval("Weight == 0.5"));
    assert!(eval("Canary == false"));
    assert!(eval("Canary == F"));
    assert!(eval("Canary != true"));
    assert!(!eval("Count == -3"));
}

#[test]
fn a_literal_of_the_wrong_type_is_an_error() {
    assert_eq!(
        eval_error("Count == abc"),
        r#"error getting match value in expression: strconv.ParseInt: parsing "abc": invalid syntax"#
    );
    assert_eq!(
        eval_error("Canary == yes"),
        r#"error getting match value in expression: strconv.ParseBool: parsing "yes": invalid syntax"#
    );
    assert_eq!(
        eval_error("Tags == a"),
        "unable to find suitable primitive comparison function for matching"
    );
}

#[test]
fn contains_and_in_look_in_strings_lists_and_map_keys() {
    assert!(eval(r#"JobID contains "front""#));
    assert!(eval(r#""front" in JobID"#));
    assert!(eval(r#"Tags contains "b c""#));
    assert!(eval(r#""a" in Tags"#));
    assert!(eval(r#""z" not in Tags"#));
    assert!(eval(r#"Tags not contains "z""#));
    assert!(eval("443 in Ports"));
    assert!(!eval("444 in Ports"));
    assert!(eval(r#""owner" in Meta"#));
    assert!(eval(r#"Meta not contains "group""#));
    assert!(eval(r#""web" in TaskStates"#));
    assert!(eval(r#""x" not in Nil"#));
    assert_eq!(
        eval_error(r#"Count contains "3""#),
        r#"cannot perform in/contains operations on type int64 for selector: "Count""#
    );
}

#[test]
fn matches_is_an_unanchored_regular_expression() {
    assert!(eval(r#"JobID matches "^web""#));
    assert!(eval(r#"JobID matches "front""#));
    assert!(eval(r#"JobID not matches "^api""#));
    assert!(eval(r"JobID matches `^web-\w+$`"));
    assert_eq!(
        eval_error(r#"JobID matches "(""#),
        eval_error(r#"JobID matches "(""#)
    );
    assert!(
        eval_error(r#"JobID matches "(""#)
            .starts_with("failed to compile regular expression \"(\"")
    );
    assert_eq!(
        eval_error(r#"Count matches "3""#),
        "value of type int64 is not convertible to []byte"
    );
}

#[test]
fn emptiness_and_nil() {
    assert!(eval("Empty is empty"));
    assert!(eval("NoTags is empty"));
    assert!(eval("Nil is empty"));
    assert!(eval("Tags is not empty"));
    assert!(eval("Meta.tier is empty"));
    assert!(eval("Meta is not empty"));
    assert!(eval("Nil is nil"));
    assert!(eval("NoTags is not nil"));
    assert!(eval("Meta is not nil"));
    assert_eq!(
        eval_error("Count is empty"),
        r#"cannot perform is-empty operations on type int64 for selector: "Count""#
    );
}

#[test]
fn selectors_reach_nested_fields_map_keys_and_list_elements() {
    assert!(eval(r#"Job.Name == "web""#));
    assert!(eval(r#"Meta.owner == ops"#));
    assert!(eval(r#"Meta["a b"] == "spaced""#));
    assert!(eval(r#"Meta[ `owner` ] == "ops""#));
    assert!(eval(r#"TaskStates.web.State == "running""#));
    assert!(eval(r#"TaskStates["side"].State == dead"#));
    assert!(eval(r#"Job.TaskGroups.1.Name == "g2""#));
    assert!(eval(r#"Tags.0 == "a""#));
    assert!(eval(r#""/Job/TaskGroups/0/Name" == "g1""#));
    assert!(eval(r#""/Meta/owner" == "ops""#));
}

#[test]
fn a_missing_map_key_answers_by_operator_and_a_missing_field_is_an_error() {
    assert!(!eval(r#"Meta.group == "x""#));
    assert!(eval(r#"Meta.group != "x""#));
    assert!(eval("Meta.group is empty"));
    assert!(!eval("Meta.group is not empty"));
    assert!(!eval(r#"Meta.group matches ".""#));
    assert!(eval(r#"Meta.group not matches ".""#));
    assert!(!eval(r#""x" in Meta.group"#));
    assert!(eval(r#""x" not in Meta.group"#));
    assert!(eval_error(r#"Nope == "x""#).starts_with("error finding value in datum: /Nope"));
    assert!(eval_error(r#"Tags.9 == "x""#).contains("index out of range"));
}

#[test]
fn boolean_operators_group_and_short_circuit() {
    assert!(eval(
        r#"ClientStatus == "running" and JobID matches "^web""#
    ));
    assert!(!eval(r#"ClientStatus == "dead" and JobID matches "^web""#));
    assert!(eval(r#"ClientStatus == "dead" or JobID matches "^web""#));
    assert!(eval(r#"not ClientStatus == "dead""#));
    assert!(eval(r#"not not ClientStatus == "running""#));
    assert!(eval(
        r#"(ClientStatus == "dead" or Count == 3) and Canary == false"#
    ));
    assert!(eval(r#"( Count == 3 )"#));
    assert!(!eval(r#"not (Count == 3 or Count == 4)"#));
    // `and` binds tighter than `or`.
    assert!(eval(r#"Count == 3 or Count == 4 and Count == 5"#));
    // The right side is not evaluated once the left decides.
    assert!(eval(r#"Count == 3 or Nope == 1"#));
    assert!(!eval(r#"Count == 4 and Nope == 1"#));
    assert!(eval("\tCount == 3\n"));
}

#[test]
fn collections_bind_elements_and_keys() {
    assert!(eval(r#"any Job.TaskGroups as g { g.Name == "g2" }"#));
    assert!(eval(r#"all Job.TaskGroups as g { g.Count != 0 }"#));
    assert!(!eval(r#"all Tags as t { t != "a" }"#));
    assert!(eval(r#"any TaskStates as name { name == "side" }"#));
    assert!(eval(r#"any TaskStates as _, s { s.State == "dead" }"#));
    assert!(eval(r#"all Ports as i, p { p != 0 }"#));
    assert!(eval(r#"any Ports as i, _ { i == 1 }"#));
    assert!(eval(r#"all Meta.missing as m { m == 1 }"#));
}

#[test]
fn string_escapes_are_gos() {
    assert!(eval(r#"Meta["a\x20b"] == "spaced""#));
    assert_eq!(
        parse_error(r#"JobID matches "^web\d""#),
        "1:15 (14): rule string: invalid syntax"
    );
}

#[test]
fn malformed_filters_name_the_position() {
    assert_eq!(
        parse_error(r#"ClientStatus = "running""#),
        r#"1:14 (13): no match found, expected: "!=", "==", "contains", "in", "is", "matches", "not" or [ \t\r\n]"#
    );
    assert_eq!(
        parse_error("Count == 0x3"),
        "1:11 (10): rule number: Invalid number literal"
    );
    assert_eq!(
        parse_error(r#"(Count == 3"#),
        "1:12 (11): rule grouping: Unmatched parentheses"
    );
    assert_eq!(
        parse_error(r#"Count == 3x"#),
        "1:11 (10): rule number: Invalid number literal"
    );
    assert_eq!(
        parse_error(r#"JobID == "web"#),
        "1:14 (13): rule string: Unterminated string literal"
    );
    assert_eq!(
        parse_error(r#""a" in 7"#),
        "1:8 (7): rule match: Invalid selector"
    );
    assert_eq!(
        parse_error(r#"Meta[owner] == 1"#),
        "1:6 (5): rule index: Invalid index"
    );
    assert_eq!(
        parse_error(r#"Meta["owner" == 1"#),
        "1:14 (13): rule index: Unclosed index expression"
    );
    assert!(parse_error("").starts_with("1:1 (0): no match found"));
    assert!(parse_error("Count ==\n").starts_with("2:1 (9): no match found"));
    assert!(parse_error(r#"Count == 3 an Count == 4"#).starts_with("1:12 (11): no match found"));
}

/// Regression: unbalanced parentheses made the parser try each level's first operand twice, so
/// `((((((((((` (from a hostile `?filter=`) took exponential time on an API worker thread.
/// Nested parentheses parse in time linear in their depth, and nesting past the limit is a
/// parse error rather than a stack overflow.
#[test]
fn unbalanced_and_deeply_nested_parentheses_parse_at_once() {
    let started = std::time::Instant::now();
    let error = parse_error(&"(".repeat(40));
    assert!(error.contains("no match found"), "{error}");
    assert!(eval(&format!(
        "{}Job.Name == \"web\"{}",
        "(".repeat(40),
        ")".repeat(40)
    )));
    let error = parse_error(&format!("{}a == 1{}", "(".repeat(5000), ")".repeat(5000)));
    assert!(error.contains("nest deeper than 64"), "{error}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "parsing took {:?}",
        started.elapsed()
    );
}
