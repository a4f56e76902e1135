//! `--stats` on `run` and `diff`: the report's parts, its memory figures against values
//! derived by hand from the module's liveness, and the process's peak resident memory of
//! an elementwise chain against its inputs plus output (the figure the speed issue bounds at
//! 1.3x for the 16M-element chain; checked here on a 4M-element one).

use crate::common::cli::{hlosim, s, scratch_dir, stderr};
use hlosim::hlo::{ArrayData, ArrayLiteral, ArrayShape, ElementType};
use hlosim::io::npz::write_npz;
use std::path::Path;

/// The chain of `models/hlo/bench_elementwise_16m.hlo` (add, multiply, exponential, compare,
/// select) on `n` x `n` f32.
fn chain(n: usize) -> String {
    let t = format!("f32[{n},{n}]");
    format!(
        "HloModule chain\n\nENTRY main {{\n  x = {t} parameter(0)\n  y = {t} parameter(1)\n  \
         a = {t} add(x, y)\n  m = {t} multiply(a, x)\n  e = {t} exponential(m)\n  \
         c = pred[{n},{n}] compare(e, y), direction=GT\n  ROOT s = {t} select(c, e, y)\n}}\n"
    )
}

/// Two n x n f32 arguments with distinct values in [-1, 1).
fn write_chain_args(path: &Path, n: usize) {
    let arg = |k: usize| ArrayLiteral {
        shape: ArrayShape::new(ElementType::F32, vec![n as i64, n as i64]),
        data: ArrayData::F32(
            (0..n * n)
                .map(|i| ((i * (2 * k + 1)) % 2001) as f32 / 1000.0 - 1.0)
                .collect(),
        ),
    };
    let (a0, a1) = (arg(0), arg(1));
    write_npz(path, &[("arg0".into(), &a0), ("arg1".into(), &a1)]).unwrap();
}

/// `hlosim run D/m.hlo --args D/a.npz --stats EXTRA...`, which must succeed; its stderr.
fn run_with_stats(d: &Path, extra: &[&str]) -> String {
    let (m, a) = (d.join("m.hlo"), d.join("a.npz"));
    let mut args = vec!["run", s(&m), "--args", s(&a), "--stats"];
    args.extend_from_slice(extra);
    let o = hlosim(&args);
    let e = stderr(&o);
    assert!(o.status.success(), "{e}");
    e
}

/// The exact byte count a stats line gives in parentheses: `NAME ... (N bytes...`.
fn bytes_on(report: &str, name: &str) -> u64 {
    let line = report
        .lines()
        .find(|l| l.trim_start().starts_with(name))
        .unwrap_or_else(|| panic!("no '{name}' line in:\n{report}"));
    let (_, rest) = line.split_once('(').unwrap();
    rest.split(' ').next().unwrap().parse().unwrap()
}

/// `peak resident memory ... (P bytes; ... (S bytes) when the command started)`: (P, S).
fn rss_on(report: &str) -> (u64, u64) {
    let line = report
        .lines()
        .find(|l| l.trim_start().starts_with("peak resident memory"))
        .unwrap_or_else(|| panic!("no resident memory line in:\n{report}"));
    let nums: Vec<u64> = line
        .split(['(', ' '])
        .filter_map(|w| w.parse().ok())
        .collect();
    (nums[nums.len() - 2], nums[nums.len() - 1])
}

#[test]
fn run_stats_report_time_fused_groups_and_liveness_figures() {
    let n = 256;
    let d = scratch_dir("stats", "liveness", &chain(n));
    write_chain_args(&d.join("a.npz"), n);
    let mb = (n * n * 4) as u64;
    // Fused: the arguments are the only buffers (2 arrays): both die in the group, so its
    // output is written into the first one's buffer.
    let e = run_with_stats(&d, &[]);
    for part in [
        "stats: reference run",
        "fused elementwise groups",
        "0 one by one (0 of them into an operand's buffer), 5 in 1 fused group(s) (1 group \
         output(s) into an input's buffer)",
        "stats: process",
        "wall time",
    ] {
        assert!(e.contains(part), "missing '{part}' in:\n{e}");
    }
    assert_eq!(bytes_on(&e, "peak bytes live"), 2 * mb, "{e}");
    assert_eq!(bytes_on(&e, "bytes allocated"), 2 * mb, "{e}");
    // Unfused, each result gets a buffer and is released after its last use; the
    // arguments x, y are held for the whole run. Live while each result is computed:
    // a: x y a; m: x y a m; e: x y m e; c: x y e c; s: x y e c s. The peak is at s: 4 f32
    // arrays and the pred c (a quarter of one). Allocated: x, y, a, m, e, s and c.
    let e = run_with_stats(&d, &["--no-fusion"]);
    assert!(
        e.contains(
            "5 one by one (0 of them into an operand's buffer), 0 in 0 fused group(s) (0 group \
             output(s) into an input's buffer)"
        ),
        "{e}"
    );
    for family in ["unary elementwise", "binary elementwise", "select, clamp"] {
        assert!(e.contains(family), "missing '{family}' in:\n{e}");
    }
    assert_eq!(bytes_on(&e, "peak bytes live"), 4 * mb + mb / 4, "{e}");
    assert_eq!(bytes_on(&e, "bytes allocated"), 6 * mb + mb / 4, "{e}");
}

