"""What the CPU is, as the kernel reports it: the facts that decide which
kernels the encoder runs, read without importing torch."""

from __future__ import annotations

import hashlib
import platform


def _cpuinfo() -> tuple[str, set[str]] | None:
    """The first CPU's model name and feature flags from /proc/cpuinfo (None off Linux)."""
    name, flags = "", None
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and not name:
                    name = value.strip()
                elif key.strip() == "flags":
                    flags = set(value.split())
                    break
    except OSError:
        return None
    return (name, flags) if flags is not None else None


def cpu_flags() -> set[str] | None:
    """The CPU's feature flags as the kernel reports them (None off Linux)."""
    info = _cpuinfo()
    return info[1] if info is not None else None


def cpu_fingerprint() -> str:
    """A short digest of the CPU's model and features: what a measurement of the
    CPU's kernels (:func:`strata.core.torch_trace.rows_free`) is kept under, so
    that a model cache moved to another machine measures again."""
    info = _cpuinfo()
    text = f"{info[0]}|{' '.join(sorted(info[1]))}" if info is not None \
        else f"{platform.machine()}|{platform.processor()}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]
