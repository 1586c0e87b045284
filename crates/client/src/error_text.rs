//! Error text for messages that reach users: an error with the causes beneath it.

/// `error` and each of its sources, joined by ": " (an HTTP client's top error says only that a
/// request failed; the reason, such as a refused certificate, is in its sources).
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
