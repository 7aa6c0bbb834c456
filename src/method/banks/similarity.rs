//! When two bank items say the same thing: a similarity that reads mathematics.
//!
//! The released memory store compares the *sets* of alphanumeric tokens, which drops
//! everything that makes a mathematical statement what it is: `T(2)=3` and `T(3)=2` have
//! the same token set, `x = -3` loses its sign, and `n is not even` shares three of four
//! words with `n is even`. Here:
//!
//! 1. **Tokens keep mathematics.** Numbers (`12`, `3.5`), operators and relations
//!    (`= + - * / ^ < > <= >= != ≡ ±`) are tokens, LaTeX and Unicode spellings are folded
//!    into one form (`\le`, `\leq`, `≤` → `<=`; `\cdot`, `\times` → `*`; `equals` → `=`),
//!    other LaTeX commands are words (`\sqrt` → `sqrt`), `n't` becomes `not`, hyphenated
//!    words are joined (`AM-GM` → `amgm`), plurals lose their `s` and `modulo` is `mod`.
//!    Case, brackets, punctuation and function words (`the`, `of`, `is`, `use`, and `a`
//!    as an article) are dropped; negations (`not`, `no`, `never`, …) are kept.
//! 2. **Order where it matters.** The features are the unigrams plus the bigrams that
//!    carry order: every pair of neighbouring tokens of which one is a number or an
//!    operator (`2 =`, `= 3`), and every negation with the word it negates (`not even`).
//!    Prose bigrams are left out, so reordered wording still matches.
//! 3. **Formulas must agree.** The *formula* of an item is its numbers and operators in
//!    order. When both items have one and they differ, the items are distinct whatever
//!    their wording: `T(2)=3` / `T(3)=2`, `x = -3` / `x = 3`, `a < b` / `a <= b`.
//! 4. **Polarity must agree.** An item with an odd number of negations and one with an
//!    even number say opposite things: `there is a solution` / `there is no solution`.
//! 5. **Opposites must not swap.** When one item has a word of a known opposite pair
//!    (`maximum`/`minimum`, `sum`/`product`, `even`/`odd`, …) and the other has its
//!    opposite instead, they are distinct.
//!
//! The similarity is the Jaccard index of the feature sets (0 when rules 3–5 separate the
//! items); items at or above the threshold (0.7, the released store's) are duplicates.
//! Erring towards "distinct" is deliberate: a missed duplicate costs one extra line in a
//! prompt, a false one silently deletes a fact.

use std::collections::BTreeSet;

/// The comparable form of one bank item (computed once per item).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemFeatures {
    features: BTreeSet<String>,
    formula: Vec<String>,
    /// Odd number of negations.
    negated: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Number(String),
    Op(&'static str),
}

impl Token {
    fn text(&self) -> &str {
        match self {
            Token::Word(w) | Token::Number(w) => w,
            Token::Op(o) => o,
        }
    }

    fn is_math(&self) -> bool {
        matches!(self, Token::Number(_) | Token::Op(_))
    }
}

/// Word pairs of opposite meaning that differ in nothing else a token can see.
const OPPOSITES: &[(&str, &str)] = &[
    ("maximum", "minimum"),
    ("max", "min"),
    ("largest", "smallest"),
    ("greatest", "least"),
    ("increasing", "decreasing"),
    ("sum", "product"),
    ("even", "odd"),
    ("positive", "negative"),
    ("upper", "lower"),
    ("first", "last"),
    ("left", "right"),
    ("inside", "outside"),
    ("necessary", "sufficient"),
    ("convex", "concave"),
    ("rational", "irrational"),
    ("prime", "composite"),
    ("injective", "surjective"),
    ("finite", "infinite"),
    ("true", "false"),
    ("always", "sometimes"),
    ("exists", "unique"),
];

const NEGATIONS: &[&str] = &[
    "not", "no", "never", "non", "neither", "nor", "without", "none", "cannot",
];

