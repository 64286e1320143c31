# Shared helpers for the myelin-gen tests: fixture paths and a function that
# runs the generator in-process and captures its exit status and stderr.

from __future__ import annotations

import contextlib
import io
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
FIXTURES = TESTS / "fixtures"
INCLUDE = FIXTURES / "include"
TOOL_DIR = TESTS.parent
RUNTIME_INCLUDE = TOOL_DIR.parent.parent / "include"  # the repository's own

if str(TOOL_DIR) not in sys.path:
    sys.path.insert(0, str(TOOL_DIR))

from myelin_gen import cli  # noqa: E402


@dataclass
class GenResult:
    status: int
    stderr: str
    out_dir: Path

    def read(self, name: str) -> str:
        return (self.out_dir / name).read_text()

    @property
    def error_lines(self) -> list[str]:
        return [l for l in self.stderr.splitlines() if ": error: " in l]


def run_gen(out_dir, implements=(), calls=(), options=(), clang_args=(),
            include=INCLUDE):
    """Runs the generator; `include` holds the <myelin/...> headers it sees
    (the stand-ins unless a test asks for the runtime's own)."""
    argv = ["--out-dir", str(out_dir)]
    for h in implements:
        argv += ["--implements", str(h)]
    for h in calls:
        argv += ["--calls", str(h)]
    argv += list(options)
    argv += ["--", f"-I{include}", *clang_args]
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        status = cli.main(argv)
    return GenResult(status, err.getvalue(), Path(out_dir))


def marked_line(path: Path, marker: str = "expect-error") -> int:
    for number, text in enumerate(path.read_text().splitlines(), start=1):
        if marker in text:
            return number
    raise AssertionError(f"no '{marker}' marker in {path}")


@pytest.fixture
def gen(tmp_path):
    """run_gen with a fresh output directory."""

    def _run(**kwargs):
        return run_gen(tmp_path / "out", **kwargs)

    return _run
