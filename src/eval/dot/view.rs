//! Operands of the float products as matrixmultiply reads them: a batch of matrices with a
//! row and a column stride each. An operand whose batch, row and column dimension groups
//! each collapse to one stride (the usual `[M, K] x [K, N]`, transposed operands, batch
//! dims in front) is read where it lies; any other is gathered into a row-major
//! `[batch, rows, cols]` copy. An operand of another element type than the compute type
//! (bf16 into f32) is converted in one contiguous pass and then read in place the same way.
//! Both give matrixmultiply the same elements in the same
//! order, so the choice never changes a result bit; reading in place saves building an
//! offset per element and copying (14 ms and 8 ms of a 40 ms 1024³ f32 dot).

use super::super::reduce::index_offsets;
use super::super::util::strides;
use crate::hlo::ArrayLiteral;
use std::borrow::Cow;

/// A batch of matrices over one buffer.
pub(super) struct MatView<'a, T: Clone> {
    data: Cow<'a, [T]>,
    /// Offset of each batch's matrix in `data`.
    batch: Vec<usize>,
    /// Distance between consecutive rows and consecutive columns.
    pub(super) rs: isize,
    pub(super) cs: isize,
}

impl<T: Clone> MatView<'_, T> {
    /// Where batch `bi`'s matrix starts, as a pointer into the buffer.
    pub(super) fn ptr(&self, bi: usize) -> *const T {
        self.data[self.batch[bi]..].as_ptr()
    }
}

/// The view of `a` with dimension groups `[batch, rows, cols]`: `direct` is `a`'s buffer
/// when it already holds the compute type. Otherwise `convert(None)` converts the whole
/// buffer in its own order when the groups collapse (read in place, converted once), and
/// `convert(Some(offsets))` gathers (and converts) the elements at the given offsets into a
/// row-major copy when a group does not collapse.
pub(super) fn mat_view<'a, T: Clone>(
    a: &ArrayLiteral,
    groups: [&[usize]; 3],
    direct: Option<&'a [T]>,
    convert: impl FnOnce(Option<&[usize]>) -> Vec<T>,
) -> MatView<'a, T> {
    let dims = a.dims();
    let st = strides(dims);
    let size = |g: &[usize]| g.iter().map(|&d| dims[d] as usize).product::<usize>();
    let (nb, rows, cols) = (size(groups[0]), size(groups[1]), size(groups[2]));
    let elems: usize = dims.iter().map(|&d| d.max(0) as usize).product();
    if let (true, Some(rs), Some(cs)) = (
        a.data.len() == elems,
        collapse(dims, &st, groups[1]),
        collapse(dims, &st, groups[2]),
    ) {
        let data = match direct {
            Some(d) => Cow::Borrowed(d),
            None => Cow::Owned(convert(None)),
        };
        let bsizes: Vec<usize> = groups[0].iter().map(|&d| dims[d] as usize).collect();
        let bstrides: Vec<usize> = groups[0].iter().map(|&d| st[d]).collect();
        return MatView {
            data,
            batch: index_offsets(&bsizes, &bstrides),
            rs,
            cs,
        };
    }
    MatView {
        data: Cow::Owned(convert(Some(&group_offsets(a, groups)))),
        batch: (0..nb).map(|bi| bi * rows * cols).collect(),
        rs: cols as isize,
        cs: 1,
    }
}

/// The offset of every element of `a` in the order of its dimension groups (`[batch, rows,
/// cols]`, each group in its order): what a row-major copy of that layout gathers.
pub(super) fn group_offsets(a: &ArrayLiteral, groups: [&[usize]; 3]) -> Vec<usize> {
    let (dims, st) = (a.dims(), strides(a.dims()));
    let all: Vec<usize> = groups.concat();
    index_offsets(
        &all.iter().map(|&d| dims[d] as usize).collect::<Vec<_>>(),
        &all.iter().map(|&d| st[d]).collect::<Vec<_>>(),
    )
}

/// The one stride that walks dimension group `g` (in its order, as one flattened index)
/// through a row-major array, if there is one. Dimensions of size 1 take no part; an
/// empty group walks nothing (stride 1).
fn collapse(dims: &[i64], st: &[usize], g: &[usize]) -> Option<isize> {
    let live: Vec<usize> = g.iter().copied().filter(|&d| dims[d] != 1).collect();
    for w in live.windows(2) {
        if st[w[0]] != st[w[1]] * dims[w[1]] as usize {
            return None;
        }
    }
    Some(live.last().map_or(1, |&d| st[d]) as isize)
}

#[cfg(test)]
mod tests {
    use super::collapse;

    #[test]
    fn groups_collapse_only_when_contiguous_in_order() {
        // [2, 3, 4] row-major: strides [12, 4, 1].
        let (dims, st) = ([2i64, 3, 4], [12usize, 4, 1]);
        assert_eq!(collapse(&dims, &st, &[1, 2]), Some(1));
        assert_eq!(collapse(&dims, &st, &[0, 1]), Some(4));
        assert_eq!(collapse(&dims, &st, &[0]), Some(12));
        assert_eq!(collapse(&dims, &st, &[]), Some(1));
        // Out of order, or with a gap: no single stride.
        assert_eq!(collapse(&dims, &st, &[2, 1]), None);
        assert_eq!(collapse(&dims, &st, &[0, 2]), None);
        // A size-1 dimension in between does not break contiguity.
        let (dims, st) = ([2i64, 1, 4], [4usize, 4, 1]);
        assert_eq!(collapse(&dims, &st, &[0, 1, 2]), Some(1));
    }
}
