//! convolution with XLA's full semantics: dimension labels, window strides, padding, base
//! (lhs) dilation, window (rhs) dilation, window reversal, feature_group_count and
//! batch_group_count. A direct loop: for each output element, the valid kernel positions are
//! found per spatial dimension and the input features of its group are accumulated (in the
//! compute type of [`super::convert`], rounded once to the result type; f32 sums in f32, or in
//! f64 under `DotAccumulation::F64`). XLA:CPU's own orders, where identified: [`stencil`]
//! for 2-D convolutions (YNNPACK's stencil dot, or Eigen's chain for those XLA keeps out of
//! YNNPACK), [`pointwise`] for the 1×1 ones YNNPACK sums as a matrix product where the stencil
//! declines, [`eigen`] for shallow 1-D and 3-D ones and base-dilated (transposed) ones, and
//! [`own_loop`] for reversed windows and the convolutions XLA swaps ([`swap`]), which run in a
//! loop XLA emits itself (its feature loop vectorized by LLVM from 50 features:
//! [`vector_loop`]). Batch groups are rewritten away first, as XLA:CPU does
//! ([`batch_groups`]). A pred result has rules of its own: [`pred`].

mod batch_groups;
mod eigen;
mod own_loop;
mod pointwise;
mod pred;
mod stencil;
mod swap;
mod vector_loop;

use super::convert::{self, Compute};
use super::eigen_product::EigenHost;
use crate::eval::reduce::{arrays, result_shapes, PARALLEL_WORK};
use crate::eval::util::strides;
use crate::eval::{err, DotAccumulation, EvalError, KResult, Value, XlaCpu};
use crate::hlo::{ArrayData, ArrayLiteral, ElementType, Instruction, WindowDim};
use num_complex::Complex;
use own_loop::Taps::{self, Forward};
use own_loop::{Features, LoopOrder};
use rayon::prelude::*;

/// Everything the inner loop needs, in element offsets.
struct Geom {
    /// Output batch, output features, output spatial sizes.
    out_batch: usize,
    out_feat: usize,
    out_sp: Vec<usize>,
    in_sp: Vec<usize>,
    /// Input batch (every batch group's).
    in_batch: usize,
    /// Input strides of batch, feature, spatial dims.
    is_b: usize,
    is_f: usize,
    is_sp: Vec<usize>,
    /// Kernel strides of input feature, output feature, spatial dims.
    ks_i: usize,
    ks_o: usize,
    ks_sp: Vec<usize>,
    win: Vec<WindowDim>,
    /// Input features per feature group (kernel input feature size).
    cin_g: usize,
    /// Output features per feature group and per batch group.
    out_per_fg: usize,
    out_per_bg: usize,
    /// Input batch elements per batch group (= output batch).
    batch_per_bg: usize,
}

