//! Which devices take part in a collective: `replica_groups=` in both of XLA's spellings (the
//! list `{{0,1},{2,3}}` and the iota form `[G,S]<=[d0,...]T(perm)`), `source_target_pairs=`,
//! and the device count a module needs when the user does not say.

use super::super::{err, EvalError};
use crate::hlo::{Instruction, Module, Opcode};

/// Parses `{{0,1},{2,3}}` (or `{}`) into lists of non-negative integers.
pub(crate) fn parse_int_groups(text: &str) -> Result<Vec<Vec<u64>>, EvalError> {
    let bad = || EvalError::new(format!("malformed group list '{text}'"));
    let t = text.trim();
    let inner = t
        .strip_prefix('{')
        .and_then(|s| s.strip_suffix('}'))
        .ok_or_else(bad)?
        .trim();
    let mut groups = Vec::new();
    let mut rest = inner;
    while !rest.is_empty() {
        let body = rest.strip_prefix('{').ok_or_else(bad)?;
        let end = body.find('}').ok_or_else(bad)?;
        let mut g = Vec::new();
        for item in body[..end].split(',') {
            let item = item.trim();
            if !item.is_empty() {
                g.push(item.parse::<u64>().map_err(|_| bad())?);
            }
        }
        groups.push(g);
        rest = body[end + 1..].trim_start();
        rest = rest.strip_prefix(',').unwrap_or(rest).trim_start();
    }
    Ok(groups)
}

/// Reads a comma-separated list of non-negative integers (`2,4`).
fn int_list(text: &str, whole: &str) -> Result<Vec<u64>, EvalError> {
    text.split(',')
        .map(|d| {
            d.trim()
                .parse::<u64>()
                .map_err(|_| EvalError::new(format!("malformed iota replica_groups '{whole}'")))
        })
        .collect()
}

/// Most devices an iota group list may describe: far beyond any real system, small enough
/// that expanding it cannot exhaust memory.
const MAX_IOTA_DEVICES: u64 = 1 << 20;

