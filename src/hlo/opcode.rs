//! The HLO op set, declared once. Everything that is a fact about an opcode alone — its
//! text spelling, operand count, family, cost class and properties (transcendental, widened
//! under excess precision, side-effecting) — is a column of the table below, and the rest
//! of the crate reads it from here. Elementwise unary and binary opcodes additionally get a
//! variant of [`UnaryOp`] / [`BinaryOp`], which the evaluator's kernels match exhaustively:
//! adding such an opcode is its table line plus its kernel arm, and forgetting the kernel
//! is a compile error, not a runtime one.

use std::fmt;

/// How many operands an opcode takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arity {
    Fixed(usize),
    /// At least this many.
    AtLeast(usize),
}

/// Broad op family; used by the verifier (shape rules), the evaluator (dispatch) and the
/// cost model (engine assignment).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpFamily {
    /// Elementwise, one operand, result type = operand type (except where noted by the op).
    Unary,
    /// Elementwise, two operands of one type.
    Binary,
    /// Elementwise with three operands (select, clamp).
    Ternary,
    /// Moves or reinterprets data without arithmetic.
    DataMovement,
    Reduction,
    Contraction,
    ControlFlow,
    Collective,
    Random,
    Other,
}

impl OpFamily {
    /// Every family, in declaration order (`ALL[f as usize] == f`).
    pub const ALL: [OpFamily; 10] = [
        OpFamily::Unary,
        OpFamily::Binary,
        OpFamily::Ternary,
        OpFamily::DataMovement,
        OpFamily::Reduction,
        OpFamily::Contraction,
        OpFamily::ControlFlow,
        OpFamily::Collective,
        OpFamily::Random,
        OpFamily::Other,
    ];
}

/// Which kind of Neuron engine work an opcode is, for the device cost model
/// (`device::cost::placement` maps each class to an engine). Kept here, not in the cost
/// model, so a new opcode states its cost where it is declared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CostClass {
    /// Bookkeeping with no engine time: reshapes, tuple plumbing, async `-done` halves, ids.
    Free,
    /// Memory traffic (DMA queues): parameters, copies, slicing, gathers, broadcasts.
    Dma,
    /// Matrix multiplication on the tensor (PE) array.
    Matmul,
    /// The pool (GpSimd) engine: iota, sort, random numbers.
    Pool,
    /// Elementwise and reduction arithmetic on the vector engine.
    Vector,
    /// Collective communication between devices.
    Collective,
    /// Runs called computations; its cost is theirs.
    Calls,
    /// Depends on the instruction (a constant's size, a custom-call's target).
    ByInstruction,
}

/// One property an opcode may have (a column of the opcode table).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpProperty {
    /// Computes a transcendental function (exp, log, tanh, sin, erf, power, atan2, rsqrt,
    /// cbrt, ...): results are approximations whose last bits differ between libraries.
    Transcendental,
    /// XLA:CPU computes a bf16 instance in f32 with a rounding that a `convert` user can
    /// skip, and hlosim's f32 kernel computes the same f32 value (see
    /// `eval::excess_precision`). Exact operations (negate, abs, max, min, select, clamp,
    /// data movement, remainder, rounding functions) do not have it: their f32 result
    /// equals the bf16 one. Neither do reductions and other operations with called
    /// computations (their f32 reducer rounds after every step).
    Widens,
    /// The result may differ between two runs, or the op talks to the outside world; dce
    /// must keep it even when unused.
    SideEffect,
}

/// The set of [`OpProperty`]s of one opcode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpProperties(u8);

impl OpProperties {
    /// No property.
    pub const NONE: OpProperties = OpProperties(0);

    /// This set plus `p` (const, for the table).
    pub const fn with(self, p: OpProperty) -> OpProperties {
        OpProperties(self.0 | 1 << p as u8)
    }

    /// Whether `p` is in the set.
    pub const fn has(self, p: OpProperty) -> bool {
        self.0 & (1 << p as u8) != 0
    }
}

