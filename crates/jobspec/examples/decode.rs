//! Prints the Nomad JSON decoded from an HCL jobspec (a debugging aid).
fn main() {
    let path = std::env::args().nth(1).unwrap_or_default();
    let source = std::fs::read_to_string(&path).unwrap_or_default();
    match drover_jobspec::decode_hcl_to_json(&source, &path, &drover_jobspec::VarValues::new()) {
        Ok((json, _)) => println!(
            "{}",
            serde_json::to_string_pretty(&json).unwrap_or_default()
        ),
        Err(diagnostics) => println!("{diagnostics}"),
    }
}
