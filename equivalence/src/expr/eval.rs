//! Evaluation of parsed expressions: exact rational values where the computation is
//! rational and bounded, floating-point values otherwise, and the variables used.

use std::collections::{BTreeMap, BTreeSet};

use num_bigint::BigInt;
use num_rational::BigRational;
use num_traits::{One, Signed, ToPrimitive, Zero};

use super::{Expr, Func, MAX_EXACT_BITS, MAX_EXACT_EXPONENT, MAX_EXACT_FACTORIAL};

impl Expr {
    fn children(&self) -> Vec<&Expr> {
        match self {
            Expr::Num(_) | Expr::Var(_) | Expr::Pi | Expr::E => vec![],
            Expr::Neg(a) | Expr::Call(_, a) | Expr::Factorial(a) | Expr::DoubleFactorial(a) => {
                vec![a]
            }
            Expr::Add(a, b)
            | Expr::Sub(a, b)
            | Expr::Mul(a, b)
            | Expr::Div(a, b)
            | Expr::Pow(a, b)
            | Expr::Root(a, b)
            | Expr::Log(a, b)
            | Expr::Binom(a, b) => vec![a, b],
        }
    }

    /// True for a lone variable (`x`, `a_1`).
    pub(crate) fn is_variable(&self) -> bool {
        matches!(self, Expr::Var(_))
    }

