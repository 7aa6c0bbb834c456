//! A small, safe parser and evaluator for answer expressions (`2^{u-2}`, `\frac{n(n+1)}{2}`,
//! `2\sqrt[3]{\frac{196}{13}}`, `\lfloor \log_2 a \rfloor + 1`).
//!
//! Two expressions are compared exactly as rationals when both are built from numbers with
//! `+ - * /`, integer powers, factorials and binomials; otherwise numerically at seeded
//! points (integer and non-integer), with a tight relative tolerance. Parsing is bounded in
//! tokens and nesting depth, so bad input yields `Err`, never a panic or a hang.
//!
//! Conventions (documented in docs/judging.md): `\log` without a base is the natural log;
//! `x^10` (unbraced multi-digit exponent) means `x^{10}` as a plain-text writer intends;
//! adjacent factors multiply (`2n`, `n(n+1)`, so `f(x)` is `f·x`, consistently on both
//! sides); a word of four or more letters, or letters separated by spaces, is prose.

use num_rational::BigRational;

/// Most tokens an expression may have.
const MAX_TOKENS: usize = 1_000;
/// Deepest nesting the parser follows.
const MAX_DEPTH: usize = 48;
/// Largest exponent evaluated exactly.
const MAX_EXACT_EXPONENT: u32 = 65_536;
/// Largest bit size of an exact intermediate result (`2^{2024}`, `2025^{101}` fit).
const MAX_EXACT_BITS: u64 = 65_536;
/// Largest `n` for exact `n!` and `\binom{n}{k}`.
const MAX_EXACT_FACTORIAL: u64 = 500;
/// Relative tolerance of numeric comparison.
const TOLERANCE: f64 = 1e-9;

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Num(String),
    Var(String),
    Pi,
    E,
    Op(char),
    Cmd(&'static str),
}

/// Commands the parser understands, by canonical name.
const COMMANDS: [&str; 16] = [
    "frac", "sqrt", "binom", "lfloor", "rfloor", "lceil", "rceil", "log", "ln", "exp", "sin",
    "cos", "tan", "cdot", "times", "div",
];

/// Greek letters that are plain variables.
const GREEK: [&str; 20] = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "varepsilon",
    "zeta",
    "eta",
    "theta",
    "lambda",
    "mu",
    "nu",
    "xi",
    "rho",
    "sigma",
    "tau",
    "phi",
    "varphi",
    "chi",
    "omega",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Func {
    Ln,
    Exp,
    Sin,
    Cos,
    Tan,
    Floor,
    Ceil,
}

/// A parsed expression.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Expr {
    Num(BigRational),
    Var(String),
    Pi,
    /// Euler's number.
    E,
    Neg(Box<Expr>),
    Add(Box<Expr>, Box<Expr>),
    Sub(Box<Expr>, Box<Expr>),
    Mul(Box<Expr>, Box<Expr>),
    Div(Box<Expr>, Box<Expr>),
    Pow(Box<Expr>, Box<Expr>),
    Root(Box<Expr>, Box<Expr>),
    Log(Box<Expr>, Box<Expr>),
    Call(Func, Box<Expr>),
    Factorial(Box<Expr>),
    /// `n!!`: n(n-2)(n-4)… down to 1 or 2 (`(-1)!! = 0!! = 1`).
    DoubleFactorial(Box<Expr>),
    Binom(Box<Expr>, Box<Expr>),
}

/// Why a string is not a supported expression.
pub(crate) type ParseError = String;

