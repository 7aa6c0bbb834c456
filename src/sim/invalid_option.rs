//! The error of a simulator option with a bad value (its own file because the options and
//! the server model's options both report it).

/// A simulator option with a bad value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("simulator option `{field}`: {message}")]
pub struct InvalidOption {
    pub field: String,
    pub message: String,
}

impl InvalidOption {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}
