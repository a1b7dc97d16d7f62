"""The first schema of the run store: the tables ``runs`` and ``cases``.

``runs`` has one row per run, ``cases`` one row per case of a run, with its JSON record.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``runs`` and ``cases``."""
    op.create_table(
        "runs",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("started", sa.String(40), nullable=False, index=True),
        sa.Column("ended", sa.String(40)),
        sa.Column("saved", sa.String(40), nullable=False),
        sa.Column("git_commit", sa.String(64)),
        sa.Column("git_branch", sa.String(255), index=True),
        sa.Column("git_dirty", sa.Boolean),
        sa.Column("agents", sa.Text, nullable=False),
        sa.Column("models", sa.Text, nullable=False),
        sa.Column("options", sa.Text, nullable=False),
        sa.Column("shard", sa.String(32)),
        sa.Column("finished", sa.Boolean, nullable=False),
        sa.Column("exit_status", sa.Integer),
        sa.Column("total", sa.Integer, nullable=False),
        sa.Column("passed", sa.Integer, nullable=False),
        sa.Column("failed", sa.Integer, nullable=False),
        sa.Column("errors", sa.Integer, nullable=False),
        sa.Column("skipped", sa.Integer, nullable=False),
        sa.Column("pass_rate", sa.Float),
        sa.Column("cost", sa.Float),
        sa.Column("p50_latency_s", sa.Float),
        sa.Column("p95_latency_s", sa.Float),
        sa.Column("source", sa.Text),
        sa.Column("run", sa.Text, nullable=False),
    )
    op.create_table(
        "cases",
        sa.Column(
            "run_id", sa.String(64), sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("nodeid", sa.Text, primary_key=True),
        sa.Column("file", sa.Text, nullable=False, index=True),
        sa.Column("agent", sa.String(255)),
        sa.Column("tags", sa.Text, nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("content_hash", sa.String(64)),
        sa.Column("score", sa.Float),
        sa.Column("cost", sa.Float),
        sa.Column("latency_s", sa.Float),
        sa.Column("record", sa.Text, nullable=False),
    )
    op.create_index("cases_by_nodeid", "cases", ["nodeid"])


def downgrade() -> None:
    """Drop both tables."""
    op.drop_table("cases")
    op.drop_table("runs")
