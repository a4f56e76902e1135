//! One output element of an Eigen contraction summed in Eigen's depth parts, for convolutions,
//! whose terms (`conv/eigen.rs`) arrive tap by tap with out-of-range taps skipped, so a part
//! boundary can fall anywhere in a tap's features or in a tap that is not there at all, and
//! for the last row and the last column of a product, which Eigen and oneDNN sum in orders
//! of their own.
//!
//! [`eigen_product::order`] gives the parts: consecutive depth ranges, each one FMA chain from
//! zero, the parts of a shard added to the shard's sum in turn and the shards' sums added as
//! Eigen adds its block buffers ([`ShardSum`]; a sequential order is one shard), which from
//! four shards on depends on the element's place in the product's buffer
//! ([`DepthParts::with_buffer`]; for [`DepthParts::sum`], the caller's [`ShardSum`]). Every chain, part sum and shard sum
//! starts at +0 here where Eigen writes the first one: the same value, since a chain from +0
//! never gives −0 (+0 + −0 is +0), nor does a sum of such values, so `0 + x` is `x`. A skipped
//! term (a padded tap or a dilation hole) is a zero product in Eigen's patches, which leaves a
//! chain unchanged unless the kernel value is infinite or NaN (as `conv/eigen.rs` says).

use crate::eval::dot::eigen_product::{EigenOrder, ShardSum};

/// Eigen's parts of a contraction's depth, as the ends of consecutive ranges.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(in crate::eval::dot) struct DepthParts {
    /// `(end, closes_shard)`: a part covers the depth from the previous end up to `end`; its
    /// chain is added to its shard's sum, which is added to the output where `closes_shard`.
    ends: Vec<(usize, bool)>,
    /// The contraction's last row and its own parts where they differ
    /// ([`eigen_product::last_row_order`](crate::eval::dot::eigen_product::last_row_order)).
    last_row: Option<(usize, Vec<(usize, bool)>)>,
    /// The contraction's last column where oneDNN sums it as a row of its own.
    last_column: Option<LastColumn>,
    /// The contraction's rows and columns, whose row-major buffer places each element for
    /// the adds of four or more shards ([`ShardSum::at`]); `None`: every element is placed
    /// before the buffer's tail (right for fewer than four shards).
    buffer: Option<(usize, usize)>,
}

/// A last column summed by oneDNN's single-row kernel ([`row_dot_slices`],
/// [`eigen_product::last_column_order`](crate::eval::dot::eigen_product::last_column_order)).
#[derive(Clone, Debug, PartialEq, Eq)]
struct LastColumn {
    /// The column's index.
    col: usize,
    /// Its depth slices.
    slices: EigenOrder,
    /// The row whose element of this column takes its row's order instead (the corner,
    /// [`eigen_product::corner_order`](crate::eval::dot::eigen_product::corner_order)).
    corner_row: Option<usize>,
}

/// The running state of one output element summed in [`DepthParts`]: its parts' sums, or, in
/// a last column summed as a row of its own, its terms gathered by depth (skipped ones zero),
/// since that kernel's lanes and tails follow depth positions.
#[derive(Clone, Debug)]
pub(in crate::eval::dot) enum ElementSums {
    Parts(PartSums),
    Terms(Vec<(f32, f32)>, ShardSum),
}

/// The running state of one output element summed in parts.
#[derive(Clone, Copy, Debug, Default)]
pub(in crate::eval::dot) struct PartSums {
    /// The shards finished so far.
    total: ShardSum,
    /// The current shard's finished parts.
    shard: f32,
    /// The current part's chain.
    chain: f32,
    /// Index of the current part in the parts of its row.
    part: usize,
    /// Whether the element is in the contraction's last row, summed in parts of its own.
    last_row: bool,
}

impl DepthParts {
    /// The depth `depth` in one chain.
    #[cfg(test)]
    pub(in crate::eval::dot) fn whole(depth: usize) -> DepthParts {
        DepthParts {
            ends: vec![(depth, true)],
            last_row: None,
            last_column: None,
            buffer: None,
        }
    }

    /// Eigen's order as depth ranges.
    pub(in crate::eval::dot) fn of(order: &EigenOrder) -> DepthParts {
        DepthParts {
            ends: Self::ends(order),
            last_row: None,
            last_column: None,
            buffer: None,
        }
    }

