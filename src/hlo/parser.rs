//! HLO text parser: both the long form of torch-xla dumps (`%name`, typed operands,
//! signatures, metadata) and JAX's short form. Semantic attributes are parsed into typed
//! fields; everything else is kept verbatim. Errors carry line:column.

use super::attribute_names;
use super::computation::Computation;
use super::instruction::*;
use super::lexer::{Cursor, PResult, ParseError, MAX_NESTING};
use super::literal::{ArrayData, ArrayLiteral, Literal};
use super::minifloat;
use super::module::Module;
use super::opcode::Opcode;
use super::shape::{ArrayShape, ElementType, Layout, Shape};
use super::shape_inference::{infer_unwritten_shape, RuleInput};
use half::{bf16, f16};
use num_complex::Complex;
use std::borrow::Cow;
use std::collections::HashMap;

mod async_forms;
mod channel_shapes;

/// Parses a whole HLO module from text.
pub fn parse_module(text: &str) -> Result<Module, ParseError> {
    Parser {
        c: Cursor::new(text),
        comps: HashMap::new(),
        comp_results: Vec::new(),
        depth: 0,
        synth: Vec::new(),
        comp_base: 0,
        comp_roots: Vec::new(),
    }
    .module()
}

/// Parses a shape such as `f32[2,3]{1,0}` or `(f32[], s32[4])`.
pub fn parse_shape(text: &str) -> Result<Shape, ParseError> {
    let mut p = Parser {
        c: Cursor::new(text),
        comps: HashMap::new(),
        comp_results: Vec::new(),
        depth: 0,
        synth: Vec::new(),
        comp_base: 0,
        comp_roots: Vec::new(),
    };
    let s = p.shape()?;
    p.c.skip_ws()?;
    if !p.c.at_end() {
        return p
            .c
            .error(format!("unexpected {} after shape", p.c.describe_next()));
    }
    Ok(s)
}

/// Instructions of the computation being parsed, by name (inline operands get owned names).
type Names<'a> = HashMap<Cow<'a, str>, InstrId>;

/// A computation signature as written: named parameter shapes and the result shape.
type Signature = (Vec<(String, Shape, Loc)>, Shape);

struct Parser<'a> {
    c: Cursor<'a>,
    /// Computations defined so far: name → index. XLA requires a computation to be
    /// defined before it is called, so references resolve immediately.
    comps: HashMap<String, usize>,
    /// Root shape of each computation defined so far (by index), for the shapes of calls
    /// written without one.
    comp_results: Vec<Shape>,
    depth: usize,
    /// Computations created for async sugar (`call-start`, ...) in the computation being
    /// parsed; they join the module just before it (see `async_forms`).
    synth: Vec<Computation>,
    /// The index the first of `synth` will have in the module.
    comp_base: usize,
    /// The root opcode of every computation already in the module, by index (an async
    /// sugar `-done` checks the opcode its `-start` wrapped).
    comp_roots: Vec<Opcode>,
}

/// A literal element as written, before conversion to the element type.
enum Elem<'a> {
    Word(&'a str, Loc),
    Pair(&'a str, &'a str, Loc),
}

impl<'a> Parser<'a> {
    fn module(mut self) -> PResult<Module> {
        self.c.skip_ws()?;
        let loc = self.c.loc();
        // XLA's parser also takes a module text without the `HloModule` line (then the
        // module is named after its entry computation, `module_<entry>`).
        let mut probe = self.c.clone();
        let headed = probe.ident()? == Some("HloModule");
        let mut name = None;
        let mut header_attrs = Vec::new();
        if headed {
            self.c.expect_ident("'HloModule'")?;
            name = Some(self.c.expect_name("module name")?.to_string());
            while self.c.eat(b',')? {
                let key = self.c.expect_ident("header attribute name")?.to_string();
                self.c.expect(b'=', "after header attribute name")?;
                if key == "input_output_alias" {
                    // Kept verbatim, but XLA parses it: a malformed one is an error.
                    let mut probe = self.c.clone();
                    probe.skip_ws()?;
                    let vloc = probe.loc();
                    if let Err(e) = input_output_alias(&mut probe) {
                        return Cursor::error_at(
                            vloc,
                            format!(
                                "malformed input_output_alias ({}:{}: {})",
                                e.line, e.col, e.message
                            ),
                        );
                    }
                }
                let v = self.c.raw_value(&key)?.to_string();
                header_attrs.push((key, v));
            }
        }
        let mut computations: Vec<Computation> = Vec::new();
        let mut locs: Vec<Loc> = Vec::new();
        let mut entry: Option<usize> = None;
        let mut synthesized: Vec<usize> = Vec::new();
        loop {
            self.c.skip_ws()?;
            if self.c.at_end() {
                break;
            }
            self.comp_base = computations.len();
            let (comp, is_entry) = self.computation()?;
            for wrapped in self.synth.drain(..) {
                synthesized.push(computations.len());
                self.comp_roots.push(wrapped.root_instr().opcode);
                locs.push(wrapped.loc);
                computations.push(wrapped);
            }
            let idx = computations.len();
            if let Some(&prev) = self.comps.get(&comp.name) {
                return Cursor::error_at(
                    comp.loc,
                    format!(
                        "computation '{}' is already defined at {}",
                        comp.name, locs[prev]
                    ),
                );
            }
            if is_entry {
                if entry.is_some() {
                    return Cursor::error_at(comp.loc, "more than one ENTRY computation");
                }
                entry = Some(idx);
            }
            self.comps.insert(comp.name.clone(), idx);
            self.comp_results.push(comp.root_instr().shape.clone());
            locs.push(comp.loc);
            self.comp_roots.push(comp.root_instr().opcode);
            computations.push(comp);
        }
        async_forms::unique_wrapped_names(&mut computations, &synthesized);
        if computations.is_empty() {
            return self.c.error("module has no computations");
        }
        // Without an ENTRY marker XLA takes the last computation as the entry.
        let entry = entry.unwrap_or(computations.len() - 1);
        let name = name.unwrap_or_else(|| format!("module_{}", computations[entry].name));
        Ok(Module {
            name,
            header_attrs,
            computations,
            entry: CompId(entry as u32),
            loc,
        })
    }

