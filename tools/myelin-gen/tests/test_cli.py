# Tests of the ways to start myelin-gen (the wrapper script and
# `python -m myelin_gen`) and of the system include discovery.

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from conftest import FIXTURES, INCLUDE, TOOL_DIR
from myelin_gen.cli import system_include_dirs


def _args(out):
    return ["--out-dir", str(out), "--calls", str(FIXTURES / "greeter.h"),
            "--", f"-I{INCLUDE}", "-DUNUSED_MACRO=1"]


def test_wrapper_script(tmp_path):
    script = TOOL_DIR / "myelin-gen"
    assert os.access(script, os.X_OK)
    proc = subprocess.run([sys.executable, str(script), *_args(tmp_path)],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "greeter_gen.h").exists()
    assert (tmp_path / "greeter_gen.cpp").exists()


def test_python_dash_m(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(TOOL_DIR))
    proc = subprocess.run([sys.executable, "-m", "myelin_gen", *_args(tmp_path)],
                          capture_output=True, text=True, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "greeter_gen.h").exists()


def test_error_exit_status_from_process(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(TOOL_DIR))
    header = FIXTURES / "errors" / "raw_pointer_param.h"
    proc = subprocess.run(
        [sys.executable, "-m", "myelin_gen", "--out-dir", str(tmp_path),
         "--calls", str(header), "--", f"-I{INCLUDE}"],
        capture_output=True, text=True, env=env)
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr.startswith(f"{header}:")


def test_unknown_option_exits_1(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(TOOL_DIR))
    proc = subprocess.run([sys.executable, "-m", "myelin_gen", "--bogus"],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 1
    assert "myelin-gen: error:" in proc.stderr


def test_clang_args_reach_the_parser(gen, tmp_path):
    header = tmp_path / "switch.h"
    header.write_text(
        "#pragma once\n#include <myelin/endpoint.h>\n"
        "class Api : public myelin::EndpointClass {\n public:\n"
        "#ifdef WITH_EXTRA\n  static int extra();\n#endif\n"
        "  static void base();\n};\n")
    with_extra = gen(calls=[header], clang_args=["-DWITH_EXTRA"])
    assert with_extra.status == 0, with_extra.stderr
    assert "Api::extra" in with_extra.read("switch_gen.h")


@pytest.mark.skipif(not shutil.which("c++"), reason="no c++ compiler")
def test_system_include_dirs():
    dirs = system_include_dirs("c++")
    assert dirs and all(os.path.isabs(d) for d in dirs)


def test_system_include_dirs_disabled_or_missing_compiler(capsys):
    assert system_include_dirs("") == []
    assert system_include_dirs("/nonexistent/compiler") == []
    assert "warning" in capsys.readouterr().err
