"""Set-up of the step processes of `strata index --workers N`.

The CLI's forkserver preloads this module (with the code location), so every
step process forked from it:

- starts Dagster's compute-log mirror in a process group of its own, as the CLI
  process does (:func:`pipelines.interrupt.own_group_for_log_mirrors`): a Ctrl-C
  typed on the terminal reaches the step processes, which stop, but not their log
  mirrors, which would print a KeyboardInterrupt traceback each;
- says nothing of lancedb's fork: lancedb warns in every child forked from a
  process that has loaded it, since a fork in the middle of one of its operations
  may leave the child deadlocked. The forkserver preloads lancedb only so that each
  step need not import it again; it runs nothing of it, so no operation of it can
  be under way when the forkserver forks, and the warning (two lines per step on
  the user's terminal) would say nothing true.
"""

import warnings

from strata.pipelines.interrupt import own_group_for_log_mirrors

own_group_for_log_mirrors()
warnings.filterwarnings("ignore", message="lancedb fork support is experimental",
                        category=RuntimeWarning)