    fn computation(&mut self) -> PResult<(Computation, bool)> {
        self.c.skip_ws()?;
        let loc = self.c.loc();
        let mut is_entry = false;
        let mut name = self.c.expect_name("computation name or ENTRY")?;
        if name == "ENTRY" {
            is_entry = true;
            name = self.c.expect_name("computation name after ENTRY")?;
        }
        let name = name.to_string();
        let mut signature: Option<Signature> = None;
        if self.c.looking_at(b'(')? {
            self.c.expect(b'(', "to open the computation signature")?;
            let mut params = Vec::new();
            if !self.c.eat(b')')? {
                loop {
                    let ploc = self.c.loc();
                    let pname = self.c.expect_name("parameter name")?.to_string();
                    self.c.expect(b':', "after parameter name in signature")?;
                    let shape = self.shape()?;
                    params.push((pname, shape, ploc));
                    if self.c.eat(b')')? {
                        break;
                    }
                    self.c.expect(b',', "between signature parameters")?;
                }
            }
            self.c
                .expect_str("->", "before the computation's result shape")?;
            let result = self.shape()?;
            signature = Some((params, result));
        }
        self.c
            .expect(b'{', &format!("to open the body of computation '{name}'"))?;
        let mut instructions: Vec<Instruction> = Vec::new();
        let mut by_name: Names<'a> = HashMap::new();
        let mut root: Option<(InstrId, Loc)> = None;
        let mut pending_control: Vec<(usize, Vec<(&'a str, Loc)>)> = Vec::new();
        loop {
            if self.c.eat(b'}')? {
                break;
            }
            if self.c.at_end() {
                return Cursor::error_at(
                    loc,
                    format!("computation '{name}' is not closed with '}}'"),
                );
            }
            let iloc = self.c.loc();
            let mut is_root = false;
            let mut iname = self.c.expect_name("instruction name")?;
            if iname == "ROOT" {
                is_root = true;
                iname = self.c.expect_name("instruction name after ROOT")?;
            }
            if by_name.contains_key(iname) {
                return Cursor::error_at(
                    iloc,
                    format!("instruction '{iname}' is already defined in computation '{name}'"),
                );
            }
            let (instr, control) =
                self.instruction(Cow::Borrowed(iname), iloc, &mut by_name, &mut instructions)?;
            let id = InstrId(instructions.len() as u32);
            if is_root {
                if let Some((_, prev)) = root {
                    return Cursor::error_at(
                        iloc,
                        format!("computation '{name}' has a second ROOT (first at {prev})"),
                    );
                }
                root = Some((id, iloc));
            }
            if !control.is_empty() {
                pending_control.push((id.index(), control));
            }
            by_name.insert(Cow::Borrowed(iname), id);
            instructions.push(instr);
        }
        if instructions.is_empty() {
            return Cursor::error_at(loc, format!("computation '{name}' has no instructions"));
        }
        // Computation attributes (`execution_thread="..."`) follow the closing brace, as
        // XLA prints them.
        let mut raw_attrs = Vec::new();
        while self.c.eat(b',')? {
            let key = self
                .c
                .expect_ident("computation attribute name")?
                .to_string();
            self.c.expect(b'=', "after computation attribute name")?;
            let v = self.c.raw_value(&key)?.to_string();
            raw_attrs.push((key, v));
        }
        for (idx, names) in pending_control {
            for (n, l) in names {
                let Some(&id) = by_name.get(n) else {
                    return Cursor::error_at(
                        l,
                        format!("instruction '{n}' does not exist in computation '{name}'"),
                    );
                };
                instructions[idx].control_predecessors.push(id);
            }
        }
        let root = root
            .map(|r| r.0)
            .unwrap_or(InstrId(instructions.len() as u32 - 1));
        let comp = Computation {
            name,
            instructions,
            root,
            raw_attrs,
            loc,
        };
        if let Some((params, result)) = signature {
            check_signature(&comp, &params, &result)?;
        }
        Ok((comp, is_entry))
    }

    /// Parses the right-hand side of `name = ...`, starting at `=`.
    fn instruction(
        &mut self,
        name: Cow<'a, str>,
        loc: Loc,
        by_name: &mut Names<'a>,
        defined: &mut Vec<Instruction>,
    ) -> PResult<(Instruction, Vec<(&'a str, Loc)>)> {
        self.c
            .expect(b'=', &format!("after instruction name '{name}'"))?;
        self.c.skip_ws()?;
        let shape = if self.at_written_shape() {
            Some(self.shape()?)
        } else {
            None
        };
        self.c.skip_ws()?;
        let oloc = self.c.loc();
        let opname = self.c.expect_ident("opcode")?;
        self.instruction_after_opcode(name, loc, shape, opname, oloc, by_name, defined)
    }

    /// Whether the text after `=` (or at an operand) starts with a shape rather than an
    /// opcode: a tuple shape, an element type with dimensions, or a buffer type `b(...)`.
    fn at_written_shape(&mut self) -> bool {
        self.c.peek() == b'('
            || self.at_shape_start()
            || (self.c.peek() == b'b' && self.c.peek_at(1) == b'(')
    }

    /// The rest of an instruction once its opcode is read: operands, attributes, and the
    /// inferred shape when none was written. Also parses operands written inline
    /// (`reshape(f32[1,8] parameter(0))`), which become instructions of their own before this
    /// one, named `<opcode>.anon` as XLA's parser names them.
    #[allow(clippy::too_many_arguments)]
    fn instruction_after_opcode(
        &mut self,
        name: Cow<'a, str>,
        loc: Loc,
        shape: Option<Shape>,
        opname: &'a str,
        oloc: Loc,
        by_name: &mut Names<'a>,
        defined: &mut Vec<Instruction>,
    ) -> PResult<(Instruction, Vec<(&'a str, Loc)>)> {
        let Some(opcode) = Opcode::from_name(opname) else {
            // `f33[2]`: a misspelt element type, not an opcode.
            if self.c.peek() == b'[' {
                return Cursor::error_at(oloc, format!("unknown element type '{opname}'"));
            }
            // `<op>-start` / `-update` / `-done` for an opcode without async opcodes of its own.
            return self.async_sugar(name, loc, shape, opname, oloc, by_name, defined);
        };
        let written = shape.is_some();
        let placeholder = Shape::Tuple(Vec::new());
        let mut ins = Instruction::new(
            name.into_owned(),
            opcode,
            shape.unwrap_or(placeholder),
            Vec::new(),
        );
        ins.loc = loc;
        self.c.expect(b'(', &format!("after opcode '{opname}'"))?;
        match opcode {
            Opcode::Parameter | Opcode::Constant if !written => {
                return Cursor::error_at(
                    oloc,
                    format!("cannot infer the shape of {opcode}: write it before the opcode"),
                );
            }
            Opcode::Parameter => {
                let n = self.c.int("parameter number")?;
                if n < 0 {
                    return self.c.error("parameter number must be non-negative");
                }
                ins.attrs.parameter_number = Some(n);
                self.c.expect(b')', "after the parameter number")?;
            }
            Opcode::Constant => {
                self.c.skip_ws()?;
                let mut probe = self.c.clone();
                if ins.shape.as_array().is_some()
                    && probe.eat(b'{')?
                    && probe.eat_str("...")?
                    && probe.eat(b'}')?
                {
                    // XLA prints large constants as `{...}`; the module parses, but the
                    // values are gone (the evaluator says so if it is run).
                    self.c = probe;
                    ins.attrs.literal_elided = true;
                } else {
                    let lit = self.literal(&ins.shape)?;
                    ins.attrs.literal = Some(lit);
                }
                self.c.expect(b')', "after the constant's literal")?;
            }
            _ => {
                if !self.c.eat(b')')? {
                    loop {
                        self.operand(&mut ins, by_name, defined)?;
                        if self.c.eat(b')')? {
                            break;
                        }
                        if !self.c.eat(b',')? {
                            return self.c.error(format!(
                                "expected ',' or ')' after an operand, found {}",
                                self.c.describe_next()
                            ));
                        }
                    }
                }
            }
        }
        let mut control = Vec::new();
        while self.at_attribute()? {
            self.c.expect(b',', "before an attribute")?;
            self.c.skip_ws()?;
            let aloc = self.c.loc();
            let key = self.c.expect_ident("attribute name")?;
            self.c
                .expect(b'=', &format!("after attribute name '{key}'"))?;
            self.attribute(&mut ins, key, aloc, &mut control)?;
        }
        if matches!(
            opcode,
            Opcode::CollectivePermute | Opcode::CollectivePermuteStart
        ) && ins.raw_attrs.iter().any(|(k, _)| k == "slice_sizes")
            && ins.operands.len() != 4
        {
            return Cursor::error_at(
                oloc,
                format!(
                    "{opcode} with slice_sizes is the in-place form: it takes four operands \
                     (input, output, input offsets, output offsets), found {}",
                    ins.operands.len()
                ),
            );
        }
        if opcode == Opcode::Broadcast
            && ins.attrs.dimensions.is_none()
            && ins.operands.len() == 1
            && defined[ins.operands[0].index()].shape.dims().is_empty()
            && defined[ins.operands[0].index()].shape.as_array().is_some()
        {
            // XLA's parser lets a scalar broadcast omit `dimensions` (there are none).
            ins.attrs.dimensions = Some(Vec::new());
        }
        if !written {
            let operands: Vec<&Shape> = ins
                .operands
                .iter()
                .map(|o| &defined[o.index()].shape)
                .collect();
            let comp_results = &self.comp_results;
            let callee_result = |c: CompId| comp_results.get(c.index()).cloned();
            let input = RuleInput {
                opcode,
                attrs: &ins.attrs,
                operands,
                callee_result: &callee_result,
            };
            match infer_unwritten_shape(&input) {
                Ok(s) => ins.shape = s,
                Err(e) => {
                    return Cursor::error_at(
                        oloc,
                        format!("instruction '{}' has no shape: {e}", ins.name),
                    )
                }
            }
        }
        if matches!(opcode, Opcode::AsyncUpdate | Opcode::AsyncDone) {
            self.async_chain_calls(&mut ins, defined, oloc)?;
        }
        self.channel_shape(&mut ins, defined, oloc)?;
        Ok((ins, control))
    }

    /// Whether `, key=` (an attribute) follows, as opposed to `, operand` or nothing. An
    /// operand written inline ends at its last attribute, and its user's next operand
    /// follows after a comma too.
    fn at_attribute(&mut self) -> PResult<bool> {
        if !self.c.looking_at(b',')? {
            return Ok(false);
        }
        let mut probe = self.c.clone();
        probe.expect(b',', "")?;
        if probe.ident()?.is_none() {
            return Ok(false);
        }
        probe.skip_ws()?;
        Ok(probe.peek() == b'=')
    }

    fn operand(
        &mut self,
        ins: &mut Instruction,
        by_name: &mut Names<'a>,
        defined: &mut Vec<Instruction>,
    ) -> PResult<()> {
        self.c.skip_ws()?;
        let mut declared: Option<(Shape, Loc)> = None;
        if self.at_written_shape() {
            let sloc = self.c.loc();
            declared = Some((self.shape()?, sloc));
        }
        self.c.skip_ws()?;
        let nloc = self.c.loc();
        let n = self.c.expect_name("operand name")?;
        if self.c.peek() == b'(' {
            // An instruction written inline as the operand.
            self.enter()?;
            let opname = n;
            let base = format!("{opname}.anon");
            let mut iname = base.clone();
            let mut k = 0;
            while by_name.contains_key(iname.as_str()) {
                k += 1;
                iname = format!("{base}.{k}");
            }
            let (mut inner, control) = self.instruction_after_opcode(
                Cow::Owned(iname.clone()),
                nloc,
                declared.map(|d| d.0),
                opname,
                nloc,
                by_name,
                defined,
            )?;
            self.leave();
            if !control.is_empty() {
                return Cursor::error_at(
                    nloc,
                    "an operand written inline cannot have control-predecessors",
                );
            }
            inner.loc = nloc;
            let id = InstrId(defined.len() as u32);
            defined.push(inner);
            by_name.insert(Cow::Owned(iname), id);
            ins.operands.push(id);
            return Ok(());
        }
        let Some(&id) = by_name.get(n) else {
            return Cursor::error_at(
                nloc,
                format!(
                    "instruction '{n}' does not exist (used as an operand of '{}')",
                    ins.name
                ),
            );
        };
        if let Some((s, sloc)) = declared {
            let actual = &defined[id.index()].shape;
            if !s.compatible(actual) {
                return Cursor::error_at(
                    sloc,
                    format!("operand '{n}' is declared as {s} but has shape {actual}"),
                );
            }
        }
        ins.operands.push(id);
        Ok(())
    }

    /// Whether a shape (element type followed by `[`) starts next.
    fn at_shape_start(&mut self) -> bool {
        {
            let mut k = 0;
            while self.c.peek_at(k).is_ascii_alphanumeric() {
                k += 1;
            }
            k > 0 && self.c.peek_at(k) == b'[' && {
                let mut w = String::new();
                for i in 0..k {
                    w.push(self.c.peek_at(i) as char);
                }
                ElementType::from_name(&w).is_some()
            }
        }
    }

    fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return self.c.error(format!("nesting deeper than {MAX_NESTING}"));
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.depth -= 1;
    }

    fn shape(&mut self) -> PResult<Shape> {
        self.c.skip_ws()?;
        if self.c.eat(b'(')? {
            self.enter()?;
            let mut elems = Vec::new();
            if !self.c.eat(b')')? {
                loop {
                    elems.push(self.shape()?);
                    if self.c.eat(b')')? {
                        break;
                    }
                    self.c.expect(b',', "between tuple shape elements")?;
                }
            }
            self.leave();
            return Ok(Shape::Tuple(elems));
        }
        let loc = self.c.loc();
        if self.c.peek() == b'b' && self.c.peek_at(1) == b'(' {
            // A buffer shape, `b(f32[16])`.
            self.c.expect(b'b', "")?;
            self.c.expect(b'(', "")?;
            let inner = self.shape()?;
            self.c.expect(b')', "to close a buffer shape")?;
            return match inner {
                Shape::Array(a) => Ok(Shape::Buffer(a)),
                other => Cursor::error_at(loc, format!("a buffer holds an array, not {other}")),
            };
        }
        let tyname = self.c.take_while(|b| b.is_ascii_alphanumeric());
        let Some(ty) = ElementType::from_name(tyname) else {
            return Cursor::error_at(
                loc,
                if tyname.is_empty() {
                    format!("expected a shape, found {}", self.c.describe_next())
                } else {
                    format!("unknown element type '{tyname}'")
                },
            );
        };
        if self.c.peek() != b'[' {
            return self
                .c
                .error(format!("expected '[' after element type '{tyname}'"));
        }
        self.c.expect(b'[', "")?;
        let mut dims = Vec::new();
        let mut dynamic = Vec::new();
        if !self.c.eat(b']')? {
            loop {
                let dyn_dim = self.c.eat_str("<=")?;
                self.c.skip_ws()?;
                let dloc = self.c.loc();
                let d = if self.c.eat(b'?')? {
                    return Cursor::error_at(
                        dloc,
                        "unbounded dynamic dimensions ('?') are not supported",
                    );
                } else {
                    self.c.int("as a dimension size")?
                };
                if d < 0 {
                    return Cursor::error_at(dloc, format!("dimension size {d} is negative"));
                }
                dims.push(d);
                dynamic.push(dyn_dim);
                if self.c.eat(b']')? {
                    break;
                }
                self.c.expect(b',', "between dimensions")?;
            }
        }
        if !dynamic.iter().any(|&d| d) {
            dynamic.clear();
        }
        let sized = ArrayShape::new(ty, dims);
        if sized.checked_byte_size().is_none() {
            return Cursor::error_at(
                loc,
                format!(
                    "shape {sized} is too large: its byte size does not fit in a 64-bit signed \
                     integer (XLA's limit)"
                ),
            );
        }
        let dims = sized.dims;
        if ty == ElementType::Token {
            if !dims.is_empty() {
                return Cursor::error_at(loc, "token shapes have no dimensions");
            }
            return Ok(Shape::Token);
        }
        let mut layout = None;
        // A layout follows immediately (no whitespace) in XLA's printer output.
        if self.c.peek() == b'{' {
            self.c.expect(b'{', "")?;
            let mut m2m = Vec::new();
            let mut tail = String::new();
            if !self.c.eat(b'}')? {
                loop {
                    if self.c.eat(b':')? {
                        tail = self.layout_tail()?;
                        self.c.expect(b'}', "to close the layout")?;
                        break;
                    }
                    m2m.push(self.c.int("in layout")?);
                    if self.c.eat(b'}')? {
                        break;
                    }
                    if self.c.looking_at(b':')? {
                        continue;
                    }
                    self.c.expect(b',', "between layout dimensions")?;
                }
            }
            if m2m.len() != dims.len() && !(m2m.is_empty() && dims.is_empty()) {
                return Cursor::error_at(
                    loc,
                    format!(
                        "layout has {} entries but the shape has rank {}",
                        m2m.len(),
                        dims.len()
                    ),
                );
            }
            let mut seen = m2m.clone();
            seen.sort_unstable();
            if seen.iter().enumerate().any(|(i, &d)| d != i as i64) {
                return Cursor::error_at(
                    loc,
                    format!("layout {m2m:?} is not a permutation of the dimensions"),
                );
            }
            layout = Some(Layout {
                minor_to_major: m2m,
                tail,
            });
        }
        Ok(Shape::Array(ArrayShape {
            ty,
            dims,
            dynamic,
            layout,
        }))
    }

    /// Text after `:` in a layout, up to the closing brace, verbatim.
    fn layout_tail(&mut self) -> PResult<String> {
        let loc = self.c.loc();
        let tail = self.c.take_until_unmatched(b'}');
        if self.c.at_end() {
            return Cursor::error_at(loc, "unclosed layout");
        }
        Ok(tail.trim().to_string())
    }

    fn attribute(
        &mut self,
        ins: &mut Instruction,
        key: &'a str,
        loc: Loc,
        control: &mut Vec<(&'a str, Loc)>,
    ) -> PResult<()> {
        let op = ins.opcode;
        if let Some(allowed) = attribute_names::allowed(op.name()) {
            if !attribute_names::COMMON.contains(&key) && !allowed.contains(&key) {
                let mut all: Vec<&str> = attribute_names::COMMON
                    .iter()
                    .chain(allowed)
                    .copied()
                    .collect();
                all.sort_unstable();
                return Cursor::error_at(
                    loc,
                    format!(
                        "unexpected attribute '{key}' on {op}; XLA allows: {}",
                        all.join(", ")
                    ),
                );
            }
        }
        let a = &mut ins.attrs;
        macro_rules! once {
            ($field:expr, $val:expr) => {{
                if $field.is_some() {
                    return Cursor::error_at(loc, format!("attribute '{key}' is given twice"));
                }
                $field = Some($val);
            }};
        }
        match key {
            "dimensions" => once!(a.dimensions, self.int_list(key)?),
            "index" if op == Opcode::GetTupleElement => {
                once!(a.tuple_index, self.c.int("for index")?)
            }
            "iota_dimension" => once!(a.iota_dimension, self.c.int("for iota_dimension")?),
            "slice" => once!(a.slice, self.slice_ranges()?),
            "dynamic_slice_sizes" => once!(a.dynamic_slice_sizes, self.int_list(key)?),
            "direction" => {
                let w = self.c.expect_ident("comparison direction")?;
                let Some(d) = ComparisonDirection::from_name(w) else {
                    return Cursor::error_at(loc, format!("unknown comparison direction '{w}' (expected EQ, NE, LT, LE, GT or GE)"));
                };
                once!(a.direction, d)
            }
            "type" if op == Opcode::Compare => {
                let w = self.c.expect_ident("comparison type")?;
                let Some(t) = ComparisonType::from_name(w) else {
                    return Cursor::error_at(loc, format!("unknown comparison type '{w}' (expected FLOAT, TOTALORDER, SIGNED or UNSIGNED)"));
                };
                once!(a.comparison_type, t)
            }
            "lhs_batch_dims" => {
                a.dot.get_or_insert_with(Default::default).lhs_batch = self.int_list(key)?
            }
            "lhs_contracting_dims" => {
                a.dot.get_or_insert_with(Default::default).lhs_contracting = self.int_list(key)?
            }
            "rhs_batch_dims" => {
                a.dot.get_or_insert_with(Default::default).rhs_batch = self.int_list(key)?
            }
            "rhs_contracting_dims" => {
                a.dot.get_or_insert_with(Default::default).rhs_contracting = self.int_list(key)?
            }
            "lhs_ragged_dims" => {
                a.ragged_dot.get_or_insert_with(Default::default).lhs_ragged = self.int_list(key)?
            }
            "rhs_group_dims" => {
                a.ragged_dot.get_or_insert_with(Default::default).rhs_group = self.int_list(key)?
            }
            "window" => once!(a.window, self.window()?),
            "dim_labels" => once!(a.conv_dims, self.dim_labels()?),
            "feature_group_count" => once!(
                a.feature_group_count,
                self.c.int("for feature_group_count")?
            ),
            "batch_group_count" => once!(a.batch_group_count, self.c.int("for batch_group_count")?),
            "padding" if op == Opcode::Pad => once!(a.padding, self.pad_config()?),
            "offset_dims" => {
                a.gather.get_or_insert_with(Default::default).offset_dims = self.int_list(key)?
            }
            "collapsed_slice_dims" => {
                a.gather
                    .get_or_insert_with(Default::default)
                    .collapsed_slice_dims = self.int_list(key)?
            }
            "start_index_map" => {
                a.gather
                    .get_or_insert_with(Default::default)
                    .start_index_map = self.int_list(key)?
            }
            "operand_batching_dims" => {
                a.gather
                    .get_or_insert_with(Default::default)
                    .operand_batching_dims = self.int_list(key)?
            }
            "start_indices_batching_dims" => {
                a.gather
                    .get_or_insert_with(Default::default)
                    .start_indices_batching_dims = self.int_list(key)?
            }
            "index_vector_dim" => {
                let v = self.c.int("for index_vector_dim")?;
                if op == Opcode::Scatter {
                    a.scatter
                        .get_or_insert_with(Default::default)
                        .index_vector_dim = v;
                } else {
                    a.gather
                        .get_or_insert_with(Default::default)
                        .index_vector_dim = v;
                }
            }
            "update_window_dims" => {
                a.scatter
                    .get_or_insert_with(Default::default)
                    .update_window_dims = self.int_list(key)?
            }
            "inserted_window_dims" => {
                a.scatter
                    .get_or_insert_with(Default::default)
                    .inserted_window_dims = self.int_list(key)?
            }
            "scatter_dims_to_operand_dims" => {
                a.scatter
                    .get_or_insert_with(Default::default)
                    .scatter_dims_to_operand_dims = self.int_list(key)?
            }
            "input_batching_dims" => {
                a.scatter
                    .get_or_insert_with(Default::default)
                    .input_batching_dims = self.int_list(key)?
            }
            "scatter_indices_batching_dims" => {
                a.scatter
                    .get_or_insert_with(Default::default)
                    .scatter_indices_batching_dims = self.int_list(key)?
            }
            // collective-permute's in-place form writes one list per pair (`{{1}}`); it
            // is kept verbatim (the evaluator refuses that form with its own error).
            "slice_sizes"
                if !matches!(
                    op,
                    Opcode::CollectivePermute | Opcode::CollectivePermuteStart
                ) =>
            {
                once!(a.slice_sizes, self.int_list(key)?)
            }
            "indices_are_sorted" => once!(a.indices_are_sorted, self.boolean(key)?),
            "unique_indices" => once!(a.unique_indices, self.boolean(key)?),
            "is_stable" => once!(a.is_stable, self.boolean(key)?),
            "use_global_device_ids" => once!(a.use_global_device_ids, self.boolean(key)?),
            "largest" => once!(a.largest, self.boolean(key)?),
            "k" if op == Opcode::TopK => once!(a.k, self.c.int("for k")?),
            "custom_call_target" => once!(
                a.custom_call_target,
                self.c.string("for custom_call_target")?
            ),
            "backend_config" => {
                let v = if self.c.looking_at(b'"')? {
                    BackendConfig::Str(self.c.string("for backend_config")?)
                } else {
                    BackendConfig::Raw(self.c.raw_value(key)?.to_string())
                };
                once!(a.backend_config, v)
            }
            "api_version" => {
                let w = self.c.expect_ident("api_version")?;
                let Some(v) = ApiVersion::from_name(w) else {
                    return Cursor::error_at(loc, format!("unknown api_version '{w}'"));
                };
                once!(a.api_version, v)
            }
            "epsilon" => {
                let wloc = self.c.loc();
                let w = self.c.number_word()?;
                let v = parse_f64(w).ok_or_else(|| ParseError {
                    line: wloc.line,
                    col: wloc.col,
                    message: format!("expected a number for epsilon, found '{w}'"),
                })?;
                once!(a.epsilon, v as f32)
            }
            "feature_index" => once!(a.feature_index, self.c.int("for feature_index")?),
            "algorithm" if op == Opcode::RngBitGenerator => {
                let w = self.c.expect_ident("rng algorithm")?;
                let Some(v) = RngAlgorithm::from_name(w) else {
                    return Cursor::error_at(loc, format!("unknown rng algorithm '{w}' (expected rng_default, rng_three_fry or rng_philox)"));
                };
                once!(a.rng_algorithm, v)
            }
            "distribution" => {
                let w = self.c.expect_ident("rng distribution")?;
                let Some(v) = RngDistribution::from_name(w) else {
                    return Cursor::error_at(loc, format!("unknown distribution '{w}'"));
                };
                once!(a.distribution, v)
            }
            "exponent_bits" => once!(a.exponent_bits, self.c.int("for exponent_bits")?),
            "mantissa_bits" => once!(a.mantissa_bits, self.c.int("for mantissa_bits")?),
            "fft_type" => {
                let w = self.c.expect_ident("fft type")?;
                let Some(v) = FftType::from_name(w) else {
                    return Cursor::error_at(loc, format!("unknown fft_type '{w}'"));
                };
                once!(a.fft_type, v)
            }
            "fft_length" => once!(a.fft_length, self.int_list(key)?),
            "lower" if matches!(op, Opcode::Cholesky | Opcode::TriangularSolve) => {
                once!(a.lower, self.boolean(key)?)
            }
            "left_side" if op == Opcode::TriangularSolve => {
                once!(a.left_side, self.boolean(key)?)
            }
            "unit_diagonal" if op == Opcode::TriangularSolve => {
                once!(a.unit_diagonal, self.boolean(key)?)
            }
            "transpose_a" if op == Opcode::TriangularSolve => {
                let w = self.c.expect_ident("transpose_a")?;
                let Some(v) = TransposeA::from_name(w) else {
                    return Cursor::error_at(
                        loc,
                        format!("unknown transpose_a '{w}' (expected NO_TRANSPOSE, TRANSPOSE or ADJOINT)"),
                    );
                };
                once!(a.transpose_a, v)
            }
            "replica_groups" => once!(a.replica_groups, self.c.raw_value(key)?.to_string()),
            "channel_id" => once!(a.channel_id, self.c.int("for channel_id")?),
            "to_apply" => once!(a.to_apply, self.comp_ref()?),
            "condition" => once!(a.condition, self.comp_ref()?),
            "body" => once!(a.body, self.comp_ref()?),
            "true_computation" => once!(a.true_computation, self.comp_ref()?),
            "false_computation" => once!(a.false_computation, self.comp_ref()?),
            "select" => once!(a.select, self.comp_ref()?),
            "scatter" => once!(a.scatter_computation, self.comp_ref()?),
            "branch_computations" => once!(a.branch_computations, self.comp_ref_list()?),
            "calls" | "called_computations" => {
                let v = if self.c.looking_at(b'{')? {
                    self.comp_ref_list()?
                } else {
                    vec![self.comp_ref()?]
                };
                once!(a.calls, v)
            }
            "control-predecessors" => {
                self.c.expect(b'{', "to open control-predecessors")?;
                if !self.c.eat(b'}')? {
                    loop {
                        self.c.skip_ws()?;
                        let l = self.c.loc();
                        control.push((self.c.expect_name("control predecessor name")?, l));
                        if self.c.eat(b'}')? {
                            break;
                        }
                        self.c.expect(b',', "between control predecessors")?;
                    }
                }
            }
            _ => {
                if ins.raw_attrs.iter().any(|(k, _)| k == key) {
                    return Cursor::error_at(loc, format!("attribute '{key}' is given twice"));
                }
                let v = self.c.raw_value(key)?.to_string();
                ins.raw_attrs.push((key.to_string(), v));
            }
        }
        Ok(())
    }

    fn comp_ref(&mut self) -> PResult<CompId> {
        self.c.skip_ws()?;
        let loc = self.c.loc();
        let name = self.c.expect_name("computation name")?;
        match self.comps.get(name) {
            Some(&i) => Ok(CompId(i as u32)),
            None => Cursor::error_at(
                loc,
                format!("computation '{name}' does not exist (a computation must be defined before it is called)"),
            ),
        }
    }

    fn comp_ref_list(&mut self) -> PResult<Vec<CompId>> {
        self.c.expect(b'{', "to open a computation list")?;
        let mut v = Vec::new();
        if !self.c.eat(b'}')? {
            loop {
                v.push(self.comp_ref()?);
                if self.c.eat(b'}')? {
                    break;
                }
                self.c.expect(b',', "between computation names")?;
            }
        }
        Ok(v)
    }

    fn boolean(&mut self, key: &str) -> PResult<bool> {
        self.c.skip_ws()?;
        let loc = self.c.loc();
        match self.c.ident()? {
            Some("true") => Ok(true),
            Some("false") => Ok(false),
            other => Cursor::error_at(
                loc,
                format!(
                    "expected true or false for {key}, found '{}'",
                    other.unwrap_or("")
                ),
            ),
        }
    }

    fn int_list(&mut self, key: &str) -> PResult<Vec<i64>> {
        self.c.expect(b'{', &format!("to open the list of {key}"))?;
        let mut v = Vec::new();
        if !self.c.eat(b'}')? {
            loop {
                v.push(self.c.int(&format!("in {key}"))?);
                if self.c.eat(b'}')? {
                    break;
                }
                self.c.expect(b',', &format!("between {key} entries"))?;
            }
        }
        Ok(v)
    }

    fn slice_ranges(&mut self) -> PResult<Vec<SliceDim>> {
        self.c.expect(b'{', "to open slice")?;
        let mut v = Vec::new();
        if !self.c.eat(b'}')? {
            loop {
                self.c.expect(b'[', "to open a slice range")?;
                let start = self.c.int("as slice start")?;
                self.c.expect(b':', "in slice range")?;
                let limit = self.c.int("as slice limit")?;
                let stride = if self.c.eat(b':')? {
                    self.c.int("as slice stride")?
                } else {
                    1
                };
                self.c.expect(b']', "to close a slice range")?;
                v.push(SliceDim {
                    start,
                    limit,
                    stride,
                });
                if self.c.eat(b'}')? {
                    break;
                }
                self.c.expect(b',', "between slice ranges")?;
            }
        }
        Ok(v)
    }

    fn window(&mut self) -> PResult<Window> {
        self.c.expect(b'{', "to open window")?;
        let mut fields: Vec<(&str, Vec<&str>, Loc)> = Vec::new();
        loop {
            if self.c.eat(b'}')? {
                break;
            }
            self.c.skip_ws()?;
            let loc = self.c.loc();
            let key = self.c.expect_ident("window field")?;
            self.c.expect(b'=', "after window field")?;
            self.c.skip_ws()?;
            let val = self
                .c
                .take_while(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
            fields.push((key, val.split('x').collect(), loc));
        }
        let rank = fields.first().map(|f| f.1.len()).unwrap_or(0);
        let mut dims = vec![WindowDim::default(); rank];
        for (key, parts, loc) in fields {
            if parts.len() != rank {
                return Cursor::error_at(
                    loc,
                    format!(
                        "window field '{key}' has {} entries, expected {rank}",
                        parts.len()
                    ),
                );
            }
            for (d, p) in dims.iter_mut().zip(&parts) {
                let num = |s: &str| -> PResult<i64> {
                    s.parse::<i64>().or_else(|_| {
                        Cursor::error_at(loc, format!("bad number '{s}' in window field '{key}'"))
                    })
                };
                match key {
                    "size" => d.size = num(p)?,
                    "stride" => d.stride = num(p)?,
                    "lhs_dilate" => d.base_dilation = num(p)?,
                    "rhs_dilate" => d.window_dilation = num(p)?,
                    "rhs_reversal" => d.reversal = num(p)? != 0,
                    "pad" => {
                        let Some((lo, hi)) = split_pad(p) else {
                            return Cursor::error_at(
                                loc,
                                format!("bad padding '{p}' in window (expected lo_hi)"),
                            );
                        };
                        d.pad_lo = num(lo)?;
                        d.pad_hi = num(hi)?;
                    }
                    _ => return Cursor::error_at(loc, format!("unknown window field '{key}'")),
                }
            }
        }
        Ok(Window { dims })
    }

    fn dim_labels(&mut self) -> PResult<ConvDims> {
        self.c.skip_ws()?;
        let loc = self.c.loc();
        let text = self
            .c
            .take_while(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'>');
        parse_dim_labels(text).ok_or_else(|| ParseError {
            line: loc.line,
            col: loc.col,
            message: format!("bad dim_labels '{text}' (expected e.g. b01f_01io->b01f)"),
        })
    }

    fn pad_config(&mut self) -> PResult<Vec<PadDim>> {
        self.c.skip_ws()?;
        let loc = self.c.loc();
        let text = self
            .c
            .take_while(|b| b.is_ascii_digit() || b == b'_' || b == b'-' || b == b'x');
        if text.is_empty() {
            return Ok(Vec::new());
        }
        let mut v = Vec::new();
        for part in text.split('x') {
            let nums: Vec<&str> = split_pad_all(part);
            let parsed: Option<Vec<i64>> = nums.iter().map(|s| s.parse().ok()).collect();
            match parsed.as_deref() {
                Some([lo, hi]) => v.push(PadDim {
                    lo: *lo,
                    hi: *hi,
                    interior: 0,
                }),
                Some([lo, hi, int]) => v.push(PadDim {
                    lo: *lo,
                    hi: *hi,
                    interior: *int,
                }),
                _ => {
                    return Cursor::error_at(
                        loc,
                        format!("bad padding '{part}' (expected lo_hi or lo_hi_interior)"),
                    )
                }
            }
        }
        Ok(v)
    }

    /// Parses a literal of the given shape.
    fn literal(&mut self, shape: &Shape) -> PResult<Literal> {
        self.c.skip_ws()?;
        match shape {
            Shape::Tuple(elems) => {
                self.c.expect(b'(', "to open a tuple literal")?;
                self.enter()?;
                let mut out = Vec::new();
                for (i, s) in elems.iter().enumerate() {
                    if i > 0 {
                        self.c.expect(b',', "between tuple literal elements")?;
                    }
                    out.push(self.literal(s)?);
                }
                self.c.expect(b')', "to close a tuple literal")?;
                self.leave();
                Ok(Literal::Tuple(out))
            }
            Shape::Token => self.c.error("token constants are not allowed"),
            Shape::Buffer(_) => self.c.error("buffer constants are not allowed"),
            Shape::Array(a) => {
                let loc = self.c.loc();
                let mut elems = Vec::new();
                if a.dims.is_empty() {
                    if self.c.looking_at(b'{')? {
                        // XLA also accepts a scalar wrapped in braces.
                        self.c.expect(b'{', "")?;
                        elems.push(self.elem(a.ty)?);
                        self.c.expect(b'}', "to close a scalar literal")?;
                    } else {
                        elems.push(self.elem(a.ty)?);
                    }
                } else if !self.c.looking_at(b'{')? {
                    // XLA accepts one scalar for every element of an array constant.
                    let e = self.elem(a.ty)?;
                    let one = convert_elems(&ArrayShape::new(a.ty, Vec::new()), &[e], loc)?;
                    return Ok(Literal::Array(ArrayLiteral {
                        shape: a.clone(),
                        data: one.repeat(a.element_count()),
                    }));
                } else {
                    self.nested(a, 0, &mut elems)?;
                }
                let data = convert_elems(a, &elems, loc)?;
                Ok(Literal::Array(ArrayLiteral {
                    shape: a.clone(),
                    data,
                }))
            }
        }
    }

    fn nested(&mut self, a: &ArrayShape, dim: usize, out: &mut Vec<Elem<'a>>) -> PResult<()> {
        self.c.skip_ws()?;
        let loc = self.c.loc();
        self.c.expect(
            b'{',
            &format!(
                "to open dimension {dim} of a {} literal",
                Shape::Array(a.clone())
            ),
        )?;
        if self.c.eat_str("...")? {
            return Cursor::error_at(
                loc,
                "elided constant '{...}': its values are unknown, so the module cannot be used",
            );
        }
        self.enter()?;
        let want = a.dims[dim];
        let mut count = 0i64;
        if !self.c.eat(b'}')? {
            loop {
                if dim + 1 < a.dims.len() {
                    self.nested(a, dim + 1, out)?;
                } else {
                    out.push(self.elem(a.ty)?);
                }
                count += 1;
                if count > want {
                    return Cursor::error_at(
                        loc,
                        format!("literal dimension {dim} has more than {want} elements"),
                    );
                }
                if self.c.eat(b'}')? {
                    break;
                }
                self.c.expect(b',', "between literal elements")?;
            }
        }
        if count != want {
            return Cursor::error_at(
                loc,
                format!("literal dimension {dim} has {count} elements, the shape says {want}"),
            );
        }
        self.leave();
        Ok(())
    }

    fn elem(&mut self, ty: ElementType) -> PResult<Elem<'a>> {
        self.c.skip_ws()?;
        let loc = self.c.loc();
        if ty.is_complex() {
            self.c.expect(b'(', "to open a complex value")?;
            let re = self.c.number_word()?;
            self.c.expect(b',', "between real and imaginary parts")?;
            let im = self.c.number_word()?;
            self.c.expect(b')', "to close a complex value")?;
            return Ok(Elem::Pair(re, im, loc));
        }
        if self.c.peek() == b'.' && self.c.peek_at(1) == b'.' {
            return self.c.error(
                "elided constant '...': its values are unknown, so the module cannot be used",
            );
        }
        Ok(Elem::Word(self.c.number_word()?, loc))
    }
}

/// Splits `lo_hi` where either part may be negative (`-1_2`, `1_-2`).
fn split_pad(s: &str) -> Option<(&str, &str)> {
    let parts = split_pad_all(s);
    if parts.len() == 2 {
        Some((parts[0], parts[1]))
    } else {
        None
    }
}

fn split_pad_all(s: &str) -> Vec<&str> {
    s.split('_').collect()
}

/// Parses `b01f_01io->b01f` into dimension indices.
pub(crate) fn parse_dim_labels(text: &str) -> Option<ConvDims> {
    let (lhs, out) = text.split_once("->")?;
    let (inp, ker) = lhs.split_once('_')?;
    fn labels(s: &str, a: char, b: char) -> Option<(i64, i64, Vec<i64>)> {
        let mut x = None;
        let mut y = None;
        let mut spatial: Vec<(u32, i64)> = Vec::new();
        for (i, ch) in s.chars().enumerate() {
            if ch == a && x.is_none() {
                x = Some(i as i64);
            } else if ch == b && y.is_none() {
                y = Some(i as i64);
            } else if let Some(d) = ch.to_digit(10) {
                if spatial.iter().any(|&(k, _)| k == d) {
                    return None;
                }
                spatial.push((d, i as i64));
            } else {
                return None;
            }
        }
        spatial.sort_unstable();
        if spatial.iter().enumerate().any(|(i, &(d, _))| d != i as u32) {
            return None;
        }
        Some((x?, y?, spatial.into_iter().map(|(_, p)| p).collect()))
    }
    let (ib, iff, isp) = labels(inp, 'b', 'f')?;
    let (ki, ko, ksp) = labels(ker, 'i', 'o')?;
    let (ob, of, osp) = labels(out, 'b', 'f')?;
    if isp.len() != ksp.len() || isp.len() != osp.len() {
        return None;
    }
    Some(ConvDims {
        input_batch: ib,
        input_feature: iff,
        input_spatial: isp,
        kernel_input_feature: ki,
        kernel_output_feature: ko,
        kernel_spatial: ksp,
        output_batch: ob,
        output_feature: of,
        output_spatial: osp,
    })
}

fn check_signature(
    comp: &Computation,
    params: &[(String, Shape, Loc)],
    result: &Shape,
) -> PResult<()> {
    let actual = comp.parameters();
    if actual.len() != params.len() || actual.iter().any(|p| p.is_none()) {
        return Cursor::error_at(
            comp.loc,
            format!(
                "computation '{}' declares {} parameters in its signature but its body defines parameter numbers {:?}",
                comp.name,
                params.len(),
                comp.instructions
                    .iter()
                    .filter_map(|i| i.attrs.parameter_number)
                    .collect::<Vec<_>>()
            ),
        );
    }
    for (i, (pname, shape, loc)) in params.iter().enumerate() {
        let Some(id) = actual[i] else { continue };
        let p = comp.instr(id);
        if !p.shape.compatible(shape) {
            return Cursor::error_at(
                *loc,
                format!("signature parameter {i} ('{pname}') has shape {shape} but parameter({i}) is {}", p.shape),
            );
        }
    }
    let root = &comp.root_instr().shape;
    if !root.compatible(result) {
        return Cursor::error_at(
            comp.loc,
            format!(
                "computation '{}' declares result {result} but its root has shape {root}",
                comp.name
            ),
        );
    }
    Ok(())
}

/// Parses a float literal word: decimal, `inf`, `-inf`, `nan`, `-nan`.
fn parse_f64(w: &str) -> Option<f64> {
    match w {
        "inf" | "+inf" => Some(f64::INFINITY),
        "-inf" => Some(f64::NEG_INFINITY),
        "nan" | "+nan" => Some(f64::NAN),
        "-nan" => Some(-f64::NAN),
        _ => {
            let ok = w
                .bytes()
                .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'-' | b'+'));
            if ok {
                w.parse::<f64>().ok()
            } else {
                None
            }
        }
    }
}

/// NaN with an explicit payload: (negative, payload).
fn parse_nan_payload(w: &str) -> Option<(bool, u64)> {
    let (neg, rest) = match w.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, w.strip_prefix('+').unwrap_or(w)),
    };
    let inner = rest.strip_prefix("nan(")?.strip_suffix(')')?;
    let hex = inner
        .strip_prefix("0x")
        .or_else(|| inner.strip_prefix("0X"))?;
    Some((neg, u64::from_str_radix(hex, 16).ok()?))
}

