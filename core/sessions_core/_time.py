"""Timestamps: timezone-aware UTC datetimes, stored as integer microseconds since the epoch."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def to_us(moment: datetime) -> int:
    """Microseconds since the Unix epoch; a naive datetime is taken as UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    delta = moment - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_us(value: int) -> datetime:
    return EPOCH + timedelta(0, 0, value)  # positional: measurably faster on the read path


def now_us() -> int:
    return time.time_ns() // 1000
