//! The module: named computations, one of them the entry, plus header attributes.

use super::computation::Computation;
use super::instruction::{CompId, Loc};
use std::collections::{HashMap, HashSet};

/// An HLO module.
#[derive(Clone, Debug, PartialEq)]
pub struct Module {
    pub name: String,
    /// Header attributes after the module name (`input_output_alias=`,
    /// `entry_computation_layout=`, ...), name and value text verbatim.
    pub header_attrs: Vec<(String, String)>,
    pub computations: Vec<Computation>,
    pub entry: CompId,
    pub loc: Loc,
}

impl Module {
    pub fn comp(&self, id: CompId) -> &Computation {
        &self.computations[id.index()]
    }

    pub fn comp_mut(&mut self, id: CompId) -> &mut Computation {
        &mut self.computations[id.index()]
    }

    pub fn entry_computation(&self) -> &Computation {
        self.comp(self.entry)
    }

    pub fn entry_computation_mut(&mut self) -> &mut Computation {
        let e = self.entry;
        self.comp_mut(e)
    }

    /// Ids of all computations in list order.
    pub fn comp_ids(&self) -> impl Iterator<Item = CompId> {
        (0..self.computations.len() as u32).map(CompId)
    }

    /// Finds a computation by name (linear; for tools and tests).
    pub fn find_computation(&self, name: &str) -> Option<CompId> {
        self.comp_ids().find(|&c| self.comp(c).name == name)
    }

    /// Computations in post order of the call graph: every callee before its callers, the
    /// entry last, unreachable computations kept (in list order, before the entry). This is
    /// the order the printer uses, as XLA's printer does.
    pub fn computation_post_order(&self) -> Vec<CompId> {
        let n = self.computations.len();
        let mut state = vec![0u8; n];
        let mut order = Vec::with_capacity(n);
        let mut starts: Vec<CompId> = self.comp_ids().filter(|&c| c != self.entry).collect();
        starts.push(self.entry);
        for s in starts {
            self.visit_comp(s, &mut state, &mut order);
        }
        order
    }

    fn visit_comp(&self, c: CompId, state: &mut [u8], order: &mut Vec<CompId>) {
        // Iterative DFS: call graphs in real dumps are shallow but generated ones need not be.
        if state[c.index()] != 0 {
            return;
        }
        let mut stack: Vec<(CompId, Vec<CompId>)> = vec![(c, self.callees(c))];
        state[c.index()] = 1;
        while let Some((cur, pending)) = stack.last_mut() {
            if let Some(next) = pending.pop() {
                if next.index() < state.len() && state[next.index()] == 0 {
                    state[next.index()] = 1;
                    let callees = self.callees(next);
                    stack.push((next, callees));
                }
            } else {
                state[cur.index()] = 2;
                order.push(*cur);
                stack.pop();
            }
        }
    }

    /// Distinct computations called by any instruction of `c`, in reverse first-use order
    /// (so popping yields first use first).
    fn callees(&self, c: CompId) -> Vec<CompId> {
        let mut seen = Vec::new();
        for ins in &self.comp(c).instructions {
            for callee in ins.called_computations() {
                if !seen.contains(&callee) {
                    seen.push(callee);
                }
            }
        }
        seen.reverse();
        seen
    }

    /// Total number of instructions over all computations.
    pub fn instruction_count(&self) -> usize {
        self.computations.iter().map(|c| c.instructions.len()).sum()
    }

    /// A generator of instruction names not yet used anywhere in the module.
    pub fn name_uniquer(&self) -> NameUniquer {
        let mut used = HashSet::new();
        for c in &self.computations {
            used.insert(c.name.clone());
            for i in &c.instructions {
                used.insert(i.name.clone());
            }
        }
        NameUniquer {
            used,
            next: HashMap::new(),
        }
    }
}

/// Hands out fresh names of the form `base.N`, as XLA's NameUniquer does, so new
/// instructions never collide with existing ones.
#[derive(Clone, Debug, Default)]
pub struct NameUniquer {
    used: HashSet<String>,
    next: HashMap<String, usize>,
}

impl NameUniquer {
    /// A name starting with `base` that is not yet used; it is then reserved.
    pub fn fresh(&mut self, base: &str) -> String {
        let stem = match base.rsplit_once('.') {
            Some((s, n)) if !s.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => s,
            _ => base,
        };
        let n = self.next.entry(stem.to_string()).or_insert(0);
        loop {
            let cand = format!("{stem}.{n}");
            *n += 1;
            if self.used.insert(cand.clone()) {
                return cand;
            }
        }
    }
}