macro_rules! opcodes {
    (
        unary { $( $u:ident => $utext:literal, $ucost:ident, [$($uprop:ident),*]; )* }
        binary { $( $b:ident => $btext:literal, $bcost:ident, [$($bprop:ident),*]; )* }
        other {
            $( $o:ident => $otext:literal, $oarity:expr, $ofamily:ident, $ocost:ident,
               [$($oprop:ident),*]; )*
        }
    ) => {
        /// An XLA opcode.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Opcode { $( $u, )* $( $b, )* $( $o, )* }

        /// An elementwise unary opcode evaluated by the unary kernel (`eval::elementwise`),
        /// which matches it exhaustively.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum UnaryOp { $( $u, )* }

        /// An elementwise binary opcode evaluated by the binary kernel (`eval::elementwise`),
        /// which matches it exhaustively.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum BinaryOp { $( $b, )* }

        impl Opcode {
            /// Every opcode, in table order.
            pub const ALL: &'static [Opcode] = &[ $( Opcode::$u, )* $( Opcode::$b, )* $( Opcode::$o, )* ];

            /// The HLO text spelling (`get-tuple-element`, `custom-call`, ...).
            pub fn name(self) -> &'static str {
                match self {
                    $( Opcode::$u => $utext, )* $( Opcode::$b => $btext, )* $( Opcode::$o => $otext, )*
                }
            }

            /// The operand-count rule.
            pub fn arity(self) -> Arity {
                use Arity::*;
                match self {
                    $( Opcode::$u => Fixed(1), )* $( Opcode::$b => Fixed(2), )* $( Opcode::$o => $oarity, )*
                }
            }

            /// The op family.
            pub fn family(self) -> OpFamily {
                match self {
                    $( Opcode::$u => OpFamily::Unary, )*
                    $( Opcode::$b => OpFamily::Binary, )*
                    $( Opcode::$o => OpFamily::$ofamily, )*
                }
            }

            /// The kind of engine work, for the device cost model.
            pub fn cost_class(self) -> CostClass {
                match self {
                    $( Opcode::$u => CostClass::$ucost, )*
                    $( Opcode::$b => CostClass::$bcost, )*
                    $( Opcode::$o => CostClass::$ocost, )*
                }
            }

            /// The opcode's properties.
            pub const fn properties(self) -> OpProperties {
                match self {
                    $( Opcode::$u => OpProperties::NONE $( .with(OpProperty::$uprop) )*, )*
                    $( Opcode::$b => OpProperties::NONE $( .with(OpProperty::$bprop) )*, )*
                    $( Opcode::$o => OpProperties::NONE $( .with(OpProperty::$oprop) )*, )*
                }
            }

            /// The unary kernel's opcode, if this is one.
            pub fn as_unary(self) -> Option<UnaryOp> {
                match self { $( Opcode::$u => Some(UnaryOp::$u), )* _ => None }
            }

            /// The binary kernel's opcode, if this is one.
            pub fn as_binary(self) -> Option<BinaryOp> {
                match self { $( Opcode::$b => Some(BinaryOp::$b), )* _ => None }
            }

            /// Parses the HLO text spelling.
            pub fn from_name(s: &str) -> Option<Opcode> {
                match s {
                    $( $utext => Some(Opcode::$u), )*
                    $( $btext => Some(Opcode::$b), )*
                    $( $otext => Some(Opcode::$o), )*
                    _ => None,
                }
            }
        }

        impl UnaryOp {
            /// The opcode this kernel opcode stands for.
            pub fn opcode(self) -> Opcode {
                match self { $( UnaryOp::$u => Opcode::$u, )* }
            }
        }

        impl BinaryOp {
            /// The opcode this kernel opcode stands for.
            pub fn opcode(self) -> Opcode {
                match self { $( BinaryOp::$b => Opcode::$b, )* }
            }
        }
    };
}

