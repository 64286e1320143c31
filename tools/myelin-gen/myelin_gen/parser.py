# Turns one C++ header into a HeaderModel using libclang: finds the endpoint
# classes declared in it, checks their remote methods, constructors and
# destructor, and walks every type reached from their signatures (references
# to endpoint classes included), reporting unsupported ones as file:line
# errors.

from __future__ import annotations

import ctypes
import os
import re
from dataclasses import dataclass
from typing import Optional

from .errors import ErrorSink
from .model import (
    ClassDef,
    ConstructorDef,
    EnumDef,
    FieldDef,
    HeaderModel,
    MethodDef,
    ParamDef,
    StructDef,
    TypeRef,
)

try:
    import clang.cindex as ci
except ImportError as exc:  # pragma: no cover - reported by the CLI
    ci = None
    _IMPORT_ERROR = exc
else:
    _IMPORT_ERROR = None

ENDPOINT_BASE = "myelin::EndpointClass"
COMMON_BASE = "myelin::CommonEndpointClass"
ASYNC_VOID = "myelin::AsyncVoid"
ASYNC_STATUS = "myelin::AsyncStatus"
# Return modes, not values: only ever a remote method's whole return type.
RETURN_MODES = {ASYNC_VOID: "asyncvoid", ASYNC_STATUS: "asyncstatus"}
ASYNC = "myelin::Async"
# A remote future: only ever a remote method's whole return type or a
# parameter's whole type (the callee keeps the value; a handle names it).
ASYNC_REF = "myelin::AsyncRef"
CLASS_REF = "myelin::ClassRef"
RESULT = "myelin::Result"
STATUS = "myelin::Status"

_lib_ready = False


def _lib():
    """libclang entry points that the Python bindings do not wrap."""
    global _lib_ready
    lib = ci.conf.lib
    if not _lib_ready:
        lib.clang_Cursor_isInlineNamespace.argtypes = [ci.Cursor]
        lib.clang_Cursor_isInlineNamespace.restype = ctypes.c_uint
        lib.clang_Cursor_isAnonymousRecordDecl.argtypes = [ci.Cursor]
        lib.clang_Cursor_isAnonymousRecordDecl.restype = ctypes.c_uint
        lib.clang_getUnqualifiedType.argtypes = [ci.Type]
        lib.clang_getUnqualifiedType.restype = ci.Type
        _lib_ready = True
    return lib


def import_error() -> Optional[Exception]:
    return _IMPORT_ERROR


# --------------------------------------------------------------------------
# Names


@dataclass(frozen=True)
class QualName:
    full: str          # every enclosing scope, e.g. "ns::v1::Point"
    plain: str         # inline namespaces dropped, e.g. "std::vector"
    anonymous: bool    # some scope (or the entity itself) has no name


_SCOPE_KINDS = None


def _scope_kinds():
    global _SCOPE_KINDS
    if _SCOPE_KINDS is None:
        K = ci.CursorKind
        _SCOPE_KINDS = {
            K.NAMESPACE, K.STRUCT_DECL, K.CLASS_DECL, K.UNION_DECL,
            K.CLASS_TEMPLATE, K.CLASS_TEMPLATE_PARTIAL_SPECIALIZATION,
            K.ENUM_DECL,
        }
    return _SCOPE_KINDS


def qualified_name(cursor) -> QualName:
    full: list[str] = []
    plain: list[str] = []
    anonymous = False
    c = cursor
    while c is not None and c.kind != ci.CursorKind.TRANSLATION_UNIT:
        if c.kind == ci.CursorKind.LINKAGE_SPEC:
            c = c.semantic_parent
            continue
        if c.kind not in _scope_kinds() and c is not cursor:
            anonymous = True  # declared inside a function or similar
            break
        name = c.spelling
        if c.kind == ci.CursorKind.NAMESPACE:
            if not name or c.is_anonymous():
                anonymous = True
                name = "(anonymous namespace)"
            full.append(name)
            if not _lib().clang_Cursor_isInlineNamespace(c):
                plain.append(name)
        else:
            if not name or c.is_anonymous() or " " in name:
                anonymous = True
            full.append(name)
            plain.append(name)
        c = c.semantic_parent
    return QualName("::".join(reversed(full)), "::".join(reversed(plain)), anonymous)


def _decl_plain_name(t) -> str:
    """Qualified name (inline namespaces dropped) of a canonical record type."""
    decl = t.get_declaration()
    if decl is None or decl.kind == ci.CursorKind.NO_DECL_FOUND:
        return ""
    return qualified_name(decl).plain


def _loc(cursor) -> tuple[str, int]:
    loc = cursor.location
    return (loc.file.name if loc.file else "<unknown>", loc.line)


def _template_args(t) -> list:
    n = t.get_num_template_arguments()
    return [t.get_template_argument_type(i) for i in range(max(n, 0))]


def _has_body(fn) -> bool:
    """Whether the function is defined in the translation unit with a body
    (in the class or out of it); `= default` does not count."""
    if fn.is_default_method():
        return False
    return fn.is_definition() or fn.get_definition() is not None


_OPERATOR = re.compile(r"operator(?![A-Za-z0-9_$])")


def _is_operator(spelling: str) -> bool:
    """`operator==`, `operator()`, `operator new`; not `operatorCount`."""
    return _OPERATOR.match(spelling) is not None


def _unqualified(t):
    return _lib().clang_getUnqualifiedType(t)


def _strip_const_spelling(spelling: str) -> str:
    s = spelling.strip()
    if s.startswith("const "):
        s = s[len("const "):]
    if s.endswith(" const"):
        s = s[: -len(" const")]
    return s


