//! `hlosim._hlosim`: the native half of the Python package `hlosim` (pysrc/hlosim). It
//! replicates the library calls the CLI makes (src/cli/{run,diff,profile,opt}.rs) with the
//! same defaults, so that a Python call and the matching CLI command give the same bits and
//! the same JSON.
//!
//! Arrays cross the boundary as raw bytes, not through the `numpy` crate: numpy has no bf16
//! (ml_dtypes' `bfloat16` and float8 types are user dtypes that rust-numpy cannot name), and
//! hlosim already has one codec from little-endian bytes of any element type
//! (`hlosim::io::raw`), the one the CLI's `.npy` reader uses. An argument is the numpy array
//! itself (C-contiguous, from `np.ascontiguousarray`, so no copy when it already is): its
//! buffer is read in place through `__array_interface__` (the buffer protocol is not in the
//! abi3 API before Python 3.11) and decoded once into hlosim's typed buffer. An output is a
//! `bytearray` of its little-endian bytes that Python views with `np.frombuffer` (writable,
//! no further copy).
//!
//! Errors never cross as panics: every entry point maps library errors to the exception
//! classes of `hlosim._errors` with the CLI's message, and a panic inside the simulator is
//! caught and raised as `HlosimError`.

use hlosim::device::autocast::{AutoCast, CastMode, CastType, Rounding};
use hlosim::device::machine::Machine;
use hlosim::device::roster::Chooser;
use hlosim::device::{execute_on_device, DeviceConfig};
use hlosim::diff::{self, Against, DiffOptions, DiffReport, InputOptions, Tolerances};
use hlosim::eval::memory::MemoryBudget;
use hlosim::eval::replicas::run_with_budget;
use hlosim::eval::{
    intra_op_threads, DotAccumulation, EigenCaches, EvalOptions, Evaluator, Replica, Value, XlaCpu,
    XlaCpuHost,
};
use hlosim::hlo::{ArrayLiteral, ArrayShape, ElementType, Module, Shape};
use hlosim::passes::{PassManager, NEURON_PIPELINE};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyDict};
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};

// ---------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------

/// An error of this module before it becomes a Python exception.
enum Error {
    /// The text does not parse: `hlosim._errors.ParseError(message, line, column)`.
    Parse {
        message: String,
        line: u32,
        col: u32,
    },
    /// The module parses but does not verify (`VerifyError`, a `ValueError`).
    Verify(String),
    /// A bad argument or option (`ValueError`).
    Value(String),
    /// Anything that stopped a run: evaluation, device model, pipeline (`HlosimError`).
    Run(String),
}

impl Error {
    fn into_py(self, py: Python<'_>) -> PyErr {
        let made = py.import("hlosim._errors").and_then(|errors| match self {
            Error::Parse { message, line, col } => {
                errors.getattr("ParseError")?.call1((message, line, col))
            }
            Error::Verify(m) => errors.getattr("VerifyError")?.call1((m,)),
            Error::Value(m) => errors.getattr("ArgumentError")?.call1((m,)),
            Error::Run(m) => errors.getattr("HlosimError")?.call1((m,)),
        });
        match made {
            Ok(e) => PyErr::from_value(e),
            Err(e) => e,
        }
    }
}

type Res<T> = Result<T, Error>;

/// Runs `f` (the simulator) with the GIL released, turning a panic into `HlosimError`.
fn simulate<T: Send>(py: Python<'_>, f: impl FnOnce() -> Res<T> + Send) -> PyResult<T> {
    let out = py.detach(|| {
        std::panic::catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| {
            let what = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            Err(Error::Run(format!("internal error in hlosim: {what}")))
        })
    });
    out.map_err(|e| e.into_py(py))
}

// ---------------------------------------------------------------------------------------
// Messages as the CLI prints them (src/cli/common.rs)
// ---------------------------------------------------------------------------------------

/// The CLI's message bounding: every `'quoted'` piece of input shortened, then every line.
fn bounded(msg: &str) -> String {
    hlosim::io::bounded_message(msg)
}

// ---------------------------------------------------------------------------------------
// Module
// ---------------------------------------------------------------------------------------

/// A parsed and verified HLO module (immutable; `opt` returns a new one).
#[pyclass(name = "Module", module = "hlosim._hlosim", frozen)]
struct HloModule {
    module: Arc<Module>,
    /// How messages name the module's source (a path, or `<string>`).
    source: String,
}

