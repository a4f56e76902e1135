//! A byte cursor over HLO text: whitespace and comments, identifiers, numbers, strings,
//! and verbatim capture of attribute values, with line:column tracking for errors.

use super::instruction::Loc;

/// A located parse error: `line:col: message`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{line}:{col}: {message}")]
pub struct ParseError {
    pub line: u32,
    pub col: u32,
    pub message: String,
}

/// Result type of the text front end.
pub type PResult<T> = Result<T, ParseError>;

/// Deepest nesting of tuples, braces or brackets the front end accepts; deeper input is an
/// error rather than a stack overflow.
pub const MAX_NESTING: usize = 256;

/// Cursor over the source bytes (cloned for lookahead).
#[derive(Clone)]
pub struct Cursor<'a> {
    src: &'a str,
    bytes: &'a [u8],
    pos: usize,
    line: u32,
    line_start: usize,
}

fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b == b'%' || b == b'$'
}

fn is_ident_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-' | b'%' | b'$')
}

impl<'a> Cursor<'a> {
    pub fn new(src: &'a str) -> Self {
        Cursor {
            src,
            bytes: src.as_bytes(),
            pos: 0,
            line: 1,
            line_start: 0,
        }
    }

    /// Current location (1-based line and column, columns counted in characters).
    pub fn loc(&self) -> Loc {
        let col = self.src[self.line_start..self.pos].chars().count() as u32 + 1;
        Loc {
            line: self.line,
            col,
        }
    }

    pub fn pos(&self) -> usize {
        self.pos
    }

    /// An error at the current position.
    pub fn error<T>(&self, message: impl Into<String>) -> PResult<T> {
        Err(self.error_value(message))
    }

    pub fn error_value(&self, message: impl Into<String>) -> ParseError {
        let l = self.loc();
        ParseError {
            line: l.line,
            col: l.col,
            message: message.into(),
        }
    }

    /// An error at a remembered location.
    pub fn error_at<T>(loc: Loc, message: impl Into<String>) -> PResult<T> {
        Err(ParseError {
            line: loc.line,
            col: loc.col,
            message: message.into(),
        })
    }

    fn bump(&mut self) {
        if self.bytes[self.pos] == b'\n' {
            self.line += 1;
            self.line_start = self.pos + 1;
        }
        self.pos += 1;
    }

    pub fn at_end(&self) -> bool {
        self.pos >= self.bytes.len()
    }

    /// Next byte without consuming it (0 at end).
    pub fn peek(&self) -> u8 {
        self.bytes.get(self.pos).copied().unwrap_or(0)
    }

    pub fn peek_at(&self, k: usize) -> u8 {
        self.bytes.get(self.pos + k).copied().unwrap_or(0)
    }

