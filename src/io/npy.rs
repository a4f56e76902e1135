//! The numpy `.npy` format: a magic string, a version, a Python-literal header
//! (`{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }`) and the raw elements.
//!
//! Why our own codec rather than a crate: `ndarray-npy` cannot read numpy void `V2` (how
//! ml_dtypes stores bf16) and does not expose the stored dtype; `npyz` maps dtypes onto its
//! own Rust element traits, so each hlosim type would still need a hand-written bridge. The
//! format itself is one page of specification, and hlosim buffers are exactly the raw
//! little-endian payload, so reading the header and handing the bytes to
//! [`crate::io::raw::from_bytes`] is both the shortest and the most robust path (every
//! length and value is checked; nothing in a file can cause a panic).

use super::raw;
use super::IoError;
use crate::hlo::{ArrayData, ArrayLiteral, ArrayShape, ElementType};
use std::io::{Read, Write};

const MAGIC: &[u8] = b"\x93NUMPY";

/// What a `.npy` header says about the array: the element type and byte order it decodes
/// to, plus the numpy spelling for messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NpyDtype {
    /// The hlosim element type of the payload. numpy void `V2` reads as bf16 and `V1` as raw
    /// bytes (u8) that a parameter of an 8-bit float or sub-byte type reinterprets.
    pub ty: ElementType,
    pub big_endian: bool,
    /// The descr string as written in the file (`<f4`, `|V2`, ...).
    pub descr: String,
}

/// Maps a numpy descr to an element type.
fn parse_descr(descr: &str) -> Result<NpyDtype, String> {
    let (order, code) = match descr.chars().next() {
        Some(c @ ('<' | '>' | '|' | '=')) => (c, &descr[1..]),
        _ => ('=', descr),
    };
    use ElementType as E;
    let ty = match code {
        "b1" | "?" => E::Pred,
        "i1" => E::S8,
        "i2" => E::S16,
        "i4" => E::S32,
        "i8" => E::S64,
        "u1" => E::U8,
        "u2" => E::U16,
        "u4" => E::U32,
        "u8" => E::U64,
        "f2" => E::F16,
        "f4" => E::F32,
        "f8" => E::F64,
        "c8" => E::C64,
        "c16" => E::C128,
        "V2" => E::BF16,
        "V1" => E::U8,
        _ => return Err(format!("unsupported numpy dtype '{descr}'")),
    };
    Ok(NpyDtype {
        ty,
        big_endian: order == '>',
        descr: descr.to_string(),
    })
}

/// The numpy descr hlosim writes for an element type (bf16 as `|V2`, as ml_dtypes does;
/// 8-bit floats as `|V1`; sub-byte integers widened to one byte each).
pub fn descr_for(ty: ElementType) -> &'static str {
    use ElementType as E;
    match ty {
        E::Pred => "|b1",
        E::S2 | E::S4 | E::S8 => "|i1",
        E::U2 | E::U4 | E::U8 => "|u1",
        E::S16 => "<i2",
        E::S32 => "<i4",
        E::S64 => "<i8",
        E::U16 => "<u2",
        E::U32 => "<u4",
        E::U64 => "<u8",
        E::F16 => "<f2",
        E::BF16 => "|V2",
        E::F32 => "<f4",
        E::F64 => "<f8",
        E::C64 => "<c8",
        E::C128 => "<c16",
        _ => "|V1",
    }
}

/// The header's three fields.
struct Header {
    dtype: NpyDtype,
    fortran: bool,
    shape: Vec<i64>,
}

/// A tiny reader for the Python dict literal of a `.npy` header.
struct Lit<'a> {
    s: &'a [u8],
    i: usize,
}