// Columns. unary/binary rows: variant => spelling, cost class, [properties] (arity and
// family follow from the section). other rows: variant => spelling, arity, family, cost
// class, [properties].
opcodes! {
    unary {
        Abs => "abs", Vector, [];
        Negate => "negate", Vector, [];
        Sign => "sign", Vector, [];
        Floor => "floor", Vector, [];
        Ceil => "ceil", Vector, [];
        RoundNearestAfz => "round-nearest-afz", Vector, [];
        RoundNearestEven => "round-nearest-even", Vector, [];
        Sqrt => "sqrt", Vector, [Widens];
        Rsqrt => "rsqrt", Vector, [Transcendental, Widens];
        Cbrt => "cbrt", Vector, [Transcendental, Widens];
        Exp => "exponential", Vector, [Transcendental, Widens];
        Expm1 => "exponential-minus-one", Vector, [Transcendental, Widens];
        Log => "log", Vector, [Transcendental, Widens];
        Log1p => "log-plus-one", Vector, [Transcendental, Widens];
        Logistic => "logistic", Vector, [Transcendental, Widens];
        Tanh => "tanh", Vector, [Transcendental, Widens];
        Sin => "sine", Vector, [Transcendental, Widens];
        Cos => "cosine", Vector, [Transcendental, Widens];
        Tan => "tan", Vector, [Transcendental, Widens];
        Erf => "erf", Vector, [Transcendental, Widens];
        IsFinite => "is-finite", Vector, [];
        Not => "not", Vector, [];
        Popcnt => "popcnt", Vector, [];
        Clz => "count-leading-zeros", Vector, [];
        Real => "real", Vector, [];
        Imag => "imag", Vector, [];
    }
    binary {
        Add => "add", Vector, [Widens];
        Subtract => "subtract", Vector, [Widens];
        Multiply => "multiply", Vector, [Widens];
        Divide => "divide", Vector, [Widens];
        Remainder => "remainder", Vector, [];
        Power => "power", Vector, [Transcendental, Widens];
        Atan2 => "atan2", Vector, [Transcendental, Widens];
        Maximum => "maximum", Vector, [];
        Minimum => "minimum", Vector, [];
        And => "and", Vector, [];
        Or => "or", Vector, [];
        Xor => "xor", Vector, [];
        ShiftLeft => "shift-left", Vector, [];
        ShiftRightArithmetic => "shift-right-arithmetic", Vector, [];
        ShiftRightLogical => "shift-right-logical", Vector, [];
        Complex => "complex", Vector, [];
    }
    other {
        AddDependency => "add-dependency", Fixed(2), Other, Free, [SideEffect];
        AfterAll => "after-all", AtLeast(0), Other, Free, [SideEffect];
        AllGather => "all-gather", AtLeast(1), Collective, Collective, [];
        AllGatherStart => "all-gather-start", AtLeast(1), Collective, Collective, [SideEffect];
        AllGatherDone => "all-gather-done", Fixed(1), Collective, Free, [];
        AllReduce => "all-reduce", AtLeast(1), Collective, Collective, [];
        AllReduceStart => "all-reduce-start", AtLeast(1), Collective, Collective, [SideEffect];
        AllReduceDone => "all-reduce-done", Fixed(1), Collective, Free, [];
        AllToAll => "all-to-all", AtLeast(1), Collective, Collective, [];
        AsyncStart => "async-start", AtLeast(0), Other, Calls, [];
        AsyncUpdate => "async-update", Fixed(1), Other, Free, [];
        AsyncDone => "async-done", Fixed(1), Other, Free, [];
        BatchNormGrad => "batch-norm-grad", Fixed(5), Other, Vector, [];
        BatchNormInference => "batch-norm-inference", Fixed(5), Other, Vector, [];
        BatchNormTraining => "batch-norm-training", Fixed(3), Other, Vector, [];
        Bitcast => "bitcast", Fixed(1), DataMovement, Free, [];
        BitcastConvert => "bitcast-convert", Fixed(1), DataMovement, Free, [];
        Broadcast => "broadcast", Fixed(1), DataMovement, Dma, [];
        Call => "call", AtLeast(0), ControlFlow, Calls, [];
        Cholesky => "cholesky", Fixed(1), Other, Vector, [];
        Clamp => "clamp", Fixed(3), Ternary, Vector, [];
        CollectiveBroadcast => "collective-broadcast", AtLeast(1), Collective, Collective, [];
        CollectivePermute => "collective-permute", AtLeast(1), Collective, Collective, [];
        CollectivePermuteStart => "collective-permute-start", AtLeast(1), Collective, Collective, [SideEffect];
        CollectivePermuteDone => "collective-permute-done", Fixed(1), Collective, Free, [];
        Compare => "compare", Fixed(2), Binary, Vector, [];
        Concatenate => "concatenate", AtLeast(1), DataMovement, Dma, [];
        Conditional => "conditional", AtLeast(1), ControlFlow, Calls, [];
        Constant => "constant", Fixed(0), Other, ByInstruction, [];
        Convert => "convert", Fixed(1), Unary, Vector, [];
        Convolution => "convolution", Fixed(2), Contraction, Matmul, [Widens];
        Copy => "copy", Fixed(1), DataMovement, Dma, [];
        CopyStart => "copy-start", Fixed(1), DataMovement, Dma, [];
        CopyDone => "copy-done", Fixed(1), DataMovement, Free, [];
        CustomCall => "custom-call", AtLeast(0), Other, ByInstruction, [];
        Domain => "domain", Fixed(1), Other, Free, [];
        Dot => "dot", AtLeast(2), Contraction, Matmul, [Widens];
        DynamicReshape => "dynamic-reshape", AtLeast(1), DataMovement, Free, [];
        DynamicSlice => "dynamic-slice", AtLeast(1), DataMovement, Dma, [];
        DynamicUpdateSlice => "dynamic-update-slice", AtLeast(2), DataMovement, Dma, [];
        Fft => "fft", Fixed(1), Other, Vector, [];
        Fusion => "fusion", AtLeast(0), ControlFlow, Calls, [];
        Gather => "gather", Fixed(2), DataMovement, Dma, [];
        GetDimensionSize => "get-dimension-size", Fixed(1), Other, Free, [];
        GetTupleElement => "get-tuple-element", Fixed(1), DataMovement, Free, [];
        Infeed => "infeed", Fixed(1), Other, Dma, [SideEffect];
        Iota => "iota", Fixed(0), Other, Pool, [];
        Map => "map", AtLeast(1), Other, Vector, [];
        OptimizationBarrier => "opt-barrier", Fixed(1), Other, Free, [];
        Outfeed => "outfeed", Fixed(2), Other, Dma, [SideEffect];
        Pad => "pad", Fixed(2), DataMovement, Dma, [];
        Parameter => "parameter", Fixed(0), Other, Dma, [];
        PartitionId => "partition-id", Fixed(0), Other, Free, [];
        RaggedAllToAll => "ragged-all-to-all", AtLeast(1), Collective, Collective, [];
        RaggedDot => "ragged-dot", Fixed(3), Contraction, Matmul, [];
        Recv => "recv", Fixed(1), Other, Dma, [SideEffect];
        RecvDone => "recv-done", Fixed(1), Other, Free, [SideEffect];
        Reduce => "reduce", AtLeast(2), Reduction, Vector, [];
        ReducePrecision => "reduce-precision", Fixed(1), Unary, Vector, [];
        ReduceScatter => "reduce-scatter", AtLeast(1), Collective, Collective, [];
        ReduceWindow => "reduce-window", AtLeast(2), Reduction, Vector, [];
        ReplicaId => "replica-id", Fixed(0), Other, Free, [];
        Reshape => "reshape", Fixed(1), DataMovement, Free, [];
        Reverse => "reverse", Fixed(1), DataMovement, Dma, [];
        Rng => "rng", Fixed(2), Random, Pool, [SideEffect];
        RngBitGenerator => "rng-bit-generator", Fixed(1), Random, Pool, [];
        RngGetAndUpdateState => "rng-get-and-update-state", Fixed(0), Random, Pool, [SideEffect];
        Scatter => "scatter", AtLeast(3), DataMovement, Dma, [];
        Select => "select", Fixed(3), Ternary, Vector, [];
        SelectAndScatter => "select-and-scatter", Fixed(3), Reduction, Vector, [];
        Send => "send", Fixed(2), Other, Dma, [SideEffect];
        SendDone => "send-done", Fixed(1), Other, Free, [SideEffect];
        SetDimensionSize => "set-dimension-size", Fixed(2), Other, Free, [];
        Slice => "slice", Fixed(1), DataMovement, Dma, [];
        Sort => "sort", AtLeast(1), Other, Pool, [];
        StochasticConvert => "stochastic-convert", Fixed(2), Other, Vector, [];
        TopK => "topk", Fixed(1), Other, Vector, [];
        Transpose => "transpose", Fixed(1), DataMovement, Dma, [];
        TriangularSolve => "triangular-solve", Fixed(2), Other, Vector, [];
        Tuple => "tuple", AtLeast(0), DataMovement, Free, [];
        While => "while", Fixed(1), ControlFlow, Calls, [];
    }
}