/// The numpy dtype name (`a.dtype.name`) of an element type; `None` for token.
fn numpy_name(ty: ElementType) -> Option<String> {
    use ElementType as E;
    Some(match ty {
        E::Pred => "bool".into(),
        E::S2 | E::S4 | E::S8 | E::S16 | E::S32 | E::S64 => {
            format!("int{}", &ty.name()[1..])
        }
        E::U2 | E::U4 | E::U8 | E::U16 | E::U32 | E::U64 => {
            format!("uint{}", &ty.name()[1..])
        }
        E::F16 => "float16".into(),
        E::BF16 => "bfloat16".into(),
        E::F32 => "float32".into(),
        E::F64 => "float64".into(),
        E::C64 => "complex64".into(),
        E::C128 => "complex128".into(),
        E::Token => return None,
        // f8e4m3fn -> float8_e4m3fn, f4e2m1fn -> float4_e2m1fn (ml_dtypes' names).
        t => {
            let n = t.name();
            format!("float{}_{}", &n[1..2], &n[2..])
        }
    })
}

/// The element type of a numpy dtype name (the inverse of [`numpy_name`]).
fn element_type_of(dtype: &str) -> Option<ElementType> {
    ElementType::ALL
        .iter()
        .copied()
        .find(|&t| numpy_name(t).as_deref() == Some(dtype))
}

fn shape_text(s: &Shape) -> String {
    s.without_layout().to_string()
}

#[pymethods]
impl HloModule {
    /// The module's name (the `HloModule` line).
    #[getter]
    fn name(&self) -> String {
        self.module.name.clone()
    }

    /// The module as canonical HLO text (what `hlosim parse` prints).
    #[getter]
    fn text(&self) -> String {
        hlosim::hlo::print_module(&self.module)
    }

    /// Where the module came from (a path, or `<string>`), as messages name it.
    #[getter]
    fn source(&self) -> String {
        self.source.clone()
    }

    /// The entry computation's parameters: `(name, numpy dtype name or None, dims or None,
    /// shape text)` per parameter, in order (dtype and dims are None for a tuple or token).
    #[getter]
    #[allow(clippy::type_complexity)]
    fn parameters(&self) -> Vec<(String, Option<String>, Option<Vec<i64>>, String)> {
        hlosim::io::npz::entry_parameters(&self.module)
            .into_iter()
            .map(|(name, shape)| match &shape {
                Shape::Array(a) => (
                    name,
                    numpy_name(a.ty),
                    Some(a.dims.clone()),
                    shape_text(&shape),
                ),
                _ => (name, None, None, shape_text(&shape)),
            })
            .collect()
    }

    /// The entry computation's signature: `(name: shape, ...) -> shape`.
    #[getter]
    fn entry_signature(&self) -> String {
        let params: Vec<String> = hlosim::io::npz::entry_parameters(&self.module)
            .iter()
            .map(|(n, s)| format!("{n}: {}", shape_text(s)))
            .collect();
        let root = &self.module.entry_computation().root_instr().shape;
        format!("({}) -> {}", params.join(", "), shape_text(root))
    }

    /// Simulated devices the module implies (the header's replica_count, else 1 + the
    /// largest device id its replica groups name, else 1): the CLI's default `--replicas`.
    #[getter]
    fn device_count(&self) -> PyResult<usize> {
        hlosim::eval::collectives::groups::default_device_count(&self.module)
            .map_err(|e| PyErr::new::<pyo3::exceptions::PyValueError, _>(e.to_string()))
    }

