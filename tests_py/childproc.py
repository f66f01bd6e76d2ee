"""Child processes for the tests that could crash or hang the interpreter:
they import the very pylucid this process uses (installed or from a
checkout), whatever the working directory."""

import os
import subprocess
import sys
import textwrap
from typing import Dict, Optional

import pylucid
import pytest

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(pylucid.__file__)))


def child_env(base: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """The environment (os.environ, or base) with this pylucid first on PYTHONPATH."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = PYTHON_DIR + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def run_code(code: str, timeout: float = 120.0, env: Optional[Dict[str, str]] = None
             ) -> "subprocess.CompletedProcess[str]":
    """Runs code (dedented) in a child interpreter; a hang fails the test."""
    try:
        return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                              timeout=timeout, env=child_env() if env is None else env)
    except subprocess.TimeoutExpired as e:
        pytest.fail("subprocess hung for more than %ss\nstdout:\n%s\nstderr:\n%s" % (timeout, e.stdout, e.stderr))
