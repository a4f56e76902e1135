//! Values as bytes, for a fabric whose devices live in other processes (the MPI transport,
//! `src/cluster/mpi.rs`), and for handing arguments and outputs between ranks. The format is
//! private to one build of hlosim talking to itself, so it is as plain as it can be: every
//! array is its shape in HLO text (type, dims, dynamic bounds, layout: parsed back by the
//! HLO parser, so nothing is lost) and its little-endian payload, the bytes `.npy` stores.
//!
//! ```text
//! values := u32 count, value*
//! value  := 0u8 u32 len shape-text u64 len payload   (array)
//!         | 1u8 values                                (tuple)
//!         | 2u8                                       (token)
//! ```

use super::super::Value;
use crate::hlo::{ArrayData, ArrayLiteral, ArrayShape, Shape};

const ARRAY: u8 = 0;
const TUPLE: u8 = 1;
const TOKEN: u8 = 2;

/// The bytes of `values`, for [`decode`].
pub fn encode(values: &[Value]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + values.iter().map(payload_size).sum::<usize>());
    put_values(&mut out, values);
    out
}

/// The values [`encode`] wrote; an error says what in the bytes was wrong.
pub fn decode(bytes: &[u8]) -> Result<Vec<Value>, String> {
    let mut r = Reader { bytes, at: 0 };
    let v = r.values(0)?;
    if r.at != bytes.len() {
        return Err(format!("{} bytes follow the values", bytes.len() - r.at));
    }
    Ok(v)
}

fn payload_size(v: &Value) -> usize {
    match v {
        Value::Array(a) => crate::io::npy::payload_bytes(&a.data).len(),
        Value::Tuple(vs) => vs.iter().map(payload_size).sum(),
        Value::Token => 0,
    }
}

fn put_values(out: &mut Vec<u8>, values: &[Value]) {
    out.extend_from_slice(&(values.len() as u32).to_le_bytes());
    for v in values {
        match v {
            Value::Array(a) => {
                out.push(ARRAY);
                let shape = a.shape.to_string();
                out.extend_from_slice(&(shape.len() as u32).to_le_bytes());
                out.extend_from_slice(shape.as_bytes());
                let payload = crate::io::npy::payload_bytes(&a.data);
                out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
                out.extend_from_slice(&payload);
            }
            Value::Tuple(vs) => {
                out.push(TUPLE);
                put_values(out, vs);
            }
            Value::Token => out.push(TOKEN),
        }
    }
}

/// Tuples nest no deeper than this in a message (a corrupt message cannot recurse the
/// stack away).
const MAX_DEPTH: usize = 64;

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        match end {
            Some(e) => {
                let bytes: &'a [u8] = self.bytes;
                let s = &bytes[self.at..e];
                self.at = e;
                Ok(s)
            }
            None => Err(format!(
                "truncated: {n} bytes wanted at offset {} of {}",
                self.at,
                self.bytes.len()
            )),
        }
    }

    fn u32(&mut self) -> Result<u32, String> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64, String> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    fn values(&mut self, depth: usize) -> Result<Vec<Value>, String> {
        if depth > MAX_DEPTH {
            return Err(format!("tuples nested deeper than {MAX_DEPTH}"));
        }
        let n = self.u32()? as usize;
        // Every value takes at least one byte: a count beyond the rest is corrupt.
        if n > self.bytes.len() - self.at {
            return Err(format!("{n} values cannot fit in the rest of the message"));
        }
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let tag = self.take(1)?[0];
            out.push(match tag {
                ARRAY => Value::array(self.array()?),
                TUPLE => Value::Tuple(self.values(depth + 1)?),
                TOKEN => Value::Token,
                t => return Err(format!("unknown value tag {t}")),
            });
        }
        Ok(out)
    }

    fn array(&mut self) -> Result<ArrayLiteral, String> {
        let len = self.u32()? as usize;
        let text =
            std::str::from_utf8(self.take(len)?).map_err(|_| "a shape is not UTF-8".to_string())?;
        let shape: ArrayShape = match crate::hlo::parse_shape(text) {
            Ok(Shape::Array(s)) => s,
            Ok(other) => return Err(format!("'{other}' is not an array shape")),
            Err(e) => return Err(format!("bad shape '{text}': {e}")),
        };
        let size = self.u64()?;
        let payload = self.take(usize::try_from(size).map_err(|_| "payload too large")?)?;
        let n = shape.element_count();
        let mut data = ArrayData::zeros(shape.ty, n);
        let want = crate::io::npy::payload_bytes(&data).len();
        if want != payload.len() {
            return Err(format!(
                "{text} takes {want} bytes, the message has {}",
                payload.len()
            ));
        }
        fill(&mut data, payload);
        Ok(ArrayLiteral { shape, data })
    }
}

