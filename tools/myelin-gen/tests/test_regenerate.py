# Tests that myelin-gen rewrites its outputs only when their content changes,
# so edits that leave the parsed structure alone rebuild nothing; and that the
# --depfile-stamp file is written on every successful run.

from __future__ import annotations

import os
import shutil

from conftest import FIXTURES, run_gen

OLD = 1_000_000_000  # an mtime long in the past (2001)


def _setup(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    header = src / "greeter.h"
    shutil.copy(FIXTURES / "greeter.h", header)
    out = tmp_path / "out"
    r = run_gen(out, calls=[header])
    assert r.status == 0, r.stderr
    outputs = [out / "greeter_gen.h", out / "greeter_gen.cpp"]
    for p in outputs:
        os.utime(p, (OLD, OLD))
    return header, out, outputs


def _mtimes(paths):
    return [os.stat(p).st_mtime for p in paths]


def test_second_run_touches_nothing(tmp_path):
    header, out, outputs = _setup(tmp_path)
    r = run_gen(out, calls=[header])
    assert r.status == 0, r.stderr
    assert _mtimes(outputs) == [OLD, OLD]


def test_comment_change_touches_nothing(tmp_path):
    header, out, outputs = _setup(tmp_path)
    text = header.read_text().replace("  int x = 0;", "  int x = 0;  // horizontal")
    text = text.replace("namespace ns {", "// a new comment\n\nnamespace ns {")
    header.write_text(text)
    r = run_gen(out, calls=[header])
    assert r.status == 0, r.stderr
    assert _mtimes(outputs) == [OLD, OLD]


def test_new_field_rewrites_header_only(tmp_path):
    header, out, outputs = _setup(tmp_path)
    header.write_text(header.read_text().replace(
        "  std::string label;", "  std::string label;\n  double weight = 1.0;"))
    r = run_gen(out, calls=[header])
    assert r.status == 0, r.stderr
    h_mtime, cpp_mtime = _mtimes(outputs)
    assert h_mtime != OLD
    assert cpp_mtime == OLD  # the stubs did not change
    assert '::myelin::detail::field("weight", &::ns::Point::weight)' in outputs[0].read_text()


def test_new_method_rewrites_both(tmp_path):
    header, out, outputs = _setup(tmp_path)
    header.write_text(header.read_text().replace(
        "  static void ping();", "  static void ping();\n  static int count();"))
    r = run_gen(out, calls=[header])
    assert r.status == 0, r.stderr
    assert OLD not in _mtimes(outputs)


def test_stamp_written_every_successful_run(tmp_path):
    header, out, outputs = _setup(tmp_path)
    stamp = tmp_path / "stamps" / "gen.stamp"
    r = run_gen(out, calls=[header], options=["--depfile-stamp", str(stamp)])
    assert r.status == 0, r.stderr
    assert stamp.exists()
    os.utime(stamp, (OLD, OLD))
    r = run_gen(out, calls=[header], options=["--depfile-stamp", str(stamp)])
    assert r.status == 0, r.stderr
    assert os.stat(stamp).st_mtime != OLD
    assert _mtimes(outputs) == [OLD, OLD]


def test_stamp_removed_on_error(tmp_path):
    stamp = tmp_path / "gen.stamp"
    stamp.write_text("old\n")
    r = run_gen(tmp_path / "out", calls=[FIXTURES / "errors" / "union_param.h"],
                options=["--depfile-stamp", str(stamp)])
    assert r.status == 1
    assert not stamp.exists()


def test_depfile_lists_included_headers(tmp_path):
    """A struct in an included header is a dependency of the generated code."""
    import subprocess
    import sys
    inc = tmp_path / "types.h"
    inc.write_text("#pragma once\n#include <cstdint>\nnamespace d { struct T { std::uint32_t a; }; }\n")
    hdr = tmp_path / "api.h"
    hdr.write_text('#pragma once\n#include <myelin/endpoint.h>\n#include "types.h"\n'
                   "namespace d { class Api : public myelin::EndpointClass {\n"
                   " public:\n  static T get();\n}; }\n")
    out = tmp_path / "out"
    depfile = tmp_path / "deps.d"
    here = os.path.dirname(os.path.abspath(__file__))
    cmd = [sys.executable, os.path.join(here, "..", "myelin-gen"), "--out-dir", str(out),
           "--implements", str(hdr), "--depfile", str(depfile), "--depfile-target", "out/api_gen.h",
           "--", "-I" + os.path.join(here, "fixtures", "include"), "-I" + str(tmp_path)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    text = depfile.read_text()
    assert text.startswith("out/api_gen.h: ")
    assert str(inc) in text
    assert str(hdr) in text
    mode = os.stat(out / "api_gen.h").st_mode & 0o777
    assert mode & 0o044, oct(mode)
