"""Where the run store is: ``--agent-eval-store`` / ini ``agent_eval_store`` as a SQLAlchemy URL.

Plain Python: the store's libraries load only when the store is opened (at the end of the run), not
to read its option.
"""

from __future__ import annotations

from pathlib import Path

DEFAULT_PATH = Path(".agent-eval") / "runs.db"


def store_url(value: str | None, rootdir: Path) -> str | None:
    """The SQLAlchemy URL of ``--agent-eval-store`` / ini ``agent_eval_store``.

    ``None`` for ``off``; SQLite ``.agent-eval/runs.db`` under the rootdir when not given;
    ``postgresql://`` through psycopg 3; a ``sqlite:`` URL as it is; anything else a SQLite file's
    path (relative to the rootdir).
    """
    text = (value or "").strip()
    if text.lower() == "off":
        return None
    if not text:
        return f"sqlite:///{rootdir / DEFAULT_PATH}"
    if text.startswith(("postgresql://", "postgres://")):
        return "postgresql+psycopg://" + text.split("://", 1)[1]
    if text.startswith(("postgresql+", "sqlite:")):
        return text
    return f"sqlite:///{rootdir / text}"
