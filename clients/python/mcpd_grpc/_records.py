"""Frozen dataclasses that cost next to nothing until they are used.

``dataclasses`` writes each class's ``__init__``, ``__repr__``, ``__eq__``,
``__hash__`` and frozen ``__setattr__`` as source and compiles it, about
0.7 ms a class, and importing it loads ``inspect`` and ``ast``, about 9 ms.
``types`` declares 40 classes and a program uses a handful: with
``dataclasses``, they were half of the client's cold start
(docs/performance.md, "Cold start").

``dataclass(frozen=True)`` here gives a class the behaviour
``dataclasses.dataclass(frozen=True)`` gives it (the same ``__init__``
signature and ``__post_init__`` call, repr, equality, hash, ``__match_args__``,
``FrozenInstanceError``), with shared methods and an ``__init__`` compiled
when the first instance is made. What only introspection needs,
``__dataclass_fields__`` and ``__dataclass_params__`` (``dataclasses.fields``,
``asdict``, ``replace``, ``is_dataclass``), is made by ``dataclasses`` itself
the first time something asks for it. Type checkers see
``dataclasses.dataclass`` and ``field`` (``types`` imports those under
``TYPE_CHECKING``). ``tests/test_records.py`` holds the two side by side.

Only what ``types`` needs is supported: ``field(default=, default_factory=,
repr=)``, ``ClassVar`` annotations, ``__post_init__``, no base classes.
"""

from __future__ import annotations

import sys
import threading
from operator import attrgetter
from typing import Any, Callable, Dict, List, Set, Tuple, TypeVar

_T = TypeVar("_T", bound=type)

_MISSING: Any = object()


class _Factory:
    """The default of a field with a default_factory in ``__init__``'s
    signature, shown as dataclasses shows it."""

    def __repr__(self) -> str:
        return "<factory>"


_HAS_FACTORY: Any = _Factory()

_lock = threading.Lock()


class _Field:
    """A ``field(...)`` in a class body."""

    __slots__ = ("default", "default_factory", "repr", "kwargs")

    def __init__(self, kwargs: Dict[str, Any]) -> None:
        self.kwargs = kwargs
        self.default = kwargs.get("default", _MISSING)
        self.default_factory = kwargs.get("default_factory", _MISSING)
        self.repr = kwargs.get("repr", True)


def field(**kwargs: Any) -> Any:
    """``dataclasses.field`` with ``default``, ``default_factory`` and
    ``repr``."""
    unsupported = set(kwargs) - {"default", "default_factory", "repr"}
    if unsupported:
        raise TypeError(f"mcpd_grpc._records.field does not take {sorted(unsupported)}")
    if "default" in kwargs and "default_factory" in kwargs:
        raise ValueError("cannot specify both default and default_factory")
    return _Field(kwargs)


class _Layout:
    """A record class's fields, in order."""

    __slots__ = ("names", "annotations", "defaults", "factories", "shown", "values", "shown_values")

    def __init__(self, cls: type) -> None:
        annotations: Dict[str, Any] = cls.__dict__.get("__annotations__", {})
        self.names: Tuple[str, ...] = ()
        self.annotations: Dict[str, Any] = {}
        self.defaults: Dict[str, Any] = {}
        self.factories: Dict[str, Callable[[], Any]] = {}
        shown: List[str] = []
        names: List[str] = []
        for name, annotation in annotations.items():
            if _is_classvar(annotation):
                continue
            value = cls.__dict__.get(name, _MISSING)
            show = True
            if isinstance(value, _Field):
                show = value.repr
                if value.default_factory is not _MISSING:
                    self.factories[name] = value.default_factory
                    delattr(cls, name)  # as dataclasses leaves it
                elif value.default is not _MISSING:
                    self.defaults[name] = value.default
                    setattr(cls, name, value.default)
                else:
                    delattr(cls, name)
            elif value is not _MISSING:
                if isinstance(value, (list, dict, set)):
                    raise ValueError(f"mutable default {type(value)} for field {name} is not allowed: use default_factory")
                self.defaults[name] = value
            if name not in self.defaults and name not in self.factories and (self.defaults or self.factories):
                raise TypeError(f"non-default argument {name!r} follows default argument")
            names.append(name)
            self.annotations[name] = annotation
            if show:
                shown.append(name)
        self.names = tuple(names)
        self.shown = tuple(shown)
        # attrgetter of one name returns the value, not a 1-tuple: an empty
        # name list never reaches these.
        self.values = attrgetter(*names) if len(names) > 1 else (lambda o, n=names: tuple(getattr(o, x) for x in n))
        self.shown_values = attrgetter(*shown) if len(shown) > 1 else (lambda o, n=shown: tuple(getattr(o, x) for x in n))