impl<'a> Lit<'a> {
    fn ws(&mut self) {
        while self.i < self.s.len() && (self.s[self.i] as char).is_ascii_whitespace() {
            self.i += 1;
        }
    }
    fn eat(&mut self, c: u8) -> bool {
        self.ws();
        if self.s.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn expect(&mut self, c: u8) -> Result<(), String> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(format!(
                "expected '{}' at header offset {}",
                c as char, self.i
            ))
        }
    }
    fn string(&mut self) -> Result<String, String> {
        self.ws();
        let q = match self.s.get(self.i) {
            Some(&q @ (b'\'' | b'"')) => q,
            _ => return Err(format!("expected a string at header offset {}", self.i)),
        };
        self.i += 1;
        let start = self.i;
        while self.i < self.s.len() && self.s[self.i] != q {
            self.i += 1;
        }
        if self.i >= self.s.len() {
            return Err("unterminated string in the header".into());
        }
        let v = String::from_utf8_lossy(&self.s[start..self.i]).into_owned();
        self.i += 1;
        Ok(v)
    }
    fn word(&mut self) -> String {
        self.ws();
        let start = self.i;
        while self.i < self.s.len() && (self.s[self.i] as char).is_ascii_alphanumeric() {
            self.i += 1;
        }
        String::from_utf8_lossy(&self.s[start..self.i]).into_owned()
    }
    fn shape(&mut self) -> Result<Vec<i64>, String> {
        self.expect(b'(')?;
        let mut dims = Vec::new();
        loop {
            if self.eat(b')') {
                return Ok(dims);
            }
            let w = self.word();
            let d: i64 = w
                .trim_end_matches('L')
                .parse()
                .map_err(|_| format!("bad dimension '{w}' in the header's shape"))?;
            if d < 0 {
                return Err(format!("negative dimension {d} in the header's shape"));
            }
            dims.push(d);
            if !self.eat(b',') {
                self.expect(b')')?;
                return Ok(dims);
            }
        }
    }
}

fn parse_header(h: &[u8]) -> Result<Header, String> {
    let mut p = Lit { s: h, i: 0 };
    p.expect(b'{')?;
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    loop {
        if p.eat(b'}') {
            break;
        }
        let key = p.string()?;
        p.expect(b':')?;
        match key.as_str() {
            "descr" => {
                p.ws();
                if p.s.get(p.i) == Some(&b'[') {
                    return Err("structured numpy dtypes are not supported".into());
                }
                descr = Some(p.string()?)
            }
            "fortran_order" => {
                fortran = Some(match p.word().as_str() {
                    "True" => true,
                    "False" => false,
                    w => return Err(format!("fortran_order must be True or False, found '{w}'")),
                })
            }
            "shape" => shape = Some(p.shape()?),
            k => return Err(format!("unexpected key '{k}' in the header")),
        }
        if !p.eat(b',') {
            p.expect(b'}')?;
            break;
        }
    }
    let descr = descr.ok_or("the header has no 'descr'")?;
    Ok(Header {
        dtype: parse_descr(&descr)?,
        fortran: fortran.ok_or("the header has no 'fortran_order'")?,
        shape: shape.ok_or("the header has no 'shape'")?,
    })
}

/// Parses a whole `.npy` image. `what` names the source in error messages.
pub fn decode(bytes: &[u8], what: &str) -> Result<(ArrayLiteral, NpyDtype), IoError> {
    read_from(&mut &bytes[..], u64::MAX, what)
}

