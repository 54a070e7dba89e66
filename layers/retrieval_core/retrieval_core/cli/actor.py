"""Who the command line changes things as, for the audit trail (docs/security.md, "Audit trail")."""

from __future__ import annotations

import getpass
import uuid
from functools import cache

from retrieval_core.documents.models import Actor

CLI_PREFIX = "cli:"


@cache
def cli_actor() -> Actor:
    """`cli:<OS user>` and one request id for this run of the command, shared by all its changes.

    The command connects with the database's own credentials, so the user is what the operating system
    says, not a credential the service checked: `cli:unknown` when it has no name for the process's user.
    """
    try:
        user = getpass.getuser()
    except (OSError, KeyError):
        user = "unknown"
    return Actor(CLI_PREFIX + (user or "unknown"), uuid.uuid4().hex)