/// Bits of an IEEE float of `bits` width and `mant` mantissa bits from a literal word.
fn float_bits(w: &str, bits: u32, mant: u32) -> Option<u64> {
    let sign = 1u64 << (bits - 1);
    let exp_mask = ((1u64 << (bits - 1 - mant)) - 1) << mant;
    if let Some((neg, payload)) = parse_nan_payload(w) {
        if payload == 0 || payload >> mant != 0 {
            return None;
        }
        return Some(if neg { sign } else { 0 } | exp_mask | payload);
    }
    let v = parse_f64(w)?;
    if v.is_nan() {
        let quiet = 1u64 << (mant - 1);
        return Some(if v.is_sign_negative() { sign } else { 0 } | exp_mask | quiet);
    }
    Some(match bits {
        64 => v.to_bits(),
        32 => (v as f32).to_bits() as u64,
        16 if mant == 10 => f16::from_f64(v).to_bits() as u64,
        _ => bf16::from_f64(v).to_bits() as u64,
    })
}

/// Checks the syntax of `input_output_alias={ {0}: (0, {}, must-alias), ... }` as XLA's
/// parser reads it: output index, `:`, and a parenthesised parameter number, parameter
/// index and optional `may-alias` / `must-alias`.
fn input_output_alias(c: &mut Cursor<'_>) -> PResult<()> {
    fn shape_index(c: &mut Cursor<'_>) -> PResult<()> {
        c.expect(b'{', "to open a shape index")?;
        if c.eat(b'}')? {
            return Ok(());
        }
        loop {
            c.int("shape index")?;
            if c.eat(b'}')? {
                return Ok(());
            }
            c.expect(b',', "between shape index entries")?;
        }
    }
    c.expect(b'{', "to open input_output_alias")?;
    if c.eat(b'}')? {
        return Ok(());
    }
    loop {
        shape_index(c)?;
        c.expect(b':', "after the output index")?;
        c.expect(b'(', "to open an alias")?;
        c.int("parameter number")?;
        c.expect(b',', "after the parameter number")?;
        shape_index(c)?;
        if c.eat(b',')? {
            match c.expect_ident("alias kind")? {
                "may-alias" | "must-alias" => {}
                k => {
                    return c.error(format!(
                        "unknown alias kind '{k}' (may-alias or must-alias)"
                    ))
                }
            }
        }
        c.expect(b')', "to close an alias")?;
        if c.eat(b'}')? {
            return Ok(());
        }
        c.expect(b',', "between aliases")?;
    }
}

