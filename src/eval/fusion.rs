//! Fused elementwise execution: a run of elementwise instructions over arrays of one element
//! count is evaluated tile by tile, each tile carried through every instruction of the group
//! while it is in cache, and only the values used outside the group are materialised.
//!
//! Bit-identity with unfused evaluation holds by construction: a tile is evaluated by the very
//! kernels [`super::dispatch`] calls, on rank-1 arrays holding the tile's elements, and every
//! kernel here is elementwise (element `i` of the result depends only on element `i` of each
//! operand, or on a whole scalar operand). What fusion changes is memory traffic and
//! allocation: intermediates live per tile, a 16M-element chain allocates its outputs only,
//! and within a tile a member writes into the tile of an operand it reads for the last time
//! (the in-place kernels of [`elementwise::in_place`], as unfused evaluation does with whole
//! arrays), so a tile's scratch memory stays the same few buffers.
//!
//! Instructions XLA:CPU's numerics rules pair with others (excess precision's widened
//! converts, contracted multiply-adds) are left unfused, as are instructions seen by hooks
//! (a device model or an observer needs every value); `EvalOptions::fusion` turns it off.
//! If a fused group fails, the evaluator reruns its instructions one by one, so errors name
//! the instruction and shapes as the user wrote them.

use super::elementwise::{self, in_place, PAR_THRESHOLD};
use super::{err, shape_ops, sole_array, take_unique_array, EvalError, KResult, Value};
use crate::hlo::{
    ArrayData, ArrayLiteral, ArrayShape, Computation, ElementType, InstrId, Instruction, Opcode,
    Shape,
};
use rayon::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};

/// Elements per tile (and the smallest element count worth fusing) unless the options say
/// otherwise: 8192 f32 elements are 32 KiB, so a five-instruction group's tiles stay in L2.
pub const DEFAULT_TILE: usize = 8192;

/// One step of a computation's execution: an instruction, or a fused group.
#[derive(Debug)]
pub(crate) enum Step {
    One(InstrId),
    Group(Group),
}

/// A fused group: elementwise instructions over arrays of `len` elements.
#[derive(Debug)]
pub(crate) struct Group {
    /// The members in execution order (a post order of the group).
    pub members: Vec<InstrId>,
    /// Members whose values are read outside the group, or are the root: materialised.
    pub outputs: Vec<InstrId>,
    /// Element count of every member.
    pub len: usize,
}

/// Whether `op` has a tile kernel ([`tile_kernel`]): the elementwise opcodes and broadcast.
pub(crate) fn fusible_opcode(op: Opcode) -> bool {
    op.as_unary().is_some()
        || op.as_binary().is_some()
        || matches!(
            op,
            Opcode::Compare | Opcode::Select | Opcode::Clamp | Opcode::Convert | Opcode::Broadcast
        )
}

/// Evaluates one fusible instruction on a tile (its shape already the tile's): the same
/// kernels [`super::dispatch`] uses.
fn tile_kernel(ins: &Instruction, ops: &[&Value]) -> KResult {
    if let Some(op) = ins.opcode.as_unary() {
        return elementwise::unary(op, ins, ops);
    }
    if let Some(op) = ins.opcode.as_binary() {
        return elementwise::binary(op, ins, ops);
    }
    match ins.opcode {
        Opcode::Compare => elementwise::compare(ins, ops),
        Opcode::Select => elementwise::select(ins, ops),
        Opcode::Clamp => elementwise::clamp(ins, ops),
        Opcode::Convert => elementwise::convert(ins, ops),
        Opcode::Broadcast => shape_ops::broadcast(ins, ops),
        other => err(format!("'{other}' has no fused kernel")),
    }
}

/// The element count of an array-shaped instruction.
fn elements(ins: &Instruction) -> Option<usize> {
    ins.shape.as_array().map(|s| s.element_count())
}

/// Whether `ins` may join a group: a fusible opcode on an array of at least `min_len`
/// elements, not `excluded`; a broadcast only of a scalar (its tile is a fill).
fn candidate(comp: &Computation, ins: &Instruction, excluded: bool, min_len: usize) -> bool {
    if excluded || !fusible_opcode(ins.opcode) || elements(ins).is_none_or(|n| n < min_len) {
        return false;
    }
    if ins.opcode == Opcode::Broadcast {
        let scalar = ins
            .operands
            .first()
            .and_then(|&o| comp.instr(o).shape.as_array())
            .is_some_and(|s| s.rank() == 0);
        return scalar && ins.operands.len() == 1;
    }
    true
}

