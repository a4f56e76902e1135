//! rng-bit-generator, bit-exact with XLA:CPU.
//!
//! XLA expands the op in `RngBitGeneratorExpander` into the builders of `prng.cc`; this file
//! computes the same bits directly:
//! - `rng_three_fry` (state u64[2] = [key, counter]): ThreeFry-2x32 with 20 rounds. For
//!   outputs of 32 bits or less the shape is split in halves along its first even dimension
//!   (or its largest one when none is even); each counter value yields two words that fill
//!   positions 2h and 2h+1 of that dimension. 64-bit outputs use one counter per element
//!   (low word | high word << 32). The counter advances by the number of counters used.
//! - `rng_philox` (state u64[2] = [key, counter] or u64[3] = [key, counter_lo, counter_hi]):
//!   Philox-4x32 with 10 rounds over a 128-bit counter; each counter value yields four u32s
//!   (or two u64s) laid out consecutively. With a u64[2] state the 128-bit counter is
//!   (low = state[1], high = state[0]) and only the low half is written back; with u64[3]
//!   it is (state[1], state[2]) and both halves are written back.
//! - `rng_default` is Philox on XLA:CPU (checked with the oracle: identical bits and state).
//!
//! Outputs narrower than 32 bits take the low bits of the 32-bit words; the output element
//! type only reinterprets the bits of the unsigned type of its width (f32 gets the u32 bits,
//! s64 the u64 bits, ...), as XLA:CPU does. pred and complex outputs are rejected, as in XLA.

use super::{err, EvalError, KResult, Value};
use crate::hlo::{ArrayData, ArrayLiteral, ArrayShape, ElementType, Instruction, RngAlgorithm};
use half::{bf16, f16};
use rayon::prelude::*;

/// Outputs with at least this many elements are generated in parallel.
const PARALLEL_THRESHOLD: usize = 1 << 16;

/// Evaluates `(state', bits) = rng-bit-generator(state), algorithm=...`.
pub fn rng_bit_generator(ins: &Instruction, ops: &[&Value]) -> KResult {
    let state = match ops {
        [s] => s.as_array()?,
        _ => return err(format!("expects 1 operand (the state), got {}", ops.len())),
    };
    let state = match &state.data {
        ArrayData::U64(v) if state.shape.rank() == 1 => v.as_slice(),
        _ => {
            return err(format!(
                "the state must be a u64 vector, got {}",
                state.shape
            ))
        }
    };
    let out_shape = match ins.shape.tuple_elements() {
        [_, crate::hlo::Shape::Array(a)] => a.clone(),
        _ => {
            return err(format!(
                "the result must be a tuple (state, array), got {}",
                ins.shape
            ))
        }
    };
    let algorithm = ins.attrs.rng_algorithm.unwrap_or(RngAlgorithm::Default);
    let (new_state, data) = generate(algorithm, state, &out_shape)?;
    let state_shape = ArrayShape::new(ElementType::U64, vec![new_state.len() as i64]);
    Ok(Value::Tuple(vec![
        Value::array(ArrayLiteral {
            shape: state_shape,
            data: ArrayData::U64(new_state),
        }),
        Value::array(ArrayLiteral {
            shape: out_shape,
            data,
        }),
    ]))
}

