# Command-line interface of myelin-gen: parses the options, runs the parser
# on every named header and writes `<stem>_gen.h` / `<stem>_gen.cpp`,
# touching files only when their content changes.

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
from typing import Optional, Sequence

from . import emitter
from .errors import ErrorSink, UsageError
from .model import stem_of

USAGE = (
    "myelin-gen --out-dir DIR [--implements H]... [--calls H]... "
    "[--remote-namespace NAME] [--depfile-stamp FILE] "
    "[--system-includes-from COMPILER] -- <clang args>"
)

DEFAULT_REMOTE_NAMESPACE = "remote"

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_KEYWORDS = frozenset("""
    alignas alignof and and_eq asm auto bitand bitor bool break case catch
    char char8_t char16_t char32_t class compl concept const consteval
    constexpr constinit const_cast continue co_await co_return co_yield
    decltype default delete do double dynamic_cast else enum explicit export
    extern false float for friend goto if inline int long mutable namespace
    new noexcept not not_eq nullptr operator or or_eq private protected
    public register reinterpret_cast requires return short signed sizeof
    static static_assert static_cast struct switch template this
    thread_local throw true try typedef typeid typename union unsigned using
    virtual void volatile wchar_t while xor xor_eq
""".split())


class _ArgumentParser(argparse.ArgumentParser):
    def error(self, message):  # exit status 1 like every other failure
        self.print_usage(sys.stderr)
        print(f"myelin-gen: error: {message}", file=sys.stderr)
        raise SystemExit(1)


def _build_arg_parser() -> argparse.ArgumentParser:
    p = _ArgumentParser(
        prog="myelin-gen",
        usage=USAGE,
        description="Generate Myelin traits and stubs for endpoint classes. "
        "Arguments after '--' are passed to clang when parsing the headers.",
    )
    p.add_argument("--out-dir", required=True,
                   help="directory for <stem>_gen.h and <stem>_gen.cpp")
    p.add_argument("--implements", action="append", default=[], metavar="H",
                   help="header whose endpoint classes this program implements")
    p.add_argument("--calls", action="append", default=[], metavar="H",
                   help="header whose endpoint classes this program calls "
                   "(remote methods get generated stubs)")
    p.add_argument("--remote-namespace", metavar="NAME",
                   default=DEFAULT_REMOTE_NAMESPACE,
                   help="root namespace of the proxies generated for the "
                   "classes deriving from myelin::CommonEndpointClass (in a "
                   "header named by --implements or --calls alike): the "
                   "peer's ns::Peer is called through NAME::ns::Peer (default: "
                   f"{DEFAULT_REMOTE_NAMESPACE}; may be nested, like a::b)")
    p.add_argument("--depfile", metavar="FILE",
                   help="write a Makefile-style depfile listing every file the "
                        "headers include (for the build system)")
    p.add_argument("--depfile-target", metavar="PATH",
                   help="the output named as the target in --depfile")
    p.add_argument("--depfile-stamp", metavar="FILE",
                   help="file rewritten on every successful run (an output "
                   "the build can always rely on being updated)")
    p.add_argument("--system-includes-from", metavar="COMPILER",
                   default=os.environ.get("CXX") or "c++",
                   help="compiler asked for its system include directories, "
                   "which are passed to clang as -isystem (default: $CXX or "
                   "c++; an empty string disables this)")
    return p


def check_remote_namespace(name: str) -> str:
    """`name` if it can open a namespace definition (`a` or `a::b`);
    raises UsageError otherwise."""
    parts = name.split("::")
    bad = [p for p in parts if not _IDENTIFIER.match(p) or p in _KEYWORDS]
    if bad or parts[0] == "std":
        why = ("the standard library's namespace cannot hold them"
               if not bad else
               "expected C++ identifiers separated by '::', like remote or "
               "peer::api")
        raise UsageError(f"--remote-namespace {name!r} cannot name the "
                         f"namespace of the proxies: {why}")
    return name


def _check_proxy_names(models, errors: ErrorSink) -> None:
    """Every proxy must be declarable: its name must not be a class already,
    and no scope it is declared in may be a class (namespaces are opened
    for the scopes of a nested common class)."""
    classes = {c.qualname: c for m in models for c in m.classes}
    proxies = {p.qualname: c for m in models for c, p in m.proxies()}
    for name, cls in proxies.items():
        if name in classes:
            other = classes[name]
            errors.error(cls.file, cls.line,
                         f"the proxy of {cls.qualname} would be named {name}, "
                         f"like the class at {other.file}:{other.line}; choose "
                         "another --remote-namespace")
            continue
        parts = name.split("::")
        for i in range(1, len(parts)):
            scope = "::".join(parts[:i])
            if scope in proxies:
                why = (f"the proxy of {proxies[scope].qualname}; a common class "
                       "cannot be nested in another common class")
            elif scope in classes:
                why = (f"the class at {classes[scope].file}:"
                       f"{classes[scope].line}; choose another --remote-namespace")
            else:
                continue
            errors.error(cls.file, cls.line,
                         f"the proxy of {cls.qualname} would be declared in "
                         f"namespace {scope}, which is {why}")
            break