# --------------------------------------------------------------------------
# Type checking


class Unsupported(Exception):
    """A type that cannot be sent; `spelled` names it as written."""

    def __init__(self, spelled: str, reason: str):
        super().__init__(reason)
        self.spelled = spelled
        self.reason = reason


@dataclass
class Use:
    """Where a type is used, for error messages."""

    file: str
    line: int
    where: str            # e.g. "in parameter 'p' of ns::Greeter::f"
    field: bool = False   # C arrays are allowed (struct fields only)
    position: str = ""    # "param", "result" or "async" (T of a returned
                          # Async<T>), for hints; "" elsewhere


_BUILTINS = None
_SPECIAL_REASONS = {
    "LONGDOUBLE": "long double has no portable representation; use double",
    "WCHAR": "wide character types are not supported; use char and std::string",
    "CHAR16": "wide character types are not supported; use char and std::string",
    "CHAR32": "wide character types are not supported; use char and std::string",
    "INT128": "128-bit integers are not supported",
    "UINT128": "128-bit integers are not supported",
    "HALF": "only float and double floating-point types are supported",
    "FLOAT16": "only float and double floating-point types are supported",
    "FLOAT128": "only float and double floating-point types are supported",
    "IBM128": "only float and double floating-point types are supported",
    "BFLOAT16": "only float and double floating-point types are supported",
    "NULLPTR": "std::nullptr_t cannot be sent",
    "MEMBERPOINTER": "member pointers cannot be sent",
    "BLOCKPOINTER": "block pointers cannot be sent",
    "FUNCTIONPROTO": "functions cannot be sent",
    "FUNCTIONNOPROTO": "functions cannot be sent",
    "INCOMPLETEARRAY": "arrays of unknown bound cannot be sent",
    "VARIABLEARRAY": "variable-length arrays cannot be sent",
    "DEPENDENTSIZEDARRAY": "dependent arrays cannot be sent",
    "VECTOR": "vector extension types cannot be sent",
    "COMPLEX": "complex types cannot be sent",
    "VOID": "void can only be a return type",
}

# Well-known templates and classes that are not supported, with a hint.
_KNOWN_UNSUPPORTED = {
    "std::function": "std::function cannot be sent",
    "std::move_only_function": "callables cannot be sent",
    "std::unique_ptr": "std::unique_ptr is not supported; use std::shared_ptr",
    "std::weak_ptr": "std::weak_ptr cannot be sent",
    "std::basic_string_view": "views cannot be sent; use std::string",
    "std::span": "views cannot be sent; use std::vector or std::array",
    "std::unordered_map": "std::unordered_map is not supported; use std::map",
    "std::unordered_set": "std::unordered_set is not supported; use std::set",
    "std::multimap": "std::multimap is not supported; use std::map",
    "std::multiset": "std::multiset is not supported; use std::set",
    "std::list": "std::list is not supported; use std::vector",
    "std::deque": "std::deque is not supported; use std::vector",
    "std::pair": "std::pair is not supported; use a struct",
    "std::tuple": "std::tuple is not supported; use a struct",
    "std::variant": "std::variant is not supported",
    "std::any": "std::any cannot be sent",
    "std::atomic": "atomics cannot be sent",
    "std::mutex": "synchronisation objects cannot be sent",
}


def _builtins():
    global _BUILTINS
    if _BUILTINS is None:
        T = ci.TypeKind
        _BUILTINS = {
            T.BOOL: "bool",
            T.CHAR_S: "char",
            T.CHAR_U: "char",
            T.SCHAR: "signed char",
            T.UCHAR: "unsigned char",
            T.SHORT: "short",
            T.USHORT: "unsigned short",
            T.INT: "int",
            T.UINT: "unsigned int",
            T.LONG: "long",
            T.ULONG: "unsigned long",
            T.LONGLONG: "long long",
            T.ULONGLONG: "unsigned long long",
            T.FLOAT: "float",
            T.DOUBLE: "double",
        }
    return _BUILTINS