/// Expands the iota form `[G,S]<=[d0,...,dk]` or `[G,S]<=[d0,...,dk]T(p0,...,pk)`: the ids
/// 0..prod(d) laid out with dimensions d, transposed by p, read in row-major order and cut
/// into G groups of S (XLA's `IotaReplicaGroupList`).
fn expand_iota(text: &str) -> Result<Vec<Vec<u64>>, EvalError> {
    let bad = || EvalError::new(format!("malformed iota replica_groups '{text}'"));
    let rest = text.strip_prefix('[').ok_or_else(bad)?;
    let (shape, rest) = rest.split_once(']').ok_or_else(bad)?;
    let shape = int_list(shape, text)?;
    let rest = rest
        .trim_start()
        .strip_prefix("<=")
        .ok_or_else(bad)?
        .trim_start();
    let rest = rest.strip_prefix('[').ok_or_else(bad)?;
    let (reshape, rest) = rest.split_once(']').ok_or_else(bad)?;
    let reshape = int_list(reshape, text)?;
    let rest = rest.trim();
    let perm: Vec<usize> = if rest.is_empty() {
        (0..reshape.len()).collect()
    } else {
        let p = rest
            .strip_prefix("T(")
            .and_then(|r| r.strip_suffix(')'))
            .ok_or_else(bad)?;
        int_list(p, text)?.into_iter().map(|x| x as usize).collect()
    };
    let [groups, size] = shape[..] else {
        return Err(bad());
    };
    let total = reshape
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d))
        .filter(|&t| t <= MAX_IOTA_DEVICES)
        .ok_or_else(|| {
            EvalError::new(format!(
                "iota replica_groups '{text}' names more than {MAX_IOTA_DEVICES} devices"
            ))
        })?;
    if groups.checked_mul(size) != Some(total) {
        return err(format!(
            "iota replica_groups '{text}': {groups} groups of {size} do not cover {total} devices"
        ));
    }
    let mut sorted = perm.clone();
    sorted.sort_unstable();
    if sorted != (0..reshape.len()).collect::<Vec<_>>() {
        return err(format!(
            "iota replica_groups '{text}': T({perm:?}) is not a permutation of the {} dimensions",
            reshape.len()
        ));
    }
    // Strides of the untransposed layout, read in the permuted order.
    let rank = reshape.len();
    let mut strides = vec![1u64; rank];
    for d in (0..rank.saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * reshape[d + 1];
    }
    let dims: Vec<u64> = perm.iter().map(|&p| reshape[p]).collect();
    let st: Vec<u64> = perm.iter().map(|&p| strides[p]).collect();
    let mut ids = Vec::with_capacity(total as usize);
    let mut idx = vec![0u64; rank];
    for _ in 0..total {
        ids.push(idx.iter().zip(&st).map(|(i, s)| i * s).sum());
        for d in (0..rank).rev() {
            idx[d] += 1;
            if idx[d] < dims[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    Ok(ids
        .chunks(size.max(1) as usize)
        .map(<[u64]>::to_vec)
        .collect())
}

/// The groups written in `replica_groups=` (list or iota form); empty for none or `{}`,
/// which mean "every device".
pub fn replica_groups(text: Option<&str>) -> Result<Vec<Vec<u64>>, EvalError> {
    match text.map(str::trim) {
        None => Ok(Vec::new()),
        Some(t) if t.starts_with('[') => expand_iota(t),
        Some(t) => parse_int_groups(t),
    }
}

/// The (source, target) pairs of a collective-permute.
pub fn source_target_pairs(ins: &Instruction) -> Result<Vec<(u64, u64)>, EvalError> {
    let Some(text) = ins.raw_attr("source_target_pairs") else {
        return Ok(Vec::new());
    };
    parse_int_groups(text)?
        .into_iter()
        .map(|p| match p[..] {
            [s, t] => Ok((s, t)),
            _ => err(format!(
                "source_target_pairs entries must be {{source,target}}, got {p:?}"
            )),
        })
        .collect()
}

/// The group of `device` among `count` devices, in rank order (the order written), for a
/// collective with these groups. Errors name a device outside 0..count, or a device that
/// no group contains.
pub fn group_of(groups: &[Vec<u64>], device: usize, count: usize) -> Result<Vec<usize>, EvalError> {
    if groups.is_empty() || groups.iter().all(Vec::is_empty) {
        return Ok((0..count).collect());
    }
    let mut seen = std::collections::HashSet::new();
    if let Some(&twice) = groups.iter().flatten().find(|&&id| !seen.insert(id)) {
        return err(format!(
            "device {twice} is in more than one place in the replica groups {}",
            groups
                .iter()
                .map(|g| show_group(g))
                .collect::<Vec<_>>()
                .join(",")
        ));
    }
    let largest = groups.iter().flatten().copied().max().unwrap_or(0);
    if largest >= count as u64 {
        let g = groups
            .iter()
            .find(|g| g.contains(&largest))
            .map(|g| show_group(g))
            .unwrap_or_default();
        return err(format!(
            "replica group {g} names device {largest}, but the program runs on {count} device{} \
             (set --replicas to at least {})",
            if count == 1 { "" } else { "s" },
            largest + 1
        ));
    }
    groups
        .iter()
        .find(|g| g.contains(&(device as u64)))
        .map(|g| g.iter().map(|&x| x as usize).collect())
        .ok_or_else(|| {
            EvalError::new(format!(
                "device {device} is in none of the replica groups {}",
                groups
                    .iter()
                    .map(|g| show_group(g))
                    .collect::<Vec<_>>()
                    .join(",")
            ))
        })
}

/// `{0,1}` for error messages.
pub(crate) fn show_group<T: std::fmt::Display>(g: &[T]) -> String {
    let items: Vec<String> = g.iter().map(|x| x.to_string()).collect();
    format!("{{{}}}", items.join(","))
}

/// Devices one instruction names: 1 + the largest id in its groups or pairs (0 when it
/// names none).
fn devices_named(ins: &Instruction) -> Result<u64, EvalError> {
    let mut n = 0u64;
    if ins.opcode.family() == crate::hlo::OpFamily::Collective || ins.attrs.replica_groups.is_some()
    {
        for g in replica_groups(ins.attrs.replica_groups.as_deref())? {
            n = n.max(g.iter().map(|&x| x + 1).max().unwrap_or(0));
        }
    }
    if matches!(
        ins.opcode,
        Opcode::CollectivePermute | Opcode::CollectivePermuteStart
    ) {
        for (s, t) in source_target_pairs(ins)? {
            n = n.max(s.max(t) + 1);
        }
    }
    Ok(n)
}

/// How many devices a module runs on when the user does not say: the header's
/// `replica_count=` if present, else 1 + the largest device id that any `replica_groups` or
/// `source_target_pairs` names, else 1.
pub fn default_device_count(module: &Module) -> Result<usize, EvalError> {
    if let Some((_, v)) = module
        .header_attrs
        .iter()
        .find(|(k, _)| k == "replica_count")
    {
        return v
            .trim()
            .parse::<usize>()
            .ok()
            .filter(|&n| n >= 1)
            .ok_or_else(|| EvalError::new(format!("malformed replica_count={v} in the header")));
    }
    let mut n = 1u64;
    for c in &module.computations {
        for ins in &c.instructions {
            n = n.max(devices_named(ins).map_err(|e| EvalError {
                computation: Some(c.name.clone()),
                instruction: Some(ins.name.clone()),
                opcode: Some(ins.opcode.name().to_string()),
                ..e
            })?);
        }
    }
    usize::try_from(n).map_err(|_| EvalError::new("the module names too many devices"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_form() {
        assert_eq!(parse_int_groups("{}").unwrap(), Vec::<Vec<u64>>::new());
        assert_eq!(
            parse_int_groups("{{0,1}, {2,3}}").unwrap(),
            vec![vec![0, 1], vec![2, 3]]
        );
        assert!(parse_int_groups("{{0,x}}").is_err());
        assert!(parse_int_groups("{{0,1}").is_err());
    }

    // Expected expansions written out by hand from XLA's definition (IotaReplicaGroupList:
    // iota over the reshape dims, transposed, flattened, cut into groups).
    #[test]
    fn iota_form() {
        assert_eq!(
            replica_groups(Some("[2,4]<=[8]")).unwrap(),
            vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]]
        );
        assert_eq!(
            replica_groups(Some("[4,2]<=[2,4]T(1,0)")).unwrap(),
            vec![vec![0, 4], vec![1, 5], vec![2, 6], vec![3, 7]]
        );
        assert_eq!(
            replica_groups(Some("[2,4]<=[2,2,2]T(2,1,0)")).unwrap(),
            vec![vec![0, 4, 2, 6], vec![1, 5, 3, 7]]
        );
        assert!(replica_groups(Some("[2,x]<=[4]")).is_err());
        assert!(replica_groups(Some("[2,3]<=[4]")).is_err());
        assert!(replica_groups(Some("[2,2]<=[2,2]T(0,0)")).is_err());
        assert!(replica_groups(Some("[1,1099511627776]<=[1099511627776]")).is_err());
    }

    #[test]
    fn groups_of_devices() {
        let g = replica_groups(Some("{{0,2},{1,3}}")).unwrap();
        assert_eq!(group_of(&g, 3, 4).unwrap(), vec![1, 3]);
        assert_eq!(group_of(&[], 2, 3).unwrap(), vec![0, 1, 2]);
        let e = group_of(&g, 0, 2).unwrap_err();
        assert!(e.message.contains("names device 3"), "{}", e.message);
        assert!(
            e.message.contains("--replicas to at least 4"),
            "{}",
            e.message
        );
        let e = group_of(&[vec![0, 1], vec![1]], 0, 2).unwrap_err();
        assert!(
            e.message.contains("device 1 is in more than one place"),
            "{}",
            e.message
        );
        let e = group_of(&[vec![0]], 1, 2).unwrap_err();
        assert!(e.message.contains("device 1 is in none"), "{}", e.message);
    }
}
