//! Fuzzes the whole HCL → Job path (syntax, variables, evaluation, decoding, defaults,
//! validation): any input must give a job or diagnostics, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(source) = std::str::from_utf8(data) else {
        return;
    };
    let mut variable_values = drover_jobspec::VarValues::new();
    variable_values.set_text("fuzz", "value");
    let _ = drover_jobspec::parse_hcl(source, "fuzz.hcl", &drover_jobspec::VarValues::new());
    let _ = drover_jobspec::parse_hcl(source, "fuzz.hcl", &variable_values);
    let _ = drover_jobspec::parse_json(source, "fuzz.json");
    let _ = drover_jobspec::parse_go_duration(source);
});
