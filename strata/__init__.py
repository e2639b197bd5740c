"""Strata's one import name: the user's top-level folders (assets/, pipelines/,
retrieval/, ...) are its subpackages through relative symlinks, and strata.core is the
foundation both the build and the query side stand on.

Importing it only declares: nothing in the process (environment, allocator, threads,
the garbage collector) changes until a command or a function is called."""
