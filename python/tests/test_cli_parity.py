"""The Python API against the CLI: same bits from run, same JSON from diff and profile."""

from __future__ import annotations

import json
import os

import ml_dtypes
import numpy as np
import pytest

import hlosim
from conftest import SAMPLES


def _savez(path, arrays):
    np.savez(path, **{f"arg{i}": a for i, a in enumerate(arrays)})


def _load_outputs(path, count):
    """The CLI's out0..outK-1; its bf16 members are numpy void '|V2' (ml_dtypes' way), read
    back as ml_dtypes.bfloat16 bit patterns."""
    with np.load(path) as z:
        assert sorted(z.files) == sorted(f"out{k}" for k in range(count))
        return [z[f"out{k}"] for k in range(count)]


def _same_bits(ours: np.ndarray, theirs: np.ndarray) -> None:
    """The same bits, except that a NaN matches a NaN of any sign and payload: Rust leaves
    those to the compiler (an f64 formula's NaN operand order), so the extension and a CLI
    built at another optimisation level (a release HLOSIM_BIN) may differ there, as
    tests/eval_fixtures.rs allows against XLA:CPU."""
    assert ours.shape == theirs.shape
    assert ours.dtype.itemsize == theirs.dtype.itemsize
    if theirs.dtype.kind == "V":  # bf16 as written by hlosim
        assert ours.dtype == np.dtype(ml_dtypes.bfloat16)
        theirs = theirs.view(ml_dtypes.bfloat16)
    else:
        assert ours.dtype == theirs.dtype
    if ours.dtype.kind in "fc" or ours.dtype == np.dtype(ml_dtypes.bfloat16):
        nan = _nan_mask(ours)
        assert np.array_equal(nan, _nan_mask(theirs))
        ours, theirs = ours[~nan], theirs[~nan]
    assert ours.tobytes() == theirs.tobytes()


def _nan_mask(a: np.ndarray) -> np.ndarray:
    return np.isnan(a.astype(np.complex128 if a.dtype.kind == "c" else np.float64))


def test_run_bert_equals_cli_bit_for_bit(cli, bert, tmp_path):
    m = hlosim.parse(bert)
    args = hlosim.generate_inputs(m, seed=3)
    assert [a.shape for a in args] == [p[2] for p in m.parameters]
    assert any(a.dtype == ml_dtypes.bfloat16 for a in args)
    ours = hlosim.run(m, args)
    _savez(tmp_path / "a.npz", args)
    cli("run", bert, "--args", tmp_path / "a.npz", "--out", tmp_path / "o.npz")
    theirs = _load_outputs(tmp_path / "o.npz", len(ours))
    assert any(o.dtype == ml_dtypes.bfloat16 for o in ours)
    for o, t in zip(ours, theirs):
        _same_bits(o, t)


def test_run_device_mode_equals_cli(cli, tmp_path):
    path = SAMPLES / "bert_mlp_gelu.hlo"
    m = hlosim.parse(path)
    rng = np.random.default_rng(7)
    args = []
    for _, dtype, shape in m.parameters:
        args.append((rng.standard_normal(shape) * 2).astype(dtype))
    ours = hlosim.run(m, args, mode="device", pipeline="neuron")
    _savez(tmp_path / "a.npz", args)
    cli(
        "run", path, "--args", tmp_path / "a.npz", "--out", tmp_path / "o.npz",
        "--mode", "device", "--pipeline", "neuron",
    )
    theirs = _load_outputs(tmp_path / "o.npz", len(ours))
    for o, t in zip(ours, theirs):
        _same_bits(o, t)
    # and the device model is not the reference here (gelu goes through a table)
    ref = hlosim.run(m, args)
    assert any(a.tobytes() != b.tobytes() for a, b in zip(ours, ref))


def test_diff_bert_to_dict_equals_cli_json(cli, bert):
    ours = hlosim.diff(bert, seed=1)
    r = cli("diff", bert, "--seed", "1", "--json")
    assert ours.to_dict() == json.loads(r.stdout)
    assert ours.passed == (r.returncode == 0)
    assert ours.outputs == json.loads(r.stdout)["outputs"]


