use super::*;
use crate::hlo::parse_module;

fn module(body: &str) -> Module {
    parse_module(&format!("HloModule m\n\nENTRY e {{\n{body}\n}}\n")).unwrap()
}

#[test]
fn parameters_meeting_directly_or_through_position_keeping_ops_are_paired() {
    let m = module(
        "  a = f32[16] parameter(0)\n  b = f32[16] parameter(1)\n  c = f32[4,4] parameter(2)\n  \
         d = bf16[16] parameter(3)\n  e = f32[16] parameter(4)\n  p = pred[16] parameter(5)\n  \
         lt = pred[16] compare(a, b), direction=LT, type=TOTALORDER\n  \
         r = f32[16] reshape(c)\n  s = f32[16] add(r, b)\n  \
         dc = f32[16] convert(d)\n  t = f32[16] multiply(a, dc)\n  \
         n = f32[16] negate(e)\n  u = f32[16] subtract(n, a)\n  \
         v = f32[16] select(p, e, a)\n  w = f32[16] maximum(b, a)\n  \
         ROOT o = (pred[16], f32[16], f32[16], f32[16], f32[16], f32[16]) tuple(lt, s, t, u, v, w)",
    );
    // (0,1) from the compare; (1,2) through a reshape; a with the bf16 parameter d is not a
    // pair (different types); negate changes values, so (0,4) comes only from the select;
    // maximum(b, a) repeats (0,1).
    assert_eq!(meeting_pairs(&m), vec![(0, 1), (1, 2), (0, 4)]);
}

#[test]
fn small_tensors_get_every_kind_once_and_seeds_are_reproducible() {
    for seed in 0..20 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let got = positions(&mut rng, 16, 1.0 / 16.0);
        for kind in PairKind::ALL {
            assert!(got.iter().any(|&(_, k)| k == kind), "seed {seed}: {kind:?}");
        }
        let mut idx: Vec<usize> = got.iter().map(|&(i, _)| i).collect();
        idx.sort_unstable();
        idx.dedup();
        assert_eq!(idx.len(), got.len(), "distinct positions");
        assert!(idx.iter().all(|&i| i < 16));
        let mut again = ChaCha8Rng::seed_from_u64(seed);
        assert_eq!(positions(&mut again, 16, 1.0 / 16.0), got);
    }
    // Fewer elements than kinds: every element planted once.
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    assert_eq!(positions(&mut rng, 3, 0.0).len(), 3);
}

#[test]
fn next_up_is_one_ulp_toward_infinity_in_each_dtype() {
    // Hand-derived: 1 + 2^-23 (f32), 1 + 2^-10 (f16), 1 + 2^-7 (bf16), 1 + 2^-52 (f64);
    // below -1 the step is toward zero: -1 + 2^-24 (f32).
    assert_eq!(next_up(ElementType::F32, 1.0), 1.0 + 2f64.powi(-23));
    assert_eq!(next_up(ElementType::F32, -1.0), -1.0 + 2f64.powi(-24));
    assert_eq!(next_up(ElementType::F16, 1.0), 1.0 + 2f64.powi(-10));
    assert_eq!(next_up(ElementType::BF16, 1.0), 1.0 + 2f64.powi(-7));
    assert_eq!(next_up(ElementType::F64, 1.0), 1.0 + 2f64.powi(-52));
}

#[test]
fn planted_values_are_shared_pairs_of_the_table() {
    let m = module(
        "  a = f32[16] parameter(0)\n  b = f32[16] parameter(1)\n  \
         ROOT lt = pred[16] compare(a, b), direction=LT, type=TOTALORDER",
    );
    let zeros = || Value::array(crate::eval::reduce::testutil::f32s(&[16], &[2.0; 16]));
    let mut args = vec![zeros(), zeros()];
    plant(&m, &mut args, 7, 1.0 / 16.0, &[]);
    let f = |v: &Value| match &v.as_array().unwrap().data {
        ArrayData::F32(x) => x.clone(),
        _ => unreachable!(),
    };
    let (a, b) = (f(&args[0]), f(&args[1]));
    let pairs: Vec<(u32, u32)> = a
        .iter()
        .zip(&b)
        .map(|(x, y)| (x.to_bits(), y.to_bits()))
        .collect();
    let has = |x: f32, y: f32| pairs.contains(&(x.to_bits(), y.to_bits()));
    assert!(has(f32::NAN, f32::NAN));
    assert!(has(f32::NAN, -f32::NAN));
    assert!(has(-0.0, 0.0) && has(0.0, -0.0));
    assert!(has(f32::INFINITY, f32::INFINITY) && has(f32::NEG_INFINITY, f32::INFINITY));
    assert!(has(f32::from_bits(1), 0.0));
    assert!(has(1.0, 1.0), "the table point without tables");
    assert!(a.iter().zip(&b).any(|(x, y)| x.is_finite()
        && y.to_bits() == x.to_bits() + 1
        && *x > 0.0
        || (*x < 0.0 && y.to_bits() + 1 == x.to_bits())));
}
