//! `.npz` archives (a zip of `.npy` members, what `np.savez` writes) and the argument /
//! output conventions of `hlosim run`: arguments are `arg0..argN-1` in parameter order (or
//! one `.npy` per parameter), outputs are `out0..outK-1`, the root's tuple leaves in order.

use super::npy::{self, NpyDtype};
use super::IoError;
use crate::hlo::{ArrayData, ArrayLiteral, ArrayShape, ElementType, Module, Shape};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// One array of an archive: its name (without `.npy`), the array, and the stored dtype.
#[derive(Clone, Debug)]
pub struct NpzEntry {
    pub name: String,
    pub array: ArrayLiteral,
    pub dtype: NpyDtype,
}

/// Opens an `.npz` (a zip archive) for reading.
fn open_archive(
    path: &Path,
) -> Result<zip::ZipArchive<std::io::BufReader<std::fs::File>>, IoError> {
    let shown = path.display();
    let file =
        std::fs::File::open(path).map_err(|e| IoError::new(format!("cannot read {shown}: {e}")))?;
    zip::ZipArchive::new(std::io::BufReader::new(file)).map_err(|e| {
        IoError::new(format!(
            "{shown} is not an .npz archive (not a readable zip file: {e})"
        ))
    })
}

/// Reads every array of an `.npz` file, in archive order.
pub fn read_npz(path: &Path) -> Result<Vec<NpzEntry>, IoError> {
    let shown = path.display();
    let mut zip = open_archive(path)?;
    let mut out = Vec::with_capacity(zip.len());
    for i in 0..zip.len() {
        let mut member = zip
            .by_index(i)
            .map_err(|e| IoError::new(format!("{shown}: cannot open member {i}: {e}")))?;
        let name = member.name().to_string();
        let Some(stem) = name.strip_suffix(".npy") else {
            return Err(IoError::new(format!(
                "{shown}: member '{name}' is not a .npy array"
            )));
        };
        let stem = stem.to_string();
        let mut bytes = Vec::with_capacity(member.size().min(1 << 30) as usize);
        member
            .read_to_end(&mut bytes)
            .map_err(|e| IoError::new(format!("{shown}: cannot read member '{name}': {e}")))?;
        let (array, dtype) = npy::decode(&bytes, &format!("{shown}, array '{stem}'"))?;
        out.push(NpzEntry {
            name: stem,
            array,
            dtype,
        });
    }
    Ok(out)
}

/// The array names of an `.npz` file (members without `.npy`), read from the zip directory
/// alone, without decompressing any array.
pub fn member_names(path: &Path) -> Result<Vec<String>, IoError> {
    Ok(open_archive(path)?
        .file_names()
        .map(|n| n.strip_suffix(".npy").unwrap_or(n).to_string())
        .collect())
}

/// Writes named arrays as an uncompressed `.npz` (what `np.savez` writes).
pub fn write_npz(path: &Path, arrays: &[(String, &ArrayLiteral)]) -> Result<(), IoError> {
    let shown = path.display();
    let fail = |e: &dyn std::fmt::Display| IoError::new(format!("cannot write {shown}: {e}"));
    let file = std::fs::File::create(path).map_err(|e| fail(&e))?;
    let mut zip = zip::ZipWriter::new(std::io::BufWriter::new(file));
    for (name, a) in arrays {
        let bytes = npy::encode(a);
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored)
            .large_file(bytes.len() as u64 >= u32::MAX as u64);
        zip.start_file(format!("{name}.npy"), opts)
            .map_err(|e| fail(&e))?;
        zip.write_all(&bytes).map_err(|e| fail(&e))?;
    }
    let mut inner = zip.finish().map_err(|e| fail(&e))?;
    inner.flush().map_err(|e| fail(&e))?;
    Ok(())
}

/// Where the arguments of a run come from.
#[derive(Clone, Debug)]
pub enum ArgSource {
    /// No arguments given (valid for a module without parameters).
    None,
    /// An `.npz` with `arg0..argN-1`.
    Npz(PathBuf),
    /// One `.npy` per parameter, in order.
    Npy(Vec<PathBuf>),
}

/// Name and shape of each entry parameter, for matching and for messages.
pub fn entry_parameters(m: &Module) -> Vec<(String, Shape)> {
    let c = m.entry_computation();
    c.parameters()
        .into_iter()
        .enumerate()
        .map(|(i, p)| match p {
            Some(id) => (c.instr(id).name.clone(), c.instr(id).shape.clone()),
            None => (format!("<parameter {i} missing>"), Shape::Tuple(vec![])),
        })
        .collect()
}

fn expected_list(params: &[(String, Shape)]) -> String {
    if params.is_empty() {
        return "the module takes no parameters".into();
    }
    let mut s = format!("the module takes {} parameter(s):", params.len());
    for (i, (name, shape)) in params.iter().enumerate() {
        s.push_str(&format!("\n  arg{i}: {name} {}", shape.without_layout()));
    }
    s
}

