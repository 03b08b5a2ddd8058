"""Lakegate: a per-node credential gateway for the Lakekeeper catalog."""

__version__ = "0.1.0"
