//! The HCL syntax layer: parses text with `hcl-edit` (which keeps byte spans) and turns a syntax
//! error into a located [`Diagnostic`].
//!
//! Not the decoder: it knows nothing about jobs.

use hcl_edit::structure::Body;

use crate::diagnostic::{Diagnostic, Diagnostics, Position, SourceMap};

/// Parses a whole HCL file. A syntax error becomes one diagnostic at the error's location.
pub(crate) fn parse_body(
    source: &str,
    filename: &str,
    source_map: &SourceMap<'_>,
) -> Result<Body, Diagnostics> {
    hcl_edit::parser::parse_body(source).map_err(|error| {
        let location = error.location();
        // hcl-edit reports 1-based lines and columns; recompute the column from the byte offset
        // so that it counts characters like every other diagnostic.
        let position = if location.offset() <= source.len() {
            source_map.position(location.offset())
        } else {
            Position {
                line: location.line(),
                column: location.column(),
            }
        };
        Diagnostics(vec![Diagnostic::new(
            filename,
            Some(position),
            format!("syntax error: {}", error.message()),
        )])
    })
}
