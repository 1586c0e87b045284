//! The list options of Nomad's paginated endpoints: `filter` (a go-bexpr expression, see
//! [`crate::bexpr`]), `per_page`, `next_token` and `reverse`, and the page walk of Nomad's
//! `paginator`: skip up to the token, filter, take `per_page`, and hand back the token of the
//! first object left over (`X-Nomad-NextToken`).
//!
//! The tokens are Nomad's: `<namespace>.<id>` for jobs and service registrations, `<id>` for
//! nodes and for a list read by ID prefix, `<create index>.<id>` for allocations and
//! evaluations. Not here: which list is read in which order (the handlers).

use std::cmp::Ordering;

use crate::bexpr::Filter;
use crate::error::ApiError;
use crate::params::QueryParams;

/// `filter`, `per_page`, `next_token` and `reverse` of one list request.
#[derive(Debug, Default)]
pub struct ListOptions {
    pub filter: Option<Filter>,
    /// 0: everything. Negative as Go's `int32` compares it (no object fits a page).
    pub per_page: i32,
    pub next_token: String,
    pub reverse: bool,
}

impl ListOptions {
    /// Reads the options as Nomad's HTTP agent does: a `per_page` that is not a 32-bit number
    /// is a 400; `reverse` is on only for `true`; a filter that does not parse is a 400 naming
    /// the position.
    pub fn from_params(params: &QueryParams) -> Result<Self, ApiError> {
        let per_page = match params.non_empty("per_page") {
            None => 0,
            Some(raw) => raw.parse::<i32>().map_err(|_| {
                ApiError::bad_request("Expect a number for `per_page` query string parameter")
            })?,
        };
        let filter = match params.non_empty("filter") {
            None => None,
            Some(source) => Some(Filter::parse(source).map_err(|error| {
                ApiError::bad_request(format!(
                    "failed to create result paginator: failed to read filter expression: {error}"
                ))
            })?),
        };
        Ok(ListOptions {
            filter,
            per_page,
            next_token: params.get("next_token").unwrap_or("").to_string(),
            reverse: params.get("reverse") == Some("true"),
        })
    }
}

/// How a list's objects are named in tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    /// `<id>`
    Id,
    /// `<namespace>.<id>`
    NamespaceId,
    /// `<create index>.<id>`, compared numerically on the index.
    CreateIndexId,
    /// `<index>` alone, compared numerically (Nomad's `ModifyIndexTokenizer`); the handler
    /// hands the object's modify index in [`TokenParts::create_index`].
    ModifyIndex,
}

/// What a tokenizer needs of an object.
pub struct TokenParts<'a> {
    pub namespace: &'a str,
    pub id: &'a str,
    pub create_index: u64,
}

/// The object's token and how it compares with the target token.
fn token(kind: TokenKind, parts: &TokenParts<'_>, target: &str) -> (String, Ordering) {
    match kind {
        TokenKind::Id => (parts.id.to_string(), parts.id.cmp(target)),
        TokenKind::NamespaceId => {
            let token = format!("{}.{}", parts.namespace, parts.id);
            let ordering = token.as_str().cmp(target);
            (token, ordering)
        }
        TokenKind::CreateIndexId => {
            let token = format!("{}.{}", parts.create_index, parts.id);
            let ordering = match target.split_once('.') {
                Some((index, id)) => match index.parse::<u64>() {
                    Ok(index) => parts
                        .create_index
                        .cmp(&index)
                        .then_with(|| parts.id.cmp(id)),
                    Err(_) => token.as_str().cmp(target),
                },
                None => token.as_str().cmp(target),
            };
            (token, ordering)
        }
        TokenKind::ModifyIndex => {
            let target_index = target.parse::<u64>().unwrap_or(0);
            (
                parts.create_index.to_string(),
                parts.create_index.cmp(&target_index),
            )
        }
    }
}

