"""Exporting series to Apache Parquet.

pyarrow is an optional dependency (``pip install "tidewater[parquet]"``), so
it is imported inside the functions that need it rather than at module level.
Importing :mod:`tidewater` therefore never fails just because pyarrow is
missing; only calling :func:`export_parquet` does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Optional

from tidewater.models import TideSeries
from tidewater.settings import Settings

#: Column order of every Parquet file Tidewater writes.
SCHEMA_COLUMNS = ("station_id", "timestamp", "water_level_m", "pressure_hpa",
                  "temperature_c", "flags")

PARQUET_FORMAT_VERSION = "2.6"


def _require_pyarrow():
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401  (registers the submodule)
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise RuntimeError(
            'Parquet export needs pyarrow: pip install "tidewater[parquet]"'
        ) from exc
    return pyarrow


def series_to_table(series: TideSeries):
    """Convert a series into a ``pyarrow.Table`` with :data:`SCHEMA_COLUMNS`.

    Timestamps are stored as ``timestamp[us, tz=UTC]`` and flags as a list of
    strings, so a reading that was gap-filled and then calibrated keeps both
    flags.
    """
    pa = _require_pyarrow()
    schema = pa.schema([
        ("station_id", pa.string()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("water_level_m", pa.float64()),
        ("pressure_hpa", pa.float64()),
        ("temperature_c", pa.float32()),
        ("flags", pa.list_(pa.string())),
    ])
    columns = {
        "station_id": [r.station_id for r in series],
        "timestamp": [r.timestamp for r in series],
        "water_level_m": [r.water_level for r in series],
        "pressure_hpa": [r.pressure_hpa for r in series],
        "temperature_c": [r.temperature_c for r in series],
        "flags": [sorted(r.flags) for r in series],
    }
    return pa.table(columns, schema=schema)


def export_parquet(series: TideSeries, path: str | Path, *, compression: str = "zstd",
                   row_group_size: int = 65_536) -> Path:
    """Write ``series`` to a single Parquet file and return its path.

    ``compression`` is passed straight to pyarrow; ``"none"`` disables it.
    The station id and the series' time range are stored in the file's
    key-value metadata so that a directory of exports can be catalogued
    without reading any row groups.
    """
    pa = _require_pyarrow()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    table = series_to_table(series)
    metadata = {
        b"tidewater.station_id": series.station_id.encode(),
        b"tidewater.start": series.start.isoformat().encode() if len(series) else b"",
        b"tidewater.end": series.end.isoformat().encode() if len(series) else b"",
    }
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), **metadata})
    pa.parquet.write_table(
        table,
        path,
        compression=None if compression == "none" else compression,
        row_group_size=row_group_size,
        version=PARQUET_FORMAT_VERSION,
    )
    return path


class ParquetExporter:
    """Write many series into a Hive-partitioned directory, one file per station and year.

    The layout is ``<root>/station_id=<id>/year=<yyyy>/part-0.parquet``, which
    DuckDB, Polars and Spark all read as a partitioned dataset.
    """

    def __init__(self, root: str | Path, compression: str = "zstd",
                 row_group_size: int = 65_536) -> None:
        self.root = Path(root)
        self.compression = compression
        self.row_group_size = row_group_size
        self._written: list[Path] = []

    @classmethod
    def from_settings(cls, root: str | Path, settings: Optional[Settings] = None) -> "ParquetExporter":
        settings = settings or Settings()
        return cls(root, settings.parquet_compression, settings.parquet_row_group_size)

    @property
    def written(self) -> list[Path]:
        """Paths of the files written so far, in order."""
        return list(self._written)

    def partition_path(self, station_id: str, year: int) -> Path:
        return self.root / f"station_id={station_id}" / f"year={year}" / "part-0.parquet"

    def write(self, series: TideSeries) -> list[Path]:
        """Split ``series`` by calendar year and export each year to its partition."""
        by_year: dict[int, list] = {}
        for reading in series:
            by_year.setdefault(reading.timestamp.year, []).append(reading)
        paths = []
        for year, readings in sorted(by_year.items()):
            target = self.partition_path(series.station_id, year)
            export_parquet(series.replace_readings(readings), target,
                           compression=self.compression, row_group_size=self.row_group_size)
            paths.append(target)
        self._written.extend(paths)
        return paths

    def write_all(self, many: Iterable[TideSeries]) -> list[Path]:
        return [p for series in many for p in self.write(series)]
