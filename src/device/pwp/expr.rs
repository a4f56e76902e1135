//! Tables for user expressions: `hlosim lut build --expr 'x*tanh(log(1+exp(x)))'`.
//!
//! The expression is parsed and compiled once with the `exmex` crate and evaluated in f64. The
//! variable is `x`; available functions are exmex's float operators (`sin cos tan asin acos atan
//! sinh cosh tanh asinh acosh atanh exp ln log log2 log10 sqrt cbrt abs signum floor ceil round
//! trunc fract`, binary `atan2 min max` as `min(a, b)`, constants `PI E TAU`) plus `erf`, `erfc`,
//! `sigmoid`, `softplus`, `relu`, `gelu`, `silu` and `pow(a, b)` (same as `a^b`). `log` is the
//! natural logarithm. The common transcendental functions are routed through `libm` so a table
//! built from an expression is the same on every platform.

use super::fit::{build_table, FitSettings, FitSpec};
use super::functions;
use super::table::{Symmetry, Table};
use super::PwpError;
use crate::io::excerpt;
use exmex::prelude::*;
use exmex::{BinOp, FloatOpsFactory, MakeOperators, MatchLiteral, Operator};

/// The longest expression accepted, in bytes.
pub const MAX_EXPR_CHARS: usize = 4096;
/// The most operands (numbers, `x`, named constants) an expression may have. Building a
/// table evaluates the expression a few million times, in time proportional to its size
/// (about 10 ms per operand in a release build: 6,000 operands took 81 s); at this bound a
/// build stays within a few seconds, while real activations need a few dozen.
pub const MAX_EXPR_OPERANDS: usize = 256;
/// The deepest nesting of parentheses accepted (the parser recurses on them).
pub const MAX_EXPR_DEPTH: usize = 64;

/// Number literals: digits with at most one dot and an optional exponent (`2.5e-3`, `1E6`);
/// exmex's default matcher has no exponent.
#[derive(Clone, Debug, Default)]
pub struct SciNumberMatcher;

impl MatchLiteral for SciNumberMatcher {
    fn is_literal(text: &str) -> Option<&str> {
        let b = text.as_bytes();
        let (mut i, mut dots, mut digits) = (0, 0, 0);
        while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.') {
            if b[i] == b'.' {
                dots += 1;
            } else {
                digits += 1;
            }
            i += 1;
        }
        if digits == 0 || dots > 1 {
            return None;
        }
        if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
            let mut j = i + 1;
            if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
                j += 1;
            }
            let start = j;
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            if j > start {
                i = j;
            }
        }
        Some(&text[..i])
    }
}

/// exmex operator set: the default float operators with libm-backed transcendental functions
/// and the extra activation functions listed in the module docs.
#[derive(Clone, Debug)]
pub struct PwpOps;

fn relu(x: f64) -> f64 {
    functions::relu(x)
}

impl MakeOperators<f64> for PwpOps {
    fn make<'a>() -> Vec<Operator<'a, f64>> {
        let ours: Vec<Operator<'a, f64>> = vec![
            Operator::make_unary("exp", libm::exp),
            Operator::make_unary("ln", libm::log),
            Operator::make_unary("log", libm::log),
            Operator::make_unary("log2", libm::log2),
            Operator::make_unary("log10", libm::log10),
            Operator::make_unary("tanh", libm::tanh),
            Operator::make_unary("sinh", libm::sinh),
            Operator::make_unary("cosh", libm::cosh),
            Operator::make_unary("sin", libm::sin),
            Operator::make_unary("cos", libm::cos),
            Operator::make_unary("tan", libm::tan),
            Operator::make_unary("atan", libm::atan),
            Operator::make_unary("sqrt", libm::sqrt),
            Operator::make_unary("cbrt", libm::cbrt),
            Operator::make_unary("erf", libm::erf),
            Operator::make_unary("erfc", libm::erfc),
            Operator::make_unary("sigmoid", functions::sigmoid),
            Operator::make_unary("softplus", functions::softplus),
            Operator::make_unary("relu", relu),
            Operator::make_unary("gelu", functions::gelu),
            Operator::make_unary("silu", functions::silu),
            Operator::make_bin(
                "pow",
                BinOp {
                    apply: libm::pow,
                    prio: 0,
                    is_commutative: false,
                },
            ),
            Operator::make_bin(
                "^",
                BinOp {
                    apply: libm::pow,
                    prio: 4,
                    is_commutative: false,
                },
            ),
        ];
        let mut ops: Vec<Operator<'a, f64>> = FloatOpsFactory::<f64>::make()
            .into_iter()
            .filter(|o| !ours.iter().any(|m| m.repr() == o.repr()))
            .collect();
        ops.extend(ours);
        ops
    }
}

