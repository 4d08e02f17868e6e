"""Unit tests start no server: a test that tries fails at once, so the
suite stays fast and runs where no redis-server or valkey-server exists."""

from __future__ import annotations

import pytest

from echomq_bench.servers.embedded import EmbeddedServer


@pytest.fixture(autouse=True)
def no_server(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: EmbeddedServer, port: int) -> None:
        pytest.fail(f"a unit test started a server ({self.spec.describe()}); it belongs in tests/integration")

    monkeypatch.setattr(EmbeddedServer, "_launch", refuse)
