//! `parse_any`: picks JSON or HCL from the file, and reports unreadable files as such.
#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a failure here is the assertion

use drover_jobspec::{JobspecError, VarValues, parse_any};

#[test]
fn reads_hcl_and_json_files() {
    let directory =
        std::env::temp_dir().join(format!("drover-jobspec-files-{}", std::process::id()));
    std::fs::create_dir_all(&directory).unwrap();

    let hcl_path = directory.join("web.nomad.hcl");
    std::fs::write(
        &hcl_path,
        "job \"web\" {\n  group \"g\" {\n    task \"t\" {\n      driver = \"raw_exec\"\n    }\n  }\n}\n",
    )
    .unwrap();
    let job = parse_any(&hcl_path, &VarValues::new()).unwrap();
    assert_eq!(job.id, "web");
    assert_eq!(job.task_groups[0].tasks[0].driver, "raw_exec");

    let json_path = directory.join("web.json");
    std::fs::write(
        &json_path,
        r#"{"Job": {"ID": "from-json", "TaskGroups": [{"Name": "g", "Tasks": [{"Name": "t", "Driver": "exec"}]}]}}"#,
    )
    .unwrap();
    let job = parse_any(&json_path, &VarValues::new()).unwrap();
    assert_eq!(job.id, "from-json");
    assert_eq!(job.name, "from-json");

    let broken_path = directory.join("broken.hcl");
    std::fs::write(
        &broken_path,
        "job \"x\" {\n  group \"g\" {\n    task \"t\" {}\n  }\n}\n",
    )
    .unwrap();
    match parse_any(&broken_path, &VarValues::new()) {
        Err(JobspecError::Invalid(diagnostics)) => assert_eq!(
            diagnostics.to_string(),
            format!(
                "{}:3:5: group \"g\" task \"t\": driver is missing (for example driver = \"raw_exec\")",
                broken_path.display()
            )
        ),
        other => panic!("expected diagnostics, got {other:?}"),
    }

    let missing_path = directory.join("missing.hcl");
    match parse_any(&missing_path, &VarValues::new()) {
        Err(JobspecError::Read { path, .. }) => assert_eq!(path, missing_path),
        other => panic!("expected a read error, got {other:?}"),
    }
    std::fs::remove_dir_all(&directory).unwrap();
}

#[test]
fn validate_names_field_paths_without_positions() {
    let mut job = drover_jobspec::parse_hcl(
        "job \"ok\" {\n  group \"g\" {\n    task \"t\" {\n      driver = \"raw_exec\"\n    }\n  }\n}\n",
        "ok.hcl",
        &VarValues::new(),
    )
    .unwrap();
    assert!(drover_jobspec::validate(&job).is_empty());
    job.task_groups[0].count = -1;
    job.task_groups[0].tasks[0].driver.clear();
    let messages: Vec<String> = drover_jobspec::validate(&job)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        messages,
        vec![
            "TaskGroups[0].Count: group \"g\": count must not be negative, got -1".to_string(),
            "TaskGroups[0].Tasks[0]: group \"g\" task \"t\": driver is missing (for example driver = \"raw_exec\")".to_string(),
        ]
    );
}

