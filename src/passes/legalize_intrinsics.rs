//! `legalize-intrinsics` (hlo-opt order 5), exactly as `shared/ENGINE.md` §1:
//!
//! - only the entry computation, visited in post order; nested computations are untouched;
//! - collect first, rewrite after: the walk only records matches;
//! - `AwsNeuronTransferWithStaticRing` is replaced by its operand 0 (chains resolve to the
//!   first non-transfer value);
//! - the six activations (`AwsNeuronErf`, `AwsNeuronGelu`, `AwsNeuronGeluBackward`,
//!   `AwsNeuronGeluApprxTanh`, `AwsNeuronSilu`, `AwsNeuronSiluBackward`) become a new
//!   custom-call `<target><suffix>` with the suffix from the *result* element type (F32
//!   `_f32`, F16 `_f16`, BF16 `_bf16`, any other type — including a tuple result — none),
//!   operands {operand 0, new scalar S32 constant n} where n is the product of the result
//!   dimensions as a wrapping 32-bit signed multiply (1 for a scalar or a tuple), the same
//!   result shape, `api_version=API_VERSION_ORIGINAL` and an empty backend config. Decision:
//!   "empty" is stored as no backend config at all, which prints no `backend_config=`
//!   attribute — what XLA's printer does for an empty config, and what its parser accepts;
//! - every other custom-call is left exactly as it is;
//! - returns changed iff anything was rewritten.
//!
//! Replacement follows XLA's `ReplaceInstruction` (see [`super::rewrite`]): the new
//! custom-call inherits the activation's metadata, frontend attributes and sharding, and a
//! dropped second operand that nothing else uses is removed with the old instruction. The
//! new instructions get fresh names `constant.N` / `custom-call.N` (opcode-based, as XLA
//! names new instructions), allocated in post order, constant first.
//!
//! Provenance: the new custom-call and its constant both map to the replaced activation.

use super::mutants::{Injected, Mutation};
use super::pass::{Pass, PassError};
use super::provenance::Provenance;
use super::rewrite::{apply_replacements, post_order, SideEffects};
use crate::hlo::*;
use crate::neuron;

/// The element count operand n for a result shape: the product of its dimensions as a
/// wrapping 32-bit signed multiply (1 for a scalar; 1 for a tuple or token, which have no
/// dimensions).
pub fn element_count_i32(shape: &Shape) -> i32 {
    shape
        .dims()
        .iter()
        .fold(1i32, |acc, &d| acc.wrapping_mul(d as i32))
}

/// The `legalize-intrinsics` pass. Construct it with `Default`; the broken variants of the
/// differential tester's tests exist only with the `mutants` feature.
#[derive(Clone, Copy, Debug, Default)]
pub struct LegalizeIntrinsics {
    pub(crate) bug: Injected,
}

/// The pass's hlo-opt name.
pub const NAME: &str = "legalize-intrinsics";

enum Match {
    Bypass,
    Activation { target: String },
}

impl LegalizeIntrinsics {
    fn classify(&self, ins: &Instruction) -> Option<Match> {
        let t = ins.custom_call_target()?;
        if t == neuron::TRANSFER_WITH_STATIC_RING {
            return Some(Match::Bypass);
        }
        let bug = self.bug;
        let base = if neuron::activation(t).is_some()
            || (bug.is(Mutation::SoftmaxAsActivation) && t == neuron::SOFTMAX)
        {
            if bug.is(Mutation::GeluBackwardAsGelu) && t == "AwsNeuronGeluBackward" {
                "AwsNeuronGelu"
            } else {
                t
            }
        } else {
            return None;
        };
        let ty = ins.shape.element_type();
        let suffix = match ty {
            Some(ElementType::F16) if bug.is(Mutation::WrongSuffix) => "_bf16",
            Some(ElementType::BF16) if bug.is(Mutation::WrongSuffix) => "_f16",
            // A tuple result, or a type with no device kernel: the bare name.
            _ => ty.and_then(neuron::dtype_suffix).unwrap_or(""),
        };
        Some(Match::Activation {
            target: format!("{base}{suffix}"),
        })
    }

    fn count(&self, shape: &Shape) -> i32 {
        if self.bug.is(Mutation::CountOffByOne) {
            element_count_i32(shape).wrapping_add(1)
        } else if self.bug.is(Mutation::CountFirstDimOnly) {
            shape.dims().first().map_or(1, |&d| d as i32)
        } else {
            element_count_i32(shape)
        }
    }
}

impl Pass for LegalizeIntrinsics {
    fn name(&self) -> &'static str {
        NAME
    }

    fn run(&self, module: &mut Module, prov: &mut Provenance) -> Result<bool, PassError> {
        let side = SideEffects::compute(module);
        let entry = module.entry;
        let comp = module.comp(entry);
        // Walk: collect only.
        let mut found: Vec<(InstrId, Match)> = Vec::new();
        let mut skip_next = false;
        for id in post_order(comp, NAME)? {
            if skip_next {
                skip_next = false;
                continue;
            }
            let ins = comp.instr(id);
            if let Some(m) = self.classify(ins) {
                if ins.operands.is_empty() {
                    return Err(PassError::Malformed {
                        pass: NAME,
                        computation: comp.name.clone(),
                        instruction: ins.name.clone(),
                        message: format!(
                            "custom-call '{}' has no operand 0 to legalize",
                            ins.attrs.custom_call_target.as_deref().unwrap_or("")
                        ),
                    });
                }
                found.push((id, m));
                skip_next = self.bug.is(Mutation::RewriteDuringWalk);
            }
        }
        if found.is_empty() {
            return Ok(false);
        }
        // Rewrite.
        let mut uniq = module.name_uniquer();
        let comp_name = module.comp(entry).name.clone();
        let comp = module.comp_mut(entry);
        let mut replacements = Vec::with_capacity(found.len());
        for (id, m) in found {
            let old = comp.instr(id);
            match m {
                Match::Bypass => replacements.push((id, old.operands[0])),
                Match::Activation { target } => {
                    let n = self.count(&old.shape);
                    let shape = old.shape.clone();
                    let old_name = old.name.clone();
                    let mut operands = vec![old.operands[0]];
                    if self.bug.is(Mutation::KeepSecondOperand) {
                        operands.extend(old.operands.iter().skip(1));
                    }
                    let mut constant = Instruction::new(
                        uniq.fresh("constant"),
                        Opcode::Constant,
                        Shape::scalar(ElementType::S32),
                        Vec::new(),
                    );
                    constant.attrs.literal = Some(Literal::Array(ArrayLiteral {
                        shape: ArrayShape::new(ElementType::S32, Vec::new()),
                        data: ArrayData::S32(vec![n]),
                    }));
                    prov.derive(&comp_name, &constant.name, &comp_name, &old_name);
                    operands.push(comp.add(constant));
                    let mut cc = Instruction::new(
                        uniq.fresh("custom-call"),
                        Opcode::CustomCall,
                        shape,
                        operands,
                    );
                    cc.attrs.custom_call_target = Some(target);
                    cc.attrs.api_version = Some(ApiVersion::Original);
                    prov.derive(&comp_name, &cc.name, &comp_name, &old_name);
                    let new = comp.add(cc);
                    replacements.push((id, new));
                }
            }
        }
        apply_replacements(comp, &replacements, &side, NAME)?;
        Ok(true)
    }
}
