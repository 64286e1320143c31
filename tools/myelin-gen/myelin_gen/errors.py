# Error reporting for myelin-gen: every problem becomes one line
# `file:line: error: message`, collected in order and printed together.

from __future__ import annotations

import sys
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Diagnostic:
    file: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: error: {self.message}"


@dataclass
class ErrorSink:
    """Collects diagnostics, dropping exact duplicates, keeping first-seen order."""

    diagnostics: list[Diagnostic] = field(default_factory=list)
    _seen: set[Diagnostic] = field(default_factory=set)

    def error(self, file: str, line: int, message: str) -> None:
        diag = Diagnostic(file, line, message)
        if diag not in self._seen:
            self._seen.add(diag)
            self.diagnostics.append(diag)

    def __bool__(self) -> bool:
        return bool(self.diagnostics)

    def __len__(self) -> int:
        return len(self.diagnostics)

    def print(self, stream=None) -> None:
        stream = stream if stream is not None else sys.stderr
        for diag in self.diagnostics:
            print(diag, file=stream)


class UsageError(Exception):
    """A problem with the command line itself (not with a header)."""