    /// Skips whitespace, `/* ... */` and `// ...` comments.
    pub fn skip_ws(&mut self) -> PResult<()> {
        loop {
            match self.peek() {
                b' ' | b'\t' | b'\r' | b'\n' => self.bump(),
                b'/' if self.peek_at(1) == b'*' => {
                    let start = self.loc();
                    self.bump();
                    self.bump();
                    loop {
                        if self.at_end() {
                            return Cursor::error_at(start, "unterminated /* comment");
                        }
                        if self.peek() == b'*' && self.peek_at(1) == b'/' {
                            self.bump();
                            self.bump();
                            break;
                        }
                        self.bump();
                    }
                }
                b'/' if self.peek_at(1) == b'/' => {
                    while !self.at_end() && self.peek() != b'\n' {
                        self.bump();
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    /// Skips whitespace, then reports whether the next byte is `c` (not consumed).
    pub fn looking_at(&mut self, c: u8) -> PResult<bool> {
        self.skip_ws()?;
        Ok(self.peek() == c)
    }

    /// Consumes `c` if it is next (after whitespace).
    pub fn eat(&mut self, c: u8) -> PResult<bool> {
        self.skip_ws()?;
        if self.peek() == c {
            self.bump();
            Ok(true)
        } else {
            Ok(false)
        }
    }

    /// Consumes the string `s` if it is next (after whitespace).
    pub fn eat_str(&mut self, s: &str) -> PResult<bool> {
        self.skip_ws()?;
        if self.bytes[self.pos..].starts_with(s.as_bytes()) {
            for _ in 0..s.len() {
                self.bump();
            }
            Ok(true)
        } else {
            Ok(false)
        }
    }

    /// Requires `c` next; `what` names the construct being parsed for the error.
    pub fn expect(&mut self, c: u8, what: &str) -> PResult<()> {
        if self.eat(c)? {
            Ok(())
        } else {
            self.error(format!(
                "expected '{}' {what}, found {}",
                c as char,
                self.describe_next()
            ))
        }
    }

    /// Requires the string `s` next.
    pub fn expect_str(&mut self, s: &str, what: &str) -> PResult<()> {
        if self.eat_str(s)? {
            Ok(())
        } else {
            self.error(format!(
                "expected '{s}' {what}, found {}",
                self.describe_next()
            ))
        }
    }

    /// A short description of what comes next, for error messages.
    pub fn describe_next(&self) -> String {
        if self.at_end() {
            return "end of input".into();
        }
        let rest = &self.src[self.pos..];
        let tok: String = rest
            .chars()
            .take_while(|c| !c.is_whitespace())
            .take(24)
            .collect();
        format!("'{tok}'")
    }

    /// Whether an identifier starts next (after whitespace).
    pub fn at_ident(&mut self) -> PResult<bool> {
        self.skip_ws()?;
        Ok(is_ident_start(self.peek()))
    }

    /// Reads an identifier (`[A-Za-z_%$][A-Za-z0-9_.%$-]*`), or None if none is next.
    pub fn ident(&mut self) -> PResult<Option<&'a str>> {
        self.skip_ws()?;
        if !is_ident_start(self.peek()) {
            return Ok(None);
        }
        let start = self.pos;
        while is_ident_char(self.peek()) {
            self.bump();
        }
        Ok(Some(&self.src[start..self.pos]))
    }

    /// Requires an identifier.
    pub fn expect_ident(&mut self, what: &str) -> PResult<&'a str> {
        match self.ident()? {
            Some(s) => Ok(s),
            None => self.error(format!("expected {what}, found {}", self.describe_next())),
        }
    }

    /// Reads a name (identifier with an optional leading `%`), returning it without `%`.
    pub fn expect_name(&mut self, what: &str) -> PResult<&'a str> {
        let id = self.expect_ident(what)?;
        let id = id.strip_prefix('%').unwrap_or(id);
        if id.is_empty() {
            return self.error(format!("expected {what}, found '%' with no name"));
        }
        Ok(id)
    }

    /// Reads a number-like word: optional sign then `[0-9A-Za-z_.]` with exponent signs,
    /// and a `(0x...)` payload after `nan`. Returns the text.
    pub fn number_word(&mut self) -> PResult<&'a str> {
        self.skip_ws()?;
        let start = self.pos;
        if matches!(self.peek(), b'-' | b'+') {
            self.bump();
        }
        let body = self.pos;
        while self.peek().is_ascii_alphanumeric() || self.peek() == b'.' || self.peek() == b'_' {
            let b = self.peek();
            self.bump();
            if (b == b'e' || b == b'E')
                && matches!(self.peek(), b'-' | b'+')
                && self.src[body..self.pos - 1]
                    .bytes()
                    .all(|c| c.is_ascii_digit() || c == b'.')
            {
                self.bump();
            }
        }
        if &self.src[body..self.pos] == "nan" && self.peek() == b'(' {
            while !self.at_end() && self.peek() != b')' && self.pos - start < 40 {
                self.bump();
            }
            if self.peek() == b')' {
                self.bump();
            }
        }
        if self.pos == body {
            return self.error(format!("expected a number, found {}", self.describe_next()));
        }
        Ok(&self.src[start..self.pos])
    }

    /// Reads a signed 64-bit integer.
    pub fn int(&mut self, what: &str) -> PResult<i64> {
        self.skip_ws()?;
        let loc = self.loc();
        let w = self.number_word()?;
        w.parse::<i64>()
            .or_else(|_| Cursor::error_at(loc, format!("expected an integer {what}, found '{w}'")))
    }

    /// Reads a quoted string with C escapes, returning it unescaped.
    pub fn string(&mut self, what: &str) -> PResult<String> {
        self.skip_ws()?;
        if self.peek() != b'"' {
            return self.error(format!(
                "expected a quoted string {what}, found {}",
                self.describe_next()
            ));
        }
        let start = self.loc();
        self.bump();
        let mut out = Vec::new();
        loop {
            if self.at_end() {
                return Cursor::error_at(start, "unterminated string");
            }
            let b = self.peek();
            self.bump();
            match b {
                b'"' => break,
                b'\\' => {
                    if self.at_end() {
                        return Cursor::error_at(start, "unterminated string");
                    }
                    let e = self.peek();
                    self.bump();
                    match e {
                        b'n' => out.push(b'\n'),
                        b't' => out.push(b'\t'),
                        b'r' => out.push(b'\r'),
                        b'0'..=b'7' => {
                            let mut v = (e - b'0') as u32;
                            for _ in 0..2 {
                                if (b'0'..=b'7').contains(&self.peek()) {
                                    v = v * 8 + (self.peek() - b'0') as u32;
                                    self.bump();
                                }
                            }
                            out.push(v as u8);
                        }
                        b'x' => {
                            let mut v = 0u32;
                            let mut n = 0;
                            while n < 2 && self.peek().is_ascii_hexdigit() {
                                v = v * 16 + (self.peek() as char).to_digit(16).unwrap_or(0);
                                self.bump();
                                n += 1;
                            }
                            out.push(v as u8);
                        }
                        other => out.push(other),
                    }
                }
                other => out.push(other),
            }
        }
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    /// Captures an attribute value verbatim: balanced `()[]{}`, quoted strings, stopping at
    /// a top-level `,`, an unmatched closer, a top-level newline or the end.
    pub fn raw_value(&mut self, what: &str) -> PResult<&'a str> {
        self.skip_ws()?;
        let start = self.pos;
        let start_loc = self.loc();
        let mut stack: Vec<u8> = Vec::new();
        while !self.at_end() {
            let b = self.peek();
            match b {
                b'"' => {
                    self.string(what)?;
                    continue;
                }
                b'(' | b'[' | b'{' => {
                    if stack.len() >= MAX_NESTING {
                        return self.error(format!("nesting deeper than {MAX_NESTING} in {what}"));
                    }
                    stack.push(b);
                }
                b')' | b']' | b'}' => {
                    let open = match b {
                        b')' => b'(',
                        b']' => b'[',
                        _ => b'{',
                    };
                    match stack.last() {
                        None => break,
                        Some(&o) if o == open => {
                            stack.pop();
                        }
                        Some(&o) => {
                            return self.error(format!(
                                "unbalanced '{}' in {what} (opened with '{}')",
                                b as char, o as char
                            ))
                        }
                    }
                }
                b',' | b'\n' if stack.is_empty() => break,
                _ => {}
            }
            self.bump();
        }
        if !stack.is_empty() {
            return Cursor::error_at(
                start_loc,
                format!("unclosed '{}' in {what}", stack[stack.len() - 1] as char),
            );
        }
        let text = self.src[start..self.pos].trim_end();
        if text.is_empty() {
            return Cursor::error_at(start_loc, format!("expected a value for {what}"));
        }
        Ok(text)
    }

    /// Reads up to (not including) an unmatched `close`, skipping over balanced `()`.
    pub fn take_until_unmatched(&mut self, close: u8) -> &'a str {
        let start = self.pos;
        let mut depth = 0usize;
        while !self.at_end() {
            let b = self.peek();
            if b == close && depth == 0 {
                break;
            }
            match b {
                b'(' => depth += 1,
                b')' => depth = depth.saturating_sub(1),
                _ => {}
            }
            self.bump();
        }
        &self.src[start..self.pos]
    }

    /// Reads bytes while `f` holds and returns them (no whitespace skipping).
    pub fn take_while(&mut self, f: impl Fn(u8) -> bool) -> &'a str {
        let start = self.pos;
        while !self.at_end() && f(self.peek()) {
            self.bump();
        }
        &self.src[start..self.pos]
    }
}