fn tokenize(s: &str) -> Result<Vec<Token>, ParseError> {
    let chars: Vec<char> = s.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    let mut letters_in_row = 0;
    // A space separates symbols (`2^k k!`), but two multi-letter runs separated by a
    // space are words ("is odd").
    let mut word_before_space = false;
    while i < chars.len() {
        if tokens.len() > MAX_TOKENS {
            return Err("expression too long".into());
        }
        let c = chars[i];
        if c.is_whitespace() {
            word_before_space |= letters_in_row >= 2;
            letters_in_row = 0;
            i += 1;
            continue;
        }
        if c.is_ascii_alphabetic() || c == 'π' {
            letters_in_row += 1;
            if letters_in_row >= 4 {
                return Err("prose (a word)".into());
            }
            if letters_in_row == 2 && word_before_space {
                return Err("prose (words separated by spaces)".into());
            }
            if c == 'π' {
                tokens.push(Token::Pi);
                i += 1;
                continue;
            }
            // A lone `e` is Euler's number (`e^{3}`); `e_1` is a variable.
            if c == 'e'
                && !chars
                    .get(i + 1)
                    .is_some_and(|n| *n == '_' || *n == '\'' || n.is_ascii_alphabetic())
                && !(i > 0 && chars[i - 1].is_ascii_alphabetic())
            {
                tokens.push(Token::E);
                i += 1;
                continue;
            }
            let (name, next) = variable_name(&chars, i)?;
            tokens.push(Token::Var(name));
            i = next;
            continue;
        }
        letters_in_row = 0;
        word_before_space = false;
        if c.is_ascii_digit() || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                i += 1;
            }
            // A repeating part `0.1\overline{6}` belongs to the number.
            let overline: Vec<char> = "\\overline{".chars().collect();
            if chars[i..].starts_with(&overline) {
                let close = chars[i..]
                    .iter()
                    .position(|&c| c == '}')
                    .ok_or("unclosed \\overline")?;
                i += close + 1;
            }
            tokens.push(Token::Num(chars[start..i].iter().collect()));
            continue;
        }
        if c == '\\' {
            let start = i + 1;
            let mut end = start;
            while end < chars.len() && chars[end].is_ascii_alphabetic() {
                end += 1;
            }
            let name: String = chars[start..end].iter().collect();
            i = end;
            if name == "pi" {
                tokens.push(Token::Pi);
            } else if let Some(cmd) = COMMANDS.iter().find(|c| **c == name) {
                tokens.push(Token::Cmd(cmd));
            } else if GREEK.contains(&name.as_str()) {
                let (suffix, next) = subscript(&chars, i)?;
                tokens.push(Token::Var(format!("\\{name}{suffix}")));
                i = next;
            } else {
                return Err(format!("unsupported command \\{name}"));
            }
            continue;
        }
        match c {
            '+' | '-' | '/' | '^' | '!' | '(' | ')' | '[' | ']' | '{' | '}' | '_' => {
                tokens.push(Token::Op(c))
            }
            '*' if chars.get(i + 1) == Some(&'*') => {
                tokens.push(Token::Op('^'));
                i += 1;
            }
            '*' | '·' | '×' => tokens.push(Token::Op('*')),
            '−' => tokens.push(Token::Op('-')),
            _ => return Err(format!("unsupported character {c:?}")),
        }
        i += 1;
    }
    Ok(tokens)
}

/// A one-letter variable with its subscript and primes (`a_1`, `x_{ij}`, `f'`).
fn variable_name(chars: &[char], start: usize) -> Result<(String, usize), ParseError> {
    let (suffix, next) = subscript(chars, start + 1)?;
    Ok((format!("{}{suffix}", chars[start]), next))
}

fn subscript(chars: &[char], mut i: usize) -> Result<(String, usize), ParseError> {
    let mut suffix = String::new();
    if chars.get(i) == Some(&'_') {
        match chars.get(i + 1) {
            Some('{') => {
                let close = chars[i + 1..]
                    .iter()
                    .position(|&c| c == '}')
                    .ok_or("unclosed subscript")?;
                let inner: String = chars[i + 2..i + 1 + close]
                    .iter()
                    .filter(|c| !c.is_whitespace())
                    .collect();
                suffix = format!("_{inner}");
                i += close + 2;
            }
            Some(c) if c.is_ascii_alphanumeric() => {
                suffix = format!("_{c}");
                i += 2;
            }
            _ => return Err("bad subscript".into()),
        }
    }
    while chars.get(i) == Some(&'\'') {
        suffix.push('\'');
        i += 1;
    }
    Ok((suffix, i))
}

