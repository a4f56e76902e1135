"""hlosim from Python: parse XLA HLO text, run it with reference XLA semantics or on the
Neuron device model, diff the two, and profile it, with numpy arrays in and out.

Every function is a thin layer over the same library calls as the ``hlosim`` command line,
with the same defaults, so results are bit for bit the CLI's and ``diff(...).to_dict()`` is
the CLI's ``hlosim diff --json``. bf16 arrays are ``ml_dtypes.bfloat16``. The GIL is
released while simulating.

>>> import hlosim, numpy as np
>>> m = hlosim.parse("model.hlo")                      # doctest: +SKIP
>>> outs = hlosim.run(m, [np.ones((4, 8), np.float32)]) # doctest: +SKIP
>>> hlosim.diff(m, seed=0).passed                       # doctest: +SKIP
"""

from __future__ import annotations

import html as _html
import json as _json
import os as _os
import warnings as _warnings
from typing import Any, Mapping, Optional, Sequence, Union

import ml_dtypes as _ml_dtypes
import numpy as np

from . import _hlosim
from ._errors import ArgumentError, HlosimError, ParseError, VerifyError

__all__ = [
    "Module",
    "DiffReport",
    "parse",
    "run",
    "diff",
    "profile",
    "generate_inputs",
    "passes",
    "xla_cpu",
    "NEURON_PIPELINE",
    "HlosimError",
    "ParseError",
    "VerifyError",
    "ArgumentError",
]

__version__ = "0.1.0"

#: The pass names of ``pipeline="neuron"`` (``hlosim opt --pipeline neuron``).
NEURON_PIPELINE: tuple = tuple(_hlosim.neuron_pipeline())

PathLike = Union[str, "_os.PathLike[str]"]


def passes() -> list:
    """Every known pass as ``(order, name, description)`` (``hlosim opt --list``)."""
    return [tuple(p) for p in _hlosim.passes()]


def xla_cpu() -> dict:
    """The XLA:CPU whose summation orders :func:`run` copies here by default, as a dict with
    the keyword names of :func:`run` (and the keys of a fixture's ``meta.json``):
    ``xla_host`` (the host kind), ``xla_threads`` (XLA:CPU's intra-op threads: ``PJRT_NPROC``,
    else ``NPROC``, else the CPUs this process may run on) and ``xla_caches`` (``"L1,L2,L3"``
    as Eigen reads them with CPUID). Same as ``hlosim host --json``. Pass it to another
    process's ``run(..., **xla_cpu)`` to copy this host's XLA:CPU there."""
    host, threads, caches = _hlosim.xla_cpu()
    return {"xla_host": host, "xla_threads": threads, "xla_caches": caches}


# ---------------------------------------------------------------------------------------
# Module
# ---------------------------------------------------------------------------------------


class Module:
    """A parsed and verified HLO module. Immutable: :meth:`opt` returns a new module.

    Create one with :func:`parse`."""

    __slots__ = ("_m",)

    def __init__(self, native: Any) -> None:
        if not isinstance(native, _hlosim.Module):
            raise TypeError("use hlosim.parse(text_or_path) to make a Module")
        self._m = native

    @property
    def name(self) -> str:
        """The module's name (its ``HloModule`` line)."""
        return self._m.name

    @property
    def text(self) -> str:
        """The module as canonical HLO text (what ``hlosim parse`` prints)."""
        return self._m.text

    @property
    def source(self) -> str:
        """Where the module came from (its path, ``<string>`` or ``<jax:f>``), as error
        messages name it."""
        return self._m.source

    @property
    def entry_signature(self) -> str:
        """The entry computation's signature, ``(name: shape, ...) -> shape``."""
        return self._m.entry_signature

    @property
    def parameters(self) -> list:
        """The entry parameters as ``(name, dtype, shape)``: dtype a numpy dtype (bf16 as
        ``ml_dtypes.bfloat16``) and shape a tuple, both None for a tuple or token
        parameter."""
        out = []
        for name, dtype, dims, _text in self._m.parameters:
            out.append(
                (
                    name,
                    None if dtype is None else _np_dtype(dtype),
                    None if dims is None else tuple(dims),
                )
            )
        return out

    @property
    def device_count(self) -> int:
        """The devices the module implies (header ``replica_count``, else 1 + the largest
        device id its replica groups name, else 1): the default of ``replicas``."""
        return self._m.device_count

    def opt(
        self,
        passes: Optional[Sequence[str]] = None,
        *,
        pipeline: Optional[str] = None,
    ) -> "Module":
        """The module after running ``passes`` (pass names, in order) or the named
        ``pipeline`` (``"neuron"``), as ``hlosim opt`` does. Raises :class:`ArgumentError`
        for an unknown pass and :class:`HlosimError` when a pass fails."""
        if passes is None and pipeline is None:
            raise ArgumentError("give passes=[...] or pipeline='neuron'")
        return Module(self._m._opt(_pass_names(pipeline, passes, "opt")))

    def __repr__(self) -> str:
        return f"<hlosim.Module {self.name} {self.entry_signature}>"

    def __str__(self) -> str:
        return self.text


