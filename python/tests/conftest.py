"""Shared fixtures: where the repository, the corpus and the CLI binary are."""

from __future__ import annotations

import os
import pathlib
import subprocess

import pytest

PYTHON_DIR = pathlib.Path(__file__).resolve().parent.parent
REPO = PYTHON_DIR.parent
SAMPLES = REPO / "models" / "hlo"
CORPUS = REPO.parent / "shared" / "corpus" / "real"
BERT = CORPUS / "wenboqian__bert_single_device_training_fwd_bwd.hlo"


def _find_cli() -> pathlib.Path | None:
    env = os.environ.get("HLOSIM_BIN")
    if env:
        return pathlib.Path(env)
    for p in (REPO / "target" / "debug" / "hlosim", REPO / "target" / "release" / "hlosim"):
        if p.is_file():
            return p
    return None


@pytest.fixture(scope="session")
def cli():
    """A function running the hlosim CLI: cli(*args) -> CompletedProcess (text mode)."""
    exe = _find_cli()
    if exe is None or not exe.is_file():
        # In CI `cargo test` builds target/debug/hlosim before these tests run; a missing
        # binary there is a failure, not a skip.
        if os.environ.get("CI"):
            pytest.fail("the hlosim CLI is not built (target/debug/hlosim; set HLOSIM_BIN)")
        pytest.skip("the hlosim CLI is not built (set HLOSIM_BIN)")

    def call(*args: str, check: bool = True) -> subprocess.CompletedProcess:
        r = subprocess.run(
            [str(exe), *map(str, args)], capture_output=True, text=True, timeout=600
        )
        if check and r.returncode not in (0, 1):
            raise AssertionError(f"hlosim {' '.join(map(str, args))}: {r.stderr}")
        return r

    return call


@pytest.fixture(scope="session")
def bert():
    """The corpus's single-device BERT training step (fwd + bwd, bf16)."""
    if not BERT.is_file():
        if os.environ.get("CI"):
            pytest.fail(f"{BERT} is missing")
        pytest.skip(f"{BERT} is missing")
    return BERT
