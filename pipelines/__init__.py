"""Dagster Definitions, jobs, schedules, sensors, and the `strata` command line."""
