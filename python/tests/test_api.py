"""The Python API on its own: parsing, errors, argument checks, arrays in and out."""

from __future__ import annotations

import pathlib
import threading

import ml_dtypes
import numpy as np
import pytest

import hlosim
from conftest import SAMPLES

ADD = """HloModule add_mul

ENTRY main {
  x = f32[2,3] parameter(0)
  y = bf16[3] parameter(1)
  yc = f32[3] convert(y)
  yb = f32[2,3] broadcast(yc), dimensions={1}
  s = f32[2,3] add(x, yb)
  h = bf16[2,3] convert(s)
  ROOT t = (f32[2,3], bf16[2,3]) tuple(s, h)
}
"""


def test_parse_text_and_properties():
    m = hlosim.parse(ADD)
    assert m.name == "add_mul"
    assert m.source == "<string>"
    assert m.entry_signature == "(x: f32[2,3], y: bf16[3]) -> (f32[2,3], bf16[2,3])"
    assert m.parameters == [
        ("x", np.dtype(np.float32), (2, 3)),
        ("y", np.dtype(ml_dtypes.bfloat16), (3,)),
    ]
    assert m.device_count == 1
    # canonical text parses back to the same text
    assert hlosim.parse(m.text).text == m.text


def test_parse_path_and_pathlike():
    p = SAMPLES / "bert_mlp_gelu.hlo"
    a = hlosim.parse(p)
    b = hlosim.parse(str(p))
    assert a.source == str(p) and b.text == a.text


def test_run_hand_computed_values_f32_and_bf16():
    m = hlosim.parse(ADD)
    x = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32)
    y = np.array([0.5, 1.0, 256.0], ml_dtypes.bfloat16)
    s, h = hlosim.run(m, [x, y])
    assert s.dtype == np.float32 and h.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(s, [[1.5, 3.0, 259.0], [4.5, 6.0, 262.0]])
    # bf16 has 8 significant bits: between 256 and 512 its values are 2 apart, so 259 is a
    # tie between 258 and 260 and rounds to the even significand, 260; 262 is exact
    np.testing.assert_array_equal(h.astype(np.float32), [[1.5, 3.0, 260.0], [4.5, 6.0, 262.0]])
    assert s.flags.writeable and s.flags.c_contiguous


def test_run_accepts_non_contiguous_and_big_endian_and_lists():
    m = hlosim.parse(ADD)
    x = np.arange(6, dtype=np.float32).reshape(3, 2).T  # Fortran order
    y = np.array([1, 2, 3], dtype=">f4").astype(ml_dtypes.bfloat16)
    (s, _) = hlosim.run(m, [x, y])
    np.testing.assert_array_equal(s, x + np.array([1, 2, 3], np.float32))
    xb = np.ascontiguousarray(x).astype(">f4")
    (s2, _) = hlosim.run(m, [xb, [1.0, 2.0, 3.0]])
    np.testing.assert_array_equal(s2, s)


def test_malformed_module_raises_parse_error_with_line_and_column():
    text = "HloModule m\n\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT r = f32[2] add(p, q\n}\n"
    with pytest.raises(hlosim.ParseError) as e:
        hlosim.parse(text)
    assert isinstance(e.value, ValueError)
    assert (e.value.line, e.value.column) >= (5, 1)
    assert str(e.value).startswith(f"<string>:{e.value.line}:{e.value.column}: ")


def test_parse_error_location_is_exact():
    # the unknown opcode starts at line 4, column 19
    text = "HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT r = f32[2] frobnicate(p)\n}\n"
    with pytest.raises(hlosim.ParseError) as e:
        hlosim.parse(text)
    assert (e.value.line, e.value.column) == (4, 19)


def test_verify_error():
    text = "HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT r = f32[3] negate(p)\n}\n"
    with pytest.raises(hlosim.VerifyError):
        hlosim.parse(text)