/// Reads a `.npy` image from a stream: the header first, then the payload straight into the
/// array's typed buffer (one allocation of the final size, no byte copy in between), then a
/// check that nothing follows. An image whose header promises more than `limit` bytes in all
/// is refused before anything is allocated, and no more than `limit + 1` bytes are ever read,
/// so a hostile (compressed) stream cannot make this expand. `what` names the source.
pub fn read_from<R: Read>(
    r: &mut R,
    limit: u64,
    what: &str,
) -> Result<(ArrayLiteral, NpyDtype), IoError> {
    let fail = |m: String| IoError::new(format!("{what}: {m}"));
    let io_fail = |e: std::io::Error| fail(format!("cannot read: {e}"));
    let mut prefix = [0u8; 12];
    let got = fill(r, &mut prefix[..10]).map_err(io_fail)?;
    if got < 10 || &prefix[..6] != MAGIC {
        return Err(fail(
            "not a .npy array (missing the \\x93NUMPY magic)".into(),
        ));
    }
    let (hlen, hstart) = match prefix[6] {
        1 => (u16::from_le_bytes([prefix[8], prefix[9]]) as u64, 10u64),
        2 | 3 => {
            if fill(r, &mut prefix[10..12]).map_err(io_fail)? < 2 {
                return Err(fail("truncated header".into()));
            }
            let n = u32::from_le_bytes([prefix[8], prefix[9], prefix[10], prefix[11]]);
            (n as u64, 12)
        }
        v => return Err(fail(format!("unsupported .npy format version {v}"))),
    };
    let too_big = |n: u64| {
        fail(format!(
            "the image takes {n} bytes, more than the {limit} bytes allowed for it (the \
             parameter's payload plus a .npy header)"
        ))
    };
    if hstart + hlen > limit {
        return Err(too_big(hstart + hlen));
    }
    // The header grows as it is read, so a forged length allocates nothing up front.
    let mut header = Vec::new();
    r.take(hlen).read_to_end(&mut header).map_err(io_fail)?;
    if header.len() as u64 != hlen {
        return Err(fail("truncated header".into()));
    }
    let h = parse_header(&header).map_err(fail)?;
    let count = h
        .shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d as usize))
        .ok_or_else(|| fail("the shape's element count overflows".into()))?;
    let size = h.dtype.ty.byte_size();
    let nbytes = count
        .checked_mul(size)
        .ok_or_else(|| fail("the payload size overflows".into()))?;
    let total = (hstart + hlen).saturating_add(nbytes as u64);
    if total > limit {
        return Err(too_big(total));
    }
    let (mut data, got) = read_payload(r, h.dtype.ty, count).map_err(io_fail)?;
    // Anything after the payload is an error too; count it (within the limit) for the message.
    let extra = if got == nbytes {
        let cap = limit.saturating_sub(total).saturating_add(1);
        std::io::copy(&mut r.take(cap), &mut std::io::sink()).map_err(io_fail)?
    } else {
        0
    };
    if got != nbytes || extra != 0 {
        return Err(fail(format!(
            "the header promises {count} elements of '{}' ({nbytes} bytes), the file holds {} \
             bytes",
            h.dtype.descr,
            got as u64 + extra
        )));
    }
    if h.dtype.big_endian {
        swap_bytes(&mut data);
    }
    if h.fortran && h.shape.len() > 1 {
        let c = fortran_to_c(&raw::to_le_bytes(&data), &h.shape, size);
        data = raw::from_bytes(h.dtype.ty, &c, false).map_err(fail)?;
    }
    let shape = ArrayShape::new(h.dtype.ty, h.shape);
    Ok((ArrayLiteral { shape, data }, h.dtype))
}

/// Reads as much of `buf` as the stream holds; returns how many bytes were read.
fn fill<R: Read>(r: &mut R, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match r.read(&mut buf[done..]) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// Reads `count` elements of `ty` (as they lie in memory on a little-endian machine) into a
/// new typed buffer; returns it with how many payload bytes the stream held (up to the full
/// size). The buffer is allocated zeroed, so its pages are touched once, by the read.
fn read_payload<R: Read>(
    r: &mut R,
    ty: ElementType,
    count: usize,
) -> std::io::Result<(ArrayData, usize)> {
    use ElementType as E;
    macro_rules! typed {
        ($variant:ident, $t:ty) => {{
            let mut v = bytemuck::zeroed_vec::<$t>(count);
            let got = fill(r, bytemuck::cast_slice_mut(&mut v))?;
            (ArrayData::$variant(v), got)
        }};
    }
    Ok(match ty {
        E::Pred => {
            // Any nonzero byte is true, so the bytes cannot be read into `bool`s directly.
            let mut b = vec![0u8; count];
            let got = fill(r, &mut b)?;
            (
                ArrayData::Pred(b.into_iter().map(|x| x != 0).collect()),
                got,
            )
        }
        E::S8 => typed!(S8, i8),
        E::S16 => typed!(S16, i16),
        E::S32 => typed!(S32, i32),
        E::S64 => typed!(S64, i64),
        E::U8 => typed!(U8, u8),
        E::U16 => typed!(U16, u16),
        E::U32 => typed!(U32, u32),
        E::U64 => typed!(U64, u64),
        E::F16 => typed!(F16, half::f16),
        E::BF16 => typed!(BF16, half::bf16),
        E::F32 => typed!(F32, f32),
        E::F64 => typed!(F64, f64),
        E::C64 => typed!(C64, num_complex::Complex<f32>),
        E::C128 => typed!(C128, num_complex::Complex<f64>),
        // parse_descr yields only the types above.
        t => {
            return Err(std::io::Error::other(format!(
                "element type {t} is not read from .npy files"
            )))
        }
    })
}

/// The bytes of a buffer exactly as `.npy` stores them (little-endian), borrowed where the
/// buffer's memory already is that image (little-endian hosts; a `bool` is one byte 0 or 1),
/// converted on big-endian hosts.
pub fn payload_bytes(data: &ArrayData) -> std::borrow::Cow<'_, [u8]> {
    use std::borrow::Cow;
    if cfg!(target_endian = "big") {
        return Cow::Owned(raw::to_le_bytes(data));
    }
    crate::with_array_data!(data, v => Cow::Borrowed(bytemuck::cast_slice(v)))
}