def _is_classvar(annotation: Any) -> bool:
    if isinstance(annotation, str):
        return annotation.startswith(("ClassVar", "typing.ClassVar"))
    typing = sys.modules.get("typing")
    return typing is not None and (annotation is typing.ClassVar or getattr(annotation, "__origin__", None) is typing.ClassVar)


_layouts: Dict[type, _Layout] = {}


def _frozen_error(name: str) -> BaseException:
    from dataclasses import FrozenInstanceError

    return FrozenInstanceError(f"cannot assign to field {name!r}")


# Shared methods: what dataclasses generates for a frozen class, written
# once.
_repr_running: Set[Tuple[int, int]] = set()


def _repr(self: Any) -> str:
    key = (id(self), threading.get_ident())
    if key in _repr_running:
        return "..."  # as reprlib.recursive_repr, which dataclasses uses
    _repr_running.add(key)
    try:
        layout = _layouts[type(self)]
        values = layout.shown_values(self)
        parts = ", ".join(f"{n}={v!r}" for n, v in zip(layout.shown, values))
        return f"{type(self).__qualname__}({parts})"
    finally:
        _repr_running.discard(key)


def _eq(self: Any, other: Any) -> Any:
    if other.__class__ is self.__class__:
        values = _layouts[type(self)].values
        return values(self) == values(other)
    return NotImplemented


def _hash(self: Any) -> int:
    return hash(_layouts[type(self)].values(self))


def _replace(self: Any, **changes: Any) -> Any:
    values = dict(zip(_layouts[type(self)].names, _layouts[type(self)].values(self)))
    values.update(changes)
    return type(self)(**values)


def _instance_getattr(self: Any, name: str) -> Any:
    # dataclasses.fields(instance) and replace() look these up on the
    # instance.
    cls = type(self)
    if name in ("__dataclass_fields__", "__dataclass_params__"):
        _describe(cls)
        return type.__getattribute__(cls, name)
    raise AttributeError(f"{cls.__name__!r} object has no attribute {name!r}")


def _lazy_init(self: Any, *args: Any, **kwargs: Any) -> None:
    _compile_init(type(self))(self, *args, **kwargs)


def _compile_init(cls: type) -> Callable[..., None]:
    """cls's __init__, as dataclasses writes it for a frozen class,
    compiled on first use."""
    init: Callable[..., None] = cls.__dict__["__init__"]
    if init is not _lazy_init:
        return init
    layout = _layouts[cls]
    params, body = [], []
    globals_: Dict[str, Any] = {"__object_setattr": object.__setattr__, "__HAS_FACTORY": _HAS_FACTORY}
    for name in layout.names:
        if name in layout.factories:
            globals_[f"__factory_{name}"] = layout.factories[name]
            params.append(f"{name}=__HAS_FACTORY")
            body.append(f"__object_setattr(self, {name!r}, __factory_{name}() if {name} is __HAS_FACTORY else {name})")
        elif name in layout.defaults:
            globals_[f"__default_{name}"] = layout.defaults[name]
            params.append(f"{name}=__default_{name}")
            body.append(f"__object_setattr(self, {name!r}, {name})")
        else:
            params.append(name)
            body.append(f"__object_setattr(self, {name!r}, {name})")
    if hasattr(cls, "__post_init__"):
        body.append("self.__post_init__()")
    source = f"def __init__(self{''.join(', ' + p for p in params)}):\n" + "".join(f"    {line}\n" for line in body or ["pass"])
    namespace: Dict[str, Any] = {}
    exec(source, globals_, namespace)  # noqa: S102 - source made above from field names
    fn: Callable[..., None] = namespace["__init__"]
    fn.__qualname__ = f"{cls.__qualname__}.__init__"
    fn.__module__ = cls.__module__
    fn.__annotations__ = {**layout.annotations, "return": None}
    cls.__init__ = fn  # type: ignore[misc]
    return fn