/// Parses a normalized answer as an expression.
pub(crate) fn parse(s: &str) -> Result<Expr, ParseError> {
    let tokens = tokenize(s)?;
    if tokens.is_empty() {
        return Err("empty".into());
    }
    let mut parser = Parser {
        tokens,
        pos: 0,
        depth: 0,
    };
    let expr = parser.sum()?;
    match parser.tokens.get(parser.pos) {
        None => Ok(expr),
        Some(token) => Err(format!("unexpected {token:?}")),
    }
}

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
    depth: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }

    fn next(&mut self) -> Option<Token> {
        let token = self.tokens.get(self.pos).cloned();
        self.pos += 1;
        token
    }

    fn eat(&mut self, op: char) -> bool {
        if self.peek() == Some(&Token::Op(op)) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, op: char) -> Result<(), ParseError> {
        if self.eat(op) {
            Ok(())
        } else {
            Err(format!("expected {op:?}"))
        }
    }

    fn enter(&mut self) -> Result<(), ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            Err("nested too deeply".into())
        } else {
            Ok(())
        }
    }

    fn sum(&mut self) -> Result<Expr, ParseError> {
        self.enter()?;
        let mut left = self.product()?;
        loop {
            if self.eat('+') {
                left = Expr::Add(Box::new(left), Box::new(self.product()?));
            } else if self.eat('-') {
                left = Expr::Sub(Box::new(left), Box::new(self.product()?));
            } else {
                break;
            }
        }
        self.depth -= 1;
        Ok(left)
    }

    fn product(&mut self) -> Result<Expr, ParseError> {
        let mut left = self.signed()?;
        loop {
            match self.peek() {
                Some(Token::Op('*') | Token::Cmd("cdot" | "times")) => {
                    self.pos += 1;
                    left = Expr::Mul(Box::new(left), Box::new(self.signed()?));
                }
                Some(Token::Op('/') | Token::Cmd("div")) => {
                    self.pos += 1;
                    left = Expr::Div(Box::new(left), Box::new(self.signed()?));
                }
                Some(token) if starts_operand(token) => {
                    left = Expr::Mul(Box::new(left), Box::new(self.power()?));
                }
                _ => return Ok(left),
            }
        }
    }

    fn signed(&mut self) -> Result<Expr, ParseError> {
        self.enter()?;
        let expr = if self.eat('-') {
            Expr::Neg(Box::new(self.signed()?))
        } else if self.eat('+') {
            self.signed()?
        } else {
            self.power()?
        };
        self.depth -= 1;
        Ok(expr)
    }

    fn power(&mut self) -> Result<Expr, ParseError> {
        let base = self.postfix()?;
        if self.eat('^') {
            let exponent = if self.peek() == Some(&Token::Op('{')) {
                self.atom()?
            } else {
                self.signed()?
            };
            return Ok(Expr::Pow(Box::new(base), Box::new(exponent)));
        }
        Ok(base)
    }

    fn postfix(&mut self) -> Result<Expr, ParseError> {
        let mut expr = self.atom()?;
        while self.eat('!') {
            // `n!!` is the double factorial, as in LaTeX answers; `(n!)!` needs parentheses.
            expr = if self.eat('!') {
                Expr::DoubleFactorial(Box::new(expr))
            } else {
                Expr::Factorial(Box::new(expr))
            };
        }
        Ok(expr)
    }

    fn group(&mut self, open: char, close: char) -> Result<Expr, ParseError> {
        let inner = self.sum()?;
        self.expect(close)
            .map_err(|_| format!("{open:?} not closed by {close:?}"))?;
        Ok(inner)
    }

    /// A command argument: a `{…}` group or a single character (`\frac12`).
    fn argument(&mut self) -> Result<Expr, ParseError> {
        if self.eat('{') {
            return self.group('{', '}');
        }
        if let Some(Token::Num(digits)) = self.peek().cloned()
            && digits.len() > 1
            && digits.is_char_boundary(1)
        {
            self.tokens[self.pos] = Token::Num(digits[1..].to_owned());
            return number(&digits[..1]);
        }
        self.atom()
    }

    fn atom(&mut self) -> Result<Expr, ParseError> {
        self.enter()?;
        let token = self.next().ok_or("unexpected end")?;
        let expr = match token {
            Token::Num(digits) => number(&digits)?,
            Token::Var(name) => Expr::Var(name),
            Token::Pi => Expr::Pi,
            Token::E => Expr::E,
            Token::Op('(') => self.group('(', ')')?,
            Token::Op('[') => self.group('[', ']')?,
            Token::Op('{') => self.group('{', '}')?,
            Token::Cmd("frac") => Expr::Div(Box::new(self.argument()?), Box::new(self.argument()?)),
            Token::Cmd("binom") => {
                Expr::Binom(Box::new(self.argument()?), Box::new(self.argument()?))
            }
            Token::Cmd("sqrt") => {
                let index = if self.eat('[') {
                    self.group('[', ']')?
                } else {
                    Expr::Num(BigRational::from_integer(2.into()))
                };
                Expr::Root(Box::new(self.argument()?), Box::new(index))
            }
            Token::Cmd("lfloor") => self.bracket_call(Func::Floor, "rfloor")?,
            Token::Cmd("lceil") => self.bracket_call(Func::Ceil, "rceil")?,
            Token::Cmd("log") => {
                let base = if self.eat('_') {
                    Some(self.argument()?)
                } else {
                    None
                };
                let argument = self.power()?;
                match base {
                    Some(base) => Expr::Log(Box::new(argument), Box::new(base)),
                    None => Expr::Call(Func::Ln, Box::new(argument)),
                }
            }
            Token::Cmd(name @ ("ln" | "exp" | "sin" | "cos" | "tan")) => {
                let func = match name {
                    "ln" => Func::Ln,
                    "exp" => Func::Exp,
                    "sin" => Func::Sin,
                    "cos" => Func::Cos,
                    _ => Func::Tan,
                };
                Expr::Call(func, Box::new(self.power()?))
            }
            other => return Err(format!("unexpected {other:?}")),
        };
        self.depth -= 1;
        Ok(expr)
    }

    fn bracket_call(&mut self, func: Func, close: &'static str) -> Result<Expr, ParseError> {
        let inner = self.sum()?;
        if self.next() != Some(Token::Cmd(close)) {
            return Err(format!("missing \\{close}"));
        }
        Ok(Expr::Call(func, Box::new(inner)))
    }
}

fn starts_operand(token: &Token) -> bool {
    match token {
        Token::Num(_) | Token::Var(_) | Token::Pi | Token::E => true,
        Token::Op(c) => matches!(c, '(' | '[' | '{'),
        Token::Cmd(c) => !matches!(*c, "cdot" | "times" | "div" | "rfloor" | "rceil"),
    }
}

fn number(digits: &str) -> Result<Expr, ParseError> {
    super::numbers::parse_rational(digits)
        .map(Expr::Num)
        .ok_or_else(|| format!("bad number {digits}"))
}

/// Values close enough to be the same number.
pub(crate) fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= TOLERANCE * 1f64.max(a.abs()).max(b.abs())
}

mod eval;

#[cfg(test)]
mod tests;