/// convolution: see the module documentation. `xla` is the XLA:CPU whose orders are copied:
/// its host's emitted loops ([`own_loop`]) and its threads, among which Eigen shares a
/// contraction ([`eigen`]).
pub fn convolution(
    ins: &Instruction,
    ops: &[&Value],
    accumulation: DotAccumulation,
    xla: XlaCpu,
) -> KResult {
    let values = ops;
    let ops = arrays(values)?;
    if ops.len() != 2 {
        return err(format!("convolution takes 2 operands, got {}", ops.len()));
    }
    let (input, kernel) = (ops[0], ops[1]);
    let out_shape = result_shapes(ins)
        .into_iter()
        .next()
        .ok_or_else(|| EvalError::new("convolution must produce an array"))?;
    let cd = ins
        .attrs
        .conv_dims
        .as_ref()
        .ok_or_else(|| EvalError::new("convolution has no dim_labels="))?;
    let nsp = cd.input_spatial.len();
    if cd.kernel_spatial.len() != nsp || cd.output_spatial.len() != nsp {
        return err("convolution dim_labels have different numbers of spatial dimensions");
    }
    let check = |rank: usize, dims: Vec<i64>, what: &str| {
        crate::eval::reduce::check_dims(&dims, rank, what)?;
        if dims.len() != rank {
            return err(format!("{what} label {} of {rank} dimensions", dims.len()));
        }
        Ok(())
    };
    let cat = |a: i64, b: i64, s: &[i64]| {
        let mut v = vec![a, b];
        v.extend_from_slice(s);
        v
    };
    check(
        input.shape.rank(),
        cat(cd.input_batch, cd.input_feature, &cd.input_spatial),
        "convolution input dim_labels",
    )?;
    check(
        kernel.shape.rank(),
        cat(
            cd.kernel_input_feature,
            cd.kernel_output_feature,
            &cd.kernel_spatial,
        ),
        "convolution kernel dim_labels",
    )?;
    check(
        out_shape.rank(),
        cat(cd.output_batch, cd.output_feature, &cd.output_spatial),
        "convolution output dim_labels",
    )?;
    let win: Vec<WindowDim> = match &ins.attrs.window {
        Some(w) => w.dims.clone(),
        None if nsp == 0 => Vec::new(),
        None => return err("convolution has no window="),
    };
    if win.len() != nsp {
        return err(format!(
            "convolution window has {} dimensions, the labels have {nsp} spatial dimensions",
            win.len()
        ));
    }
    let (id, kd, od) = (input.dims(), kernel.dims(), &out_shape.dims);
    let u = |x: i64| x as usize;
    let fgc = ins.attrs.feature_group_count.unwrap_or(1);
    let bgc = ins.attrs.batch_group_count.unwrap_or(1);
    let n = id[u(cd.input_batch)];
    let cin = id[u(cd.input_feature)];
    let kin = kd[u(cd.kernel_input_feature)];
    let kout = kd[u(cd.kernel_output_feature)];
    if fgc < 1 || bgc < 1 || cin != kin * fgc || kout % fgc != 0 || kout % bgc != 0 || n % bgc != 0
    {
        return err(format!(
            "convolution groups are inconsistent: input features {cin}, kernel input features \
             {kin}, kernel output features {kout}, input batch {n}, feature_group_count {fgc}, \
             batch_group_count {bgc}"
        ));
    }
    let mut want = vec![0i64; out_shape.rank()];
    want[u(cd.output_batch)] = n / bgc;
    want[u(cd.output_feature)] = kout;
    for d in 0..nsp {
        let w = &win[d];
        let ksz = kd[u(cd.kernel_spatial[d])];
        if w.size != ksz || w.stride < 1 || w.base_dilation < 1 || w.window_dilation < 1 {
            return err(format!(
                "convolution window dimension {d} (size {}, stride {}, dilations {}/{}) does \
                 not fit kernel spatial size {ksz}",
                w.size, w.stride, w.base_dilation, w.window_dilation
            ));
        }
        let isz = id[u(cd.input_spatial[d])];
        let padded = w.dilated_input(isz) + w.pad_lo + w.pad_hi;
        let span = w.span();
        want[u(cd.output_spatial[d])] = if padded >= span && w.size > 0 {
            (padded - span) / w.stride + 1
        } else {
            0
        };
    }
    if &want != od {
        return err(format!(
            "convolution result is declared {out_shape}, the operands and window give \
             dimensions {want:?}"
        ));
    }
    // XLA:CPU rewrites batch groups away before it runs anything (batch_groups.rs).
    if bgc > 1 && accumulation == DotAccumulation::XlaCpu && out_shape.ty != ElementType::Pred {
        if let Some(result) =
            batch_groups::rewritten(ins, values, &out_shape, bgc, accumulation, xla)
        {
            return result;
        }
    }
    let (is, ks) = (strides(id), strides(kd));
    let g = Geom {
        out_batch: u(n / bgc),
        out_feat: u(kout),
        out_sp: cd.output_spatial.iter().map(|&d| u(od[u(d)])).collect(),
        in_sp: cd.input_spatial.iter().map(|&d| u(id[u(d)])).collect(),
        in_batch: u(n),
        is_b: is[u(cd.input_batch)],
        is_f: is[u(cd.input_feature)],
        is_sp: cd.input_spatial.iter().map(|&d| is[u(d)]).collect(),
        ks_i: ks[u(cd.kernel_input_feature)],
        ks_o: ks[u(cd.kernel_output_feature)],
        ks_sp: cd.kernel_spatial.iter().map(|&d| ks[u(d)]).collect(),
        win,
        cin_g: u(kin),
        out_per_fg: u(kout / fgc),
        out_per_bg: u(kout / bgc),
        batch_per_bg: u(n / bgc),
    };
    // Output offsets of (batch, feature, spatial...) in canonical order.
    let os = strides(od);
    let canon_sizes: Vec<usize> = [g.out_batch, g.out_feat]
        .into_iter()
        .chain(g.out_sp.iter().copied())
        .collect();
    let canon_strides: Vec<usize> = [os[u(cd.output_batch)], os[u(cd.output_feature)]]
        .into_iter()
        .chain(cd.output_spatial.iter().map(|&d| os[u(d)]))
        .collect();
    let out_off = crate::eval::reduce::index_offsets(&canon_sizes, &canon_strides);
    let all_in: Vec<usize> = (0..input.data.len()).collect();
    let all_k: Vec<usize> = (0..kernel.data.len()).collect();
    let ty = out_shape.ty;
    let (it, kt) = (input.ty(), kernel.ty());
    if ty == ElementType::Pred {
        return Ok(Value::array(ArrayLiteral {
            data: pred::convolve(input, kernel, &g, &out_off)?,
            shape: out_shape,
        }));
    }
    // XLA:CPU's orders for 2-D windows (stencil.rs, pointwise.rs) and Eigen's (eigen.rs): f32,
    // f16 and bf16 operands (XLA converts 16-bit ones to f32 first; f16 ones only for YNNPACK,
    // Eigen runs f16 natively), outside the 16-bit mixes that run in bf16.
    // A convolution XLA:CPU swaps runs in a loop of its own (swap.rs, own_loop.rs).
    let xla_cpu = accumulation == DotAccumulation::XlaCpu;
    let swapped = swap::operands_swapped(&g, fgc, bgc);
    let xla_order = xla_cpu && !swapped;
    let eigen_types = [it, kt, ty]
        .iter()
        .all(|&t| matches!(t, ElementType::F32 | ElementType::BF16));
    // XLA:CPU's own loop (own_loop.rs) was measured for f32, f16 and bf16 operands of one type
    // with a result of that type or f32.
    let own_loop_types = it == kt
        && matches!(it, ElementType::F32 | ElementType::F16 | ElementType::BF16)
        && (ty == it || ty == ElementType::F32);
    let pointwise_xla = xla_order
        && [it, kt]
            .iter()
            .all(|t| matches!(t, ElementType::F32 | ElementType::F16 | ElementType::BF16))
        && !convert::computed_in_bf16(it, kt, ty);
    let data = match Compute::for_result(ty)? {
        Compute::F32 if accumulation == DotAccumulation::F64 => {
            // Operands rounded to f32, exact products summed in f64, one rounding at the end
            // (the accuracy note of `dot`).
            let a = convert::gather_f32_wide(&input.data, it, &all_in);
            let k = convert::gather_f32_wide(&kernel.data, kt, &all_k);
            let v = conv_loop(&a, &k, &g, 0f64, |acc, x, y| acc + x * y);
            let v = v.into_iter().map(|x| x as f32).collect();
            convert::from_f32(ty, scatter_out(v, &out_off))
        }
        Compute::F32 => {
            let eigen_host = EigenHost::new(xla.caches, xla.threads);
            let a = convert::gather_f32(&input.data, it, &all_in);
            let k = convert::gather_f32(&kernel.data, kt, &all_k);
            let result_ok = matches!(ty, ElementType::F32 | ElementType::F16 | ElementType::BF16);
            let window = (pointwise_xla && result_ok)
                .then(|| stencil::applies(&g, fgc, bgc, &eigen_host))
                .flatten();
            let v = if let Some(choice) = window {
                stencil::product(&a, &k, &g, choice)
            } else if pointwise_xla && pointwise::applies(&g, fgc * bgc) && stencil::in_ynn(&g, 1) {
                pointwise::product(&a, &k, &g)
            } else if let Some(order) = (xla_order && eigen_types)
                .then(|| eigen::order(&g, fgc, bgc, &eigen_host))
                .flatten()
            {
                match order {
                    eigen::Order::Chain(parts) if parts.is_whole() => {
                        conv_loop(&a, &k, &g, 0f32, fma)
                    }
                    eigen::Order::Chain(parts) => {
                        let start = |row, col| parts.start(row, col);
                        let sums = conv_taps(&g, start, Forward, |st, io, ko, t| {
                            let terms = feature_terms(&a, &k, &g, io, ko);
                            parts.add(st, t * g.cin_g, g.cin_g, terms)
                        });
                        sums.into_iter().map(|st| parts.finish(st)).collect()
                    }
                    eigen::Order::TapSums(parts) => {
                        // The product's row is the input pixel, its column the (tap, output
                        // feature) pair; one group.
                        let tap_sums = conv_taps(
                            &g,
                            |_, o| (0f32, o),
                            Forward,
                            |(acc, o), io, ko, tap| {
                                let terms = feature_terms(&a, &k, &g, io, ko);
                                let (row, col) = (g.input_pixel(io), tap * g.out_feat + o);
                                (acc + parts.element_sum(row, col, g.cin_g, terms), o)
                            },
                        );
                        tap_sums.into_iter().map(|(sum, _)| sum).collect()
                    }
                }
            } else if let Some(LoopOrder { taps, features }) = (xla_cpu && own_loop_types)
                .then(|| own_loop::order(&g, bgc, swapped, xla.host))
                .flatten()
            {
                match features {
                    Features::Chain => conv_loop_with(&a, &k, &g, 0f32, fma, None, taps),
                    Features::Vectorized(shape) => conv_taps(
                        &g,
                        |_, _| 0f32,
                        taps,
                        |acc, io, ko, _| {
                            let terms = feature_terms(&a, &k, &g, io, ko);
                            vector_loop::tap_sum(&shape, acc, terms)
                        },
                    ),
                }
            } else {
                conv_loop(&a, &k, &g, 0f32, |acc, x, y| acc + x * y)
            };
            convert::from_f32(ty, scatter_out(v, &out_off))
        }
        Compute::F64 => {
            let a = convert::gather_f64(&input.data, it, &all_in);
            let k = convert::gather_f64(&kernel.data, kt, &all_k);
            ArrayData::F64(scatter_out(
                conv_loop(&a, &k, &g, 0f64, |acc, x, y| acc + x * y),
                &out_off,
            ))
        }
        Compute::I64 => {
            let a = convert::gather_i64(&input.data, it, &all_in)?;
            let k = convert::gather_i64(&kernel.data, kt, &all_k)?;
            let v = conv_loop(&a, &k, &g, 0i64, |acc, x, y| {
                acc.wrapping_add(x.wrapping_mul(y))
            });
            convert::from_i64(ty, scatter_out(v, &out_off))
        }
        Compute::Complex => {
            let a = convert::gather_c64(&input.data, it, &all_in);
            let k = convert::gather_c64(&kernel.data, kt, &all_k);
            let v = conv_loop(&a, &k, &g, Complex::new(0.0, 0.0), |acc, x, y| acc + x * y);
            convert::from_c(ty, scatter_out(v, &out_off))
        }
    };
    Ok(Value::array(ArrayLiteral {
        shape: out_shape,
        data,
    }))
}

