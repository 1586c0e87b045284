//! "Did you mean" hints: the closest known name to a misspelt one, by Levenshtein distance.
//!
//! Not a spell checker: it only picks among the names a schema allows at one place.

/// The edit distance between two strings, counted in characters.
pub fn edit_distance(left: &str, right: &str) -> usize {
    let right_chars: Vec<char> = right.chars().collect();
    let mut previous_row: Vec<usize> = (0..=right_chars.len()).collect();
    let mut current_row = vec![0; right_chars.len() + 1];
    for (left_index, left_char) in left.chars().enumerate() {
        current_row[0] = left_index + 1;
        for (right_index, right_char) in right_chars.iter().enumerate() {
            let substitution_cost = usize::from(left_char != *right_char);
            current_row[right_index + 1] = (previous_row[right_index] + substitution_cost)
                .min(previous_row[right_index + 1] + 1)
                .min(current_row[right_index] + 1);
        }
        std::mem::swap(&mut previous_row, &mut current_row);
    }
    previous_row[right_chars.len()]
}

/// The candidate closest to `given`, if it is close enough to be a likely typo (distance at
/// most 2, or at most a third of the name for long names).
pub fn closest_name<'candidate>(
    given: &str,
    candidates: impl IntoIterator<Item = &'candidate str>,
) -> Option<&'candidate str> {
    let limit = (given.chars().count() / 3).max(2);
    candidates
        .into_iter()
        .map(|candidate| (edit_distance(given, candidate), candidate))
        .filter(|(distance, _)| *distance <= limit)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(edit_distance("", ""), 0);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("memroy", "memory"), 2);
        assert_eq!(edit_distance("driver", "driver"), 0);
    }

    #[test]
    fn suggestions() {
        let known = ["memory", "memory_max", "cpu", "cores"];
        assert_eq!(closest_name("memroy", known), Some("memory"));
        assert_eq!(closest_name("cpus", known), Some("cpu"));
        assert_eq!(closest_name("gpu_count", known), None);
    }
}