fn int_range(ty: ElementType) -> (i128, i128) {
    use ElementType as E;
    match ty {
        E::S2 => (-2, 1),
        E::S4 => (-8, 7),
        E::S8 => (i8::MIN as i128, i8::MAX as i128),
        E::S16 => (i16::MIN as i128, i16::MAX as i128),
        E::S32 => (i32::MIN as i128, i32::MAX as i128),
        E::S64 => (i64::MIN as i128, i64::MAX as i128),
        E::U2 => (0, 3),
        E::U4 => (0, 15),
        E::U8 => (0, u8::MAX as i128),
        E::U16 => (0, u16::MAX as i128),
        E::U32 => (0, u32::MAX as i128),
        _ => (0, u64::MAX as i128),
    }
}

/// Converts literal words into a typed buffer, with range and syntax checks.
fn convert_elems(a: &ArrayShape, elems: &[Elem<'_>], loc: Loc) -> PResult<ArrayData> {
    use ElementType as E;
    let word = |e: &Elem<'_>| -> (String, Loc) {
        match e {
            Elem::Word(w, l) => (w.to_string(), *l),
            Elem::Pair(r, i, l) => (format!("({r}, {i})"), *l),
        }
    };
    let bad = |e: &Elem<'_>, what: &str| -> ParseError {
        let (w, l) = word(e);
        ParseError {
            line: l.line,
            col: l.col,
            message: format!("'{w}' is not a valid {what} value"),
        }
    };
    let ints = |e: &Elem<'_>| -> PResult<i128> {
        let (w, _) = word(e);
        let v: i128 = w.parse().map_err(|_| bad(e, a.ty.name()))?;
        let (lo, hi) = int_range(a.ty);
        if v < lo || v > hi {
            let (w, l) = word(e);
            return Err(ParseError {
                line: l.line,
                col: l.col,
                message: format!("value {w} is out of range for {}", a.ty),
            });
        }
        Ok(v)
    };
    // XLA rejects a finite literal that rounds to infinity in its type (f16 65520): "out of
    // range". `inf` and `nan` themselves are fine.
    let out_of_range = |e: &Elem<'_>| -> ParseError {
        let (w, l) = word(e);
        ParseError {
            line: l.line,
            col: l.col,
            message: format!(
                "value {w} is out of range for {}: it rounds to infinity",
                a.ty
            ),
        }
    };
    let finite_in =
        |w: &str, rounded: f64| parse_f64(w).is_some_and(f64::is_finite) && !rounded.is_finite();
    let floats = |e: &Elem<'_>, bits: u32, mant: u32| -> PResult<u64> {
        let (w, _) = word(e);
        let b = float_bits(&w, bits, mant).ok_or_else(|| bad(e, a.ty.name()))?;
        let rounded = match bits {
            64 => f64::from_bits(b),
            32 => f32::from_bits(b as u32) as f64,
            _ if mant == 10 => f16::from_bits(b as u16).to_f64(),
            _ => bf16::from_bits(b as u16).to_f64(),
        };
        if finite_in(&w, rounded) {
            return Err(out_of_range(e));
        }
        Ok(b)
    };
    let pair = |e: &Elem<'_>, bits: u32, mant: u32| -> PResult<(u64, u64)> {
        match e {
            Elem::Pair(r, i, _) => {
                let part = |w: &str| -> PResult<u64> {
                    let b = float_bits(w, bits, mant).ok_or_else(|| bad(e, a.ty.name()))?;
                    let rounded = if bits == 64 {
                        f64::from_bits(b)
                    } else {
                        f32::from_bits(b as u32) as f64
                    };
                    if finite_in(w, rounded) {
                        return Err(out_of_range(e));
                    }
                    Ok(b)
                };
                Ok((part(r)?, part(i)?))
            }
            _ => Err(bad(e, a.ty.name())),
        }
    };
    let _ = loc;
    macro_rules! collect {
        ($f:expr) => {
            elems.iter().map($f).collect::<PResult<Vec<_>>>()?
        };
    }
    Ok(match a.ty {
        E::Pred => ArrayData::Pred(collect!(|e| match word(e).0.as_str() {
            "true" | "1" => Ok(true),
            "false" | "0" => Ok(false),
            _ => Err(bad(e, "pred")),
        })),
        E::S2 | E::S4 | E::S8 => ArrayData::S8(collect!(|e| ints(e).map(|v| v as i8))),
        E::S16 => ArrayData::S16(collect!(|e| ints(e).map(|v| v as i16))),
        E::S32 => ArrayData::S32(collect!(|e| ints(e).map(|v| v as i32))),
        E::S64 => ArrayData::S64(collect!(|e| ints(e).map(|v| v as i64))),
        E::U2 | E::U4 | E::U8 => ArrayData::U8(collect!(|e| ints(e).map(|v| v as u8))),
        E::U16 => ArrayData::U16(collect!(|e| ints(e).map(|v| v as u16))),
        E::U32 => ArrayData::U32(collect!(|e| ints(e).map(|v| v as u32))),
        E::U64 => ArrayData::U64(collect!(|e| ints(e).map(|v| v as u64))),
        E::F16 => ArrayData::F16(collect!(
            |e| floats(e, 16, 10).map(|b| f16::from_bits(b as u16))
        )),
        E::BF16 => ArrayData::BF16(collect!(
            |e| floats(e, 16, 7).map(|b| bf16::from_bits(b as u16))
        )),
        E::F32 => ArrayData::F32(collect!(
            |e| floats(e, 32, 23).map(|b| f32::from_bits(b as u32))
        )),
        E::F64 => ArrayData::F64(collect!(|e| floats(e, 64, 52).map(f64::from_bits))),
        E::C64 => ArrayData::C64(collect!(|e| pair(e, 32, 23)
            .map(|(r, i)| Complex::new(f32::from_bits(r as u32), f32::from_bits(i as u32))))),
        E::C128 => {
            ArrayData::C128(collect!(|e| pair(e, 64, 52)
                .map(|(r, i)| Complex::new(f64::from_bits(r), f64::from_bits(i)))))
        }
        E::Token => return Err(bad(&elems[0], "token")),
        ty => ArrayData::Bits8(collect!(|e| {
            let (w, _) = word(e);
            let v = parse_f64(&w).ok_or_else(|| bad(e, ty.name()))?;
            let b = minifloat::encode(ty, v);
            if finite_in(&w, minifloat::decode(ty, b)) {
                return Err(out_of_range(e));
            }
            Ok(b)
        })),
    })
}
