"""Shared fixtures. The local-stack fixtures live in tests/stack_fixtures.py."""

pytest_plugins = ["tests.stack_fixtures"]
