"""The exceptions hlosim raises (the native module creates them by name from here)."""

from __future__ import annotations

__all__ = ["HlosimError", "ParseError", "VerifyError", "ArgumentError"]


class HlosimError(RuntimeError):
    """A run, diff, profile or pass stopped: the evaluator, the device model or a pass failed,
    or a resource limit (memory budget, ``while`` iteration bound) was reached. The message
    is the CLI's."""


class ParseError(ValueError):
    """HLO text that does not parse. ``line`` and ``column`` (from 1) locate the error; the
    message is the CLI's (``<source>:<line>:<column>: <what>``)."""

    line: int
    column: int

    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(message)
        self.line = line
        self.column = column

    def __reduce__(self):  # keeps line and column through pickling (multiprocessing)
        return (type(self), (str(self), self.line, self.column))


class VerifyError(ValueError):
    """A module that parses but is not well formed (the verifier's message, as the CLI
    prints it)."""


class ArgumentError(ValueError):
    """A bad argument or option: an array of the wrong dtype or shape (the message names the
    parameter), an unknown pass, machine or mode."""
