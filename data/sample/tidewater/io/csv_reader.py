"""Reading gauge exports in CSV form.

Most loggers can export a CSV with at least a timestamp and a level column.
Column names vary between vendors, so :data:`COLUMN_ALIASES` maps the
spellings we have seen in the wild onto Tidewater's field names.
"""

from __future__ import annotations

import csv
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable, Iterator, Mapping, Optional

from ..models import Reading, TideSeries
from ..units import convert_length, convert_pressure

REQUIRED_COLUMNS = ("timestamp", "level")

COLUMN_ALIASES = {
    "time": "timestamp",
    "datetime": "timestamp",
    "date_time_utc": "timestamp",
    "water_level": "level",
    "wl": "level",
    "stage": "level",
    "pres": "pressure",
    "pressure_hpa": "pressure",
    "temp": "temperature",
    "water_temp_c": "temperature",
    "station": "station_id",
}

MISSING_MARKERS = frozenset({"", "na", "nan", "null", "-9999", "-99999"})


class CsvFormatError(ValueError):
    """Raised when a CSV file cannot be interpreted as gauge readings."""

    def __init__(self, message: str, line: Optional[int] = None) -> None:
        super().__init__(f"line {line}: {message}" if line else message)
        self.line = line


def normalise_header(name: str) -> str:
    """Lower-case, strip, and map a vendor column name onto ours."""
    key = name.strip().lower().replace(" ", "_")
    return COLUMN_ALIASES.get(key, key)


def parse_timestamp(text: str) -> datetime:
    """Parse an ISO 8601 timestamp; naive timestamps are taken to be UTC."""
    text = text.strip().replace("Z", "+00:00")
    value = datetime.fromisoformat(text)
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


def _optional_float(text: Optional[str]) -> Optional[float]:
    if text is None or text.strip().lower() in MISSING_MARKERS:
        return None
    return float(text)


def parse_row(row: Mapping[str, str], *, station_id: str, units: str = "m",
              pressure_units: str = "hpa") -> Optional[Reading]:
    """Turn one normalised CSV row into a :class:`Reading`.

    Returns ``None`` for rows whose level is a missing-value marker, so that
    the gap is visible to :func:`tidewater.smoothing.fill_gaps` later.
    """
    level = _optional_float(row.get("level"))
    if level is None:
        return None
    pressure = _optional_float(row.get("pressure"))
    return Reading(
        timestamp=parse_timestamp(row["timestamp"]),
        water_level=convert_length(level, units, "m"),
        station_id=row.get("station_id") or station_id,
        pressure_hpa=convert_pressure(pressure, pressure_units) if pressure is not None else None,
        temperature_c=_optional_float(row.get("temperature")),
    )


def iter_readings(lines: Iterable[str], *, station_id: str, units: str = "m",
                  pressure_units: str = "hpa", delimiter: str = ",") -> Iterator[Reading]:
    """Yield readings from an iterable of CSV lines (header first)."""
    reader = csv.DictReader(
        (line for line in lines if not line.lstrip().startswith("#")), delimiter=delimiter
    )
    if reader.fieldnames is None:
        raise CsvFormatError("file is empty")
    reader.fieldnames = [normalise_header(h) for h in reader.fieldnames]
    missing = [c for c in REQUIRED_COLUMNS if c not in reader.fieldnames]
    if missing:
        raise CsvFormatError(f"missing required column(s): {', '.join(missing)}")
    for row in reader:
        try:
            reading = parse_row(row, station_id=station_id, units=units,
                                pressure_units=pressure_units)
        except ValueError as exc:
            raise CsvFormatError(str(exc), line=reader.line_num) from exc
        if reading is not None:
            yield reading


def read_csv(path: str | Path, *, station_id: Optional[str] = None, units: str = "m",
             pressure_units: str = "hpa", delimiter: str = ",",
             encoding: str = "utf-8") -> TideSeries:
    """Read a gauge CSV export into a :class:`TideSeries`.

    ``station_id`` defaults to the file name without its extension, unless
    the file has a ``station_id`` column. ``units`` is the unit of the level
    column (``"m"``, ``"ft"`` or ``"cm"``); levels are converted to metres.
    ``pressure_units`` does the same for an optional pressure column
    (``"hpa"``, ``"dbar"``, ``"psi"`` ...), which is stored in hPa.
    Lines starting with ``#`` are treated as comments.
    """
    path = Path(path)
    station_id = station_id or path.stem
    with path.open("r", encoding=encoding, newline="") as fh:
        readings = iter_readings(fh, station_id=station_id, units=units,
                                 pressure_units=pressure_units, delimiter=delimiter)
        return TideSeries(station_id, readings)