impl Geom {
    /// The input pixel whose features start at input offset `io`: its row in a contraction
    /// over the input's pixels (Eigen's transposed convolution), batch-major, the spatial
    /// dimensions row-major with the first outermost. The input is dense, so each coordinate
    /// is its offset's quotient by the dimension's stride, modulo the dimension's size.
    fn input_pixel(&self, io: usize) -> usize {
        let at = |stride: usize, size: usize| io.checked_div(stride).map_or(0, |q| q % size);
        let batch = at(self.is_b, self.in_batch.max(1));
        self.in_sp
            .iter()
            .zip(&self.is_sp)
            .fold(batch, |row, (&size, &stride)| {
                row * size + at(stride, size.max(1))
            })
    }
}

#[cfg(test)]
impl Geom {
    /// A geometry for the tests of the order rules, which read the window, the input's
    /// spatial sizes, the input features per group and the output features: one output
    /// element (one output feature), offsets zero.
    fn for_rules(win: Vec<WindowDim>, in_sp: Vec<usize>, cin_g: usize) -> Geom {
        let nsp = win.len();
        Geom {
            out_batch: 1,
            out_feat: 1,
            out_sp: vec![1; nsp],
            in_sp,
            in_batch: 1,
            is_b: 0,
            is_f: 0,
            is_sp: vec![0; nsp],
            ks_i: 0,
            ks_o: 0,
            ks_sp: vec![0; nsp],
            win,
            cin_g,
            out_per_fg: 1,
            out_per_bg: 1,
            batch_per_bg: 1,
        }
    }
}