/// The execution steps of `comp`: `order` (a post order) with runs of candidate
/// instructions of one element count fused. `reads[i]` lists every value instruction `i`
/// reads (its operands, and the values a numerics rule makes it read); `excluded[i]` keeps
/// `i` out of groups. A non-member that reads a member closes the open group first; one
/// that does not runs before the group, which keeps every group's inputs computed before it.
pub(crate) fn steps(
    comp: &Computation,
    order: &[InstrId],
    reads: &[Vec<InstrId>],
    excluded: &[bool],
    min_len: usize,
) -> Vec<Step> {
    let n = comp.instructions.len();
    let mut users: Vec<Vec<InstrId>> = vec![Vec::new(); n];
    for (i, r) in reads.iter().enumerate() {
        for o in r {
            users[o.index()].push(InstrId(i as u32));
        }
    }
    let mut out = Vec::with_capacity(order.len());
    let mut open: Vec<InstrId> = Vec::new();
    let mut in_open = vec![false; n];
    let mut open_len = 0;
    let close = |open: &mut Vec<InstrId>, in_open: &mut [bool], out: &mut Vec<Step>, len| {
        if open.len() > 1 {
            let outputs = open
                .iter()
                .copied()
                .filter(|m| *m == comp.root || users[m.index()].iter().any(|u| !in_open[u.index()]))
                .collect();
            out.push(Step::Group(Group {
                members: open.clone(),
                outputs,
                len,
            }));
        } else {
            out.extend(open.iter().map(|&m| Step::One(m)));
        }
        open.iter().for_each(|m| in_open[m.index()] = false);
        open.clear();
    };
    for &id in order {
        let ins = comp.instr(id);
        if candidate(comp, ins, excluded[id.index()], min_len) {
            let len = elements(ins).unwrap_or(0);
            if !open.is_empty() && len != open_len {
                close(&mut open, &mut in_open, &mut out, open_len);
            }
            open_len = len;
            open.push(id);
            in_open[id.index()] = true;
        } else {
            if reads[id.index()].iter().any(|o| in_open[o.index()]) {
                close(&mut open, &mut in_open, &mut out, open_len);
            }
            out.push(Step::One(id));
        }
    }
    close(&mut open, &mut in_open, &mut out, open_len);
    out
}

/// Where a member's operand comes from, per tile.
#[derive(Clone, Copy)]
enum Source {
    /// An earlier member's tile.
    Member(usize),
    /// The tile's elements of an input (index into the group's sliced inputs).
    Sliced(usize),
    /// A whole input (a scalar operand of clamp or select, or a broadcast's scalar).
    Whole(InstrId),
}

/// Per member, the operand slot whose tile value its result may be written into (the
/// evaluator's in-place rule, per tile): an earlier member's tile or an input's slice, read
/// once by this member and by no later one, of the result's element type. Within a group
/// every tile value is private to the tile, so this is decided once for all tiles.
fn tile_donors(
    comp: &Computation,
    group: &Group,
    sources: &[Vec<Source>],
    input_tys: &[ElementType],
) -> Result<Vec<Option<usize>>, EvalError> {
    let same = |a: &Source, b: &Source| match (a, b) {
        (Source::Member(x), Source::Member(y)) | (Source::Sliced(x), Source::Sliced(y)) => x == y,
        _ => false,
    };
    let ty_of = |s: &Source| match *s {
        Source::Member(j) => comp.instr(group.members[j]).shape.as_array().map(|a| a.ty),
        Source::Sliced(j) => Some(input_tys[j]),
        Source::Whole(_) => None,
    };
    group
        .members
        .iter()
        .enumerate()
        .map(|(k, &m)| {
            let ins = comp.instr(m);
            let out = ins
                .shape
                .as_array()
                .ok_or_else(|| EvalError::new("a fused instruction has no array shape"))?;
            Ok(in_place::donor_slots(ins.opcode)
                .iter()
                .copied()
                .find(|&slot| {
                    let Some(src) = sources[k].get(slot) else {
                        return false;
                    };
                    ty_of(src).is_some_and(|t| in_place::fits(ins.opcode, t, out.ty))
                        && sources[k].iter().filter(|s| same(s, src)).count() == 1
                        && !sources[k + 1..].iter().flatten().any(|s| same(s, src))
                }))
        })
        .collect()
}