/// One page of `items` (already in the list's order, reversed when asked), each turned into
/// what the list answers by `stub`, and the next token ("" on the last page). `parts` names an
/// object for tokens; `datum` is the JSON the filter sees.
pub fn page<T, S>(
    items: impl IntoIterator<Item = T>,
    options: &ListOptions,
    kind: TokenKind,
    parts: impl Fn(&T) -> TokenParts<'_>,
    datum: impl Fn(&T) -> Result<serde_json::Value, ApiError>,
    mut stub: impl FnMut(T) -> Result<S, ApiError>,
) -> Result<(Vec<S>, String), ApiError> {
    let mut out = Vec::new();
    let mut found = options.next_token.is_empty();
    let mut count: i64 = 0;
    for item in items {
        let (item_token, ordering) = token(kind, &parts(&item), &options.next_token);
        let passed = if options.reverse {
            ordering == Ordering::Greater
        } else {
            ordering == Ordering::Less
        };
        if !found && passed {
            continue;
        }
        if let Some(filter) = &options.filter {
            let json = datum(&item)?;
            let allowed = filter.matches(&json).map_err(|error| {
                ApiError::bad_request(format!("failed to read result page: {error}"))
            })?;
            if !allowed {
                continue;
            }
        }
        found = true;
        count += 1;
        if options.per_page != 0 && count > i64::from(options.per_page) {
            return Ok((out, item_token));
        }
        out.push(stub(item)?);
    }
    Ok((out, String::new()))
}

/// The JSON of an object for the filter.
pub fn to_datum<T: serde::Serialize>(value: &T) -> Result<serde_json::Value, ApiError> {
    serde_json::to_value(value)
        .map_err(|error| ApiError::internal(format!("failed to encode for the filter: {error}")))
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::unwrap_used)] // a failed expectation is a failed test
mod tests {
    use super::*;

    fn parts(id: &str, index: u64) -> TokenParts<'_> {
        TokenParts {
            namespace: "default",
            id,
            create_index: index,
        }
    }

    #[test]
    fn create_index_tokens_compare_the_index_as_a_number() {
        assert_eq!(
            token(TokenKind::CreateIndexId, &parts("b", 12), "102.a"),
            ("12.b".to_string(), Ordering::Less)
        );
        assert_eq!(
            token(TokenKind::CreateIndexId, &parts("b", 102), "102.a").1,
            Ordering::Greater
        );
        assert_eq!(
            token(TokenKind::NamespaceId, &parts("web", 1), "default.web"),
            ("default.web".to_string(), Ordering::Equal)
        );
    }

    #[test]
    fn pages_end_with_the_token_of_the_next_object() {
        let items: Vec<(String, u64)> = (1..=5).map(|n| (format!("id{n}"), n)).collect();
        let options = ListOptions {
            per_page: 2,
            ..ListOptions::default()
        };
        let walk = |options: &ListOptions| {
            page(
                items.clone(),
                options,
                TokenKind::CreateIndexId,
                |(id, index)| parts(id, *index),
                |(id, _)| Ok(serde_json::json!({ "ID": id })),
                |(id, _)| Ok(id),
            )
            .unwrap()
        };
        let (first, next) = walk(&options);
        assert_eq!(first, ["id1", "id2"]);
        assert_eq!(next, "3.id3");
        let (second, next) = walk(&ListOptions {
            per_page: 2,
            next_token: next,
            ..ListOptions::default()
        });
        assert_eq!(second, ["id3", "id4"]);
        let (last, next) = walk(&ListOptions {
            per_page: 2,
            next_token: next,
            ..ListOptions::default()
        });
        assert_eq!(last, ["id5"]);
        assert_eq!(next, "");
        let params = QueryParams::parse(Some("filter=ID+%21%3D+id2&per_page=2"));
        let (filtered, next) = walk(&ListOptions::from_params(&params).unwrap());
        assert_eq!(filtered, ["id1", "id3"]);
        assert_eq!(next, "4.id4");
    }

    #[test]
    fn bad_options_are_400s_naming_them() {
        let bad_page = ListOptions::from_params(&QueryParams::parse(Some("per_page=ten")));
        assert_eq!(
            bad_page.err(),
            Some(ApiError::bad_request(
                "Expect a number for `per_page` query string parameter"
            ))
        );
        let bad_filter = ListOptions::from_params(&QueryParams::parse(Some("filter=ID+%3D%3D")));
        let message = bad_filter.err().map(|error| error.to_string()).unwrap();
        assert!(
            message.starts_with(
                "failed to create result paginator: failed to read filter expression: 1:6 (5): no match found"
            ),
            "{message}"
        );
    }
}
