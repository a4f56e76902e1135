"""Type stubs of the native module ``hlosim._hlosim`` (src/lib.rs). Use the wrappers in
``hlosim`` rather than this module."""

from typing import List, Optional, Tuple

import numpy as np

ELEMENT_TYPES: dict[str, str]
DEFAULT_MACHINE: str

_Arg = Tuple[np.ndarray, str]
_Out = Tuple[bytearray, str, List[int]]

class Module:
    @property
    def name(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def source(self) -> str: ...
    @property
    def parameters(
        self,
    ) -> List[Tuple[str, Optional[str], Optional[List[int]], str]]: ...
    @property
    def entry_signature(self) -> str: ...
    @property
    def device_count(self) -> int: ...
    def _opt(self, names: List[str]) -> "Module": ...

class _DiffReport:
    @property
    def passed(self) -> bool: ...
    def json(self) -> str: ...
    def render(self) -> str: ...
    def html(self) -> str: ...

def parse_text(text: str, source: str) -> Tuple[Module, List[str]]: ...
def neuron_pipeline() -> List[str]: ...
def passes() -> List[Tuple[str, str, str]]: ...
def xla_cpu() -> Tuple[str, int, str]: ...
def run(
    module: Module,
    args: List[List[_Arg]],
    *,
    mode: str,
    passes: List[str],
    machine_name: Optional[str],
    replicas: Optional[int],
    auto_cast_mode: Optional[str],
    auto_cast_type: str,
    stochastic_rounding_seed: Optional[int],
    chooser_name: str,
    max_memory: Optional[int],
    max_iterations: Optional[int],
    excess_precision: bool,
    fma_contraction: bool,
    dot_accumulation: str,
    xla_host: str,
    xla_threads: Optional[int],
    xla_caches: Optional[str],
    fusion: bool,
) -> List[List[_Out]]: ...
def generate_inputs(
    module: Module, seed: int, edge_fraction: float, device: int
) -> List[_Out]: ...
def run_diff(
    module: Module,
    *,
    args: Optional[List[List[_Arg]]],
    seed: int,
    edge_fraction: float,
    passes: List[str],
    machine_name: str,
    replicas: Optional[int],
    tolerances: List[str],
    strict: bool,
    examples: int,
    precision_report: bool,
    auto_cast_mode: Optional[str],
    auto_cast_type: str,
    stochastic_rounding_seed: Optional[int],
    max_memory: Optional[int],
    max_iterations: Optional[int],
    inputs_description: Optional[str],
) -> _DiffReport: ...
def run_profile(
    module: Module,
    *,
    passes: List[str],
    machine_name: str,
    chooser_name: str,
    replicas: Optional[int],
    auto_cast_mode: Optional[str],
    auto_cast_type: str,
    stochastic_rounding_seed: Optional[int],
) -> str: ...
