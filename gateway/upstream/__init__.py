"""Upstream: the catalog client, the session token source, retries and the HTTP transport."""
