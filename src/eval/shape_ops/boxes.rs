//! Boxes of a padded buffer, for run-time sizes below a dimension's bound
//! ([`crate::eval::dynamic_dims`]): the leading box cut out, everything past it overwritten,
//! and a concatenation of leading parts laid end to end.

use super::strided::{to_vec, view, view_mut};
use super::{slice_of, udims};
use crate::eval::{err, EvalError};
use crate::hlo::{ArrayData, ArrayLiteral, ArrayShape};
use ndarray::{Axis, Slice};

/// The single element of `fill`, of the storage type of `like` (a buffer of shape `of`).
fn fill_value<T: Copy + 'static>(
    fill: &ArrayLiteral,
    like: &[T],
    of: &ArrayShape,
) -> Result<T, EvalError> {
    slice_of(&fill.data, like)
        .and_then(|f| f.first().copied())
        .ok_or_else(|| {
            EvalError::new(format!(
                "the fill value {} is not one element of {of}'s type",
                fill.shape
            ))
        })
}

/// Sizes that fit the dimensions `dims`, one per dimension.
fn check_sizes(sizes: &[i64], dims: &[usize], what: &ArrayShape) -> Result<(), EvalError> {
    let fits = sizes.len() == dims.len()
        && sizes
            .iter()
            .zip(dims)
            .all(|(&s, &d)| s >= 0 && s as usize <= d);
    if fits {
        Ok(())
    } else {
        err(format!("sizes {sizes:?} do not fit the buffer {what}"))
    }
}

/// The elements of `a` whose index is below `sizes` in every dimension, as a dense array of
/// dimensions `sizes`: a value cut to its run-time sizes.
pub(crate) fn leading_box(a: &ArrayLiteral, sizes: &[i64]) -> Result<ArrayLiteral, EvalError> {
    let dims = udims(&a.shape.dims);
    check_sizes(sizes, &dims, &a.shape)?;
    let data = same_variant!(&a.data, v => {
        let mut w = view(v, &dims)?;
        for (k, &s) in sizes.iter().enumerate() {
            w.slice_axis_inplace(Axis(k), Slice::from(0..s as usize));
        }
        to_vec(w)
    });
    Ok(ArrayLiteral {
        shape: ArrayShape::new(a.shape.ty, sizes.to_vec()),
        data,
    })
}

/// `a` with every element whose index reaches `limits[k]` in a dimension `k` that has a
/// limit replaced by the single element of `fill` (of `a`'s type): what a reduction or a
/// contraction must not see of a padded buffer.
pub(crate) fn fill_beyond(
    a: &ArrayLiteral,
    limits: &[Option<i64>],
    fill: &ArrayLiteral,
) -> Result<ArrayLiteral, EvalError> {
    let dims = udims(&a.shape.dims);
    let bounded: Vec<i64> = limits
        .iter()
        .zip(&dims)
        .map(|(l, &d)| l.unwrap_or(d as i64))
        .collect();
    check_sizes(&bounded, &dims, &a.shape)?;
    let data = same_variant!(&a.data, v => {
        let f = fill_value(fill, v.as_slice(), &a.shape)?;
        let mut out = v.clone();
        {
            let mut w = view_mut(&mut out, &dims)?;
            for (k, l) in limits.iter().enumerate() {
                if let Some(l) = *l {
                    w.slice_axis_mut(Axis(k), Slice::from(l as usize..)).fill(f);
                }
            }
        }
        out
    });
    Ok(ArrayLiteral {
        shape: a.shape.clone(),
        data,
    })
}

/// A buffer of shape `out` that starts as `base` (zeros when `None`) and gets each of
/// `parts` (whole buffers, padding included) written along dimension `d` at its offset,
/// later parts over earlier ones: a concatenation of run-time sized parts laid end to end,
/// as XLA's dynamic padder builds it, or a run-time box written back into its buffer.
pub(crate) fn overlay_along(
    base: Option<&ArrayLiteral>,
    parts: &[&ArrayLiteral],
    d: usize,
    offsets: &[i64],
    out: &ArrayShape,
) -> Result<ArrayLiteral, EvalError> {
    let odims = udims(&out.dims);
    if d >= odims.len() {
        return err(format!("dimension {d} is out of range for {out}"));
    }
    let Some(first) = parts.first() else {
        return err("a concatenation needs at least one operand");
    };
    let zeros;
    let start = match base {
        Some(b) if b.shape.dims == out.dims => &b.data,
        Some(b) => return err(format!("the base {} is not of shape {out}", b.shape)),
        None => {
            zeros = ArrayData::zeros(out.ty, out.element_count());
            &zeros
        }
    };
    let data = same_variant!(&first.data, fv => {
        let wrong = || EvalError::new("the operands and the result differ in element type");
        let mut o = slice_of(start, fv.as_slice()).ok_or_else(wrong)?.to_vec();
        {
            let mut w = view_mut(&mut o, &odims)?;
            for (p, &off) in parts.iter().zip(offsets) {
                let pv = slice_of(&p.data, fv.as_slice()).ok_or_else(wrong)?;
                let pd = udims(&p.shape.dims);
                let fits = pd.len() == odims.len()
                    && off >= 0
                    && (0..pd.len()).all(|k| {
                        if k == d {
                            off as usize + pd[k] <= odims[k]
                        } else {
                            pd[k] == odims[k]
                        }
                    });
                if !fits {
                    return err(format!("{} does not fit {out} at offset {off}", p.shape));
                }
                let src = view(pv, &pd)?;
                let mut dst = w.view_mut();
                dst.slice_axis_inplace(Axis(d), Slice::from(off as usize..off as usize + pd[d]));
                dst.assign(&src);
            }
        }
        o
    });
    Ok(ArrayLiteral {
        shape: ArrayShape::new(out.ty, out.dims.clone()),
        data,
    })
}

/// `a` with the elements at indices `from..to` of dimension `d` replaced by the single
/// element of `fill`: the high padding of a `pad` that follows a run-time size.
pub(crate) fn fill_between(
    a: &ArrayLiteral,
    d: usize,
    (from, to): (i64, i64),
    fill: &ArrayLiteral,
) -> Result<ArrayLiteral, EvalError> {
    let dims = udims(&a.shape.dims);
    if d >= dims.len() || from < 0 || from > to || to as usize > dims[d] {
        return err(format!(
            "cannot fill [{from}, {to}) of dimension {d} of {}",
            a.shape
        ));
    }
    let data = same_variant!(&a.data, v => {
        let f = fill_value(fill, v.as_slice(), &a.shape)?;
        let mut out = v.clone();
        view_mut(&mut out, &dims)?
            .slice_axis_mut(Axis(d), Slice::from(from as usize..to as usize))
            .fill(f);
        out
    });
    Ok(ArrayLiteral {
        shape: a.shape.clone(),
        data,
    })
}
