//! XLA's async forms in the text: the generic `async-start`/`-update`/`-done` and the
//! syntax sugar `<op>-start`/`<op>-update`/`<op>-done` for any opcode that has no async
//! opcodes of its own (`custom-call-start`, `call-start`, `fusion-start`,
//! `reduce-scatter-start`, `add-start`, ...). XLA's parser reads the sugar as an
//! `async-start` whose wrapped computation holds one instruction of the named opcode, and so
//! does this one: the IR has a single representation of an async op, which the printer
//! writes in the long form (`async-start(...), calls=%comp`) that XLA reads back to the same
//! module. The grammar follows `HloParserImpl::ParseOpcode` and the `kAsyncStart` case of
//! `CreateInstruction` in XLA's `hlo_parser.cc`.

use super::*;

/// The wrapped computation a sugar `-start` creates is called this (made unique in the
/// module when the module is complete), as XLA names it.
pub(super) const WRAPPED_COMPUTATION: &str = "async_wrapped";

/// Raw attributes of a sugar `-start` that describe the async op itself rather than the
/// wrapped instruction, so they move to the `async-start`.
const START_ONLY: &[&str] = &[
    "async_execution_thread",
    "output_to_operand_aliasing",
    "sharding",
];

/// Raw attributes XLA sets on both the `async-start` and its wrapped instruction.
const SHARED: &[&str] = &["metadata", "frontend_attributes", "statistics", "origin"];

/// Splits an opcode spelling that is not an opcode of its own into the async opcode its
/// suffix names and the wrapped opcode's spelling: `call-start` → (async-start, `call`).
/// `None` when there is no such suffix (the caller reports an unknown opcode).
pub(super) fn split_sugar(opname: &str) -> Option<(Opcode, &str)> {
    [
        ("-start", Opcode::AsyncStart),
        ("-update", Opcode::AsyncUpdate),
        ("-done", Opcode::AsyncDone),
    ]
    .into_iter()
    .find_map(|(suffix, op)| opname.strip_suffix(suffix).map(|w| (op, w)))
}

