"""How a family registers its instruments: observable ones read the family's plain totals
in the metric reader's thread (the decode loop never touches an instrument), synchronous
counters only for events that are rare by nature (findings, loads)."""
from __future__ import annotations

from typing import Any, Callable, Iterable

from opentelemetry.metrics import CallbackOptions, Observation

from .. import names
from ..safety import INTERNAL_ERRORS


def observe(meter, spec: names.MetricSpec, read: Callable[[], Iterable[Observation]],
            scope: dict | None) -> None:
    """Register `spec` as an observable counter or gauge whose callback is `read()`. A
    `counted_once` metric's points also carry `scope` (whether this process counts its
    request-steps once or is a copy). A callback that raises reports nothing this
    collection and is counted as an internal error."""
    scope = scope if spec.counted_once else None

    def callback(options: CallbackOptions):
        try:
            if scope is None:
                return list(read())
            return [Observation(o.value, {**(o.attributes or {}), **scope}) for o in read()]
        except Exception as exc:  # noqa: BLE001 - a metric is never worth an exception
            INTERNAL_ERRORS.record(f"observe:{spec.name}", exc)
            return []
    make = (meter.create_observable_counter if spec.kind == names.COUNTER
            else meter.create_observable_gauge)
    make(spec.name, callbacks=[callback], unit=spec.unit, description=spec.description)


class CollectionReads:
    """A family's totals read once per metric collection, by every one of its instruments:
    the first callback of a collection folds what the decode loop kept, the others read
    that fold. Folded per callback, a step counted between two callbacks would be in one
    instrument and not the other (accepted tokens a step ahead of request-steps, a mean
    off by a step). A callback called a second time means a new collection: the SDK
    collects one at a time and calls every callback once in each."""

    _UNREAD = object()

    def __init__(self, fold: Callable[[], Any]) -> None:
        self._fold = fold
        self._value: Any = self._UNREAD
        self._read: set = set()

    def take(self, key) -> Any:
        """This collection's fold, for the instrument `key`."""
        if self._value is self._UNREAD or key in self._read:
            self._value, self._read = self._UNREAD, set()
            self._value = self._fold()
        self._read.add(key)
        return self._value

    def reader(self, fn: Callable[[Any], Iterable[Observation]]):
        """A callback for one instrument: `fn` of this collection's fold."""
        key = object()
        return lambda: fn(self.take(key))


def counter(meter, spec: names.MetricSpec):
    """A synchronous counter (for events a family counts as they happen)."""
    return meter.create_counter(spec.name, unit=spec.unit, description=spec.description)


def histogram(meter, spec: names.MetricSpec):
    """A synchronous histogram with the spec's bucket edges, recorded in the collecting
    thread (a family's fold), never in the decode loop."""
    return meter.create_histogram(spec.name, unit=spec.unit, description=spec.description,
                                  explicit_bucket_boundaries_advisory=list(spec.bounds))


def by_attributes(values: dict, *attributes: str) -> list[Observation]:
    """One observation per key of `values`, its attributes named `attributes` (a tuple key
    for several), in key order."""
    if len(attributes) == 1:
        return [Observation(v, {attributes[0]: k}) for k, v in sorted(dict(values).items())]
    return [Observation(v, dict(zip(attributes, k))) for k, v in sorted(dict(values).items())]
