//! Shape rules of ragged-dot, from XLA's ragged-dot shape inference (StableHLO/CHLO
//! `checkRaggedDotConstraints`). Exactly one lhs dimension is ragged, and its kind gives
//! the mode:
//! - non-contracting (m): lhs `[b,m,k]`, rhs `[g,b,k,n]`, group_sizes `[b,g]` → `[b,m,n]`;
//! - contracting (k): lhs `[b,m,k]`, rhs `[b,k,n]`, group_sizes `[b,g]` → `[g,b,m,n]`;
//! - batch (b): lhs `[b,m,k]`, rhs `[b,k,n]`, group_sizes `[g]` → `[b,m,n]`.
//!
//! group_sizes is `[g]` or `[b..., x..., g]`: the lhs batch dimensions before the ragged
//! one, then (non-contracting mode) the lhs non-contracting or (contracting mode) the lhs
//! contracting dimensions before it.

use super::*;

/// Checks one ragged-dot: dimension numbers, group_sizes and the result dimensions.
pub(super) fn verify_ragged_dot(ctx: &Ctx) -> Result<(), VerifyError> {
    let l = ctx.op_array(0)?.clone();
    let r = ctx.op_array(1)?.clone();
    let g = ctx.op_array(2)?.clone();
    if !g.ty.is_integer() {
        return ctx.err(format!("group_sizes must be an integer array, found {g}"));
    }
    let d = ctx.ins.attrs.dot.clone().unwrap_or_default();
    let rd = ctx.ins.attrs.ragged_dot.clone().unwrap_or_default();
    let (ldims, rdims) = shape_inference::dot_dimensions(&l, &r, &d).or_else(|e| ctx.err(e))?;
    let [ragged] = rd.lhs_ragged[..] else {
        return ctx.err(format!(
            "ragged-dot needs exactly one lhs_ragged_dims entry, found {:?}",
            rd.lhs_ragged
        ));
    };
    if ragged < 0 || ragged as usize >= l.rank() {
        return ctx.err(format!(
            "lhs ragged dimension {ragged} is out of range for rank {}",
            l.rank()
        ));
    }
    let batch = d.lhs_batch.contains(&ragged);
    let contracting = d.lhs_contracting.contains(&ragged);
    let mut prefix: Vec<i64> = d.lhs_batch.clone();
    if batch {
        prefix.truncate(d.lhs_batch.iter().position(|&x| x == ragged).unwrap_or(0));
    } else if contracting {
        let upto = d
            .lhs_contracting
            .iter()
            .position(|&x| x == ragged)
            .unwrap_or(0);
        prefix.extend(&d.lhs_contracting[..upto]);
    } else {
        prefix.extend((0..ragged).filter(|i| !ldims.contains(i)));
    }
    let want: Vec<i64> = prefix.iter().map(|&i| l.dims[i as usize]).collect();
    let Some(&groups) = g.dims.last() else {
        return ctx.err("group_sizes must have at least one dimension (the groups)");
    };
    if g.rank() != 1 && g.dims[..g.rank() - 1] != want[..] {
        return ctx.err(format!(
            "group_sizes is expected to have shape [g] or {:?}, found {g}",
            [want.clone(), vec![groups]].concat()
        ));
    }
    check_dims_in_range(ctx, &rd.rhs_group, r.rank(), "rhs group dimension")?;
    if rd.rhs_group.iter().any(|x| rdims.contains(x)) {
        return ctx.err("rhs group dimensions must differ from the rhs batch and contracting ones");
    }
    match (batch || contracting, rd.rhs_group.as_slice()) {
        (true, []) => {}
        (true, _) => {
            return ctx.err("a ragged batch or contracting dimension takes no rhs_group_dims")
        }
        (false, [rg]) => {
            if r.dims[*rg as usize] != groups {
                return ctx.err(format!(
                    "rhs group dimension {rg} has size {}, group_sizes has {groups} groups",
                    r.dims[*rg as usize]
                ));
            }
        }
        (false, _) => {
            return ctx
                .err("a ragged non-contracting dimension needs exactly one rhs_group_dims entry")
        }
    }
    let mut out: Vec<i64> = if contracting {
        vec![groups]
    } else {
        Vec::new()
    };
    out.extend(d.lhs_batch.iter().map(|&b| l.dims[b as usize]));
    out.extend(
        (0..l.rank() as i64)
            .filter(|x| !ldims.contains(x))
            .map(|x| l.dims[x as usize]),
    );
    out.extend(
        (0..r.rank() as i64)
            .filter(|x| !rdims.contains(x) && !rd.rhs_group.contains(x))
            .map(|x| r.dims[x as usize]),
    );
    ctx.expect_dims(&out)
}