    /// Runs the passes `names` in order on a copy of the module (`hlosim opt --passes`).
    fn _opt(&self, py: Python<'_>, names: Vec<String>) -> PyResult<HloModule> {
        let module = self.module.clone();
        let source = self.source.clone();
        let out = simulate(py, move || {
            let mut m = (*module).clone();
            transform(&mut m, &names, &source)?;
            Ok(m)
        })?;
        Ok(HloModule {
            module: Arc::new(out),
            source: self.source.clone(),
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "<hlosim.Module {} {}>",
            self.module.name,
            self.entry_signature()
        )
    }
}

/// Applies the passes `names` (none: nothing) as `hlosim opt`/`run --passes` do.
fn transform(m: &mut Module, names: &[String], source: &str) -> Res<()> {
    if names.is_empty() {
        return Ok(());
    }
    let pm = PassManager::from_names(names).map_err(|e| Error::Value(e.to_string()))?;
    pm.run(m)
        .map(|_| ())
        .map_err(|e| Error::Run(format!("{source}: {e}")))
}

/// Parses and verifies HLO text; `source` names it in messages (a path or `<string>`).
/// Returns the module and the verifier's warnings (each prefixed with `source`).
#[pyfunction]
fn parse_text(py: Python<'_>, text: String, source: String) -> PyResult<(HloModule, Vec<String>)> {
    let src = source.clone();
    let (m, warnings) = simulate(py, move || {
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
        let m = hlosim::hlo::parse_module(text).map_err(|e| Error::Parse {
            message: format!("{src}:{}", bounded(&e.to_string())),
            line: e.line,
            col: e.col,
        })?;
        let warnings = hlosim::hlo::verify_module(&m)
            .map_err(|e| Error::Verify(format!("{src}: {}", bounded(&e.to_string()))))?;
        let warnings = warnings
            .iter()
            .map(|w| format!("{src}: {}", bounded(&w.to_string())))
            .collect();
        Ok((m, warnings))
    })?;
    Ok((
        HloModule {
            module: Arc::new(m),
            source,
        },
        warnings,
    ))
}

/// The pass names of the Neuron pipeline (`--pipeline neuron`).
#[pyfunction]
fn neuron_pipeline() -> Vec<String> {
    NEURON_PIPELINE.iter().map(|s| s.to_string()).collect()
}

/// The XLA:CPU a reference run copies here by default (`hlosim host`): its host kind name,
/// intra-op threads and Eigen's caches (`L1,L2,L3`), read afresh on each call so that a
/// changed `PJRT_NPROC` shows.
#[pyfunction]
fn xla_cpu() -> (String, usize, String) {
    let xla = hlosim::eval::XlaCpu::detect();
    (
        xla.host.name().to_string(),
        xla.threads,
        xla.caches.to_string(),
    )
}

/// Every known pass: `(order, name, description)` (`hlosim opt --list`).
#[pyfunction]
fn passes() -> Vec<(String, String, String)> {
    hlosim::passes::REGISTRY
        .iter()
        .map(|p| {
            (
                p.order.to_string(),
                p.name.to_string(),
                p.description.to_string(),
            )
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// Arrays
// ---------------------------------------------------------------------------------------

/// Decodes argument `i` (a C-contiguous numpy array and its dtype name) for parameter `i`,
/// checking its dtype and shape; the message names the parameter.
fn argument(
    py: Python<'_>,
    i: usize,
    device: Option<usize>,
    arr: &Bound<'_, PyAny>,
    dtype: &str,
    params: &[(String, Shape)],
) -> Res<ArrayLiteral> {
    let (pname, pshape) = &params[i];
    let on = device
        .map(|d| format!(" of device {d}"))
        .unwrap_or_default();
    let Shape::Array(want) = pshape else {
        return Err(Error::Value(format!(
            "parameter {i} ('{pname}'){on} has shape {}: only array parameters can be passed",
            shape_text(pshape)
        )));
    };
    let py_err = |e: PyErr| Error::Value(format!("argument {i} ('{pname}'){on}: {e}"));
    let np = py.import("numpy").map_err(py_err)?;
    if !arr
        .is_instance(&np.getattr("ndarray").map_err(py_err)?)
        .map_err(py_err)?
    {
        return Err(Error::Value(format!(
            "argument {i} ('{pname}'){on} is not a numpy array"
        )));
    }
    let dims: Vec<i64> = arr
        .getattr("shape")
        .and_then(|s| s.extract())
        .map_err(py_err)?;
    let ty = element_type_of(dtype);
    if ty != Some(want.ty) || dims != want.dims {
        return Err(Error::Value(format!(
            "argument {i}{on} is a {dtype} array of shape {}, parameter {i} ('{pname}') is {} \
             ({} of shape {})",
            hlosim::io::npy::python_tuple(&dims),
            ArrayShape::new(want.ty, want.dims.clone()),
            numpy_name(want.ty).unwrap_or_default(),
            hlosim::io::npy::python_tuple(&want.dims),
        )));
    }
    let iface = arr.getattr("__array_interface__").map_err(py_err)?;
    let contiguous = iface.get_item("strides").map_err(py_err)?.is_none();
    if !contiguous {
        return Err(Error::Value(format!(
            "argument {i} ('{pname}'){on} is not C-contiguous (use np.ascontiguousarray)"
        )));
    }
    let ptr: usize = iface
        .get_item("data")
        .and_then(|d| d.get_item(0))
        .and_then(|p| p.extract())
        .map_err(py_err)?;
    let nbytes: usize = arr
        .getattr("nbytes")
        .and_then(|n| n.extract())
        .map_err(py_err)?;
    let expected = want.element_count() * want.ty.byte_size();
    if nbytes != expected {
        return Err(Error::Value(format!(
            "argument {i} ('{pname}'){on} holds {nbytes} bytes, its parameter {expected}"
        )));
    }
    let bytes: &[u8] = if nbytes == 0 {
        &[]
    } else {
        // SAFETY: `arr` is a numpy ndarray (checked above) that stays referenced by `arr` for
        // this whole function, and the GIL is held, so its buffer is neither freed nor
        // reallocated while we read it. `__array_interface__` reports strides None only for
        // a C-contiguous buffer, whose `nbytes` bytes start at `data[0]`.
        unsafe { std::slice::from_raw_parts(ptr as *const u8, nbytes) }
    };
    let data = hlosim::io::raw::from_bytes(want.ty, bytes, false)
        .map_err(|e| Error::Value(format!("argument {i} ('{pname}'){on}: {e}")))?;
    // Sub-byte integers travel one per byte; values outside the type's range do not fit (as
    // in the CLI's .npy reader).
    use hlosim::hlo::ArrayData as D;
    let bits = match want.ty {
        ElementType::S2 | ElementType::U2 => 2,
        ElementType::S4 | ElementType::U4 => 4,
        _ => 8,
    };
    let fits = match &data {
        D::S8(v) if bits < 8 => v
            .iter()
            .all(|&x| (-(1i16 << (bits - 1))..(1i16 << (bits - 1))).contains(&(x as i16))),
        D::U8(v) if bits < 8 => v.iter().all(|&x| (x as u16) < (1u16 << bits)),
        _ => true,
    };
    if !fits {
        return Err(Error::Value(format!(
            "argument {i} ('{pname}'){on} has values outside the range of {}",
            want.ty
        )));
    }
    Ok(ArrayLiteral {
        shape: ArrayShape::new(want.ty, want.dims.clone()),
        data,
    })
}

/// One argument as Python passes it: the array and its dtype name.
type PyArg<'py> = (Bound<'py, PyAny>, String);

/// Decodes per-device arguments (`args[d]`; one list for every device when `args` has one
/// entry) for `devices` devices of `m`.
fn device_arguments(
    py: Python<'_>,
    m: &Module,
    args: &[Vec<PyArg<'_>>],
    devices: usize,
) -> Res<Vec<Vec<Value>>> {
    let params = hlosim::io::npz::entry_parameters(m);
    if args.len() != 1 && args.len() != devices {
        return Err(Error::Value(format!(
            "arguments for {} devices given, the run has {devices}",
            args.len()
        )));
    }
    let mut out = Vec::with_capacity(args.len());
    for (d, list) in args.iter().enumerate() {
        let device = (args.len() > 1).then_some(d);
        if list.len() != params.len() {
            let expected: Vec<String> = params
                .iter()
                .enumerate()
                .map(|(i, (n, s))| format!("\n  arg{i}: {n} {}", shape_text(s)))
                .collect();
            return Err(Error::Value(format!(
                "{} argument(s) given{}; the module takes {} parameter(s):{}",
                list.len(),
                device
                    .map(|d| format!(" for device {d}"))
                    .unwrap_or_default(),
                params.len(),
                expected.concat()
            )));
        }
        let mut values = Vec::with_capacity(list.len());
        for (i, (arr, dtype)) in list.iter().enumerate() {
            values.push(Value::array(argument(py, i, device, arr, dtype, &params)?));
        }
        out.push(values);
    }
    if out.len() == 1 && devices > 1 {
        let one = out.pop().unwrap_or_default();
        out = vec![one; devices];
    }
    Ok(out)
}

/// An output leaf as Python receives it: little-endian bytes, numpy dtype name, dims.
type PyOut<'py> = (Bound<'py, PyByteArray>, String, Vec<i64>);

fn output<'py>(py: Python<'py>, a: &ArrayLiteral) -> PyResult<PyOut<'py>> {
    // Borrowed on little-endian hosts: the one copy is into the bytearray Python owns.
    let bytes = hlosim::io::npy::payload_bytes(&a.data);
    let name = numpy_name(a.ty()).unwrap_or_default();
    Ok((PyByteArray::new(py, &bytes), name, a.dims().to_vec()))
}

// ---------------------------------------------------------------------------------------
// Options shared by run, diff and profile
// ---------------------------------------------------------------------------------------

fn machine(name: &str) -> Res<Machine> {
    Machine::resolve(name).map_err(|e| Error::Value(e.to_string()))
}

/// The auto-cast as `--auto-cast MODE --auto-cast-type TYPE [--stochastic-rounding]` give it
/// (`mode` None: `default`), as src/cli/autocast.rs resolves it.
fn auto_cast(
    mode: Option<&str>,
    ty: &str,
    stochastic_seed: Option<u64>,
    default: CastMode,
    machine: &Machine,
) -> Res<AutoCast> {
    let mode = match mode {
        None => default,
        Some("none") => CastMode::None,
        Some("matmult" | "matmul") => CastMode::Matmult,
        Some("all") => CastMode::All,
        Some(o) => {
            return Err(Error::Value(format!(
                "auto_cast must be 'none', 'matmult' or 'all', not {o:?}"
            )))
        }
    };
    let ty = match ty {
        "bf16" => CastType::Bf16,
        "fp16" => CastType::Fp16,
        "tf32" => CastType::Tf32,
        "fp8_e4m3" => CastType::Fp8E4m3,
        o => {
            return Err(Error::Value(format!(
                "auto_cast_type must be 'bf16', 'fp16', 'tf32' or 'fp8_e4m3', not {o:?}"
            )))
        }
    };
    Ok(AutoCast {
        mode,
        ty,
        rounding: match stochastic_seed {
            Some(s) => Rounding::Stochastic(s),
            None => Rounding::NearestEven,
        },
        fp8: machine.cast.fp8_e4m3(),
    })
}

fn chooser(name: &str) -> Res<Chooser> {
    match name {
        "first-fit" => Ok(Chooser::FirstFit),
        "optimal" => Ok(Chooser::Optimal),
        o => Err(Error::Value(format!(
            "chooser must be 'first-fit' or 'optimal', not {o:?}"
        ))),
    }
}

/// The device count: `replicas`, else what the module implies (the CLI's default).
fn device_count(m: &Module, replicas: Option<usize>) -> Res<usize> {
    match replicas {
        Some(0) => Err(Error::Value("replicas must be at least 1".into())),
        Some(n) => Ok(n),
        None => hlosim::eval::collectives::groups::default_device_count(m)
            .map_err(|e| Error::Value(e.to_string())),
    }
}

fn budget(max_memory: Option<u64>) -> Arc<MemoryBudget> {
    Arc::new(match max_memory {
        Some(b) => MemoryBudget::new(b),
        None => MemoryBudget::default(),
    })
}

// ---------------------------------------------------------------------------------------
// run
// ---------------------------------------------------------------------------------------

/// `hlosim run`: executes `module` (after `passes`) on `args` (per device; one list for every
/// device) and returns each device's output leaves. See `hlosim.run`.
#[pyfunction]
#[pyo3(signature = (module, args, *, mode, passes, machine_name, replicas, auto_cast_mode,
    auto_cast_type, stochastic_rounding_seed, chooser_name, max_memory, max_iterations,
    excess_precision, fma_contraction, dot_accumulation, xla_host, xla_threads, xla_caches,
    fusion))]