class HeaderAnalyzer:
    """Builds the model of one header (one translation unit)."""

    def __init__(self, tu, header_path: str, role: str, errors: ErrorSink):
        self.tu = tu
        self.header_path = header_path
        self.role = role
        self.errors = errors
        self.model = HeaderModel(
            path=header_path, abspath=os.path.abspath(header_path), role=role
        )
        # struct key -> None when valid (or being checked), else (spelled, reason)
        self._struct_state: dict[str, Optional[str]] = {}
        self._main_file = os.path.realpath(header_path)
        self._stubbed = False  # the class being read gets generated stubs

    # ---- entry ---------------------------------------------------------

    def run(self) -> HeaderModel:
        self._scan(self.tu.cursor)
        return self.model

    def _in_header(self, cursor) -> bool:
        f = cursor.location.file
        return f is not None and os.path.realpath(f.name) == self._main_file

    def _scan(self, parent) -> None:
        K = ci.CursorKind
        for c in parent.get_children():
            if c.kind in (K.NAMESPACE, K.LINKAGE_SPEC):
                self._scan(c)
            elif c.kind in (K.CLASS_DECL, K.STRUCT_DECL):
                if c.is_definition() and self._in_header(c):
                    self._consider_class(c)
                if c.is_definition():
                    self._scan_nested(c)
            elif c.kind == K.CLASS_TEMPLATE:
                if self._in_header(c) and self._endpoint_kind(c) is not None:
                    file, line = _loc(c)
                    self.errors.error(
                        file, line,
                        f"class template {qualified_name(c).full} cannot be an "
                        "endpoint class; endpoint classes must be plain classes",
                    )

    def _scan_nested(self, record) -> None:
        K = ci.CursorKind
        for c in record.get_children():
            if c.kind in (K.CLASS_DECL, K.STRUCT_DECL) and c.is_definition():
                if self._in_header(c):
                    self._consider_class(c)
                self._scan_nested(c)

    # ---- endpoint classes ---------------------------------------------

    def _endpoint_kind(self, record, depth: int = 0) -> Optional[str]:
        """'endpoint', 'common' or None, looking through all base classes."""
        if depth > 64:
            return None
        found = None
        for base in record.get_children():
            if base.kind != ci.CursorKind.CXX_BASE_SPECIFIER:
                continue
            bt = base.type.get_canonical()
            decl = bt.get_declaration()
            if decl is None or decl.kind == ci.CursorKind.NO_DECL_FOUND:
                continue
            name = qualified_name(decl).plain
            if name == COMMON_BASE:
                return "common"
            if name == ENDPOINT_BASE:
                found = "endpoint"
                continue
            definition = decl.get_definition()
            if definition is not None:
                sub = self._endpoint_kind(definition, depth + 1)
                if sub == "common":
                    return "common"
                if sub == "endpoint":
                    found = "endpoint"
        return found

    def _endpoint_class(self, canon, spelled: str) -> Optional[str]:
        """The qualified name of `canon` (a canonical type) if it is an
        endpoint class, None if it is not one (or is incomplete); raises
        Unsupported for an endpoint class that references cannot name."""
        if canon.kind != ci.TypeKind.RECORD:
            return None
        decl = canon.get_declaration()
        if decl is None or decl.kind == ci.CursorKind.NO_DECL_FOUND:
            return None
        definition = decl.get_definition()
        if definition is None:
            return None
        kind = self._endpoint_kind(definition)
        if kind is None:
            return None
        qn = qualified_name(decl)
        if kind == "common":
            raise Unsupported(
                spelled, f"{qn.full} derives from myelin::CommonEndpointClass, "
                "which is not supported yet")
        if canon.get_num_template_arguments() >= 0:
            raise Unsupported(
                spelled, f"{qn.full} is a class template; endpoint classes "
                "must be plain classes")
        if qn.anonymous:
            raise Unsupported(
                spelled, f"endpoint class {qn.full} must have a name reachable "
                "from the global namespace (not anonymous, not in an anonymous "
                "namespace)")
        self._check_accessible(decl, spelled)
        return qn.full

    def _endpoint_hint(self, canon, position: str) -> Optional[str]:
        """How to refer to `canon` if it is an endpoint class, for the
        message of an error about it; None if it is not one."""
        try:
            cls = self._endpoint_class(canon.get_canonical(), "")
        except Unsupported:
            return None
        if cls is None:
            return None
        if position == "param":
            return f"pass {cls}& or myelin::ClassRef<{cls}>"
        if position == "result":
            return f"return myelin::ClassRef<{cls}>"
        if position == "async":
            return f"return myelin::Async<myelin::ClassRef<{cls}>>"
        return f"hold a myelin::ClassRef<{cls}>"

    def _consider_class(self, cls) -> None:
        kind = self._endpoint_kind(cls)
        if kind is None:
            return
        qn = qualified_name(cls)
        file, line = _loc(cls)
        if qn.anonymous:
            self.errors.error(
                file, line,
                f"endpoint class {qn.full} must have a name reachable from the "
                "global namespace (not anonymous, not in an anonymous namespace)",
            )
            return
        common = kind == "common"
        # A common class is implemented by both programs (its calls go
        # through the generated proxy), so only an EndpointClass of a --calls
        # header has its members defined by generated stubs.
        self._stubbed = self.role == "calls" and not common
        cdef = ClassDef(qualname=qn.full, file=file, line=line, common=common)
        seen: dict[str, int] = {}
        ctor_seen: dict[tuple[str, ...], int] = {}
        declares_constructor = False
        stateful = False  # has an instance method or a remote constructor
        destructor = None
        K = ci.CursorKind
        A = ci.AccessSpecifier
        for c in cls.get_children():
            if c.kind == K.CONSTRUCTOR:
                declares_constructor = True
            elif c.kind == K.DESTRUCTOR:
                destructor = c
            public = c.access_specifier == A.PUBLIC
            if not public:
                continue
            cfile, cline = _loc(c)
            if c.kind == K.CXX_METHOD:
                if c.is_deleted_method():
                    continue
                if (c.is_copy_assignment_operator_method()
                        or c.is_move_assignment_operator_method()):
                    continue
                if _is_operator(c.spelling):
                    self.errors.error(
                        cfile, cline,
                        f"'{c.spelling}' in {qn.full}: operators cannot be "
                        "remote methods; declare a named method instead",
                    )
                    continue
                if not c.is_static_method():
                    stateful = True
                if c.spelling in seen:
                    self.errors.error(
                        cfile, cline,
                        f"overloaded remote method '{c.spelling}' in {qn.full} "
                        f"(also declared at line {seen[c.spelling]}); remote "
                        "method names must be unique",
                    )
                    continue
                seen[c.spelling] = cline
                m = self._method(c, qn.full)
                if m is not None:
                    cdef.methods.append(m)
            elif c.kind == K.CONVERSION_FUNCTION:
                self.errors.error(
                    cfile, cline,
                    f"'{c.spelling}' in {qn.full}: conversion functions cannot "
                    "be remote methods; declare a named method instead",
                )
            elif c.kind == K.CONSTRUCTOR:
                if (c.is_deleted_method() or c.is_copy_constructor()
                        or c.is_move_constructor()):
                    continue
                stateful = True
                ctor = self._constructor(c, qn.full)
                if ctor is None:
                    continue
                names = tuple(p.name for p in ctor.params)
                if names in ctor_seen:
                    self.errors.error(
                        cfile, cline,
                        f"constructor of {qn.full} has the same parameter names "
                        f"({', '.join(names)}) as the one at line "
                        f"{ctor_seen[names]}; remote constructors are told apart "
                        "by their parameter names",
                    )
                    continue
                ctor_seen[names] = cline
                cdef.constructors.append(ctor)
            elif c.kind == K.FUNCTION_TEMPLATE:
                self.errors.error(
                    cfile, cline,
                    f"member template '{c.spelling}' in {qn.full}: templates "
                    "cannot be remote methods",
                )
        cdef.declares_constructor = declares_constructor
        if not declares_constructor and any(not m.static for m in cdef.methods):
            # Constructed on the peer by its implicit default constructor.
            cdef.constructors.append(
                ConstructorDef([], noexcept=False, line=line, implicit=True))
        if destructor is not None:
            self._destructor(destructor, cdef, stateful)
        self.model.classes.append(cdef)

    def _destructor(self, dtor, cdef: ClassDef, stateful: bool) -> None:
        file, line = _loc(dtor)
        if (dtor.access_specifier != ci.AccessSpecifier.PUBLIC
                or dtor.is_deleted_method()):
            if stateful:
                self.errors.error(
                    file, line,
                    f"endpoint class {cdef.qualname} must have a public destructor",
                )
            return
        defined = _has_body(dtor)
        if stateful and self._defined_in_calls_header(
                dtor, f"destructor of {cdef.qualname}", "generated code"):
            return
        cdef.has_destructor = True
        cdef.destructor_line = line
        cdef.destructor_defined = defined or dtor.is_default_method()

    def _defined_in_calls_header(self, fn, what: str,
                                 definer: str = "generated stub") -> bool:
        """Reports (and returns True for) a function with a body in a class
        whose members the generated code defines (an EndpointClass of a
        --calls header)."""
        if not self._stubbed or not _has_body(fn):
            return False
        file, line = _loc(fn)
        self.errors.error(
            file, line,
            f"{what} is defined in the header; a --calls header must only "
            f"declare it (the {definer} defines it)",
        )
        return True

    def _noexcept(self, fn, what: str) -> Optional[bool]:
        """Whether `fn` is declared noexcept; None (reported) when its
        exception specification cannot be repeated by a stub."""
        E = ci.ExceptionSpecificationKind
        exc = fn.exception_specification_kind
        if exc in (E.COMPUTED_NOEXCEPT, E.DYNAMIC, E.MS_ANY):
            file, line = _loc(fn)
            self.errors.error(
                file, line,
                f"{what}: only a plain 'noexcept' exception specification is "
                "supported",
            )
            return None
        return exc in (E.BASIC_NOEXCEPT, E.DYNAMIC_NONE)

    def _params(self, fn, full: str) -> Optional[list[ParamDef]]:
        params: list[ParamDef] = []
        ok = True
        for i, p in enumerate(fn.get_arguments()):
            name = p.spelling or f"arg{i}"
            pdef = self._param(p, name, full)
            if pdef is None:
                ok = False
            else:
                params.append(pdef)
        return params if ok else None

    def _method(self, fn, class_name: str) -> Optional[MethodDef]:
        file, line = _loc(fn)
        full = f"{class_name}::{fn.spelling}"
        ok = True
        if fn.type.is_function_variadic():
            self.errors.error(file, line, f"remote method {full} cannot be variadic")
            ok = False
        if fn.type.get_ref_qualifier() != ci.RefQualifierKind.NONE:
            self.errors.error(
                file, line, f"remote method {full} cannot be ref-qualified")
            ok = False
        if fn.is_pure_virtual_method():
            self.errors.error(
                file, line,
                f"remote method {full} cannot be pure virtual (objects of an "
                "endpoint class are constructed, so it cannot be abstract)",
            )
            ok = False
        if self._defined_in_calls_header(fn, f"remote method {full}"):
            ok = False
        noexcept = self._noexcept(fn, f"remote method {full}")
        if noexcept is None:
            ok = False

        result = self._result_type(fn, full)
        if result is None:
            ok = False

        params = self._params(fn, full)
        if params is None or not ok:
            return None
        static = fn.is_static_method()
        return MethodDef(fn.spelling, params, result, noexcept, line,
                         static=static, const=not static and fn.is_const_method())

    def _constructor(self, fn, class_name: str) -> Optional[ConstructorDef]:
        file, line = _loc(fn)
        full = f"{class_name}::{fn.spelling}"
        ok = True
        if fn.type.is_function_variadic():
            self.errors.error(
                file, line, f"constructor of {class_name} cannot be variadic")
            ok = False
        defined = _has_body(fn)
        if self._defined_in_calls_header(fn, f"constructor of {class_name}"):
            ok = False
        noexcept = self._noexcept(fn, f"constructor of {class_name}")
        if noexcept is None:
            ok = False
        params = self._params(fn, full)
        if params is None or not ok:
            return None
        # `= default` (a default constructor) needs no stub: a --calls program
        # constructs the remote object when the first instance method is called.
        defaulted = fn.is_default_method()
        return ConstructorDef(params, noexcept, line,
                              defined=defined or defaulted, defaulted=defaulted,
                              explicit=fn.is_explicit_method())

    def _param(self, p, name: str, full: str) -> Optional[ParamDef]:
        file, line = _loc(p)
        use = Use(file, line, f"in parameter '{name}' of {full}",
                  position="param")
        t = p.type
        T = ci.TypeKind
        canon = t.get_canonical()
        try:
            if canon.kind == T.LVALUEREFERENCE:
                pointee = t.get_pointee()
                if pointee.kind == T.INVALID:  # a typedef of a reference
                    pointee = canon.get_pointee()
                pc = pointee.get_canonical()
                cls = self._endpoint_class(pc, t.spelling)
                if cls is not None:
                    # `X&` / `const X&` of an endpoint class: the object
                    # travels as a reference; the stub keeps the `&`.
                    if pc.is_volatile_qualified():
                        raise Unsupported(t.spelling,
                                          "volatile types cannot be sent")
                    ref = TypeRef("objref", cls, const=pc.is_const_qualified())
                    return ParamDef(name, ref, False, line)
                if not pc.is_const_qualified() or pc.is_volatile_qualified():
                    raise Unsupported(
                        t.spelling,
                        "parameters cannot be passed by non-const reference; "
                        "pass by value or by const reference",
                    )
                ref = self._param_type(pointee, use)
                return ParamDef(name, _drop_const(ref), True, line)
            if canon.kind == T.RVALUEREFERENCE:
                hint = self._endpoint_hint(canon.get_pointee(), "param")
                raise Unsupported(
                    t.spelling,
                    "parameters cannot be passed by rvalue reference; "
                    + (hint or "pass by value or by const reference"),
                )
            ref = self._param_type(t, use)
            return ParamDef(name, _drop_const(ref), False, line)
        except Unsupported as u:
            self._report(use, u)
            return None

    def _result_type(self, fn, full: str) -> Optional[TypeRef]:
        file, line = _loc(fn)
        use = Use(file, line, f"in return type of {full}", position="result")
        t = fn.result_type
        canon = t.get_canonical()
        T = ci.TypeKind
        try:
            if canon.kind == T.VOID:
                return TypeRef("void", "void")
            if canon.kind in (T.LVALUEREFERENCE, T.RVALUEREFERENCE):
                hint = self._endpoint_hint(canon.get_pointee(), "result")
                if hint is not None:
                    raise Unsupported(
                        t.spelling, "remote methods cannot return references: "
                        f"a reference result would dangle; {hint} instead")
                raise Unsupported(
                    t.spelling, "remote methods cannot return references; "
                    "return by value")
            if canon.kind == T.RECORD:
                name = _decl_plain_name(canon)
                if name in RETURN_MODES:
                    return TypeRef(RETURN_MODES[name],
                                   const=canon.is_const_qualified())
                if name == ASYNC and canon.get_num_template_arguments() == 1:
                    args = self._sugared_args(t, canon)
                    inner = args[0]
                    if inner.get_canonical().kind == T.VOID:
                        raise Unsupported(
                            t.spelling,
                            "myelin::Async<void> is not supported; use "
                            "myelin::AsyncVoid",
                        )
                    ref = self._type(inner, Use(use.file, use.line, use.where,
                                                position="async"))
                    return TypeRef("async", args=(ref,),
                                   const=canon.is_const_qualified())
                if name == ASYNC_REF:
                    return self._async_ref(t, canon, use)
            return self._type(t, use)
        except Unsupported as u:
            self._report(use, u)
            return None

    def _param_type(self, t, use: Use) -> TypeRef:
        """A parameter's type without its reference: a value or a
        myelin::AsyncRef<T>."""
        canon = t.get_canonical()
        if canon.kind == ci.TypeKind.RECORD and \
                _decl_plain_name(canon) == ASYNC_REF:
            return self._async_ref(t, canon, use)
        return self._type(t, use)

    def _async_ref(self, t, canon, use: Use) -> TypeRef:
        """myelin::AsyncRef<T> as a result or a parameter: T is any value an
        Async<T> may carry, but not an object reference (one already names
        an object the peer keeps) nor an endpoint class."""
        spelled = t.spelling
        T = ci.TypeKind
        if canon.is_volatile_qualified():
            raise Unsupported(spelled, "volatile types cannot be sent")
        if canon.get_num_template_arguments() != 1:
            raise Unsupported(spelled, f"unexpected form of {ASYNC_REF}")
        inner = self._sugared_args(t, canon)[0]
        ic = inner.get_canonical()
        if ic.kind == T.VOID:
            raise Unsupported(
                spelled, f"{ASYNC_REF}<void> is not supported: a remote "
                "future refers to a value; a method without one returns "
                f"{ASYNC_VOID} or {ASYNC_STATUS}")
        if ic.kind in (T.LVALUEREFERENCE, T.RVALUEREFERENCE):
            raise Unsupported(
                spelled, f"the T of {ASYNC_REF}<T> must be a value, not a "
                "reference")
        if ic.kind == T.RECORD and _decl_plain_name(ic) == CLASS_REF:
            raise Unsupported(
                spelled, f"{ASYNC_REF} cannot hold an object reference; use "
                f"{_strip_const_spelling(inner.spelling)} itself")
        hint = self._endpoint_hint(ic, use.position)
        if hint is not None:
            raise Unsupported(
                spelled, f"{ASYNC_REF} cannot hold an endpoint class; "
                f"endpoint classes are identities, not values; {hint}")
        ref = self._type(inner, _inner(use))
        return TypeRef("asyncref", args=(ref,), const=canon.is_const_qualified())

    def _report(self, use: Use, u: Unsupported) -> None:
        self.errors.error(
            use.file, use.line,
            f"unsupported type '{u.spelled}' ({u.reason}) {use.where}",
        )

    # ---- types --------------------------------------------------------

    def _sugared_args(self, t, canon) -> list:
        """Template arguments, as written where the spelling matches the
        canonical argument, canonical otherwise (defaults, alias templates)."""
        cargs = _template_args(canon)
        sargs = _template_args(t)
        out = []
        for i, ca in enumerate(cargs):
            if i < len(sargs) and sargs[i].kind != ci.TypeKind.INVALID and \
                    ca.kind != ci.TypeKind.INVALID and \
                    sargs[i].get_canonical() == ca.get_canonical():
                out.append(sargs[i])
            else:
                out.append(ca)
        return out

    def _type(self, t, use: Use, allow_carray: Optional[bool] = None) -> TypeRef:
        """Classify `t` (as written); raise Unsupported for anything not sendable."""
        if allow_carray is None:
            allow_carray = use.field
        T = ci.TypeKind
        canon = t.get_canonical()
        spelled = t.spelling
        is_const = canon.is_const_qualified()
        if canon.is_volatile_qualified():
            raise Unsupported(spelled, "volatile types cannot be sent")
        k = canon.kind
        builtin = _builtins().get(k)
        if builtin is not None:
            return TypeRef("builtin", builtin, const=is_const)
        if k == T.POINTER:
            pointee = canon.get_pointee()
            if pointee.kind in (T.FUNCTIONPROTO, T.FUNCTIONNOPROTO):
                raise Unsupported(spelled, "function pointers cannot be sent")
            hint = self._endpoint_hint(pointee, use.position)
            raise Unsupported(spelled, "raw pointers cannot be sent"
                              + (f"; {hint}" if hint else ""))
        if k in (T.LVALUEREFERENCE, T.RVALUEREFERENCE):
            if use.field:
                raise Unsupported(spelled, "references cannot be struct fields")
            raise Unsupported(spelled, "references cannot be sent here")
        if k == T.CONSTANTARRAY:
            if not allow_carray:
                raise Unsupported(
                    spelled,
                    "C arrays are only supported as struct fields; use std::array",
                )
            elem_t = canon.get_array_element_type()
            elem = self._type(elem_t, use, allow_carray=True)
            return TypeRef("carray", args=(elem,), size=canon.get_array_size(),
                           const=is_const)
        if k == T.ENUM:
            return self._enum(canon, spelled, is_const)
        if k == T.RECORD:
            return self._record(t, canon, use, is_const)
        reason = _SPECIAL_REASONS.get(k.name)
        if reason is None:
            cs = _strip_const_spelling(canon.spelling)
            if cs == "char8_t":
                reason = "char8_t is not supported; use char and std::string"
            else:
                reason = "this kind of type cannot be sent"
        raise Unsupported(spelled, reason)

    def _enum(self, canon, spelled: str, is_const: bool) -> TypeRef:
        decl = canon.get_declaration()
        qn = qualified_name(decl)
        if qn.anonymous:
            raise Unsupported(
                spelled,
                "anonymous enums and enums in anonymous namespaces cannot be "
                "named by generated code",
            )
        self._check_accessible(decl, spelled)
        if qn.full not in self.model.types:
            definition = decl.get_definition() or decl
            file, line = _loc(definition)
            unsigned = definition.enum_type.get_canonical().kind in (
                ci.TypeKind.BOOL, ci.TypeKind.CHAR_U, ci.TypeKind.UCHAR,
                ci.TypeKind.USHORT, ci.TypeKind.UINT, ci.TypeKind.ULONG,
                ci.TypeKind.ULONGLONG, ci.TypeKind.UINT128,
                ci.TypeKind.CHAR16, ci.TypeKind.CHAR32)
            get_value = (ci.conf.lib.clang_getEnumConstantDeclUnsignedValue
                         if unsigned else
                         ci.conf.lib.clang_getEnumConstantDeclValue)
            values = [
                (c.spelling, int(get_value(c)))
                for c in definition.get_children()
                if c.kind == ci.CursorKind.ENUM_CONSTANT_DECL
            ]
            self.model.types[qn.full] = EnumDef(qn.full, file, line, values)
        return TypeRef("enum", qn.full, const=is_const)

    def _check_accessible(self, decl, spelled: str) -> None:
        c = decl
        while c is not None and c.kind != ci.CursorKind.TRANSLATION_UNIT:
            parent = c.semantic_parent
            if parent is not None and parent.kind in (
                    ci.CursorKind.STRUCT_DECL, ci.CursorKind.CLASS_DECL):
                if c.access_specifier not in (ci.AccessSpecifier.PUBLIC,
                                              ci.AccessSpecifier.INVALID):
                    raise Unsupported(
                        spelled,
                        f"{qualified_name(decl).full} is not publicly accessible",
                    )
            c = parent

    def _record(self, t, canon, use: Use, is_const: bool) -> TypeRef:
        spelled = t.spelling
        decl = canon.get_declaration()
        qn = qualified_name(decl)
        ntargs = canon.get_num_template_arguments()
        name = qn.plain
        if ntargs >= 0:
            return self._template(t, canon, name, use, is_const)
        if name in RETURN_MODES:
            raise Unsupported(
                spelled, f"{name} can only be the return type of a remote "
                "method")
        if name == STATUS:
            # A value with private state that its Codec knows; not a struct.
            return TypeRef("status", const=is_const)
        if name in _KNOWN_UNSUPPORTED:
            raise Unsupported(spelled, _KNOWN_UNSUPPORTED[name])
        if self._endpoint_class(canon, spelled) is not None:
            raise Unsupported(
                spelled, "endpoint classes are identities, not values; "
                + self._endpoint_hint(canon, use.position))
        return self._struct(decl, qn, _strip_const_spelling(spelled), use, is_const)

    def _template(self, t, canon, name: str, use: Use, is_const: bool) -> TypeRef:
        spelled = t.spelling
        T = ci.TypeKind
        cargs = _template_args(canon)
        args = self._sugared_args(t, canon)

        def expect_default(idx: int, template: str, *inner) -> bool:
            if idx >= len(cargs):
                return True
            a = cargs[idx].get_canonical()
            if a.kind != T.RECORD or _decl_plain_name(a) != template:
                return False
            aa = _template_args(a)
            if len(aa) != len(inner):
                return False
            return all(check(x) for check, x in zip(inner, aa))

        def same(x):
            return lambda y: y.get_canonical() == x.get_canonical()

        def pair_of_const(k, v):
            def check(y):
                y = y.get_canonical()
                if y.kind != T.RECORD or _decl_plain_name(y) != "std::pair":
                    return False
                pa = _template_args(y)
                return (len(pa) == 2 and pa[0].is_const_qualified()
                        and _unqualified(pa[0]) == k.get_canonical()
                        and pa[1].get_canonical() == v.get_canonical())
            return check

        if name == "std::basic_string":
            ok = (len(cargs) >= 1 and cargs[0].kind in (T.CHAR_S, T.CHAR_U)
                  and expect_default(1, "std::char_traits", same(cargs[0]))
                  and expect_default(2, "std::allocator", same(cargs[0])))
            if not ok:
                raise Unsupported(
                    spelled, "only std::string (std::basic_string<char> with "
                    "the default traits and allocator) is supported")
            return TypeRef("string", const=is_const)
        if name == "std::vector":
            if not expect_default(1, "std::allocator", same(cargs[0])):
                raise Unsupported(spelled, "std::vector with a non-default "
                                  "allocator is not supported")
            inner = self._type(args[0], _inner(use))
            return TypeRef("vector", args=(inner,), const=is_const)
        if name == "std::set":
            if not (expect_default(1, "std::less", same(cargs[0]))
                    and expect_default(2, "std::allocator", same(cargs[0]))):
                raise Unsupported(spelled, "std::set with a non-default "
                                  "comparator or allocator is not supported")
            inner = self._type(args[0], _inner(use))
            _check_ordered(inner, spelled, "std::set element")
            return TypeRef("set", args=(inner,), const=is_const)
        if name == "std::map":
            if not (expect_default(2, "std::less", same(cargs[0]))
                    and expect_default(3, "std::allocator",
                                       pair_of_const(cargs[0], cargs[1]))):
                raise Unsupported(spelled, "std::map with a non-default "
                                  "comparator or allocator is not supported")
            key = self._type(args[0], _inner(use))
            _check_ordered(key, spelled, "std::map key")
            value = self._type(args[1], _inner(use))
            return TypeRef("map", args=(key, value), const=is_const)
        if name in ("std::optional", "std::shared_ptr"):
            if len(cargs) != 1:
                raise Unsupported(spelled, f"unexpected form of {name}")
            inner = self._type(args[0], _inner(use))
            kind = name.split("::")[1]
            return TypeRef(kind, args=(inner,), const=is_const)
        if name == "std::array":
            decl = canon.get_declaration()
            if len(cargs) != 2 or decl.get_template_argument_kind(1) != \
                    ci.TemplateArgumentKind.INTEGRAL:
                raise Unsupported(spelled, "unexpected form of std::array")
            size = decl.get_template_argument_unsigned_value(1)
            inner = self._type(args[0], _inner(use))
            return TypeRef("array", args=(inner,), size=size, const=is_const)
        if name == CLASS_REF:
            return self._class_ref(t, canon, cargs, args, is_const)
        if name == RESULT:
            return self._result(spelled, cargs, args, use, is_const)
        if name == ASYNC:
            raise Unsupported(
                spelled,
                "myelin::Async can only be the return type of a remote method",
            )
        if name == ASYNC_REF:
            raise Unsupported(
                spelled,
                f"{ASYNC_REF} can only be the return type of a remote method "
                "or the type of a parameter of a remote method or constructor",
            )
        if name in _KNOWN_UNSUPPORTED:
            raise Unsupported(spelled, _KNOWN_UNSUPPORTED[name])
        raise Unsupported(
            spelled, f"unknown template {name}; only std::string, std::vector, "
            "std::map, std::set, std::optional, std::shared_ptr, std::array, "
            f"{RESULT} and {CLASS_REF} are supported")

    def _result(self, spelled: str, cargs, args, use: Use,
                is_const: bool) -> TypeRef:
        """myelin::Result<T, E>: T and E are classified like any other
        template argument, so the structs and enums they reach are
        registered and their problems reported."""
        if len(cargs) != 2:
            raise Unsupported(spelled, f"unexpected form of {RESULT}")
        # Checked before the arguments, whose own error ("void can only be a
        # return type") would not say what to use instead.
        if any(a.get_canonical().kind == ci.TypeKind.VOID for a in cargs):
            raise Unsupported(
                spelled, f"neither T nor E of {RESULT}<T, E> can be void; "
                f"for an operation with no value return {STATUS}")
        value = self._type(args[0], _inner(use))
        error = self._type(args[1], _inner(use))
        return TypeRef("result", args=(value, error), const=is_const)

    def _class_ref(self, t, canon, cargs, args, is_const: bool) -> TypeRef:
        spelled = t.spelling
        if len(cargs) != 1:
            raise Unsupported(spelled, f"unexpected form of {CLASS_REF}")
        target = cargs[0].get_canonical()
        written = args[0].spelling
        if target.kind == ci.TypeKind.RECORD:
            written = qualified_name(target.get_declaration()).full
        cls = self._endpoint_class(target, spelled)
        if cls is None:
            raise Unsupported(
                spelled, f"{written} is not an endpoint class; "
                f"{CLASS_REF}<T> refers to classes deriving from "
                f"{ENDPOINT_BASE}")
        if target.is_const_qualified() or target.is_volatile_qualified():
            raise Unsupported(
                spelled, f"name the class without qualifiers: "
                f"{CLASS_REF}<{cls}>")
        return TypeRef("classref", cls, const=is_const)

    def _struct(self, decl, qn, spelled: str, use: Use, is_const: bool) -> TypeRef:
        key = decl.get_usr() or qn.full
        if key in self._struct_state:
            reason = self._struct_state[key]
            if reason is not None:
                raise Unsupported(spelled, reason)
            return TypeRef("struct", qn.full, const=is_const)
        reason = self._struct_shape_problem(decl, qn)
        self._struct_state[key] = reason
        if reason is not None:
            raise Unsupported(spelled, reason)
        definition = decl.get_definition()
        file, line = _loc(definition)
        sdef = StructDef(qn.full, file, line)
        self.model.types[qn.full] = sdef
        for c in definition.get_children():
            if c.kind != ci.CursorKind.FIELD_DECL:
                continue
            ffile, fline = _loc(c)
            fuse = Use(ffile, fline, f"in field '{c.spelling}' of {qn.full}",
                       field=True)
            try:
                if c.is_bitfield():
                    raise Unsupported(c.type.spelling, "bit-fields cannot be sent")
                fc = c.type.get_canonical()
                if fc.kind in (ci.TypeKind.LVALUEREFERENCE,
                               ci.TypeKind.RVALUEREFERENCE):
                    raise Unsupported(c.type.spelling,
                                      "references cannot be struct fields")
                if fc.is_const_qualified():
                    raise Unsupported(c.type.spelling,
                                      "const data members cannot be received")
                ref = self._type(c.type, fuse)
                sdef.fields.append(FieldDef(c.spelling, ref, fline))
            except Unsupported as u:
                self._report(fuse, u)
        return TypeRef("struct", qn.full, const=is_const)

    def _struct_shape_problem(self, decl, qn) -> Optional[str]:
        K = ci.CursorKind
        if decl.kind == K.UNION_DECL:
            return "unions cannot be sent"
        definition = decl.get_definition()
        if definition is None:
            return "incomplete type; the struct must be defined"
        if qn.anonymous:
            return ("anonymous structs and types in anonymous namespaces "
                    "cannot be named by generated code; give the struct a name")
        try:
            self._check_accessible(decl, qn.full)
        except Unsupported as u:
            return u.reason
        for c in definition.get_children():
            if c.kind == K.CXX_BASE_SPECIFIER:
                return "classes with base classes cannot be sent"
        for c in definition.get_children():
            if c.kind in (K.CXX_METHOD, K.DESTRUCTOR) and c.is_virtual_method():
                return "classes with virtual functions cannot be sent"
            if c.kind == K.FIELD_DECL and \
                    c.access_specifier != ci.AccessSpecifier.PUBLIC:
                access = c.access_specifier.name.lower()
                return f"class with {access} data member '{c.spelling}' cannot be sent"
            if c.kind in (K.UNION_DECL, K.STRUCT_DECL, K.CLASS_DECL) and \
                    _lib().clang_Cursor_isAnonymousRecordDecl(c):
                what = "union" if c.kind == K.UNION_DECL else "struct"
                return f"anonymous {what} members cannot be sent"
        return None


