//! Computations: a list of instructions with a root, plus the graph queries passes and
//! evaluators need (users, post order, replacement, compaction).

use super::instruction::{InstrId, Instruction, Loc};
use super::opcode::Opcode;

/// A computation: instructions addressed by [`InstrId`], one of them the root.
#[derive(Clone, Debug, PartialEq)]
pub struct Computation {
    pub name: String,
    pub instructions: Vec<Instruction>,
    pub root: InstrId,
    /// `execution_thread="..."` and similar computation attributes, verbatim.
    pub raw_attrs: Vec<(String, String)>,
    pub loc: Loc,
}

impl Computation {
    /// The instruction with the given id.
    pub fn instr(&self, id: InstrId) -> &Instruction {
        &self.instructions[id.index()]
    }

    pub fn instr_mut(&mut self, id: InstrId) -> &mut Instruction {
        &mut self.instructions[id.index()]
    }

    pub fn root_instr(&self) -> &Instruction {
        self.instr(self.root)
    }

    /// Ids of all instructions in list order.
    pub fn ids(&self) -> impl Iterator<Item = InstrId> {
        (0..self.instructions.len() as u32).map(InstrId)
    }

    /// Appends an instruction and returns its id.
    pub fn add(&mut self, instr: Instruction) -> InstrId {
        self.instructions.push(instr);
        InstrId(self.instructions.len() as u32 - 1)
    }

    /// Parameter instructions indexed by parameter number (None where a number is missing).
    pub fn parameters(&self) -> Vec<Option<InstrId>> {
        let mut out: Vec<Option<InstrId>> = Vec::new();
        for id in self.ids() {
            let i = self.instr(id);
            if i.opcode == Opcode::Parameter {
                // Numbers beyond the instruction count can never be contiguous; the verifier
                // reports them, and ignoring them here keeps this allocation bounded.
                if let Some(n) = i
                    .attrs
                    .parameter_number
                    .filter(|&n| n >= 0 && (n as usize) < self.instructions.len())
                {
                    let n = n as usize;
                    if out.len() <= n {
                        out.resize(n + 1, None);
                    }
                    out[n] = Some(id);
                }
            }
        }
        out
    }

    /// Number of parameters (highest parameter number + 1).
    pub fn parameter_count(&self) -> usize {
        self.parameters().len()
    }

    /// For each instruction, the instructions that use it as an operand (each user once).
    pub fn users(&self) -> Vec<Vec<InstrId>> {
        let mut users = vec![Vec::new(); self.instructions.len()];
        for id in self.ids() {
            for &op in &self.instr(id).operands {
                let u: &mut Vec<InstrId> = &mut users[op.index()];
                if u.last() != Some(&id) {
                    u.push(id);
                }
            }
        }
        users
    }

    /// Instructions in post order (operands and control predecessors before users), as
    /// XLA's MakeInstructionPostOrder: a depth-first walk started from each instruction in
    /// list order, so a list that is already topological comes out unchanged. Returns None
    /// when the graph has a cycle or an out-of-range reference.
    pub fn post_order(&self) -> Option<Vec<InstrId>> {
        let n = self.instructions.len();
        // 0 = unvisited, 1 = on stack, 2 = done
        let mut state = vec![0u8; n];
        let mut order = Vec::with_capacity(n);
        let mut stack: Vec<(InstrId, usize)> = Vec::new();
        for start in self.ids() {
            if state[start.index()] != 0 {
                continue;
            }
            stack.push((start, 0));
            state[start.index()] = 1;
            while let Some(&mut (id, ref mut next)) = stack.last_mut() {
                let ins = self.instr(id);
                let deps = ins.operands.len() + ins.control_predecessors.len();
                if *next < deps {
                    let dep = if *next < ins.operands.len() {
                        ins.operands[*next]
                    } else {
                        ins.control_predecessors[*next - ins.operands.len()]
                    };
                    *next += 1;
                    if dep.index() >= n {
                        return None;
                    }
                    match state[dep.index()] {
                        0 => {
                            state[dep.index()] = 1;
                            stack.push((dep, 0));
                        }
                        1 => return None,
                        _ => {}
                    }
                } else {
                    state[id.index()] = 2;
                    order.push(id);
                    stack.pop();
                }
            }
        }
        Some(order)
    }

    /// Points every use of `old` (operands, control predecessors, root) at `new`.
    pub fn replace_all_uses(&mut self, old: InstrId, new: InstrId) {
        for ins in &mut self.instructions {
            for op in ins
                .operands
                .iter_mut()
                .chain(ins.control_predecessors.iter_mut())
            {
                if *op == old {
                    *op = new;
                }
            }
        }
        if self.root == old {
            self.root = new;
        }
    }

    /// Keeps only the instructions for which `keep` is true, renumbering ids and putting the
    /// survivors in post order. References to removed instructions must not remain.
    pub fn retain_and_sort(&mut self, keep: &[bool]) {
        let order = self.post_order().unwrap_or_else(|| self.ids().collect());
        let mut remap = vec![u32::MAX; self.instructions.len()];
        let mut next = 0u32;
        for id in &order {
            if keep[id.index()] {
                remap[id.index()] = next;
                next += 1;
            }
        }
        let mut old: Vec<Option<Instruction>> = std::mem::take(&mut self.instructions)
            .into_iter()
            .map(Some)
            .collect();
        let mut out = Vec::with_capacity(next as usize);
        for id in order {
            if let Some(mut ins) = old[id.index()].take().filter(|_| keep[id.index()]) {
                for op in ins
                    .operands
                    .iter_mut()
                    .chain(ins.control_predecessors.iter_mut())
                {
                    *op = InstrId(remap[op.index()]);
                }
                out.push(ins);
            }
        }
        self.instructions = out;
        self.root = InstrId(remap[self.root.index()]);
    }

    /// Renumbers instructions into post order without removing any.
    pub fn sort(&mut self) {
        let keep = vec![true; self.instructions.len()];
        self.retain_and_sort(&keep);
    }

    /// Finds an instruction by name (linear; for tools and tests, not hot paths).
    pub fn find(&self, name: &str) -> Option<InstrId> {
        self.ids().find(|&id| self.instr(id).name == name)
    }
}
