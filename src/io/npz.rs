//! `.npz` archives (a zip of `.npy` members, what `np.savez` writes) and the argument /
//! output conventions of `hlosim run`: arguments are `arg0..argN-1` in parameter order (or
//! one `.npy` per parameter), outputs are `out0..outK-1`, the root's tuple leaves in order.

use super::excerpt;
use super::npy::{self, NpyDtype};
use super::IoError;
use crate::hlo::{ArrayData, ArrayLiteral, ArrayShape, ElementType, Module, Shape};
use rayon::prelude::*;
use std::io::{Seek, Write};
use std::path::{Path, PathBuf};

/// One array of an archive: its name (without `.npy`), the array, and the stored dtype.
#[derive(Clone, Debug)]
pub struct NpzEntry {
    pub name: String,
    pub array: ArrayLiteral,
    pub dtype: NpyDtype,
}

/// An open `.npz` archive.
type Archive = zip::ZipArchive<std::io::BufReader<std::fs::File>>;

/// Opens an `.npz` (a zip archive) for reading; only the zip directory is read.
fn open_archive(path: &Path) -> Result<Archive, IoError> {
    let shown = path.display();
    let file =
        std::fs::File::open(path).map_err(|e| IoError::new(format!("cannot read {shown}: {e}")))?;
    zip::ZipArchive::new(std::io::BufReader::new(file)).map_err(|e| {
        IoError::new(format!(
            "{shown} is not an .npz archive (not a readable zip file: {e})"
        ))
    })
}

/// The largest `.npy` header accepted (numpy's own reader stops at 10,000 bytes), on top of
/// a parameter's payload when bounding what a member may unpack to.
const NPY_HEADER_ALLOWANCE: u64 = 12 + 65_536;

/// Reads one member as an array, unpacking at most `limit` bytes: a member that declares or
/// streams more fails at once, before its buffer is allocated (a zip bomb never expands).
/// The payload goes straight from the member's stream (stored or inflated once) into the
/// array's final buffer. `what` names the array in messages.
fn read_member(
    zip: &mut Archive,
    shown: &str,
    name: &str,
    limit: u64,
    what: &str,
) -> Result<(ArrayLiteral, NpyDtype), IoError> {
    let mut member = zip.by_name(name).map_err(|e| {
        IoError::new(format!(
            "{shown}: cannot open member '{}': {e}",
            excerpt(name)
        ))
    })?;
    if member.size() > limit {
        return Err(IoError::new(format!(
            "{shown}: member '{}' unpacks to {} bytes, more than the {limit} bytes its \
             parameter can hold (its payload plus a .npy header); refusing to unpack it",
            excerpt(name),
            member.size()
        )));
    }
    npy::read_from(&mut member, limit, what)
}

/// Reads every array of an `.npz` file, in archive order. No member may unpack to more than
/// `max_member_bytes`; [`read_args`] and [`read_device_args`] bound each member by its
/// parameter instead.
pub fn read_npz_bounded(path: &Path, max_member_bytes: u64) -> Result<Vec<NpzEntry>, IoError> {
    let shown = path.display().to_string();
    let mut zip = open_archive(path)?;
    let names: Vec<String> = zip.file_names().map(str::to_string).collect();
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let Some(stem) = name.strip_suffix(".npy") else {
            return Err(IoError::new(format!(
                "{shown}: member '{}' is not a .npy array",
                excerpt(&name)
            )));
        };
        let what = format!("{shown}, array '{}'", excerpt(stem));
        let (array, dtype) = read_member(&mut zip, &shown, &name, max_member_bytes, &what)?;
        out.push(NpzEntry {
            name: stem.to_string(),
            array,
            dtype,
        });
    }
    Ok(out)
}

/// Reads every array of an `.npz` file, in archive order, each member unpacking to at most
/// 16 GiB (for trusted files such as expected outputs; argument files go through
/// [`read_args`], which bounds each member by its parameter).
pub fn read_npz(path: &Path) -> Result<Vec<NpzEntry>, IoError> {
    read_npz_bounded(path, 16 << 30)
}

/// The array names of an `.npz` file (members without `.npy`), read from the zip directory
/// alone, without decompressing any array.
pub fn member_names(path: &Path) -> Result<Vec<String>, IoError> {
    Ok(open_archive(path)?
        .file_names()
        .map(|n| n.strip_suffix(".npy").unwrap_or(n).to_string())
        .collect())
}