def _inner(use: Use) -> Use:
    """Template arguments are never struct fields themselves (no C arrays),
    nor a signature's own type."""
    return Use(use.file, use.line, use.where, field=False)


def _check_ordered(ref: TypeRef, spelled: str, what: str) -> None:
    """References, Results and Statuses have no order (they only compare
    equal), so none may sit in a set element or map key, directly or inside
    another container; a shared_ptr compares its pointer and a struct its
    own operator<."""
    if ref.kind == "classref":
        raise Unsupported(
            spelled, f"object references have no order: {CLASS_REF}<{ref.name}> "
            f"cannot be a {what} or part of one")
    if ref.kind in ("result", "status"):
        name = RESULT if ref.kind == "result" else STATUS
        raise Unsupported(
            spelled, f"{name} has no order: it cannot be a {what} or part of one")
    if ref.kind != "shared_ptr":
        for a in ref.args:
            _check_ordered(a, spelled, what)


def _drop_const(ref: TypeRef) -> TypeRef:
    if not ref.const:
        return ref
    return TypeRef(ref.kind, ref.name, ref.args, ref.size, False)


# --------------------------------------------------------------------------
# Parsing


def parse_header(index, header: str, role: str, clang_args: list[str],
                 errors: ErrorSink) -> Optional[HeaderModel]:
    """Parse `header` and build its model; problems go to `errors`."""
    args = ["-x", "c++", "-std=c++20"] + list(clang_args)
    try:
        tu = index.parse(header, args=args)
    except ci.TranslationUnitLoadError as exc:
        errors.error(header, 1, f"libclang could not parse the header: {exc}")
        return None
    failed = False
    for d in tu.diagnostics:
        if d.severity < ci.Diagnostic.Error:
            continue
        failed = True
        loc = d.location
        file = loc.file.name if loc.file else header
        line = loc.line if loc.file else 1
        errors.error(file, line, d.spelling)
    if failed:
        return None
    before = len(errors)
    model = HeaderAnalyzer(tu, header, role, errors).run()
    if len(errors) != before:
        return None
    # Every file the header pulls in, for the build's depfile: a change to a
    # struct in an included header must regenerate too.
    deps = {os.path.abspath(header)}
    for inc in tu.get_includes():
        if inc.include is not None:
            deps.add(os.path.abspath(inc.include.name))
    model.dependencies = sorted(deps)
    return model