/// The bits XLA generates: the new state and the output buffer for `shape` (its element
/// type decides the word width). Public so other tools (e.g. input generators that want
/// XLA's streams) can call it without building an instruction.
pub fn generate(
    algorithm: RngAlgorithm,
    state: &[u64],
    shape: &ArrayShape,
) -> Result<(Vec<u64>, ArrayData), EvalError> {
    let width = xla_bit_width(shape.ty)?;
    let dims: Vec<usize> = shape.dims.iter().map(|&d| d.max(0) as usize).collect();
    let n = shape
        .checked_element_count()
        .ok_or_else(|| EvalError::new(format!("output shape {shape} is too large")))?;
    let algorithm = match algorithm {
        RngAlgorithm::Default => RngAlgorithm::Philox,
        a => a,
    };
    let (new_state, words) = match algorithm {
        RngAlgorithm::ThreeFry => {
            let [key, counter] = *state else {
                return err(format!(
                    "rng_three_fry needs a u64[2] state, got u64[{}]",
                    state.len()
                ));
            };
            let (words, used) = if width == 64 {
                (Words::W64(threefry_64(key, counter, n)), n as u64)
            } else {
                let (w, used) = threefry_32(key, counter, &dims);
                (Words::W32(w), used)
            };
            (vec![key, counter.wrapping_add(used)], words)
        }
        RngAlgorithm::Philox => {
            let (key, counter) = match *state {
                [key, c] => (key, ((key as u128) << 64) | c as u128),
                [key, lo, hi] => (key, ((hi as u128) << 64) | lo as u128),
                _ => {
                    return err(format!(
                        "rng_philox needs a u64[2] or u64[3] state, got u64[{}]",
                        state.len()
                    ))
                }
            };
            let (words, blocks) = if width == 64 {
                (Words::W64(philox_64(key, counter, n)), n.div_ceil(2))
            } else {
                (Words::W32(philox_32(key, counter, n)), n.div_ceil(4))
            };
            let next = counter.wrapping_add(blocks as u128);
            let new_state = if state.len() == 2 {
                vec![key, next as u64]
            } else {
                vec![key, next as u64, (next >> 64) as u64]
            };
            (new_state, words)
        }
        RngAlgorithm::Default => unreachable!("mapped to Philox above"),
    };
    Ok((new_state, pack(shape.ty, words)?))
}

/// Generated words before they are reinterpreted as the output type.
enum Words {
    W32(Vec<u32>),
    W64(Vec<u64>),
}

/// XLA's `BitWidth` of an element type (sub-byte types count their real width).
fn xla_bit_width(ty: ElementType) -> Result<u32, EvalError> {
    use ElementType as E;
    Ok(match ty {
        E::S2 | E::U2 => 2,
        E::S4 | E::U4 | E::F4E2M1FN => 4,
        E::Pred | E::Token | E::C64 | E::C128 => {
            return err(format!(
                "rng-bit-generator cannot produce {ty} values (XLA rejects them too)"
            ))
        }
        t => t.bit_width() as u32,
    })
}

/// Reinterprets the generated words as elements of `ty`.
fn pack(ty: ElementType, words: Words) -> Result<ArrayData, EvalError> {
    use ElementType as E;
    Ok(match (ty, words) {
        (E::U64, Words::W64(v)) => ArrayData::U64(v),
        (E::S64, Words::W64(v)) => ArrayData::S64(v.into_iter().map(|w| w as i64).collect()),
        (E::F64, Words::W64(v)) => ArrayData::F64(v.into_iter().map(f64::from_bits).collect()),
        (E::U32, Words::W32(v)) => ArrayData::U32(v),
        (E::S32, Words::W32(v)) => ArrayData::S32(v.into_iter().map(|w| w as i32).collect()),
        (E::F32, Words::W32(v)) => ArrayData::F32(v.into_iter().map(f32::from_bits).collect()),
        (E::U16, Words::W32(v)) => ArrayData::U16(v.into_iter().map(|w| w as u16).collect()),
        (E::S16, Words::W32(v)) => ArrayData::S16(v.into_iter().map(|w| w as i16).collect()),
        (E::F16, Words::W32(v)) => {
            ArrayData::F16(v.into_iter().map(|w| f16::from_bits(w as u16)).collect())
        }
        (E::BF16, Words::W32(v)) => {
            ArrayData::BF16(v.into_iter().map(|w| bf16::from_bits(w as u16)).collect())
        }
        (E::U8, Words::W32(v)) => ArrayData::U8(v.into_iter().map(|w| w as u8).collect()),
        (E::S8, Words::W32(v)) => ArrayData::S8(v.into_iter().map(|w| w as i8).collect()),
        (E::U4, Words::W32(v)) => ArrayData::U8(v.into_iter().map(|w| (w & 0xf) as u8).collect()),
        (E::U2, Words::W32(v)) => ArrayData::U8(v.into_iter().map(|w| (w & 0x3) as u8).collect()),
        // Signed sub-byte values are stored sign-extended in an i8.
        (E::S4, Words::W32(v)) => {
            ArrayData::S8(v.into_iter().map(|w| ((w as u8) << 4) as i8 >> 4).collect())
        }
        (E::S2, Words::W32(v)) => {
            ArrayData::S8(v.into_iter().map(|w| ((w as u8) << 6) as i8 >> 6).collect())
        }
        (E::F4E2M1FN, Words::W32(v)) => {
            ArrayData::Bits8(v.into_iter().map(|w| (w & 0xf) as u8).collect())
        }
        (t, Words::W32(v)) if t.is_narrow_float() => {
            ArrayData::Bits8(v.into_iter().map(|w| w as u8).collect())
        }
        (t, _) => return err(format!("rng-bit-generator cannot produce {t} values")),
    })
}