#[test]
fn peak_resident_memory_of_a_fused_chain_stays_near_inputs_plus_output() {
    // 2048 x 2048 f32: 16 MiB per array, 48 MiB of inputs and output. The bound of the
    // 16M-element chain (1.3x) holds for the memory the run added to the process.
    let n = 2048;
    let d = scratch_dir("stats", "rss", &chain(n));
    write_chain_args(&d.join("a.npz"), n);
    let out = d.join("o.npz");
    let e = run_with_stats(&d, &["-o", s(&out)]);
    let io_bytes = 3 * (n * n * 4) as u64;
    let (peak, start) = rss_on(&e);
    let grown = peak - start;
    assert!(
        grown as f64 <= 1.3 * io_bytes as f64,
        "the run grew resident memory by {grown} bytes, more than 1.3 x {io_bytes}:\n{e}"
    );
    // The output is written into an argument's buffer: two arrays live at the peak.
    assert_eq!(bytes_on(&e, "peak bytes live"), io_bytes / 3 * 2, "{e}");
}

#[test]
fn diff_stats_report_both_runs() {
    let m = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/hlo/llama_mlp_silu.hlo");
    let o = hlosim(&["diff", s(&m), "--stats"]);
    let e = stderr(&o);
    assert!(o.status.code().is_some_and(|c| c <= 1), "{e}");
    let reference = e.find("stats: reference run").expect("reference section");
    let device = e.find("stats: device run").expect("device section");
    let process = e.find("stats: process").expect("process section");
    assert!(reference < device && device < process, "{e}");
    // Both runs evaluate the module's instructions one by one (the differ observes every
    // value), and each holds at least its arguments.
    for section in [&e[reference..device], &e[device..process]] {
        assert!(!section.contains(" 0 one by one"), "{section}");
        assert!(bytes_on(section, "peak bytes live") > 0, "{section}");
    }
}

#[test]
fn results_take_over_dying_operands_and_the_budget_sees_it() {
    use hlosim::eval::Value;
    // 1000 elements: below the fusion threshold, so every instruction runs on its own.
    let n = 1000usize;
    let m = hlosim::hlo::parse_module(&chain_1d(n)).unwrap();
    let arg = |k: usize| {
        Value::array(ArrayLiteral {
            shape: ArrayShape::new(ElementType::F32, vec![n as i64]),
            data: ArrayData::F32(
                (0..n)
                    .map(|i| ((i * (2 * k + 1)) % 17) as f32 / 8.0 - 1.0)
                    .collect(),
            ),
        })
    };
    let run = |in_place: bool| {
        let (out, stats, peak, reserved) = run_counted(&m, in_place, vec![arg(0), arg(1)]);
        (out.as_array().unwrap().clone(), stats, peak, reserved)
    };
    let bytes = (n * 4) as u64;
    let (old, old_stats, old_peak, old_reserved) = run(false);
    let (new, stats, peak, reserved) = run(true);
    assert!(old.data.bits_eq(&new.data));
    assert_eq!((old_stats.in_place, old_stats.fused_groups), (0, 0));
    // x and y live throughout. m takes over a (its last use), e takes over m, and s takes
    // over e (on_true, its last use): only a and the pred c get buffers of their own.
    assert_eq!(stats.in_place, 3, "{stats:?}");
    assert_eq!(reserved, 3 * bytes + bytes / 4);
    assert_eq!(peak, 3 * bytes + bytes / 4);
    // The old path: x y a m e s and c allocated; the peak x y e c s (see above).
    assert_eq!(old_reserved, 6 * bytes + bytes / 4);
    assert_eq!(old_peak, 4 * bytes + bytes / 4);
}