#[allow(clippy::too_many_arguments)]
fn run<'py>(
    py: Python<'py>,
    module: &HloModule,
    args: Vec<Vec<PyArg<'py>>>,
    mode: &str,
    passes: Vec<String>,
    machine_name: Option<String>,
    replicas: Option<usize>,
    auto_cast_mode: Option<String>,
    auto_cast_type: String,
    stochastic_rounding_seed: Option<u64>,
    chooser_name: String,
    max_memory: Option<u64>,
    max_iterations: Option<u64>,
    excess_precision: bool,
    fma_contraction: bool,
    dot_accumulation: &str,
    xla_host: &str,
    xla_threads: Option<usize>,
    xla_caches: Option<String>,
    fusion: bool,
) -> PyResult<Vec<Vec<PyOut<'py>>>> {
    let err = |e: Error| e.into_py(py);
    let device_mode = match mode {
        "reference" => false,
        "device" => true,
        o => {
            return Err(err(Error::Value(format!(
                "mode must be 'reference' or 'device', not {o:?}"
            ))))
        }
    };
    let dot_accumulation = match dot_accumulation {
        "xla-cpu" => DotAccumulation::XlaCpu,
        "f64" => DotAccumulation::F64,
        o => {
            return Err(err(Error::Value(format!(
                "dot_accumulation must be 'xla-cpu' or 'f64', not {o:?}"
            ))))
        }
    };
    let xla_host = match xla_host {
        "auto" => XlaCpuHost::detect(),
        name => XlaCpuHost::from_name(name).ok_or_else(|| {
            err(Error::Value(format!(
                "xla_host must be 'auto' or one of {}, not {name:?}",
                XlaCpuHost::ALL.map(|h| format!("'{h}'")).join(", ")
            )))
        })?,
    };
    let xla_threads = match xla_threads {
        None => intra_op_threads(),
        Some(0) => {
            return Err(err(Error::Value(
                "xla_threads must be at least 1".to_string(),
            )))
        }
        Some(n) => n,
    };
    let xla_caches = match xla_caches {
        None => EigenCaches::detect(),
        Some(text) => {
            EigenCaches::parse(&text).map_err(|e| err(Error::Value(format!("xla_caches: {e}"))))?
        }
    };
    let machine = match &machine_name {
        Some(m) => machine(m).map_err(err)?,
        None => Machine::default_machine(),
    };
    let chooser = chooser(&chooser_name).map_err(err)?;
    // `run --mode device` models neuronx-cc's pre-2.27 default, matmult (src/cli/run.rs).
    let cast = auto_cast(
        auto_cast_mode.as_deref(),
        &auto_cast_type,
        stochastic_rounding_seed,
        CastMode::Matmult,
        &machine,
    )
    .map_err(err)?;
    let source = module.source.clone();
    let original = module.module.clone();
    let transformed: Arc<Module> = if passes.is_empty() {
        original
    } else {
        Arc::new(simulate(py, move || {
            let mut m = (*original).clone();
            transform(&mut m, &passes, &source)?;
            Ok(m)
        })?)
    };
    let devices = device_count(&transformed, replicas).map_err(err)?;
    let values = device_arguments(py, &transformed, &args, devices).map_err(err)?;
    let options = EvalOptions {
        excess_precision,
        fma_contraction,
        fusion,
        in_place: fusion,
        dot_accumulation,
        xla: XlaCpu {
            host: xla_host,
            threads: xla_threads,
            caches: xla_caches,
        },
        ..EvalOptions::default()
    };
    let max_iterations =
        max_iterations.unwrap_or(hlosim::eval::control_flow::DEFAULT_MAX_WHILE_ITERATIONS);
    let m = transformed.clone();
    let results: Vec<Value> = simulate(py, move || {
        let budget = budget(max_memory);
        let config = DeviceConfig {
            chooser,
            auto_cast: cast,
            ..DeviceConfig::default()
        };
        if devices == 1 {
            let values = values.into_iter().next().unwrap_or_default();
            let replica = Replica {
                budget,
                max_while_iterations: max_iterations,
                ..Replica::single()
            };
            let result = if device_mode {
                let config = DeviceConfig { replica, ..config };
                execute_on_device(&m, values, config)
                    .map_err(|e| Error::Run(e.to_string()))?
                    .result
            } else {
                let mut ev = Evaluator::with_options(&m, options);
                ev.set_replica(replica);
                ev.run(values).map_err(|e| Error::Run(e.to_string()))?
            };
            return Ok(vec![result]);
        }
        let slots: Vec<Mutex<Option<Vec<Value>>>> =
            values.into_iter().map(|v| Mutex::new(Some(v))).collect();
        let take = |d: usize| -> Vec<Value> {
            slots[d]
                .lock()
                .map(|mut s| s.take().unwrap_or_default())
                .unwrap_or_default()
        };
        if device_mode {
            run_with_budget(devices, budget, |mut rep| {
                rep.max_while_iterations = max_iterations;
                let d = rep.device;
                let config = DeviceConfig {
                    replica: rep,
                    ..config.clone()
                };
                execute_on_device(&m, take(d), config).map(|r| r.result)
            })
        } else {
            run_with_budget(devices, budget, |mut rep| {
                rep.max_while_iterations = max_iterations;
                let d = rep.device;
                let mut ev = Evaluator::with_options(&m, options);
                ev.set_replica(rep);
                ev.run(take(d))
            })
        }
        .map_err(|e| Error::Run(e.to_string()))
    })?;
    results
        .iter()
        .map(|r| r.leaves().iter().map(|l| output(py, l)).collect())
        .collect()
}

