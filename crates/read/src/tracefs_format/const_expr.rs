//! A small evaluator for the integer constant expressions found in `print fmt` arguments,
//! e.g. the 6.18 `sched_switch` mask `((((0x00000000 | 0x00000001 | … | 0x00000040) + 1) << 1) - 1)`.
//!
//! Grammar (C precedence, 64-bit wrapping arithmetic):
//! `?:` < `||` < `&&` < `|` < `^` < `&` < `== !=` < `< <= > >=` < `<< >>` < `+ -` < `* / %`
//! < unary `- ~ ! +` < primary (number with optional `U`/`L` suffixes, parenthesized
//! expression, or a cast like `(unsigned long)` which is ignored). Identifiers (unexpanded
//! macros such as `TASK_STATE_MAX`) make the expression unevaluable: `None`.

/// Evaluates `text`; `None` when it is not a complete constant expression.
pub fn eval_const_expr(text: &str) -> Option<u64> {
    let tokens = tokenize(text)?;
    let mut p = Parser {
        t: &tokens,
        i: 0,
        depth: 0,
    };
    let v = p.ternary()?;
    (p.i == tokens.len()).then_some(v)
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Num(u64),
    Ident(String),
    Op(&'static str),
}

const OPS: [&str; 24] = [
    "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "(", ")", "|", "^", "&", "+", "-", "*", "/",
    "%", "~", "!", "<", ">", "?", ":",
];

fn tokenize(s: &str) -> Option<Vec<Tok>> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() {
            let start = i;
            while i < b.len() && b[i].is_ascii_alphanumeric() {
                i += 1;
            }
            out.push(Tok::Num(parse_number(&s[start..i])?));
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(Tok::Ident(s[start..i].to_string()));
        } else {
            let op = OPS.iter().find(|op| s[i..].starts_with(**op))?;
            out.push(Tok::Op(op));
            i += op.len();
        }
    }
    Some(out)
}

fn parse_number(t: &str) -> Option<u64> {
    let t = t.trim_end_matches(['u', 'U', 'l', 'L']);
    if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()
    } else if t.len() > 1 && t.starts_with('0') {
        u64::from_str_radix(&t[1..], 8).ok()
    } else {
        t.parse().ok()
    }
}

const TYPE_WORDS: [&str; 12] = [
    "unsigned", "signed", "long", "int", "short", "char", "u64", "u32", "s64", "s32", "u16", "u8",
];

struct Parser<'a> {
    t: &'a [Tok],
    i: usize,
    depth: u32,
}