def parse(text_or_path: Union[str, "_os.PathLike[str]", bytes]) -> Module:
    """Parses and verifies an HLO module: HLO text, or the path of a file holding it (a
    ``str`` is text when it has a newline or starts with ``HloModule``, else a path; a
    ``pathlib.Path`` is always a path). A UTF-8 byte-order mark is skipped. Verifier
    warnings are issued as :class:`UserWarning`.

    Raises :class:`ParseError` (with ``.line`` and ``.column``) for text that does not
    parse, :class:`VerifyError` for a module that is not well formed, and ``OSError`` for a
    file that cannot be read."""
    if isinstance(text_or_path, bytes):
        text, source = text_or_path.decode("utf-8"), "<string>"
    elif isinstance(text_or_path, _os.PathLike) or (
        isinstance(text_or_path, str)
        and "\n" not in text_or_path
        and not text_or_path.lstrip("\ufeff \t\r").startswith("HloModule")
    ):
        source = _os.fspath(text_or_path)
        with open(source, encoding="utf-8") as f:
            text = f.read()
    elif isinstance(text_or_path, str):
        text, source = text_or_path, "<string>"
    else:
        raise TypeError(
            f"parse takes HLO text or a path, not {type(text_or_path).__name__}"
        )
    return _parse(text, source)


def _parse(text: str, source: str) -> Module:
    native, warnings = _hlosim.parse_text(text, source)
    for w in warnings:
        _warnings.warn(w, UserWarning, stacklevel=3)
    return Module(native)


def _module(m: Union[Module, str, "_os.PathLike[str]"]) -> Module:
    return m if isinstance(m, Module) else parse(m)


def _pass_names(
    pipeline: Optional[str], passes: Optional[Sequence[str]], what: str
) -> list:
    if passes is not None and pipeline is not None:
        raise ArgumentError(f"{what}: give pipeline= or passes=, not both")
    if passes is not None:
        if isinstance(passes, str):
            passes = [p for p in passes.split(",") if p]
        return [str(p) for p in passes]
    if pipeline is None:
        return []
    if pipeline != "neuron":
        raise ArgumentError(f"{what}: the only pipeline is 'neuron', not {pipeline!r}")
    return list(NEURON_PIPELINE)


# ---------------------------------------------------------------------------------------
# Arrays
# ---------------------------------------------------------------------------------------

def _np_dtype(name: str) -> np.dtype:
    """The numpy dtype of a dtype name, ml_dtypes' (``bfloat16``, ``float8_e4m3fn``, ...)
    included."""
    try:
        return np.dtype(getattr(_ml_dtypes, name))
    except AttributeError:
        return np.dtype(name)