/// A compiled user expression f(x), evaluated in f64. Shareable across threads.
pub struct UserFunction {
    source: String,
    expr: FlatEx<f64, PwpOps, SciNumberMatcher>,
    has_x: bool,
}

impl std::fmt::Debug for UserFunction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "UserFunction({:?})", self.source)
    }
}

impl UserFunction {
    /// Parse and compile `src`. Errors name the position (0-based byte offset) where the
    /// checker can tell it, e.g. an unknown name or an unbalanced parenthesis.
    pub fn parse(src: &str) -> Result<UserFunction, PwpError> {
        precheck(src)?;
        let expr = FlatEx::<f64, PwpOps, SciNumberMatcher>::parse(src)
            .map_err(|e| PwpError::Expr(format!("{:?}: {}", excerpt(src), excerpt(e.msg()))))?;
        let names = expr.var_names().to_vec();
        let has_x = match names.as_slice() {
            [] => false,
            [x] if x == "x" => true,
            other => {
                let bad: Vec<&String> = other.iter().filter(|n| n.as_str() != "x").collect();
                let bad: Vec<String> = bad.iter().take(5).map(|n| excerpt(n)).collect();
                return Err(PwpError::Expr(format!(
                    "{:?}: unknown name(s) {bad:?}: the only variable is x",
                    excerpt(src)
                )));
            }
        };
        Ok(UserFunction {
            source: src.to_string(),
            expr,
            has_x,
        })
    }

    /// Evaluate at `x` (NaN if the expression cannot be evaluated there).
    pub fn eval(&self, x: f64) -> f64 {
        let r = if self.has_x {
            self.expr.eval(&[x])
        } else {
            self.expr.eval(&[])
        };
        r.unwrap_or(f64::NAN)
    }

    /// The expression text.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The symmetry the function shows on a fixed set of probe points (exact equality of the
    /// f64 values): odd, even, point-symmetric about (0, ½), or none.
    pub fn detect_symmetry(&self) -> Symmetry {
        let probes: Vec<f64> = (-40..=40).map(|i| libm::pow(1.37, i as f64)).collect();
        let all =
            |p: &dyn Fn(f64, f64) -> bool| probes.iter().all(|&x| p(self.eval(x), self.eval(-x)));
        let close = |a: f64, b: f64| a == b || (a - b).abs() <= 1e-15 * a.abs().max(b.abs());
        if all(&|a, b| close(a, -b)) {
            Symmetry::Odd
        } else if all(&|a, b| close(a, b)) {
            Symmetry::Even
        } else if all(&|a, b| close(a, 1.0 - b)) {
            Symmetry::Point
        } else {
            Symmetry::None
        }
    }
}

