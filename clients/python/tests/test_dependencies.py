"""The installed grpcio and protobuf against the ranges the package declares.

`make test-python` installs the package with ``--no-deps`` into venvs whose
dependencies come from the lockfiles of tools/python/, and says which set it
is in MCPD_PYTHON_DEPS: ``oldest`` must sit exactly on the declared lower
bounds (so that they are the versions tested), ``newest`` inside the ranges.
"""

from __future__ import annotations

import os
from importlib import metadata
from typing import List

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from conftest import INSTALLED

#: The dependencies whose ranges the two sets test, by distribution name.
RANGED = {"grpcio", "protobuf"}

DEPS_SET = os.environ.get("MCPD_PYTHON_DEPS", "")

pytestmark = pytest.mark.skipif(not INSTALLED, reason="checks the installed distribution (MCPD_PYTHON_INSTALLED=1)")


def declared() -> List[Requirement]:
    """The requirements of the installed mcpd-grpc that apply to this
    interpreter (environment markers evaluated)."""
    reqs = [Requirement(r) for r in metadata.requires("mcpd-grpc") or []]
    return [r for r in reqs if r.marker is None or r.marker.evaluate({"extra": ""})]


def lower_bound(req: Requirement) -> Version:
    bounds = [Version(s.version) for s in req.specifier if s.operator == ">="]
    assert len(bounds) == 1, f"{req}: want exactly one >= lower bound"
    return bounds[0]


def test_declares_the_ranged_dependencies() -> None:
    assert {r.name for r in declared()} >= RANGED


@pytest.mark.parametrize("name", sorted(RANGED))
def test_installed_within_declared_range(name: str) -> None:
    (req,) = [r for r in declared() if r.name == name]
    installed = metadata.version(name)
    assert req.specifier.contains(installed, prereleases=True), f"{name} {installed} is outside the declared {req}"


@pytest.mark.skipif(DEPS_SET != "oldest", reason="MCPD_PYTHON_DEPS is not oldest")
@pytest.mark.parametrize("name", sorted(RANGED))
def test_oldest_set_is_the_lower_bound(name: str) -> None:
    (req,) = [r for r in declared() if r.name == name]
    installed = Version(metadata.version(name))
    assert installed == lower_bound(req), f"the oldest set has {name} {installed}; pyproject.toml declares {req}"
