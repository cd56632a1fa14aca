"""The result types are frozen dataclasses made cheaply (mcpd_grpc._records):
side by side with ``dataclasses.dataclass(frozen=True)`` on the same class
body, whatever a program does first with one."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
import subprocess
import sys
import threading
from typing import Any, ClassVar, Dict, List, Optional, Tuple

import pytest

from conftest import PYTHON, example_env
from mcpd_grpc import _records, types


def _point(dataclass: Any, field: Any) -> Any:
    """The same class body under either decorator (each call a new class,
    nothing asked of it yet)."""

    @dataclass(frozen=True)
    class Point:
        """A point."""

        x: int
        y: int = 0
        label: Optional[str] = None
        tags: Dict[str, Any] = field(default_factory=dict)
        secret: str = field(default="", repr=False)
        kind: ClassVar[str] = "point"

        def __post_init__(self) -> None:
            if self.x < 0:
                raise ValueError("x < 0")

        @property
        def norm1(self) -> int:
            return abs(self.x) + abs(self.y)

    return Point


def _ours() -> Any:
    return _point(_records.dataclass, _records.field)


def _theirs() -> Any:
    return _point(dataclasses.dataclass, dataclasses.field)


def _same_repr(ours: Any, theirs: Any) -> None:
    assert repr(ours) == repr(theirs)


def test_instances_behave_as_dataclasses_instances() -> None:
    Ours, Theirs = _ours(), _theirs()
    for args, kwargs in [((1,), {}), ((1, 2), {"secret": "s"}), ((), {"x": 3, "label": "a", "tags": {"k": [1]}})]:
        o, t = Ours(*args, **kwargs), Theirs(*args, **kwargs)
        _same_repr(o, t)
        assert "secret" not in repr(o)
        assert o == Ours(*args, **kwargs) and not (o != Ours(*args, **kwargs))
        assert o != Ours(99) and o != t, "another class is never equal"
        assert dataclasses.astuple(o) == dataclasses.astuple(t)
        assert dataclasses.asdict(o) == dataclasses.asdict(t)
    o = Ours(1, 2)
    assert o.tags == {} and o.tags is not Ours(1).tags, "a new default per instance"
    assert o.norm1 == 3 and Ours.kind == "point" and o.kind == "point"
    assert Ours.y == 0 and Ours.secret == "" and not hasattr(Ours, "tags"), "class attributes as dataclasses leaves them"
    assert hash(Ours(1, 2, tags=None)) == hash(Theirs(1, 2, tags=None)) == hash(Ours(1, 2, tags=None))
    with pytest.raises(TypeError):
        hash(o)  # a dict field: unhashable, as with dataclasses
    with pytest.raises(ValueError, match="x < 0"):
        Ours(-1)  # __post_init__ runs
    for bad_args, bad_kwargs in [((), {}), ((1, 2, 3, 4, 5, 6), {}), ((1,), {"nope": 1}), ((1,), {"x": 1})]:
        with pytest.raises(TypeError):
            Ours(*bad_args, **bad_kwargs)
        with pytest.raises(TypeError):
            Theirs(*bad_args, **bad_kwargs)


def test_frozen() -> None:
    o = _ours()(1)
    for attempt in (lambda: setattr(o, "x", 5), lambda: setattr(o, "other", 5), lambda: delattr(o, "y")):
        with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field"):
            attempt()
    assert o.x == 1


def test_copies_and_pickles() -> None:
    o = _ours()(1, 2, tags={"a": [1]})
    assert copy.copy(o) == o and copy.deepcopy(o) == o
    assert copy.deepcopy(o).tags is not o.tags
    r = types.ToolResult(content=(types.TextContent(text="hi"),), is_error=True)
    assert pickle.loads(pickle.dumps(r)) == r
    if sys.version_info >= (3, 13):
        assert copy.replace(o, x=7) == dataclasses.replace(o, x=7)  # type: ignore[attr-defined]


@pytest.mark.parametrize("first", ["is_dataclass", "fields", "fields_of_instance", "asdict", "replace", "signature", "match_args"])
def test_introspection_first(first: str) -> None:
    Ours, Theirs = _ours(), _theirs()
    assert "__dataclass_fields__" not in Ours.__dict__
    names = ["x", "y", "label", "tags", "secret"]
    if first == "is_dataclass":
        assert dataclasses.is_dataclass(Ours) and dataclasses.is_dataclass(Ours(1))
    elif first == "fields":
        assert [f.name for f in dataclasses.fields(Ours)] == names
    elif first == "fields_of_instance":
        assert [(f.name, f.repr) for f in dataclasses.fields(Ours(1))] == [(f.name, f.repr) for f in dataclasses.fields(Theirs(1))]
    elif first == "asdict":
        assert dataclasses.asdict(Ours(1)) == {"x": 1, "y": 0, "label": None, "tags": {}, "secret": ""}
    elif first == "replace":
        assert dataclasses.replace(Ours(1, 2), y=5) == Ours(1, 5)
    elif first == "signature":
        assert str(inspect.signature(Ours)) == str(inspect.signature(Theirs))
        assert str(inspect.signature(Ours.__init__)) == str(inspect.signature(Theirs.__init__))
    elif sys.version_info >= (3, 10):
        assert Ours.__match_args__ == Theirs.__match_args__  # type: ignore[attr-defined]
    else:
        assert not hasattr(Ours, "__match_args__") and not hasattr(Theirs, "__match_args__")
    assert Ours.__dataclass_params__.frozen  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        Ours.nope  # noqa: B018
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        Ours(1).nope  # noqa: B018


def test_an_unpickled_instance_in_a_fresh_process() -> None:
    code = (
        "import pickle, sys, dataclasses\n"
        "from mcpd_grpc import types\n"
        "r = pickle.loads(sys.stdin.buffer.read())\n"
        "same = r == types.ToolResult(content=(types.TextContent(text='hi'),), is_error=True)\n"
        "try:\n"
        "    r.is_error = False\n"
        "    frozen = False\n"
        "except dataclasses.FrozenInstanceError:\n"
        "    frozen = True\n"
        "print(same, frozen, repr(r))\n"
    )
    data = pickle.dumps(types.ToolResult(content=(types.TextContent(text="hi"),), is_error=True))
    out = subprocess.run([PYTHON, "-c", code], input=data, env=example_env(""), capture_output=True, timeout=60, check=True)
    same, frozen, text = out.stdout.decode().strip().split(" ", 2)
    assert (same, frozen) == ("True", "True"), out.stdout
    assert text.startswith("ToolResult(content=(TextContent(text='hi'"), text


def test_many_threads_make_the_first_instances_at_once() -> None:
    Ours = _ours()
    barrier = threading.Barrier(16)
    made: List[Tuple[int, Any]] = []
    errors: List[BaseException] = []

    def make(i: int) -> None:
        try:
            barrier.wait(timeout=10)
            made.append((i, Ours(i, label=str(i))))
            made.append((i, dataclasses.replace(made[-1][1])))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=make, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not errors, errors
    assert len(made) == 32
    assert all(p == Ours(i, label=str(i)) for i, p in made)


def test_recursive_repr() -> None:
    Ours, Theirs = _ours(), _theirs()
    o, t = Ours(1, tags={}), Theirs(1, tags={})
    o.tags["self"] = o
    t.tags["self"] = t
    _same_repr(o, t)


def test_the_types_are_frozen_dataclasses() -> None:
    for name in types.__all__:
        cls = getattr(types, name)
        if isinstance(cls, type) and not issubclass(cls, str):
            assert dataclasses.is_dataclass(cls), name
            assert cls.__dataclass_params__.frozen, name  # type: ignore[attr-defined]


def test_a_program_that_only_calls_never_imports_dataclasses() -> None:
    code = (
        "import sys, mcpd_grpc\n"
        "from mcpd_grpc import types\n"
        "r = types.ToolResult(content=(types.TextContent(text='x'),))\n"
        "assert r == types.ToolResult(content=(types.TextContent(text='x'),)) and r.text == 'x' and repr(r)\n"
        "print(' '.join(m for m in ('dataclasses', 'inspect') if m in sys.modules))\n"
    )
    out = subprocess.run([PYTHON, "-c", code], env=example_env(""), capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == [], f"loaded {out.stdout.split()}"


def test_what_is_not_supported_says_so() -> None:
    with pytest.raises(TypeError, match="frozen"):
        _records.dataclass(frozen=False)
    with pytest.raises(TypeError, match="compare"):
        _records.field(compare=False)
    with pytest.raises(TypeError, match="follows default"):

        @_records.dataclass(frozen=True)
        class Bad:
            a: int = 0
            b: int

    with pytest.raises(ValueError, match="mutable default"):

        @_records.dataclass(frozen=True)
        class Mutable:
            a: List[int] = []  # noqa: RUF012
