"""The asset groups of the lineage view: the three stages people name when they
describe the pipeline. The Dagster UI draws each group as one box (collapsed
until opened), so the global lineage reads ingest → enrich → index at a glance
instead of one box per step (eight boxes of one or two assets each).
"""

INGEST = "ingest"  # the corpus folder read and parsed: parsed_shards, nodes
ENRICH = "enrich"  # what models add to the parse: summaries, image_groups, captions, facts
INDEX = "index"  # what search reads, and its publication: embeddings, edges, index_manifest, ...

GROUPS = (INGEST, ENRICH, INDEX)