/// Per output of `group` (in `group.outputs` order), the input whose buffer it may be written
/// into: an input the group reads tile by tile and for the last time (every use it has left is
/// a member's operand), held by nobody else, of the output's element type, each donor given
/// to one output. Written tile by tile over the donor, an output reads every input tile before
/// it writes that tile, so no later tile sees a changed input; what it saves is the output's
/// fresh buffer (a 64 MB chain result is 16,384 page faults on its first write).
pub(crate) fn output_donors(
    comp: &Computation,
    group: &Group,
    slots: &[Option<Value>],
    remaining: &[u32],
) -> Vec<Option<InstrId>> {
    let mut reads: Vec<(InstrId, u32)> = Vec::new();
    for &m in &group.members {
        for &o in &comp.instr(m).operands {
            if group.members.contains(&o) {
                continue;
            }
            match reads.iter_mut().find(|(x, _)| *x == o) {
                Some((_, n)) => *n += 1,
                None => reads.push((o, 1)),
            }
        }
    }
    let mut taken: Vec<InstrId> = Vec::new();
    group
        .outputs
        .iter()
        .map(|&out| {
            let ty = comp.instr(out).shape.as_array()?.ty;
            let donor = reads.iter().find_map(|&(o, n)| {
                let fits = remaining[o.index()] == n
                    && !taken.contains(&o)
                    && sole_array(&slots[o.index()])
                        .is_some_and(|a| a.shape.ty == ty && a.data.len() == group.len);
                fits.then_some(o)
            })?;
            taken.push(donor);
            Some(donor)
        })
        .collect()
}

/// A fused group that failed: the error, and the donated inputs back when none of them was
/// written yet (the evaluator then puts them back and reruns the group unfused, so the error
/// names the instruction as written). `None` when a donor was already partly overwritten: the
/// group's inputs are gone and the error is final.
pub(crate) struct GroupFailure {
    pub error: EvalError,
    pub intact: Option<Vec<(InstrId, ArrayLiteral)>>,
}

/// Where a sliced input's tiles are read from.
enum Input<'a> {
    /// The input's value, still in its slot.
    Slot(&'a ArrayLiteral),
    /// The input's buffer, donated to output `j`: each tile is read from the output's chunk
    /// before that chunk is written.
    Output(usize, ElementType),
}

/// Evaluates `group` and returns its outputs' values (in `group.outputs` order). `slots`
/// holds every value computed so far; `tile` is the tile length; `donated[j]`, when set, is
/// the input (taken out of its slot, see [`output_donors`]) whose buffer output `j` is
/// written into.
pub(crate) fn run_group(
    comp: &Computation,
    group: &Group,
    slots: &[Option<Value>],
    tile: usize,
    donated: Vec<Option<(InstrId, ArrayLiteral)>>,
) -> Result<Vec<Value>, Box<GroupFailure>> {
    // The donors' own shapes, to hand them back unchanged.
    let donor_shapes: Vec<Option<(InstrId, ArrayShape)>> = donated
        .iter()
        .map(|d| d.as_ref().map(|(id, a)| (*id, a.shape.clone())))
        .collect();
    let overwrote = AtomicBool::new(false);
    let mut buffers: Vec<(ArrayShape, ArrayData)> = Vec::with_capacity(group.outputs.len());
    let mut spare = donated.into_iter();
    for &o in &group.outputs {
        let Some(s) = comp.instr(o).shape.as_array() else {
            let error = EvalError::new("a fused output has no array shape");
            let intact = Some(spare.flatten().collect());
            return Err(Box::new(GroupFailure { error, intact }));
        };
        let data = match spare.next().flatten() {
            Some((_, a)) => a.data,
            None => ArrayData::zeros(s.ty, group.len),
        };
        buffers.push((s.clone(), data));
    }
    match run_tiles(
        comp,
        group,
        slots,
        tile,
        &mut buffers,
        &donor_shapes,
        &overwrote,
    ) {
        Ok(()) => Ok(buffers
            .into_iter()
            .map(|(shape, data)| Value::array(ArrayLiteral { shape, data }))
            .collect()),
        Err(error) => {
            let intact = (!overwrote.load(Ordering::SeqCst)).then(|| {
                buffers
                    .into_iter()
                    .zip(donor_shapes)
                    .filter_map(|((_, data), d)| {
                        d.map(|(id, shape)| (id, ArrayLiteral { shape, data }))
                    })
                    .collect()
            });
            Err(Box::new(GroupFailure { error, intact }))
        }
    }
}

