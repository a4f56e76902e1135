//! The module: named computations, one of them the entry, plus header attributes.

use super::computation::Computation;
use super::instruction::{CompId, InstrId, Instruction, Loc};
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

    /// The computations `c` reaches through called computations, itself included, callees
    /// before callers (`c` last).
    pub fn computation_post_order_from(&self, c: CompId) -> Vec<CompId> {
        let mut state = vec![0u8; self.computations.len()];
        let mut order = Vec::new();
        if c.index() < self.computations.len() {
            self.visit_comp(c, &mut state, &mut order);
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
        // A set beside the list: a computation may call thousands of distinct ones.
        let mut seen = HashSet::new();
        let mut order = Vec::new();
        for ins in &self.comp(c).instructions {
            for callee in ins.called_computations() {
                if seen.insert(callee) {
                    order.push(callee);
                }
            }
        }
        order.reverse();
        order
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

/// Name lookups in a module that no longer changes: computations and instructions by name in
/// constant time. `Module::find_computation` and `Computation::find` scan; code that looks
/// up every instruction of a large module (the differ's provenance mapping) uses this so its
/// time stays linear in the module's size.
pub struct NameIndex<'m> {
    module: &'m Module,
    computations: HashMap<&'m str, CompId>,
    /// Per computation, built on first use (most lookups are in the entry computation).
    instructions: Vec<std::cell::OnceCell<HashMap<&'m str, InstrId>>>,
}

impl<'m> NameIndex<'m> {
    /// Indexes the computation names of `module` (instructions are indexed lazily).
    pub fn new(module: &'m Module) -> NameIndex<'m> {
        NameIndex {
            module,
            computations: module
                .comp_ids()
                .map(|c| (module.comp(c).name.as_str(), c))
                .collect(),
            instructions: (0..module.computations.len())
                .map(|_| std::cell::OnceCell::new())
                .collect(),
        }
    }

    /// The computation called `name`.
    pub fn computation(&self, name: &str) -> Option<CompId> {
        self.computations.get(name).copied()
    }

    /// The instruction called `name` in computation `c`.
    pub fn instruction(&self, c: CompId, name: &str) -> Option<InstrId> {
        let map = self.instructions.get(c.index())?.get_or_init(|| {
            let comp = self.module.comp(c);
            comp.ids()
                .map(|id| (comp.instr(id).name.as_str(), id))
                .collect()
        });
        map.get(name).copied()
    }

    /// The instruction `instruction` of the computation called `computation`.
    pub fn find(&self, computation: &str, instruction: &str) -> Option<&'m Instruction> {
        let c = self.computation(computation)?;
        let id = self.instruction(c, instruction)?;
        Some(self.module.comp(c).instr(id))
    }
}