/// Words that carry no content for de-duplication (negations are not among them).
const FUNCTION_WORDS: &[&str] = &[
    "an", "the", "of", "on", "in", "at", "by", "for", "to", "into", "is", "are", "be", "was",
    "were", "it", "its", "this", "that", "and", "with", "as", "from", "then", "so", "we", "use",
    "using", "via", "apply", "applying",
];

/// Whether the token at `i` is a function word. `a` counts only as an article (before a
/// word); next to a number or an operator it is a variable.
fn is_function_word(tokens: &[Token], i: usize) -> bool {
    match &tokens[i] {
        Token::Word(w) if w == "a" => matches!(tokens.get(i + 1), Some(Token::Word(_))),
        Token::Word(w) => FUNCTION_WORDS.contains(&w.as_str()),
        _ => false,
    }
}

/// `cases` → `case`, `parities` → `parity`; short words and `-ss`/`-us`/`-is` endings
/// stay as they are.
fn singular(word: String) -> String {
    if word.chars().count() <= 3 {
        return word;
    }
    if let Some(stem) = word.strip_suffix("ies") {
        return format!("{stem}y");
    }
    if word.ends_with('s')
        && !(word.ends_with("ss") || word.ends_with("us") || word.ends_with("is"))
    {
        let mut w = word;
        w.pop();
        return w;
    }
    word
}

/// LaTeX commands that are operators or relations.
fn latex_op(name: &str) -> Option<&'static str> {
    Some(match name {
        "le" | "leq" | "leqslant" => "<=",
        "ge" | "geq" | "geqslant" => ">=",
        "ne" | "neq" => "!=",
        "lt" => "<",
        "gt" => ">",
        "cdot" | "times" | "ast" => "*",
        "div" => "/",
        "pm" => "±",
        "mp" => "∓",
        "equiv" => "≡",
        "approx" => "≈",
        "mid" => "|",
        "in" => "∈",
        "notin" => "∉",
        "subset" | "subseteq" => "⊆",
        "to" | "rightarrow" => "→",
        _ => return None,
    })
}

/// Single characters that are operators or relations (ASCII pairs such as `<=` are
/// handled by the tokenizer).
fn char_op(c: char) -> Option<&'static str> {
    Some(match c {
        '=' => "=",
        '+' => "+",
        '-' | '−' | '–' => "-",
        '*' | '×' | '·' => "*",
        '/' | '÷' => "/",
        '^' => "^",
        '<' => "<",
        '>' => ">",
        '≤' => "<=",
        '≥' => ">=",
        '≠' => "!=",
        '±' => "±",
        '≡' => "≡",
        '≈' => "≈",
        '|' => "|",
        '∈' => "∈",
        '∉' => "∉",
        '⊆' => "⊆",
        '→' => "→",
        _ => return None,
    })
}

/// Symbols that LaTeX spells as a command word (`∠` is `\angle`, `π` is `\pi`): the
/// tokens that command gives, so both spellings of one fact read alike.
fn symbol_words(c: char) -> Option<&'static [&'static str]> {
    Some(match c {
        '∠' => &["angle"],
        '△' => &["triangle"],
        '√' => &["sqrt"],
        '∞' => &["infty"],
        '⊥' => &["perp"],
        '∥' => &["parallel"],
        '∑' => &["sum"],
        '∏' => &["prod"],
        '∀' => &["forall"],
        '∃' => &["exists"],
        '⌊' => &["lfloor"],
        '⌋' => &["rfloor"],
        '⌈' => &["lceil"],
        '⌉' => &["rceil"],
        'π' => &["pi"],
        'α' => &["alpha"],
        'β' => &["beta"],
        'γ' => &["gamma"],
        'δ' => &["delta"],
        'ε' => &["epsilon"],
        'θ' => &["theta"],
        'λ' => &["lambda"],
        'μ' => &["mu"],
        'σ' => &["sigma"],
        'φ' => &["phi"],
        'ω' => &["omega"],
        'Δ' => &["delta"],
        _ => return None,
    })
}