/// [`run_group`]'s tiles: every member per tile, the outputs written into `buffers`.
/// `donors[j]` names the input whose buffer `buffers[j]` is (its tiles are read from there);
/// `overwrote` is set once a tile writes into such a buffer.
fn run_tiles(
    comp: &Computation,
    group: &Group,
    slots: &[Option<Value>],
    tile: usize,
    buffers: &mut [(ArrayShape, ArrayData)],
    donors_of_outputs: &[Option<(InstrId, ArrayShape)>],
    overwrote: &AtomicBool,
) -> Result<(), EvalError> {
    let tile = tile.max(1);
    let len = group.len;
    let member_at = |id: InstrId| group.members.iter().position(|&m| m == id);
    let donated_to = |id: InstrId| {
        donors_of_outputs
            .iter()
            .position(|d| d.as_ref().is_some_and(|(x, _)| *x == id))
    };
    let value = |id: InstrId| {
        slots[id.index()]
            .as_ref()
            .ok_or_else(|| EvalError::new("a fused group's input was not computed"))
    };
    // Inputs with the group's element count are sliced per tile, once each.
    let mut sliced: Vec<InstrId> = Vec::new();
    let mut sources: Vec<Vec<Source>> = Vec::with_capacity(group.members.len());
    for &m in &group.members {
        let mut s = Vec::new();
        for &o in &comp.instr(m).operands {
            s.push(match member_at(o) {
                Some(j) => Source::Member(j),
                None if donated_to(o).is_some() || value(o)?.as_array()?.data.len() == len => {
                    let k = sliced.iter().position(|&x| x == o).unwrap_or_else(|| {
                        sliced.push(o);
                        sliced.len() - 1
                    });
                    Source::Sliced(k)
                }
                None => Source::Whole(o),
            });
        }
        sources.push(s);
    }
    let inputs: Vec<Input> = sliced
        .iter()
        .map(|&o| match donated_to(o) {
            Some(j) => Ok(Input::Output(j, buffers[j].0.ty)),
            None => value(o).and_then(|v| v.as_array()).map(Input::Slot),
        })
        .collect::<Result<_, _>>()?;
    let input_tys: Vec<ElementType> = inputs
        .iter()
        .map(|i| match i {
            Input::Slot(a) => a.shape.ty,
            Input::Output(_, t) => *t,
        })
        .collect();
    let donors = tile_donors(comp, group, &sources, &input_tys)?;
    // The members re-shaped to a full tile and to the last, shorter one.
    let as_tile = |n: usize| -> Result<Vec<Instruction>, EvalError> {
        group
            .members
            .iter()
            .map(|&m| {
                let mut ins = comp.instr(m).clone();
                let ty = ins
                    .shape
                    .as_array()
                    .ok_or_else(|| EvalError::new("a fused instruction has no array shape"))?
                    .ty;
                ins.shape = Shape::Array(ArrayShape::new(ty, vec![n as i64]));
                Ok(ins)
            })
            .collect()
    };
    let full_len = tile.min(len);
    let full = as_tile(full_len)?;
    let last = as_tile(match len % tile {
        0 => full_len,
        r => r,
    })?;
    let out_at: Vec<Option<usize>> = group
        .members
        .iter()
        .map(|m| group.outputs.iter().position(|o| o == m))
        .collect();
    let is_donated: Vec<bool> = donors_of_outputs.iter().map(Option::is_some).collect();
    // Per tile, one mutable chunk of every output.
    let mut chunks: Vec<Vec<TileMut>> = Vec::new();
    for (_, data) in buffers.iter_mut() {
        for (t, c) in split(data, tile).into_iter().enumerate() {
            if t == chunks.len() {
                chunks.push(Vec::with_capacity(group.outputs.len()));
            }
            chunks[t].push(c);
        }
    }
    let run_tile = |(t, mut outs): (usize, Vec<TileMut>)| -> Result<(), EvalError> {
        let lo = t * tile;
        let hi = (lo + tile).min(len);
        let shapes = if hi - lo == full_len { &full } else { &last };
        // A donated input's tile is read from its output's chunk, before anything writes it.
        let mut pieces: Vec<Option<Value>> = inputs
            .iter()
            .map(|input| {
                let (ty, data) = match input {
                    Input::Slot(a) => (a.shape.ty, sub(&a.data, lo, hi)),
                    Input::Output(j, ty) => (*ty, outs[*j].to_data()),
                };
                Some(Value::array(ArrayLiteral {
                    shape: ArrayShape::new(ty, vec![(hi - lo) as i64]),
                    data,
                }))
            })
            .collect();
        let mut vals: Vec<Option<Value>> = Vec::with_capacity(group.members.len());
        for (k, ins) in shapes.iter().enumerate() {
            // A tile value read for the last time here, taken out of its cell.
            let donor = donors[k].and_then(|slot| {
                let cell = match sources[k][slot] {
                    Source::Member(j) => &mut vals[j],
                    Source::Sliced(j) => &mut pieces[j],
                    Source::Whole(_) => return None,
                };
                take_unique_array(cell).map(|a| (slot, a))
            });
            let ops: Vec<Option<&Value>> = sources[k]
                .iter()
                .map(|s| match *s {
                    Source::Member(j) => Ok(vals[j].as_ref()),
                    Source::Sliced(j) => Ok(pieces[j].as_ref()),
                    Source::Whole(o) => value(o).map(Some),
                })
                .collect::<Result<_, _>>()?;
            // The in-place kernel, or (none covers the case) the ordinary one with the donor
            // back among the operands.
            let mut back = None;
            let done = match donor {
                Some((slot, d)) => match in_place::eval(ins, slot, d, &ops) {
                    in_place::Outcome::Done(r) => Some(r?),
                    in_place::Outcome::Declined(d) => {
                        back = Some(Value::array(d));
                        None
                    }
                },
                None => None,
            };
            let v = match done {
                Some(v) => v,
                None => {
                    let ops: Vec<&Value> = ops
                        .iter()
                        .map(|o| o.or(back.as_ref()))
                        .collect::<Option<_>>()
                        .ok_or_else(|| EvalError::new("a fused operand was released early"))?;
                    tile_kernel(ins, &ops)?
                }
            };
            if let Some(j) = out_at[k] {
                if is_donated[j] {
                    overwrote.store(true, Ordering::SeqCst);
                }
                outs[j].copy_from(&v.as_array()?.data)?;
            }
            vals.push(Some(v));
        }
        Ok(())
    };
    let jobs = chunks.into_iter().enumerate();
    if len >= PAR_THRESHOLD {
        jobs.collect::<Vec<_>>()
            .into_par_iter()
            .try_for_each(run_tile)
    } else {
        jobs.into_iter().try_for_each(run_tile)
    }
}

