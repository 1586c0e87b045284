//! Jobspecs → [`drover_structs::Job`]: Nomad's HCL2 jobspec language and JSON jobs, with
//! defaults applied per job type and validation that reports every error at once, located as
//! `file:line:col`.
//!
//! **Boundary**: knows nothing about the server; input is text, output is a `Job` or diagnostics.
//!
//! The pipeline: `hcl_parse` (syntax, spans) → `decode` (schema walk, `eval` of variables and
//! expressions, Nomad JSON plus a field → source offset map) → `drover_structs::Job` →
//! canonicalisation (API defaults) → `validate` (located through the offset map).

mod decode;
mod diagnostic;
mod duration;
mod eval;
mod hcl_parse;
mod schema;
mod suggest;
mod validate;

pub use diagnostic::{Diagnostic, Diagnostics, Position, SourceMap};
pub use duration::{DurationError, parse_go_duration};
pub use eval::VarValues;
pub use schema::refused_blocks;

/// Decodes HCL into Nomad's job JSON without building or validating a `Job`; also returns
/// the field path → byte offset map. Exposed for tooling and tests.
pub fn decode_hcl_to_json(
    source: &str,
    filename: &str,
    variable_values: &VarValues,
) -> Result<(serde_json::Value, std::collections::BTreeMap<String, usize>), Diagnostics> {
    let source_map = SourceMap::new(source);
    let body = hcl_parse::parse_body(source, filename, &source_map)?;
    match decode::decode_job_file(&body, filename, &source_map, variable_values) {
        Ok(decoded) => Ok((decoded.job, decoded.locations)),
        Err(diagnostics) => {
            let mut diagnostics = Diagnostics(diagnostics);
            diagnostics.sort_and_dedup();
            Err(diagnostics)
        }
    }
}