/// Reverses the bytes of every element (of each part, for complex numbers), in place.
fn swap_bytes(data: &mut ArrayData) {
    fn swap<T: bytemuck::Pod>(v: &mut [T], unit: usize) {
        if unit > 1 {
            for c in bytemuck::cast_slice_mut::<T, u8>(v).chunks_exact_mut(unit) {
                c.reverse();
            }
        }
    }
    use ArrayData as D;
    match data {
        // One byte per element: nothing to swap.
        D::Pred(_) | D::S8(_) | D::U8(_) | D::Bits8(_) => {}
        D::S16(v) => swap(v, 2),
        D::U16(v) => swap(v, 2),
        D::F16(v) => swap(v, 2),
        D::BF16(v) => swap(v, 2),
        D::S32(v) => swap(v, 4),
        D::U32(v) => swap(v, 4),
        D::F32(v) => swap(v, 4),
        D::S64(v) => swap(v, 8),
        D::U64(v) => swap(v, 8),
        D::F64(v) => swap(v, 8),
        D::C64(v) => swap(v, 4),
        D::C128(v) => swap(v, 8),
    }
}

/// Reorders a column-major payload into row-major order, element by element.
fn fortran_to_c(src: &[u8], dims: &[i64], size: usize) -> Vec<u8> {
    let n = src.len() / size.max(1);
    let rank = dims.len();
    // Column-major strides (in elements).
    let mut fst = vec![1usize; rank];
    for d in 1..rank {
        fst[d] = fst[d - 1] * dims[d - 1] as usize;
    }
    let mut out = vec![0u8; src.len()];
    let mut idx = vec![0usize; rank];
    for i in 0..n {
        let off: usize = idx.iter().zip(&fst).map(|(a, b)| a * b).sum();
        out[i * size..(i + 1) * size].copy_from_slice(&src[off * size..(off + 1) * size]);
        for d in (0..rank).rev() {
            idx[d] += 1;
            if idx[d] < dims[d] as usize {
                break;
            }
            idx[d] = 0;
        }
    }
    out
}

/// Dimensions as Python writes a tuple (`()`, `(3,)`, `(2, 3)`): the `.npy` header's shape,
/// and how the Python binding names shapes in its messages.
pub fn python_tuple(dims: &[i64]) -> String {
    match dims {
        [d] => format!("({d},)"),
        ds => format!(
            "({})",
            ds.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The version 1.0 `.npy` header (magic, version, length, padded dict) of an array.
fn header_for(a: &ArrayLiteral) -> Vec<u8> {
    let shape = python_tuple(&a.shape.dims);
    let mut header = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape}, }}",
        descr_for(a.shape.ty)
    );
    // Pad so that magic + version + length + header is a multiple of 64, ending in '\n'.
    let unpadded = 10 + header.len() + 1;
    header.push_str(&" ".repeat((64 - unpadded % 64) % 64));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out
}

/// The size in bytes of an array's `.npy` image.
pub fn encoded_len(a: &ArrayLiteral) -> u64 {
    header_for(a).len() as u64 + (a.data.len() * a.shape.ty.byte_size()) as u64
}

