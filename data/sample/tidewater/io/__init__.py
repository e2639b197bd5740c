"""Input and output: CSV readers and the Parquet exporter."""

from .csv_reader import CsvFormatError, parse_timestamp, read_csv
from .parquet import ParquetExporter, export_parquet, series_to_table

__all__ = [
    "CsvFormatError",
    "ParquetExporter",
    "export_parquet",
    "parse_timestamp",
    "read_csv",
    "series_to_table",
]
