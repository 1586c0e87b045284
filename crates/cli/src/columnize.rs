//! Aligned text columns in the manner of the `columnize` package Nomad's CLI prints with:
//! rows of `|`-separated cells become columns padded to the widest cell, glued by two spaces,
//! with trailing spaces trimmed; key/value blocks are glued by ` = `.
//!
//! Not here: what goes in the rows.

/// Formats rows of cells as aligned columns (two spaces between columns).
pub fn columns(rows: &[Vec<String>]) -> String {
    join_aligned(rows, "  ")
}

/// Formats `key = value` lines with the `=` signs aligned.
pub fn key_values(pairs: &[(&str, String)]) -> String {
    let rows: Vec<Vec<String>> = pairs
        .iter()
        .map(|(key, value)| vec![(*key).to_string(), value.clone()])
        .collect();
    join_aligned(&rows, " = ")
}

fn join_aligned(rows: &[Vec<String>], glue: &str) -> String {
    let column_count = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths = vec![0usize; column_count];
    for row in rows {
        for (column, cell) in row.iter().enumerate() {
            widths[column] = widths[column].max(cell.chars().count());
        }
    }
    let mut lines = Vec::with_capacity(rows.len());
    for row in rows {
        let mut line = String::new();
        for (column, cell) in row.iter().enumerate() {
            if column > 0 {
                line.push_str(glue);
            }
            line.push_str(cell);
            if column + 1 < row.len() {
                let padding = widths[column] - cell.chars().count();
                line.extend(std::iter::repeat_n(' ', padding));
            }
        }
        lines.push(line.trim_end().to_string());
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(cells: &[&str]) -> Vec<String> {
        cells.iter().map(|cell| (*cell).to_string()).collect()
    }

    #[test]
    fn columns_are_padded_to_the_widest_cell() {
        let table = columns(&[
            row(&["ID", "Type", "Priority", "Status"]),
            row(&["web", "service", "50", "running"]),
            row(&["a-long-name", "batch", "100", ""]),
        ]);
        assert_eq!(
            table,
            "ID           Type     Priority  Status\n\
             web          service  50        running\n\
             a-long-name  batch    100"
        );
    }

    #[test]
    fn key_values_align_the_equals_signs() {
        let block = key_values(&[
            ("ID", "web".to_string()),
            ("Submit Date", "now".to_string()),
        ]);
        assert_eq!(block, "ID          = web\nSubmit Date = now");
    }
}
