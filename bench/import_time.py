"""`import pylucid` against `import numpy` (which it needs), each in a fresh
interpreter, best of several runs: the ratio a user feels at start-up
(docs/performance.md). PYTHONPATH=python python3 bench/import_time.py"""

import subprocess
import sys
import time


def best(code: str, runs: int = 7) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    bare = best("pass")
    numpy = best("import numpy") - bare
    pylucid = best("import pylucid") - bare
    print("%-40s %8.3f s" % ("import numpy", numpy))
    print("%-40s %8.3f s  %.2fx numpy's" % ("import pylucid (numpy included)", pylucid, pylucid / numpy))


if __name__ == "__main__":
    main()