// ---------------------------------------------------------------------------------------
// Generated inputs
// ---------------------------------------------------------------------------------------

/// The inputs `hlosim diff --seed SEED --edge-fraction F` generates for device `device`
/// (seed + device·2^32), as output leaves.
#[pyfunction]
#[pyo3(signature = (module, seed, edge_fraction, device))]
fn generate_inputs<'py>(
    py: Python<'py>,
    module: &HloModule,
    seed: u64,
    edge_fraction: f64,
    device: u64,
) -> PyResult<Vec<PyOut<'py>>> {
    let m = module.module.clone();
    let source = module.source.clone();
    let values = simulate(py, move || {
        let opts = InputOptions {
            seed: seed.wrapping_add(device << 32),
            edge_fraction,
        };
        diff::generate_inputs(&m, &DeviceConfig::default().tables, &opts)
            .map_err(|e| Error::Value(format!("{source}: {e}")))
    })?;
    let mut out = Vec::new();
    for v in &values {
        for l in v.leaves() {
            out.push(output(py, &l)?);
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------
// diff
// ---------------------------------------------------------------------------------------

/// The report of one diff (`hlosim diff`), kept as the library's value.
#[pyclass(name = "_DiffReport", module = "hlosim._hlosim", frozen)]
struct PyDiffReport {
    report: DiffReport,
}

#[pymethods]
impl PyDiffReport {
    /// The report as `hlosim diff --json` prints it.
    fn json(&self) -> PyResult<String> {
        serde_json::to_string_pretty(&self.report)
            .map_err(|e| PyErr::new::<pyo3::exceptions::PyRuntimeError, _>(e.to_string()))
    }

    /// The report as `hlosim diff` prints it.
    fn render(&self) -> String {
        self.report.render()
    }

    /// The report as `hlosim diff --html` writes it (without the device timeline).
    fn html(&self, py: Python<'_>) -> PyResult<String> {
        hlosim::plot::html::diff_page(&self.report, None).map_err(|e| Error::Run(e).into_py(py))
    }

    /// Whether every output is within tolerance and nothing error-level happened.
    #[getter]
    fn passed(&self) -> bool {
        self.report.passed
    }
}

/// `hlosim diff`: the module with reference semantics against its copy transformed by
/// `passes` on the device model, on `args` (per device) or inputs generated from `seed`.
#[pyfunction]
#[pyo3(signature = (module, *, args, seed, edge_fraction, passes, machine_name, replicas,
    tolerances, strict, examples, precision_report, auto_cast_mode, auto_cast_type,
    stochastic_rounding_seed, max_memory, max_iterations, inputs_description))]
