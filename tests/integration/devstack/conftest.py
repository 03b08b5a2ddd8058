"""Helpers shared by the local-stack integration tests (HTTP clients bound to `bare_stack`)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from devstack.bootstrap import fetch_token
from devstack.hooks import EmulatorHooks
from devstack.launcher import Stack
from tests.stack_fixtures import clean_emulator


@dataclass
class Catalog:
    """Raw HTTP access to the emulator as client `direct` (or any bearer token)."""

    stack: Stack
    http: httpx.Client
    token: str

    @property
    def wh(self) -> str:
        return self.stack.info.warehouse.id

    @property
    def ns(self) -> str:
        return self.stack.info.namespace

    def tables_path(self, ns: str | None = None) -> str:
        return f"/lakekeeper/v1/{self.wh}/namespaces/{ns or self.ns}/generic-tables"

    def create(self, name: str, ns: str | None = None, **body: Any) -> httpx.Response:
        return self.http.post(self.tables_path(ns), json={"name": name, "format": "lance", **body})


def token_for(stack: Stack, client: str) -> str:
    c = stack.info.idp.clients[client]
    return fetch_token(stack.info.idp.token_url, c.id, c.secret)


@pytest.fixture
def catalog(bare_stack: Stack) -> Iterator[Catalog]:
    token = token_for(bare_stack, "direct")
    with httpx.Client(
        base_url=bare_stack.info.catalog.url,
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    ) as http:
        yield Catalog(bare_stack, http, token)


@pytest.fixture
def hooks(bare_stack: Stack) -> Iterator[EmulatorHooks]:
    yield from clean_emulator(bare_stack)