/// Position-aware checks exmex does not report precisely: unbalanced parentheses and names
/// that are neither an operator nor `x`; and the size bounds ([`MAX_EXPR_CHARS`],
/// [`MAX_EXPR_OPERANDS`], [`MAX_EXPR_DEPTH`]). Messages quote at most an excerpt.
fn precheck(src: &str) -> Result<(), PwpError> {
    if src.trim().is_empty() {
        return Err(PwpError::Expr("empty expression".into()));
    }
    if src.len() > MAX_EXPR_CHARS {
        return Err(PwpError::Expr(format!(
            "{:?}: the expression is {} characters long; at most {MAX_EXPR_CHARS} are allowed",
            excerpt(src),
            src.len()
        )));
    }
    let ops = PwpOps::make();
    let is_op = |name: &str| ops.iter().any(|o| o.repr() == name);
    let bytes = src.as_bytes();
    let (mut operands, mut i) = (0usize, 0usize);
    while i < bytes.len() {
        let start = i;
        let c = bytes[i];
        if c.is_ascii_digit() || c == b'.' {
            operands += 1;
            // The literal, with a possible exponent (`2.5e-3`).
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'.') {
                let exp = bytes[i] == b'e' || bytes[i] == b'E';
                i += 1;
                if exp && i < bytes.len() && (bytes[i] == b'+' || bytes[i] == b'-') {
                    i += 1;
                }
            }
        } else if c.is_ascii_alphabetic() || c == b'_' {
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            let name = &src[start..i];
            // A name followed by '(' is a function; x and constants (PI, E) are operands.
            let next = src[i..].trim_start().as_bytes().first();
            if !(is_op(name) && next == Some(&b'(')) {
                operands += 1;
            }
        } else {
            i += 1;
        }
    }
    if operands > MAX_EXPR_OPERANDS {
        return Err(PwpError::Expr(format!(
            "{:?}: the expression has {operands} operands (numbers, x, constants); at most \
             {MAX_EXPR_OPERANDS} are allowed",
            excerpt(src)
        )));
    }
    let mut depth: Vec<usize> = Vec::new();
    let bytes = src.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i] as char;
        if c == '(' {
            depth.push(i);
            if depth.len() > MAX_EXPR_DEPTH {
                return Err(PwpError::Expr(format!(
                    "{:?}: parentheses nest deeper than {MAX_EXPR_DEPTH} levels at position {i}",
                    excerpt(src)
                )));
            }
        } else if c == ')' && depth.pop().is_none() {
            return Err(PwpError::Expr(format!(
                "{:?}: unmatched ')' at position {i}",
                excerpt(src)
            )));
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < bytes.len()
                && ((bytes[i] as char).is_ascii_alphanumeric() || bytes[i] == b'_')
            {
                i += 1;
            }
            let name = &src[start..i];
            let is_number_exp = start > 0
                && (name.starts_with('e') || name.starts_with('E'))
                && (bytes[start - 1] as char).is_ascii_digit();
            if name != "x" && !is_number_exp && !ops.iter().any(|o| o.repr() == name) {
                return Err(PwpError::Expr(format!(
                    "{:?}: unknown name {:?} at position {start} (the variable is x; functions: {})",
                    excerpt(src),
                    excerpt(name),
                    ops.iter().filter(|o| o.repr().chars().all(|c| c.is_ascii_alphanumeric())).map(|o| o.repr()).collect::<Vec<_>>().join(" ")
                )));
            }
            continue;
        }
        i += 1;
    }
    if let Some(p) = depth.pop() {
        return Err(PwpError::Expr(format!(
            "{:?}: '(' at position {p} is never closed",
            excerpt(src)
        )));
    }
    Ok(())
}

/// Build a table named `name` for the expression `src`. With `settings = None` the builder
/// uses the standard accuracy target, eps_f32 = 2^-16, floor 2^-16, and tries the symmetry the
/// expression shows (see [`UserFunction::detect_symmetry`]) before storing both halves.
pub fn build_expr_table(
    name: &str,
    src: &str,
    settings: Option<FitSettings>,
) -> Result<Table, PwpError> {
    let uf = UserFunction::parse(src)?;
    let settings = settings.unwrap_or_else(|| {
        let sym = uf.detect_symmetry();
        FitSettings::minimal(if sym == Symmetry::None {
            vec![Symmetry::None]
        } else {
            vec![sym, Symmetry::None]
        })
    });
    let f = |x: f64| uf.eval(x);
    let spec = FitSpec {
        name: name.to_string(),
        code: None,
        f: &f,
        settings,
    };
    build_table(&spec)
}
