//! The NumPy `.npy` header: parsing (versions 1.0, 2.0 and 3.0, a real parser for the header's
//! Python dict literal) and writing (version 1.0, C order, padded to 64 bytes).
//!
//! Layout: the magic `\x93NUMPY`, a major and a minor version byte, the header length (`u16`
//! for 1.x, `u32` for 2.x and 3.x, little-endian), then the header: an ASCII (3.x: UTF-8) Python
//! dict literal with the keys `descr`, `fortran_order` and `shape`, padded with spaces and ended
//! by a newline. The data follows.

use std::path::Path;

use weft_core::{Error, Result};

use crate::format::{Order, StoredElement};

/// The magic string that starts every `.npy` file.
pub(crate) const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// Headers longer than this are refused (NumPy itself refuses more than 10,000 bytes by default).
const MAX_HEADER_LEN: usize = 1 << 20;

/// Deepest nesting of brackets accepted in a header literal.
const MAX_DEPTH: usize = 16;

/// A parsed `.npy` header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NpyHeader {
    /// `(major, minor)`.
    pub version: (u8, u8),
    /// The element type.
    pub element: StoredElement,
    /// Whether multi-byte elements are big-endian (`>`).
    pub big_endian: bool,
    /// C or Fortran order.
    pub order: Order,
    /// Rows and columns of the 2-D array.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Byte offset of the data.
    pub data_offset: usize,
}

/// Bytes of the fixed preamble needed before the header length is known (for 2.x/3.x).
pub(crate) const PREAMBLE_LEN: usize = 12;

/// Parses the preamble (`prefix` holds the first up to [`PREAMBLE_LEN`] bytes of the file) and
/// returns `(version, header_start, header_len)`.
pub(crate) fn parse_preamble(
    path: &Path,
    prefix: &[u8],
    file_len: u64,
) -> Result<((u8, u8), usize, usize)> {
    if !prefix.starts_with(MAGIC) && !MAGIC.starts_with(prefix) {
        return Err(Error::format(
            path,
            "not an .npy file (missing the \\x93NUMPY magic)",
        ));
    }
    if prefix.len() < 10 {
        return Err(Error::format(path, "truncated .npy preamble"));
    }
    let version = (prefix[6], prefix[7]);
    let (start, len) = match version.0 {
        1 => (10, u16::from_le_bytes([prefix[8], prefix[9]]) as usize),
        2 | 3 => {
            if prefix.len() < 12 {
                return Err(Error::format(path, "truncated .npy preamble"));
            }
            (
                12,
                u32::from_le_bytes([prefix[8], prefix[9], prefix[10], prefix[11]]) as usize,
            )
        }
        _ => {
            return Err(Error::format(
                path,
                format!(
                    "unsupported .npy version {}.{} (1.0, 2.0 and 3.0 are supported)",
                    version.0, version.1
                ),
            ));
        }
    };
    if len > MAX_HEADER_LEN {
        return Err(Error::format(
            path,
            format!(".npy header length {len} exceeds the limit of {MAX_HEADER_LEN} bytes"),
        ));
    }
    if (start + len) as u64 > file_len {
        return Err(Error::format(
            path,
            format!(
                ".npy header claims {len} bytes but the file holds only {} after the preamble",
                file_len.saturating_sub(start as u64)
            ),
        ));
    }
    Ok((version, start, len))
}