/// Words that are spelled-out relations.
fn word_op(word: &str) -> Option<&'static str> {
    Some(match word {
        "equals" | "equal" => "=",
        _ => return None,
    })
}

fn tokenize(text: &str) -> Vec<Token> {
    let chars: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' {
            let start = i + 1;
            let mut end = start;
            while end < chars.len() && chars[end].is_ascii_alphabetic() {
                end += 1;
            }
            let name: String = chars[start..end].iter().collect();
            if matches!(name.as_str(), "frac" | "dfrac" | "tfrac")
                && let Some((numerator, denominator, after)) = two_groups(&chars, end)
            {
                // `\frac{a}{b}` is `a/b`.
                let inner = |range: std::ops::Range<usize>| {
                    tokenize(&chars[range].iter().collect::<String>())
                };
                tokens.extend(inner(numerator));
                tokens.push(Token::Op("/"));
                tokens.extend(inner(denominator));
                i = after;
                continue;
            }
            if let Some(op) = latex_op(&name) {
                tokens.push(Token::Op(op));
            } else if matches!(name.as_str(), "pmod" | "bmod" | "mod") {
                tokens.push(Token::Word("mod".into()));
            } else if !name.is_empty() {
                tokens.push(Token::Word(name.to_lowercase()));
            }
            i = end.max(i + 1);
            continue;
        }
        if c.is_ascii_digit() || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_digit()
                    || (chars[i] == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)))
            {
                i += 1;
            }
            tokens.push(Token::Number(chars[start..i].iter().collect()));
            continue;
        }
        if let Some(words) = symbol_words(c) {
            tokens.extend(words.iter().map(|w| Token::Word((*w).to_string())));
            i += 1;
            continue;
        }
        if c == '°' {
            // `90°` is `90^\circ`.
            tokens.push(Token::Op("^"));
            tokens.push(Token::Word("circ".into()));
            i += 1;
            continue;
        }
        if c.is_alphabetic() {
            i = word(&chars, i, &mut tokens);
            continue;
        }
        let pair: String = chars[i..(i + 2).min(chars.len())].iter().collect();
        let two = match pair.as_str() {
            "<=" => Some("<="),
            ">=" => Some(">="),
            "!=" => Some("!="),
            "==" => Some("="),
            "=>" => Some("⇒"),
            _ => None,
        };
        if let Some(op) = two {
            tokens.push(Token::Op(op));
            i += 2;
            continue;
        }
        if let Some(op) = char_op(c) {
            tokens.push(Token::Op(op));
        }
        i += 1;
    }
    tokens
}

/// The two brace groups `{…}{…}` starting at `chars[i]` (spaces allowed before each):
/// their inner ranges and the index after the second; `None` if they are not there or not
/// closed.
fn two_groups(
    chars: &[char],
    i: usize,
) -> Option<(std::ops::Range<usize>, std::ops::Range<usize>, usize)> {
    let group = |mut i: usize| -> Option<(std::ops::Range<usize>, usize)> {
        while chars.get(i).is_some_and(|c| c.is_whitespace()) {
            i += 1;
        }
        if chars.get(i) != Some(&'{') {
            return None;
        }
        let mut depth = 0usize;
        for (j, c) in chars.iter().enumerate().skip(i) {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        return Some((i + 1..j, j + 1));
                    }
                }
                _ => {}
            }
        }
        None
    };
    let (first, after_first) = group(i)?;
    let (second, after) = group(after_first)?;
    Some((first, second, after))
}