/// Writes named arrays as an uncompressed `.npz` (what `np.savez` writes), atomically: a
/// failure leaves an existing file at `path` untouched and no partial file (see
/// [`super::atomic`]).
pub fn write_npz(path: &Path, arrays: &[(String, &ArrayLiteral)]) -> Result<(), IoError> {
    super::atomic::write_file(path, |w| write_npz_to(w, arrays))
        .map_err(|e| IoError::new(e.to_string()))
}

/// Writes the archive into `w`. The zip writer only ever sees a [`StopOnError`] sink, so
/// when a write fails (a full disk, a file-size limit) the writer's own clean-up on drop
/// completes silently against it instead of printing "ZipWriter drop failed"; the first
/// error is returned.
fn write_npz_to<W: Write + Seek>(
    w: &mut W,
    arrays: &[(String, &ArrayLiteral)],
) -> std::io::Result<()> {
    let mut sink = StopOnError::new(w);
    let result = (|| -> zip::result::ZipResult<()> {
        let mut zip = zip::ZipWriter::new(&mut sink);
        for (name, a) in arrays {
            let opts = zip::write::SimpleFileOptions::default()
                .compression_method(zip::CompressionMethod::Stored)
                .large_file(npy::encoded_len(a) >= u32::MAX as u64);
            zip.start_file(format!("{name}.npy"), opts)?;
            // Straight from the array's buffer: no encoded copy of the payload.
            npy::write_to(&mut zip, a)?;
        }
        zip.finish()?;
        Ok(())
    })();
    if let Some(e) = sink.failed.take() {
        return Err(e);
    }
    result.map_err(|e| match e {
        zip::result::ZipError::Io(e) => e,
        other => std::io::Error::other(other.to_string()),
    })
}

/// A writer that forwards to `inner` until the first error, then discards everything while
/// keeping a consistent position, so that code which keeps writing after a failure (the zip
/// writer's drop) neither fails again nor writes; the first error is kept in `failed`.
struct StopOnError<W> {
    inner: W,
    failed: Option<std::io::Error>,
    pos: u64,
    end: u64,
}

impl<W> StopOnError<W> {
    fn new(inner: W) -> StopOnError<W> {
        StopOnError {
            inner,
            failed: None,
            pos: 0,
            end: 0,
        }
    }

    fn fail(&mut self, e: &std::io::Error) -> std::io::Error {
        let copy = match e.raw_os_error() {
            Some(code) => std::io::Error::from_raw_os_error(code),
            None => std::io::Error::new(e.kind(), e.to_string()),
        };
        self.failed.get_or_insert(copy);
        std::io::Error::new(e.kind(), e.to_string())
    }

    fn advance(&mut self, n: u64) {
        self.pos = self.pos.saturating_add(n);
        self.end = self.end.max(self.pos);
    }
}

impl<W: Write> Write for StopOnError<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.failed.is_some() {
            self.advance(buf.len() as u64);
            return Ok(buf.len());
        }
        match self.inner.write(buf) {
            Ok(n) => {
                self.advance(n as u64);
                Ok(n)
            }
            Err(e) => Err(self.fail(&e)),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.failed.is_some() {
            return Ok(());
        }
        self.inner.flush().map_err(|e| self.fail(&e))
    }
}

