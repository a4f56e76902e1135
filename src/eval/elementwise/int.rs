//! Integer element semantics shared by the elementwise kernels: XLA's wrapping arithmetic,
//! its division and remainder rules for zero divisors and `MIN / -1`, and its shift rules for
//! out-of-range amounts. One trait, implemented for every integer storage type, so each
//! kernel is written once and monomorphised per type.

/// An integer storage type with XLA's elementwise semantics.
pub(crate) trait XInt:
    Copy + Send + Sync + PartialOrd + Eq + bytemuck::Pod + 'static
{
    /// Whether the type is signed (drives comparison, shifts and division rules).
    const SIGNED: bool;
    /// Storage width in bits.
    const BITS: u32;
    const ZERO: Self;
    const ONE: Self;
    fn wadd(self, o: Self) -> Self;
    fn wsub(self, o: Self) -> Self;
    fn wmul(self, o: Self) -> Self;
    fn wneg(self) -> Self;
    fn wabs(self) -> Self;
    fn sign(self) -> Self;
    /// XLA division: x / 0 = -1 (all bits set), MIN / -1 = MIN, otherwise truncating.
    fn xdiv(self, o: Self) -> Self;
    /// XLA remainder: x % 0 = x, MIN % -1 = 0, otherwise the sign of the dividend.
    fn xrem(self, o: Self) -> Self;
    fn and(self, o: Self) -> Self;
    fn or(self, o: Self) -> Self;
    fn xor(self, o: Self) -> Self;
    fn not(self) -> Self;
    fn popcnt(self) -> Self;
    /// Leading zeros within `bits` (the logical width, ≤ storage width).
    fn clz(self, bits: u32) -> Self;
    /// The shift amount as an unsigned number (negative amounts are huge, as in XLA).
    fn amount(self) -> u64;
    fn shl(self, n: u32) -> Self;
    fn shr_l(self, n: u32) -> Self;
    /// Is the value negative (always false for unsigned types)?
    fn is_neg(self) -> bool;
    fn to_i128(self) -> i128;
    /// Truncates (wraps) an i128 into this type.
    fn from_i128(v: i128) -> Self;
    /// Rust `as` conversion from f64: truncation toward zero, saturating, NaN → 0 (what
    /// XLA:CPU's float → int convert does).
    fn from_f64_sat(v: f64) -> Self;
    fn to_f64(self) -> f64;
}

