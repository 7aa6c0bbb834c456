//! Configuration errors: each names where the bad value came from (file with line/column,
//! environment variable, command-line override), its key path and the reason.

use std::fmt;

/// One problem with a configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigIssue {
    /// Where the offending value came from: `config/x.toml:12:15`, `environment
    /// TMAS_METHOD__EPSILON`, `--set method.n`, … Empty when unknown (e.g. a `Config`
    /// built in code).
    pub origin: String,
    /// Dotted key path, e.g. `roles.solution.temperature` (empty for whole-file errors).
    pub path: String,
    /// Why it is wrong. Never contains an API key.
    pub message: String,
}

impl ConfigIssue {
    pub fn new(
        origin: impl Into<String>,
        path: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            origin: origin.into(),
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for ConfigIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut sep = "";
        if !self.origin.is_empty() {
            f.write_str(&self.origin)?;
            sep = ": ";
        }
        if !self.path.is_empty() {
            write!(f, "{sep}{}", self.path)?;
            sep = ": ";
        }
        write!(f, "{sep}{}", self.message)
    }
}

/// Every problem found, in the order found; displayed one per line.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConfigErrors(pub Vec<ConfigIssue>);

/// A problem with what the user gave (arguments, a file or directory to read or write),
/// found before anything was created or changed. Commands exit with the bad-input code
/// on it (docs/cli.md).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BadInput(pub String);

impl ConfigErrors {
    pub fn single(issue: ConfigIssue) -> Self {
        Self(vec![issue])
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn iter(&self) -> impl Iterator<Item = &ConfigIssue> {
        self.0.iter()
    }
    /// True if some issue is at exactly this key path (handy in tests and callers).
    pub fn has_path(&self, path: &str) -> bool {
        self.0.iter().any(|i| i.path == path)
    }
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, issue) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{issue}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

impl From<Vec<ConfigIssue>> for ConfigErrors {
    fn from(v: Vec<ConfigIssue>) -> Self {
        Self(v)
    }
}

/// One step of a key path: a table key or an array index.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Seg {
    Key(String),
    Index(usize),
}

/// A key path such as `roles.solution.temperature` or `groups.default[1]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct KeyPath(pub Vec<Seg>);

impl KeyPath {
    /// A path of table keys, e.g. `KeyPath::keys(["method", "n"])`.
    pub fn keys<I, S>(keys: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self(keys.into_iter().map(|k| Seg::Key(k.into())).collect())
    }
    /// This path extended by a key.
    pub fn key(&self, k: impl Into<String>) -> Self {
        let mut v = self.0.clone();
        v.push(Seg::Key(k.into()));
        Self(v)
    }
    /// This path extended by an array index.
    pub fn index(&self, i: usize) -> Self {
        let mut v = self.0.clone();
        v.push(Seg::Index(i));
        Self(v)
    }
    /// True if `self` is a prefix of `other` or the other way round: a value set at one of
    /// them explains a problem reported at the other.
    pub fn related(&self, other: &KeyPath) -> bool {
        let n = self.0.len().min(other.0.len());
        self.0[..n] == other.0[..n]
    }
}

impl fmt::Display for KeyPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, seg) in self.0.iter().enumerate() {
            match seg {
                Seg::Index(n) => write!(f, "[{n}]")?,
                Seg::Key(k) => {
                    if i > 0 {
                        f.write_str(".")?;
                    }
                    let bare = !k.is_empty()
                        && k.chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
                    if bare {
                        f.write_str(k)?;
                    } else {
                        write!(f, "{k:?}")?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// A problem found by validation, before its origin (file, env, CLI) is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyIssue {
    pub path: KeyPath,
    pub message: String,
}

impl KeyIssue {
    pub fn new(path: KeyPath, message: impl Into<String>) -> Self {
        Self {
            path,
            message: message.into(),
        }
    }
}

impl fmt::Display for KeyIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}
