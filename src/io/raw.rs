//! Raw little-endian byte images of typed buffers: the bridge between hlosim's typed arrays
//! and byte-oriented formats (`.npy` payloads) and `bitcast-convert`.

use crate::hlo::{ArrayData, ElementType};
use half::{bf16, f16};
use num_complex::Complex;

/// The little-endian bytes of a buffer (pred as one byte 0/1; complex as real then imaginary;
/// sub-byte integers and 8-bit floats as one byte per element).
pub fn to_le_bytes(data: &ArrayData) -> Vec<u8> {
    use ArrayData as D;
    macro_rules! bytes {
        ($v:expr, $n:expr, |$x:ident| $e:expr) => {{
            let mut out = Vec::with_capacity($v.len() * $n);
            for &$x in $v.iter() {
                out.extend_from_slice(&$e);
            }
            out
        }};
    }
    match data {
        D::Pred(v) => v.iter().map(|&b| b as u8).collect(),
        D::S8(v) => v.iter().map(|&b| b as u8).collect(),
        D::U8(v) | D::Bits8(v) => v.clone(),
        D::S16(v) => bytes!(v, 2, |x| x.to_le_bytes()),
        D::S32(v) => bytes!(v, 4, |x| x.to_le_bytes()),
        D::S64(v) => bytes!(v, 8, |x| x.to_le_bytes()),
        D::U16(v) => bytes!(v, 2, |x| x.to_le_bytes()),
        D::U32(v) => bytes!(v, 4, |x| x.to_le_bytes()),
        D::U64(v) => bytes!(v, 8, |x| x.to_le_bytes()),
        D::F16(v) => bytes!(v, 2, |x| x.to_bits().to_le_bytes()),
        D::BF16(v) => bytes!(v, 2, |x| x.to_bits().to_le_bytes()),
        D::F32(v) => bytes!(v, 4, |x| x.to_le_bytes()),
        D::F64(v) => bytes!(v, 8, |x| x.to_le_bytes()),
        D::C64(v) => {
            let mut out = Vec::with_capacity(v.len() * 8);
            for z in v {
                out.extend_from_slice(&z.re.to_le_bytes());
                out.extend_from_slice(&z.im.to_le_bytes());
            }
            out
        }
        D::C128(v) => {
            let mut out = Vec::with_capacity(v.len() * 16);
            for z in v {
                out.extend_from_slice(&z.re.to_le_bytes());
                out.extend_from_slice(&z.im.to_le_bytes());
            }
            out
        }
    }
}

fn identity<T>(x: T) -> T {
    x
}

/// Builds a buffer of element type `ty` from little-endian bytes. `big_endian` swaps each
/// element's bytes first (for `.npy` files written with `>`). The length must be a whole
/// number of elements.
pub fn from_bytes(ty: ElementType, bytes: &[u8], big_endian: bool) -> Result<ArrayData, String> {
    use ElementType as E;
    let size = ty.byte_size();
    if ty == E::Token || size == 0 {
        return Err("a token has no array data".into());
    }
    if !bytes.len().is_multiple_of(size) {
        return Err(format!(
            "{} bytes is not a whole number of {}-byte {} elements",
            bytes.len(),
            size,
            ty
        ));
    }
    macro_rules! read {
        ($t:ty, $n:expr, $conv:expr) => {{
            bytes
                .chunks_exact($n)
                .map(|c| {
                    let mut a = [0u8; $n];
                    a.copy_from_slice(c);
                    if big_endian {
                        a.reverse();
                    }
                    $conv(<$t>::from_le_bytes(a))
                })
                .collect()
        }};
    }
    Ok(match ty {
        E::Pred => ArrayData::Pred(bytes.iter().map(|&b| b != 0).collect()),
        E::S2 | E::S4 | E::S8 => ArrayData::S8(bytes.iter().map(|&b| b as i8).collect()),
        E::U2 | E::U4 | E::U8 => ArrayData::U8(bytes.to_vec()),
        E::S16 => ArrayData::S16(read!(i16, 2, identity)),
        E::S32 => ArrayData::S32(read!(i32, 4, identity)),
        E::S64 => ArrayData::S64(read!(i64, 8, identity)),
        E::U16 => ArrayData::U16(read!(u16, 2, identity)),
        E::U32 => ArrayData::U32(read!(u32, 4, identity)),
        E::U64 => ArrayData::U64(read!(u64, 8, identity)),
        E::F16 => ArrayData::F16(read!(u16, 2, f16::from_bits)),
        E::BF16 => ArrayData::BF16(read!(u16, 2, bf16::from_bits)),
        E::F32 => ArrayData::F32(read!(f32, 4, identity)),
        E::F64 => ArrayData::F64(read!(f64, 8, identity)),
        E::C64 => {
            // Each part is byte-swapped on its own for big-endian data.
            let parts: Vec<f32> = read!(f32, 4, identity);
            ArrayData::C64(
                parts
                    .chunks_exact(2)
                    .map(|p| Complex::new(p[0], p[1]))
                    .collect(),
            )
        }
        E::C128 => {
            let parts: Vec<f64> = read!(f64, 8, identity);
            ArrayData::C128(
                parts
                    .chunks_exact(2)
                    .map(|p| Complex::new(p[0], p[1]))
                    .collect(),
            )
        }
        t if t.is_narrow_float() => ArrayData::Bits8(bytes.to_vec()),
        t => return Err(format!("element type {t} has no byte representation")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_byte_order() {
        let d = ArrayData::S32(vec![1, -2]);
        let b = to_le_bytes(&d);
        assert_eq!(b, vec![1, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff]);
        assert_eq!(from_bytes(ElementType::S32, &b, false).unwrap(), d);
        assert_eq!(
            from_bytes(ElementType::U16, &[0x12, 0x34], true).unwrap(),
            ArrayData::U16(vec![0x1234])
        );
        assert!(from_bytes(ElementType::F32, &[0; 6], false).is_err());
        let c = ArrayData::C64(vec![Complex::new(1.0, -2.0)]);
        assert_eq!(
            from_bytes(ElementType::C64, &to_le_bytes(&c), false).unwrap(),
            c
        );
    }
}