#[allow(clippy::too_many_arguments)]
fn run_diff<'py>(
    py: Python<'py>,
    module: &HloModule,
    args: Option<Vec<Vec<PyArg<'py>>>>,
    seed: u64,
    edge_fraction: f64,
    passes: Vec<String>,
    machine_name: String,
    replicas: Option<usize>,
    tolerances: Vec<String>,
    strict: bool,
    examples: usize,
    precision_report: bool,
    auto_cast_mode: Option<String>,
    auto_cast_type: String,
    stochastic_rounding_seed: Option<u64>,
    max_memory: Option<u64>,
    max_iterations: Option<u64>,
    inputs_description: Option<String>,
) -> PyResult<PyDiffReport> {
    let err = |e: Error| e.into_py(py);
    let machine = machine(&machine_name).map_err(err)?;
    if !(0.0..=1.0).contains(&edge_fraction) {
        return Err(err(Error::Value(format!(
            "edge_fraction must be between 0 and 1, not {edge_fraction}"
        ))));
    }
    if examples > 1000 {
        return Err(err(Error::Value(
            "examples must be at most 1000".to_string(),
        )));
    }
    let mut tol = Tolerances::default();
    tol.apply_overrides(&tolerances)
        .map_err(|e| err(Error::Value(e)))?;
    // Checked here so that an unknown pass is an ArgumentError; made again inside the
    // simulation, a PassManager cannot cross threads.
    PassManager::from_names(&passes).map_err(|e| err(Error::Value(e.to_string())))?;
    // diff's auto-cast defaults to none (it checks passes; src/cli/diff.rs).
    let cast = auto_cast(
        auto_cast_mode.as_deref(),
        &auto_cast_type,
        stochastic_rounding_seed,
        CastMode::None,
        &machine,
    )
    .map_err(err)?;
    let m = module.module.clone();
    let display = module.source.clone();
    let devices = device_count(&m, replicas).map_err(err)?;
    let given = match &args {
        Some(a) => Some(device_arguments(py, &m, a, devices).map_err(err)?),
        None => None,
    };
    let report = simulate(py, move || {
        let config = DeviceConfig {
            auto_cast: cast,
            ..DeviceConfig::default()
        };
        let (args, description) = match given {
            Some(v) => (
                v,
                inputs_description.unwrap_or_else(|| "arguments given from Python".into()),
            ),
            None => {
                let mut per_device = Vec::with_capacity(devices);
                for d in 0..devices as u64 {
                    let opts = InputOptions {
                        seed: seed.wrapping_add(d << 32),
                        edge_fraction,
                    };
                    per_device.push(
                        diff::generate_inputs(&m, &config.tables, &opts)
                            .map_err(|e| Error::Value(format!("{display}: {e}")))?,
                    );
                }
                let description = format!(
                    "seed {seed} ({}% edge cases){}",
                    edge_fraction * 100.0,
                    if devices > 1 {
                        "; device d: seed + d*2^32"
                    } else {
                        ""
                    }
                );
                (per_device, inputs_description.unwrap_or(description))
            }
        };
        let opts = DiffOptions {
            tolerances: tol,
            max_examples: examples,
            inputs_description: description,
            machine: Some(machine),
            strict,
            max_memory,
            max_while_iterations: max_iterations,
            precision_report,
            stats: None,
            placement: None,
        };
        let pipeline = PassManager::from_names(&passes).map_err(|e| Error::Value(e.to_string()))?;
        diff::diff_against(&m, Against::Pipeline(&pipeline), args, config, &opts)
            .map_err(|e| Error::Run(format!("{display}: {e}")))
    })?;
    Ok(PyDiffReport { report })
}

