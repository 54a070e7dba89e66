"""A stand-in `tesseract` executable, written by a test into a folder it puts on PATH.

It is called the way tesseract is (`tesseract IMAGE stdout`), opens the image, and prints what a user
could check: the kind and size read from the file's own header ("scanned gray 8x8 image"), so a test
sees that a real image file reached it. A file that is no image it knows makes it exit 1 with a message
on standard error, as tesseract does ("Error in pixReadStream"). `behaviour` `fail` exits 1 always;
`sleep` never answers within a test's deadline.
"""

from __future__ import annotations

import stat
import sys
from pathlib import Path

_SCRIPT = """#!{python}
import sys, time
behaviour = {behaviour!r}
if behaviour == "sleep":
    time.sleep(60)
if behaviour == "fail" or len(sys.argv) != 3 or sys.argv[2] != "stdout":
    sys.stderr.write("Error in pixReadStream: Unknown format: no pix returned\\n")
    sys.exit(1)
data = open(sys.argv[1], "rb").read()
kinds = {{b"P5": "gray", b"P6": "colour", b"P4": "bilevel"}}
if data[:2] in kinds:
    width, height = data.split(b"\\n")[1].split()
    print(f"scanned {{kinds[data[:2]]}} {{int(width)}}x{{int(height)}} image")
elif data[:3] == b"\\xff\\xd8\\xff":
    print("scanned jpeg image")
else:
    sys.stderr.write("Error in pixReadStream: Unknown format: no pix returned\\n")
    sys.exit(1)
"""


def install_tesseract(folder: Path, behaviour: str = "read") -> Path:
    """Write the executable `tesseract` into `folder` (put the folder on PATH); its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "tesseract"
    path.write_text(_SCRIPT.format(python=sys.executable, behaviour=behaviour), encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path