    /// The variables the expression uses.
    pub(crate) fn variables(&self) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        self.collect_variables(&mut out);
        out
    }

    fn collect_variables(&self, out: &mut BTreeSet<String>) {
        if let Expr::Var(name) = self {
            out.insert(name.clone());
        }
        for child in self.children() {
            child.collect_variables(out);
        }
    }

    /// The same expression with variables renamed (`map`: old name → new name); names
    /// not in `map` stay. Used to compare `f(t) = t^2` with `f(x) = x^2`.
    pub(crate) fn renamed(&self, map: &BTreeMap<String, String>) -> Expr {
        let r = |e: &Expr| Box::new(e.renamed(map));
        match self {
            Expr::Var(name) => Expr::Var(map.get(name).cloned().unwrap_or_else(|| name.clone())),
            Expr::Num(_) | Expr::Pi | Expr::E => self.clone(),
            Expr::Neg(a) => Expr::Neg(r(a)),
            Expr::Call(f, a) => Expr::Call(*f, r(a)),
            Expr::Factorial(a) => Expr::Factorial(r(a)),
            Expr::DoubleFactorial(a) => Expr::DoubleFactorial(r(a)),
            Expr::Add(a, b) => Expr::Add(r(a), r(b)),
            Expr::Sub(a, b) => Expr::Sub(r(a), r(b)),
            Expr::Mul(a, b) => Expr::Mul(r(a), r(b)),
            Expr::Div(a, b) => Expr::Div(r(a), r(b)),
            Expr::Pow(a, b) => Expr::Pow(r(a), r(b)),
            Expr::Root(a, b) => Expr::Root(r(a), r(b)),
            Expr::Log(a, b) => Expr::Log(r(a), r(b)),
            Expr::Binom(a, b) => Expr::Binom(r(a), r(b)),
        }
    }

    /// True when the value depends on integrality (floor, ceiling, factorial, binomial):
    /// such expressions may agree on integers only.
    pub(crate) fn is_integer_sensitive(&self) -> bool {
        matches!(
            self,
            Expr::Call(Func::Floor | Func::Ceil, _)
                | Expr::Factorial(_)
                | Expr::DoubleFactorial(_)
                | Expr::Binom(..)
        ) || self.children().iter().any(|c| c.is_integer_sensitive())
    }

    /// The exact value, when it is a bounded rational computation without variables.
    pub(crate) fn exact(&self) -> Option<BigRational> {
        let value = match self {
            Expr::Num(n) => n.clone(),
            Expr::Neg(a) => -a.exact()?,
            Expr::Add(a, b) => a.exact()? + b.exact()?,
            Expr::Sub(a, b) => a.exact()? - b.exact()?,
            Expr::Mul(a, b) => a.exact()? * b.exact()?,
            Expr::Div(a, b) => {
                let d = b.exact()?;
                if d.is_zero() {
                    return None;
                }
                a.exact()? / d
            }
            Expr::Pow(a, b) => exact_power(a.exact()?, b.exact()?)?,
            Expr::Factorial(a) => {
                let n = small_natural(&a.exact()?)?;
                BigRational::from_integer((1..=n).map(BigInt::from).product())
            }
            Expr::DoubleFactorial(a) => {
                let n = a.exact()?;
                if n == -BigRational::one() {
                    BigRational::one()
                } else {
                    let n = small_natural(&n)?;
                    let product = (1..=n).rev().step_by(2).map(BigInt::from).product();
                    BigRational::from_integer(product)
                }
            }
            Expr::Binom(a, b) => {
                let (n, k) = (small_natural(&a.exact()?)?, small_natural(&b.exact()?)?);
                if k > n {
                    BigRational::zero()
                } else {
                    let mut c = BigInt::one();
                    for i in 0..k {
                        c = c * BigInt::from(n - i) / BigInt::from(i + 1);
                    }
                    BigRational::from_integer(c)
                }
            }
            Expr::Call(Func::Floor, a) => {
                BigRational::from_integer(a.exact()?.floor().to_integer())
            }
            Expr::Call(Func::Ceil, a) => BigRational::from_integer(a.exact()?.ceil().to_integer()),
            _ => return None,
        };
        let bits = value.numer().bits() + value.denom().bits();
        (bits <= MAX_EXACT_BITS).then_some(value)
    }

    /// The floating-point value with `vars` assigned; NaN or infinite outside the domain.
    pub(crate) fn eval(&self, vars: &BTreeMap<String, f64>) -> f64 {
        match self {
            Expr::Num(n) => n.to_f64().unwrap_or(f64::NAN),
            Expr::Var(name) => vars.get(name).copied().unwrap_or(f64::NAN),
            Expr::Pi => std::f64::consts::PI,
            Expr::E => std::f64::consts::E,
            Expr::Neg(a) => -a.eval(vars),
            Expr::Add(a, b) => a.eval(vars) + b.eval(vars),
            Expr::Sub(a, b) => a.eval(vars) - b.eval(vars),
            Expr::Mul(a, b) => a.eval(vars) * b.eval(vars),
            Expr::Div(a, b) => a.eval(vars) / b.eval(vars),
            Expr::Pow(a, b) => a.eval(vars).powf(b.eval(vars)),
            Expr::Root(a, index) => {
                let (x, n) = (a.eval(vars), index.eval(vars));
                let odd = n.fract() == 0.0 && n.rem_euclid(2.0) == 1.0;
                if x < 0.0 && odd {
                    -(-x).powf(1.0 / n)
                } else {
                    x.powf(1.0 / n)
                }
            }
            Expr::Log(a, base) => a.eval(vars).ln() / base.eval(vars).ln(),
            Expr::Call(func, a) => {
                let x = a.eval(vars);
                match func {
                    Func::Ln => x.ln(),
                    Func::Exp => x.exp(),
                    Func::Sin => x.sin(),
                    Func::Cos => x.cos(),
                    Func::Tan => x.tan(),
                    Func::Floor => x.floor(),
                    Func::Ceil => x.ceil(),
                }
            }
            Expr::Factorial(a) => {
                let n = a.eval(vars);
                if n < 0.0 || n.fract() != 0.0 || n > 170.0 {
                    return f64::NAN;
                }
                (1..=n as u32).map(f64::from).product()
            }
            Expr::DoubleFactorial(a) => {
                let n = a.eval(vars);
                if n < -1.0 || n.fract() != 0.0 || n > 300.0 {
                    return f64::NAN;
                }
                let mut product = 1.0;
                let mut k = n;
                while k > 1.0 {
                    product *= k;
                    k -= 2.0;
                }
                product
            }
            Expr::Binom(a, b) => {
                let (n, k) = (a.eval(vars), b.eval(vars));
                if n < 0.0 || k < 0.0 || n.fract() != 0.0 || k.fract() != 0.0 || n > 1e6 {
                    return f64::NAN;
                }
                if k > n {
                    return 0.0;
                }
                (0..k as u32)
                    .map(|i| (n - f64::from(i)) / (f64::from(i) + 1.0))
                    .product()
            }
        }
    }
}

fn small_natural(value: &BigRational) -> Option<u64> {
    if !value.is_integer() || value.is_negative() {
        return None;
    }
    value
        .to_integer()
        .to_u64()
        .filter(|n| *n <= MAX_EXACT_FACTORIAL)
}

fn exact_power(base: BigRational, exponent: BigRational) -> Option<BigRational> {
    if !exponent.is_integer() {
        return None;
    }
    let e = exponent.to_integer().to_i64()?;
    let magnitude = u32::try_from(e.unsigned_abs())
        .ok()
        .filter(|m| *m <= MAX_EXACT_EXPONENT)?;
    let bits = base.numer().bits().max(base.denom().bits());
    if bits.saturating_mul(u64::from(magnitude)) > MAX_EXACT_BITS {
        return None;
    }
    if e < 0 && base.is_zero() {
        return None;
    }
    let value = num_traits::pow(base, magnitude as usize);
    Some(if e < 0 { value.recip() } else { value })
}