/// Reads the arguments for the module's entry computation and checks each against its
/// parameter (count, dimensions, element type). bf16 parameters accept numpy `V2` (ml_dtypes)
/// and `u2` bit patterns; 8-bit float and sub-byte parameters accept one-byte raw data.
/// Errors list the expected parameters and what was given.
pub fn read_args(m: &Module, src: &ArgSource) -> Result<Vec<ArrayLiteral>, IoError> {
    let params = entry_parameters(m);
    let given: Vec<(String, ArrayLiteral, NpyDtype)> = match src {
        ArgSource::None => Vec::new(),
        ArgSource::Npy(paths) => paths
            .iter()
            .map(|p| npy::read_file(p).map(|(a, d)| (p.display().to_string(), a, d)))
            .collect::<Result<_, _>>()?,
        ArgSource::Npz(path) => {
            let entries = read_npz(path)?;
            let mut by_index: Vec<Option<NpzEntry>> = Vec::new();
            let mut others = Vec::new();
            for e in entries {
                match e
                    .name
                    .strip_prefix("arg")
                    .and_then(|n| n.parse::<usize>().ok())
                {
                    Some(k) if k < 1 << 20 => {
                        if by_index.len() <= k {
                            by_index.resize(k + 1, None);
                        }
                        by_index[k] = Some(e);
                    }
                    _ => others.push(e.name),
                }
            }
            if by_index.len() != params.len() || by_index.iter().any(|e| e.is_none()) {
                let names: Vec<String> = by_index
                    .iter()
                    .flatten()
                    .map(|e| e.name.clone())
                    .chain(others)
                    .collect();
                let missing: Vec<String> = (0..params.len())
                    .filter(|&k| by_index.get(k).is_none_or(|e| e.is_none()))
                    .map(|k| format!("arg{k}"))
                    .collect();
                return Err(IoError::new(format!(
                    "{} holds arrays [{}]{}; {}",
                    path.display(),
                    names.join(", "),
                    if missing.is_empty() {
                        String::new()
                    } else {
                        format!(", missing {}", missing.join(", "))
                    },
                    expected_list(&params)
                )));
            }
            by_index
                .into_iter()
                .flatten()
                .map(|e| {
                    (
                        format!("{}, array '{}'", path.display(), e.name),
                        e.array,
                        e.dtype,
                    )
                })
                .collect()
        }
    };
    fit_all(given, &params)
}

/// Checks each given array against its parameter and converts it to the parameter's type.
fn fit_all(
    given: Vec<(String, ArrayLiteral, NpyDtype)>,
    params: &[(String, Shape)],
) -> Result<Vec<ArrayLiteral>, IoError> {
    if given.len() != params.len() {
        return Err(IoError::new(format!(
            "{} argument(s) given; {}",
            given.len(),
            expected_list(params)
        )));
    }
    let mut out = Vec::with_capacity(given.len());
    for (i, ((what, a, dtype), (pname, pshape))) in given.into_iter().zip(params).enumerate() {
        let Shape::Array(want) = pshape else {
            return Err(IoError::new(format!(
                "parameter {i} ('{pname}') has shape {pshape}: only array parameters can be passed from .npy/.npz; {}",
                expected_list(params)
            )));
        };
        let got_dims = a.shape.dims.clone();
        match fit_argument(a, &dtype, want) {
            Some(a) => out.push(a),
            None => {
                return Err(IoError::new(format!(
                    "argument {i} ({what}) is '{}' {:?}, parameter {i} ('{pname}') is {}; {}",
                    dtype.descr,
                    got_dims,
                    ArrayShape::new(want.ty, want.dims.clone()),
                    expected_list(params)
                )))
            }
        }
    }
    Ok(out)
}

