"""The key grammar of one queue: emq:{q}:<type>.

`{q}` is a cluster hash tag, so every key of a queue, the job rows
included, lives in one slot.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import InvalidArgumentError

__all__ = ["QueueKeys", "check_queue_name"]

_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def check_queue_name(name: object) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InvalidArgumentError(
            f"bad queue name {name!r}: want 1-64 characters of [A-Za-z0-9_.-]"
        )
    return name


@dataclass(frozen=True)
class QueueKeys:
    name: str

    def __post_init__(self) -> None:
        check_queue_name(self.name)

    @property
    def base(self) -> str:
        return f"emq:{{{self.name}}}:"

    @property
    def pending(self) -> str:
        return self.base + "pending"

    @property
    def active(self) -> str:
        return self.base + "active"

    @property
    def schedule(self) -> str:
        return self.base + "schedule"

    @property
    def dead(self) -> str:
        return self.base + "dead"

    @property
    def job_prefix(self) -> str:
        return self.base + "job:"

    def job(self, job_id: str) -> str:
        return self.job_prefix + job_id
