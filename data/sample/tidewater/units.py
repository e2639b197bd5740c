"""Unit conversions used throughout Tidewater.

Tidewater stores every water level internally in metres and every pressure
in hectopascals (hPa). Gauges in the field report in a mix of feet, metres,
decibars and pounds per square inch, so readers convert at the boundary and
the rest of the library never has to think about units again.
"""

from __future__ import annotations

METRES_PER_FOOT = 0.3048
FEET_PER_METRE = 1.0 / METRES_PER_FOOT

#: Standard gravity in m/s^2, used by the hydrostatic depth formula.
STANDARD_GRAVITY = 9.80665

#: Nominal density of seawater at 10 degrees C and 35 PSU, in kg/m^3.
SEAWATER_DENSITY = 1025.0

#: Mean sea-level pressure of the standard atmosphere, in hPa.
STANDARD_ATMOSPHERE_HPA = 1013.25

PASCAL_PER_HPA = 100.0
HPA_PER_DBAR = 100.0
HPA_PER_PSI = 68.9475729

_LENGTH_FACTORS = {
    "m": 1.0,
    "cm": 0.01,
    "mm": 0.001,
    "ft": METRES_PER_FOOT,
    "in": METRES_PER_FOOT / 12.0,
}

_PRESSURE_FACTORS = {
    "hpa": 1.0,
    "mbar": 1.0,
    "pa": 1.0 / PASCAL_PER_HPA,
    "dbar": HPA_PER_DBAR,
    "psi": HPA_PER_PSI,
}


class UnknownUnitError(ValueError):
    """Raised when a unit string is not one Tidewater knows how to convert."""


def feet_to_metres(feet: float) -> float:
    """Convert a length in international feet to metres."""
    return feet * METRES_PER_FOOT


def metres_to_feet(metres: float) -> float:
    """Convert a length in metres to international feet."""
    return metres * FEET_PER_METRE


def convert_length(value: float, from_unit: str, to_unit: str = "m") -> float:
    """Convert ``value`` between any two supported length units.

    >>> round(convert_length(12, "in", "cm"), 2)
    30.48
    """
    try:
        metres = value * _LENGTH_FACTORS[from_unit.lower()]
        return metres / _LENGTH_FACTORS[to_unit.lower()]
    except KeyError as exc:
        raise UnknownUnitError(f"unknown length unit: {exc.args[0]!r}") from None


def convert_pressure(value: float, from_unit: str, to_unit: str = "hpa") -> float:
    """Convert ``value`` between hPa, mbar, Pa, dbar and psi."""
    try:
        hpa = value * _PRESSURE_FACTORS[from_unit.lower()]
        return hpa / _PRESSURE_FACTORS[to_unit.lower()]
    except KeyError as exc:
        raise UnknownUnitError(f"unknown pressure unit: {exc.args[0]!r}") from None


def pressure_to_depth(
    pressure_hpa: float,
    atmospheric_hpa: float = STANDARD_ATMOSPHERE_HPA,
    density: float = SEAWATER_DENSITY,
) -> float:
    """Return the water depth in metres above a submerged pressure sensor.

    A pressure transducer measures the weight of the water column *plus* the
    weight of the atmosphere above it. Subtracting ``atmospheric_hpa`` leaves
    the hydrostatic part, which the formula ``p = rho * g * h`` turns into a
    height. Passing the real barometric pressure instead of the standard
    atmosphere is what :func:`tidewater.calibration.correct_barometric_drift`
    does.
    """
    gauge_pa = (pressure_hpa - atmospheric_hpa) * PASCAL_PER_HPA
    return gauge_pa / (density * STANDARD_GRAVITY)


def depth_to_pressure(
    depth_m: float,
    atmospheric_hpa: float = STANDARD_ATMOSPHERE_HPA,
    density: float = SEAWATER_DENSITY,
) -> float:
    """Inverse of :func:`pressure_to_depth`: absolute pressure in hPa at ``depth_m``."""
    return atmospheric_hpa + depth_m * density * STANDARD_GRAVITY / PASCAL_PER_HPA
