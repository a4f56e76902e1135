//! Canonical HLO text: the long form (`%name`, typed operands, computation signatures)
//! that XLA's own parser reads, with callees printed before callers. `parse(print(m)) == m`.

use super::computation::Computation;
use super::instruction::*;
use super::literal::{ArrayLiteral, Literal};
use super::module::Module;
use super::opcode::Opcode;
use std::fmt::Write;

/// Prints a module as canonical HLO text.
pub fn print_module(m: &Module) -> String {
    let mut out = String::with_capacity(m.instruction_count() * 96);
    out.push_str("HloModule ");
    out.push_str(&m.name);
    for (k, v) in &m.header_attrs {
        let _ = write!(out, ", {k}={v}");
    }
    out.push_str("\n\n");
    for c in m.computation_post_order() {
        print_computation(m, m.comp(c), c == m.entry, &mut out);
        out.push('\n');
    }
    out
}

fn print_computation(m: &Module, comp: &Computation, is_entry: bool, out: &mut String) {
    if is_entry {
        out.push_str("ENTRY ");
    }
    let _ = write!(out, "%{} (", comp.name);
    for (i, p) in comp.parameters().iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        match p {
            Some(id) => {
                let ins = comp.instr(*id);
                let _ = write!(out, "{}: {}", ins.name, ins.shape);
            }
            None => {
                let _ = write!(out, "missing.{i}: ()");
            }
        }
    }
    let _ = write!(out, ") -> {}", comp.root_instr().shape);
    out.push_str(" {\n");
    let order = comp.post_order().unwrap_or_else(|| comp.ids().collect());
    for id in order {
        out.push_str("  ");
        if id == comp.root {
            out.push_str("ROOT ");
        }
        print_instruction(m, comp, comp.instr(id), out);
        out.push('\n');
    }
    out.push('}');
    for (k, v) in &comp.raw_attrs {
        let _ = write!(out, ", {k}={v}");
    }
    out.push('\n');
}

/// Prints one instruction (without indentation or newline).
pub fn print_instruction(m: &Module, comp: &Computation, ins: &Instruction, out: &mut String) {
    let _ = write!(out, "%{} = {} {}(", ins.name, ins.shape, ins.opcode);
    match ins.opcode {
        Opcode::Parameter => {
            let _ = write!(out, "{}", ins.attrs.parameter_number.unwrap_or(0));
        }
        Opcode::Constant => {
            if let Some(l) = &ins.attrs.literal {
                print_literal(l, out);
            } else if ins.attrs.literal_elided {
                out.push_str("{...}");
            }
        }
        _ => {
            for (i, op) in ins.operands.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                let o = comp.instr(*op);
                let _ = write!(out, "{} %{}", o.shape, o.name);
            }
        }
    }
    out.push(')');
    print_attrs(m, comp, ins, out);
}

fn list(v: &[i64]) -> String {
    let items: Vec<String> = v.iter().map(|x| x.to_string()).collect();
    format!("{{{}}}", items.join(","))
}

