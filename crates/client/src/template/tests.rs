//! Engine and function tests: Go template syntax through `render`, and each function.

use super::*;

fn scope() -> RenderScope {
    RenderScope {
        env: BTreeMap::from([
            ("NOMAD_ALLOC_INDEX".to_string(), "3".to_string()),
            ("LIST".to_string(), "a,b,c".to_string()),
        ]),
        task_dir: std::env::temp_dir(),
        files_read: Vec::new(),
        ..RenderScope::default()
    }
}

fn with_delims(text: &str, left: &str, right: &str) -> Result<String, RenderError> {
    render(
        TemplateText {
            destination: "local/out.txt",
            text,
            left_delimiter: left,
            right_delimiter: right,
            error_on_missing_key: false,
        },
        scope(),
    )
    .0
}

fn ok(text: &str) -> String {
    with_delims(text, "", "").unwrap_or_else(|error| panic!("{text}: {error}"))
}

fn err(text: &str) -> RenderError {
    with_delims(text, "", "").expect_err(text)
}

#[test]
fn syntax_range_with_define_trim_and_variables() {
    assert_eq!(
        ok(r#"{{ range $i, $v := split "," (env "LIST") }}{{$i}}={{$v}};{{ end }}"#),
        "0=a;1=b;2=c;"
    );
    assert_eq!(
        ok("{{ range split \",\" \"\" }}x{{ else }}none{{ end }}"),
        "none"
    );
    assert_eq!(
        ok("{{ with env \"NOMAD_ALLOC_INDEX\" }}i={{ . }}{{ end }}"),
        "i=3"
    );
    assert_eq!(
        ok("{{ with env \"MISSING\" }}yes{{ else }}no{{ end }}"),
        "no"
    );
    assert_eq!(
        ok("{{ define \"x\" }}<{{ . }}>{{ end }}{{ template \"x\" \"y\" }}"),
        "<y>"
    );
    assert_eq!(ok("a  {{- \"b\" -}}  \n c"), "abc");
    assert_eq!(ok("{{ $x := \"v\" }}{{ $x }}{{ $x }}"), "vv");
    assert_eq!(ok("{{ \"abc\" | toUpper | printf \"%s!\" }}"), "ABC!");
    assert_eq!(
        ok("{{ if eq (env \"NOMAD_ALLOC_INDEX\") \"3\" }}three{{ end }}"),
        "three"
    );
    assert_eq!(ok("{{/* comment */}}x"), "x");
}

#[test]
fn custom_delimiters() {
    assert_eq!(
        with_delims("[[ env \"LIST\" ]] {{ raw }}", "[[", "]]").unwrap(),
        "a,b,c {{ raw }}"
    );
    assert_eq!(with_delims("<<- \"a\" ->> b", "<<", ">>").unwrap(), "ab");
}

#[test]
fn errors_name_destination_and_line_column() {
    let error = err("line one\n  {{ nosuch }}");
    assert_eq!(error.destination, "local/out.txt");
    assert_eq!((error.line, error.column), (Some(2), Some(6)), "{error}");
    assert!(
        error
            .to_string()
            .starts_with("template local/out.txt at 2:6: "),
        "{error}"
    );
    let error = err("ok\n\nthen {{ parseInt \"x\" }}");
    // The position of the failing command inside the action.
    assert_eq!((error.line, error.column), (Some(3), Some(9)), "{error}");
    assert!(error.message.contains("parseInt"), "{error}");
    let error = err("{{ if true }}unclosed");
    assert!(error.line.is_some(), "{error}");
}

#[test]
fn hostile_templates_are_bounded() {
    let error = err("{{ define \"r\" }}{{ template \"r\" . }}{{ end }}{{ template \"r\" }}");
    assert!(error.message.contains("depth"), "{error}");
    let nested = "{{ if true }}".repeat(10_000);
    assert!(err(&nested).message.contains("nested deeper"));
    let parens = format!("{{{{ {}1{} }}}}", "(".repeat(10_000), ")".repeat(10_000));
    assert!(err(&parens).message.contains("nested deeper"));
    let huge = "{{ range loop 1000000 }}{{ range loop 1000000 }}{{ end }}{{ end }}";
    assert!(err(huge).message.contains("steps"));
    assert!(err("{{ loop 100000000 }}").message.contains("limit"));
    assert!(
        err("{{ sprig_repeat 100000000 \"xxxxxxxx\" }}")
            .message
            .contains("too large")
    );
    // Multi-byte text next to trim markers and delimiters does not split a char.
    assert_eq!(ok("é  {{- \"x\" -}}  ü"), "éxü");
    assert!(with_delims("{{ \"é", "", "").is_err());
}

#[test]
fn string_functions() {
    assert_eq!(
        ok("{{ \"a b\" | base64Encode }}|{{ \"YSBi\" | base64Decode }}"),
        "YSBi|a b"
    );
    assert_eq!(
        ok("{{ \"??>\" | base64URLEncode }}|{{ \"Pz8-\" | base64URLDecode }}"),
        "Pz8-|??>"
    );
    assert_eq!(ok("{{ split \",\" \"a,b\" | join \"+\" }}"), "a+b");
    assert_eq!(ok("{{ \"aXa\" | replaceAll \"a\" \"b\" }}"), "bXb");
    assert_eq!(
        ok("{{ \"a1b22\" | regexReplaceAll \"[0-9]+\" \"#\" }}"),
        "a#b#"
    );
    assert_eq!(ok("{{ \"abc\" | regexMatch \"^a.c$\" }}"), "true");
    assert_eq!(
        ok("{{ \"  x \" | trimSpace }}|{{ \"AbC\" | toLower }}|{{ \"AbC\" | toUpper }}"),
        "x|abc|ABC"
    );
    assert_eq!(ok("{{ \"hello big world\" | toTitle }}"), "Hello Big World");
    assert_eq!(ok("{{ \"a\\nb\" | indent 2 }}"), "  a\n  b");
    assert_eq!(
        ok("{{ \"abc\" | sha256Hex }}"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    assert_eq!(
        ok("{{ \"abc\" | md5sum }}"),
        "900150983cd24fb0d6963f7d28e17f72"
    );
}

#[test]
fn parse_and_encode_functions() {
    assert_eq!(ok("{{ \"42\" | parseInt | add 1 }}"), "43");
    assert_eq!(
        ok("{{ \"true\" | parseBool }}|{{ \"1.5\" | parseFloat }}"),
        "true|1.5"
    );
    assert_eq!(
        ok(
            "{{ with parseJSON \"{\\\"a\\\":[1,2],\\\"b\\\":\\\"x\\\"}\" }}{{ .b }}{{ toJSON .a }}{{ end }}"
        ),
        "x[1,2]"
    );
    assert_eq!(
        ok("{{ parseJSON \"{\\\"b\\\":1,\\\"a\\\":true}\" | toJSON }}"),
        "{\"a\":true,\"b\":1}"
    );
    assert_eq!(
        ok("{{ parseJSON \"{\\\"a\\\":1}\" | toJSONPretty }}"),
        "{\n  \"a\": 1\n}"
    );
    assert_eq!(
        ok(
            "{{ parseJSON \"{\\\"a\\\":{\\\"b\\\":[1,\\\"x y\\\"]},\\\"c\\\":\\\"true\\\"}\" | toYAML }}"
        ),
        "a:\n  b:\n    - 1\n    - \"x y\"\nc: \"true\""
    );
    assert!(
        err("{{ parseBool \"maybe\" }}")
            .message
            .contains("parseBool")
    );
    assert!(err("{{ parseJSON \"{\" }}").message.contains("parseJSON"));
}

#[test]
fn list_and_arithmetic_functions() {
    assert_eq!(
        ok("{{ split \",\" \"a,b\" | contains \"b\" }}|{{ \"abc\" | contains \"bc\" }}"),
        "true|true"
    );
    assert_eq!(
        ok("{{ split \",\" \"a,b\" | containsAny (split \",\" \"x,b\") }}"),
        "true"
    );
    assert_eq!(
        ok("{{ split \",\" \"a,b\" | containsAll (split \",\" \"a,x\") }}"),
        "false"
    );
    assert_eq!(
        ok(
            "{{ split \",\" \"a,b\" | containsNone (split \",\" \"x\") }}|{{ split \",\" \"a\" | containsNotAll (split \",\" \"a,x\") }}"
        ),
        "true|true"
    );
    assert_eq!(
        ok("{{ range loop 3 }}{{ . }}{{ end }}|{{ range loop 2 4 }}{{ . }}{{ end }}"),
        "012|23"
    );
    assert_eq!(
        ok(
            "{{ 5 | subtract 2 }} {{ 3 | multiply 4 }} {{ 9 | divide 2 }} {{ 9 | modulo 4 }} {{ 1.5 | add 1 }}"
        ),
        "3 12 4 1 2.5"
    );
    assert!(
        err("{{ 1 | divide 0 }}")
            .message
            .contains("division by zero")
    );
}

#[test]
fn timestamp_function() {
    let now = ok("{{ timestamp }}");
    assert_eq!(now.len(), 20, "{now}");
    assert!(now.ends_with('Z'));
    assert!(ok("{{ timestamp \"unix\" }}").parse::<i64>().unwrap() > 1_600_000_000);
    assert_eq!(funcs::rfc3339_utc(0), "1970-01-01T00:00:00Z");
    assert_eq!(funcs::rfc3339_utc(951_782_400), "2000-02-29T00:00:00Z");
    assert!(
        err("{{ timestamp \"Jan 2\" }}")
            .message
            .contains("not supported")
    );
}

#[test]
fn sprig_functions() {
    assert_eq!(
        ok(
            "{{ sprig_upper \"a\" }}{{ sprig_lower \"B\" }}{{ sprig_trim \" c \" }}{{ sprig_title \"d e\" }}"
        ),
        "AbcD E"
    );
    assert_eq!(
        ok(
            "{{ sprig_repeat 3 \"ab\" }}|{{ env \"NOPE\" | sprig_default \"dflt\" }}|{{ \"x\" | sprig_default \"dflt\" }}"
        ),
        "ababab|dflt|x"
    );
    assert_eq!(
        ok("{{ sprig_quote \"a\" }} {{ sprig_squote \"b\" }}"),
        "\"a\" 'b'"
    );
    assert_eq!(
        ok(
            "{{ \"prefix-x\" | sprig_trimPrefix \"prefix-\" }}{{ \"x.txt\" | sprig_trimSuffix \".txt\" }}"
        ),
        "xx"
    );
    assert_eq!(
        ok("{{ \"abc\" | sprig_hasPrefix \"ab\" }} {{ \"abc\" | sprig_hasSuffix \"bc\" }}"),
        "true true"
    );
    assert_eq!(ok("{{ sprig_list 1 \"a\" | toJSON }}"), "[1,\"a\"]");
    assert_eq!(
        ok(
            "{{ \"hi\" | sprig_b64enc }} {{ \"aGk=\" | sprig_b64dec }} {{ \"\" | sprig_sha256sum | printf \"%.6s\" }}"
        ),
        "aGk= hi e3b0c4"
    );
}

#[test]
fn missing_data_sources_fail_clearly() {
    assert!(
        err("{{ service \"web\" }}")
            .message
            .contains("needs Consul")
    );
    assert!(err("{{ key \"a/b\" }}").message.contains("needs Consul"));
    assert!(
        err("{{ with secret \"kv/x\" }}{{ end }}")
            .message
            .contains("needs Vault")
    );
}

#[test]
fn nomad_var_functions_answer_from_the_cache_and_record_what_they_want() {
    let text = "{{ with nomadVar \"nomad/jobs/web\" }}{{ .user }}:{{ .pass }}{{ end }} \
                {{ nomadVarExists \"app/x\" }} \
                {{ range nomadVarList \"nomad/jobs\" }}{{ .Path }};{{ end }}";
    let template = TemplateText {
        destination: "local/out",
        text,
        left_delimiter: "",
        right_delimiter: "",
        error_on_missing_key: false,
    };
    let (result, first) = render(template, RenderScope::default());
    assert_eq!(result.unwrap(), " false ");
    assert!(first.variables.used);
    assert_eq!(
        first
            .variables
            .wanted_reads
            .iter()
            .cloned()
            .collect::<Vec<_>>(),
        vec!["app/x".to_string(), "nomad/jobs/web".to_string()]
    );
    assert_eq!(
        first
            .variables
            .wanted_lists
            .iter()
            .cloned()
            .collect::<Vec<_>>(),
        vec!["nomad/jobs".to_string()]
    );
    let web = drover_structs::Variable {
        path: "nomad/jobs/web".to_string(),
        items: BTreeMap::from([
            ("user".to_string(), "app".to_string()),
            ("pass".to_string(), "s3".to_string()),
        ]),
        ..drover_structs::Variable::default()
    };
    let mut cache = funcs::VariableCache::default();
    cache
        .reads
        .insert("nomad/jobs/web".to_string(), Some(web.clone()));
    cache.reads.insert("app/x".to_string(), None);
    cache
        .lists
        .insert("nomad/jobs".to_string(), vec![web.metadata()]);
    let (result, second) = render(
        template,
        RenderScope {
            variables: cache.clone(),
            ..RenderScope::default()
        },
    );
    assert_eq!(result.unwrap(), "app:s3 false nomad/jobs/web;");
    assert!(second.variables.wanted_reads.is_empty());

    // A variable that does not exist fails nomadVar, naming it.
    cache.reads.insert("nomad/jobs/web".to_string(), None);
    let (result, third) = render(
        template,
        RenderScope {
            variables: cache,
            ..RenderScope::default()
        },
    );
    assert!(
        result
            .unwrap_err()
            .message
            .contains("\"nomad/jobs/web\" does not exist")
    );
    assert!(third.variables.absent.contains("nomad/jobs/web"));
}

#[test]
fn env_and_file_functions() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("local")).unwrap();
    std::fs::write(dir.path().join("local/in.txt"), "from file").unwrap();
    let (result, scope) = render(
        TemplateText {
            destination: "local/out",
            text: "{{ file \"local/in.txt\" }} {{ env \"LIST\" }}",
            left_delimiter: "",
            right_delimiter: "",
            error_on_missing_key: false,
        },
        RenderScope {
            env: BTreeMap::from([("LIST".to_string(), "l".to_string())]),
            task_dir: dir.path().to_path_buf(),
            files_read: Vec::new(),
            ..RenderScope::default()
        },
    );
    assert_eq!(result.unwrap(), "from file l");
    assert_eq!(scope.files_read, vec!["local/in.txt".to_string()]);
    let (result, _) = render(
        TemplateText {
            destination: "local/out",
            text: "{{ file \"../../etc/passwd\" }}",
            left_delimiter: "",
            right_delimiter: "",
            error_on_missing_key: false,
        },
        RenderScope {
            task_dir: dir.path().to_path_buf(),
            ..RenderScope::default()
        },
    );
    assert!(result.unwrap_err().message.contains("escapes"));
}

#[test]
fn env_file_rules() {
    let parsed = parse_env_file(
        "# c\n\nA=1\nexport B = two words # note\nC='lit $x'\nD=\"q\\n\\\"x\\\"\"\nE=\n",
    )
    .unwrap();
    assert_eq!(parsed["A"], "1");
    assert_eq!(parsed["B"], "two words");
    assert_eq!(parsed["C"], "lit $x");
    assert_eq!(parsed["D"], "q\n\"x\"");
    assert_eq!(parsed["E"], "");
    assert!(parse_env_file("novalue").is_err());
    assert!(parse_env_file("1X=a").is_err());
}

#[test]
fn error_on_missing_key_fails_on_a_missing_map_key_where_the_default_renders_no_value() {
    let text = "{{ with parseJSON \"{\\\"a\\\": 1}\" }}{{ .a }}/{{ .b }}{{ end }}";
    let render_with = |error_on_missing_key| {
        render(
            TemplateText {
                destination: "local/out",
                text,
                left_delimiter: "",
                right_delimiter: "",
                error_on_missing_key,
            },
            scope(),
        )
        .0
    };
    assert_eq!(render_with(false).unwrap(), "1/<no value>");
    let error = render_with(true).unwrap_err();
    assert_eq!(error.message, "map has no entry for key \"b\"");
    assert_eq!((error.line, error.column), (Some(1), Some(46)));
}

#[test]
fn nomad_service_functions_answer_from_the_cache_with_tags_choose_and_listings() {
    let text = "{{ range nomadService \"web\" }}{{ .Address }}:{{ .Port }} {{ .Tags }};{{ end }}|\
                {{ range nomadService \"blue.web?ns=other\" }}{{ .ID }};{{ end }}|\
                {{ range nomadService 1 \"k\" \"web\" }}{{ .Name }};{{ end }}|\
                {{ range nomadServices }}{{ .Name }}={{ join \",\" .Tags }};{{ end }}";
    let render_with = |variables: funcs::VariableCache| {
        render(
            TemplateText {
                destination: "local/out",
                text,
                left_delimiter: "",
                right_delimiter: "",
                error_on_missing_key: false,
            },
            RenderScope {
                variables,
                ..RenderScope::default()
            },
        )
    };
    let (result, first) = render_with(funcs::VariableCache::default());
    assert_eq!(result.unwrap(), "|||");
    let query = |name: &str, namespace: Option<&str>, choose: Option<&str>| funcs::ServiceQuery {
        name: name.to_string(),
        namespace: namespace.map(str::to_string),
        choose: choose.map(str::to_string),
    };
    assert_eq!(
        first
            .variables
            .wanted_services
            .iter()
            .cloned()
            .collect::<Vec<_>>(),
        vec![
            query("web", None, None),
            query("web", None, Some("1|k")),
            query("web", Some("other"), None),
        ]
    );
    assert_eq!(
        first
            .variables
            .wanted_service_lists
            .iter()
            .cloned()
            .collect::<Vec<_>>(),
        vec![None]
    );
    let registration = |id: &str, port: i64, tags: &[&str]| drover_structs::ServiceRegistration {
        id: id.to_string(),
        service_name: "web".to_string(),
        address: "10.0.0.1".to_string(),
        port,
        tags: tags.iter().map(|tag| tag.to_string()).collect(),
        ..drover_structs::ServiceRegistration::default()
    };
    let a = registration("a", 8080, &["green", "blue"]);
    let b = registration("b", 8081, &["green"]);
    let mut cache = funcs::VariableCache::default();
    cache
        .services
        .insert(query("web", None, None), vec![a.clone(), b.clone()]);
    cache.services.insert(
        query("web", Some("other"), None),
        vec![a.clone(), b.clone()],
    );
    cache
        .services
        .insert(query("web", None, Some("1|k")), vec![b.clone()]);
    cache.service_lists.insert(
        None,
        drover_structs::service_catalog::service_list([&a, &b]),
    );
    let (result, again) = render_with(cache);
    assert_eq!(
        result.unwrap(),
        "10.0.0.1:8080 [blue green];10.0.0.1:8081 [green];|a;|web;|web=blue,green;"
    );
    assert!(again.variables.wanted_services.is_empty());

    for (bad, message) in [
        ("{{ nomadService \"web@eu\" }}", "names region \"eu\""),
        ("{{ nomadService \"we b\" }}", "invalid format"),
        ("{{ nomadService 1 \"web\" }}", "expected 1 or 3 arguments"),
        ("{{ service \"web\" }}", "needs Consul"),
    ] {
        let error = err(bad);
        assert!(error.message.contains(message), "{bad}: {error}");
    }
}
