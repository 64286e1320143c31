# The small model myelin-gen builds from a parsed header: endpoint classes,
# their remote methods and constructors, and every struct and enum reached
# from their signatures. The parser fills it in; the emitter only reads it
# (and derives the `remote::` proxy of each common class from it).

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Optional, Union


@dataclass(frozen=True)
class TypeRef:
    """A supported type, reduced to its canonical structure.

    kind is one of: builtin, enum, struct, string, vector, map, set, optional,
    shared_ptr, array, carray, void, async, asyncvoid, asyncstatus (the
    return modes myelin::AsyncVoid and myelin::AsyncStatus; only ever a
    remote method's whole result), asyncref (a myelin::AsyncRef<T>; only
    ever a remote method's whole result or a parameter's whole type; args
    is T), classref (a
    myelin::ClassRef<X>), objref (an `X&` parameter; only ever a parameter's
    whole type), result (a myelin::Result<T, E>; args are T and E), status
    (a myelin::Status).
    name: the builtin's spelling ("unsigned int") or, for enum/struct, the
    fully qualified name without leading "::"; for classref/objref the
    endpoint class X's.
    args: template arguments (or the element type of a C array).
    size: the N of std::array<T, N> or T[N].
    const: whether the type itself is const-qualified; for objref, whether
    the object referred to is (`const X&`).
    """

    kind: str
    name: str = ""
    args: tuple["TypeRef", ...] = ()
    size: Optional[int] = None
    const: bool = False

    def spelling(self) -> str:
        """Fully qualified C++ spelling that names exactly this type anywhere."""
        base = self._base_spelling()
        return f"const {base}" if self.const else base

    def _base_spelling(self) -> str:
        k = self.kind
        if k in ("builtin", "void"):
            return self.name
        if k in ("enum", "struct"):
            return "::" + self.name
        if k == "objref":
            return f"::{self.name}&"  # `const` in front binds to the object
        if k == "classref":
            return f"::myelin::ClassRef<::{self.name}>"
        if k == "string":
            return "::std::string"
        if k == "asyncvoid":
            return "::myelin::AsyncVoid"
        if k == "asyncstatus":
            return "::myelin::AsyncStatus"
        if k == "status":
            return "::myelin::Status"
        if k == "result":
            inner = ", ".join(a.spelling() for a in self.args)
            return f"::myelin::Result<{inner}>"
        if k == "async":
            return f"::myelin::Async<{self.args[0].spelling()}>"
        if k == "asyncref":
            return f"::myelin::AsyncRef<{self.args[0].spelling()}>"
        if k == "array":
            return f"::std::array<{self.args[0].spelling()}, {self.size}>"
        if k in ("vector", "map", "set", "optional", "shared_ptr"):
            inner = ", ".join(a.spelling() for a in self.args)
            return f"::std::{k}<{inner}>"
        raise ValueError(f"type kind {k!r} has no standalone spelling")

    def named_types(self) -> list[str]:
        """Qualified names of the structs and enums this type mentions, in order."""
        out: list[str] = []
        if self.kind in ("enum", "struct"):
            out.append(self.name)
        for a in self.args:
            out.extend(a.named_types())
        return out

    def endpoint_classes(self) -> list[str]:
        """Qualified names of the endpoint classes this type refers to, in order."""
        out: list[str] = []
        if self.kind in ("classref", "objref"):
            out.append(self.name)
        for a in self.args:
            out.extend(a.endpoint_classes())
        return out


@dataclass
class FieldDef:
    name: str
    type: TypeRef
    line: int


@dataclass
class StructDef:
    qualname: str
    file: str
    line: int
    fields: list[FieldDef] = field(default_factory=list)

    def dependencies(self) -> list[str]:
        out: list[str] = []
        for f in self.fields:
            out.extend(f.type.named_types())
        return out

    def endpoint_classes(self) -> list[str]:
        out: list[str] = []
        for f in self.fields:
            out.extend(f.type.endpoint_classes())
        return out


@dataclass
class EnumDef:
    qualname: str
    file: str
    line: int
    enumerators: list[tuple[str, int]] = field(default_factory=list)

    def dependencies(self) -> list[str]:
        return []

    def endpoint_classes(self) -> list[str]:
        return []


NamedType = Union[StructDef, EnumDef]


@dataclass
class ParamDef:
    name: str          # as declared, or arg<index> when unnamed
    type: TypeRef      # without reference / top-level const (an objref keeps both)
    by_const_ref: bool
    line: int


@dataclass
class MethodDef:
    name: str
    params: list[ParamDef]
    result: TypeRef
    noexcept: bool
    line: int
    static: bool = True    # False: an instance method, called on an object
    const: bool = False    # a const-qualified instance method

    def named_types(self) -> list[str]:
        out = list(self.result.named_types())
        for p in self.params:
            out.extend(p.type.named_types())
        return out

    def endpoint_classes(self) -> list[str]:
        out = list(self.result.endpoint_classes())
        for p in self.params:
            out.extend(p.type.endpoint_classes())
        return out