def test_wrong_dtype_names_the_parameter():
    m = hlosim.parse(ADD)
    x = np.zeros((2, 3), np.float64)
    y = np.zeros(3, ml_dtypes.bfloat16)
    with pytest.raises(ValueError, match=r"parameter 0 \('x'\)") as e:
        hlosim.run(m, [x, y])
    assert "float64" in str(e.value) and "float32" in str(e.value)
    with pytest.raises(ValueError, match=r"parameter 1 \('y'\)"):
        hlosim.run(m, [x.astype(np.float32), np.zeros(3, np.float32)])


def test_wrong_shape_names_the_parameter():
    m = hlosim.parse(ADD)
    with pytest.raises(ValueError, match=r"parameter 1 \('y'\)") as e:
        hlosim.run(m, [np.zeros((2, 3), np.float32), np.zeros(4, ml_dtypes.bfloat16)])
    assert "(4,)" in str(e.value) and "(3,)" in str(e.value)


def test_wrong_argument_count():
    m = hlosim.parse(ADD)
    with pytest.raises(ValueError, match="1 argument"):
        hlosim.run(m, [np.zeros((2, 3), np.float32)])


def test_bad_options_are_value_errors():
    m = hlosim.parse(ADD)
    args = [np.zeros((2, 3), np.float32), np.zeros(3, ml_dtypes.bfloat16)]
    with pytest.raises(ValueError, match="mode"):
        hlosim.run(m, args, mode="gpu")
    with pytest.raises(ValueError):
        hlosim.run(m, args, passes=["no-such-pass"])
    with pytest.raises(ValueError):
        hlosim.diff(m, machine="trn99")
    with pytest.raises(ValueError):
        m.opt(pipeline="llvm")


def test_evaluation_failure_is_hlosim_error():
    text = """HloModule loop
cond {
  c = s32[] parameter(0)
  ROOT t = pred[] constant(true)
}
body {
  b = s32[] parameter(0)
  one = s32[] constant(1)
  ROOT n = s32[] add(b, one)
}
ENTRY e {
  z = s32[] constant(0)
  ROOT w = s32[] while(z), condition=cond, body=body
}
"""
    m = hlosim.parse(text)
    with pytest.raises(hlosim.HlosimError, match="iteration"):
        hlosim.run(m, [], max_iterations=100)


def test_scalar_parameter_and_pred_output():
    text = "HloModule s\nENTRY e {\n  a = f32[] parameter(0)\n  z = f32[] constant(0)\n  ROOT g = pred[] compare(a, z), direction=GT\n}\n"
    m = hlosim.parse(text)
    (g,) = hlosim.run(m, [np.float32(2.5)])
    assert g.shape == () and g.dtype == np.bool_ and bool(g) is True
    (g,) = hlosim.run(m, [-1.0])
    assert bool(g) is False


def test_diff_report_api():
    r = hlosim.diff(SAMPLES / "bert_mlp_gelu.hlo", seed=2)
    d = r.to_dict()
    assert r.passed is d["passed"]
    assert d["inputs"] == "seed 2 (6.25% edge cases)"
    assert d["passes"] == list(hlosim.NEURON_PIPELINE)
    assert r.findings == d["findings"] and r.first_divergence == d["first_divergence"]
    page = r._repr_html_()
    assert page.startswith("<iframe srcdoc=") and "hlosim diff" in page
    assert r.html().startswith("<!DOCTYPE html>")
    assert "result:" in str(r)


def test_gil_is_released_while_simulating():
    m = hlosim.parse(SAMPLES / "bench_dot_1024.hlo")
    args = hlosim.generate_inputs(m, seed=0)
    ticks = []
    stop = threading.Event()

    def count():
        while not stop.is_set():
            ticks.append(1)
            stop.wait(0.001)

    t = threading.Thread(target=count)
    t.start()
    try:
        before = len(ticks)
        hlosim.run(m, args)
        during = len(ticks) - before
    finally:
        stop.set()
        t.join()
    # a held GIL would let the counter run at most at the interpreter's switch interval
    # boundaries of the call's Python frames: a handful of ticks at most
    assert during > 5


def test_parse_missing_file_is_os_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        hlosim.parse(str(tmp_path / "missing.hlo"))
    # one-line text is still text
    with pytest.raises(hlosim.ParseError) as e:
        hlosim.parse("HloModule m ENTRY {")
    assert e.value.line == 1