fn print_attrs(m: &Module, comp: &Computation, ins: &Instruction, out: &mut String) {
    let a = &ins.attrs;
    let mut attr = |k: &str, v: String| {
        let _ = write!(out, ", {k}={v}");
    };
    if let Some(i) = a.tuple_index {
        attr("index", i.to_string());
    }
    if let Some(d) = a.direction {
        attr("direction", d.name().into());
    }
    if let Some(t) = a.comparison_type {
        attr("type", t.name().into());
    }
    if let Some(d) = &a.dimensions {
        attr("dimensions", list(d));
    }
    if let Some(d) = a.iota_dimension {
        attr("iota_dimension", d.to_string());
    }
    if let Some(s) = &a.slice {
        let parts: Vec<String> = s
            .iter()
            .map(|d| {
                if d.stride == 1 {
                    format!("[{}:{}]", d.start, d.limit)
                } else {
                    format!("[{}:{}:{}]", d.start, d.limit, d.stride)
                }
            })
            .collect();
        attr("slice", format!("{{{}}}", parts.join(", ")));
    }
    if let Some(s) = &a.dynamic_slice_sizes {
        attr("dynamic_slice_sizes", list(s));
    }
    if let Some(p) = &a.padding {
        let parts: Vec<String> = p
            .iter()
            .map(|d| {
                if d.interior == 0 {
                    format!("{}_{}", d.lo, d.hi)
                } else {
                    format!("{}_{}_{}", d.lo, d.hi, d.interior)
                }
            })
            .collect();
        attr("padding", parts.join("x"));
    }
    if let Some(w) = &a.window {
        attr("window", format_window(w));
    }
    if let Some(c) = &a.conv_dims {
        attr("dim_labels", format_dim_labels(c));
    }
    if let Some(d) = &a.dot {
        if !d.lhs_batch.is_empty() {
            attr("lhs_batch_dims", list(&d.lhs_batch));
        }
        attr("lhs_contracting_dims", list(&d.lhs_contracting));
        if !d.rhs_batch.is_empty() {
            attr("rhs_batch_dims", list(&d.rhs_batch));
        }
        attr("rhs_contracting_dims", list(&d.rhs_contracting));
    }
    if let Some(r) = &a.ragged_dot {
        attr("lhs_ragged_dims", list(&r.lhs_ragged));
        if !r.rhs_group.is_empty() {
            attr("rhs_group_dims", list(&r.rhs_group));
        }
    }
    if let Some(n) = a.feature_group_count {
        attr("feature_group_count", n.to_string());
    }
    if let Some(n) = a.batch_group_count {
        attr("batch_group_count", n.to_string());
    }
    if let Some(g) = &a.gather {
        attr("offset_dims", list(&g.offset_dims));
        attr("collapsed_slice_dims", list(&g.collapsed_slice_dims));
        attr("start_index_map", list(&g.start_index_map));
        if !g.operand_batching_dims.is_empty() {
            attr("operand_batching_dims", list(&g.operand_batching_dims));
        }
        if !g.start_indices_batching_dims.is_empty() {
            attr(
                "start_indices_batching_dims",
                list(&g.start_indices_batching_dims),
            );
        }
        attr("index_vector_dim", g.index_vector_dim.to_string());
    }
    if let Some(s) = &a.scatter {
        attr("update_window_dims", list(&s.update_window_dims));
        attr("inserted_window_dims", list(&s.inserted_window_dims));
        attr(
            "scatter_dims_to_operand_dims",
            list(&s.scatter_dims_to_operand_dims),
        );
        if !s.input_batching_dims.is_empty() {
            attr("input_batching_dims", list(&s.input_batching_dims));
        }
        if !s.scatter_indices_batching_dims.is_empty() {
            attr(
                "scatter_indices_batching_dims",
                list(&s.scatter_indices_batching_dims),
            );
        }
        attr("index_vector_dim", s.index_vector_dim.to_string());
    }
    if let Some(s) = &a.slice_sizes {
        attr("slice_sizes", list(s));
    }
    for (k, v) in [
        ("indices_are_sorted", a.indices_are_sorted),
        ("unique_indices", a.unique_indices),
        ("is_stable", a.is_stable),
        ("use_global_device_ids", a.use_global_device_ids),
        ("largest", a.largest),
    ] {
        if let Some(b) = v {
            attr(k, b.to_string());
        }
    }
    if let Some(k) = a.k {
        attr("k", k.to_string());
    }
    if let Some(e) = a.epsilon {
        attr(
            "epsilon",
            super::literal::format_float(e as f64, e.to_bits() as u64, 32, 23),
        );
    }
    if let Some(f) = a.feature_index {
        attr("feature_index", f.to_string());
    }
    if let Some(r) = a.rng_algorithm {
        attr("algorithm", r.name().into());
    }
    if let Some(d) = a.distribution {
        attr("distribution", d.name().into());
    }
    if let Some(e) = a.exponent_bits {
        attr("exponent_bits", e.to_string());
    }
    if let Some(e) = a.mantissa_bits {
        attr("mantissa_bits", e.to_string());
    }
    if let Some(f) = a.fft_type {
        attr("fft_type", f.name().into());
    }
    if let Some(f) = &a.fft_length {
        attr("fft_length", list(f));
    }
    for (k, v) in [
        ("left_side", a.left_side),
        ("lower", a.lower),
        ("unit_diagonal", a.unit_diagonal),
    ] {
        if let Some(b) = v {
            attr(k, b.to_string());
        }
    }
    if let Some(t) = a.transpose_a {
        attr("transpose_a", t.name().into());
    }
    if let Some(c) = a.channel_id {
        attr("channel_id", c.to_string());
    }
    if let Some(r) = &a.replica_groups {
        attr("replica_groups", r.clone());
    }
    let cname = |c: CompId| format!("%{}", m.comp(c).name);
    let clist = |v: &[CompId]| {
        format!(
            "{{{}}}",
            v.iter().map(|&c| cname(c)).collect::<Vec<_>>().join(", ")
        )
    };
    if let Some(c) = a.condition {
        attr("condition", cname(c));
    }
    if let Some(c) = a.body {
        attr("body", cname(c));
    }
    if let Some(c) = a.true_computation {
        attr("true_computation", cname(c));
    }
    if let Some(c) = a.false_computation {
        attr("false_computation", cname(c));
    }
    if let Some(b) = &a.branch_computations {
        attr("branch_computations", clist(b));
    }
    if let Some(c) = a.select {
        attr("select", cname(c));
    }
    if let Some(c) = a.scatter_computation {
        attr("scatter", cname(c));
    }
    if let Some(c) = a.to_apply {
        attr("to_apply", cname(c));
    }
    if let Some(c) = &a.calls {
        if ins.opcode == Opcode::CustomCall {
            attr("called_computations", clist(c));
        } else if c.len() == 1 {
            attr("calls", cname(c[0]));
        } else {
            attr("calls", clist(c));
        }
    }
    if let Some(t) = &a.custom_call_target {
        attr("custom_call_target", quote(t));
    }
    if let Some(v) = a.api_version {
        attr("api_version", v.name().into());
    }
    if let Some(b) = &a.backend_config {
        attr(
            "backend_config",
            match b {
                BackendConfig::Str(s) => quote(s),
                BackendConfig::Raw(r) => r.clone(),
            },
        );
    }
    if !ins.control_predecessors.is_empty() {
        let names: Vec<String> = ins
            .control_predecessors
            .iter()
            .map(|&p| format!("%{}", comp.instr(p).name))
            .collect();
        attr("control-predecessors", format!("{{{}}}", names.join(", ")));
    }
    for (k, v) in &ins.raw_attrs {
        attr(k, v.clone());
    }
}