    /// `self`, with row `row` (the contraction's last) summed in `order`.
    pub(in crate::eval::dot) fn with_last_row(self, row: usize, order: &EigenOrder) -> DepthParts {
        let ends = Self::ends(order);
        DepthParts {
            last_row: Some((row, ends)),
            ..self
        }
    }

    /// `self`, with column `col` (the contraction's last) summed in `slices` by oneDNN's
    /// single-row kernel, except its element in row `corner_row`, which keeps its row's order.
    pub(in crate::eval::dot) fn with_last_column(
        self,
        col: usize,
        slices: EigenOrder,
        corner_row: Option<usize>,
    ) -> DepthParts {
        DepthParts {
            last_column: Some(LastColumn {
                col,
                slices,
                corner_row,
            }),
            ..self
        }
    }

    /// `self` for a contraction of `rows` rows and `cols` columns, whose elements
    /// [`Self::start`] places in its row-major buffer.
    pub(in crate::eval::dot) fn with_buffer(self, rows: usize, cols: usize) -> DepthParts {
        DepthParts {
            buffer: Some((rows, cols)),
            ..self
        }
    }

    /// The state the element in row `row` and column `col` starts from.
    pub(in crate::eval::dot) fn start(&self, row: usize, col: usize) -> ElementSums {
        let total = match self.buffer {
            Some((rows, cols)) => ShardSum::at(row * cols + col, rows * cols),
            None => ShardSum::default(),
        };
        match &self.last_column {
            Some(last) if last.col == col && last.corner_row != Some(row) => {
                let depth = self.ends.last().map_or(0, |&(end, _)| end);
                ElementSums::Terms(vec![(0.0, 0.0); depth], total)
            }
            _ => ElementSums::Parts(PartSums {
                last_row: self.last_row.as_ref().is_some_and(|(r, _)| *r == row),
                total,
                ..PartSums::default()
            }),
        }
    }

    /// `st` with the terms at depths `d0..d0 + count` added (`term(i)` the pair at depth
    /// `d0 + i`). Depths only grow from call to call.
    pub(in crate::eval::dot) fn add(
        &self,
        st: ElementSums,
        d0: usize,
        count: usize,
        term: impl Fn(usize) -> (f32, f32),
    ) -> ElementSums {
        match st {
            ElementSums::Parts(st) => ElementSums::Parts(self.add_parts(st, d0, count, term)),
            ElementSums::Terms(mut terms, total) => {
                // Past the depth the parts cover (not for a contraction's own terms): dropped.
                let end = (d0 + count).min(terms.len());
                for (i, slot) in terms.iter_mut().enumerate().take(end).skip(d0) {
                    *slot = term(i - d0);
                }
                ElementSums::Terms(terms, total)
            }
        }
    }

    /// The output.
    pub(in crate::eval::dot) fn finish(&self, st: ElementSums) -> f32 {
        match (st, &self.last_column) {
            (ElementSums::Parts(st), _) => self.finish_parts(st),
            (ElementSums::Terms(terms, total), Some(last)) => {
                row_dot_slices(&last.slices, |d| terms[d], total)
            }
            // `start` gathers terms only for a last column.
            (ElementSums::Terms(terms, total), None) => self.sum(terms.len(), |d| terms[d], total),
        }
    }

    /// The ends of `order`'s parts.
    fn ends(order: &EigenOrder) -> Vec<(usize, bool)> {
        let shards: Vec<&[usize]> = match order {
            EigenOrder::Sequential(parts) => vec![parts],
            EigenOrder::Sharded(shards) => shards.iter().map(Vec::as_slice).collect(),
        };
        let mut ends = Vec::new();
        let mut end = 0;
        for parts in shards {
            for (i, &len) in parts.iter().enumerate() {
                end += len;
                ends.push((end, i + 1 == parts.len()));
            }
        }
        ends
    }

    /// The parts of the row `st` is in.
    fn row_ends(&self, st: &PartSums) -> &[(usize, bool)] {
        match &self.last_row {
            Some((_, ends)) if st.last_row => ends,
            _ => &self.ends,
        }
    }

    /// Whether every element is summed in the same parts.
    fn same_for_every_element(&self) -> bool {
        self.last_row.is_none() && self.last_column.is_none()
    }