/// Parses the header text (the bytes after the preamble) into an [`NpyHeader`].
pub(crate) fn parse_header_text(
    path: &Path,
    version: (u8, u8),
    header_start: usize,
    text: &[u8],
) -> Result<NpyHeader> {
    let bad = |reason: String| Error::format(path, format!("malformed .npy header: {reason}"));
    let text = if version.0 >= 3 {
        std::str::from_utf8(text).map_err(|_| bad("not valid UTF-8".into()))?
    } else {
        if !text.is_ascii() {
            return Err(bad("not ASCII".into()));
        }
        std::str::from_utf8(text).map_err(|_| bad("not ASCII".into()))?
    };
    let mut parser = LiteralParser {
        chars: text.as_bytes(),
        pos: 0,
    };
    let dict = parser.parse_value(0).map_err(bad)?;
    parser.skip_ws();
    if parser.pos != parser.chars.len() {
        return Err(bad(format!(
            "unexpected text after the dict at byte {}",
            parser.pos
        )));
    }
    let Literal::Dict(entries) = dict else {
        return Err(bad("the header is not a dict".into()));
    };
    let get = |key: &str| {
        entries
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
            .ok_or_else(|| bad(format!("missing key '{key}'")))
    };
    let descr = match get("descr")? {
        Literal::Str(s) => s.clone(),
        other => {
            return Err(Error::format(
                path,
                format!(
                    "unsupported .npy dtype {other:?}: only plain f32, f16, u8 and i8 arrays \
                     (and integer id arrays) are supported"
                ),
            ));
        }
    };
    let order = match get("fortran_order")? {
        Literal::Bool(true) => Order::Fortran,
        Literal::Bool(false) => Order::C,
        other => return Err(bad(format!("'fortran_order' is {other:?}, not a bool"))),
    };
    let shape = match get("shape")? {
        Literal::Tuple(items) => items
            .iter()
            .map(|v| match v {
                Literal::Int(n) => usize::try_from(*n)
                    .map_err(|_| bad(format!("shape entry {n} does not fit in memory"))),
                other => Err(bad(format!("shape entry {other:?} is not an integer"))),
            })
            .collect::<Result<Vec<usize>>>()?,
        other => return Err(bad(format!("'shape' is {other:?}, not a tuple"))),
    };
    let (element, big_endian) = parse_descr(&descr).ok_or_else(|| {
        Error::format(
            path,
            format!(
                "unsupported .npy dtype '{descr}': supported are <f4, <f2, |u1, |i1 \
                 (either byte order) and the id types <i4, <u4, <i8, <u8"
            ),
        )
    })?;
    if shape.len() != 2 {
        return Err(Error::format(
            path,
            format!(
                ".npy array has {} dimensions (shape {shape:?}); a 2-D (rows, dim) array is required",
                shape.len()
            ),
        ));
    }
    Ok(NpyHeader {
        version,
        element,
        big_endian,
        order,
        rows: shape[0],
        cols: shape[1],
        data_offset: header_start + text.len(),
    })
}

/// Parses a NumPy type string such as `<f4` into the element type and whether it is big-endian.
fn parse_descr(descr: &str) -> Option<(StoredElement, bool)> {
    let (big_endian, body) = match descr.as_bytes().first()? {
        b'<' | b'=' => (false, &descr[1..]),
        b'|' => (false, &descr[1..]),
        b'>' => (true, &descr[1..]),
        _ => (false, descr),
    };
    let element = match body {
        "f4" => StoredElement::F32,
        "f2" | "e" => StoredElement::F16,
        "u1" | "B" => StoredElement::U8,
        "i1" | "b" => StoredElement::I8,
        "i4" => StoredElement::I32,
        "u4" => StoredElement::U32,
        "i8" => StoredElement::I64,
        "u8" => StoredElement::U64,
        _ => return None,
    };
    // One-byte types have no byte order.
    Some((element, big_endian && element.size() > 1))
}

/// The little-endian NumPy type string for a stored element type.
pub(crate) fn descr_for(element: StoredElement) -> &'static str {
    match element {
        StoredElement::F32 => "<f4",
        StoredElement::F16 => "<f2",
        StoredElement::U8 => "|u1",
        StoredElement::I8 => "|i1",
        StoredElement::I32 => "<i4",
        StoredElement::U32 => "<u4",
        StoredElement::I64 => "<i8",
        StoredElement::U64 => "<u8",
    }
}

/// Encodes a version-1.0 (2.0 when too long) header for a C-order `(rows, cols)` array of type
/// `descr`, padded with spaces so that the data starts at a multiple of 64 bytes and the header
/// is as long as a header for any row count up to `u64::MAX` (so a streaming writer can patch
/// the row count in place at the end).
pub(crate) fn encode_header(descr: &str, rows: u64, cols: u64) -> Vec<u8> {
    let dict = |r: u64| {
        format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': ({r}, {cols}), }}")
    };
    let longest = dict(u64::MAX).len() + 1; // + the newline
    let (version, prefix) = if 10 + longest <= u16::MAX as usize {
        (1u8, 10usize)
    } else {
        (2u8, 12usize)
    };
    let total = (prefix + longest).div_ceil(64) * 64;
    let header_len = total - prefix;
    let mut text = dict(rows);
    while text.len() < header_len - 1 {
        text.push(' ');
    }
    text.push('\n');
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(MAGIC);
    out.push(version);
    out.push(0);
    if version == 1 {
        out.extend_from_slice(&(header_len as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(header_len as u32).to_le_bytes());
    }
    out.extend_from_slice(text.as_bytes());
    debug_assert_eq!(out.len(), total);
    out
}

/// A Python literal as found in `.npy` headers.
#[derive(Clone, Debug, PartialEq)]
enum Literal {
    Str(String),
    Int(i128),
    Bool(bool),
    None,
    Tuple(Vec<Literal>),
    List(Vec<Literal>),
    Dict(Vec<(String, Literal)>),
}

/// A recursive-descent parser for the subset of Python literals NumPy writes.
struct LiteralParser<'a> {
    chars: &'a [u8],
    pos: usize,
}

