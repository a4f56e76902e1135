//! The HLO IR and its text form: shapes, literals, instructions, computations, modules,
//! the parser, the printer and the verifier. Depends on nothing else in the crate.

pub mod attribute_names;
pub mod computation;
pub mod instruction;
pub mod lexer;
pub mod literal;
pub mod minifloat;
pub mod module;
pub mod opcode;
pub mod parser;
pub mod printer;
pub mod shape;
pub mod shape_inference;
pub mod verifier;

pub use computation::Computation;
pub use instruction::*;
pub use lexer::ParseError;
pub use literal::{ArrayData, ArrayLiteral, Literal};
pub use module::{Module, NameIndex, NameUniquer};
pub use opcode::{Arity, BinaryOp, CostClass, OpFamily, OpProperties, OpProperty, Opcode, UnaryOp};
pub use parser::{parse_module, parse_shape};
pub use printer::print_module;
pub use shape::{ArrayShape, ElementType, Layout, Shape, TypeClass};
pub use verifier::{verify_module, VerifyError, VerifyWarning};