impl<'a> Parser<'a> {
    /// Parses the rest of a sugar instruction (`name = shape <op>-start(...)`, the opcode
    /// already read) into its generic async instruction.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn async_sugar(
        &mut self,
        name: Cow<'a, str>,
        loc: Loc,
        shape: Option<Shape>,
        opname: &str,
        oloc: Loc,
        by_name: &mut Names<'a>,
        defined: &mut Vec<Instruction>,
    ) -> PResult<(Instruction, Vec<(&'a str, Loc)>)> {
        let Some((async_op, wrapped_name)) = split_sugar(opname) else {
            return Cursor::error_at(oloc, format!("unknown opcode '{opname}'"));
        };
        let Some(shape) = shape else {
            return Cursor::error_at(
                oloc,
                format!("cannot infer the shape of {opname}: write it before the opcode"),
            );
        };
        let Some(wrapped_op) = Opcode::from_name(wrapped_name) else {
            return Cursor::error_at(
                oloc,
                format!("unknown opcode '{opname}' (and '{wrapped_name}' is not an opcode an async '{}' could wrap)", async_op.name()),
            );
        };
        if matches!(
            wrapped_op,
            Opcode::Parameter
                | Opcode::Constant
                | Opcode::AsyncStart
                | Opcode::AsyncUpdate
                | Opcode::AsyncDone
        ) {
            return Cursor::error_at(
                oloc,
                format!("'{wrapped_name}' cannot be wrapped in an async op ('{opname}')"),
            );
        }
        let mut ins = Instruction::new(name.into_owned(), async_op, shape, Vec::new());
        ins.loc = loc;
        self.async_operands(&mut ins, opname, by_name, defined)?;
        let mut control = Vec::new();
        if async_op != Opcode::AsyncStart {
            let start = self.async_chain_start(&ins, defined, oloc)?;
            let found = start.and_then(|c| self.wrapped_root_opcode(c));
            if found != Some(wrapped_op) {
                return Cursor::error_at(
                    oloc,
                    format!(
                        "'{opname}' continues an async op that wraps {}, not '{wrapped_name}'",
                        found.map_or("an unknown computation".into(), |o| format!("'{o}'"))
                    ),
                );
            }
            self.async_attributes(&mut ins, &mut control)?;
            self.async_chain_calls(&mut ins, defined, oloc)?;
            return Ok((ins, control));
        }
        let Shape::Tuple(parts) = &ins.shape else {
            return self.start_shape_error(&ins, oloc);
        };
        if parts.len() < 2 || !parts[0].is_tuple() {
            return self.start_shape_error(&ins, oloc);
        }
        let mut instructions: Vec<Instruction> = ins
            .operands
            .iter()
            .enumerate()
            .map(|(i, op)| {
                let pname = if i == 0 {
                    "async_param".to_string()
                } else {
                    format!("async_param.{i}")
                };
                let mut p = Instruction::new(
                    pname,
                    Opcode::Parameter,
                    defined[op.index()].shape.clone(),
                    Vec::new(),
                );
                p.attrs.parameter_number = Some(i as i64);
                p.loc = loc;
                p
            })
            .collect();
        let params = (0..instructions.len() as u32).map(InstrId).collect();
        let mut root = Instruction::new("async_op", wrapped_op, parts[1].clone(), params);
        root.loc = loc;
        self.async_attributes(&mut root, &mut control)?;
        let mut kept = Vec::new();
        for (k, v) in std::mem::take(&mut root.raw_attrs) {
            if START_ONLY.contains(&k.as_str()) {
                ins.raw_attrs.push((k, v));
            } else {
                if SHARED.contains(&k.as_str()) {
                    ins.raw_attrs.push((k.clone(), v.clone()));
                }
                kept.push((k, v));
            }
        }
        root.raw_attrs = kept;
        ins.attrs.backend_config = root.attrs.backend_config.clone();
        instructions.push(root);
        let id = CompId((self.comp_base + self.synth.len()) as u32);
        self.synth.push(Computation {
            name: WRAPPED_COMPUTATION.to_string(),
            root: InstrId(instructions.len() as u32 - 1),
            instructions,
            raw_attrs: Vec::new(),
            loc,
        });
        ins.attrs.calls = Some(vec![id]);
        Ok((ins, control))
    }

    fn start_shape_error<T>(&self, ins: &Instruction, oloc: Loc) -> PResult<T> {
        Cursor::error_at(
            oloc,
            format!(
                "an async start's shape must be ((operands...), result, context...), found {}",
                ins.shape
            ),
        )
    }

    /// The parenthesized operand list of an async instruction.
    fn async_operands(
        &mut self,
        ins: &mut Instruction,
        opname: &str,
        by_name: &mut Names<'a>,
        defined: &mut Vec<Instruction>,
    ) -> PResult<()> {
        self.c.expect(b'(', &format!("after opcode '{opname}'"))?;
        if self.c.eat(b')')? {
            return Ok(());
        }
        loop {
            self.operand(ins, by_name, defined)?;
            if self.c.eat(b')')? {
                return Ok(());
            }
            if !self.c.eat(b',')? {
                return self.c.error(format!(
                    "expected ',' or ')' after an operand, found {}",
                    self.c.describe_next()
                ));
            }
        }
    }

    /// The `, key=value` attributes after an instruction's operands.
    fn async_attributes(
        &mut self,
        ins: &mut Instruction,
        control: &mut Vec<(&'a str, Loc)>,
    ) -> PResult<()> {
        while self.c.eat(b',')? {
            self.c.skip_ws()?;
            let aloc = self.c.loc();
            let key = self.c.expect_ident("attribute name")?;
            self.c
                .expect(b'=', &format!("after attribute name '{key}'"))?;
            self.attribute(ins, key, aloc, control)?;
        }
        Ok(())
    }

    /// The computation of the `async-start` an `async-update`/`-done` continues, following
    /// the chain of updates back; an error unless the single operand is an async start or
    /// update (XLA: "AsyncUpdate and AsyncDone expect a single async op as their operand").
    fn async_chain_start(
        &self,
        ins: &Instruction,
        defined: &[Instruction],
        oloc: Loc,
    ) -> PResult<Option<CompId>> {
        let bad = || {
            Cursor::error_at(
                oloc,
                format!(
                    "{} expects a single async-start or async-update as its operand",
                    ins.opcode
                ),
            )
        };
        let [first] = ins.operands.as_slice() else {
            return bad();
        };
        let mut cur = &defined[first.index()];
        // Each step moves to an earlier instruction, so the walk ends.
        loop {
            match cur.opcode {
                Opcode::AsyncStart => {
                    return Ok(cur.attrs.calls.as_deref().and_then(|c| c.first().copied()))
                }
                Opcode::AsyncUpdate if cur.operands.len() == 1 => {
                    cur = &defined[cur.operands[0].index()];
                }
                _ => return bad(),
            }
        }
    }

    /// `async-update`/`-done` take their computation and thread from the `async-start`;
    /// XLA accepts `calls=` and `async_execution_thread=` on them for compatibility when
    /// they agree with the start's, and ignores them. So does this parser: a disagreeing
    /// one is an error, an agreeing one is dropped (the printed form has neither).
    pub(super) fn async_chain_calls(
        &self,
        ins: &mut Instruction,
        defined: &[Instruction],
        oloc: Loc,
    ) -> PResult<()> {
        let start = self.async_chain_start(ins, defined, oloc)?;
        if let Some(calls) = ins.attrs.calls.take() {
            if calls.len() != 1 || Some(calls[0]) != start {
                return Cursor::error_at(
                    oloc,
                    format!(
                        "{}'s calls= names another computation than its async-start's",
                        ins.opcode
                    ),
                );
            }
        }
        let thread = |i: &Instruction| i.raw_attr("async_execution_thread").map(str::to_string);
        if let Some(t) = thread(ins) {
            let mut cur = &defined[ins.operands[0].index()];
            while cur.opcode == Opcode::AsyncUpdate {
                cur = &defined[cur.operands[0].index()];
            }
            let want = thread(cur).unwrap_or_else(|| "\"main\"".to_string());
            if t != want {
                return Cursor::error_at(
                    oloc,
                    format!(
                        "{}'s async_execution_thread={t} differs from its async-start's ({want})",
                        ins.opcode
                    ),
                );
            }
            ins.raw_attrs.retain(|(k, _)| k != "async_execution_thread");
        }
        Ok(())
    }

    /// The opcode of a computation's root, for a computation defined earlier in the module
    /// or created for a sugar `-start` of the computation being parsed.
    fn wrapped_root_opcode(&self, c: CompId) -> Option<Opcode> {
        let i = c.index();
        if i < self.comp_roots.len() {
            return Some(self.comp_roots[i]);
        }
        self.synth
            .get(i.checked_sub(self.comp_base)?)
            .map(|comp| comp.root_instr().opcode)
    }
}

/// Gives every computation created for a sugar `-start` a name no other computation of the
/// module has (`async_wrapped`, `async_wrapped.1`, ...): XLA does not enter them in its name
/// table, so a module may well define its own `async_wrapped`.
pub(super) fn unique_wrapped_names(computations: &mut [Computation], synthesized: &[usize]) {
    let mut taken: std::collections::HashSet<String> = computations
        .iter()
        .enumerate()
        .filter(|(i, _)| !synthesized.contains(i))
        .map(|(_, c)| c.name.clone())
        .collect();
    let mut n = 0usize;
    for &i in synthesized {
        let name = loop {
            let candidate = if n == 0 {
                WRAPPED_COMPUTATION.to_string()
            } else {
                format!("{WRAPPED_COMPUTATION}.{n}")
            };
            n += 1;
            if !taken.contains(&candidate) {
                break candidate;
            }
        };
        taken.insert(name.clone());
        computations[i].name = name;
    }
}
