//! The engine's API and its bounds for hostile templates: nesting, `{{ template }}` depth,
//! steps and output size; registered functions and the positions errors name.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use drover_template::{ErrorKind, FuncError, MAX_NESTING, Template, Value};

fn parse_error(text: &str) -> drover_template::Error {
    Template::new("t").parse(text).map(|_| ()).expect_err(text)
}

fn exec_error(text: &str, data: &Value) -> drover_template::Error {
    Template::new("t")
        .parse(text)
        .unwrap()
        .execute(data)
        .expect_err(text)
}

#[test]
fn controls_and_parentheses_nest_at_most_max_nesting_deep() {
    let fits = format!(
        "{}x{}",
        "{{if true}}".repeat(MAX_NESTING),
        "{{end}}".repeat(MAX_NESTING)
    );
    assert_eq!(
        Template::new("t")
            .parse(&fits)
            .unwrap()
            .execute(&Value::Nil)
            .unwrap(),
        "x"
    );
    let error = parse_error(&"{{if true}}".repeat(100_000));
    assert_eq!(error.kind, ErrorKind::Parse);
    assert!(error.message.contains("nested deeper than 32"), "{error}");
    let parens = format!("{{{{ {}1{} }}}}", "(".repeat(100_000), ")".repeat(100_000));
    assert!(parse_error(&parens).message.contains("nested deeper"));
    let blocks = "{{block \"b\" .}}".repeat(100);
    assert!(parse_error(&blocks).message.contains("nested deeper"));
}

#[test]
fn recursive_templates_stop_at_the_depth_limit() {
    let error = exec_error(
        "{{define \"r\"}}{{template \"r\" .}}{{end}}{{template \"r\"}}",
        &Value::Nil,
    );
    assert_eq!(
        error.to_string(),
        "template: t:1:25: executing \"r\" at <{{template \"r\" .}}>: exceeded maximum template depth (16)"
    );
}

#[test]
fn an_execution_stops_after_max_steps() {
    let items = Value::List((0..5_000).map(Value::Int).collect());
    let error = exec_error("{{range .}}{{range $}}{{end}}{{end}}", &items);
    assert!(error.message.contains("exceeds 10000000 steps"), "{error}");
}

#[test]
fn output_stops_at_max_output() {
    let mut template = Template::new("t");
    template.max_output = 10;
    template.parse("{{range .}}{{.}}{{end}}").unwrap();
    let items = Value::List((0..100).map(Value::Int).collect());
    let error = template.execute(&items).expect_err("too long");
    assert_eq!(error.to_string(), "template: t: output exceeds 10 bytes");
}

fn shout(args: &[Value]) -> Result<Value, FuncError> {
    match args {
        [Value::String(text)] => Ok(Value::String(format!("{}!", text.to_uppercase()))),
        _ => Err(FuncError::new("shout wants one string")),
    }
}

fn join(args: &[Value]) -> Result<Value, FuncError> {
    Ok(Value::String(
        args.iter()
            .map(|arg| arg.to_string())
            .collect::<Vec<_>>()
            .join("+"),
    ))
}

#[test]
fn registered_functions_take_the_piped_value_last_and_their_errors_name_the_command() {
    let mut template = Template::new("t");
    template.funcs(&[("shout", shout), ("join", join)]);
    template
        .parse("{{ \"a\" | shout }} {{ 3 | join 1 2 }} {{ .missing | join }}")
        .unwrap();
    assert_eq!(template.execute(&Value::Nil).unwrap(), "A! 1+2+3 <nil>");
    template.parse("ok\n  {{ shout 1 }}").unwrap();
    let error = template.execute(&Value::Nil).expect_err("shout 1");
    assert_eq!((error.line, error.column), (Some(2), Some(6)));
    assert_eq!(error.message, "error calling shout: shout wants one string");
    assert_eq!(
        error.to_string(),
        "template: t:2:5: executing \"t\" at <shout 1>: error calling shout: shout wants one string"
    );
}

#[test]
fn parse_errors_carry_line_and_one_based_column() {
    let error = parse_error("one\ntwo {{ nosuch }}");
    assert_eq!((error.line, error.column), (Some(2), Some(8)));
    assert_eq!(
        error.to_string(),
        "template: t:2: function \"nosuch\" not defined"
    );
}

#[test]
fn a_defined_template_runs_by_name() {
    let mut template = Template::new("t");
    template
        .parse("{{define \"item\"}}<{{.}}>{{end}}top")
        .unwrap();
    assert_eq!(template.execute(&Value::Nil).unwrap(), "top");
    assert_eq!(
        template.execute_named("item", &Value::from("x")).unwrap(),
        "<x>"
    );
    assert_eq!(
        template
            .execute_named("nope", &Value::Nil)
            .unwrap_err()
            .to_string(),
        "template: nope: \"nope\" is an incomplete or empty template"
    );
}

/// Templates stitched from the language's pieces at random (a fixed seed) end in an output or
/// an error, never a panic.
#[test]
fn random_templates_fail_cleanly() {
    const PIECES: [&str; 44] = [
        "{{",
        "}}",
        "{{- ",
        " -}}",
        "-",
        " ",
        "(",
        ")",
        "|",
        "$x",
        "$",
        ":=",
        "=",
        ".",
        ".a",
        "a",
        "\"",
        "\"s\"",
        "'",
        "'c'",
        "`",
        "/*",
        "*/",
        "if ",
        "end",
        "else",
        "range ",
        "with ",
        "define \"d\"",
        "template \"d\"",
        "block \"b\" .",
        "break",
        "continue",
        "1",
        "1.5",
        "é",
        "\n",
        "printf ",
        "\"%d\" ",
        "index ",
        "nil",
        ",",
        "eq ",
        "len ",
    ];
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let data = Value::List(vec![Value::Int(1), Value::from("x")]);
    for _ in 0..100_000 {
        let length = 1 + next() % 12;
        let text: String = (0..length)
            .map(|_| PIECES[(next() % PIECES.len() as u64) as usize])
            .collect();
        let mut template = Template::new("t");
        if template.parse(&text).is_ok() {
            let _ = template.execute(&data);
        }
    }
}