/// ThreeFry-2x32, 20 rounds, as in XLA's `ThreeFry2x32`.
pub fn threefry2x32(x: [u32; 2], key: [u32; 2]) -> [u32; 2] {
    const ROT: [u32; 8] = [13, 15, 26, 6, 17, 29, 16, 24];
    let ks = [key[0], key[1], 0x1BD1_1BDA ^ key[0] ^ key[1]];
    let mut x0 = x[0].wrapping_add(ks[0]);
    let mut x1 = x[1].wrapping_add(ks[1]);
    for i in 0..5usize {
        let rots = if i % 2 == 0 { &ROT[0..4] } else { &ROT[4..8] };
        for &r in rots {
            x0 = x0.wrapping_add(x1);
            x1 = x1.rotate_left(r) ^ x0;
        }
        x0 = x0.wrapping_add(ks[(i + 1) % 3]);
        x1 = x1.wrapping_add(ks[(i + 2) % 3]).wrapping_add(i as u32 + 1);
    }
    [x0, x1]
}

fn split_u64(v: u64) -> [u32; 2] {
    [v as u32, (v >> 32) as u32]
}

/// ThreeFry words for a ≤32-bit output of shape `dims`; returns the words and how many
/// counters were consumed (the element count of XLA's "half shape").
fn threefry_32(key: u64, counter: u64, dims: &[usize]) -> (Vec<u32>, u64) {
    let key = split_u64(key);
    let word = |c: u64| threefry2x32(split_u64(c), key);
    if dims.is_empty() {
        // A scalar uses the half shape [1]: one counter, first word.
        return (vec![word(counter)[0]], 1);
    }
    // XLA's SplitShapeIntoHalves: the first even dimension, else the first largest one.
    let split = dims.iter().position(|&d| d % 2 == 0).unwrap_or_else(|| {
        let mut best = 0;
        for (i, &d) in dims.iter().enumerate() {
            if d > dims[best] {
                best = i;
            }
        }
        best
    });
    let d = dims[split];
    let half = d.div_ceil(2);
    let outer: usize = dims[..split].iter().product();
    let inner: usize = dims[split + 1..].iter().product();
    let n = outer * d * inner;
    let mut out = vec![0u32; n];
    // One outer slab: d·inner output words from half·inner counters.
    let fill = |o: usize, slab: &mut [u32]| {
        for h in 0..half {
            for i in 0..inner {
                let c = counter.wrapping_add(((o * half + h) * inner + i) as u64);
                let w = word(c);
                for (k, wk) in w.iter().enumerate() {
                    let j = 2 * h + k;
                    if j < d {
                        slab[j * inner + i] = *wk;
                    }
                }
            }
        }
    };
    let slab_len = d * inner;
    if slab_len > 0 {
        if n >= PARALLEL_THRESHOLD {
            out.par_chunks_mut(slab_len)
                .enumerate()
                .for_each(|(o, s)| fill(o, s));
        } else {
            out.chunks_mut(slab_len)
                .enumerate()
                .for_each(|(o, s)| fill(o, s));
        }
    }
    (out, (outer * half * inner) as u64)
}

