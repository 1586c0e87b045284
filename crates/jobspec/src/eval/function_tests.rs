//! The function library's answers and errors, evaluated as a jobspec evaluates them.
use crate::eval::Evaluator;

fn evaluate(source: &str) -> Result<hcl::Value, String> {
    let body: hcl_edit::structure::Body = format!("x = {source}\n")
        .parse()
        .unwrap_or_else(|error| panic!("{source}: {error}"));
    let attribute = body
        .get_attribute("x")
        .unwrap_or_else(|| panic!("{source}: no attribute"));
    Evaluator::new(hcl::Value::Object(hcl::Map::new()), hcl::Map::new()).evaluate(&attribute.value)
}

#[test]
fn functions_answer_as_nomads_jobspec_functions() {
    let cases = [
        ("abs(-12.4)", "12.4"),
        ("ceil(5.1)", "6"),
        ("floor(4.9)", "4"),
        ("signum(-13)", "-1"),
        ("log(16, 2)", "4"),
        ("pow(3, 2)", "9"),
        ("parseint(\"FF\", 16)", "255"),
        ("parseint(\"-10\", 2)", "-2"),
        ("chomp(\"hello\\n\\n\")", "\"hello\""),
        ("strlen(\"héllo\")", "5"),
        ("strrev(\"hello\")", "\"olleh\""),
        ("title(\"hello world\")", "\"Hello World\""),
        ("trim(\"?!hello?!\", \"!?\")", "\"hello\""),
        ("trimprefix(\"helloworld\", \"hello\")", "\"world\""),
        ("trimsuffix(\"helloworld\", \"world\")", "\"hello\""),
        ("indent(2, \"[\\n  foo,\\n]\")", "\"[\\n    foo,\\n  ]\""),
        ("substr(\"hello world\", 1, 4)", "\"ello\""),
        ("substr(\"hello\", -3, -1)", "\"llo\""),
        ("regex_replace(\"hello\", \"l+\", \"L\")", "\"heLo\""),
        ("urlencode(\"a b&c\")", "\"a+b%26c\""),
        (
            "chunklist([\"a\", \"b\", \"c\", \"d\", \"e\"], 2)",
            "[[\"a\", \"b\"], [\"c\", \"d\"], [\"e\"]]",
        ),
        ("coalescelist([], [\"b\"])", "[\"b\"]"),
        ("compact([\"a\", \"\", \"b\"])", "[\"a\", \"b\"]"),
        ("distinct([\"a\", \"b\", \"a\"])", "[\"a\", \"b\"]"),
        ("element([\"a\", \"b\", \"c\"], 3)", "\"a\""),
        (
            "flatten([[\"a\"], [], [\"b\", [\"c\"]]])",
            "[\"a\", \"b\", \"c\"]",
        ),
        ("index([\"a\", \"b\"], 1)", "\"b\""),
        ("index({ a = \"x\" }, \"a\")", "\"x\""),
        ("keys({ b = 1, a = 2 })", "[\"a\", \"b\"]"),
        ("values({ b = 1, a = 2 })", "[2, 1]"),
        ("range(3)", "[0, 1, 2]"),
        ("range(1, 4)", "[1, 2, 3]"),
        ("range(0, 10, 5)", "[0, 5]"),
        ("reverse(\"abc\")", "\"cba\""),
        (
            "slice([\"a\", \"b\", \"c\", \"d\"], 1, 3)",
            "[\"b\", \"c\"]",
        ),
        ("sort([\"e\", \"d\", \"a\"])", "[\"a\", \"d\", \"e\"]"),
        ("zipmap([\"a\", \"b\"], [1, 2])", "{ a = 1, b = 2 }"),
        ("setunion([\"a\"], [\"b\", \"a\"])", "[\"a\", \"b\"]"),
        ("setintersection([\"a\", \"b\"], [\"b\", \"c\"])", "[\"b\"]"),
        ("base64encode(\"Hello World\")", "\"SGVsbG8gV29ybGQ=\""),
        ("base64decode(\"SGVsbG8gV29ybGQ=\")", "\"Hello World\""),
        (
            "jsonencode({ b = 1, a = \"<x>\" })",
            "\"{\\\"a\\\":\\\"\\\\u003cx\\\\u003e\\\",\\\"b\\\":1}\"",
        ),
        (
            "jsondecode(\"{\\\"a\\\": [1, true]}\")",
            "{ a = [1, true] }",
        ),
        ("can(var.missing)", "false"),
        ("can(upper(\"x\"))", "true"),
        ("try(var.missing, \"fallback\")", "\"fallback\""),
        ("try(local.nope.deeper, 2)", "2"),
        (
            "\"${try(var.missing, \"in a template\")}\"",
            "\"in a template\"",
        ),
        ("cidrhost(\"10.12.112.0/20\", 16)", "\"10.12.112.16\""),
        ("cidrhost(\"10.12.112.0/20\", -2)", "\"10.12.127.254\""),
        (
            "cidrhost(\"fd00:fd12:3456:7890::/56\", 16)",
            "\"fd00:fd12:3456:7800::10\"",
        ),
        ("cidrnetmask(\"172.16.0.0/12\")", "\"255.240.0.0\""),
        ("cidrsubnet(\"::/0\", 0, 0)", "\"::/0\""),
        ("cidrsubnet(\"172.16.0.0/12\", 4, 2)", "\"172.18.0.0/16\""),
        ("cidrsubnet(\"10.1.2.0/24\", 4, 15)", "\"10.1.2.240/28\""),
        (
            "cidrsubnet(\"fd00:fd12:3456:7890::/56\", 16, 162)",
            "\"fd00:fd12:3456:7800:a200::/72\"",
        ),
        (
            "formatlist(\"Hello, %s!\", [\"Valentina\", \"Ander\"])",
            "[\"Hello, Valentina!\", \"Hello, Ander!\"]",
        ),
        // Nomad 1.1.2's answers, recorded through /v1/jobs/parse.
        (
            "md5(\"héllo world\")",
            "\"f226f520832f216aec10f084fa998ddb\"",
        ),
        (
            "sha1(\"héllo world\")",
            "\"6f67d9778de04b9a59543ef7a0a03b7990543e5e\"",
        ),
        (
            "sha256(\"héllo world\")",
            "\"27c965a4110f97162bc6c0d4a35857c3165747e656b88b14d45469a148390a75\"",
        ),
        (
            "sha512(\"héllo world\")",
            "\"a34cc496f7b9f652ce0fa5e8ec6e9ac2937439f64d99dab5bf08e7c76ce7c9546d920c71b8f2618f2bbf924e6eb843a98e89389e92111b24cb3daae7ed429c63\"",
        ),
        (
            "uuidv5(\"dns\", \"www.example.com\")",
            "\"2ed6657d-e927-568b-95e1-2665a8aea6a2\"",
        ),
        (
            "uuidv5(\"url\", \"https://example.com/\")",
            "\"dd2c1780-811a-5296-81c5-178a0ef488bc\"",
        ),
        (
            "uuidv5(\"6ba7b810-9dad-11d1-80b4-00c04fd430c8\", \"x\")",
            "\"05b16a01-46c6-56dd-bd6e-c6dfb4a1427a\"",
        ),
        ("length(split(\"-\", uuidv4()))", "5"),
        (
            "csvdecode(\"name,note\\nweb,\\\"a, \\\"\\\"quoted\\\"\\\" b\\\"\\n\\ndb,\\\"multi\\nline\\\"\\r\\n\")",
            "[{name = \"web\", note = \"a, \\\"quoted\\\" b\"}, {name = \"db\", note = \"multi\\nline\"}]",
        ),
        ("csvdecode(\"x,y\\n\")", "[]"),
        (
            "timeadd(\"2017-11-22T00:00:00Z\", \"10m\")",
            "\"2017-11-22T00:10:00Z\"",
        ),
        (
            "timeadd(\"2017-11-22T00:00:00.5+01:30\", \"-25h1.5s\")",
            "\"2017-11-20T22:59:59+01:30\"",
        ),
        (
            "timeadd(\"2020-02-28T23:59:59-05:00\", \"24h1s\")",
            "\"2020-03-01T00:00:00-05:00\"",
        ),
        (
            "timeadd(\"1999-12-31T23:59:59Z\", \"1s\")",
            "\"2000-01-01T00:00:00Z\"",
        ),
        (
            "setproduct([\"a\", \"b\"], [1, 2])",
            "[[\"a\", 1], [\"a\", 2], [\"b\", 1], [\"b\", 2]]",
        ),
    ];
    for (expression, expected) in cases {
        assert_eq!(
            evaluate(expression),
            evaluate(expected),
            "{expression} should be {expected}"
        );
    }
}