    /// The sum of the element in row `row` and column `col` over `count` terms from depth 0
    /// (`term(i)` the pair at depth `i`), in its parts: by oneDNN's single-row kernel in a
    /// last column summed as a row, its row's parts in a last row or corner of its own, its
    /// shards added as its place in the buffer says. For a product whose elements are not
    /// outputs but go on to be added (the transposed convolution's (pixel, tap) products),
    /// each summed whole before it is added.
    pub(in crate::eval::dot) fn element_sum(
        &self,
        row: usize,
        col: usize,
        count: usize,
        term: impl Fn(usize) -> (f32, f32),
    ) -> f32 {
        self.finish(self.add(self.start(row, col), 0, count, term))
    }

    /// Whether every output is one FMA chain over the whole depth.
    pub(in crate::eval::dot) fn is_whole(&self) -> bool {
        self.ends.len() <= 1 && self.same_for_every_element()
    }

    /// `st` with the terms at depths `d0..d0 + count` added (`term(i)` is the pair at depth
    /// `d0 + i`), closing the parts that end on the way. Depths only grow from call to call.
    fn add_parts(
        &self,
        mut st: PartSums,
        d0: usize,
        count: usize,
        term: impl Fn(usize) -> (f32, f32),
    ) -> PartSums {
        let mut i = 0;
        while i < count {
            let end = match self.row_ends(&st).get(st.part) {
                Some(&(end, _)) if end <= d0 + i => {
                    st = self.close(st);
                    continue;
                }
                Some(&(end, _)) => (end - d0).min(count),
                // Past the last part (the depth was larger than the parts cover): one chain.
                None => count,
            };
            st.chain = (i..end).fold(st.chain, |acc, j| {
                let (x, y) = term(j);
                x.mul_add(y, acc)
            });
            i = end;
        }
        st
    }

    /// The output: every part still open closed in order.
    fn finish_parts(&self, mut st: PartSums) -> f32 {
        while st.part < self.row_ends(&st).len() {
            st = self.close(st);
        }
        st.total.finish() + st.shard + st.chain
    }

    /// The sum of `count` terms from depth 0 (`term(i)` the pair at depth `i`), its shards
    /// added into `total` (an empty [`ShardSum`] placed at the element).
    pub(in crate::eval::dot) fn sum(
        &self,
        count: usize,
        term: impl Fn(usize) -> (f32, f32),
        total: ShardSum,
    ) -> f32 {
        let start = PartSums {
            total,
            ..PartSums::default()
        };
        self.finish_parts(self.add_parts(start, 0, count, term))
    }

    /// `st` with its current part's chain added to its shard, and the shard to the total if
    /// the part ends it.
    fn close(&self, mut st: PartSums) -> PartSums {
        let closes_shard = self.row_ends(&st).get(st.part).is_none_or(|&(_, c)| c);
        st.shard += st.chain;
        st.chain = 0.0;
        if closes_shard {
            st.total.push(st.shard);
            st.shard = 0.0;
        }
        st.part += 1;
        st
    }
}

/// oneDNN's sum of `count` terms (`term(i)` the pair at depth `i`) for a single row of its
/// sgemm (`m = 1`), onto the running sum `acc` (`None` for the first slice, which is
/// written): one 8-lane accumulator of FMAs over whole iterations of 16 terms (term `i` in
/// lane `i mod 8`), its lanes reduced as `((l0 + l1) + (l4 + l5)) + ((l2 + l3) + (l6 + l7))`,
/// then `acc` added, then the tails, each of rounded products summed on its own and added: a
/// vector of 8 reduced the same way, one of 4, `(t0 + t1) + (t2 + t3)`, a pair, a single
/// term. Fewer than 4 terms in all are one FMA chain from zero, added to `acc`. Read off the oracle with
/// cancelling ±2^40 pairs and exact-product data (the order, K = 13 to 2000), then random data
/// (the roundings, K = 2 to 35).
pub(in crate::eval::dot) fn row_dot(
    acc: Option<f32>,
    count: usize,
    term: impl Fn(usize) -> (f32, f32),
) -> f32 {
    let product = |i: usize| {
        let (x, y) = term(i);
        x * y
    };
    let reduce8 = |l: [f32; 8]| ((l[0] + l[1]) + (l[4] + l[5])) + ((l[2] + l[3]) + (l[6] + l[7]));
    if count < 4 {
        let chain = (0..count).fold(0f32, |s, j| {
            let (x, y) = term(j);
            x.mul_add(y, s)
        });
        return acc.map_or(chain, |acc| acc + chain);
    }
    let main = count / 16 * 16;
    let mut lanes = [0f32; 8];
    for i in 0..main {
        let (x, y) = term(i);
        lanes[i % 8] = x.mul_add(y, lanes[i % 8]);
    }
    let mut sum = reduce8(lanes);
    if let Some(acc) = acc {
        sum += acc;
    }
    let mut i = main;
    if count - i >= 8 {
        sum += reduce8(std::array::from_fn(|j| product(i + j)));
        i += 8;
    }
    if count - i >= 4 {
        sum += (product(i) + product(i + 1)) + (product(i + 2) + product(i + 3));
        i += 4;
    }
    if count - i >= 2 {
        sum += product(i) + product(i + 1);
        i += 2;
    }
    if count > i {
        sum += product(i);
    }
    sum
}