/// Copies a little-endian payload of the right size into `data`.
fn fill(data: &mut ArrayData, payload: &[u8]) {
    fn le<T: bytemuck::Pod>(v: &mut [T], payload: &[u8], unit: usize) {
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(v);
        bytes.copy_from_slice(payload);
        if cfg!(target_endian = "big") && unit > 1 {
            for c in bytes.chunks_exact_mut(unit) {
                c.reverse();
            }
        }
    }
    use ArrayData as D;
    match data {
        D::Pred(v) => {
            for (x, &b) in v.iter_mut().zip(payload) {
                *x = b != 0;
            }
        }
        D::S8(v) => le(v, payload, 1),
        D::U8(v) | D::Bits8(v) => le(v, payload, 1),
        D::S16(v) => le(v, payload, 2),
        D::U16(v) => le(v, payload, 2),
        D::F16(v) => le(v, payload, 2),
        D::BF16(v) => le(v, payload, 2),
        D::S32(v) => le(v, payload, 4),
        D::U32(v) => le(v, payload, 4),
        D::F32(v) => le(v, payload, 4),
        D::S64(v) => le(v, payload, 8),
        D::U64(v) => le(v, payload, 8),
        D::F64(v) => le(v, payload, 8),
        D::C64(v) => le(v, payload, 4),
        D::C128(v) => le(v, payload, 8),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hlo::ElementType;
    use half::bf16;

    fn arr(ty: ElementType, dims: &[i64], data: ArrayData) -> Value {
        Value::array(ArrayLiteral {
            shape: ArrayShape::new(ty, dims.to_vec()),
            data,
        })
    }

    #[test]
    fn every_kind_of_value_comes_back_bit_for_bit() {
        let nan = f32::from_bits(0x7fc0_1234);
        let values = vec![
            arr(ElementType::F32, &[3], ArrayData::F32(vec![1.5, -0.0, nan])),
            Value::Tuple(vec![
                arr(ElementType::Pred, &[2], ArrayData::Pred(vec![true, false])),
                Value::Token,
                arr(
                    ElementType::BF16,
                    &[1, 2],
                    ArrayData::BF16(vec![bf16::from_bits(0xffc1), bf16::MIN_POSITIVE]),
                ),
            ]),
            arr(ElementType::S64, &[], ArrayData::S64(vec![i64::MIN])),
            arr(
                ElementType::F8E4M3FN,
                &[2],
                ArrayData::Bits8(vec![0x7f, 0x01]),
            ),
        ];
        let bytes = encode(&values);
        let back = decode(&bytes).unwrap();
        assert_eq!(back.len(), values.len());
        for (a, b) in values.iter().zip(&back) {
            let (la, lb) = (a.leaves(), b.leaves());
            assert_eq!(la.len(), lb.len());
            for (x, y) in la.iter().zip(&lb) {
                assert_eq!(x.shape, y.shape);
                assert_eq!(
                    crate::io::npy::payload_bytes(&x.data),
                    crate::io::npy::payload_bytes(&y.data)
                );
            }
        }
        assert!(matches!(&back[1], Value::Tuple(t) if matches!(t[1], Value::Token)));
    }

    #[test]
    fn a_corrupt_message_is_an_error_not_a_panic() {
        let bytes = encode(&[arr(ElementType::F32, &[4], ArrayData::F32(vec![0.0; 4]))]);
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut long = bytes.clone();
        long.push(0);
        assert!(decode(&long).unwrap_err().contains("1 bytes follow"));
        // A shape that promises more elements than the payload holds.
        let mut lie = bytes.clone();
        let at = 4 + 1 + 4 + 4; // count, tag, shape length, "f32["
        lie[at] = b'5';
        assert!(
            decode(&lie).unwrap_err().contains("takes 20 bytes"),
            "{:?}",
            decode(&lie)
        );
        assert!(decode(&[1, 0, 0, 0, 9])
            .unwrap_err()
            .contains("unknown value tag 9"));
    }
}