#[test]
fn function_misuse_is_an_error_naming_it() {
    for (expression, fragment) in [
        ("try(var.a, var.b)", "no argument of try could be evaluated"),
        ("element([], 1)", "empty list"),
        ("zipmap([\"a\"], [])", "1 keys but 0 values"),
        ("parseint(\"12\", 1)", "base must be between 2 and 62"),
        (
            "regex_replace(\"a\", \"(\", \"b\")",
            "invalid regular expression",
        ),
        ("slice([1], 0, 2)", "out of the list"),
        ("uuidv5(\"nope\", \"x\")", "uuidv5: namespace \"nope\""),
        (
            "csvdecode(\"a,b\\n1\\n\")",
            "csvdecode: record on line 2: wrong number of fields",
        ),
        ("csvdecode(\"\")", "csvdecode: missing header line"),
        (
            "csvdecode(\"a\\nx\\\"y\\n\")",
            "csvdecode: parse error on line 2: bare \" in non-quoted-field",
        ),
        (
            "timeadd(\"2017-02-30T00:00:00Z\", \"1s\")",
            "timeadd: timestamp",
        ),
        (
            "timeadd(\"2017-11-22T00:00:00Z\", \"1x\")",
            "timeadd: duration",
        ),
        (
            "cidrsubnets(\"10.0.0.0/30\", 1, 1, 1)",
            "argument 4: not enough remaining address space for a subnet with a prefix of 31 bits after 10.0.0.2/31",
        ),
        (
            "cidrsubnets(\"10.0.0.0/24\", 9)",
            "would extend prefix to 33 bits, which is too long for an IPv4 address",
        ),
        ("cidrsubnets(\"10.0.0/24\", 1)", "invalid CIDR expression"),
        (
            "formatdate(\"YYY\", \"2018-01-02T23:12:01Z\")",
            "year must either be \"YY\" or \"YYYY\"",
        ),
        (
            "formatdate(\"'x\", \"2018-01-02T23:12:01Z\")",
            "unterminated literal",
        ),
        (
            "formatdate(\"x\", \"2018-01-02T23:12:01Z\")",
            "invalid date format verb \"x\"",
        ),
        (
            "formatdate(\"D\", \"2018-01-02\")",
            "not a valid RFC3339 timestamp",
        ),
        ("yamldecode(\"a: [\")", "yamldecode:"),
        (
            "yamldecode(\"a: 1\\n---\\nb: 2\\n\")",
            "only a single document is allowed",
        ),
        ("yamldecode(\"a: !!int x\")", "cannot parse \"x\""),
        ("yamldecode(\"a: .nan\")", "NaN is not supported"),
        (
            "rsadecrypt(\"AAAA\", \"not a key\")",
            "rsadecrypt: invalid private key",
        ),
    ] {
        let error = evaluate(expression).expect_err(expression);
        assert!(error.contains(fragment), "{expression}: {error}");
    }
}

#[test]
fn pathexpand_expands_a_leading_tilde_as_go_homedir_does() {
    use crate::functions::path_expand;
    let home = Some(std::ffi::OsString::from("/home/ann"));
    for (path, expected) in [
        ("~", "/home/ann"),
        ("~/", "/home/ann"),
        ("~/a//b/./c/../d", "/home/ann/a/b/d"),
        ("/etc/~", "/etc/~"),
        ("a/~", "a/~"),
        ("", ""),
    ] {
        assert_eq!(
            path_expand(path, home.clone()),
            Ok(hcl::Value::String(expected.to_string())),
            "{path}"
        );
    }
    let error = path_expand("~bob/x", home).expect_err("~user is refused");
    assert!(error.contains("pathexpand"), "{error}");
    let error = path_expand("~/x", None).expect_err("no HOME");
    assert!(error.contains("HOME"), "{error}");
}
