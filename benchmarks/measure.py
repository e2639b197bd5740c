"""Run a command and print its wall time and peak RSS as one JSON line.

``python -m benchmarks.measure -- CMD ...``: the peak RSS is
``RUSAGE_CHILDREN.ru_maxrss`` of this wrapper, i.e. the largest resident set
of the command or any process it waited for — the build process, not the
benchmark that started it. One process's, not a sum: a rebuild's warm encoder
process (strata.core.encoder_process) counts as a process of its own. The command's own output passes through to stderr
so the JSON line is the only thing on stdout.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time


def main(argv: list[str]) -> int:
    if "--" in argv:
        argv = argv[argv.index("--") + 1:]
    if not argv:
        print("usage: python -m benchmarks.measure -- CMD [ARGS...]", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    proc = subprocess.run(argv, stdout=sys.stderr)
    wall = time.perf_counter() - t0
    rss_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB on Linux
    print(json.dumps({"wall_s": round(wall, 2), "peak_rss_mb": round(rss_kb / 1024, 1),
                      "returncode": proc.returncode}))
    return proc.returncode


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