/// ThreeFry words for a 64-bit output of `n` elements: one counter per element.
fn threefry_64(key: u64, counter: u64, n: usize) -> Vec<u64> {
    let key = split_u64(key);
    let f = |i: usize| {
        let [lo, hi] = threefry2x32(split_u64(counter.wrapping_add(i as u64)), key);
        lo as u64 | (hi as u64) << 32
    };
    if n >= PARALLEL_THRESHOLD {
        (0..n).into_par_iter().map(f).collect()
    } else {
        (0..n).map(f).collect()
    }
}

/// Philox-4x32, 10 rounds, as in XLA's `Philox4x32`.
pub fn philox4x32(x: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    const W_A: u32 = 0x9E37_79B9;
    const W_B: u32 = 0xBB67_AE85;
    const M_A: u64 = 0xD251_1F53;
    const M_B: u64 = 0xCD9E_8D57;
    let (mut x, mut k) = (x, key);
    for _ in 0..10 {
        let p0 = x[0] as u64 * M_A;
        let p1 = x[2] as u64 * M_B;
        x = [
            (p1 >> 32) as u32 ^ x[1] ^ k[0],
            p1 as u32,
            (p0 >> 32) as u32 ^ x[3] ^ k[1],
            p0 as u32,
        ];
        k = [k[0].wrapping_add(W_A), k[1].wrapping_add(W_B)];
    }
    x
}

fn philox_block(key: [u32; 2], counter: u128) -> [u32; 4] {
    let c = [
        counter as u32,
        (counter >> 32) as u32,
        (counter >> 64) as u32,
        (counter >> 96) as u32,
    ];
    philox4x32(c, key)
}

/// Philox words for a ≤32-bit output of `n` elements: four per counter, consecutively.
fn philox_32(key: u64, counter: u128, n: usize) -> Vec<u32> {
    let key = split_u64(key);
    let mut out = vec![0u32; n];
    let fill = |(b, chunk): (usize, &mut [u32])| {
        let w = philox_block(key, counter.wrapping_add(b as u128));
        chunk.copy_from_slice(&w[..chunk.len()]);
    };
    if n >= PARALLEL_THRESHOLD {
        out.par_chunks_mut(4).enumerate().for_each(fill);
    } else {
        out.chunks_mut(4).enumerate().for_each(fill);
    }
    out
}

