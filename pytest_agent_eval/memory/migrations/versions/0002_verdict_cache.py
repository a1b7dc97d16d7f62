"""The verdict cache in the run store (SPEC §25): the tables ``verdicts`` and ``judgments``.

``verdicts``: a case's record by its cache key; ``judgments``: a judge's replies by model, prompt
and samples.

Revision ID: 0002 Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``verdicts`` and ``judgments``."""
    op.create_table(
        "verdicts",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("nodeid", sa.Text, nullable=False),
        sa.Column("version", sa.String(40), nullable=False, index=True),
        sa.Column("run_id", sa.String(64)),
        sa.Column("record", sa.Text, nullable=False),
        sa.Column("stored", sa.String(40), nullable=False),
    )
    op.create_table(
        "judgments",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("model", sa.String(255), nullable=False),
        sa.Column("replies", sa.Text, nullable=False),
        sa.Column("stored", sa.String(40), nullable=False),
    )


def downgrade() -> None:
    """Drop both tables."""
    op.drop_table("judgments")
    op.drop_table("verdicts")
