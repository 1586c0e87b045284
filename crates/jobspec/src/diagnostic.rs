//! Located error messages for jobspecs: each [`Diagnostic`] names the file, the `line:column`
//! (HCL) or the field path (JSON) and a message; [`Diagnostics`] carries all of them at once.
//!
//! Not a renderer: no colours, no source excerpts. `Display` gives the one-line form
//! `web.hcl:12:5: group "app" task "server": resources.memory must be at least 10 (MB)`.

use std::fmt;
use std::ops::Range;

/// A 1-based line and column (the column counts characters, not bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct Position {
    pub line: usize,
    pub column: usize,
}

/// One problem found in a jobspec.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Diagnostic {
    /// The file name as given by the caller (may be empty).
    pub file: String,
    /// Where in the source, when the source is HCL.
    pub position: Option<Position>,
    /// The Nomad JSON field path, such as `TaskGroups[0].Tasks[1].Resources.MemoryMB`, when the
    /// problem belongs to a field (validation errors, JSON jobs).
    pub field_path: Option<String>,
    pub message: String,
}

impl Diagnostic {
    pub fn new(file: &str, position: Option<Position>, message: impl Into<String>) -> Self {
        Diagnostic {
            file: file.to_string(),
            position,
            field_path: None,
            message: message.into(),
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut location = self.file.clone();
        match (&self.position, &self.field_path) {
            (Some(position), _) => {
                location.push_str(&format!(":{}:{}", position.line, position.column));
            }
            (None, Some(path)) if location.is_empty() => location.push_str(path),
            (None, Some(path)) => location.push_str(&format!(": {path}")),
            (None, None) => {}
        }
        if location.is_empty() {
            write!(formatter, "{}", self.message)
        } else {
            write!(formatter, "{location}: {}", self.message)
        }
    }
}

/// Every problem found in one jobspec, in source order where positions are known.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, thiserror::Error)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Diagnostic> {
        self.0.iter()
    }

    /// Sorts by position (unpositioned last, stable otherwise) and drops exact duplicates.
    pub(crate) fn sort_and_dedup(&mut self) {
        self.0.sort_by_key(|diagnostic| {
            (
                diagnostic.position.is_none(),
                diagnostic
                    .position
                    .unwrap_or(Position { line: 0, column: 0 }),
            )
        });
        self.0.dedup();
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, diagnostic) in self.0.iter().enumerate() {
            if index > 0 {
                writeln!(formatter)?;
            }
            write!(formatter, "{diagnostic}")?;
        }
        Ok(())
    }
}

impl IntoIterator for Diagnostics {
    type Item = Diagnostic;
    type IntoIter = std::vec::IntoIter<Diagnostic>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

/// Maps byte offsets of one source text to 1-based line and character columns.
#[derive(Debug, Clone)]
pub struct SourceMap<'source> {
    source: &'source str,
    line_starts: Vec<usize>,
}

impl<'source> SourceMap<'source> {
    pub fn new(source: &'source str) -> Self {
        let mut line_starts = vec![0];
        line_starts.extend(
            source
                .bytes()
                .enumerate()
                .filter(|(_, byte)| *byte == b'\n')
                .map(|(index, _)| index + 1),
        );
        SourceMap {
            source,
            line_starts,
        }
    }

    /// The position of a byte offset; offsets past the end clamp to the end, and an offset
    /// inside a multi-byte character counts as that character.
    pub fn position(&self, byte_offset: usize) -> Position {
        let byte_offset = byte_offset.min(self.source.len());
        let line_index = match self.line_starts.binary_search(&byte_offset) {
            Ok(index) => index,
            Err(index) => index.saturating_sub(1),
        };
        let line_start = self.line_starts.get(line_index).copied().unwrap_or(0);
        let column = self
            .source
            .get(line_start..)
            .unwrap_or("")
            .char_indices()
            .take_while(|(index, _)| line_start + index < byte_offset)
            .count()
            + 1;
        Position {
            line: line_index + 1,
            column,
        }
    }

    pub fn position_of_span(&self, span: &Option<Range<usize>>) -> Option<Position> {
        span.as_ref().map(|range| self.position(range.start))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_count_lines_and_characters() {
        let source_map = SourceMap::new("ab\nµcd\n\nx");
        assert_eq!(source_map.position(0), Position { line: 1, column: 1 });
        assert_eq!(source_map.position(2), Position { line: 1, column: 3 });
        assert_eq!(source_map.position(3), Position { line: 2, column: 1 });
        // 'µ' is two bytes: byte 5 is 'c', the second character of line 2.
        assert_eq!(source_map.position(5), Position { line: 2, column: 2 });
        assert_eq!(source_map.position(8), Position { line: 3, column: 1 });
        assert_eq!(source_map.position(9), Position { line: 4, column: 1 });
        assert_eq!(source_map.position(99), Position { line: 4, column: 2 });
    }

    #[test]
    fn display_forms() {
        let positioned = Diagnostic::new(
            "web.hcl",
            Some(Position {
                line: 12,
                column: 5,
            }),
            "bad",
        );
        assert_eq!(positioned.to_string(), "web.hcl:12:5: bad");
        let mut by_path = Diagnostic::new("job.json", None, "bad");
        by_path.field_path = Some("TaskGroups[0].Count".into());
        assert_eq!(by_path.to_string(), "job.json: TaskGroups[0].Count: bad");
        assert_eq!(Diagnostic::new("", None, "bad").to_string(), "bad");
        assert_eq!(
            Diagnostic::new("job.hcl", None, "bad").to_string(),
            "job.hcl: bad"
        );
        by_path.file.clear();
        assert_eq!(by_path.to_string(), "TaskGroups[0].Count: bad");
    }
}