/// A C-escaped, double-quoted string.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn format_window(w: &Window) -> String {
    if w.dims.is_empty() {
        return "{}".into();
    }
    let join =
        |f: &dyn Fn(&WindowDim) -> String| w.dims.iter().map(f).collect::<Vec<_>>().join("x");
    let mut parts = vec![format!("size={}", join(&|d| d.size.to_string()))];
    if w.dims.iter().any(|d| d.stride != 1) {
        parts.push(format!("stride={}", join(&|d| d.stride.to_string())));
    }
    if w.dims.iter().any(|d| d.pad_lo != 0 || d.pad_hi != 0) {
        parts.push(format!(
            "pad={}",
            join(&|d| format!("{}_{}", d.pad_lo, d.pad_hi))
        ));
    }
    if w.dims.iter().any(|d| d.base_dilation != 1) {
        parts.push(format!(
            "lhs_dilate={}",
            join(&|d| d.base_dilation.to_string())
        ));
    }
    if w.dims.iter().any(|d| d.window_dilation != 1) {
        parts.push(format!(
            "rhs_dilate={}",
            join(&|d| d.window_dilation.to_string())
        ));
    }
    if w.dims.iter().any(|d| d.reversal) {
        parts.push(format!(
            "rhs_reversal={}",
            join(&|d| (d.reversal as i32).to_string())
        ));
    }
    format!("{{{}}}", parts.join(" "))
}

/// Prints dimension labels such as `b01f_01io->b01f`.
pub fn format_dim_labels(c: &ConvDims) -> String {
    fn labels(a: i64, ac: char, b: i64, bc: char, spatial: &[i64]) -> String {
        let rank = spatial.len() + 2;
        let mut chars = vec!['?'; rank];
        let mut put = |i: i64, ch: char| {
            if let Some(slot) = chars.get_mut(i as usize) {
                *slot = ch;
            }
        };
        put(a, ac);
        put(b, bc);
        for (k, &d) in spatial.iter().enumerate() {
            put(d, char::from_digit(k as u32 % 10, 10).unwrap_or('?'));
        }
        chars.into_iter().collect()
    }
    format!(
        "{}_{}->{}",
        labels(c.input_batch, 'b', c.input_feature, 'f', &c.input_spatial),
        labels(
            c.kernel_input_feature,
            'i',
            c.kernel_output_feature,
            'o',
            &c.kernel_spatial
        ),
        labels(
            c.output_batch,
            'b',
            c.output_feature,
            'f',
            &c.output_spatial
        )
    )
}

/// Prints a literal in HLO constant syntax.
pub fn print_literal(l: &Literal, out: &mut String) {
    match l {
        Literal::Tuple(v) => {
            out.push('(');
            for (i, e) in v.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                print_literal(e, out);
            }
            out.push(')');
        }
        Literal::Token => out.push_str("token"),
        Literal::Array(a) => print_array_literal(a, out),
    }
}

fn print_array_literal(a: &ArrayLiteral, out: &mut String) {
    let dims = &a.shape.dims;
    if dims.is_empty() {
        out.push_str(&a.format_element(0));
        return;
    }
    fn rec(a: &ArrayLiteral, dim: usize, base: &mut usize, out: &mut String) {
        let dims = &a.shape.dims;
        out.push('{');
        let n = dims[dim] as usize;
        for i in 0..n {
            if i > 0 {
                out.push_str(", ");
            }
            if dim + 1 == dims.len() {
                out.push_str(&a.format_element(*base));
                *base += 1;
            } else {
                rec(a, dim + 1, base, out);
            }
        }
        out.push('}');
    }
    let mut base = 0;
    rec(a, 0, &mut base, out);
}