def _as_array(a: Any, dtype: Optional[np.dtype]) -> np.ndarray:
    """``a`` as a C-contiguous, native-byte-order ndarray, copied only when it is not one
    already. Python scalars and lists take the parameter's dtype."""
    if isinstance(a, np.ndarray):
        arr = a
    elif hasattr(a, "dtype") or hasattr(a, "__array__"):
        arr = np.asarray(a)  # jax arrays, numpy scalars, ...
    else:
        arr = np.asarray(a, dtype=dtype)
    if not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    if not arr.flags.c_contiguous:
        arr = np.array(arr, order="C", copy=True)
    return arr


def _arguments(module: Module, args: Any, per_device: Any = None) -> list:
    """Arguments as the native module takes them: a list per device (one list for every
    device), each of (array, dtype name)."""
    if per_device is not None:
        if args is not None:
            raise ArgumentError("give args= or per_device_args=, not both")
        lists = [list(a) for a in per_device]
        if not lists:
            raise ArgumentError("per_device_args is empty")
    else:
        if isinstance(args, np.ndarray):
            raise ArgumentError(
                "args must be a sequence of arrays (one per parameter), not one array"
            )
        lists = [list(args or [])]
    params = module._m.parameters
    out = []
    for lst in lists:
        row = []
        for i, a in enumerate(lst):
            dtype = (
                _np_dtype(params[i][1])
                if i < len(params) and params[i][1] is not None
                else None
            )
            arr = _as_array(a, dtype)
            row.append((arr, arr.dtype.name))
        out.append(row)
    return out


def _outputs(leaves: list) -> list:
    return [
        np.frombuffer(buf, dtype=_np_dtype(dtype)).reshape(tuple(dims))
        for buf, dtype, dims in leaves
    ]


def generate_inputs(
    module: Union[Module, PathLike],
    *,
    seed: int = 0,
    edge_fraction: float = 0.0625,
    device: int = 0,
) -> list:
    """The inputs ``hlosim diff --seed SEED --edge-fraction F`` feeds device ``device``
    (seed + device·2^32), as numpy arrays in parameter order."""
    m = _module(module)
    return _outputs(_hlosim.generate_inputs(m._m, seed, edge_fraction, device))


# ---------------------------------------------------------------------------------------
# run
# ---------------------------------------------------------------------------------------


def run(
    module: Union[Module, PathLike],
    args: Optional[Sequence[Any]] = None,
    *,
    mode: str = "reference",
    pipeline: Optional[str] = None,
    passes: Optional[Sequence[str]] = None,
    machine: Optional[str] = None,
    replicas: Optional[int] = None,
    auto_cast: Optional[str] = None,
    auto_cast_type: str = "bf16",
    stochastic_rounding_seed: Optional[int] = None,
    chooser: str = "first-fit",
    max_memory: Optional[int] = None,
    max_iterations: Optional[int] = None,
    excess_precision: bool = True,
    fma_contraction: bool = True,
    dot_accumulation: str = "xla-cpu",
    xla_host: str = "auto",
    xla_threads: Optional[int] = None,
    xla_caches: Optional[str] = None,
    fusion: bool = True,
    per_device_args: Optional[Sequence[Sequence[Any]]] = None,
) -> list:
    """Executes ``module`` on ``args`` and returns its outputs (the root's tuple leaves) as
    numpy arrays: ``hlosim run``.

    ``args``: one array per entry parameter, in order, of exactly the parameter's dtype
    (bf16: ``ml_dtypes.bfloat16``) and shape; Python scalars and lists take the
    parameter's dtype. A C-contiguous array is read in place, without a copy. With several
    devices, ``args`` go to every device, or ``per_device_args[d]`` to device d.

    ``mode``: ``"reference"`` (XLA semantics) or ``"device"`` (the Neuron device model,
    which defaults to ``auto_cast="matmult"`` like ``hlosim run --mode device``).
    ``pipeline="neuron"`` or ``passes=[...]`` transform the module first. ``replicas``:
    simulated devices (default: what the module implies, as in the CLI); with more than
    one, the result is a list of per-device output lists. ``machine`` (trn1, trn2, trn3 or
    a TOML path), ``auto_cast*``, ``chooser``, ``max_memory`` (bytes),
    ``max_iterations``, ``excess_precision``, ``fma_contraction``, ``dot_accumulation``
    (``"xla-cpu"`` or ``"f64"``), ``xla_host`` (``"auto"``, ``"avx512"``,
    ``"sapphire-rapids"`` or ``"sapphire-rapids-no-amx"``), ``xla_threads`` (default: as
    XLA:CPU counts them here, ``PJRT_NPROC``, ``NPROC`` or the CPUs this process may use),
    ``xla_caches`` (``"L1,L2,L3"`` such as ``"48K,2M,260M"``; default: what Eigen reads on
    this CPU) and ``fusion`` are the CLI's options of the same names.

    Raises :class:`ArgumentError` (a ``ValueError`` naming the parameter) for arguments of
    the wrong number, dtype or shape, and :class:`HlosimError` when the run fails."""
    m = _module(module)
    names = _pass_names(pipeline, passes, "run")
    per_device = _hlosim.run(
        m._m,
        _arguments(m, args, per_device_args),
        mode=mode,
        passes=names,
        machine_name=machine,
        replicas=replicas,
        auto_cast_mode=auto_cast,
        auto_cast_type=auto_cast_type,
        stochastic_rounding_seed=stochastic_rounding_seed,
        chooser_name=chooser,
        max_memory=max_memory,
        max_iterations=max_iterations,
        excess_precision=excess_precision,
        fma_contraction=fma_contraction,
        dot_accumulation=dot_accumulation,
        xla_host=xla_host,
        xla_threads=xla_threads,
        xla_caches=xla_caches,
        fusion=fusion,
    )
    outs = [_outputs(leaves) for leaves in per_device]
    return outs[0] if len(outs) == 1 else outs


