# One test per unsupported construct: the generator must exit with status 1
# and print `file:line: error: ...` on the marked line, naming the type.

from __future__ import annotations

import pytest

from conftest import FIXTURES, marked_line

ERRORS = FIXTURES / "errors"

# fixture name -> text that must appear in the message
CASES = {
    "raw_pointer_param": "unsupported type 'int *' (raw pointers cannot be sent) "
                         "in parameter 'p' of errs::Api::f",
    "raw_pointer_field": "unsupported type 'int *' (raw pointers cannot be sent) "
                         "in field 'p' of errs::Holder",
    "pointer_in_template": "unsupported type 'const char *' (raw pointers cannot "
                           "be sent) in parameter 'names' of errs::Api::f",
    "std_function": "unsupported type 'std::function<void (int)>' "
                    "(std::function cannot be sent)",
    "union_param": "unsupported type 'Number' (unions cannot be sent)",
    "private_data": "unsupported type 'Secret' (class with private data member "
                    "'hidden_' cannot be sent)",
    "base_class": "unsupported type 'Derived' (classes with base classes cannot "
                  "be sent) in return type of errs::Api::f",
    "virtual_struct": "unsupported type 'Shape' (classes with virtual functions",
    "long_double": "unsupported type 'long double' (long double",
    "wide_char": "unsupported type 'wchar_t' (wide character types",
    "bitfield": "(bit-fields cannot be sent) in field 'ready' of errs::Flags",
    "reference_field": "unsupported type 'const std::string &' (references "
                       "cannot be struct fields) in field 'text' of errs::View",
    "overloaded": "overloaded remote method 'f' in errs::Api",
    "constructor_clash": "constructor of errs::Api has the same parameter "
                         "names (port) as the one at line 10",
    "operator_member": "'operator()' in errs::Api: operators cannot be remote "
                       "methods",
    "conversion_function": "'operator bool' in errs::Api: conversion functions "
                           "cannot be remote methods",
    "private_destructor": "endpoint class errs::Api must have a public destructor",
    "ref_qualified": "remote method errs::Api::f cannot be ref-qualified",
    "member_template": "member template 'f' in errs::Api",
    "nonconst_ref": "unsupported type 'std::string &' (parameters cannot be "
                    "passed by non-const reference",
    "rvalue_ref": "unsupported type 'std::string &&' (parameters cannot be "
                  "passed by rvalue reference",
    "async_void": "unsupported type 'myelin::Async<void>' (myelin::Async<void> "
                  "is not supported; use myelin::AsyncVoid)",
    "async_param": "unsupported type 'myelin::Async<int>' (myelin::Async can "
                   "only be the return type",
    "common_class_ref": "unsupported type 'myelin::ClassRef<Both>' (errs::Both "
                        "derives from myelin::CommonEndpointClass, which is not "
                        "supported yet) in parameter 'both' of errs::Api::keep",
    "unknown_template": "unsupported type 'std::deque<int>' (std::deque is not "
                        "supported",
    "user_template": "unsupported type 'Box<int>' (unknown template errs::Box",
    "custom_comparator": "unsupported type 'std::map<std::string, int, "
                         "std::greater<std::string>>' (std::map with a "
                         "non-default comparator",
    "c_array_param": "unsupported type 'int[4]' (C arrays are only supported "
                     "as struct fields",
    "anonymous_union": "unsupported type 'Mixed' (anonymous union members",
    "syntax_error": "expected ';' at end of declaration list",
    # object references (docs/objects.md §5)
    "endpoint_ref_result": "unsupported type 'Listener &' (remote methods "
                           "cannot return references: a reference result "
                           "would dangle; return myelin::ClassRef<errs::Listener> "
                           "instead) in return type of errs::Api::current",
    "endpoint_by_value_param": "unsupported type 'Listener' (endpoint classes "
                               "are identities, not values; pass "
                               "errs::Listener& or myelin::ClassRef<errs::Listener>) "
                               "in parameter 'l' of errs::Api::f",
    "endpoint_by_value_result": "unsupported type 'Listener' (endpoint classes "
                                "are identities, not values; return "
                                "myelin::ClassRef<errs::Listener>) in return "
                                "type of errs::Api::make",
    "endpoint_by_value_field": "unsupported type 'Listener' (endpoint classes "
                               "are identities, not values; hold a "
                               "myelin::ClassRef<errs::Listener>) in field "
                               "'listener' of errs::Holder",
    "endpoint_rvalue_ref": "unsupported type 'Listener &&' (parameters cannot "
                           "be passed by rvalue reference; pass errs::Listener& "
                           "or myelin::ClassRef<errs::Listener>)",
    "endpoint_pointer": "unsupported type 'Listener *' (raw pointers cannot be "
                        "sent; pass errs::Listener& or "
                        "myelin::ClassRef<errs::Listener>)",
    "class_ref_not_endpoint": "unsupported type 'myelin::ClassRef<Point>' "
                              "(errs::Point is not an endpoint class; "
                              "myelin::ClassRef<T> refers to classes deriving "
                              "from myelin::EndpointClass)",
    "class_ref_set": "(object references have no order: "
                     "myelin::ClassRef<errs::Listener> cannot be a std::set "
                     "element or part of one) in parameter 's' of errs::Api::f",
    # Result and Status (docs/async-and-errors.md §1)
    "result_void": "unsupported type 'myelin::Result<void, Code>' (neither T "
                   "nor E of myelin::Result<T, E> can be void; for an operation "
                   "with no value return myelin::Status) in return type of "
                   "errs::Api::check",
    "result_set": "unsupported type 'const std::set<myelin::Result<int, "
                  "Code>>' (myelin::Result has no order: it cannot be a "
                  "std::set element or part of one) in parameter 's' of "
                  "errs::Api::f",
    "pointer_in_result": "unsupported type 'const char *' (raw pointers cannot "
                         "be sent) in field 'name' of errs::Holder",
    # AsyncStatus, a return mode like AsyncVoid (docs/async-and-errors.md)
    "async_status_param": "unsupported type 'const myelin::AsyncStatus' "
                          "(myelin::AsyncStatus can only be the return type "
                          "of a remote method) in parameter 'done' of "
                          "errs::Api::f",
    "async_status_field": "unsupported type 'myelin::AsyncStatus' "
                          "(myelin::AsyncStatus can only be the return type "
                          "of a remote method) in field 'done' of errs::Holder",
    "async_status_in_async": "unsupported type 'myelin::AsyncStatus' "
                             "(myelin::AsyncStatus can only be the return "
                             "type of a remote method) in return type of "
                             "errs::Api::f",
    # AsyncRef<T>, a remote future (docs/async-and-errors.md §2)
    "async_ref_field": "unsupported type 'myelin::AsyncRef<int>' "
                       "(myelin::AsyncRef can only be the return type of a "
                       "remote method or the type of a parameter of a remote "
                       "method or constructor) in field 'pending' of "
                       "errs::Holder",
    "async_ref_in_async": "unsupported type 'myelin::AsyncRef<int>' "
                          "(myelin::AsyncRef can only be the return type of "
                          "a remote method or the type of a parameter of a "
                          "remote method or constructor) in return type of "
                          "errs::Api::f",
    "async_ref_void": "unsupported type 'myelin::AsyncRef<void>' "
                      "(myelin::AsyncRef<void> is not supported: a remote "
                      "future refers to a value; a method without one returns "
                      "myelin::AsyncVoid or myelin::AsyncStatus) in return "
                      "type of errs::Api::f",
    "async_ref_nonconst_ref": "unsupported type 'myelin::AsyncRef<int> &' "
                              "(parameters cannot be passed by non-const "
                              "reference; pass by value or by const "
                              "reference) in parameter 'pending' of "
                              "errs::Api::f",
}