/// Philox words for a 64-bit output of `n` elements: two per counter, consecutively.
fn philox_64(key: u64, counter: u128, n: usize) -> Vec<u64> {
    let key = split_u64(key);
    let mut out = vec![0u64; n];
    let fill = |(b, chunk): (usize, &mut [u64])| {
        let w = philox_block(key, counter.wrapping_add(b as u128));
        let pair = [
            w[0] as u64 | (w[1] as u64) << 32,
            w[2] as u64 | (w[3] as u64) << 32,
        ];
        chunk.copy_from_slice(&pair[..chunk.len()]);
    };
    if n >= PARALLEL_THRESHOLD {
        out.par_chunks_mut(2).enumerate().for_each(fill);
    } else {
        out.chunks_mut(2).enumerate().for_each(fill);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::Evaluator;
    use crate::hlo::parse_module;

    const S: [u64; 2] = [0x0123_4567_89ab_cdef, 0xfedc_ba98_7654_3210];

    /// Runs `ROOT r = (state, ty[dims]) rng-bit-generator(s), algorithm=alg` through the
    /// evaluator and returns the new state and the output array.
    fn run(alg: &str, out: &str, state: &[u64]) -> (Vec<u64>, ArrayData) {
        let st = format!("u64[{}]", state.len());
        let text = format!(
            "HloModule m\nENTRY e {{\n  s = {st} parameter(0)\n  \
             ROOT r = ({st}, {out}) rng-bit-generator(s), algorithm={alg}\n}}\n"
        );
        let m = parse_module(&text).expect("test module parses");
        let arg = Value::array(ArrayLiteral {
            shape: ArrayShape::new(ElementType::U64, vec![state.len() as i64]),
            data: ArrayData::U64(state.to_vec()),
        });
        let v = Evaluator::new(&m).run(vec![arg]).expect("evaluates");
        let Value::Tuple(t) = v else {
            panic!("tuple result expected")
        };
        let ArrayData::U64(s) = &t[0].as_array().unwrap().data else {
            panic!("u64 state expected")
        };
        (s.clone(), t[1].as_array().unwrap().data.clone())
    }

    fn u32s(d: &ArrayData) -> Vec<u32> {
        match d {
            ArrayData::U32(v) => v.clone(),
            ArrayData::S32(v) => v.iter().map(|&x| x as u32).collect(),
            ArrayData::F32(v) => v.iter().map(|x| x.to_bits()).collect(),
            other => panic!("32-bit data expected, got {other:?}"),
        }
    }

    // Every expected value below was produced by XLA:CPU (jaxlib, via
    // /work/shared/tools/xla_oracle.py run) on the same module and state.

    #[test]
    fn threefry_u32_odd_shape_splits_the_largest_dimension() {
        // u32[3,5]: no even dimension, so dimension 1 (5) is split into ceil(5/2) = 3 pairs.
        let (s, d) = run("rng_three_fry", "u32[3,5]", &S);
        assert_eq!(s, vec![S[0], S[1] + 9]);
        assert_eq!(
            u32s(&d),
            vec![
                2933171071, 288411921, 3284946178, 2039365678, 2934253134, 1236338088, 2936704409,
                3907330576, 3723051394, 4037253752, 3802624568, 1077787540, 2900944550, 3285999743,
                1456438002
            ]
        );
    }

    #[test]
    fn threefry_u32_splits_the_first_even_dimension() {
        let (s, d) = run("rng_three_fry", "u32[4,3]", &S);
        assert_eq!(s, vec![S[0], S[1] + 6]);
        assert_eq!(
            u32s(&d),
            vec![
                2933171071, 3284946178, 2934253134, 288411921, 2039365678, 2961824378, 1236338088,
                3907330576, 4037253752, 2936704409, 3723051394, 3709374182
            ]
        );
        let (s, d) = run("rng_three_fry", "u32[1,3,1,2]", &S);
        assert_eq!(s, vec![S[0], S[1] + 3]);
        assert_eq!(
            u32s(&d),
            vec![2933171071, 288411921, 3284946178, 2039365678, 2934253134, 2961824378]
        );
    }

    #[test]
    fn threefry_scalar_s32_and_empty() {
        let (s, d) = run("rng_three_fry", "u32[]", &S);
        assert_eq!((s, u32s(&d)), (vec![S[0], S[1] + 1], vec![2933171071]));
        let (s, d) = run("rng_three_fry", "s32[3]", &S);
        assert_eq!(s, vec![S[0], S[1] + 2]);
        assert_eq!(u32s(&d), vec![2933171071, 288411921, 3284946178]);
        let (s, d) = run("rng_three_fry", "u32[6,0]", &S);
        assert_eq!((s, d.len()), (S.to_vec(), 0));
    }

    #[test]
    fn threefry_u64_and_narrow() {
        let (s, d) = run("rng_three_fry", "u64[5]", &S);
        assert_eq!(s, vec![S[0], S[1] + 5]);
        let ArrayData::U64(v) = d else { panic!() };
        assert_eq!(
            v,
            vec![
                1238719771404706687,
                8759008894879812866,
                12720938842939795022,
                12613049395910346152,
                15990383982464541200
            ]
        );
        let (s, d) = run("rng_three_fry", "u16[2,3]", &S);
        assert_eq!(s, vec![S[0], S[1] + 3]);
        let ArrayData::U16(v) = d else { panic!() };
        assert_eq!(v, vec![41855, 19714, 9806, 53521, 16430, 55930]);
        // s4: the raw nibbles XLA returned were [15, 1, 2, 14, 14].
        let (_, d) = run("rng_three_fry", "s4[5]", &S);
        let ArrayData::S8(v) = d else { panic!() };
        assert_eq!(v, vec![-1, 1, 2, -2, -2]);
    }

    #[test]
    fn philox_u32_partial_block_and_default_is_philox() {
        let want = vec![
            516242754, 3483603125, 4062402306, 3877632279, 3410436889, 3598874490, 2694609816,
        ];
        let (s, d) = run("rng_philox", "u32[7]", &S);
        assert_eq!((s, u32s(&d)), (vec![S[0], S[1] + 2], want.clone()));
        let (s, d) = run("rng_default", "u32[2,3]", &S);
        assert_eq!((s, u32s(&d)), (vec![S[0], S[1] + 2], want[..6].to_vec()));
        let (s, d) = run("rng_default", "f32[3]", &S);
        assert_eq!((s, u32s(&d)), (vec![S[0], S[1] + 1], want[..3].to_vec()));
    }

    #[test]
    fn philox_u64_and_narrow() {
        let (s, d) = run("rng_philox", "u64[5]", &S);
        assert_eq!(s, vec![S[0], S[1] + 3]);
        let ArrayData::U64(v) = d else { panic!() };
        assert_eq!(
            v,
            vec![
                14961961494634642754,
                16654303828281349890,
                15457048240369115929,
                3480894975457917848,
                4475342623592406345
            ]
        );
        let (_, d) = run("rng_philox", "u8[6]", &S);
        let ArrayData::U8(v) = d else { panic!() };
        assert_eq!(v, vec![66, 181, 2, 23, 25, 122]);
        let (_, d) = run("rng_philox", "u4[5]", &S);
        let ArrayData::U8(v) = d else { panic!() };
        assert_eq!(v, vec![2, 5, 2, 7, 9]);
        let (s, d) = run("rng_philox", "u64[1]", &[1, 2, 3]);
        assert_eq!(s, vec![1, 3, 3]);
        let ArrayData::U64(v) = d else { panic!() };
        assert_eq!(v, vec![5869932932755744586]);
    }

    #[test]
    fn philox_counter_carries_into_the_high_word() {
        // u64[3]: the 128-bit counter (lo = 2^64-1, hi = 0xff) carries into hi.
        let st = [0x0123_4567_89ab_cdef, u64::MAX, 0xff];
        let (s, d) = run("rng_philox", "u32[5]", &st);
        assert_eq!(s, vec![st[0], 1, 256]);
        assert_eq!(
            u32s(&d),
            vec![995836205, 1128641479, 3543886930, 1485062378, 959183558]
        );
        // u64[2]: the high word is the key; only the low word is written back.
        let st = [0x0123_4567_89ab_cdef, u64::MAX];
        let (s, d) = run("rng_philox", "u32[5]", &st);
        assert_eq!(s, vec![st[0], 1]);
        assert_eq!(
            u32s(&d),
            vec![1105943027, 812877280, 1535849353, 2724394620, 1879495268]
        );
    }

    #[test]
    fn large_outputs_match_the_serial_path() {
        // The parallel path (≥ 64K elements) must produce the same stream as the serial one:
        // the first 7 words equal the small-shape oracle result above.
        let shape = ArrayShape::new(ElementType::U32, vec![1 << 17]);
        let (s, d) = generate(RngAlgorithm::Philox, &S, &shape).unwrap();
        assert_eq!(s, vec![S[0], S[1] + (1 << 15)]);
        assert_eq!(
            u32s(&d)[..7],
            [516242754, 3483603125, 4062402306, 3877632279, 3410436889, 3598874490, 2694609816]
        );
        // ThreeFry u32[n] with n even splits dimension 0, so counter h fills words 2h and
        // 2h+1 whatever n is: the prefix of a large output equals a small serial output.
        let small = generate(
            RngAlgorithm::ThreeFry,
            &S,
            &ArrayShape::new(ElementType::U32, vec![6]),
        )
        .unwrap()
        .1;
        let big = generate(
            RngAlgorithm::ThreeFry,
            &S,
            &ArrayShape::new(ElementType::U32, vec![1 << 17]),
        )
        .unwrap()
        .1;
        assert_eq!(u32s(&small)[..], u32s(&big)[..6]);
    }

    #[test]
    fn large_shapes_match_xla_checksums() {
        // XLA:CPU outputs for state S, summarised as Σ bits[i]·(i+1) mod 2^64 (computed with
        // numpy on the oracle's output), with the new state. Covers the parallel paths, the
        // BERT corpus shapes, and a split on a middle dimension with an odd size.
        let cases: [(RngAlgorithm, ElementType, &[i64], u64, u64); 6] = [
            (
                RngAlgorithm::ThreeFry,
                ElementType::U32,
                &[3, 257, 101],
                18364758544493103807,
                6490815771283258292,
            ),
            (
                RngAlgorithm::Philox,
                ElementType::U64,
                &[70001],
                18364758544493099721,
                15764832701218406531,
            ),
            (
                RngAlgorithm::ThreeFry,
                ElementType::U16,
                &[2, 40001],
                18364758544493104721,
                104811029479236,
            ),
            (
                RngAlgorithm::Default,
                ElementType::U32,
                &[1, 2, 128, 128],
                18364758544493072912,
                1154815761174896955,
            ),
            (
                RngAlgorithm::ThreeFry,
                ElementType::U32,
                &[1, 128, 16],
                18364758544493065744,
                4610032956742235,
            ),
            (
                RngAlgorithm::ThreeFry,
                ElementType::U64,
                &[3, 30001],
                18364758544493154723,
                7068918041307318281,
            ),
        ];
        for (alg, ty, dims, state1, checksum) in cases {
            let shape = ArrayShape::new(ty, dims.to_vec());
            let (s, d) = generate(alg, &S, &shape).unwrap();
            let words: Vec<u64> = match d {
                ArrayData::U64(v) => v,
                ArrayData::U32(v) => v.into_iter().map(u64::from).collect(),
                ArrayData::U16(v) => v.into_iter().map(u64::from).collect(),
                other => panic!("{other:?}"),
            };
            let sum = words.iter().enumerate().fold(0u64, |acc, (i, &w)| {
                acc.wrapping_add(w.wrapping_mul(i as u64 + 1))
            });
            assert_eq!((s, sum), (vec![S[0], state1], checksum), "{alg:?} {shape}");
        }
    }

    #[test]
    fn bad_states_and_types_are_errors() {
        let shape = ArrayShape::new(ElementType::U32, vec![4]);
        let e = generate(RngAlgorithm::ThreeFry, &[1, 2, 3], &shape).unwrap_err();
        assert!(e.message.contains("u64[2] state"), "{}", e.message);
        let e = generate(RngAlgorithm::Philox, &[1], &shape).unwrap_err();
        assert!(e.message.contains("u64[2] or u64[3]"), "{}", e.message);
        let pred = ArrayShape::new(ElementType::Pred, vec![4]);
        let e = generate(RngAlgorithm::Philox, &S, &pred).unwrap_err();
        assert!(e.message.contains("pred"), "{}", e.message);
    }
}