def system_include_dirs(compiler: str) -> list[str]:
    """The `#include <...>` search list of `compiler`, in order."""
    if not compiler.strip():
        return []
    cmd = shlex.split(compiler) + ["-E", "-x", "c++", "-", "-v"]
    try:
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True, check=False)
    except OSError as exc:
        print(f"myelin-gen: warning: cannot run '{compiler}' to find system "
              f"include directories: {exc}", file=sys.stderr)
        return []
    dirs: list[str] = []
    inside = False
    for line in proc.stderr.splitlines():
        if line.startswith("#include <...> search starts here"):
            inside = True
            continue
        if line.startswith("End of search list"):
            break
        if inside and line.startswith(" "):
            d = line.strip()
            if d.endswith("(framework directory)"):
                continue
            dirs.append(d)
    return dirs


def write_if_changed(path: str, content: str) -> bool:
    """Write `content` to `path` unless it already holds exactly that."""
    data = content.encode("utf-8")
    try:
        with open(path, "rb") as f:
            if f.read() == data:
                return False
    except FileNotFoundError:
        pass
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=".myelin-gen-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; generated files are ordinary files
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return True


def _plan(args, errors: ErrorSink) -> list[tuple[str, str]]:
    """(header, role) pairs in command-line order, each header once."""
    implements = {os.path.realpath(h): h for h in args.implements}
    calls = {os.path.realpath(h): h for h in args.calls}
    jobs: list[tuple[str, str]] = []
    seen: set[str] = set()
    for role, headers in (("implements", args.implements), ("calls", args.calls)):
        for h in headers:
            real = os.path.realpath(h)
            if real in seen:
                continue
            seen.add(real)
            if real in implements and real in calls:
                errors.error(h, 1, "header is named by both --implements and "
                             "--calls; a class used from both sides must derive "
                             "from myelin::CommonEndpointClass")
                continue
            if not os.path.isfile(h):
                errors.error(h, 1, "header not found")
                continue
            jobs.append((h, role))
    stems: dict[str, str] = {}
    for h, _role in jobs:
        stem = stem_of(h)
        if stem in stems:
            errors.error(h, 1, f"generated files {stem}_gen.h/.cpp would also be "
                         f"produced for {stems[stem]}; header names must be "
                         "unique per --out-dir")
        else:
            stems[stem] = h
    return jobs


def run(argv: Sequence[str]) -> int:
    argv = list(argv)
    if "--" in argv:
        cut = argv.index("--")
        own, clang_args = argv[:cut], argv[cut + 1:]
    else:
        own, clang_args = argv, []
    args = _build_arg_parser().parse_args(own)
    if not args.implements and not args.calls:
        raise UsageError("no headers given; use --implements H or --calls H")
    remote_namespace = check_remote_namespace(args.remote_namespace)

    from . import parser as hparser

    if hparser.import_error() is not None:
        raise UsageError(
            "the Python package 'libclang' is not available "
            f"({hparser.import_error()}); install "
            "tools/myelin-gen/requirements.txt")

    errors = ErrorSink()
    jobs = _plan(args, errors)
    models = []
    if jobs:
        sys_args: list[str] = []
        for d in system_include_dirs(args.system_includes_from):
            sys_args += ["-isystem", d]
        index = hparser.ci.Index.create()
        for header, role in jobs:
            model = hparser.parse_header(index, header, role,
                                         clang_args + sys_args, errors)
            if model is not None:
                model.remote_namespace = remote_namespace
                models.append(model)
        _check_proxy_names(models, errors)

    if errors:
        errors.print()
        if args.depfile_stamp and os.path.exists(args.depfile_stamp):
            os.unlink(args.depfile_stamp)  # make the build retry next time
        return 1

    os.makedirs(args.out_dir, exist_ok=True)
    for model in models:
        base = os.path.join(args.out_dir, f"{model.stem}_gen")
        write_if_changed(base + ".h", emitter.emit_header(model))
        write_if_changed(base + ".cpp", emitter.emit_source(model))
    if args.depfile:
        deps = sorted({d for m in models for d in getattr(m, "dependencies", [])})
        target = args.depfile_target or args.depfile_stamp or args.depfile
        esc = lambda path: path.replace(" ", "\\ ")
        text = esc(target) + ": " + " \\\n  ".join(esc(d) for d in deps) + "\n"
        write_if_changed(args.depfile, text)
    if args.depfile_stamp:
        stamp_dir = os.path.dirname(args.depfile_stamp)
        if stamp_dir:
            os.makedirs(stamp_dir, exist_ok=True)
        with open(args.depfile_stamp, "w", encoding="utf-8") as f:
            f.write("myelin-gen stamp\n")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    try:
        return run(sys.argv[1:] if argv is None else argv)
    except UsageError as exc:
        print(f"myelin-gen: error: {exc}", file=sys.stderr)
        return 1
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
