"""Core data model: a single :class:`Reading` and a time-ordered :class:`TideSeries`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Iterable, Iterator, Optional

#: Quality flags attached to readings by the processing steps.
FLAG_SPIKE = "spike"
FLAG_GAP_FILLED = "gap_filled"
FLAG_DRIFT_CORRECTED = "drift_corrected"
FLAG_CALIBRATED = "calibrated"

KNOWN_FLAGS = frozenset({FLAG_SPIKE, FLAG_GAP_FILLED, FLAG_DRIFT_CORRECTED, FLAG_CALIBRATED})


@dataclass(frozen=True)
class Reading:
    """One sample from a tide gauge.

    ``water_level`` is always in metres relative to the station datum;
    ``pressure_hpa`` is only present for pressure-transducer gauges and is
    the raw absolute pressure, before any barometric correction.
    """

    timestamp: datetime
    water_level: float
    station_id: str
    pressure_hpa: Optional[float] = None
    temperature_c: Optional[float] = None
    flags: frozenset = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        if self.timestamp.tzinfo is None:
            raise ValueError("Reading.timestamp must be timezone-aware (use UTC)")
        unknown = set(self.flags) - KNOWN_FLAGS
        if unknown:
            raise ValueError(f"unknown quality flags: {sorted(unknown)}")

    @property
    def is_flagged(self) -> bool:
        """True if any processing step has modified or doubted this reading."""
        return bool(self.flags)

    def with_level(self, water_level: float, flag: Optional[str] = None) -> "Reading":
        """Return a copy with a new water level and, optionally, one more flag."""
        flags = self.flags | {flag} if flag else self.flags
        return dataclasses.replace(self, water_level=water_level, flags=frozenset(flags))


class TideSeries:
    """A time-ordered sequence of readings from a single station."""

    def __init__(self, station_id: str, readings: Iterable[Reading] = ()) -> None:
        self.station_id = station_id
        self._readings = sorted(readings, key=lambda r: r.timestamp)
        for reading in self._readings:
            if reading.station_id != station_id:
                raise ValueError(
                    f"reading from station {reading.station_id!r} in series for {station_id!r}"
                )

    @classmethod
    def from_readings(cls, readings: Iterable[Reading]) -> "TideSeries":
        """Build a series, taking the station id from the first reading."""
        readings = list(readings)
        if not readings:
            raise ValueError("cannot infer station id from an empty list of readings")
        return cls(readings[0].station_id, readings)

    def __len__(self) -> int:
        return len(self._readings)

    def __iter__(self) -> Iterator[Reading]:
        return iter(self._readings)

    def __getitem__(self, index: int) -> Reading:
        return self._readings[index]

    def __repr__(self) -> str:
        if not self._readings:
            return f"TideSeries({self.station_id!r}, empty)"
        return f"TideSeries({self.station_id!r}, {len(self)} readings, {self.start:%Y-%m-%d} to {self.end:%Y-%m-%d})"

    @property
    def start(self) -> datetime:
        """Timestamp of the first reading."""
        return self._readings[0].timestamp

    @property
    def end(self) -> datetime:
        """Timestamp of the last reading."""
        return self._readings[-1].timestamp

    @property
    def levels(self) -> list[float]:
        """Water levels in metres, in time order."""
        return [r.water_level for r in self._readings]

    @property
    def median_interval(self) -> timedelta:
        """The typical spacing between readings, robust to the odd gap."""
        gaps = sorted(b.timestamp - a.timestamp for a, b in zip(self._readings, self._readings[1:]))
        if not gaps:
            return timedelta(0)
        return gaps[len(gaps) // 2]

    def window(self, start: datetime, end: datetime) -> "TideSeries":
        """Readings with ``start <= timestamp < end`` as a new series."""
        return TideSeries(self.station_id, (r for r in self._readings if start <= r.timestamp < end))

    def replace_readings(self, readings: Iterable[Reading]) -> "TideSeries":
        """A new series for the same station holding ``readings``."""
        return TideSeries(self.station_id, readings)