/// Places values computed in canonical (batch, feature, spatial) order at their offsets.
fn scatter_out<T: Copy + Default>(v: Vec<T>, off: &[usize]) -> Vec<T> {
    let mut out = vec![T::default(); v.len()];
    for (x, &o) in v.into_iter().zip(off) {
        out[o] = x;
    }
    out
}

/// An FMA: the f32 accumulation of XLA:CPU's orders.
fn fma(acc: f32, x: f32, y: f32) -> f32 {
    x.mul_add(y, acc)
}

/// Valid (input offset, kernel offset, kernel position) triples of spatial dimension `d` for
/// output coordinate `s`, in window order, or backward (input positions from the last to the
/// first) in a dimension XLA's swapper swaps ([`swap::swapped_dimension`]; it keeps the others
/// as written).
fn taps(g: &Geom, d: usize, s: usize, order: Taps) -> Vec<(usize, usize, usize)> {
    let w = &g.win[d];
    let size = w.size as usize;
    let mut v = Vec::with_capacity(size);
    for kpos in 0..size {
        let p = (s as i64) * w.stride + (kpos as i64) * w.window_dilation - w.pad_lo;
        if p < 0 || p % w.base_dilation != 0 {
            continue;
        }
        let q = (p / w.base_dilation) as usize;
        if q >= g.in_sp[d] {
            continue;
        }
        let kk = if w.reversal { size - 1 - kpos } else { kpos };
        v.push((q * g.is_sp[d], kk * g.ks_sp[d], kk));
    }
    if order == Taps::Backward && swap::swapped_dimension(w, g.in_sp[d]) {
        v.reverse();
    }
    v
}

