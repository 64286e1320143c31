# Compiles generated code against the stand-in generated_support.h: proves the
# stubs match their declarations exactly, the traits are well-formed, and two
# generated headers sharing types can meet in one translation unit.

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from conftest import FIXTURES, INCLUDE, run_gen



def _find_compilers() -> list[str]:
    """g++ and clang++ (any of the usual versioned names), each once."""
    found: dict[str, str] = {}
    for family in (["g++"], ["clang++"] + [f"clang++-{v}" for v in range(22, 13, -1)]):
        for name in family:
            path = shutil.which(name)
            if path:
                found.setdefault(os.path.realpath(path), name)
                break
    return list(found.values())


COMPILERS = _find_compilers()
needs_compiler = pytest.mark.skipif(not COMPILERS, reason="no C++ compiler found")


def _compile(compiler, source, extra=()):
    cmd = [compiler, "-std=c++20", "-fsyntax-only", "-Wall", "-Wextra", "-Werror",
           f"-I{INCLUDE}", *extra, str(source)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@needs_compiler
@pytest.mark.parametrize("compiler", COMPILERS)
@pytest.mark.parametrize("role", ["calls", "implements"])
@pytest.mark.parametrize("header", ["everything.h", "greeter.h", "classes.h",
                                    "objects.h"])
def test_generated_code_compiles(tmp_path, compiler, role, header):
    r = run_gen(tmp_path, **{role: [FIXTURES / header]})
    assert r.status == 0, r.stderr
    stem = header[:-2]
    _compile(compiler, tmp_path / f"{stem}_gen.cpp")


@needs_compiler
@pytest.mark.parametrize("compiler", COMPILERS)
def test_two_generated_headers_in_one_translation_unit(tmp_path, compiler):
    r = run_gen(tmp_path, implements=[FIXTURES / "sensor.h"],
                calls=[FIXTURES / "recorder.h"])
    assert r.status == 0, r.stderr
    both = tmp_path / "both.cpp"
    both.write_text('#include "sensor_gen.h"\n#include "recorder_gen.h"\n'
                    '#include "sensor_gen.h"\n')
    _compile(compiler, both)
    _compile(compiler, tmp_path / "recorder_gen.cpp")
    _compile(compiler, tmp_path / "sensor_gen.cpp")


@pytest.mark.parametrize("role", ["calls", "implements"])
@pytest.mark.parametrize("header", ["everything.h", "objects.h"])
def test_generated_code_parses_with_libclang(tmp_path, role, header):
    """A clang front-end check that needs no compiler besides libclang:
    no errors and no -Wall -Wextra warnings."""
    import clang.cindex as ci
    from myelin_gen.cli import system_include_dirs

    r = run_gen(tmp_path, **{role: [FIXTURES / header]})
    assert r.status == 0, r.stderr
    args = ["-x", "c++", "-std=c++20", "-Wall", "-Wextra", f"-I{INCLUDE}"]
    for d in system_include_dirs(shutil.which("c++") or "c++"):
        args += ["-isystem", d]
    tu = ci.Index.create().parse(str(tmp_path / f"{header[:-2]}_gen.cpp"), args=args)
    problems = [str(d) for d in tu.diagnostics
                if d.severity >= ci.Diagnostic.Warning]
    assert problems == []
