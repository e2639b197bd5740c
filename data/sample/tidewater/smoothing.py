"""Cleaning raw gauge series: spike removal, gap filling and smoothing.

The three steps are meant to run in that order. :func:`despike` replaces
isolated outliers (a gull on the radar cone, a wave slapping the stilling
well) with the local median; :func:`fill_gaps` linearly interpolates short
outages; :func:`smooth` applies a centred moving average to what is left.
"""

from __future__ import annotations

import statistics
from datetime import timedelta
from typing import Sequence

from tidewater.models import FLAG_GAP_FILLED, FLAG_SPIKE, Reading, TideSeries

DEFAULT_WINDOW = 5
DEFAULT_SPIKE_THRESHOLD = 3.0
DEFAULT_MAX_GAP = timedelta(minutes=30)

#: Scale factor that turns a median absolute deviation into a standard
#: deviation estimate for normally distributed noise.
MAD_TO_SIGMA = 1.4826


def moving_average(values: Sequence[float], window: int = DEFAULT_WINDOW) -> list[float]:
    """Centred moving average; the window shrinks at both ends of the data.

    ``window`` must be odd so that each output value is centred on an input
    value and the tide's phase is not shifted.
    """
    if window < 1 or window % 2 == 0:
        raise ValueError("window must be a positive odd integer")
    half = window // 2
    out = []
    for i in range(len(values)):
        lo, hi = max(0, i - half), min(len(values), i + half + 1)
        out.append(sum(values[lo:hi]) / (hi - lo))
    return out


def hampel_outliers(values: Sequence[float], window: int = 7,
                    threshold: float = DEFAULT_SPIKE_THRESHOLD) -> list[int]:
    """Indices of values further than ``threshold`` robust sigmas from the local median."""
    half = window // 2
    outliers = []
    for i, value in enumerate(values):
        neighbourhood = values[max(0, i - half): i + half + 1]
        median = statistics.median(neighbourhood)
        mad = statistics.median(abs(v - median) for v in neighbourhood)
        sigma = MAD_TO_SIGMA * mad
        if sigma > 0 and abs(value - median) > threshold * sigma:
            outliers.append(i)
    return outliers


def despike(series: TideSeries, threshold: float = DEFAULT_SPIKE_THRESHOLD,
            window: int = 7) -> TideSeries:
    """Replace spikes with the local median and flag them ``spike``."""
    levels = series.levels
    readings = list(series)
    half = window // 2
    for i in hampel_outliers(levels, window, threshold):
        median = statistics.median(levels[max(0, i - half): i + half + 1])
        readings[i] = readings[i].with_level(median, FLAG_SPIKE)
    return series.replace_readings(readings)


def fill_gaps(series: TideSeries, max_gap: timedelta = DEFAULT_MAX_GAP,
              interval: timedelta | None = None) -> TideSeries:
    """Linearly interpolate missing samples in gaps no longer than ``max_gap``.

    Longer gaps are left alone: interpolating across a whole tidal cycle would
    invent a straight line where there should be a high water. The expected
    spacing defaults to :attr:`TideSeries.median_interval`.
    """
    interval = interval or series.median_interval
    if not interval:
        return series
    filled: list[Reading] = []
    for before, after in zip(series, list(series)[1:]):
        filled.append(before)
        gap = after.timestamp - before.timestamp
        if interval < gap <= max_gap:
            steps = round(gap / interval)
            for k in range(1, steps):
                fraction = k / steps
                level = before.water_level + fraction * (after.water_level - before.water_level)
                filled.append(Reading(
                    timestamp=before.timestamp + k * interval,
                    water_level=level,
                    station_id=series.station_id,
                    flags=frozenset({FLAG_GAP_FILLED}),
                ))
    if len(series):
        filled.append(series[-1])
    return series.replace_readings(filled)


def smooth(series: TideSeries, window: int = DEFAULT_WINDOW) -> TideSeries:
    """Apply :func:`moving_average` to the water levels of ``series``."""
    smoothed = moving_average(series.levels, window)
    return series.replace_readings(r.with_level(v) for r, v in zip(series, smoothed))


def clean(series: TideSeries, *, window: int = DEFAULT_WINDOW,
          spike_threshold: float = DEFAULT_SPIKE_THRESHOLD,
          max_gap: timedelta = DEFAULT_MAX_GAP) -> TideSeries:
    """The recommended pipeline: despike, then fill gaps, then smooth."""
    series = despike(series, threshold=spike_threshold)
    series = fill_gaps(series, max_gap=max_gap)
    return smooth(series, window=window)
