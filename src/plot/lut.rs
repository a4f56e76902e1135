//! `hlosim lut sweep --plot ERR.svg`: where along x a table's error lives. Two panels share
//! a signed log2 x axis (one unit per octave, [`SymLog2`]): the largest error in ULPs of
//! each bin's scored inputs, and the largest absolute error; one line per dtype. Octave
//! starts are grey verticals, bucket starts a rug of short ticks at the bottom of each panel,
//! the corner thresholds red verticals.

use super::err;
use crate::device::pwp::profile::{Breakpoints, ErrorProfile, SymLog2};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

/// Size of the picture in pixels.
const SIZE: (u32, u32) = (1100, 800);

/// The colour of each dtype's line, in the order the profiles come.
const COLOURS: [RGBColor; 3] = [
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
];

/// The label of axis position `p`: ±2^k at octave starts, 0 in the middle.
fn x_label(axis: &SymLog2, p: f64) -> String {
    if p.abs() < 0.5 {
        return "0".into();
    }
    let k = p.abs().round() as i32 - 1 + axis.lo;
    format!("{}2^{k}", if p < 0.0 { "-" } else { "" })
}

/// Renders the profiles (one per dtype, all of one table) as an SVG document.
pub fn error_svg(
    function: &str,
    profiles: &[ErrorProfile],
    bp: &Breakpoints,
) -> Result<String, String> {
    let Some(first) = profiles.first() else {
        return Err("nothing to plot".into());
    };
    let axis = first.axis;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let root = root
            .titled(
                &format!("{function}: table error against x"),
                ("sans-serif", 22),
            )
            .map_err(err)?;
        let (top, bottom) = root.split_vertically(SIZE.1 / 2 - 20);
        // ULPs: 0 is drawn at the bottom of the log axis.
        let max_ulp = profiles.iter().map(|p| p.max_ulp()).max().unwrap_or(0);
        let ulp_top = (max_ulp.max(1) as f64) * 2.0;
        panel(
            &top,
            &axis,
            profiles,
            bp,
            (ZERO_ULP, ulp_top),
            "largest error (ULP)",
            &|b| b.max_ulp.map(|u| (u as f64).max(ZERO_ULP)),
        )?;
        let finite = |v: f64| v.is_finite() && v > 0.0;
        let smallest = profiles
            .iter()
            .flat_map(|p| p.bins.iter().map(|b| b.max_abs))
            .filter(|&v| finite(v))
            .fold(f64::INFINITY, f64::min);
        let largest = profiles
            .iter()
            .flat_map(|p| p.bins.iter().map(|b| b.max_abs))
            .filter(|&v| finite(v))
            .fold(0.0, f64::max);
        let low = if smallest.is_finite() {
            smallest / 2.0
        } else {
            1e-30
        };
        let high = if largest > 0.0 { largest * 2.0 } else { 1.0 };
        panel(
            &bottom,
            &axis,
            profiles,
            bp,
            (low, high.max(low * 4.0)),
            "largest absolute error",
            &|b| (b.points > 0).then(|| b.max_abs.clamp(low, high)),
        )?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// Where a zero ULP error is drawn on the log axis.
const ZERO_ULP: f64 = 0.5;

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

/// One panel: the breakpoints, then a line per profile of `value(bin)` (`None`: a gap).
fn panel(
    area: &Area<'_>,
    axis: &SymLog2,
    profiles: &[ErrorProfile],
    bp: &Breakpoints,
    (ylo, yhi): (f64, f64),
    y_desc: &str,
    value: &dyn Fn(&crate::device::pwp::profile::Bin) -> Option<f64>,
) -> Result<(), String> {
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(80)
        .build_cartesian_2d::<RangedCoordf64, _>(
            (-axis.max..axis.max).into(),
            (ylo..yhi).log_scale(),
        )
        .map_err(err)?;
    let zero_ulp = ylo == ZERO_ULP;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(24)
        .x_desc("x (one octave per unit; |x| below the lowest octave linear around 0)")
        .y_desc(y_desc)
        .x_label_formatter(&|p| x_label(axis, *p))
        .y_label_formatter(&|v| match zero_ulp {
            true if *v <= ZERO_ULP => "0".into(),
            // ULPs are whole numbers; absolute errors span many decades.
            true => format!("{}", v.round()),
            false => format!("{v:.1e}"),
        })
        .draw()
        .map_err(err)?;
    let grey = RGBColor(200, 200, 200);
    chart
        .draw_series(bp.octaves.iter().map(|&x| {
            let p = axis.position(x);
            PathElement::new(vec![(p, ylo), (p, yhi)], grey)
        }))
        .map_err(err)?;
    // The rug: a short tick per bucket start, a tenth of the panel's decades high.
    let tick = ylo * (yhi / ylo).powf(0.04);
    chart
        .draw_series(bp.buckets.iter().map(|&x| {
            let p = axis.position(x);
            PathElement::new(vec![(p, ylo), (p, tick)], RGBColor(120, 120, 120))
        }))
        .map_err(err)?;
    chart
        .draw_series(bp.corners.iter().map(|&x| {
            let p = axis.position(x);
            PathElement::new(vec![(p, ylo), (p, yhi)], RED.mix(0.5))
        }))
        .map_err(err)?;
    for (i, prof) in profiles.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let mut segments: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
        for (j, b) in prof.bins.iter().enumerate() {
            match value(b) {
                Some(v) => {
                    if let Some(s) = segments.last_mut() {
                        s.push((prof.centre(j), v));
                    }
                }
                None if segments.last().is_some_and(|s| !s.is_empty()) => segments.push(Vec::new()),
                None => {}
            }
        }
        let mut labelled = false;
        for s in segments.into_iter().filter(|s| !s.is_empty()) {
            let series = chart
                .draw_series(LineSeries::new(s, colour.stroke_width(1)))
                .map_err(err)?;
            if !labelled {
                series
                    .label(prof.dtype.name())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour));
                labelled = true;
            }
        }
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(err)?;
    Ok(())
}
