"""One helper for the ``*_instructions.py`` scripts: a script's inner run under callgrind, its count."""

from __future__ import annotations

import re
import subprocess
import sys


def instructions(script: str, *args: str) -> int:
    """The instructions callgrind counted for ``python script --run *args`` (every thread of it)."""
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, script, "--run", *args],
        capture_output=True, text=True, check=True,
    ).stderr
    match = re.search(r"Collected\s*:\s*(\d+)", out)
    assert match, out[-2000:]
    return int(match.group(1))