impl LiteralParser<'_> {
    fn skip_ws(&mut self) {
        while self.pos < self.chars.len() && self.chars[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.chars.get(self.pos).copied()
    }

    fn expect(&mut self, c: u8) -> Result<(), String> {
        self.skip_ws();
        if self.peek() == Some(c) {
            self.pos += 1;
            Ok(())
        } else {
            Err(format!("expected '{}' at byte {}", c as char, self.pos))
        }
    }

    fn parse_value(&mut self, depth: usize) -> Result<Literal, String> {
        if depth > MAX_DEPTH {
            return Err("nested too deeply".into());
        }
        self.skip_ws();
        match self.peek() {
            None => Err("unexpected end of header".into()),
            Some(b'\'' | b'"') => self.parse_string().map(Literal::Str),
            Some(b'{') => self.parse_dict(depth),
            Some(b'(') => self
                .parse_sequence(b'(', b')', depth)
                .map(|(items, trailing_comma)| {
                    // `(x)` is just x in Python; `(x,)` is a tuple.
                    if items.len() == 1 && !trailing_comma {
                        items.into_iter().next().unwrap_or(Literal::None)
                    } else {
                        Literal::Tuple(items)
                    }
                }),
            Some(b'[') => self
                .parse_sequence(b'[', b']', depth)
                .map(|(items, _)| Literal::List(items)),
            Some(c) if c == b'-' || c == b'+' || c.is_ascii_digit() => self.parse_int(),
            Some(c) if c.is_ascii_alphabetic() => {
                let start = self.pos;
                while self
                    .peek()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_')
                {
                    self.pos += 1;
                }
                match &self.chars[start..self.pos] {
                    b"True" => Ok(Literal::Bool(true)),
                    b"False" => Ok(Literal::Bool(false)),
                    b"None" => Ok(Literal::None),
                    other => Err(format!(
                        "unknown name `{}` at byte {start}",
                        String::from_utf8_lossy(other)
                    )),
                }
            }
            Some(c) => Err(format!(
                "unexpected character '{}' at byte {}",
                c.escape_ascii(),
                self.pos
            )),
        }
    }

    fn parse_string(&mut self) -> Result<String, String> {
        let quote = self.chars[self.pos];
        let start = self.pos;
        self.pos += 1;
        let mut out = Vec::new();
        loop {
            match self.peek() {
                None => return Err(format!("unterminated string starting at byte {start}")),
                Some(c) if c == quote => {
                    self.pos += 1;
                    break;
                }
                Some(b'\\') => {
                    self.pos += 1;
                    match self.peek() {
                        None => return Err("unterminated escape".into()),
                        Some(c) => {
                            out.push(c);
                            self.pos += 1;
                        }
                    }
                }
                Some(c) => {
                    out.push(c);
                    self.pos += 1;
                }
            }
        }
        String::from_utf8(out).map_err(|_| format!("string at byte {start} is not UTF-8"))
    }

    fn parse_int(&mut self) -> Result<Literal, String> {
        let start = self.pos;
        if matches!(self.peek(), Some(b'-' | b'+')) {
            self.pos += 1;
        }
        let digits_start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        if self.pos == digits_start {
            return Err(format!("expected digits at byte {digits_start}"));
        }
        let text = std::str::from_utf8(&self.chars[start..self.pos])
            .map_err(|_| "number is not ASCII".to_string())?;
        let value: i128 = text
            .parse()
            .map_err(|_| format!("integer `{text}` is out of range"))?;
        // Python 2 long suffix, as in `(10L, 3L)`.
        if matches!(self.peek(), Some(b'L' | b'l')) {
            self.pos += 1;
        }
        Ok(Literal::Int(value))
    }

    /// Parses `open item, item, ... close`; returns the items and whether a comma trailed.
    fn parse_sequence(
        &mut self,
        open: u8,
        close: u8,
        depth: usize,
    ) -> Result<(Vec<Literal>, bool), String> {
        self.expect(open)?;
        let mut items = Vec::new();
        let mut trailing_comma = false;
        loop {
            self.skip_ws();
            if self.peek() == Some(close) {
                self.pos += 1;
                return Ok((items, trailing_comma));
            }
            items.push(self.parse_value(depth + 1)?);
            self.skip_ws();
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                    trailing_comma = true;
                }
                Some(c) if c == close => {
                    self.pos += 1;
                    return Ok((items, false));
                }
                _ => {
                    return Err(format!(
                        "expected ',' or '{}' at byte {}",
                        close as char, self.pos
                    ));
                }
            }
        }
    }

    fn parse_dict(&mut self, depth: usize) -> Result<Literal, String> {
        self.expect(b'{')?;
        let mut entries: Vec<(String, Literal)> = Vec::new();
        loop {
            self.skip_ws();
            match self.peek() {
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Literal::Dict(entries));
                }
                Some(b'\'' | b'"') => {}
                _ => return Err(format!("expected a string key at byte {}", self.pos)),
            }
            let key = self.parse_string()?;
            self.expect(b':')?;
            let value = self.parse_value(depth + 1)?;
            if entries.iter().any(|(k, _)| *k == key) {
                return Err(format!("duplicate key '{key}'"));
            }
            entries.push((key, value));
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {}
                _ => return Err(format!("expected ',' or '}}' at byte {}", self.pos)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<NpyHeader> {
        parse_header_text(Path::new("t.npy"), (1, 0), 10, text.as_bytes())
    }

    #[test]
    fn parses_numpy_headers() {
        let h =
            parse("{'descr': '<f4', 'fortran_order': True, 'shape': (400000, 50), }   \n").unwrap();
        assert_eq!(h.element, StoredElement::F32);
        assert_eq!(h.order, Order::Fortran);
        assert_eq!((h.rows, h.cols), (400000, 50));
        assert!(!h.big_endian);
        let h =
            parse("{\"shape\": (3L, 2L), \"fortran_order\": False, \"descr\": \">f2\"}\n").unwrap();
        assert_eq!(h.element, StoredElement::F16);
        assert!(h.big_endian);
        assert_eq!(h.order, Order::C);
        let h = parse("{'descr': '|u1', 'fortran_order': False, 'shape': (0, 7)}").unwrap();
        assert_eq!((h.rows, h.cols), (0, 7));
        let h = parse("{'descr': '>i1', 'fortran_order': False, 'shape': (1, 1)}").unwrap();
        assert!(!h.big_endian, "one-byte types have no byte order");
    }

    #[test]
    fn rejects_bad_headers() {
        for text in [
            "",
            "{",
            "{'descr': '<f4', 'fortran_order': False}",
            "{'descr': '<f4', 'fortran_order': 1, 'shape': (1, 2)}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2)} x",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2), 'descr': '<f4'}",
            "{'descr': '<f4 , 'fortran_order': False, 'shape': (1, 2)}",
            "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (1, 2)}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1, -2)}",
            "((((((((((((((((((((((((((((((((((((((((((",
        ] {
            assert!(
                matches!(parse(text), Err(Error::Format { .. })),
                "{text:?} accepted"
            );
        }
        // Unsupported dtypes and shapes.
        for text in [
            "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 2)}",
            "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1, 2)}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (6,)}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 3)}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': ()}",
        ] {
            let err = parse(text).unwrap_err().to_string();
            assert!(
                err.contains("unsupported") || err.contains("dimensions"),
                "{err}"
            );
        }
    }

    #[test]
    fn encoded_headers_parse_and_are_64_byte_aligned() {
        for (rows, cols) in [(0u64, 1u64), (5, 128), (u32::MAX as u64, 960)] {
            let bytes = encode_header("<f4", rows, cols);
            assert_eq!(bytes.len() % 64, 0);
            assert_eq!(bytes.len(), encode_header("<f4", u64::MAX, cols).len());
            let (version, start, len) =
                parse_preamble(Path::new("t.npy"), &bytes, bytes.len() as u64).unwrap();
            let h = parse_header_text(
                Path::new("t.npy"),
                version,
                start,
                &bytes[start..start + len],
            )
            .unwrap();
            assert_eq!((h.rows as u64, h.cols as u64), (rows, cols));
            assert_eq!(h.data_offset, bytes.len());
        }
    }
}
