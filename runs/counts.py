"""Counters that loop passes return: summed across batches, printed, falsy when all zero."""

from dataclasses import asdict


class Counts:
    """Mixin for dataclasses whose fields are all integer counters."""

    def add(self, other) -> None:
        for name, value in asdict(other).items():
            setattr(self, name, getattr(self, name) + value)

    def as_dict(self) -> dict:
        return asdict(self)

    def __bool__(self) -> bool:
        return any(asdict(self).values())

    def __str__(self) -> str:
        return " ".join(f"{name}={value}" for name, value in asdict(self).items())
