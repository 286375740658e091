"""Files that readers in other processes see whole: the old content or all of the new, never half."""

from __future__ import annotations

import os
import uuid
from pathlib import Path


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the whole new one.

    The text goes to a temporary file beside ``path`` (named for this process and
    call, so writers in several processes never share one), which then replaces
    ``path`` in one rename. On failure ``path`` is unchanged and the temporary
    file is removed. Not forced to disk: a machine's crash may lose the write
    (the direct pipeline's offset log, which must survive one, syncs its own).
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