def _eval_fixture(name):
    """A recorded XLA:CPU fixture (tests/fixtures/eval/NAME): its module, its arguments in
    order, and XLA:CPU's first output."""
    d = pathlib.Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "eval" / name
    m = hlosim.parse(d.joinpath("module.hlo").read_text())
    with np.load(d / "args.npz") as z:
        args = [z[f"arg{i}"] for i in range(len(z.files))]
    return m, args, np.load(d / "expected.npz")["out0"]


def test_xla_host_picks_whose_convolution_order_is_copied():
    # Recorded with XLA:CPU on a Sapphire Rapids host (tools/fixtures/fx_conv_order.py): its
    # vector epilogue for 31 features left is 8 lanes wide there, 4 on the AVX-512 host.
    m, (x, k), want = _eval_fixture("conv_own_loop_sapphire_rapids_late_eight_lanes")
    (spr,) = hlosim.run(m, [x, k], xla_host="sapphire-rapids")
    (avx512,) = hlosim.run(m, [x, k], xla_host="avx512")
    assert np.array_equal(spr.view(np.uint32), want.view(np.uint32))
    assert not np.array_equal(avx512.view(np.uint32), want.view(np.uint32))
    np.testing.assert_allclose(avx512, want, rtol=1e-5, atol=1e-4 * np.abs(want).max())
    with pytest.raises(ValueError, match="xla_host must be"):
        hlosim.run(m, [x, k], xla_host="skylake")


def test_xla_threads_picks_how_many_threads_xla_cpu_runs_on():
    # Recorded with XLA:CPU's pool at 8 threads (PJRT_NPROC=8): YNNPACK cuts the 6 rows into
    # tiles, which it does not on 2 threads (tools/fixtures/fx_ynn_sum.py).
    m, (x,), want = _eval_fixture("reduce_ynn_threads_8_rows")
    (eight,) = hlosim.run(m, [x], xla_threads=8)
    (two,) = hlosim.run(m, [x], xla_threads=2)
    assert np.array_equal(eight.view(np.uint32), want.view(np.uint32))
    assert not np.array_equal(two.view(np.uint32), want.view(np.uint32))
    np.testing.assert_allclose(two, want, rtol=1e-5)
    with pytest.raises(ValueError, match="xla_threads must be at least 1"):
        hlosim.run(m, [x], xla_threads=0)


def test_xla_caches_picks_which_caches_eigen_blocks_for():
    # Recorded with XLA:CPU on a host with a 32 KiB L1 (tools/fixtures/fx_dot_order.py):
    # Eigen's one-thread depth slices of 1300 terms are 328 long there, 440 with 48 KiB.
    m, (a, b), want = _eval_fixture("dot_order_lhs_transposed")
    (small,) = hlosim.run(m, [a, b], xla_threads=2, xla_caches="32K,2M,260M")
    (large,) = hlosim.run(m, [a, b], xla_threads=2, xla_caches="48K,2M,260M")
    assert np.array_equal(small.view(np.uint32), want.view(np.uint32))
    assert not np.array_equal(large.view(np.uint32), want.view(np.uint32))
    np.testing.assert_allclose(large, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    with pytest.raises(ValueError, match="xla_caches"):
        hlosim.run(m, [a, b], xla_caches="48K,2M")


def test_xla_cpu_names_what_run_copies_by_default(monkeypatch):
    monkeypatch.delenv("NPROC", raising=False)
    monkeypatch.setenv("PJRT_NPROC", "1")
    here = hlosim.xla_cpu()
    assert set(here) == {"xla_host", "xla_threads", "xla_caches"}
    assert here["xla_threads"] == 1
    assert here["xla_host"] in ("avx512", "sapphire-rapids", "sapphire-rapids-no-amx")
    # Its values are run's own keywords, and naming them changes nothing.
    m, (a, b), _ = _eval_fixture("dot_order_lhs_transposed")
    (default,) = hlosim.run(m, [a, b])
    (named,) = hlosim.run(m, [a, b], **here)
    assert np.array_equal(default.view(np.uint32), named.view(np.uint32))