macro_rules! tile_mut {
    ($($v:ident: $t:ty),* $(,)?) => {
        /// One tile of an output buffer, borrowed mutably with its storage type.
        enum TileMut<'a> {
            $($v(&'a mut [$t]),)*
        }

        /// `data` in mutable chunks of `n` elements (the last may be shorter).
        fn split(data: &mut ArrayData, n: usize) -> Vec<TileMut<'_>> {
            match data {
                $(ArrayData::$v(x) => x.chunks_mut(n).map(TileMut::$v).collect(),)*
            }
        }

        impl TileMut<'_> {
            /// A copy of this chunk's elements (a donated input's tile, read before the
            /// chunk is written).
            fn to_data(&self) -> ArrayData {
                match self {
                    $(TileMut::$v(d) => ArrayData::$v(d.to_vec()),)*
                }
            }

            /// Copies a tile's result into this chunk of the output.
            fn copy_from(&mut self, src: &ArrayData) -> Result<(), EvalError> {
                match (self, src) {
                    $((TileMut::$v(d), ArrayData::$v(s)) if d.len() == s.len() => {
                        d.copy_from_slice(s);
                        Ok(())
                    })*
                    _ => err("a fused tile's result does not fit its output"),
                }
            }
        }

        /// Elements `lo..hi` of `data`, same storage type.
        fn sub(data: &ArrayData, lo: usize, hi: usize) -> ArrayData {
            match data {
                $(ArrayData::$v(x) => ArrayData::$v(x[lo..hi].to_vec()),)*
            }
        }
    };
}

