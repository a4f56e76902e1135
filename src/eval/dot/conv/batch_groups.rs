//! Batch-grouped convolutions as XLA:CPU runs them. Its compiler rewrites every convolution
//! with `batch_group_count > 1` into one without, before any other pass sees it
//! (`ConvolutionGroupConverter` with `convert_batch_groups_only`, whose cost model on CPU
//! always answers "not viable", `cpu_compiler.cc`); the summation order is then that
//! convolution's, whichever of XLA:CPU's orders it takes. hlosim makes the same rewrite and
//! runs the result through [`super::convolution`]:
//!
//! - **A new spatial dimension** (`convolution_group_converter.cc`, the general case): the
//!   input's batch becomes `[groups, batch / groups]`, the kernel's output features
//!   `[groups, features / groups]`, the output's features likewise, and the group dimension
//!   is a spatial one, appended last, with a window of `groups` taps, base dilation `groups`
//!   and stride `groups - 1`: each output group's window meets its own input group and holes
//!   elsewhere. Row-major data is the same before and after, so only the shapes change.
//! - **The depthwise filter gradient** (the input's batch and the kernel's output features
//!   both equal to the group count): the convolution without groups, whose output batch then
//!   has `groups` rows, masked to its diagonal and summed over the batch by a `reduce-window`
//!   from zero: the output is the diagonal element plus +0 (a −0 becomes +0).
//!
//! Both were checked against XLA:CPU with the oracle, the rewritten convolution written out
//! by hand: 1-D and 2-D, reversed windows included, every bit the same.

use super::convolution;
use crate::eval::{DotAccumulation, EvalError, KResult, Value, XlaCpu};
use crate::hlo::{
    ArrayData, ArrayLiteral, ArrayShape, ElementType, Instruction, Literal, Shape, WindowDim,
};

/// The most multiply-adds hlosim spends on the depthwise filter gradient's expanded
/// convolution, which computes `groups` times the outputs asked for; past it the batch-grouped
/// convolution runs in hlosim's own loop (within tolerance, not XLA:CPU's bits).
const MAX_EXPANDED_PRODUCTS: u128 = 1 << 32;

/// `ins` (a convolution of the operands `ops` with `groups > 1` batch groups, already
/// checked) as XLA:CPU rewrites it and runs it, or `None` where hlosim keeps its own loop.
pub(super) fn rewritten(
    ins: &Instruction,
    ops: &[&Value],
    out_shape: &ArrayShape,
    groups: i64,
    accumulation: DotAccumulation,
    xla: XlaCpu,
) -> Option<KResult> {
    // XLA's shape inference refuses feature and batch groups together; keep hlosim's loop.
    if ins.attrs.feature_group_count.unwrap_or(1) > 1 {
        return None;
    }
    let cd = ins.attrs.conv_dims.as_ref()?;
    let (input, kernel) = (ops.first()?.as_array().ok()?, ops.get(1)?.as_array().ok()?);
    let batch = input.dims()[cd.input_batch as usize];
    let features = kernel.dims()[cd.kernel_output_feature as usize];
    let mut new = ins.clone();
    new.attrs.batch_group_count = None;
    if batch == groups && features == groups {
        return depthwise(new, ops, out_shape, groups, accumulation, xla);
    }
    new_spatial_dimension(new, (input, kernel), out_shape, groups, accumulation, xla)
}

/// The depthwise filter gradient (`new`, the convolution without batch groups): its operands
/// as they are, the output batch `groups` rows long, then the diagonal ([`diagonal`]).
fn depthwise(
    mut new: Instruction,
    ops: &[&Value],
    out_shape: &ArrayShape,
    groups: i64,
    accumulation: DotAccumulation,
    xla: XlaCpu,
) -> Option<KResult> {
    let cd = new.attrs.conv_dims.clone()?;
    let kernel = ops.get(1)?.as_array().ok()?;
    let products = out_shape.dims.iter().map(|&d| d as u128).product::<u128>()
        * groups as u128
        * (kernel.data.len() as u128 / groups as u128);
    if products > MAX_EXPANDED_PRODUCTS {
        return None;
    }
    let mut full = plain_shape(out_shape.ty, out_shape.dims.clone());
    full.dims[cd.output_batch as usize] = groups;
    new.shape = Shape::Array(full.clone());
    let full_value = convolution(&new, ops, accumulation, xla);
    Some(full_value.and_then(|v| diagonal(&v, &full, out_shape, &cd)))
}

