"""What Strata declares once: every setting (the settings model the resources, the CLI
flags and the docs derive from) and the artifact schema (the tables' columns, the
index manifest), with the generator of the schema's reference page; and how what
configures Strata is taken in: configuration files (regular files, capped) and
endpoint URLs (never with credentials)."""