/// Reads the word starting at `chars[i]` (letters, inner apostrophes, hyphens between
/// words of two or more letters); returns the index after it.
fn word(chars: &[char], mut i: usize, tokens: &mut Vec<Token>) -> usize {
    let mut w = String::new();
    loop {
        let start = i;
        while i < chars.len()
            && (chars[i].is_alphabetic()
                || (matches!(chars[i], '\'' | '’')
                    && chars.get(i + 1).is_some_and(|c| c.is_alphabetic())))
        {
            i += 1;
        }
        let part: String = chars[start..i].iter().collect::<String>().to_lowercase();
        w.push_str(&part);
        // `AM-GM`, `non-negative`: one word. `a-b` (single letters) is a subtraction.
        let joins = part.chars().count() >= 2
            && chars.get(i).is_some_and(|c| matches!(c, '-' | '–' | '‐'))
            && chars.get(i + 1).is_some_and(|c| c.is_alphabetic())
            && chars
                .get(i + 2)
                .is_some_and(|c| c.is_alphabetic() || *c == '-');
        if !joins {
            break;
        }
        i += 1;
    }
    let w = w.replace('’', "'");
    if let Some(base) = w.strip_suffix("n't") {
        let base = match base {
            "ca" => "can",
            "wo" => "will",
            other => other,
        };
        if !base.is_empty() {
            tokens.push(Token::Word(base.to_string()));
        }
        tokens.push(Token::Word("not".into()));
    } else if w == "cannot" {
        tokens.push(Token::Word("can".into()));
        tokens.push(Token::Word("not".into()));
    } else if let Some(op) = word_op(&w) {
        tokens.push(Token::Op(op));
    } else if w == "modulo" {
        tokens.push(Token::Word("mod".into()));
    } else {
        // Possessives and other apostrophes: `Cauchy's` → `cauchy`.
        let w = w.strip_suffix("'s").unwrap_or(&w).replace('\'', "");
        tokens.push(Token::Word(singular(w)));
    }
    i
}

impl ItemFeatures {
    /// The features of `text` (a bank item body, prefix already removed).
    pub fn of(text: &str) -> Self {
        let all = tokenize(text);
        let tokens: Vec<Token> = (0..all.len())
            .filter(|&i| !is_function_word(&all, i))
            .map(|i| all[i].clone())
            .collect();
        let mut features: BTreeSet<String> = tokens.iter().map(|t| t.text().to_string()).collect();
        for pair in tokens.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            let negation = matches!(a, Token::Word(w) if NEGATIONS.contains(&w.as_str()));
            if a.is_math() || b.is_math() || negation {
                features.insert(format!("{} {}", a.text(), b.text()));
            }
        }
        let formula = tokens
            .iter()
            .filter(|t| t.is_math())
            .map(|t| t.text().to_string())
            .collect();
        let negations = tokens
            .iter()
            .filter(|t| matches!(t, Token::Word(w) if NEGATIONS.contains(&w.as_str())))
            .count();
        Self {
            features,
            formula,
            negated: negations % 2 == 1,
        }
    }

    fn has(&self, word: &str) -> bool {
        self.features.contains(word)
    }

    /// Rules 3–5 of the module documentation: whether the items cannot be duplicates.
    fn contradicts(&self, other: &Self) -> bool {
        let formulas_differ =
            !self.formula.is_empty() && !other.formula.is_empty() && self.formula != other.formula;
        let swapped = |a: &Self, b: &Self| {
            OPPOSITES.iter().any(|(x, y)| {
                (a.has(x) && !a.has(y) && b.has(y) && !b.has(x))
                    || (a.has(y) && !a.has(x) && b.has(x) && !b.has(y))
            })
        };
        formulas_differ || self.negated != other.negated || swapped(self, other)
    }

    /// Similarity in [0, 1] (see the module documentation). Two items without any
    /// feature are identical (1.0).
    pub fn similarity(&self, other: &Self) -> f64 {
        if self.contradicts(other) {
            return 0.0;
        }
        let (a, b) = (&self.features, &other.features);
        if a.is_empty() && b.is_empty() {
            return 1.0;
        }
        let inter = a.intersection(b).count();
        let union = a.len() + b.len() - inter;
        inter as f64 / union as f64
    }
}