// ---------------------------------------------------------------------------------------
// profile
// ---------------------------------------------------------------------------------------

/// `hlosim profile --json`: the module's (after `passes`) estimated time on `machine_name`,
/// as the JSON text the CLI prints.
#[pyfunction]
#[pyo3(signature = (module, *, passes, machine_name, chooser_name, replicas, auto_cast_mode,
    auto_cast_type, stochastic_rounding_seed))]
#[allow(clippy::too_many_arguments)]
fn run_profile(
    py: Python<'_>,
    module: &HloModule,
    passes: Vec<String>,
    machine_name: String,
    chooser_name: String,
    replicas: Option<usize>,
    auto_cast_mode: Option<String>,
    auto_cast_type: String,
    stochastic_rounding_seed: Option<u64>,
) -> PyResult<String> {
    let err = |e: Error| e.into_py(py);
    let machine = machine(&machine_name).map_err(err)?;
    let chooser = chooser(&chooser_name).map_err(err)?;
    // profile's auto-cast defaults to matmult (src/cli/profile.rs).
    let cast = auto_cast(
        auto_cast_mode.as_deref(),
        &auto_cast_type,
        stochastic_rounding_seed,
        CastMode::Matmult,
        &machine,
    )
    .map_err(err)?;
    let original = module.module.clone();
    let source = module.source.clone();
    simulate(py, move || {
        let mut m = (*original).clone();
        transform(&mut m, &passes, &source)?;
        let devices = device_count(&m, replicas)?;
        let (_, profile) =
            hlosim::device::schedule::profile_module_with(&m, &machine, chooser, devices, cast)
                .map_err(|e| Error::Run(format!("{source}: {e}")))?;
        serde_json::to_string_pretty(&profile).map_err(|e| Error::Run(e.to_string()))
    })
}

// ---------------------------------------------------------------------------------------
// The module
// ---------------------------------------------------------------------------------------

#[pymodule]
fn _hlosim(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<HloModule>()?;
    m.add_class::<PyDiffReport>()?;
    m.add_function(wrap_pyfunction!(parse_text, m)?)?;
    m.add_function(wrap_pyfunction!(neuron_pipeline, m)?)?;
    m.add_function(wrap_pyfunction!(passes, m)?)?;
    m.add_function(wrap_pyfunction!(xla_cpu, m)?)?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(generate_inputs, m)?)?;
    m.add_function(wrap_pyfunction!(run_diff, m)?)?;
    m.add_function(wrap_pyfunction!(run_profile, m)?)?;
    let dtypes = PyDict::new(m.py());
    for &t in ElementType::ALL {
        if let Some(n) = numpy_name(t) {
            dtypes.set_item(t.name(), n)?;
        }
    }
    m.add("ELEMENT_TYPES", dtypes)?;
    m.add("DEFAULT_MACHINE", hlosim::device::machine::DEFAULT_MACHINE)?;
    Ok(())
}
