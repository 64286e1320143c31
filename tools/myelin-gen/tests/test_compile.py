# Compiles generated code against the stand-in generated_support.h: proves the
# stubs match their declarations exactly, the traits are well-formed, every
# endpoint class they mention has its ClassName, and two generated headers
# sharing types can meet in one translation unit. Code using Result and
# Status is also compiled against the runtime's own headers.

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from conftest import FIXTURES, INCLUDE, RUNTIME_INCLUDE, run_gen



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


def _compile(compiler, source, extra=(), include=INCLUDE):
    cmd = [compiler, "-std=c++20", "-fsyntax-only", "-Wall", "-Wextra", "-Werror",
           f"-I{include}", *extra, str(source)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@needs_compiler
@pytest.mark.parametrize("compiler", COMPILERS)
@pytest.mark.parametrize("role", ["calls", "implements"])
@pytest.mark.parametrize("header", ["everything.h", "greeter.h", "classes.h",
                                    "objects.h", "refs.h", "peer.h", "results.h",
                                    "reports.h", "futures.h"])
def test_generated_code_compiles(tmp_path, compiler, role, header):
    r = run_gen(tmp_path, **{role: [FIXTURES / header]})
    assert r.status == 0, r.stderr
    stem = header[:-2]
    _compile(compiler, tmp_path / f"{stem}_gen.cpp")


def _compile_together(tmp_path, compiler, implemented, called):
    """Generates `implemented` and `called`, includes both generated headers
    (one of them twice) in one translation unit and compiles everything."""
    r = run_gen(tmp_path, implements=[FIXTURES / f"{implemented}.h"],
                calls=[FIXTURES / f"{called}.h"])
    assert r.status == 0, r.stderr
    both = tmp_path / "both.cpp"
    both.write_text(f'#include "{implemented}_gen.h"\n#include "{called}_gen.h"\n'
                    f'#include "{implemented}_gen.h"\n')
    _compile(compiler, both)
    _compile(compiler, tmp_path / f"{called}_gen.cpp")
    _compile(compiler, tmp_path / f"{implemented}_gen.cpp")


@needs_compiler
@pytest.mark.parametrize("compiler", COMPILERS)
def test_two_generated_headers_in_one_translation_unit(tmp_path, compiler):
    _compile_together(tmp_path, compiler, "sensor", "recorder")


@needs_compiler
@pytest.mark.parametrize("compiler", COMPILERS)
def test_class_names_from_two_generated_headers(tmp_path, compiler):
    """listener_gen.h and refs_gen.h both name events::Listener; the guards
    keep it to one specialisation in a translation unit."""
    _compile_together(tmp_path, compiler, "listener", "refs")


# Uses every proxy of peer.h as a program would: constructors (`explicit`
# kept), instance and static methods, on a const object too.
_PEER_USE = """\
#include "peer_gen.h"
#include <type_traits>
static_assert(!std::is_convertible_v<std::string, ROOT::sym::Peer>);
static_assert(std::is_constructible_v<ROOT::sym::Peer, std::string>);
static_assert(std::is_base_of_v<myelin::EndpointClass, ROOT::sym::Peer>);
static_assert(std::is_base_of_v<myelin::EndpointClass, sym::Peer>);
void callPeer() {
  ROOT::sym::Peer anonymous;
  const ROOT::sym::Peer named("b");
  std::string hello = anonymous.greet("a");
  myelin::AsyncVoid posted = anonymous.post(sym::Note{hello, 1});
  myelin::Async<std::int64_t> later = anonymous.countLater(3);
  std::vector<sym::Note> notes = named.notes();
  std::int64_t version = ROOT::sym::Peer::version() + sym::Peer::version();
  const ROOT::sym::Echo echo;
  std::string echoed = echo.echo("c");
  int count = ROOT::sym::Echo::count();
  (void)posted, (void)later, (void)notes, (void)version, (void)echoed, (void)count;
}
"""


@needs_compiler
@pytest.mark.parametrize("compiler", COMPILERS)
@pytest.mark.parametrize("role", ["calls", "implements"])
@pytest.mark.parametrize("root", ["remote", "app::peer"])
def test_proxies_are_usable(tmp_path, compiler, role, root):
    r = run_gen(tmp_path, **{role: [FIXTURES / "peer.h"]},
                options=["--remote-namespace", root])
    assert r.status == 0, r.stderr
    use = tmp_path / "use.cpp"
    use.write_text(_PEER_USE.replace("ROOT", root))
    _compile(compiler, use)
    _compile(compiler, tmp_path / "peer_gen.cpp")


@needs_compiler
@pytest.mark.parametrize("compiler", COMPILERS)
def test_common_classes_beside_other_generated_headers(tmp_path, compiler):
    """peer.h in one program with headers it implements and calls."""
    r = run_gen(tmp_path, implements=[FIXTURES / "peer.h", FIXTURES / "sensor.h"],
                calls=[FIXTURES / "objects.h"])
    assert r.status == 0, r.stderr
    both = tmp_path / "all.cpp"
    both.write_text('#include "peer_gen.h"\n#include "objects_gen.h"\n'
                    '#include "sensor_gen.h"\n#include "peer_gen.h"\n')
    _compile(compiler, both)


# reports.h (AsyncStatus) as both programs use it: the service returns `{}`,
# a Status or an application code (with or without a message); the caller
# gets an AsyncStatus from each stub and proxy. Only against the stand-ins:
# the runtime's generated_support.h does not know AsyncStatus yet.
_REPORTS_USE = """\
#include "reports_gen.h"
#include <type_traits>
static_assert(std::is_default_constructible_v<myelin::AsyncStatus>);
static_assert(std::is_convertible_v<myelin::Status, myelin::AsyncStatus>);
static_assert(std::is_convertible_v<rep::Fault, myelin::AsyncStatus>);
static_assert(!std::is_convertible_v<int, myelin::AsyncStatus>);
static_assert(!std::is_convertible_v<myelin::AsyncStatus, myelin::Status>);
myelin::AsyncStatus rep::Mirror::push(const Entry& entry) {
  if (entry.text.empty()) return {rep::Fault::kGone, "nothing to push"};
  return {};
}
rep::Report rep::Mirror::check() const { return rep::Fault::kFull; }
myelin::AsyncStatus rep::Mirror::wipe() noexcept { return myelin::Status(); }
void callEverything(rep::Journal& journal, const rep::Journal& reader) {
  remote::rep::Mirror mirror;
  const remote::rep::Mirror constMirror;
  myelin::AsyncStatus pushed = mirror.push(rep::Entry{"a", 1});
  myelin::AsyncStatus checked = constMirror.check();
  myelin::AsyncStatus wiped = remote::rep::Mirror::wipe();
  myelin::AsyncStatus appended = journal.append(rep::Entry{"b", 2});
  myelin::AsyncStatus flushed = reader.flush();
  myelin::AsyncStatus reset = rep::Journal::reset();
  rep::Report resetTo = rep::Journal::resetTo(3);
  const myelin::Status& status = pushed.status();
  (void)checked, (void)wiped, (void)appended, (void)flushed, (void)reset,
      (void)resetTo, (void)status;
}
"""

# The service's side of rep::Journal, which only an --implements program
# defines.
_JOURNAL_IMPL = """\
#include "reports_gen.h"
rep::Journal::Journal(const std::string& name) : name_(name) {}
rep::Journal::~Journal() = default;
myelin::AsyncStatus rep::Journal::reset() { return {}; }
rep::Report rep::Journal::resetTo(std::int64_t stamp) noexcept {
  if (stamp < 0) return rep::Fault::kGone;
  return myelin::Status();
}
myelin::AsyncStatus rep::Journal::append(const Entry& entry) {
  return {rep::Fault::kFull, entry.text + name_};
}
myelin::AsyncStatus rep::Journal::flush() const noexcept { return {}; }
myelin::AsyncVoid rep::Journal::touch() { return {}; }
std::int64_t rep::Journal::size() const { return 0; }
"""


@needs_compiler
@pytest.mark.parametrize("compiler", COMPILERS)
@pytest.mark.parametrize("role", ["calls", "implements"])
def test_async_status_is_usable(tmp_path, compiler, role):
    r = run_gen(tmp_path, **{role: [FIXTURES / "reports.h"]})
    assert r.status == 0, r.stderr
    use = tmp_path / "use.cpp"
    use.write_text(_REPORTS_USE)
    _compile(compiler, use)
    _compile(compiler, tmp_path / "reports_gen.cpp")
    if role == "implements":
        impl = tmp_path / "journal.cpp"
        impl.write_text(_JOURNAL_IMPL)
        _compile(compiler, impl)


# futures.h (AsyncRef<T>) as both programs use it: the service returns a
# value, an Async<T> or a pending AsyncRef it completes; the caller passes the
# handles it gets on into further calls, by value and by const reference.
# Only against the stand-ins: the runtime's generated_support.h does not know
# AsyncRef yet.
_FUTURES_USE = """\
#include "futures_gen.h"
#include <type_traits>
static_assert(std::is_default_constructible_v<myelin::AsyncRef<fut::Image>>);
static_assert(std::is_convertible_v<fut::Image, myelin::AsyncRef<fut::Image>>);
static_assert(
    std::is_convertible_v<myelin::Async<fut::Image>, myelin::AsyncRef<fut::Image>>);
static_assert(std::is_same_v<fut::Pending::ValueType, fut::Image>);
myelin::AsyncRef<fut::Image> fut::Darkroom::develop(
    myelin::AsyncRef<std::string> film) {
  return fut::Image{film.value(), {}};
}
myelin::AsyncRef<myelin::Result<fut::Image, fut::Format>> fut::Darkroom::print(
    const Pending& negative) const {
  if (!negative.isReady()) return {};  // pending, completed later
  return myelin::Result<fut::Image, fut::Format>();
}
myelin::AsyncRef<myelin::Status> fut::Darkroom::check(
    const myelin::AsyncRef<Image>& print) noexcept {
  myelin::AsyncRef<myelin::Status> later;
  if (print.isSuccess()) later.setValue(myelin::Status());
  else later.setError("no print");
  return later;
}
void callEverything() {
  myelin::AsyncRef<fut::Image> loaded = fut::Studio::load("cat");
  fut::Pending sharp = fut::Studio::sharpen(loaded, 0.6f);
  fut::Studio studio(sharp);
  const fut::Studio titled(std::string("cat"), 2);
  myelin::AsyncRef<std::vector<std::uint8_t>> bytes =
      titled.encode(sharp, fut::Format::kPng);
  myelin::AsyncRef<fut::Histogram> histogram = studio.histogram(loaded);
  std::int64_t size = titled.size(bytes);
  remote::fut::Darkroom room;
  myelin::AsyncRef<fut::Image> developed = room.develop(std::string("film"));
  const remote::fut::Darkroom& constRoom = room;
  auto printed = constRoom.print(developed);
  myelin::AsyncRef<myelin::Status> checked = remote::fut::Darkroom::check(developed);
  bool ready = printed.isRemote() || histogram.wait(10) || checked.isError();
  myelin::Async<fut::Image> fetched = developed.fetch();
  (void)size, (void)ready, (void)fetched;
}
"""

# The service's side of fut::Studio, which only an --implements program
# defines.
_STUDIO_IMPL = """\
#include "futures_gen.h"
fut::Studio::Studio(myelin::AsyncRef<Image> background) { (void)background; }
fut::Studio::Studio(const myelin::AsyncRef<std::string>& title, int layers) {
  (void)title, (void)layers;
}
myelin::AsyncRef<fut::Image> fut::Studio::load(const std::string& name) {
  return Image{name, {}};
}
fut::Pending fut::Studio::sharpen(const Pending& image, float amount) noexcept {
  (void)amount;
  return image;
}
myelin::AsyncRef<std::vector<std::uint8_t>> fut::Studio::encode(
    myelin::AsyncRef<Image> image, Format format) const {
  (void)format;
  return image.value().pixels;
}
myelin::AsyncRef<fut::Histogram> fut::Studio::histogram(
    const myelin::AsyncRef<Image>& image) {
  (void)image;
  return myelin::Async<Histogram>();
}
std::int64_t fut::Studio::size(
    myelin::AsyncRef<std::vector<std::uint8_t>> bytes) const noexcept {
  return static_cast<std::int64_t>(bytes.value().size());
}
"""


@needs_compiler
@pytest.mark.parametrize("compiler", COMPILERS)
@pytest.mark.parametrize("role", ["calls", "implements"])
def test_async_ref_is_usable(tmp_path, compiler, role):
    r = run_gen(tmp_path, **{role: [FIXTURES / "futures.h"]})
    assert r.status == 0, r.stderr
    use = tmp_path / "use.cpp"
    use.write_text(_FUTURES_USE)
    _compile(compiler, use)
    _compile(compiler, tmp_path / "futures_gen.cpp")
    if role == "implements":
        impl = tmp_path / "studio.cpp"
        impl.write_text(_STUDIO_IMPL)
        _compile(compiler, impl)


# The stand-ins know nothing of encoding; against the runtime's own headers
# the traits and stubs instantiate its TypeSig, Codec and TypeRegistrar for
# every Result and Status, and for the structs and enums reached through them.
needs_runtime_result = pytest.mark.skipif(
    not (RUNTIME_INCLUDE / "myelin" / "result.h").is_file(),
    reason="the runtime's include/ has no myelin/result.h")


@needs_compiler
@needs_runtime_result
@pytest.mark.parametrize("compiler", COMPILERS)
@pytest.mark.parametrize("role", ["calls", "implements"])
def test_results_compile_against_the_runtime(tmp_path, compiler, role):
    r = run_gen(tmp_path, **{role: [FIXTURES / "results.h"]},
                include=RUNTIME_INCLUDE)
    assert r.status == 0, r.stderr
    _compile(compiler, tmp_path / "results_gen.cpp", include=RUNTIME_INCLUDE)


@pytest.mark.parametrize("role", ["calls", "implements"])
@pytest.mark.parametrize("header", ["everything.h", "objects.h", "refs.h",
                                    "peer.h", "results.h", "reports.h",
                                    "futures.h"])
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