impl Parser<'_> {
    fn peek_op(&self) -> Option<&'static str> {
        match self.t.get(self.i) {
            Some(Tok::Op(o)) => Some(o),
            _ => None,
        }
    }

    fn eat(&mut self, op: &str) -> bool {
        if self.peek_op() == Some(op) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn ternary(&mut self) -> Option<u64> {
        self.depth += 1;
        if self.depth > 200 {
            return None;
        }
        let c = self.binary(0)?;
        let v = if self.eat("?") {
            let a = self.ternary()?;
            if !self.eat(":") {
                return None;
            }
            let b = self.ternary()?;
            if c != 0 {
                a
            } else {
                b
            }
        } else {
            c
        };
        self.depth -= 1;
        Some(v)
    }

    fn binary(&mut self, min_level: usize) -> Option<u64> {
        const LEVELS: [&[&str]; 10] = [
            &["||"],
            &["&&"],
            &["|"],
            &["^"],
            &["&"],
            &["==", "!="],
            &["<", "<=", ">", ">="],
            &["<<", ">>"],
            &["+", "-"],
            &["*", "/", "%"],
        ];
        if min_level == LEVELS.len() {
            return self.unary();
        }
        let mut lhs = self.binary(min_level + 1)?;
        while let Some(op) = self.peek_op().filter(|o| LEVELS[min_level].contains(o)) {
            self.i += 1;
            let rhs = self.binary(min_level + 1)?;
            lhs = apply(op, lhs, rhs)?;
        }
        Some(lhs)
    }

    fn unary(&mut self) -> Option<u64> {
        self.depth += 1;
        if self.depth > 200 {
            return None;
        }
        let v = if self.eat("-") {
            self.unary()?.wrapping_neg()
        } else if self.eat("+") {
            self.unary()?
        } else if self.eat("~") {
            !self.unary()?
        } else if self.eat("!") {
            u64::from(self.unary()? == 0)
        } else {
            self.primary()?
        };
        self.depth -= 1;
        Some(v)
    }

    fn primary(&mut self) -> Option<u64> {
        match self.t.get(self.i)? {
            Tok::Num(n) => {
                self.i += 1;
                Some(*n)
            }
            Tok::Op("(") => {
                // A cast `(unsigned long)` is skipped; otherwise a parenthesized expression.
                let mut j = self.i + 1;
                while let Some(Tok::Ident(w)) = self.t.get(j) {
                    if !TYPE_WORDS.contains(&w.as_str()) {
                        break;
                    }
                    j += 1;
                }
                if j > self.i + 1 && self.t.get(j) == Some(&Tok::Op(")")) {
                    self.i = j + 1;
                    return self.unary();
                }
                self.i += 1;
                let v = self.ternary()?;
                self.eat(")").then_some(v)
            }
            _ => None,
        }
    }
}

fn apply(op: &str, a: u64, b: u64) -> Option<u64> {
    Some(match op {
        "||" => u64::from(a != 0 || b != 0),
        "&&" => u64::from(a != 0 && b != 0),
        "|" => a | b,
        "^" => a ^ b,
        "&" => a & b,
        "==" => u64::from(a == b),
        "!=" => u64::from(a != b),
        "<" => u64::from((a as i64) < (b as i64)),
        "<=" => u64::from((a as i64) <= (b as i64)),
        ">" => u64::from((a as i64) > (b as i64)),
        ">=" => u64::from((a as i64) >= (b as i64)),
        "<<" => a.checked_shl(u32::try_from(b).ok()?).unwrap_or(0),
        ">>" => a.checked_shr(u32::try_from(b).ok()?).unwrap_or(0),
        "+" => a.wrapping_add(b),
        "-" => a.wrapping_sub(b),
        "*" => a.wrapping_mul(b),
        "/" => a.checked_div(b)?,
        "%" => a.checked_rem(b)?,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evaluates_the_6_18_task_report_masks() {
        let inner = "(0x00000000 | 0x00000001 | 0x00000002 | 0x00000004 | 0x00000008 | 0x00000010 | 0x00000020 | 0x00000040)";
        assert_eq!(
            eval_const_expr(&format!("((({inner} + 1) << 1) - 1)")),
            Some(0xff)
        );
        assert_eq!(
            eval_const_expr(&format!("(({inner} + 1) << 1)")),
            Some(0x100)
        );
        assert_eq!(eval_const_expr("(1024-1)"), Some(1023));
        assert_eq!(eval_const_expr("(unsigned long)4 * 2 + 1"), Some(9));
        assert_eq!(eval_const_expr("1 ? 2 : 3"), Some(2));
        assert_eq!(eval_const_expr("~0 & 0xffUL"), Some(0xff));
        assert_eq!(eval_const_expr("010"), Some(8));
    }

    #[test]
    fn rejects_symbols_and_garbage() {
        assert_eq!(eval_const_expr("TASK_STATE_MAX - 1"), None);
        assert_eq!(eval_const_expr("1 +"), None);
        assert_eq!(eval_const_expr("(1"), None);
        assert_eq!(eval_const_expr("1 / 0"), None);
        assert_eq!(eval_const_expr("1 << 99"), Some(0));
        assert_eq!(eval_const_expr(&"(".repeat(10_000)), None);
        assert_eq!(eval_const_expr(""), None);
    }
}