/// Reads per-device arguments for `devices` simulated devices from one `.npz`: argument j
/// of device d is member `d{d}/arg{j}`, or `arg{j}` when every device gets the same array
/// (the layout of `xla_oracle.py run --replicas N`). Each is checked like [`read_args`].
pub fn read_device_args(
    m: &Module,
    path: &Path,
    devices: usize,
) -> Result<Vec<Vec<ArrayLiteral>>, IoError> {
    let params = entry_parameters(m);
    let entries = read_npz(path)?;
    let mut by_name: std::collections::HashMap<String, NpzEntry> = std::collections::HashMap::new();
    for e in entries {
        let known = match e.name.split_once('/') {
            None => parse_index(&e.name, "arg").is_some_and(|j| j < params.len()),
            Some((d, rest)) => {
                let dev = d.strip_prefix('d').and_then(|x| parse_index(x, ""));
                match dev {
                    Some(dev) if dev >= devices => {
                        return Err(IoError::new(format!(
                            "{} holds '{}' for device {dev}, but the program runs on {devices} \
                             device(s) (devices 0..{})",
                            path.display(),
                            e.name,
                            devices.saturating_sub(1)
                        )))
                    }
                    Some(_) => parse_index(rest, "arg").is_some_and(|j| j < params.len()),
                    None => false,
                }
            }
        };
        if !known {
            return Err(IoError::new(format!(
                "{} holds an array '{}' that is no argument: expected 'd<device>/arg<j>' or \
                 'arg<j>' with j < {}; {}",
                path.display(),
                e.name,
                params.len(),
                expected_list(&params)
            )));
        }
        by_name.insert(e.name.clone(), e);
    }
    let mut out = Vec::with_capacity(devices);
    for d in 0..devices {
        let mut given = Vec::with_capacity(params.len());
        for j in 0..params.len() {
            let own = format!("d{d}/arg{j}");
            let shared = format!("arg{j}");
            let e = by_name
                .get(&own)
                .or_else(|| by_name.get(&shared))
                .ok_or_else(|| {
                    IoError::new(format!(
                        "{}: no array '{own}' or '{shared}' for argument {j} of device {d}; {}",
                        path.display(),
                        expected_list(&params)
                    ))
                })?;
            given.push((
                format!("{}, array '{}'", path.display(), e.name),
                e.array.clone(),
                e.dtype.clone(),
            ));
        }
        out.push(fit_all(given, &params).map_err(|e| IoError::new(format!("device {d}: {}", e)))?);
    }
    Ok(out)
}

/// `prefix` followed by a canonical decimal index (`arg3`, not `arg03`).
fn parse_index(s: &str, prefix: &str) -> Option<usize> {
    let n = s.strip_prefix(prefix)?;
    let ok =
        !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) && (n == "0" || !n.starts_with('0'));
    ok.then(|| n.parse().ok()).flatten()
}

/// Makes a read array into the parameter's type, or `None` when it does not fit.
fn fit_argument(a: ArrayLiteral, dtype: &NpyDtype, want: &ArrayShape) -> Option<ArrayLiteral> {
    if a.shape.dims != want.dims {
        return None;
    }
    use ElementType as E;
    let shape = ArrayShape::new(want.ty, want.dims.clone());
    let raw1 = dtype.descr.ends_with("V1");
    let data = match (want.ty, a.data) {
        (t, d) if t == a.shape.ty && !raw1 => d,
        // bf16 as raw 16-bit patterns (numpy has no bf16; '<u2' is a common stand-in).
        (E::BF16, ArrayData::U16(v)) => {
            ArrayData::BF16(v.into_iter().map(half::bf16::from_bits).collect())
        }
        (t, ArrayData::U8(v)) if t.is_narrow_float() => ArrayData::Bits8(v),
        (E::S2 | E::S4, ArrayData::S8(v)) => ArrayData::S8(v),
        (E::S2 | E::S4, ArrayData::U8(v)) if raw1 => {
            ArrayData::S8(v.into_iter().map(|b| b as i8).collect())
        }
        (E::U2 | E::U4, ArrayData::U8(v)) => ArrayData::U8(v),
        _ => return None,
    };
    // Sub-byte integers travel one per byte; values outside the type's range do not fit.
    let bits = match want.ty {
        E::S2 | E::U2 => 2,
        E::S4 | E::U4 => 4,
        _ => 8,
    };
    let fits = match &data {
        ArrayData::S8(v) if bits < 8 => v
            .iter()
            .all(|&x| (-(1i16 << (bits - 1))..(1i16 << (bits - 1))).contains(&(x as i16))),
        ArrayData::U8(v) if bits < 8 => v.iter().all(|&x| (x as u16) < (1u16 << bits)),
        _ => true,
    };
    fits.then_some(ArrayLiteral { shape, data })
}

/// Writes output leaves as `out0..outK-1`.
pub fn write_outputs(path: &Path, leaves: &[&ArrayLiteral]) -> Result<(), IoError> {
    let named: Vec<(String, &ArrayLiteral)> = leaves
        .iter()
        .enumerate()
        .map(|(i, a)| (format!("out{i}"), *a))
        .collect();
    write_npz(path, &named)
}

/// Writes per-device output leaves as `d{d}/out{k}` (the layout of `xla_oracle.py run
/// --replicas N`).
pub fn write_device_outputs(path: &Path, devices: &[Vec<&ArrayLiteral>]) -> Result<(), IoError> {
    let named: Vec<(String, &ArrayLiteral)> = devices
        .iter()
        .enumerate()
        .flat_map(|(d, leaves)| {
            leaves
                .iter()
                .enumerate()
                .map(move |(k, a)| (format!("d{d}/out{k}"), *a))
        })
        .collect();
    write_npz(path, &named)
}