/// Computes every output element in canonical (batch, feature, spatial...) order: one
/// accumulation over (tap, input feature), taps in window order.
fn conv_loop<T: Copy + Send + Sync>(
    a: &[T],
    k: &[T],
    g: &Geom,
    zero: T,
    madd: impl Fn(T, T, T) -> T + Sync,
) -> Vec<T> {
    conv_loop_with(a, k, g, zero, madd, None, Forward)
}

/// [`conv_loop`], or with `tap_add`, each tap's input features accumulated from `zero` on their
/// own and the tap's sum added to the output's with `tap_add` (Eigen's transposed convolution);
/// the taps of each spatial dimension visited in `order` (the first dimension outermost).
fn conv_loop_with<T: Copy + Send + Sync>(
    a: &[T],
    k: &[T],
    g: &Geom,
    zero: T,
    madd: impl Fn(T, T, T) -> T + Sync,
    tap_add: Option<&(dyn Fn(T, T) -> T + Sync)>,
    order: Taps,
) -> Vec<T> {
    let chain = |acc: T, io: usize, ko: usize| {
        let term = feature_terms(a, k, g, io, ko);
        (0..g.cin_g).fold(acc, |s, i| {
            let (x, y) = term(i);
            madd(s, x, y)
        })
    };
    match tap_add {
        None => conv_taps(g, |_, _| zero, order, |acc, io, ko, _| chain(acc, io, ko)),
        Some(add) => conv_taps(
            g,
            |_, _| zero,
            order,
            |acc, io, ko, _| add(acc, chain(zero, io, ko)),
        ),
    }
}