impl<W: Seek> Seek for StopOnError<W> {
    fn seek(&mut self, to: std::io::SeekFrom) -> std::io::Result<u64> {
        use std::io::SeekFrom;
        if self.failed.is_some() {
            let base = |b: u64, d: i64| b.saturating_add_signed(d);
            self.pos = match to {
                SeekFrom::Start(p) => p,
                SeekFrom::End(d) => base(self.end, d),
                SeekFrom::Current(d) => base(self.pos, d),
            };
            self.end = self.end.max(self.pos);
            return Ok(self.pos);
        }
        match self.inner.seek(to) {
            Ok(p) => {
                self.pos = p;
                self.end = self.end.max(p);
                Ok(p)
            }
            Err(e) => Err(self.fail(&e)),
        }
    }
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
/// An `.npz` must hold exactly `arg0.npy..arg{N-1}.npy` (no leading zeros, nothing else), and
/// no member may unpack to more than its parameter's bytes plus a `.npy` header. Errors list
/// the expected parameters and what was given.
pub fn read_args(m: &Module, src: &ArgSource) -> Result<Vec<ArrayLiteral>, IoError> {
    let params = entry_parameters(m);
    let given: Vec<(String, ArrayLiteral, NpyDtype)> = match src {
        ArgSource::None => Vec::new(),
        ArgSource::Npy(paths) => paths
            .iter()
            .enumerate()
            .map(|(j, p)| {
                let limit = params.get(j).map_or(u64::MAX, |(_, s)| member_limit(s));
                read_npy_bounded(p, limit).map(|(a, d)| (p.display().to_string(), a, d))
            })
            .collect::<Result<_, _>>()?,
        ArgSource::Npz(path) => {
            let shown = path.display().to_string();
            let zip = open_archive(path)?;
            let names: Vec<String> = zip.file_names().map(str::to_string).collect();
            let mut by_index: Vec<Option<String>> = vec![None; params.len()];
            let mut unknown = Vec::new();
            for n in &names {
                match n.strip_suffix(".npy").and_then(|s| parse_index(s, "arg")) {
                    Some(j) if j < params.len() => by_index[j] = Some(n.clone()),
                    _ => unknown.push(n.clone()),
                }
            }
            let missing: Vec<String> = (0..params.len())
                .filter(|&j| by_index[j].is_none())
                .map(|j| format!("arg{j}"))
                .collect();
            if !unknown.is_empty() || !missing.is_empty() {
                let mut msg = format!("{shown} holds [{}]", name_list(&names));
                if !unknown.is_empty() {
                    msg.push_str(&format!(
                        "; not arguments: [{}] (arrays must be named exactly arg0..arg<N-1>, \
                         without leading zeros, each stored as a .npy member)",
                        name_list(&unknown)
                    ));
                }
                if !missing.is_empty() {
                    msg.push_str(&format!("; missing {}", missing.join(", ")));
                }
                return Err(IoError::new(format!("{msg}; {}", expected_list(&params))));
            }
            drop(zip);
            // Members are read concurrently, each through its own handle on the archive (a
            // stored member is one large read into its buffer, an inflated one is CPU-bound);
            // the first failing member in argument order is the error reported.
            let members: Vec<(usize, String)> =
                by_index.into_iter().flatten().enumerate().collect();
            members
                .par_iter()
                .map(|(j, name)| {
                    let mut zip = open_archive(path)?;
                    let what = format!("{shown}, array 'arg{j}'");
                    let limit = member_limit(&params[*j].1);
                    let (a, d) = read_member(&mut zip, &shown, name, limit, &what)?;
                    Ok((what, a, d))
                })
                .collect::<Vec<Result<_, IoError>>>()
                .into_iter()
                .collect::<Result<Vec<_>, _>>()?
        }
    };
    fit_all(given, &params)
}

/// The most bytes the `.npy` image of an argument for a parameter of shape `shape` may
/// take: its payload (every accepted numpy dtype stores the parameter's type in its byte
/// size, sub-byte types one per byte) plus [`NPY_HEADER_ALLOWANCE`].
fn member_limit(shape: &Shape) -> u64 {
    let payload = match shape {
        Shape::Array(a) => a.dims.iter().try_fold(a.ty.byte_size() as u64, |acc, &d| {
            acc.checked_mul(u64::try_from(d).ok()?)
        }),
        // Not passable from a file; fit_all says so once the (small) member is read.
        _ => Some(0),
    };
    payload.map_or(u64::MAX, |p| p.saturating_add(NPY_HEADER_ALLOWANCE))
}

/// Reads a `.npy` argument file, refusing one larger than `limit` bytes before reading it.
fn read_npy_bounded(path: &Path, limit: u64) -> Result<(ArrayLiteral, NpyDtype), IoError> {
    if let Ok(meta) = std::fs::metadata(path) {
        if meta.is_file() && meta.len() > limit {
            return Err(IoError::new(format!(
                "{}: {} bytes, more than the {limit} bytes its parameter can hold (its payload \
                 plus a .npy header)",
                path.display(),
                meta.len()
            )));
        }
    }
    npy::read_file(path)
}

/// Member names for a message: the first few, each shortened, then how many more.
fn name_list(names: &[String]) -> String {
    const SHOWN: usize = 10;
    let mut parts: Vec<String> = names.iter().take(SHOWN).map(|n| excerpt(n)).collect();
    if names.len() > SHOWN {
        parts.push(format!("... and {} more", names.len() - SHOWN));
    }
    parts.join(", ")
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
/// (the layout of `xla_oracle.py run --replicas N`). Indices have no leading zeros; any other
/// member, a device beyond the program's, or a shared `arg{j}` that every device overrides is
/// an error. Each member unpacks to at most its parameter's bytes plus a `.npy` header, and is
/// checked like [`read_args`].
pub fn read_device_args(
    m: &Module,
    path: &Path,
    devices: usize,
) -> Result<Vec<Vec<ArrayLiteral>>, IoError> {
    read_device_args_range(m, path, devices, 0..devices)
}

/// [`read_device_args`] for the devices `wanted` only (the whole file is still checked), so
/// that the block of devices one MPI rank runs is read without the others'.
pub fn read_device_args_range(
    m: &Module,
    path: &Path,
    devices: usize,
    wanted: std::ops::Range<usize>,
) -> Result<Vec<Vec<ArrayLiteral>>, IoError> {
    let params = entry_parameters(m);
    let shown = path.display().to_string();
    let mut zip = open_archive(path)?;
    let names: Vec<String> = zip.file_names().map(str::to_string).collect();
    let mut present = std::collections::HashSet::new();
    let mut unknown = Vec::new();
    for name in &names {
        let stem = name.strip_suffix(".npy");
        let (device, arg) = match stem.map(|s| s.split_once('/')) {
            None => (None, None),
            Some(None) => (Some(None), stem.and_then(|s| parse_index(s, "arg"))),
            Some(Some((d, rest))) => (parse_index(d, "d").map(Some), parse_index(rest, "arg")),
        };
        match (device, arg) {
            (Some(Some(dev)), Some(_)) if dev >= devices => {
                return Err(IoError::new(format!(
                    "{shown} holds '{}' for device {dev}, but the program runs on {devices} \
                     device(s) (devices 0..{})",
                    excerpt(stem.unwrap_or(name)),
                    devices.saturating_sub(1)
                )))
            }
            (Some(_), Some(j)) if j < params.len() => {
                present.insert(stem.unwrap_or_default().to_string());
            }
            _ => unknown.push(name.clone()),
        }
    }
    if !unknown.is_empty() {
        return Err(IoError::new(format!(
            "{shown} holds arrays that are no argument: [{}]; expected 'd<device>/arg<j>' \
             (device < {devices}) or 'arg<j>' for every device, with j < {} and no leading \
             zeros, each stored as a .npy member; {}",
            name_list(&unknown),
            params.len(),
            expected_list(&params)
        )));
    }
    for j in 0..params.len() {
        let shared = format!("arg{j}");
        if devices > 0
            && present.contains(&shared)
            && (0..devices).all(|d| present.contains(&format!("d{d}/arg{j}")))
        {
            return Err(IoError::new(format!(
                "{shown}: '{shared}' is never used: every device has its own 'd<device>/{shared}'"
            )));
        }
    }
    let mut cache: std::collections::HashMap<String, (ArrayLiteral, NpyDtype)> =
        std::collections::HashMap::new();
    let mut out = Vec::with_capacity(wanted.len());
    for d in wanted.start..wanted.end.min(devices) {
        let mut given = Vec::with_capacity(params.len());
        for (j, (_, pshape)) in params.iter().enumerate() {
            let own = format!("d{d}/arg{j}");
            let shared = format!("arg{j}");
            let stem = if present.contains(&own) {
                own
            } else if present.contains(&shared) {
                shared
            } else {
                return Err(IoError::new(format!(
                    "{shown}: no array '{own}' or '{shared}' for argument {j} of device {d}; {}",
                    expected_list(&params)
                )));
            };
            let what = format!("{shown}, array '{stem}'");
            if !cache.contains_key(&stem) {
                let member = format!("{stem}.npy");
                let read = read_member(&mut zip, &shown, &member, member_limit(pshape), &what)?;
                cache.insert(stem.clone(), read);
            }
            let (a, dtype) = &cache[&stem];
            given.push((what, a.clone(), dtype.clone()));
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
    write_device_block_outputs(path, 0, devices)
}

/// [`write_device_outputs`] for the block of devices that starts at device `first` (one MPI
/// rank's, `--out-per-rank`): members keep the global device numbers.
pub fn write_device_block_outputs(
    path: &Path,
    first: usize,
    devices: &[Vec<&ArrayLiteral>],
) -> Result<(), IoError> {
    let named: Vec<(String, &ArrayLiteral)> = devices
        .iter()
        .enumerate()
        .map(|(i, leaves)| (first + i, leaves))
        .flat_map(|(d, leaves)| {
            leaves
                .iter()
                .enumerate()
                .map(move |(k, a)| (format!("d{d}/out{k}"), *a))
        })
        .collect();
    write_npz(path, &named)
}
