"""Each corpus declared in data/corpora.yaml (or registered by the CLI) is one partition."""

import dagster as dg

corpora_partitions = dg.DynamicPartitionsDefinition(name="corpora")