/// The input and kernel values of input feature `i` of the group at one tap, whose first
/// feature is at input offset `io` and kernel offset `ko`.
fn feature_terms<'a, T: Copy>(
    a: &'a [T],
    k: &'a [T],
    g: &'a Geom,
    io: usize,
    ko: usize,
) -> impl Fn(usize) -> (T, T) + 'a {
    move |i| (a[io + i * g.is_f], k[ko + i * g.ks_i])
}

/// Computes every output element in canonical (batch, feature, spatial...) order from
/// `start(row, column)` (its row of the contraction: batch-major position, the first spatial
/// dimension outermost; its column: the output feature within its group), visiting its valid
/// taps (those of each spatial dimension in `order`, the first dimension outermost):
/// `tap(acc, input offset, kernel offset, tap)` adds one tap's input features (the offsets
/// are those of the group's first feature; `tap` is the kernel position's index in the
/// window, row-major, the first spatial dimension outermost).
fn conv_taps<T: Send + Sync>(
    g: &Geom,
    start: impl Fn(usize, usize) -> T + Sync,
    order: Taps,
    tap: impl Fn(T, usize, usize, usize) -> T + Sync,
) -> Vec<T> {
    let nsp = g.out_sp.len();
    // taps[d][s]: valid input/kernel offsets and kernel positions per spatial dimension and
    // output coordinate.
    let taps: Vec<Vec<Vec<(usize, usize, usize)>>> = (0..nsp)
        .map(|d| (0..g.out_sp[d]).map(|s| taps(g, d, s, order)).collect())
        .collect();
    let sp_count: usize = g.out_sp.iter().product();
    let one_bf = |bf: usize| -> Vec<T> {
        let (b, o) = (bf / g.out_feat, bf % g.out_feat);
        let fg = o / g.out_per_fg;
        let bg = o / g.out_per_bg;
        let in_b = bg * g.batch_per_bg + b;
        let in_base = in_b * g.is_b + fg * g.cin_g * g.is_f;
        let k_base = o * g.ks_o;
        let mut out = Vec::with_capacity(sp_count);
        let mut idx = vec![0usize; nsp];
        for position in 0..sp_count {
            let mut acc = start(b * sp_count + position, o % g.out_per_fg);
            // Product over spatial dims of the tap lists (odometer over tap indices).
            let lists: Vec<&Vec<(usize, usize, usize)>> =
                (0..nsp).map(|d| &taps[d][idx[d]]).collect();
            if lists.iter().all(|l| !l.is_empty()) {
                let mut t = vec![0usize; nsp];
                'taps: loop {
                    let (mut io, mut ko, mut pos) = (in_base, k_base, 0);
                    for d in 0..nsp {
                        let (x, y, kk) = lists[d][t[d]];
                        io += x;
                        ko += y;
                        pos = pos * g.win[d].size as usize + kk;
                    }
                    acc = tap(acc, io, ko, pos);
                    let mut d = nsp;
                    loop {
                        if d == 0 {
                            break 'taps;
                        }
                        d -= 1;
                        t[d] += 1;
                        if t[d] < lists[d].len() {
                            break;
                        }
                        t[d] = 0;
                    }
                }
            }
            out.push(acc);
            for d in (0..nsp).rev() {
                idx[d] += 1;
                if idx[d] < g.out_sp[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
        out
    };
    let n_bf = g.out_batch * g.out_feat;
    let work = n_bf * sp_count * g.cin_g * g.win.iter().map(|w| w.size as usize).product::<usize>();
    if work >= PARALLEL_WORK && n_bf >= 2 {
        (0..n_bf).into_par_iter().flat_map_iter(one_bf).collect()
    } else {
        (0..n_bf).flat_map(one_bf).collect()
    }
}