/// Writes an array as a version 1.0 `.npy` image (row-major, little-endian): the header,
/// then the payload in one write straight from the array's buffer.
pub fn write_to<W: Write>(w: &mut W, a: &ArrayLiteral) -> std::io::Result<()> {
    w.write_all(&header_for(a))?;
    w.write_all(&payload_bytes(&a.data))
}

/// Encodes an array as a version 1.0 `.npy` image in memory.
pub fn encode(a: &ArrayLiteral) -> Vec<u8> {
    let mut out = Vec::with_capacity(encoded_len(a) as usize);
    write_to(&mut out, a).expect("writing to a Vec cannot fail");
    out
}

/// Reads a `.npy` file, streaming it into the array's buffer.
pub fn read_file(path: &std::path::Path) -> Result<(ArrayLiteral, NpyDtype), IoError> {
    let shown = path.display().to_string();
    let file =
        std::fs::File::open(path).map_err(|e| IoError::new(format!("cannot read {shown}: {e}")))?;
    read_from(&mut std::io::BufReader::new(file), u64::MAX, &shown)
}

/// A numpy-style description of an array for messages: `float32 (2, 3)`.
pub fn describe(a: &ArrayLiteral, dtype: &NpyDtype) -> String {
    format!("'{}' {:?}", dtype.descr, a.shape.dims)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hlo::ArrayData;

    #[test]
    fn decodes_numpy_written_bytes() {
        // Bytes of np.save(f, np.array([[1, 2, 3]], np.int16)) (numpy 2.x, format 1.0),
        // header text written out by hand from the spec.
        let header = "{'descr': '<i2', 'fortran_order': False, 'shape': (1, 3), }";
        let mut h = header.to_string();
        let pad = (64 - (10 + h.len() + 1) % 64) % 64;
        h.push_str(&" ".repeat(pad));
        h.push('\n');
        let mut b = b"\x93NUMPY\x01\x00".to_vec();
        b.extend_from_slice(&(h.len() as u16).to_le_bytes());
        b.extend_from_slice(h.as_bytes());
        b.extend_from_slice(&[1, 0, 2, 0, 3, 0]);
        let (a, dt) = decode(&b, "t").unwrap();
        assert_eq!(a.shape.dims, vec![1, 3]);
        assert_eq!(a.data, ArrayData::S16(vec![1, 2, 3]));
        assert_eq!(dt.descr, "<i2");
        // Our encoder produces the same image.
        assert_eq!(encode(&a), b);
    }

    #[test]
    fn fortran_order_and_big_endian() {
        let h = "{'descr': '>u2', 'fortran_order': True, 'shape': (2, 2), }\n";
        let mut b = b"\x93NUMPY\x01\x00".to_vec();
        b.extend_from_slice(&(h.len() as u16).to_le_bytes());
        b.extend_from_slice(h.as_bytes());
        // Column-major [[1, 2], [3, 4]] = 1, 3, 2, 4, big-endian.
        b.extend_from_slice(&[0, 1, 0, 3, 0, 2, 0, 4]);
        let (a, _) = decode(&b, "t").unwrap();
        assert_eq!(a.data, ArrayData::U16(vec![1, 2, 3, 4]));
    }

    #[test]
    fn rejects_bad_input_without_panicking() {
        assert!(decode(b"", "t").is_err());
        assert!(decode(b"\x93NUMPY\x01\x00\xff\xff{", "t").is_err());
        let h = "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999), }";
        let mut b = b"\x93NUMPY\x01\x00".to_vec();
        b.extend_from_slice(&(h.len() as u16).to_le_bytes());
        b.extend_from_slice(h.as_bytes());
        assert!(decode(&b, "t").is_err());
        let h = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
        let mut b = b"\x93NUMPY\x01\x00".to_vec();
        b.extend_from_slice(&(h.len() as u16).to_le_bytes());
        b.extend_from_slice(h.as_bytes());
        b.extend_from_slice(&[0; 7]);
        let e = decode(&b, "t").unwrap_err().to_string();
        assert!(e.contains("8 bytes"), "{e}");
    }
}
