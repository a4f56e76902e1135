"""hlosim for JAX functions: lower a function with ``jax.jit(f).lower(...)`` to XLA's HLO
text and run, diff or profile it with hlosim. jax is imported only when one of these is
called; the rest of hlosim works without it."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

import hlosim as _hlosim

__all__ = ["lower", "run", "diff", "profile"]


def _flat_args(args: tuple) -> list:
    """The leaves of ``args`` as numpy arrays of the dtypes JAX lowers them to (float64
    becomes float32 unless jax_enable_x64 is set), in the order of the entry parameters."""
    import jax
    import jax.numpy as jnp

    return [np.asarray(jnp.asarray(leaf)) for leaf in jax.tree_util.tree_leaves(args)]


def lower(f: Callable[..., Any], *example_args: Any) -> "_hlosim.Module":
    """The HLO module of ``jax.jit(f)`` for arguments like ``example_args`` (arrays or
    ``jax.ShapeDtypeStruct``; pytrees are flattened into parameters in order). Unused
    arguments stay parameters (``keep_unused=True``), so the module takes every leaf."""
    import jax

    lowered = jax.jit(f, keep_unused=True).lower(*example_args)
    text = lowered.as_text(dialect="hlo")
    name = getattr(f, "__name__", type(f).__name__)
    return _hlosim._parse(text, f"<jax:{name}>")


def run(f: Callable[..., Any], *args: Any, **options: Any) -> list:
    """Lowers ``f`` for ``args`` and runs it with hlosim on ``args`` (:func:`hlosim.run`;
    keyword ``options`` such as ``mode="device"`` are passed on). Returns the outputs (the
    leaves of ``f``'s result) as numpy arrays."""
    module = lower(f, *args)
    return _hlosim.run(module, _flat_args(args), **options)


def diff(f: Callable[..., Any], *example_args: Any, **options: Any) -> "_hlosim.DiffReport":
    """Lowers ``f`` for arguments shaped like ``example_args`` and diffs the module
    (:func:`hlosim.diff`: reference semantics against the Neuron pipeline on the device
    model, on inputs generated from ``seed``; keyword ``options`` are passed on). The
    example arguments give only shapes and dtypes unless ``use_args=True``, which feeds
    them as the inputs."""
    use_args = bool(options.pop("use_args", False))
    module = lower(f, *example_args)
    if use_args:
        options["args"] = _flat_args(example_args)
    return _hlosim.diff(module, **options)


def profile(f: Callable[..., Any], *example_args: Any, **options: Any) -> dict:
    """Lowers ``f`` for arguments like ``example_args`` and profiles the module on a Neuron
    machine model (:func:`hlosim.profile`)."""
    return _hlosim.profile(lower(f, *example_args), **options)
