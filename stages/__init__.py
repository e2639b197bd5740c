"""Stage logic as plain functions on plain data; Dagster assets wrap these."""
