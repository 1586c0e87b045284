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
