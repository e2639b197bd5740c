"""Tidewater: read, clean, calibrate and export tide-gauge sensor data.

Typical use::

    import tidewater

    series = tidewater.read_csv("gauges/8443970.csv", units="ft")
    series = tidewater.clean(series)
    tidewater.export_parquet(series, "out/8443970.parquet")
"""

from tidewater.models import Reading, TideSeries
from tidewater.settings import Settings, load_settings

from .calibration import CalibrationResult, Calibrator, correct_barometric_drift
from .io import ParquetExporter, export_parquet, read_csv
from .smoothing import clean, despike, fill_gaps, moving_average, smooth

__version__ = "0.4.2"

__all__ = [
    "CalibrationResult",
    "Calibrator",
    "ParquetExporter",
    "Reading",
    "Settings",
    "TideSeries",
    "clean",
    "correct_barometric_drift",
    "despike",
    "export_parquet",
    "fill_gaps",
    "load_settings",
    "moving_average",
    "read_csv",
    "smooth",
]
