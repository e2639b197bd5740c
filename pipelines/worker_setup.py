"""Set-up of the step processes of `strata index --workers N`.

The CLI's forkserver preloads this module (with the code location), so every
step process forked from it starts Dagster's compute-log mirror in a process
group of its own, as the CLI process does (:func:`pipelines.interrupt.own_group_for_log_mirrors`):
a Ctrl-C typed on the terminal reaches the step processes, which stop, but not
their log mirrors, which would print a KeyboardInterrupt traceback each.
"""

from strata.pipelines.interrupt import own_group_for_log_mirrors

own_group_for_log_mirrors()