def _describe(cls: type) -> None:
    """Gives cls the ``__dataclass_fields__`` and ``__dataclass_params__``
    that ``dataclasses`` makes for the same class body."""
    with _lock:
        if "__dataclass_fields__" in cls.__dict__:
            return
        import dataclasses

        layout = _layouts[cls]
        namespace: Dict[str, Any] = {
            "__module__": cls.__module__,
            "__qualname__": cls.__qualname__,
            "__annotations__": cls.__dict__.get("__annotations__", {}),
        }
        for name in layout.names:
            show = name in layout.shown
            if name in layout.factories:
                namespace[name] = dataclasses.field(default_factory=layout.factories[name], repr=show)
            elif name in layout.defaults:
                namespace[name] = dataclasses.field(default=layout.defaults[name], repr=show)
            elif not show:
                namespace[name] = dataclasses.field(repr=False)
        twin: Any = dataclasses.dataclass(frozen=True)(type(cls.__name__, (), namespace))
        type.__setattr__(cls, "__dataclass_params__", twin.__dataclass_params__)
        type.__setattr__(cls, "__dataclass_fields__", twin.__dataclass_fields__)


class _Record(type):
    """The metaclass of these classes: it answers what dataclasses asks a
    class."""

    def __getattr__(cls, name: str) -> Any:
        if name in ("__dataclass_fields__", "__dataclass_params__"):
            _describe(cls)
            return type.__getattribute__(cls, name)
        if name == "__signature__":
            # inspect.signature (help(), IDEs) shows __init__'s fields.
            import inspect

            init = inspect.signature(_compile_init(cls))
            return init.replace(parameters=list(init.parameters.values())[1:])
        raise AttributeError(f"type object {cls.__name__!r} has no attribute {name!r}")


def dataclass(*, frozen: bool) -> Callable[[_T], _T]:
    """``dataclasses.dataclass(frozen=True)``, its work done when needed."""
    if not frozen:
        raise TypeError("mcpd_grpc._records makes frozen dataclasses only")

    def wrap(cls: _T) -> _T:
        if cls.__bases__ != (object,):
            raise TypeError("mcpd_grpc._records does not support base classes")
        namespace = {k: v for k, v in cls.__dict__.items() if k not in ("__dict__", "__weakref__")}
        namespace["__qualname__"] = cls.__qualname__
        record = _Record(cls.__name__, (), namespace)
        layout = _layouts[record] = _Layout(record)

        def __setattr__(self: Any, name: str, value: Any) -> None:
            if type(self) is record or name in layout.names:
                raise _frozen_error(name)
            object.__setattr__(self, name, value)

        def __delattr__(self: Any, name: str) -> None:
            if type(self) is record or name in layout.names:
                raise _frozen_error(name)
            object.__delattr__(self, name)

        methods = {
            "__init__": _lazy_init,
            "__repr__": _repr,
            "__eq__": _eq,
            "__hash__": _hash,
            "__setattr__": __setattr__,
            "__delattr__": __delattr__,
            "__getattr__": _instance_getattr,
        }
        for name, method in methods.items():
            if name not in namespace:  # a method the class writes itself stays
                type.__setattr__(record, name, method)
        if sys.version_info >= (3, 10):
            type.__setattr__(record, "__match_args__", layout.names)
        if sys.version_info >= (3, 13) and "__replace__" not in namespace:
            type.__setattr__(record, "__replace__", _replace)  # copy.replace
        return record  # type: ignore[return-value]

    return wrap
