"""Calibrating gauges against a reference and correcting barometric drift.

Two different problems live here. :class:`Calibrator` fits an offset, a
scale factor and a linear drift so that a gauge agrees with a reference
record (a tide staff read by hand, or a co-located survey-grade gauge).
:func:`correct_barometric_drift` handles *non-vented* pressure sensors,
whose readings rise and fall with the weather unless the atmospheric
pressure is subtracted using a nearby barometer.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from datetime import datetime
from typing import Mapping, Optional

from tidewater.models import FLAG_CALIBRATED, FLAG_DRIFT_CORRECTED, TideSeries
from .units import SEAWATER_DENSITY, pressure_to_depth

#: Readings further apart than this from the nearest barometer sample are
#: not corrected, because the weather may have changed in between.
MAX_BAROMETER_LAG_SECONDS = 30 * 60

SECONDS_PER_DAY = 86_400.0


class CalibrationError(RuntimeError):
    """Raised when a calibration cannot be fitted or is used before fitting."""


@dataclass(frozen=True)
class CalibrationResult:
    """Coefficients of ``reference = scale * level + offset + drift_per_day * days``."""

    offset: float
    scale: float
    drift_per_day: float
    residual_rms: float
    epoch: datetime
    samples: int

    @property
    def drift_per_year_mm(self) -> float:
        """Drift expressed in millimetres per year, the unit most reports use."""
        return self.drift_per_day * 365.25 * 1000.0


class Calibrator:
    """Fit and apply a linear calibration with drift against a reference series."""

    def __init__(self, fit_drift: bool = True, min_samples: int = 12) -> None:
        self.fit_drift = fit_drift
        self.min_samples = min_samples
        self._result: Optional[CalibrationResult] = None

    @classmethod
    def from_config(cls, config: Mapping[str, object]) -> "Calibrator":
        """Build a calibrator from the ``calibration`` section of the settings."""
        return cls(
            fit_drift=bool(config.get("fit_drift", True)),
            min_samples=int(config.get("min_samples", 12)),
        )

    @property
    def is_fitted(self) -> bool:
        return self._result is not None

    @property
    def result(self) -> CalibrationResult:
        if self._result is None:
            raise CalibrationError("call Calibrator.fit() before using the result")
        return self._result

    def fit(self, series: TideSeries, reference: TideSeries) -> CalibrationResult:
        """Least-squares fit of ``series`` onto ``reference``.

        Only timestamps present in both series are used. With ``fit_drift``
        the model has three unknowns (scale, offset, drift); without it the
        drift column is dropped and the drift is reported as zero.
        """
        ref = {r.timestamp: r.water_level for r in reference}
        pairs = [(r.timestamp, r.water_level, ref[r.timestamp]) for r in series if r.timestamp in ref]
        if len(pairs) < self.min_samples:
            raise CalibrationError(
                f"need at least {self.min_samples} matching timestamps, found {len(pairs)}"
            )
        epoch = pairs[0][0]
        rows = [(level, 1.0, (t - epoch).total_seconds() / SECONDS_PER_DAY) for t, level, _ in pairs]
        targets = [target for _, _, target in pairs]
        if not self.fit_drift:
            rows = [(level, one, 0.0) for level, one, _ in rows]
        scale, offset, drift = _least_squares(rows, targets)
        residuals = [
            target - (scale * x + offset + drift * d) for (x, _, d), target in zip(rows, targets)
        ]
        rms = (sum(e * e for e in residuals) / len(residuals)) ** 0.5
        self._result = CalibrationResult(offset, scale, drift, rms, epoch, len(pairs))
        return self._result

    def apply(self, series: TideSeries) -> TideSeries:
        """Return ``series`` with the fitted calibration applied and flagged."""
        res = self.result
        out = []
        for r in series:
            days = (r.timestamp - res.epoch).total_seconds() / SECONDS_PER_DAY
            level = res.scale * r.water_level + res.offset + res.drift_per_day * days
            out.append(r.with_level(level, FLAG_CALIBRATED))
        return series.replace_readings(out)


def _least_squares(rows: list[tuple[float, float, float]], targets: list[float]) -> tuple[float, float, float]:
    """Solve the 3x3 normal equations by Gaussian elimination with pivoting."""
    n = 3
    ata = [[sum(row[i] * row[j] for row in rows) for j in range(n)] for i in range(n)]
    atb = [sum(row[i] * t for row, t in zip(rows, targets)) for i in range(n)]
    # A zero drift column makes the system singular; pin drift to zero.
    if ata[2][2] == 0.0:
        ata[2][2], atb[2] = 1.0, 0.0
    m = [ata[i] + [atb[i]] for i in range(n)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda i: abs(m[i][col]))
        if abs(m[pivot][col]) < 1e-12:
            raise CalibrationError("calibration is degenerate: the gauge readings do not vary")
        m[col], m[pivot] = m[pivot], m[col]
        for i in range(col + 1, n):
            factor = m[i][col] / m[col][col]
            for j in range(col, n + 1):
                m[i][j] -= factor * m[col][j]
    x = [0.0] * n
    for i in reversed(range(n)):
        x[i] = (m[i][n] - sum(m[i][j] * x[j] for j in range(i + 1, n))) / m[i][i]
    return x[0], x[1], x[2]


def correct_barometric_drift(
    series: TideSeries,
    barometer: Mapping[datetime, float],
    density: float = SEAWATER_DENSITY,
    sensor_depth_offset: float = 0.0,
) -> TideSeries:
    """Recompute water levels of a non-vented pressure gauge using real air pressure.

    ``barometer`` maps timestamps to atmospheric pressure in hPa. For each
    reading the nearest barometer sample within
    :data:`MAX_BAROMETER_LAG_SECONDS` is subtracted from the raw absolute
    pressure and the remainder converted to a depth with
    :func:`tidewater.units.pressure_to_depth`. ``sensor_depth_offset`` is the
    height of the sensor above the station datum, added back afterwards.
    Readings with no pressure or no nearby barometer sample are passed
    through unchanged and unflagged.
    """
    times = sorted(barometer)
    out = []
    for r in series:
        air = _nearest(times, barometer, r.timestamp)
        if r.pressure_hpa is None or air is None:
            out.append(r)
            continue
        depth = pressure_to_depth(r.pressure_hpa, atmospheric_hpa=air, density=density)
        out.append(r.with_level(depth + sensor_depth_offset, FLAG_DRIFT_CORRECTED))
    return series.replace_readings(out)


def _nearest(times: list[datetime], values: Mapping[datetime, float], when: datetime) -> Optional[float]:
    i = bisect_left(times, when)
    candidates = [t for t in times[max(0, i - 1): i + 1]]
    if not candidates:
        return None
    best = min(candidates, key=lambda t: abs((t - when).total_seconds()))
    if abs((best - when).total_seconds()) > MAX_BAROMETER_LAG_SECONDS:
        return None
    return values[best]