/// The sum of `count` terms in `order`, each slice by [`row_dot`] onto the slices before it,
/// the shards' sums added into `total` (an empty [`ShardSum`] placed at the element).
pub(in crate::eval::dot) fn row_dot_slices(
    order: &EigenOrder,
    term: impl Fn(usize) -> (f32, f32),
    mut total: ShardSum,
) -> f32 {
    let shards: Vec<&[usize]> = match order {
        EigenOrder::Sequential(parts) => vec![parts],
        EigenOrder::Sharded(shards) => shards.iter().map(Vec::as_slice).collect(),
    };
    let mut k0 = 0;
    for slices in shards {
        let mut acc = None;
        for &len in slices {
            acc = Some(row_dot(acc, len, |i| term(k0 + i)));
            k0 += len;
        }
        total.push(acc.unwrap_or(0.0));
    }
    total.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ±2^40 probe of the module's measurements: a pair cancels only inside one chain, so
    /// which pairs survive says where the chains end. Terms are `(value, 1.0)`.
    fn probe(parts: &DepthParts, values: &[f32]) -> f32 {
        parts.sum(values.len(), |i| (values[i], 1.0), ShardSum::default())
    }

    #[test]
    fn a_part_boundary_restarts_the_chain() {
        let big = 2f32.powi(40);
        let v = [1.0, big, 1.0, -big, 1.0, 1.0];
        // One chain: 1, big (the 1 lost), big, 0, 1, 2.
        assert_eq!(probe(&DepthParts::whole(6), &v), 2.0);
        // Parts [0, 2) and [2, 6): big, then 1 - big + 1 + 1 = -big; the output big - big.
        let two = DepthParts::of(&EigenOrder::Sequential(vec![2, 4]));
        assert_eq!(probe(&two, &v), 0.0);
    }

    #[test]
    fn shards_sum_their_parts_before_joining_the_output() {
        let (a, b, c, d) = (1f32, 2f32.powi(-30), 2f32.powi(-30), 2f32.powi(-24));
        let v = [a, b, c, d];
        // Shards (a + b) and (c + d): b is lost against a, c is kept against d, and c + d,
        // above half an ulp of 1, rounds the output up.
        let sharded = DepthParts::of(&EigenOrder::Sharded(vec![vec![1, 1], vec![1, 1]]));
        assert_eq!(probe(&sharded, &v), 1.0 + 2f32.powi(-23));
        // The same parts in one shard: c is lost, and 1 + 2^-24 is a tie, to even: 1.
        let sequential = DepthParts::of(&EigenOrder::Sequential(vec![1, 1, 1, 1]));
        assert_eq!(probe(&sequential, &v), 1.0);
    }

    /// 29 terms: 16 in the lanes, a vector of 8, one of 4 and one scalar. With 2^24 in lane
    /// 0 and a 1 in lane 1, the reduction loses that 1, and the tails' ones arrive summed
    /// (8, then 4) where one by one each would be lost; the last scalar is a tie, to even.
    #[test]
    fn row_dot_reduces_the_lanes_then_adds_the_tails() {
        let big = 2f32.powi(24);
        let mut v = [0f32; 29];
        v[0] = big;
        v[1] = 1.0;
        v[16..29].fill(1.0);
        assert_eq!(row_dot(None, 29, |i| (v[i], 1.0)), big + 12.0);
        // One chain would lose every 1.
        assert_eq!(
            DepthParts::whole(29).sum(29, |i| (v[i], 1.0), ShardSum::default()),
            big
        );
        // A running sum enters after the reduction: -2^24 cancels it, and the tails count.
        assert_eq!(row_dot(Some(-big), 29, |i| (v[i], 1.0)), 13.0);
    }

    /// The terms of `row_dot_reduces_the_lanes_then_adds_the_tails` arriving as a
    /// convolution's taps do (depths 0..2, then 16..29; 2..16 skipped, zero products): the last
    /// column gathers them by depth and sums them as that test's row, every other column and
    /// the corner as one chain.
    #[test]
    fn a_last_column_sums_its_gathered_terms_as_a_row() {
        let big = 2f32.powi(24);
        let parts =
            DepthParts::whole(29).with_last_column(3, EigenOrder::Sequential(vec![29]), Some(7));
        let sum = |row, col| {
            let st = parts.start(row, col);
            let st = parts.add(st, 0, 2, |i| ([big, 1.0][i], 1.0));
            parts.finish(parts.add(st, 16, 13, |_| (1.0, 1.0)))
        };
        assert_eq!(sum(0, 3), big + 12.0);
        assert_eq!(sum(0, 2), big);
        assert_eq!(sum(7, 3), big);
        assert!(!parts.same_for_every_element() && !parts.is_whole());
    }

    /// The same terms summed at once, as the transposed convolution sums a (pixel, tap)
    /// product: in the last column as that row, in the others as one chain, and in the corner
    /// of its own as its row.
    #[test]
    fn an_element_sum_takes_its_columns_and_rows_order() {
        let big = 2f32.powi(24);
        let term = |i: usize| match i {
            0 => (big, 1.0),
            2..=15 => (0.0, 0.0),
            _ => (1.0, 1.0),
        };
        let last = || EigenOrder::Sequential(vec![29]);
        let parts = DepthParts::whole(29).with_last_column(3, last(), None);
        assert_eq!(parts.element_sum(0, 3, 29, term), big + 12.0);
        assert_eq!(parts.element_sum(7, 3, 29, term), big + 12.0);
        assert_eq!(parts.element_sum(0, 2, 29, term), big);
        let corner = DepthParts::whole(29).with_last_column(3, last(), Some(7));
        assert_eq!(corner.element_sum(0, 3, 29, term), big + 12.0);
        assert_eq!(corner.element_sum(7, 3, 29, term), big);
    }

    /// A last row of its own in parts, the others whole: 2^24 then 28 ones in one chain lose
    /// every 1 (2^24 + 1 ties to even); in parts of 8, 8, 8 and 5 from zero the first part
    /// loses its 7 ones the same way, the others sum to 8, 8 and 5 exactly, and 2^24 + 8 + 8
    /// + 5 = 2^24 + 21 ties to 2^24 + 20.
    #[test]
    fn an_element_sum_in_the_last_row_takes_that_rows_parts() {
        let big = 2f32.powi(24);
        let term = |i: usize| if i == 0 { (big, 1.0) } else { (1.0, 1.0) };
        let parts =
            DepthParts::whole(29).with_last_row(4, &EigenOrder::Sequential(vec![8, 8, 8, 5]));
        assert_eq!(parts.element_sum(3, 0, 29, term), big);
        assert_eq!(parts.element_sum(4, 0, 29, term), big + 20.0);
    }

    #[test]
    fn skipped_terms_still_close_their_parts() {
        // Terms at depths 0, 1 (2^24 and 1) and 5, 6 (ones); 2 to 4 skipped, as a padded tap.
        let big = 2f32.powi(24);
        let run = |parts: Vec<usize>| {
            let parts = DepthParts::of(&EigenOrder::Sequential(parts));
            let st = parts.add_parts(PartSums::default(), 0, 2, |i| ([big, 1.0][i], 1.0));
            let st = parts.add_parts(st, 5, 2, |_| (1.0, 1.0));
            parts.finish_parts(st)
        };
        // [0, 3) [3, 6) [6, 8): each 1 added to 2^24 on its own, a tie to even each time.
        assert_eq!(run(vec![3, 3, 2]), big);
        // [0, 3) [3, 8): the two ones are one chain, 2, which 2^24 keeps.
        assert_eq!(run(vec![3, 5]), big + 2.0);
    }
}