/// The general rewrite (`new`, the convolution without batch groups): the groups a new
/// spatial dimension of input, kernel and output, appended last (module documentation).
fn new_spatial_dimension(
    mut new: Instruction,
    (input, kernel): (&ArrayLiteral, &ArrayLiteral),
    out_shape: &ArrayShape,
    groups: i64,
    accumulation: DotAccumulation,
    xla: XlaCpu,
) -> Option<KResult> {
    let cd = new.attrs.conv_dims.as_ref()?;
    let u = |d: i64| d as usize;
    let insert = |dims: &[i64], at: i64| -> Vec<i64> {
        let mut dims = dims.to_vec();
        dims[u(at)] /= groups;
        dims.insert(u(at), groups);
        dims
    };
    // Every label at or after the inserted dimension moves one on.
    let shift = |d: i64, at: i64| if d >= at { d + 1 } else { d };
    let (ib, kf, of) = (cd.input_batch, cd.kernel_output_feature, cd.output_feature);
    let mut dims = cd.clone();
    dims.input_spatial = cd.input_spatial.iter().map(|&d| shift(d, ib)).collect();
    dims.input_spatial.push(ib);
    dims.input_batch = ib + 1;
    dims.input_feature = shift(cd.input_feature, ib);
    dims.kernel_spatial = cd.kernel_spatial.iter().map(|&d| shift(d, kf)).collect();
    dims.kernel_spatial.push(kf);
    dims.kernel_output_feature = kf + 1;
    dims.kernel_input_feature = shift(cd.kernel_input_feature, kf);
    dims.output_spatial = cd.output_spatial.iter().map(|&d| shift(d, of)).collect();
    dims.output_spatial.push(of);
    dims.output_feature = of + 1;
    dims.output_batch = shift(cd.output_batch, of);
    let mut win = new.attrs.window.clone()?;
    win.dims.push(WindowDim {
        size: groups,
        stride: groups - 1,
        pad_lo: 0,
        pad_hi: 0,
        base_dilation: groups,
        window_dilation: 1,
        reversal: false,
    });
    new.shape = Shape::Array(plain_shape(out_shape.ty, insert(&out_shape.dims, of)));
    // Row-major data reads the same with the split dimension: only the shapes change.
    let reshaped = |a: &ArrayLiteral, dims: Vec<i64>| {
        Value::array(ArrayLiteral {
            shape: plain_shape(a.shape.ty, dims),
            data: a.data.clone(),
        })
    };
    let input = reshaped(input, insert(&input.shape.dims, ib));
    let kernel = reshaped(kernel, insert(&kernel.shape.dims, kf));
    new.attrs.conv_dims = Some(dims);
    new.attrs.window = Some(win);
    Some(
        convolution(&new, &[&input, &kernel], accumulation, xla).and_then(|v| {
            match v.into_literal() {
                Literal::Array(a) => Ok(Value::array(ArrayLiteral {
                    shape: out_shape.clone(),
                    data: a.data,
                })),
                _ => Err(EvalError::new("convolution must produce an array")),
            }
        }),
    )
}

/// An array shape of type `ty` and dimensions `dims`, static, in row-major order.
fn plain_shape(ty: ElementType, dims: Vec<i64>) -> ArrayShape {
    ArrayShape {
        ty,
        dims,
        dynamic: Vec::new(),
        layout: None,
    }
}

/// The depthwise filter gradient's output from the expanded convolution's `full` result (its
/// batch as long as the features): each output feature's element of the batch row of the same
/// index, plus +0 as XLA's `reduce-window` from zero adds it.
fn diagonal(
    full: &Value,
    full_shape: &ArrayShape,
    out_shape: &ArrayShape,
    cd: &crate::hlo::ConvDims,
) -> KResult {
    let full = full.as_array()?;
    let strides = crate::eval::util::strides(&full_shape.dims);
    let mut view = strides.clone();
    let (ob, of) = (cd.output_batch as usize, cd.output_feature as usize);
    // The output's single batch row reads the full result's row of its feature's index.
    view[of] += strides[ob];
    let sizes: Vec<usize> = out_shape.dims.iter().map(|&d| d as usize).collect();
    let positions = crate::eval::reduce::index_offsets(&sizes, &view);
    Ok(Value::array(ArrayLiteral {
        shape: out_shape.clone(),
        data: plus_zero(full.data.gather(&positions)),
    }))
}

/// `x + 0` for every element of a floating-point buffer (a −0 becomes +0); other types as
/// they are.
fn plus_zero(data: ArrayData) -> ArrayData {
    use half::{bf16, f16};
    use num_complex::Complex;
    match data {
        ArrayData::F32(v) => ArrayData::F32(v.into_iter().map(|x| x + 0.0).collect()),
        ArrayData::F64(v) => ArrayData::F64(v.into_iter().map(|x| x + 0.0).collect()),
        ArrayData::F16(v) => ArrayData::F16(v.into_iter().map(|x| x + f16::ZERO).collect()),
        ArrayData::BF16(v) => ArrayData::BF16(v.into_iter().map(|x| x + bf16::ZERO).collect()),
        ArrayData::C64(v) => {
            ArrayData::C64(v.into_iter().map(|x| x + Complex::new(0.0, 0.0)).collect())
        }
        ArrayData::C128(v) => {
            ArrayData::C128(v.into_iter().map(|x| x + Complex::new(0.0, 0.0)).collect())
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plus_zero_turns_negative_zero_positive_and_keeps_the_rest() {
        let v = plus_zero(ArrayData::F32(vec![
            -0.0,
            0.0,
            -1.5,
            f32::NAN,
            f32::INFINITY,
        ]));
        let ArrayData::F32(v) = v else { panic!() };
        assert_eq!(v[0].to_bits(), 0);
        assert_eq!(v[1].to_bits(), 0);
        assert_eq!(v[2], -1.5);
        assert!(v[3].is_nan());
        assert_eq!(v[4], f32::INFINITY);
        let v = plus_zero(ArrayData::S32(vec![-3, 0]));
        assert!(matches!(v, ArrayData::S32(ref x) if x == &vec![-3, 0]));
    }
}