# ---------------------------------------------------------------------------------------
# diff
# ---------------------------------------------------------------------------------------


class DiffReport:
    """The report of :func:`diff`: ``hlosim diff``'s report. ``to_dict()`` is the CLI's
    ``--json`` (schema in docs/diff.md), ``str()`` its text, and in a notebook it shows as
    the CLI's ``--html`` page."""

    __slots__ = ("_r", "_dict")

    def __init__(self, native: Any) -> None:
        self._r = native
        self._dict: dict = _json.loads(native.json())

    @property
    def passed(self) -> bool:
        """Whether every output is within tolerance (or only amplified, unless strict) and
        nothing error-level happened."""
        return bool(self._dict["passed"])

    @property
    def outputs(self) -> list:
        """Per output: shape, error metrics, tolerance and verdict (dicts, as in the JSON)."""
        return self._dict["outputs"]

    @property
    def first_divergence(self) -> Optional[dict]:
        """The first instruction whose device values are beyond tolerance and not explained
        by its operands, or None."""
        return self._dict["first_divergence"]

    @property
    def findings(self) -> list:
        """The device model's findings (dicts, as in the JSON)."""
        return self._dict["findings"]

    def to_dict(self) -> dict:
        """The report as ``hlosim diff --json`` prints it, parsed (a fresh copy)."""
        return _json.loads(self._r.json())

    def to_json(self) -> str:
        """The report as ``hlosim diff --json`` prints it."""
        return self._r.json()

    def html(self) -> str:
        """The report as the self-contained HTML page ``hlosim diff --html`` writes
        (without the device timeline)."""
        return self._r.html()

    def _repr_html_(self) -> str:
        # The page is a whole document with its own style sheet: an iframe keeps its styles
        # from leaking into the notebook.
        page = _html.escape(self._r.html(), quote=True)
        return (
            f'<iframe srcdoc="{page}" style="width:100%;height:600px;border:0" '
            f'title="hlosim diff {_html.escape(self._dict["module"])}"></iframe>'
        )

    def __str__(self) -> str:
        return self._r.render()

    def __repr__(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        return f"<hlosim.DiffReport {self._dict['module']}: {verdict}>"


def diff(
    module: Union[Module, PathLike],
    *,
    seed: int = 0,
    args: Optional[Sequence[Any]] = None,
    pipeline: Optional[str] = "neuron",
    passes: Optional[Sequence[str]] = None,
    machine: str = "trn1",
    edge_fraction: float = 0.0625,
    replicas: Optional[int] = None,
    tolerances: Union[None, Mapping[str, str], Sequence[str]] = None,
    strict: bool = False,
    examples: int = 5,
    precision_report: bool = False,
    auto_cast: Optional[str] = None,
    auto_cast_type: str = "bf16",
    stochastic_rounding_seed: Optional[int] = None,
    max_memory: Optional[int] = None,
    max_iterations: Optional[int] = None,
    inputs_description: Optional[str] = None,
    per_device_args: Optional[Sequence[Sequence[Any]]] = None,
) -> DiffReport:
    """Runs ``module`` with reference semantics and its copy transformed by ``pipeline``
    (or ``passes``, which take precedence) on the device model, on the same inputs, and
    compares them: ``hlosim diff``.

    Inputs: generated from ``seed`` with ``edge_fraction`` edge cases (the CLI's inputs for
    the same seed; device d uses seed + d·2^32), or ``args`` / ``per_device_args`` (arrays
    as for :func:`run`).
    ``tolerances``: overrides as ``{"bf16": "2ulp"}`` or ``["bf16=2ulp"]`` (the CLI's
    ``--tolerance``). ``auto_cast`` defaults to none, as in the CLI's diff.
    ``inputs_description`` replaces the report's ``inputs`` text (the CLI writes the
    ``--args`` path there).

    A failing comparison is a report that did not pass; :class:`HlosimError` is raised
    only when the diff could not run (e.g. the reference evaluation failed)."""
    m = _module(module)
    names = (
        _pass_names(None, passes, "diff")
        if passes is not None
        else _pass_names(pipeline, None, "diff")
    )
    if tolerances is None:
        tol: list = []
    elif isinstance(tolerances, Mapping):
        tol = [f"{k}={v}" for k, v in tolerances.items()]
    elif isinstance(tolerances, str):
        tol = [t for t in tolerances.split(",") if t]
    else:
        tol = [str(t) for t in tolerances]
    native = _hlosim.run_diff(
        m._m,
        args=(
            None
            if args is None and per_device_args is None
            else _arguments(m, args, per_device_args)
        ),
        seed=seed,
        edge_fraction=edge_fraction,
        passes=names,
        machine_name=machine,
        replicas=replicas,
        tolerances=tol,
        strict=strict,
        examples=examples,
        precision_report=precision_report,
        auto_cast_mode=auto_cast,
        auto_cast_type=auto_cast_type,
        stochastic_rounding_seed=stochastic_rounding_seed,
        max_memory=max_memory,
        max_iterations=max_iterations,
        inputs_description=inputs_description,
    )
    return DiffReport(native)


# ---------------------------------------------------------------------------------------
# profile
# ---------------------------------------------------------------------------------------


def profile(
    module: Union[Module, PathLike],
    *,
    pipeline: Optional[str] = None,
    passes: Optional[Sequence[str]] = None,
    machine: str = "trn1",
    chooser: str = "first-fit",
    replicas: Optional[int] = None,
    auto_cast: Optional[str] = None,
    auto_cast_type: str = "bf16",
    stochastic_rounding_seed: Optional[int] = None,
) -> dict:
    """The module's estimated time on a Neuron machine model (per engine, costliest
    instructions, activation table loads) as ``hlosim profile --json`` prints it, parsed.
    ``auto_cast`` defaults to ``"matmult"``, as in the CLI's profile."""
    m = _module(module)
    text = _hlosim.run_profile(
        m._m,
        passes=_pass_names(pipeline, passes, "profile"),
        machine_name=machine,
        chooser_name=chooser,
        replicas=replicas,
        auto_cast_mode=auto_cast,
        auto_cast_type=auto_cast_type,
        stochastic_rounding_seed=stochastic_rounding_seed,
    )
    return _json.loads(text)


# ``hlosim.jax`` imports jax only when one of its functions is called.
from . import jax  # noqa: E402
