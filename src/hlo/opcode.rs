//! The HLO op set, declared once. The text spelling, the operand-count rule and the op
//! family all derive from the table below, so adding an opcode is a one-line change here
//! plus its evaluation kernel.

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

macro_rules! opcodes {
    ($( $variant:ident => $text:literal, $arity:expr, $family:ident; )*) => {
        /// An XLA opcode.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Opcode { $( $variant, )* }

        impl Opcode {
            /// Every opcode, in declaration order.
            pub const ALL: &'static [Opcode] = &[ $( Opcode::$variant, )* ];

            /// The HLO text spelling (`get-tuple-element`, `custom-call`, ...).
            pub fn name(self) -> &'static str {
                match self { $( Opcode::$variant => $text, )* }
            }

            /// The operand-count rule.
            pub fn arity(self) -> Arity {
                use Arity::*;
                match self { $( Opcode::$variant => $arity, )* }
            }

            /// The op family.
            pub fn family(self) -> OpFamily {
                match self { $( Opcode::$variant => OpFamily::$family, )* }
            }

            /// Parses the HLO text spelling.
            pub fn from_name(s: &str) -> Option<Opcode> {
                match s { $( $text => Some(Opcode::$variant), )* _ => None }
            }
        }
    };
}

opcodes! {
    Abs => "abs", Fixed(1), Unary;
    Add => "add", Fixed(2), Binary;
    AddDependency => "add-dependency", Fixed(2), Other;
    AfterAll => "after-all", AtLeast(0), Other;
    AllGather => "all-gather", AtLeast(1), Collective;
    AllGatherStart => "all-gather-start", AtLeast(1), Collective;
    AllGatherDone => "all-gather-done", Fixed(1), Collective;
    AllReduce => "all-reduce", AtLeast(1), Collective;
    AllReduceStart => "all-reduce-start", AtLeast(1), Collective;
    AllReduceDone => "all-reduce-done", Fixed(1), Collective;
    AllToAll => "all-to-all", AtLeast(1), Collective;
    AsyncStart => "async-start", AtLeast(0), Other;
    AsyncUpdate => "async-update", Fixed(1), Other;
    AsyncDone => "async-done", Fixed(1), Other;
    Atan2 => "atan2", Fixed(2), Binary;
    BatchNormGrad => "batch-norm-grad", Fixed(5), Other;
    BatchNormInference => "batch-norm-inference", Fixed(5), Other;
    BatchNormTraining => "batch-norm-training", Fixed(3), Other;
    Bitcast => "bitcast", Fixed(1), DataMovement;
    BitcastConvert => "bitcast-convert", Fixed(1), DataMovement;
    Broadcast => "broadcast", Fixed(1), DataMovement;
    Call => "call", AtLeast(0), ControlFlow;
    Cbrt => "cbrt", Fixed(1), Unary;
    Ceil => "ceil", Fixed(1), Unary;
    Cholesky => "cholesky", Fixed(1), Other;
    Clamp => "clamp", Fixed(3), Ternary;
    CollectiveBroadcast => "collective-broadcast", AtLeast(1), Collective;
    CollectivePermute => "collective-permute", AtLeast(1), Collective;
    CollectivePermuteStart => "collective-permute-start", AtLeast(1), Collective;
    CollectivePermuteDone => "collective-permute-done", Fixed(1), Collective;
    Compare => "compare", Fixed(2), Binary;
    Complex => "complex", Fixed(2), Binary;
    Concatenate => "concatenate", AtLeast(1), DataMovement;
    Conditional => "conditional", AtLeast(1), ControlFlow;
    Constant => "constant", Fixed(0), Other;
    Convert => "convert", Fixed(1), Unary;
    Convolution => "convolution", Fixed(2), Contraction;
    Copy => "copy", Fixed(1), DataMovement;
    CopyStart => "copy-start", Fixed(1), DataMovement;
    CopyDone => "copy-done", Fixed(1), DataMovement;
    Cos => "cosine", Fixed(1), Unary;
    Clz => "count-leading-zeros", Fixed(1), Unary;
    CustomCall => "custom-call", AtLeast(0), Other;
    Divide => "divide", Fixed(2), Binary;
    Domain => "domain", Fixed(1), Other;
    Dot => "dot", AtLeast(2), Contraction;
    DynamicReshape => "dynamic-reshape", AtLeast(1), DataMovement;
    DynamicSlice => "dynamic-slice", AtLeast(1), DataMovement;
    DynamicUpdateSlice => "dynamic-update-slice", AtLeast(2), DataMovement;
    Erf => "erf", Fixed(1), Unary;
    Exp => "exponential", Fixed(1), Unary;
    Expm1 => "exponential-minus-one", Fixed(1), Unary;
    Fft => "fft", Fixed(1), Other;
    Floor => "floor", Fixed(1), Unary;
    Fusion => "fusion", AtLeast(0), ControlFlow;
    Gather => "gather", Fixed(2), DataMovement;
    GetDimensionSize => "get-dimension-size", Fixed(1), Other;
    GetTupleElement => "get-tuple-element", Fixed(1), DataMovement;
    Imag => "imag", Fixed(1), Unary;
    Infeed => "infeed", Fixed(1), Other;
    Iota => "iota", Fixed(0), Other;
    IsFinite => "is-finite", Fixed(1), Unary;
    Log => "log", Fixed(1), Unary;
    Map => "map", AtLeast(1), Other;
    Log1p => "log-plus-one", Fixed(1), Unary;
    Logistic => "logistic", Fixed(1), Unary;
    And => "and", Fixed(2), Binary;
    Not => "not", Fixed(1), Unary;
    OptimizationBarrier => "opt-barrier", Fixed(1), Other;
    Or => "or", Fixed(2), Binary;
    Outfeed => "outfeed", Fixed(2), Other;
    Pad => "pad", Fixed(2), DataMovement;
    Parameter => "parameter", Fixed(0), Other;
    PartitionId => "partition-id", Fixed(0), Other;
    Popcnt => "popcnt", Fixed(1), Unary;
    Power => "power", Fixed(2), Binary;
    RaggedAllToAll => "ragged-all-to-all", AtLeast(1), Collective;
    Real => "real", Fixed(1), Unary;
    Recv => "recv", Fixed(1), Other;
    RecvDone => "recv-done", Fixed(1), Other;
    Reduce => "reduce", AtLeast(2), Reduction;
    ReducePrecision => "reduce-precision", Fixed(1), Unary;
    ReduceScatter => "reduce-scatter", AtLeast(1), Collective;
    ReduceWindow => "reduce-window", AtLeast(2), Reduction;
    Remainder => "remainder", Fixed(2), Binary;
    ReplicaId => "replica-id", Fixed(0), Other;
    Reshape => "reshape", Fixed(1), DataMovement;
    Reverse => "reverse", Fixed(1), DataMovement;
    Rng => "rng", Fixed(2), Random;
    RngBitGenerator => "rng-bit-generator", Fixed(1), Random;
    RngGetAndUpdateState => "rng-get-and-update-state", Fixed(0), Random;
    RoundNearestAfz => "round-nearest-afz", Fixed(1), Unary;
    RoundNearestEven => "round-nearest-even", Fixed(1), Unary;
    Rsqrt => "rsqrt", Fixed(1), Unary;
    Scatter => "scatter", AtLeast(3), DataMovement;
    Select => "select", Fixed(3), Ternary;
    SelectAndScatter => "select-and-scatter", Fixed(3), Reduction;
    Send => "send", Fixed(2), Other;
    SendDone => "send-done", Fixed(1), Other;
    SetDimensionSize => "set-dimension-size", Fixed(2), Other;
    ShiftLeft => "shift-left", Fixed(2), Binary;
    ShiftRightArithmetic => "shift-right-arithmetic", Fixed(2), Binary;
    ShiftRightLogical => "shift-right-logical", Fixed(2), Binary;
    Sign => "sign", Fixed(1), Unary;
    Sin => "sine", Fixed(1), Unary;
    Slice => "slice", Fixed(1), DataMovement;
    Sort => "sort", AtLeast(1), Other;
    Sqrt => "sqrt", Fixed(1), Unary;
    StochasticConvert => "stochastic-convert", Fixed(2), Other;
    Subtract => "subtract", Fixed(2), Binary;
    Tan => "tan", Fixed(1), Unary;
    Tanh => "tanh", Fixed(1), Unary;
    TopK => "topk", Fixed(1), Other;
    Transpose => "transpose", Fixed(1), DataMovement;
    TriangularSolve => "triangular-solve", Fixed(2), Other;
    Tuple => "tuple", AtLeast(0), DataMovement;
    While => "while", Fixed(1), ControlFlow;
    Maximum => "maximum", Fixed(2), Binary;
    Minimum => "minimum", Fixed(2), Binary;
    Multiply => "multiply", Fixed(2), Binary;
    Negate => "negate", Fixed(1), Unary;
    Xor => "xor", Fixed(2), Binary;
}

impl Opcode {
    /// Ops whose result may differ between two runs or that talk to the outside world; dce
    /// must keep them even when unused.
    pub fn has_side_effect(self) -> bool {
        use Opcode::*;
        matches!(
            self,
            Send | SendDone
                | Recv
                | RecvDone
                | Infeed
                | Outfeed
                | Rng
                | RngGetAndUpdateState
                | AllReduceStart
                | AllGatherStart
                | CollectivePermuteStart
                | AfterAll
                | AddDependency
        )
    }

    /// Whether every output element depends only on the same-index elements of operands.
    pub fn is_elementwise(self) -> bool {
        matches!(
            self.family(),
            OpFamily::Unary | OpFamily::Binary | OpFamily::Ternary
        )
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
}
