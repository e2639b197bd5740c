"""Settings: built-in defaults, overridden by a user YAML file and the environment."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping, Optional

DEFAULTS_PATH = Path(__file__).parent / "config/defaults.yaml"

#: Environment variable naming a YAML file that overrides the defaults.
CONFIG_ENV_VAR = "TIDEWATER_CONFIG"

VALID_UNITS = ("m", "ft", "cm")
VALID_COMPRESSIONS = ("zstd", "snappy", "gzip", "none")


class ConfigError(ValueError):
    """Raised for unknown keys or invalid values in a settings file."""


@dataclass
class Settings:
    """Every tunable knob of Tidewater, with its default value."""

    input_units: str = "m"
    sample_interval_minutes: int = 6
    smoothing_window: int = 5
    spike_threshold: float = 3.0
    max_gap_minutes: int = 30
    datum: str = "MLLW"
    parquet_compression: str = "zstd"
    parquet_row_group_size: int = 65_536
    calibration: dict = field(default_factory=lambda: {"fit_drift": True, "min_samples": 12})

    def __post_init__(self) -> None:
        if self.input_units not in VALID_UNITS:
            raise ConfigError(f"input_units must be one of {VALID_UNITS}, got {self.input_units!r}")
        if self.parquet_compression not in VALID_COMPRESSIONS:
            raise ConfigError(f"parquet_compression must be one of {VALID_COMPRESSIONS}")
        if self.smoothing_window % 2 == 0:
            raise ConfigError("smoothing_window must be odd")

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any]) -> "Settings":
        """Build settings from a plain dict, rejecting keys we do not know."""
        known = {f.name for f in fields(cls)}
        unknown = set(mapping) - known
        if unknown:
            raise ConfigError(f"unknown setting(s): {', '.join(sorted(unknown))}")
        return cls(**mapping)

    def merged(self, overrides: Mapping[str, Any]) -> "Settings":
        """A copy of these settings with ``overrides`` applied on top."""
        return Settings.from_mapping({**asdict(self), **overrides})

    def to_dict(self) -> dict:
        return asdict(self)


def _read_yaml(path: Path) -> dict:
    import yaml  # imported lazily: PyYAML is only needed when a file is read

    with path.open("r", encoding="utf-8") as fh:
        data = yaml.safe_load(fh) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return data.get("tidewater", data)


def load_settings(path: Optional[os.PathLike] = None) -> Settings:
    """Load settings: defaults, then ``$TIDEWATER_CONFIG``, then ``path``.

    Later sources win. Keys that are not fields of :class:`Settings` raise
    :class:`ConfigError` so that typos do not silently fall back to defaults.
    """
    settings = Settings.from_mapping(_read_yaml(DEFAULTS_PATH))
    env_path = os.environ.get(CONFIG_ENV_VAR)
    for source in (env_path, path):
        if source:
            settings = settings.merged(_read_yaml(Path(source)))
    return settings