@pytest.mark.parametrize("name", ["bert_mlp_gelu.hlo", "llama_mlp_silu.hlo", "backward_gelu_silu.hlo"])
def test_diff_samples_equal_cli_json(cli, name):
    path = SAMPLES / name
    for seed in (0, 5):
        ours = hlosim.diff(path, seed=seed, machine="trn2")
        r = cli("diff", path, "--seed", str(seed), "--machine", "trn2", "--json")
        assert ours.to_dict() == json.loads(r.stdout)
        assert str(ours) == cli("diff", path, "--seed", str(seed), "--machine", "trn2").stdout


def test_diff_with_args_equals_cli(cli, tmp_path):
    path = SAMPLES / "bert_mlp_gelu.hlo"
    m = hlosim.parse(path)
    args = hlosim.generate_inputs(m, seed=11, edge_fraction=0.5)
    _savez(tmp_path / "a.npz", args)
    ours = hlosim.diff(m, args=args, inputs_description=str(tmp_path / "a.npz"))
    r = cli("diff", path, "--args", tmp_path / "a.npz", "--json")
    assert ours.to_dict() == json.loads(r.stdout)


def test_profile_equals_cli_json(cli):
    path = SAMPLES / "bert_mlp_gelu.hlo"
    ours = hlosim.profile(path, pipeline="neuron", machine="trn2")
    r = cli("profile", path, "--pipeline", "neuron", "--machine", "trn2", "--json")
    assert ours == json.loads(r.stdout)
    assert ours["total_us"] > 0


def test_opt_text_equals_cli(cli):
    path = SAMPLES / "bert_mlp_gelu.hlo"
    m = hlosim.parse(path)
    assert m.text == cli("parse", path).stdout
    assert m.opt(pipeline="neuron").text == cli("opt", path, "--pipeline", "neuron").stdout
    assert m.opt(["dce"]).text == cli("opt", path, "--passes", "dce").stdout


def test_parse_error_message_is_the_clis(cli, tmp_path):
    bad = tmp_path / "bad.hlo"
    bad.write_text("HloModule m\n\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT r = f32[2] bogus(p)\n}\n")
    with pytest.raises(hlosim.ParseError) as e:
        hlosim.parse(bad)
    r = cli("parse", bad, check=False)
    assert r.returncode == 2
    assert r.stderr.strip() == f"error: {e.value}"


ALL_REDUCE = """HloModule ar, replica_count=2
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  p = f32[3] parameter(0)
  ROOT r = f32[3] all-reduce(p), replica_groups={{0,1}}, to_apply=add
}
"""


def test_two_devices_equal_cli(cli, tmp_path):
    path = tmp_path / "ar.hlo"
    path.write_text(ALL_REDUCE)
    m = hlosim.parse(path)
    assert m.device_count == 2
    a0 = np.array([1, 2, 3], np.float32)
    a1 = np.array([10, 20, 30], np.float32)
    ours = hlosim.run(m, per_device_args=[[a0], [a1]])
    for device in ours:
        np.testing.assert_array_equal(device[0], [11, 22, 33])  # the sum over devices
    np.savez(tmp_path / "a.npz", **{"d0/arg0": a0, "d1/arg0": a1})
    cli("run", path, "--args", tmp_path / "a.npz", "--out", tmp_path / "o.npz")
    with np.load(tmp_path / "o.npz") as z:
        assert sorted(z.files) == ["d0/out0", "d1/out0"]
        for d in range(2):
            _same_bits(ours[d][0], z[f"d{d}/out0"])
    # generated inputs: device d uses seed + d*2^32, as in the CLI
    r = cli("diff", path, "--seed", "9", "--json")
    assert hlosim.diff(m, seed=9).to_dict() == json.loads(r.stdout)


def test_xla_cpu_equals_cli_host_json(cli, monkeypatch):
    # Both read PJRT_NPROC afresh (the CLI inherits this process's environment).
    monkeypatch.delenv("NPROC", raising=False)
    monkeypatch.setenv("PJRT_NPROC", "3")
    ours = hlosim.xla_cpu()
    assert ours["xla_threads"] == 3
    assert ours == json.loads(cli("host", "--json").stdout)
    monkeypatch.delenv("PJRT_NPROC")
    assert hlosim.xla_cpu() == json.loads(cli("host", "--json").stdout)
    assert hlosim.xla_cpu()["xla_threads"] == len(os.sched_getaffinity(0))