# Errors only in a --calls header (the generated code would define the same
# function again); the same header is fine for --implements.
CALLS_ONLY_CASES = {
    "constructor_defined": "constructor of errs::Api is defined in the header; "
                           "a --calls header must only declare it",
    "destructor_defined": "destructor of errs::Api is defined in the header; "
                          "a --calls header must only declare it",
}


def test_every_error_fixture_has_a_case():
    assert sorted(p.stem for p in ERRORS.glob("*.h")) == sorted(
        [*CASES, *CALLS_ONLY_CASES])


@pytest.mark.parametrize("role", ["calls", "implements"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_error(gen, name, role):
    header = ERRORS / f"{name}.h"
    r = gen(**{role: [header]})
    assert r.status == 1
    line = marked_line(header)
    assert len(r.error_lines) == 1, r.stderr
    assert r.error_lines[0].startswith(f"{header}:{line}: error: "), r.stderr
    assert CASES[name] in r.error_lines[0], r.stderr
    # nothing is written when there are errors
    assert not r.out_dir.exists() or not any(r.out_dir.iterdir())


@pytest.mark.parametrize("name", sorted(CALLS_ONLY_CASES))
def test_calls_only_error(tmp_path, name):
    from conftest import run_gen

    header = ERRORS / f"{name}.h"
    calls = run_gen(tmp_path / "calls", calls=[header])
    assert calls.status == 1
    line = marked_line(header)
    assert len(calls.error_lines) == 1, calls.stderr
    assert calls.error_lines[0].startswith(f"{header}:{line}: error: "), calls.stderr
    assert CALLS_ONLY_CASES[name] in calls.error_lines[0], calls.stderr
    implements = run_gen(tmp_path / "implements", implements=[header])
    assert implements.status == 0, implements.stderr


def test_header_in_both_lists(gen):
    header = FIXTURES / "greeter.h"
    r = gen(implements=[header], calls=[header])
    assert r.status == 1
    assert r.error_lines == [
        f"{header}:1: error: header is named by both --implements and --calls; "
        "a class used from both sides must derive from "
        "myelin::CommonEndpointClass"
    ]


def test_errors_from_several_headers_are_all_reported(gen):
    a = ERRORS / "raw_pointer_param.h"
    b = ERRORS / "long_double.h"
    r = gen(calls=[a, b])
    assert r.status == 1
    assert len(r.error_lines) == 2
    assert r.error_lines[0].startswith(f"{a}:")
    assert r.error_lines[1].startswith(f"{b}:")


def test_one_bad_header_writes_nothing_for_the_good_one(gen):
    r = gen(calls=[FIXTURES / "greeter.h", ERRORS / "union_param.h"])
    assert r.status == 1
    assert not r.out_dir.exists() or not any(r.out_dir.iterdir())


def test_missing_header(gen, tmp_path):
    missing = tmp_path / "missing.h"
    r = gen(calls=[missing])
    assert r.status == 1
    assert r.error_lines == [f"{missing}:1: error: header not found"]


def test_missing_include_is_reported(gen, tmp_path):
    header = tmp_path / "broken.h"
    header.write_text("#pragma once\n#include <myelin/endpoint.h>\n"
                      '#include "does_not_exist.h"\n')
    r = gen(calls=[header])
    assert r.status == 1
    assert r.error_lines[0].startswith(f"{header}:3: error: ")
    assert "does_not_exist.h" in r.error_lines[0]


def test_same_stem_twice(gen, tmp_path):
    other = tmp_path / "greeter.h"
    other.write_text((FIXTURES / "greeter.h").read_text())
    r = gen(calls=[FIXTURES / "greeter.h", other])
    assert r.status == 1
    assert "greeter_gen.h/.cpp would also be produced" in r.stderr


def test_no_headers_is_an_error(gen):
    r = gen()
    assert r.status == 1
    assert "no headers given" in r.stderr


def test_inline_definition_only_an_error_for_calls(gen, tmp_path):
    header = tmp_path / "inline_api.h"
    header.write_text(
        "#pragma once\n#include <myelin/endpoint.h>\n"
        "class Api : public myelin::EndpointClass {\n public:\n"
        "  static int answer() { return 42; }\n};\n")
    calls = gen(calls=[header])
    assert calls.status == 1
    assert calls.error_lines == [
        f"{header}:5: error: remote method Api::answer is defined in the header; "
        "a --calls header must only declare it (the generated stub defines it)"]
    implements = gen(implements=[header])
    assert implements.status == 0, implements.stderr


def _api(gen, tmp_path, body: str, role: str = "calls"):
    header = tmp_path / "api.h"
    header.write_text("#pragma once\n#include <myelin/endpoint.h>\n"
                      "#include <string>\n" + body)
    return header, gen(**{role: [header]})


def test_out_of_class_definition_is_an_error_for_calls(gen, tmp_path):
    header, r = _api(gen, tmp_path, """\
class Api : public myelin::EndpointClass {
 public:
  explicit Api(int port);
  int port() const;
};
inline Api::Api(int) {}
inline int Api::port() const { return 0; }
""")
    assert r.status == 1
    assert r.error_lines == [
        f"{header}:6: error: constructor of Api is defined in the header; a "
        "--calls header must only declare it (the generated stub defines it)",
        f"{header}:7: error: remote method Api::port is defined in the header; "
        "a --calls header must only declare it (the generated stub defines it)",
    ]


def test_pure_virtual_method_is_an_error(gen, tmp_path):
    header, r = _api(gen, tmp_path, """\
class Api : public myelin::EndpointClass {
 public:
  virtual void f() = 0;
};
""", role="implements")
    assert r.status == 1
    assert r.error_lines == [
        f"{header}:6: error: remote method Api::f cannot be pure virtual "
        "(objects of an endpoint class are constructed, so it cannot be "
        "abstract)"]


_REF_PRELUDE = """\
#include <myelin/class_ref.h>
#include <map>
#include <vector>
class Peer : public myelin::EndpointClass {};
class Api : public myelin::EndpointClass {
 public:
"""


@pytest.mark.parametrize("declaration, message", [
    ("static const Peer& f();",
     "unsupported type 'const Peer &' (remote methods cannot return "
     "references: a reference result would dangle; return "
     "myelin::ClassRef<Peer> instead) in return type of Api::f"),
    ("static myelin::Async<Peer> f();",
     "unsupported type 'Peer' (endpoint classes are identities, not values; "
     "return myelin::Async<myelin::ClassRef<Peer>>) in return type of Api::f"),
    ("static void f(std::vector<Peer>* v);",
     "unsupported type 'std::vector<Peer> *' (raw pointers cannot be sent) "
     "in parameter 'v' of Api::f"),
    ("static void f(myelin::ClassRef<const Peer> p);",
     "unsupported type 'myelin::ClassRef<const Peer>' (name the class without "
     "qualifiers: myelin::ClassRef<Peer>) in parameter 'p' of Api::f"),
    ("static void f(myelin::ClassRef<Peer>& p);",
     "unsupported type 'myelin::ClassRef<Peer> &' (parameters cannot be passed "
     "by non-const reference"),
    ("static void f(std::map<myelin::ClassRef<Peer>, int> m);",
     "(object references have no order: myelin::ClassRef<Peer> cannot be a "
     "std::map key or part of one) in parameter 'm' of Api::f"),
    ("static myelin::ClassRef<int> f();",
     "unsupported type 'myelin::ClassRef<int>' (int is not an endpoint class"),
])
def test_reference_errors(gen, tmp_path, declaration, message):
    header, r = _api(gen, tmp_path,
                     _REF_PRELUDE + f"  {declaration}\n}};\n", role="implements")
    assert r.status == 1
    line = header.read_text().splitlines().index(f"  {declaration}") + 1
    assert len(r.error_lines) == 1, r.stderr
    assert r.error_lines[0].startswith(f"{header}:{line}: error: "), r.stderr
    assert message in r.error_lines[0], r.stderr


def test_map_value_of_references_is_fine(gen, tmp_path):
    _, r = _api(gen, tmp_path, _REF_PRELUDE + """\
  static std::map<int, myelin::ClassRef<Peer>> f(const Peer& p);
};
""")
    assert r.status == 0, r.stderr


# ---- common classes (docs/objects.md §6) ------------------------------------

_COMMON_PRELUDE = """\
#include <myelin/class_ref.h>
#include <optional>
namespace sym {
class Peer : public myelin::CommonEndpointClass {
 public:
  void ping();
};
struct Holder {
  std::optional<myelin::ClassRef<Peer>> peer;
};
class Api : public myelin::EndpointClass {
 public:
"""


@pytest.mark.parametrize("declaration, message", [
    ("static void f(Peer& p);",
     "unsupported type 'Peer &' (sym::Peer derives from "
     "myelin::CommonEndpointClass, which is not supported yet) in parameter "
     "'p' of sym::Api::f"),
    ("static void f(const Peer& p);",
     "unsupported type 'const Peer &' (sym::Peer derives from "
     "myelin::CommonEndpointClass, which is not supported yet)"),
    ("static myelin::ClassRef<Peer> f();",
     "unsupported type 'myelin::ClassRef<Peer>' (sym::Peer derives from "
     "myelin::CommonEndpointClass, which is not supported yet) in return type "
     "of sym::Api::f"),
    ("static Holder f();",
     "unsupported type 'myelin::ClassRef<Peer>' (sym::Peer derives from "
     "myelin::CommonEndpointClass, which is not supported yet) in field "
     "'peer' of sym::Holder"),
])
@pytest.mark.parametrize("role", ["calls", "implements"])
def test_references_to_common_classes_are_refused(gen, tmp_path, declaration,
                                                  message, role):
    header, r = _api(gen, tmp_path, _COMMON_PRELUDE + f"  {declaration}\n}};\n"
                     "}  // namespace sym\n", role=role)
    assert r.status == 1
    assert len(r.error_lines) == 1, r.stderr
    assert message in r.error_lines[0], r.stderr


def test_common_class_inside_a_common_class(gen, tmp_path):
    header, r = _api(gen, tmp_path, """\
namespace sym {
class Outer : public myelin::CommonEndpointClass {
 public:
  class Inner : public myelin::CommonEndpointClass {
   public:
    static void f();
  };
  static void g();
};
}  // namespace sym
""", role="implements")
    assert r.status == 1
    assert r.error_lines == [
        f"{header}:7: error: the proxy of sym::Outer::Inner would be declared "
        "in namespace remote::sym::Outer, which is the proxy of sym::Outer; a "
        "common class cannot be nested in another common class"]


def test_proxy_named_like_a_class(gen, tmp_path):
    header, r = _api(gen, tmp_path, """\
namespace sym {
class Peer : public myelin::CommonEndpointClass {
 public:
  static void f();
};
}  // namespace sym
namespace remote::sym {
class Peer : public myelin::EndpointClass {
 public:
  static void f();
};
}  // namespace remote::sym
""", role="implements")
    assert r.status == 1
    assert r.error_lines == [
        f"{header}:5: error: the proxy of sym::Peer would be named "
        f"remote::sym::Peer, like the class at {header}:11; choose another "
        "--remote-namespace"]
    renamed = gen(implements=[header], options=["--remote-namespace", "peer"])
    assert renamed.status == 0, renamed.stderr


@pytest.mark.parametrize("name", [
    "", "a b", "1st", "::remote", "remote::", "a:::b", "a::::b", "peer-api",
    "class", "a::namespace", "std", "std::peer", "r\u00e9mote",
])
def test_bad_remote_namespace(gen, name):
    r = gen(calls=[FIXTURES / "greeter.h"], options=["--remote-namespace", name])
    assert r.status == 1
    assert r.stderr.startswith(
        f"myelin-gen: error: --remote-namespace {name!r} cannot name the "
        "namespace of the proxies: "), r.stderr
    assert len(r.stderr.splitlines()) == 1
    assert not r.out_dir.exists()


@pytest.mark.parametrize("name", ["remote", "peer_api", "a::b::c", "_x9"])
def test_good_remote_namespace(gen, name):
    r = gen(calls=[FIXTURES / "greeter.h"], options=["--remote-namespace", name])
    assert r.status == 0, r.stderr


# ---- Result and Status (docs/async-and-errors.md §1) ------------------------

_RESULT_PRELUDE = """\
#include <myelin/class_ref.h>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>
enum class Code { kBad };
class Peer : public myelin::EndpointClass {};
class Api : public myelin::EndpointClass {
 public:
"""


@pytest.mark.parametrize("declaration, message", [
    ("static void f(myelin::Result<int, void> r);",
     "unsupported type 'myelin::Result<int, void>' (neither T nor E of "
     "myelin::Result<T, E> can be void; for an operation with no value return "
     "myelin::Status) in parameter 'r' of Api::f"),
    ("static myelin::Async<myelin::Result<void, Code>> f();",
     "unsupported type 'myelin::Result<void, Code>' (neither T nor E of "
     "myelin::Result<T, E> can be void"),
    ("static void f(std::set<myelin::Status> s);",
     "unsupported type 'std::set<myelin::Status>' (myelin::Status has no "
     "order: it cannot be a std::set element or part of one) in parameter 's' "
     "of Api::f"),
    ("static void f(std::map<myelin::Result<int, Code>, int> m);",
     "(myelin::Result has no order: it cannot be a std::map key or part of "
     "one) in parameter 'm' of Api::f"),
    ("static void f(std::map<std::vector<myelin::Status>, int> m);",
     "(myelin::Status has no order: it cannot be a std::map key or part of "
     "one)"),
    ("static void f(std::set<std::optional<myelin::Result<int, Code>>> s);",
     "(myelin::Result has no order: it cannot be a std::set element or part "
     "of one)"),
    ("static myelin::Result<int*, Code> f();",
     "unsupported type 'int *' (raw pointers cannot be sent) in return type "
     "of Api::f"),
    ("static void f(myelin::Result<int, std::deque<int>> r);",
     "unsupported type 'std::deque<int>' (std::deque is not supported; use "
     "std::vector) in parameter 'r' of Api::f"),
    ("static myelin::Result<Peer, Code> f();",
     "unsupported type 'Peer' (endpoint classes are identities, not values; "
     "hold a myelin::ClassRef<Peer>) in return type of Api::f"),
    ("static void f(myelin::Result<const int&, Code> r);",
     "unsupported type 'const int &' (references cannot be sent here)"),
    ("static void f(myelin::Async<myelin::Status> s);",
     "unsupported type 'myelin::Async<myelin::Status>' (myelin::Async can "
     "only be the return type"),
])
def test_result_errors(gen, tmp_path, declaration, message):
    header, r = _api(gen, tmp_path,
                     _RESULT_PRELUDE + f"  {declaration}\n}};\n", role="implements")
    assert r.status == 1
    line = header.read_text().splitlines().index(f"  {declaration}") + 1
    assert len(r.error_lines) == 1, r.stderr
    assert r.error_lines[0].startswith(f"{header}:{line}: error: "), r.stderr
    assert message in r.error_lines[0], r.stderr


def test_result_of_void_as_a_field_fails_in_the_runtime_header(gen, tmp_path):
    # A field instantiates the Result, so the runtime header's static_assert
    # stops the parse before the generator sees the field.
    _, r = _api(gen, tmp_path, _RESULT_PRELUDE + """\
  static void f();
};
struct Holder {
  myelin::Result<Code, void> r;
};
""")
    assert r.status == 1
    assert "neither T nor E can be void" in r.stderr, r.stderr
    assert not r.out_dir.exists() or not any(r.out_dir.iterdir())


def test_unordered_results_are_fine_elsewhere(gen, tmp_path):
    # map values, and set elements behind a shared_ptr (which compares its
    # pointer) or inside a struct (which compares with its own operator<)
    tagged = """\
struct Tagged {
  myelin::Status status;
  bool operator<(const Tagged& other) const;
};
"""
    _, r = _api(gen, tmp_path, tagged + _RESULT_PRELUDE + """\
  static std::map<int, myelin::Result<int, Code>> f(
      std::map<std::string, std::vector<myelin::Status>> m,
      std::set<std::shared_ptr<myelin::Status>> s, std::set<Tagged> t);
};
""")
    assert r.status == 0, r.stderr


# ---- return modes: AsyncVoid and AsyncStatus --------------------------------

_MODE_PRELUDE = """\
#include <array>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>
enum class Code { kBad };
struct Holder {
  int id = 0;
  std::vector<myelin::MODE> modes;
};
class Api : public myelin::EndpointClass {
 public:
"""

_ONLY_A_RETURN = "(myelin::MODE can only be the return type of a remote method)"


# Every position but a remote method's whole return type: the error names
# the type as written and where it is, on the declaration's line.
@pytest.mark.parametrize("declaration, message", [
    ("static void f(myelin::MODE m);",
     f"unsupported type 'myelin::MODE' {_ONLY_A_RETURN} in parameter 'm' of "
     "Api::f"),
    ("static void f(const myelin::MODE& m);",
     f"unsupported type 'const myelin::MODE' {_ONLY_A_RETURN} in parameter "
     "'m' of Api::f"),
    ("static void f(int, myelin::MODE);",
     f"unsupported type 'myelin::MODE' {_ONLY_A_RETURN} in parameter 'arg1' "
     "of Api::f"),
    ("explicit Api(myelin::MODE m);",
     f"unsupported type 'myelin::MODE' {_ONLY_A_RETURN} in parameter 'm' of "
     "Api::Api"),
    ("static myelin::Async<myelin::MODE> f();",
     f"unsupported type 'myelin::MODE' {_ONLY_A_RETURN} in return type of "
     "Api::f"),
    ("static myelin::Async<std::vector<myelin::MODE>> f();",
     f"unsupported type 'myelin::MODE' {_ONLY_A_RETURN} in return type of "
     "Api::f"),
    ("static void f(myelin::Async<myelin::MODE> a);",
     "unsupported type 'myelin::Async<myelin::MODE>' (myelin::Async can only "
     "be the return type of a remote method) in parameter 'a' of Api::f"),
    ("static std::vector<myelin::MODE> f();",
     f"unsupported type 'myelin::MODE' {_ONLY_A_RETURN} in return type of "
     "Api::f"),
    ("static std::optional<myelin::MODE> f();",
     f"unsupported type 'myelin::MODE' {_ONLY_A_RETURN} in return type of "
     "Api::f"),
    ("static std::shared_ptr<const myelin::MODE> f();",
     f"unsupported type 'const myelin::MODE' {_ONLY_A_RETURN} in return type "
     "of Api::f"),
    ("static void f(const std::map<int, myelin::MODE>& m);",
     f"unsupported type 'myelin::MODE' {_ONLY_A_RETURN} in parameter 'm' of "
     "Api::f"),
    ("static void f(std::set<myelin::MODE> s);",
     f"unsupported type 'myelin::MODE' {_ONLY_A_RETURN} in parameter 's' of "
     "Api::f"),
    ("static void f(std::array<myelin::MODE, 2> a);",
     f"unsupported type 'myelin::MODE' {_ONLY_A_RETURN} in parameter 'a' of "
     "Api::f"),
    ("static myelin::Result<myelin::MODE, std::string> f();",
     f"unsupported type 'myelin::MODE' {_ONLY_A_RETURN} in return type of "
     "Api::f"),
    ("static void f(myelin::Result<int, myelin::MODE> r);",
     f"unsupported type 'myelin::MODE' {_ONLY_A_RETURN} in parameter 'r' of "
     "Api::f"),
])
@pytest.mark.parametrize("mode", ["AsyncVoid", "AsyncStatus"])
def test_return_mode_errors(gen, tmp_path, mode, declaration, message):
    declaration = declaration.replace("MODE", mode)
    header, r = _api(gen, tmp_path, _MODE_PRELUDE.replace("MODE", mode)
                     + f"  {declaration}\n}};\n", role="implements")
    assert r.status == 1
    line = header.read_text().splitlines().index(f"  {declaration}") + 1
    assert len(r.error_lines) == 1, r.stderr
    assert r.error_lines[0].startswith(f"{header}:{line}: error: "), r.stderr
    assert message.replace("MODE", mode) in r.error_lines[0], r.stderr


@pytest.mark.parametrize("role", ["calls", "implements"])
def test_return_mode_field_errors(gen, tmp_path, role):
    """A struct field, directly or inside a container, reached from an
    EndpointClass and from a common class: each on the field's line."""
    header, r = _api(gen, tmp_path, """\
#include <optional>
#include <vector>
namespace sym {
struct Queue {
  std::optional<myelin::AsyncStatus> last;
};
struct Batch {
  std::vector<myelin::AsyncStatus> pending;
  myelin::AsyncVoid sent;
};
class Api : public myelin::EndpointClass {
 public:
  static myelin::AsyncStatus f(const Queue& q);
};
class Peer : public myelin::CommonEndpointClass {
 public:
  myelin::AsyncStatus g(Batch b);
};
}  // namespace sym
""", role=role)
    assert r.status == 1
    lines = header.read_text().splitlines()

    def at(text):
        return f"{header}:{lines.index(text) + 1}: error: "

    only = "can only be the return type of a remote method"
    assert r.error_lines == [
        at("  std::optional<myelin::AsyncStatus> last;")
        + "unsupported type 'myelin::AsyncStatus' "
        f"(myelin::AsyncStatus {only}) in field 'last' of sym::Queue",
        at("  std::vector<myelin::AsyncStatus> pending;")
        + "unsupported type 'myelin::AsyncStatus' "
        f"(myelin::AsyncStatus {only}) in field 'pending' of sym::Batch",
        at("  myelin::AsyncVoid sent;")
        + "unsupported type 'myelin::AsyncVoid' "
        f"(myelin::AsyncVoid {only}) in field 'sent' of sym::Batch",
    ], r.stderr
    assert not r.out_dir.exists() or not any(r.out_dir.iterdir())


def test_async_status_in_a_common_class_parameter(gen, tmp_path):
    header, r = _api(gen, tmp_path, """\
namespace sym {
class Peer : public myelin::CommonEndpointClass {
 public:
  myelin::AsyncStatus ok();
  void f(std::string s, myelin::AsyncStatus done);
};
}  // namespace sym
""", role="implements")
    assert r.status == 1
    line = header.read_text().splitlines().index(
        "  void f(std::string s, myelin::AsyncStatus done);") + 1
    assert r.error_lines == [
        f"{header}:{line}: error: unsupported type 'myelin::AsyncStatus' "
        "(myelin::AsyncStatus can only be the return type of a remote method) "
        "in parameter 'done' of sym::Peer::f"], r.stderr


# ---- AsyncRef<T>: only a result or a parameter ------------------------------

_ASYNC_REF_PRELUDE = """\
#include <myelin/class_ref.h>
#include <array>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>
enum class Code { kBad };
class Peer : public myelin::EndpointClass {};
class Api : public myelin::EndpointClass {
 public:
"""

_ONLY_RESULT_OR_PARAM = (
    "(myelin::AsyncRef can only be the return type of a remote method or the "
    "type of a parameter of a remote method or constructor)")


@pytest.mark.parametrize("declaration, message", [
    # rule: by value or by const reference only
    ("static void f(myelin::AsyncRef<int>& r);",
     "unsupported type 'myelin::AsyncRef<int> &' (parameters cannot be passed "
     "by non-const reference; pass by value or by const reference) in "
     "parameter 'r' of Api::f"),
    ("static void f(myelin::AsyncRef<int>&& r);",
     "unsupported type 'myelin::AsyncRef<int> &&' (parameters cannot be "
     "passed by rvalue reference; pass by value or by const reference) in "
     "parameter 'r' of Api::f"),
    ("explicit Api(myelin::AsyncRef<std::string>& name);",
     "unsupported type 'myelin::AsyncRef<std::string> &' (parameters cannot "
     "be passed by non-const reference"),
    ("static myelin::AsyncRef<int>& f();",
     "unsupported type 'myelin::AsyncRef<int> &' (remote methods cannot "
     "return references; return by value) in return type of Api::f"),
    # anywhere but a whole result or parameter
    ("static std::vector<myelin::AsyncRef<int>> f();",
     f"unsupported type 'myelin::AsyncRef<int>' {_ONLY_RESULT_OR_PARAM} in "
     "return type of Api::f"),
    ("static void f(const std::map<myelin::AsyncRef<int>, int>& m);",
     f"unsupported type 'myelin::AsyncRef<int>' {_ONLY_RESULT_OR_PARAM} in "
     "parameter 'm' of Api::f"),
    ("static void f(std::map<int, myelin::AsyncRef<int>> m);",
     f"unsupported type 'myelin::AsyncRef<int>' {_ONLY_RESULT_OR_PARAM} in "
     "parameter 'm' of Api::f"),
    ("static void f(std::set<myelin::AsyncRef<int>> s);",
     f"unsupported type 'myelin::AsyncRef<int>' {_ONLY_RESULT_OR_PARAM} in "
     "parameter 's' of Api::f"),
    ("static void f(std::optional<myelin::AsyncRef<int>> o);",
     f"unsupported type 'myelin::AsyncRef<int>' {_ONLY_RESULT_OR_PARAM} in "
     "parameter 'o' of Api::f"),
    ("static std::shared_ptr<myelin::AsyncRef<int>> f();",
     f"unsupported type 'myelin::AsyncRef<int>' {_ONLY_RESULT_OR_PARAM} in "
     "return type of Api::f"),
    ("static void f(std::array<myelin::AsyncRef<int>, 2> a);",
     f"unsupported type 'myelin::AsyncRef<int>' {_ONLY_RESULT_OR_PARAM} in "
     "parameter 'a' of Api::f"),
    ("static myelin::Result<myelin::AsyncRef<int>, Code> f();",
     f"unsupported type 'myelin::AsyncRef<int>' {_ONLY_RESULT_OR_PARAM} in "
     "return type of Api::f"),
    ("static void f(myelin::Result<int, myelin::AsyncRef<Code>> r);",
     f"unsupported type 'myelin::AsyncRef<Code>' {_ONLY_RESULT_OR_PARAM} in "
     "parameter 'r' of Api::f"),
    ("static myelin::Async<myelin::AsyncRef<int>> f();",
     f"unsupported type 'myelin::AsyncRef<int>' {_ONLY_RESULT_OR_PARAM} in "
     "return type of Api::f"),
    ("static myelin::AsyncRef<myelin::AsyncRef<int>> f();",
     f"unsupported type 'myelin::AsyncRef<int>' {_ONLY_RESULT_OR_PARAM} in "
     "return type of Api::f"),
    ("static void f(myelin::AsyncRef<std::vector<myelin::AsyncRef<int>>> r);",
     f"unsupported type 'myelin::AsyncRef<int>' {_ONLY_RESULT_OR_PARAM} in "
     "parameter 'r' of Api::f"),
    # T: a value Async<T> could carry, other than an object reference
    ("static myelin::AsyncRef<void> f();",
     "unsupported type 'myelin::AsyncRef<void>' (myelin::AsyncRef<void> is "
     "not supported: a remote future refers to a value; a method without one "
     "returns myelin::AsyncVoid or myelin::AsyncStatus) in return type of "
     "Api::f"),
    ("static void f(myelin::AsyncRef<void> r);",
     "unsupported type 'myelin::AsyncRef<void>' (myelin::AsyncRef<void> is "
     "not supported"),
    ("static myelin::AsyncRef<const int&> f();",
     "unsupported type 'myelin::AsyncRef<const int &>' (the T of "
     "myelin::AsyncRef<T> must be a value, not a reference) in return type of "
     "Api::f"),
    ("static void f(const myelin::AsyncRef<std::string&>& r);",
     "unsupported type 'const myelin::AsyncRef<std::string &>' (the T of "
     "myelin::AsyncRef<T> must be a value, not a reference) in parameter 'r' "
     "of Api::f"),
    ("static myelin::AsyncRef<myelin::ClassRef<Peer>> f();",
     "unsupported type 'myelin::AsyncRef<myelin::ClassRef<Peer>>' "
     "(myelin::AsyncRef cannot hold an object reference; use "
     "myelin::ClassRef<Peer> itself) in return type of Api::f"),
    ("explicit Api(myelin::AsyncRef<myelin::ClassRef<Peer>> peer);",
     "unsupported type 'myelin::AsyncRef<myelin::ClassRef<Peer>>' "
     "(myelin::AsyncRef cannot hold an object reference; use "
     "myelin::ClassRef<Peer> itself) in parameter 'peer' of Api::Api"),
    ("static myelin::AsyncRef<Peer> f();",
     "unsupported type 'myelin::AsyncRef<Peer>' (myelin::AsyncRef cannot "
     "hold an endpoint class; endpoint classes are identities, not values; "
     "return myelin::ClassRef<Peer>) in return type of Api::f"),
    ("static void f(const myelin::AsyncRef<Peer>& p);",
     "unsupported type 'const myelin::AsyncRef<Peer>' (myelin::AsyncRef cannot "
     "hold an endpoint class; endpoint classes are identities, not values; "
     "pass Peer& or myelin::ClassRef<Peer>) in parameter 'p' of Api::f"),
    ("static myelin::AsyncRef<myelin::AsyncVoid> f();",
     "unsupported type 'myelin::AsyncVoid' (myelin::AsyncVoid can only be the "
     "return type of a remote method) in return type of Api::f"),
    ("static void f(myelin::AsyncRef<myelin::AsyncStatus> r);",
     "unsupported type 'myelin::AsyncStatus' (myelin::AsyncStatus can only be "
     "the return type of a remote method) in parameter 'r' of Api::f"),
    ("static myelin::AsyncRef<myelin::Async<int>> f();",
     "unsupported type 'myelin::Async<int>' (myelin::Async can only be the "
     "return type of a remote method) in return type of Api::f"),
    ("static myelin::AsyncRef<int*> f();",
     "unsupported type 'int *' (raw pointers cannot be sent) in return type "
     "of Api::f"),
    ("static void f(myelin::AsyncRef<std::deque<int>> r);",
     "unsupported type 'std::deque<int>' (std::deque is not supported; use "
     "std::vector) in parameter 'r' of Api::f"),
    ("static void f(myelin::AsyncRef<long double> r);",
     "unsupported type 'long double' (long double has no portable "
     "representation; use double) in parameter 'r' of Api::f"),
])
def test_async_ref_errors(gen, tmp_path, declaration, message):
    header, r = _api(gen, tmp_path, _ASYNC_REF_PRELUDE
                     + f"  {declaration}\n}};\n", role="implements")
    assert r.status == 1
    line = header.read_text().splitlines().index(f"  {declaration}") + 1
    assert len(r.error_lines) == 1, r.stderr
    assert r.error_lines[0].startswith(f"{header}:{line}: error: "), r.stderr
    assert message in r.error_lines[0], r.stderr


@pytest.mark.parametrize("role", ["calls", "implements"])
def test_async_ref_field_errors(gen, tmp_path, role):
    """A struct field, directly or inside a container, reached from an
    EndpointClass and from a common class: each on the field's line."""
    header, r = _api(gen, tmp_path, """\
#include <optional>
#include <vector>
namespace sym {
struct Job {
  std::optional<myelin::AsyncRef<std::string>> input;
};
struct Batch {
  std::vector<myelin::AsyncRef<int>> parts;
};
class Api : public myelin::EndpointClass {
 public:
  static myelin::AsyncRef<int> f(const Job& job);
};
class Peer : public myelin::CommonEndpointClass {
 public:
  myelin::AsyncRef<Batch> g(myelin::AsyncRef<int> n);
};
}  // namespace sym
""", role=role)
    assert r.status == 1
    lines = header.read_text().splitlines()

    def at(text):
        return f"{header}:{lines.index(text) + 1}: error: "

    assert r.error_lines == [
        at("  std::optional<myelin::AsyncRef<std::string>> input;")
        + "unsupported type 'myelin::AsyncRef<std::string>' "
        f"{_ONLY_RESULT_OR_PARAM} in field 'input' of sym::Job",
        at("  std::vector<myelin::AsyncRef<int>> parts;")
        + "unsupported type 'myelin::AsyncRef<int>' "
        f"{_ONLY_RESULT_OR_PARAM} in field 'parts' of sym::Batch",
    ], r.stderr
    assert not r.out_dir.exists() or not any(r.out_dir.iterdir())
