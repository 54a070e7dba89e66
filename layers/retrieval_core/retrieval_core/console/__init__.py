"""The web console: plain HTML, CSS and ES modules served as they are under /console (docs/console.md).

The pages call the HTTP API from the browser with the credential the user enters, kept in the tab's
sessionStorage; nothing here runs on the server but serving these files.
"""

from pathlib import Path

ASSETS = Path(__file__).parent
PATH = "/console"


def is_console_path(path: str) -> bool:
    """Whether `path` is the console or one of its files (public: the pages hold no data)."""
    return path == PATH or path.startswith(PATH + "/")
