"""Helpers for tests of the shell's session without a terminal: statements in, replies out."""
from __future__ import annotations

from weir.shell.session import Session
from weir.sql import parse

BIDS = ("CREATE TABLE bids (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, date_time TIMESTAMP(3), "
        "WATERMARK FOR date_time AS date_time - INTERVAL '2' SECOND) ")


def run(session: Session, text: str):
    """Execute every statement of ``text``; the last one's reply."""
    return [session.execute(statement) for statement in parse(text)][-1]