macro_rules! impl_xint {
    ($t:ty, $u:ty, $signed:expr) => {
        impl XInt for $t {
            const SIGNED: bool = $signed;
            const BITS: u32 = <$t>::BITS;
            const ZERO: Self = 0;
            const ONE: Self = 1;
            #[inline(always)]
            fn wadd(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            #[inline(always)]
            fn wsub(self, o: Self) -> Self {
                self.wrapping_sub(o)
            }
            #[inline(always)]
            fn wmul(self, o: Self) -> Self {
                self.wrapping_mul(o)
            }
            #[inline(always)]
            fn wneg(self) -> Self {
                self.wrapping_neg()
            }
            #[inline(always)]
            fn wabs(self) -> Self {
                if self.is_neg() {
                    self.wrapping_neg()
                } else {
                    self
                }
            }
            #[inline(always)]
            fn sign(self) -> Self {
                if self.is_neg() {
                    (0 as $t).wrapping_sub(1)
                } else if self == 0 {
                    0
                } else {
                    1
                }
            }
            #[inline(always)]
            fn xdiv(self, o: Self) -> Self {
                if o == 0 {
                    !0
                } else {
                    self.wrapping_div(o)
                }
            }
            #[inline(always)]
            fn xrem(self, o: Self) -> Self {
                if o == 0 {
                    self
                } else {
                    self.wrapping_rem(o)
                }
            }
            #[inline(always)]
            fn and(self, o: Self) -> Self {
                self & o
            }
            #[inline(always)]
            fn or(self, o: Self) -> Self {
                self | o
            }
            #[inline(always)]
            fn xor(self, o: Self) -> Self {
                self ^ o
            }
            #[inline(always)]
            fn not(self) -> Self {
                !self
            }
            #[inline(always)]
            fn popcnt(self) -> Self {
                self.count_ones() as $t
            }
            #[inline(always)]
            fn clz(self, bits: u32) -> Self {
                let u = self as $u;
                let masked = if bits >= <$t>::BITS {
                    u
                } else {
                    u & ((1 as $u) << bits).wrapping_sub(1)
                };
                (masked.leading_zeros() - (<$t>::BITS - bits.min(<$t>::BITS))) as $t
            }
            #[inline(always)]
            fn amount(self) -> u64 {
                // Reinterpreted as unsigned of the same width, as XLA's shift does.
                (self as $u) as u64
            }
            #[inline(always)]
            fn shl(self, n: u32) -> Self {
                self.wrapping_shl(n)
            }
            #[inline(always)]
            fn shr_l(self, n: u32) -> Self {
                ((self as $u).wrapping_shr(n)) as $t
            }
            #[inline(always)]
            #[allow(unused_comparisons)]
            fn is_neg(self) -> bool {
                self < 0
            }
            #[inline(always)]
            fn to_i128(self) -> i128 {
                self as i128
            }
            #[inline(always)]
            fn from_i128(v: i128) -> Self {
                v as $t
            }
            #[inline(always)]
            fn from_f64_sat(v: f64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
        }
    };
}

impl_xint!(i8, u8, true);
impl_xint!(i16, u16, true);
impl_xint!(i32, u32, true);
impl_xint!(i64, u64, true);
impl_xint!(u8, u8, false);
impl_xint!(u16, u16, false);
impl_xint!(u32, u32, false);
impl_xint!(u64, u64, false);

/// XLA's shift-left: amounts ≥ the logical width (negative amounts included) give 0.
#[inline(always)]
pub(crate) fn shift_left<T: XInt>(x: T, n: T, bits: u32) -> T {
    let a = n.amount();
    if a >= bits as u64 {
        T::ZERO
    } else {
        x.shl(a as u32)
    }
}

/// XLA's shift-right-logical: amounts ≥ the logical width give 0. For sub-byte types the
/// value is first reduced to its logical width.
#[inline(always)]
pub(crate) fn shift_right_logical<T: XInt>(x: T, n: T, bits: u32) -> T {
    let a = n.amount();
    if a >= bits as u64 {
        T::ZERO
    } else if bits < T::BITS {
        let mask = (1i128 << bits) - 1;
        T::from_i128((x.to_i128() & mask) >> a)
    } else {
        x.shr_l(a as u32)
    }
}

/// XLA's shift-right-arithmetic: the bits are shifted as a signed number of the logical
/// width even for unsigned types (XLA:CPU: u8 0xfe >> 1 = 0xff); amounts ≥ the width give
/// the sign fill (all ones or 0).
#[inline(always)]
pub(crate) fn shift_right_arithmetic<T: XInt>(x: T, n: T, bits: u32) -> T {
    let a = n.amount();
    let raw = x.to_i128() & ((1i128 << bits) - 1);
    let signed = if (raw >> (bits - 1)) & 1 == 1 {
        raw - (1i128 << bits)
    } else {
        raw
    };
    if a >= bits as u64 {
        T::from_i128(if signed < 0 { -1 } else { 0 })
    } else {
        T::from_i128(signed >> a)
    }
}

/// XLA's integer power: exponentiation by squaring with wrapping multiplies over the low 6
/// bits of the exponent only (XLA's emitter stops there: any larger exponent overflows for
/// |base| ≥ 2), so 2^64 = 1 and 2^65 = 2 in s32, as XLA:CPU computes. A negative exponent
/// gives 0 except for base 1 (→ 1) and base -1 (→ ±1 by parity).
pub(crate) fn int_pow<T: XInt>(base: T, exp: T) -> T {
    if exp.is_neg() {
        if base == T::ONE {
            return T::ONE;
        }
        if T::SIGNED && base == T::ZERO.wsub(T::ONE) {
            return if exp.to_i128() & 1 == 0 { T::ONE } else { base };
        }
        return T::ZERO;
    }
    let mut e = (exp.to_i128() & 63) as u32;
    let mut b = base;
    let mut acc = T::ONE;
    while e > 0 {
        if e & 1 == 1 {
            acc = acc.wmul(b);
        }
        b = b.wmul(b);
        e >>= 1;
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn division_rules() {
        // XLA semantics (xla/service/elemental_ir_emitter.cc EmitIntegerDivide/Remainder):
        // x/0 = -1, MIN/-1 = MIN, x%0 = x, MIN%-1 = 0.
        assert_eq!(7i32.xdiv(0), -1);
        assert_eq!(7u32.xdiv(0), u32::MAX);
        assert_eq!(i32::MIN.xdiv(-1), i32::MIN);
        assert_eq!(7i32.xrem(0), 7);
        assert_eq!(i32::MIN.xrem(-1), 0);
        assert_eq!((-7i32).xrem(2), -1);
    }

    #[test]
    fn shift_rules() {
        assert_eq!(shift_left(1i32, 32, 32), 0);
        assert_eq!(shift_left(1i32, -1, 32), 0);
        assert_eq!(shift_right_arithmetic(-8i32, 40, 32), -1);
        assert_eq!(shift_right_arithmetic(8i32, 40, 32), 0);
        assert_eq!(shift_right_logical(-8i32, 28, 32), 15);
        // XLA:CPU (fixture bitwise_shift_mixed): arithmetic shift of unsigned bits.
        assert_eq!(shift_right_arithmetic(0xfcu8, 1, 8), 0xfe);
        assert_eq!(shift_right_arithmetic(0x80u8, 9, 8), 0xff);
        assert_eq!(shift_right_arithmetic(-8i8, 1, 4), -4);
        // s4 value -8 (stored as i8 -8): logical shift by 1 within 4 bits gives 0b0100 = 4.
        assert_eq!(shift_right_logical(-8i8, 1, 4), 4);
    }

    #[test]
    fn power_rules() {
        // Values from XLA:CPU (xla_oracle.py run on s32 power): 2^64 = 1, 2^65 = 2,
        // (-1)^-3 = -1, (-1)^-2 = 1, 1^-5 = 1, 3^-1 = 0, MIN^-1 = 0, 7^0 = 1.
        let cases = [
            (2, 64, 1),
            (2, 65, 2),
            (-1, -3, -1),
            (-1, -2, 1),
            (1, -5, 1),
            (3, -1, 0),
            (i32::MIN, -1, 0),
            (7, 0, 1),
        ];
        for (b, e, want) in cases {
            assert_eq!(int_pow(b, e), want, "{b}^{e}");
        }
    }

    #[test]
    fn clz_counts_within_logical_width() {
        assert_eq!(1u8.clz(8), 7);
        assert_eq!(1i8.clz(4), 3);
        assert_eq!(0i32.clz(32), 32);
        assert_eq!((-1i64).clz(64), 0);
    }
}
