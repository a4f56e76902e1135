//! Pictures: SVG plots (through `plotters`' SVG backend, which writes text as SVG `<text>`
//! and needs no font or system library) and the self-contained HTML diff report.
//!
//! - [`lut`]: a table's error against x (`hlosim lut sweep --plot`).
//! - [`html`]: `hlosim diff --html`.

pub mod html;
pub mod lut;

/// A plotting error as text (plotters' errors are generic over the backend).
fn err(e: impl std::fmt::Display) -> String {
    format!("cannot draw the plot: {e}")
}
