"""hlosim.jax: a JAX MLP with a gelu, lowered to HLO, run and diffed."""

from __future__ import annotations

import json

import numpy as np
import pytest

import hlosim
import hlosim.jax

jax = pytest.importorskip("jax")
jnp = jax.numpy


def mlp(x, w1, b1, w2):
    return jax.nn.gelu(x @ w1 + b1, approximate=False) @ w2


def _args(dtype=np.float32):
    rng = np.random.default_rng(0)
    return (
        rng.standard_normal((4, 8)).astype(dtype),
        (rng.standard_normal((8, 16)) / 4).astype(dtype),
        rng.standard_normal(16).astype(dtype),
        (rng.standard_normal((16, 2)) / 4).astype(dtype),
    )


def test_lower_gives_the_parameters_in_order():
    m = hlosim.jax.lower(mlp, *_args())
    assert [p[2] for p in m.parameters] == [(4, 8), (8, 16), (16,), (16, 2)]
    assert m.source == "<jax:mlp>"
    assert " erf(" in m.text or "erf" in m.text


def test_jax_run_matches_jax_on_cpu():
    args = _args()
    (ours,) = hlosim.jax.run(mlp, *args)
    theirs = np.asarray(jax.jit(mlp)(*args))
    assert ours.dtype == np.float32 and ours.shape == (4, 2)
    # hlosim's reference semantics are XLA:CPU's; the erf expansion and the dots may still
    # round differently in the last place
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def test_jax_run_bf16():
    import ml_dtypes

    args = tuple(a.astype(ml_dtypes.bfloat16) for a in _args())
    (ours,) = hlosim.jax.run(mlp, *args)
    assert ours.dtype == ml_dtypes.bfloat16
    theirs = np.asarray(jax.jit(mlp)(*args)).astype(np.float32)
    np.testing.assert_allclose(ours.astype(np.float32), theirs, rtol=2e-2, atol=2e-2)


def test_jax_diff_passes_and_equals_cli(cli, tmp_path):
    args = _args()
    r = hlosim.jax.diff(mlp, *args, seed=4)
    assert r.passed
    assert [(o["index"], o["within_tolerance"]) for o in r.outputs] == [(0, True)]
    path = tmp_path / "mlp.hlo"
    path.write_text(hlosim.jax.lower(mlp, *args).text)
    c = cli("diff", path, "--seed", "4", "--json")
    assert r.to_dict() == json.loads(c.stdout)


def test_jax_diff_on_given_args_and_device_run():
    args = _args()
    r = hlosim.jax.diff(mlp, *args, use_args=True)
    assert r.passed
    assert r.to_dict()["inputs"] == "arguments given from Python"
    (dev,) = hlosim.jax.run(mlp, *args, mode="device", pipeline="neuron", auto_cast="none")
    (ref,) = hlosim.jax.run(mlp, *args)
    np.testing.assert_allclose(dev, ref, rtol=1e-3, atol=1e-4)