tile_mut!(
    Pred: bool,
    S8: i8,
    S16: i16,
    S32: i32,
    S64: i64,
    U8: u8,
    U16: u16,
    U32: u32,
    U64: u64,
    F16: half::f16,
    BF16: half::bf16,
    F32: f32,
    F64: f64,
    C64: num_complex::Complex<f32>,
    C128: num_complex::Complex<f64>,
    Bits8: u8,
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::{EvalOptions, Evaluator};
    use crate::hlo::parse_module;

    /// The steps of the entry computation, written as names: a group as `[a b | outputs]`.
    fn steps_of(text: &str, min_len: usize) -> String {
        let m = parse_module(text).unwrap();
        let comp = m.entry_computation();
        let order = comp.post_order().unwrap();
        let reads: Vec<Vec<InstrId>> = comp
            .instructions
            .iter()
            .map(|i| i.operands.clone())
            .collect();
        let excluded = vec![false; comp.instructions.len()];
        let name = |id: &InstrId| comp.instr(*id).name.clone();
        steps(comp, &order, &reads, &excluded, min_len)
            .iter()
            .map(|s| match s {
                Step::One(id) => name(id),
                Step::Group(g) => format!(
                    "[{} | {}]",
                    g.members.iter().map(name).collect::<Vec<_>>().join(" "),
                    g.outputs.iter().map(name).collect::<Vec<_>>().join(" ")
                ),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    const CHAIN: &str = "HloModule chain
ENTRY main {
  x = f32[64] parameter(0)
  y = f32[64] parameter(1)
  a = f32[64] add(x, y)
  m = f32[64] multiply(a, x)
  e = f32[64] exponential(m)
  c = pred[64] compare(e, y), direction=GT
  ROOT s = f32[64] select(c, e, y)
}
";

    #[test]
    fn a_chain_is_one_group_with_only_its_root_materialised() {
        assert_eq!(steps_of(CHAIN, 8), "x, y, [a m e c s | s]");
        // Below the smallest fused size nothing fuses.
        assert_eq!(steps_of(CHAIN, 65), "x, y, a, m, e, c, s");
    }

    #[test]
    fn a_reader_outside_the_group_closes_it_and_later_members_start_another() {
        // Post order x y a z r b n c t. z reads no member, so it runs while a's group is
        // still open (before a); r reads a, so the group closes before r (a alone: unfused).
        // The scalar broadcast b, n and c form a new group; n and c are read by the tuple.
        let text = "HloModule split
add_f32 {
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  ROOT s = f32[] add(p, q)
}
ENTRY main {
  x = f32[64] parameter(0)
  y = f32[64] parameter(1)
  a = f32[64] add(x, y)
  z = f32[] constant(0)
  r = f32[] reduce(a, z), dimensions={0}, to_apply=add_f32
  b = f32[64] broadcast(r), dimensions={}
  n = f32[64] negate(x)
  c = f32[64] multiply(a, b)
  ROOT t = (f32[64], f32[64]) tuple(c, n)
}
";
        assert_eq!(steps_of(text, 8), "x, y, z, a, r, [b n c | n c], t");
    }

    #[test]
    fn different_element_counts_make_different_groups() {
        let text = "HloModule two
ENTRY main {
  x = f32[64] parameter(0)
  w = f32[32] parameter(1)
  a = f32[64] negate(x)
  b = f32[64] abs(a)
  c = f32[32] negate(w)
  d = f32[32] abs(c)
  ROOT t = (f32[64], f32[32]) tuple(b, d)
}
";
        assert_eq!(steps_of(text, 8), "x, w, [a b | b], [c d | d], t");
    }

    #[test]
    fn fused_values_are_the_unfused_values_with_partial_tiles() {
        // 64 elements in tiles of 5: twelve full tiles and one of 4.
        let m = parse_module(CHAIN).unwrap();
        let arg = |k: f32| {
            let data = (0..64).map(|i| (i as f32 - 30.0) * 0.1 * k).collect();
            Value::array(ArrayLiteral {
                shape: ArrayShape::new(crate::hlo::ElementType::F32, vec![64]),
                data: ArrayData::F32(data),
            })
        };
        let run = |fusion| {
            let mut ev = Evaluator::with_options(
                &m,
                EvalOptions {
                    fusion,
                    fusion_tile: 5,
                    ..EvalOptions::default()
                },
            );
            let v = ev.run(vec![arg(1.0), arg(-0.7)]).unwrap();
            (v.as_array().unwrap().clone(), ev.stats().clone())
        };
        let (plain, s0) = run(false);
        let (fused, s1) = run(true);
        assert!(plain.data.bits_eq(&fused.data));
        assert_eq!((s0.fused_groups, s1.fused_groups), (0, 1));
        assert_eq!(s1.fused_instructions, 5);
        // And the values are the formula's: select(exp((x+y)·x) > y, exp(..), y) in f64,
        // rounded to f32, within an ulp of the exp.
        let ArrayData::F32(v) = &fused.data else {
            panic!()
        };
        for (i, &got) in v.iter().enumerate() {
            let x = ((i as f32 - 30.0) * 0.1) as f64;
            let y = ((i as f32 - 30.0) * 0.1 * -0.7) as f64;
            let m = ((x + y) as f32 as f64 * x) as f32 as f64;
            let e = m.exp();
            let want = if e > y { e } else { y };
            assert!(
                (got as f64 - want).abs() <= want.abs() * 2e-7,
                "{i}: {got} vs {want}"
            );
        }
    }

    /// The chain on `n` elements with arguments that differ per element.
    fn chain_args(n: usize) -> Vec<Value> {
        (0..2)
            .map(|k| {
                let data = (0..n)
                    .map(|i| ((i * (2 * k + 1)) % 201) as f32 / 100.0 - 1.0)
                    .collect();
                Value::array(ArrayLiteral {
                    shape: ArrayShape::new(crate::hlo::ElementType::F32, vec![n as i64]),
                    data: ArrayData::F32(data),
                })
            })
            .collect()
    }

    fn run_chain(text: &str, args: Vec<Value>, fusion: bool) -> (Value, crate::eval::EvalStats) {
        let m = parse_module(text).unwrap();
        let mut ev = Evaluator::with_options(
            &m,
            EvalOptions {
                fusion,
                in_place: fusion,
                fusion_tile: 5,
                ..EvalOptions::default()
            },
        );
        let v = ev.run(args).unwrap();
        (v, ev.stats().clone())
    }

    #[test]
    fn a_dying_input_becomes_the_output_buffer_with_unchanged_values() {
        // x and y die in the group: the root s is written into x's buffer (its first dying
        // input of s's type), tile by tile, and equals the unfused value bit for bit.
        let (plain, s0) = run_chain(CHAIN, chain_args(64), false);
        let args = chain_args(64);
        let x_buffer = match &args[0] {
            Value::Array(a) => match &a.data {
                ArrayData::F32(v) => v.as_ptr(),
                _ => unreachable!(),
            },
            _ => unreachable!(),
        };
        let (fused, s1) = run_chain(CHAIN, args, true);
        let (p, f) = (plain.as_array().unwrap(), fused.as_array().unwrap());
        assert!(p.data.bits_eq(&f.data));
        assert_eq!(f.shape, p.shape);
        assert_eq!((s0.fused_in_place, s1.fused_in_place), (0, 1));
        let ArrayData::F32(out) = &f.data else {
            panic!()
        };
        assert_eq!(out.as_ptr(), x_buffer, "the output is not in x's buffer");
    }

    #[test]
    fn an_input_read_later_or_held_elsewhere_is_not_overwritten() {
        // y is read after the group (by the tuple), and x is held by the caller too: neither
        // may be donated, the output gets its own buffer, and the caller's x is unchanged.
        let text = CHAIN.replace(
            "ROOT s = f32[64] select(c, e, y)",
            "s = f32[64] select(c, e, y)\n  ROOT t = (f32[64], f32[64]) tuple(s, y)",
        );
        let args = chain_args(64);
        let kept = args[0].clone();
        let before = kept.as_array().unwrap().data.clone();
        let (_, s) = run_chain(&text, args, true);
        assert_eq!((s.fused_groups, s.fused_in_place), (1, 0));
        assert!(kept.as_array().unwrap().data.bits_eq(&before));
    }
}