/// One spelling of `text` for a sentence-embedding model: the tokens of the similarity
/// (LaTeX and Unicode folded into one form, lower case, brackets and punctuation gone,
/// function words kept so the sentence still reads), separated by spaces. An embedding
/// model scores `\angle ABC \le 90^\circ` and `∠ABC ≤ 90°` as different texts; their
/// canonical forms are one text.
pub fn canonical(text: &str) -> String {
    let tokens = tokenize(text);
    let mut out = String::with_capacity(text.len());
    for t in &tokens {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(t.text());
    }
    out
}

/// Cosine similarity of two vectors; 0 when either is all zeros (such a vector says
/// nothing about its text, so it duplicates nothing). Summed in `f64` in index order: the
/// same vectors always give the same value, so a resumed run decides the same.
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let (mut dot, mut aa, mut bb) = (0.0f64, 0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (f64::from(*x), f64::from(*y));
        dot += x * y;
        aa += x * x;
        bb += y * y;
    }
    if aa == 0.0 || bb == 0.0 {
        return 0.0;
    }
    dot / (aa.sqrt() * bb.sqrt())
}

/// Why [`DuplicateRule`] called two items duplicates, with the value that decided.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Match {
    /// Lexical similarity at or above the rule's threshold.
    Lexical(f64),
    /// Cosine of the canonical spellings' embeddings at or above the rule's threshold
    /// (the lexical similarity was below its own).
    Meaning(f64),
}

impl Match {
    /// Ranks matches: any lexical one above any meaning one, then by value.
    fn rank(self) -> (bool, f64) {
        match self {
            Match::Lexical(s) => (true, s),
            Match::Meaning(c) => (false, c),
        }
    }

    /// Whether `self` is a stronger match than `other`.
    pub fn beats(self, other: Self) -> bool {
        let ((a_lex, a), (b_lex, b)) = (self.rank(), other.rank());
        (a_lex, a).partial_cmp(&(b_lex, b)) == Some(std::cmp::Ordering::Greater)
    }
}

/// When two items are duplicates: the lexical similarity, or with an embedding endpoint
/// also the cosine of their canonical forms' embeddings, and never when a number, a
/// relation, a sign, a negation or an opposite word tells them apart.
///
/// A plain embedding threshold merges facts that differ in one number or sign (a small
/// sentence model scores such twins as high as paraphrases); the lexical rule alone misses
/// paraphrases in other words. The conflict check is the part that reads mathematics, the
/// embedding the part that reads wording.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DuplicateRule {
    /// Lexical similarity at or above which items are duplicates.
    pub lexical: f64,
    /// Cosine at or above which items that do not conflict are duplicates.
    pub cosine: f64,
}

impl DuplicateRule {
    /// Whether `a` and `b` (with the cosine of their canonical embeddings, if there is an
    /// embedding endpoint) are duplicates.
    pub fn duplicates(&self, a: &ItemFeatures, b: &ItemFeatures, cosine: Option<f64>) -> bool {
        self.judge(a, b, cosine).is_some()
    }

    /// [`DuplicateRule::duplicates`] with the reason: `None` when the items are distinct.
    pub fn judge(&self, a: &ItemFeatures, b: &ItemFeatures, cosine: Option<f64>) -> Option<Match> {
        if a.contradicts(b) {
            return None;
        }
        let similarity = a.similarity(b);
        if similarity >= self.lexical {
            return Some(Match::Lexical(similarity));
        }
        cosine.filter(|c| *c >= self.cosine).map(Match::Meaning)
    }

    /// The lexical rule alone at `threshold` (no embedding endpoint).
    pub fn lexical(threshold: f64) -> Self {
        Self {
            lexical: threshold,
            cosine: f64::INFINITY,
        }
    }
}

/// Similarity of two item bodies.
#[cfg(test)]
pub fn similarity(a: &str, b: &str) -> f64 {
    ItemFeatures::of(a).similarity(&ItemFeatures::of(b))
}

#[cfg(test)]
mod tests;