impl Opcode {
    /// Whether the op has [`OpProperty::SideEffect`].
    pub fn has_side_effect(self) -> bool {
        self.properties().has(OpProperty::SideEffect)
    }

    /// Whether the op has [`OpProperty::Transcendental`].
    pub fn is_transcendental(self) -> bool {
        self.properties().has(OpProperty::Transcendental)
    }

    /// Whether every output element depends only on the same-index elements of operands.
    pub fn is_elementwise(self) -> bool {
        matches!(
            self.family(),
            OpFamily::Unary | OpFamily::Binary | OpFamily::Ternary
        )
    }
}

impl fmt::Display for UnaryOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.opcode().name())
    }
}

impl fmt::Display for BinaryOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.opcode().name())
    }
}

impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_parses_back_to_its_opcode() {
        for &op in Opcode::ALL {
            assert_eq!(Opcode::from_name(op.name()), Some(op));
        }
        assert_eq!(
            Opcode::from_name("opt-barrier"),
            Some(Opcode::OptimizationBarrier)
        );
        assert_eq!(Opcode::from_name("not-an-op"), None);
    }

    #[test]
    fn kernel_opcodes_are_exactly_the_unary_and_binary_rows() {
        for &op in Opcode::ALL {
            if let Some(u) = op.as_unary() {
                assert_eq!(u.opcode(), op);
                assert_eq!(
                    (op.family(), op.arity()),
                    (OpFamily::Unary, Arity::Fixed(1))
                );
            }
            if let Some(b) = op.as_binary() {
                assert_eq!(b.opcode(), op);
                assert_eq!(
                    (op.family(), op.arity()),
                    (OpFamily::Binary, Arity::Fixed(2))
                );
            }
        }
        // The elementwise ops with kernels of their own.
        for op in [Opcode::Convert, Opcode::ReducePrecision, Opcode::Compare] {
            assert!(op.as_unary().is_none() && op.as_binary().is_none());
            assert!(op.is_elementwise());
        }
    }

    /// The property columns, checked against lists written out by hand from XLA's
    /// semantics (which ops approximate a transcendental function, which have side effects).
    #[test]
    fn property_columns() {
        use Opcode as O;
        let transcendental: Vec<_> = Opcode::ALL
            .iter()
            .filter(|o| o.is_transcendental())
            .copied()
            .collect();
        let mut want = vec![
            O::Exp,
            O::Expm1,
            O::Log,
            O::Log1p,
            O::Logistic,
            O::Tanh,
            O::Sin,
            O::Cos,
            O::Tan,
            O::Erf,
            O::Power,
            O::Atan2,
            O::Cbrt,
            O::Rsqrt,
        ];
        want.sort_by_key(|o| o.name());
        let mut got = transcendental;
        got.sort_by_key(|o| o.name());
        assert_eq!(got, want);
        for op in [O::Add, O::Divide, O::Sqrt, O::Dot, O::Convolution, O::Exp] {
            assert!(op.properties().has(OpProperty::Widens), "{op}");
        }
        for op in [
            O::Negate,
            O::Abs,
            O::Maximum,
            O::Remainder,
            O::Floor,
            O::Reduce,
            O::Select,
        ] {
            assert!(!op.properties().has(OpProperty::Widens), "{op}");
        }
        assert!(O::Rng.has_side_effect() && O::AfterAll.has_side_effect());
        assert!(!O::Add.has_side_effect() && !O::AllReduce.has_side_effect());
        assert_eq!(O::Dot.cost_class(), CostClass::Matmul);
        assert_eq!(O::AllReduceDone.cost_class(), CostClass::Free);
        assert_eq!(O::CustomCall.cost_class(), CostClass::ByInstruction);
    }
}