#[test]
fn integer_clamp_convert_and_complex_results_take_over_dying_operands() {
    use hlosim::eval::Value;
    use num_complex::Complex;
    // Below the fusion threshold: every instruction runs on its own.
    let n = 300usize;
    let text = format!(
        "HloModule widths\n\nENTRY main {{\n  x = s32[{n}] parameter(0)\n  \
         y = s32[{n}] parameter(1)\n  p = f32[{n}] parameter(2)\n  \
         lo = s32[] constant(-5)\n  hi = s32[] constant(40)\n  \
         a = s32[{n}] multiply(x, y)\n  b = s32[{n}] subtract(a, x)\n  \
         c = s32[{n}] clamp(lo, b, hi)\n  f = f32[{n}] convert(c)\n  \
         g = u32[{n}] convert(f)\n  one = u32[] constant(1)\n  \
         ones = u32[{n}] broadcast(one), dimensions={{}}\n  \
         sh = u32[{n}] shift-left(g, ones)\n  z = c64[{n}] complex(p, p)\n  \
         k = c64[] constant((0.5, -1))\n  ks = c64[{n}] broadcast(k), dimensions={{}}\n  \
         w = c64[{n}] multiply(z, ks)\n  r = f32[{n}] real(w)\n  \
         ROOT t = (u32[{n}], f32[{n}]) tuple(sh, r)\n}}\n"
    );
    let m = hlosim::hlo::parse_module(&text).unwrap();
    let xs: Vec<i32> = (0..n as i32).map(|i| (i * 7) % 23 - 11).collect();
    let ys: Vec<i32> = (0..n as i32).map(|i| (i * 5) % 13 - 6).collect();
    let ps: Vec<f32> = (0..n).map(|i| i as f32 * 0.25 - 3.0).collect();
    let arr = |ty: ElementType, data: ArrayData| {
        Value::array(ArrayLiteral {
            shape: ArrayShape::new(ty, vec![n as i64]),
            data,
        })
    };
    let run = |in_place: bool| {
        let args = vec![
            arr(ElementType::S32, ArrayData::S32(xs.clone())),
            arr(ElementType::S32, ArrayData::S32(ys.clone())),
            arr(ElementType::F32, ArrayData::F32(ps.clone())),
        ];
        let (out, stats, _, _) = run_counted(&m, in_place, args);
        let Value::Tuple(parts) = out else {
            panic!("expected a tuple, got {out:?}")
        };
        let data: Vec<ArrayData> = parts
            .iter()
            .map(|v| v.as_array().unwrap().data.clone())
            .collect();
        (data, stats.in_place)
    };
    // Hand-derived: sh = u32(f32(clamp(x·y − x, −5, 40))) << 1 (s32 → f32 → u32 exact for
    // these magnitudes); r = re((p + p·i)(0.5 − i)) = 0.5p + p, exact for quarters.
    let want_sh: Vec<u32> = xs
        .iter()
        .zip(&ys)
        .map(|(&x, &y)| ((x * y - x).clamp(-5, 40).max(0) as u32) << 1)
        .collect();
    let want_r: Vec<f32> = ps
        .iter()
        .map(|&p| (Complex::new(p as f64, p as f64) * Complex::new(0.5, -1.0)).re as f32)
        .collect();
    let (old, old_in_place) = run(false);
    let (new, in_place) = run(true);
    assert_eq!(old_in_place, 0);
    for data in [&old, &new] {
        assert_eq!(data[0], ArrayData::U32(want_sh.clone()));
        assert_eq!(data[1], ArrayData::F32(want_r.clone()));
    }
    // a takes over y (its last use; x is read again by b), b over a (integer binary), c over
    // b (clamp), f over c (s32 → f32, equal width), g over f (f32 → u32), sh over g, w over
    // z (complex binary). New buffers: ones, z and ks (wider than their operands), r
    // (narrower than w).
    assert_eq!(in_place, 7);
}

/// Runs `m` on `args` with buffer reuse on or off, counting: the result, the run's
/// statistics, and its memory budget's peak and total reservations.
fn run_counted(
    m: &hlosim::hlo::Module,
    in_place: bool,
    args: Vec<hlosim::eval::Value>,
) -> (hlosim::eval::Value, hlosim::eval::EvalStats, u64, u64) {
    use hlosim::eval::memory::MemoryBudget;
    use hlosim::eval::{EvalOptions, Evaluator, Replica, StatsSink};
    use std::sync::Arc;
    let budget = Arc::new(MemoryBudget::new(1 << 30));
    let sink = Arc::new(StatsSink::default());
    let mut ev = Evaluator::with_options(
        m,
        EvalOptions {
            in_place,
            ..EvalOptions::default()
        },
    );
    ev.set_replica(Replica {
        budget: budget.clone(),
        stats: Some(sink.clone()),
        ..Replica::single()
    });
    let out = ev.run(args).unwrap();
    (out, sink.total(), budget.peak(), budget.reserved_total())
}

/// [`chain`] on a rank-1 array of `n` elements.
fn chain_1d(n: usize) -> String {
    let t = format!("f32[{n}]");
    format!(
        "HloModule chain\n\nENTRY main {{\n  x = {t} parameter(0)\n  y = {t} parameter(1)\n  \
         a = {t} add(x, y)\n  m = {t} multiply(a, x)\n  e = {t} exponential(m)\n  \
         c = pred[{n}] compare(e, y), direction=GT\n  ROOT s = {t} select(c, e, y)\n}}\n"
    )
}