#[test]
fn file_functions_read_beside_the_jobspec_and_are_disabled_without_a_file() {
    let directory = std::env::temp_dir().join(format!(
        "drover-jobspec-file-functions-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(directory.join("conf")).unwrap();
    std::fs::write(directory.join("conf/greeting.txt"), "hello from a file\n").unwrap();
    let source = r#"locals {
  greeting = file("conf/greeting.txt")
}
job "files" {
  group "g" {
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
      env {
        GREETING = chomp(local.greeting)
        ENCODED  = filebase64("conf/greeting.txt")
        PRESENT  = fileexists("conf/greeting.txt")
        ABSENT   = fileexists("conf/missing.txt")
        NAME     = basename("conf/greeting.txt")
        FALLBACK = try(file("conf/missing.txt"), "none")
      }
    }
  }
}
"#;
    let path = directory.join("files.hcl");
    std::fs::write(&path, source).unwrap();
    let job = parse_any(&path, &VarValues::new()).unwrap();
    let env = &job.task_groups[0].tasks[0].env;
    assert_eq!(env["GREETING"], "hello from a file");
    assert_eq!(env["ENCODED"], "aGVsbG8gZnJvbSBhIGZpbGUK");
    assert_eq!(env["PRESENT"], "true");
    assert_eq!(env["ABSENT"], "false");
    assert_eq!(env["NAME"], "greeting.txt");
    assert_eq!(env["FALLBACK"], "none");

    // Text handed over without a file (the API's /v1/jobs/parse) cannot read files, as in Nomad.
    let error = drover_jobspec::parse_hcl(source, "input.hcl", &VarValues::new())
        .expect_err("filesystem functions are disabled without a file")
        .to_string();
    assert!(
        error.starts_with("input.hcl:2:14: local \"greeting\" cannot be evaluated: file: filesystem functions are disabled"),
        "{error}"
    );

    let missing = source.replace("file(\"conf/greeting.txt\")", "file(\"conf/nope.txt\")");
    std::fs::write(&path, missing).unwrap();
    let error = parse_any(&path, &VarValues::new()).expect_err("a missing file is an error");
    assert!(
        error.to_string().contains("file: cannot read ")
            && error.to_string().contains("conf/nope.txt"),
        "{error}"
    );
    std::fs::remove_dir_all(&directory).unwrap();
}

/// `fileset` as Nomad 1.1.2 answers for the same tree (checked with its `job run -output`), and
/// `bcrypt` hashes that verify.
#[test]
fn fileset_globs_beside_the_jobspec_and_bcrypt_hashes_verify() {
    let directory =
        std::env::temp_dir().join(format!("drover-jobspec-fileset-{}", std::process::id()));
    std::fs::create_dir_all(directory.join("files/sub")).unwrap();
    for (path, text) in [
        ("files/a.txt", "a"),
        ("files/c.conf", "c"),
        ("files/sub/b.txt", "b"),
    ] {
        std::fs::write(directory.join(path), text).unwrap();
    }
    let source = r#"job "fileset" {
  meta {
    everything = jsonencode(fileset(".", "./files/**"))
    alternates = jsonencode(fileset("files", "*.{txt,conf}"))
    deep       = jsonencode(fileset("files", "**/*.txt"))
    missing    = jsonencode(fileset("nowhere", "*"))
    hashed     = bcrypt("hello")
    cheap      = bcrypt("hello", 5)
  }
  group "g" {
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
    }
  }
}
"#;
    let path = directory.join("fileset.hcl");
    std::fs::write(&path, source).unwrap();
    let job = parse_any(&path, &VarValues::new()).unwrap();
    let meta = &job.meta;
    assert_eq!(
        meta["everything"],
        r#"["files/a.txt","files/c.conf","files/sub/b.txt"]"#
    );
    assert_eq!(meta["alternates"], r#"["a.txt","c.conf"]"#);
    assert_eq!(meta["deep"], r#"["a.txt","sub/b.txt"]"#);
    assert_eq!(meta["missing"], "[]");
    assert!(meta["hashed"].starts_with("$2a$10$"), "{}", meta["hashed"]);
    assert!(bcrypt::verify("hello", &meta["hashed"]).unwrap());
    assert!(meta["cheap"].starts_with("$2a$05$"), "{}", meta["cheap"]);
    let error = drover_jobspec::parse_hcl(
        &source.replace("bcrypt(\"hello\", 5)", "bcrypt(\"hello\", 3)"),
        "x.hcl",
        &VarValues::new(),
    )
    .expect_err("cost 3 is refused")
    .to_string();
    assert!(error.contains("cost 3 is outside allowed range"), "{error}");
    std::fs::remove_dir_all(&directory).unwrap();
}