@dataclass
class ConstructorDef:
    params: list[ParamDef]
    noexcept: bool
    line: int
    implicit: bool = False  # not declared: the class's implicit default constructor
    defined: bool = False   # defined in the header (a body or `= default`)
    defaulted: bool = False  # `= default` (then also `defined`)
    explicit: bool = False

    @property
    def needs_stub(self) -> bool:
        """Whether a --calls program must get a generated definition."""
        return not self.implicit and not self.defined

    def named_types(self) -> list[str]:
        out: list[str] = []
        for p in self.params:
            out.extend(p.type.named_types())
        return out

    def endpoint_classes(self) -> list[str]:
        out: list[str] = []
        for p in self.params:
            out.extend(p.type.endpoint_classes())
        return out


@dataclass
class ClassDef:
    qualname: str
    file: str
    line: int
    methods: list[MethodDef] = field(default_factory=list)
    constructors: list[ConstructorDef] = field(default_factory=list)
    has_destructor: bool = False      # a public destructor is declared
    destructor_line: int = 0
    destructor_defined: bool = False  # defined in the header (a body or `= default`)
    declares_constructor: bool = False  # any constructor, remote or not
    common: bool = False              # derives from myelin::CommonEndpointClass
    stands_for: str = ""              # a proxy: the common class it calls

    @property
    def schema_name(self) -> str:
        """kName: a proxy is known to the peer by its common class's name."""
        return self.stands_for or self.qualname

    @property
    def stateful(self) -> bool:
        """Whether objects of the class are made: instance methods or constructors."""
        return bool(self.constructors) or any(not m.static for m in self.methods)

    @property
    def simple_name(self) -> str:
        """The class's own name, as its constructors and destructor spell it."""
        return self.qualname.rsplit("::", 1)[-1]

    @property
    def scope(self) -> str:
        """The enclosing scopes of the class ("" in the global namespace)."""
        return self.qualname.rpartition("::")[0]

    def proxy(self, root: str) -> "ClassDef":
        """The `root::` proxy of a common class: the same remote methods and
        constructors, called on the peer's instance the way a --calls
        program calls an EndpointClass. A defaulted constructor is declared
        `= default` and, like an implicit one, builds the peer's object at
        the first instance call; every other one gets a stub. The proxy
        always declares its (stub) destructor."""
        ctors = [replace(c, defined=c.defaulted) for c in self.constructors]
        return replace(self, qualname=f"{root}::{self.qualname}",
                       constructors=ctors, has_destructor=True,
                       destructor_defined=False, common=False,
                       stands_for=self.qualname)


@dataclass
class HeaderModel:
    path: str                # as given on the command line
    abspath: str             # used in the generated #include
    role: str                # "implements" or "calls"
    classes: list[ClassDef] = field(default_factory=list)
    types: dict[str, NamedType] = field(default_factory=dict)  # by qualname
    remote_namespace: str = "remote"  # root namespace of the proxies

    def proxies(self) -> list[tuple[ClassDef, ClassDef]]:
        """(common class, its proxy) for every common class, in order."""
        return [(c, c.proxy(self.remote_namespace))
                for c in self.classes if c.common]

    @property
    def stem(self) -> str:
        return stem_of(self.path)

    def ordered_types(self) -> list[NamedType]:
        """Structs and enums, each once, dependencies before their users.

        Depth-first from the methods, then the constructors, in declaration
        order; a cycle (a struct reaching itself through a container) is cut
        where it closes.
        """
        done: set[str] = set()
        active: set[str] = set()
        order: list[NamedType] = []

        def visit(name: str) -> None:
            if name in done or name in active or name not in self.types:
                return
            active.add(name)
            t = self.types[name]
            for dep in t.dependencies():
                visit(dep)
            active.discard(name)
            done.add(name)
            order.append(t)

        for cls in self.classes:
            for m in [*cls.methods, *cls.constructors]:
                for name in m.named_types():
                    visit(name)
        for name in self.types:  # anything left (not expected), stable order
            visit(name)
        return order

    def named_classes(self) -> list[str]:
        """Endpoint classes whose schema name the generated header gives, each
        once: the header's own, in declaration order, then those its
        interface refers to (`X&`, ClassRef<X>), in the order first reached
        through the methods, the constructors and the structs."""
        out: dict[str, None] = {cls.qualname: None for cls in self.classes}
        for cls in self.classes:
            for m in [*cls.methods, *cls.constructors]:
                out.update(dict.fromkeys(m.endpoint_classes()))
        for t in self.ordered_types():
            out.update(dict.fromkeys(t.endpoint_classes()))
        return list(out)


def stem_of(path: str) -> str:
    base = os.path.basename(path)
    stem, _ext = os.path.splitext(base)
    return stem


def guard_suffix(qualname: str) -> str:
    return qualname.replace("::", "_")
