"""The daemon's surfaces: HTTP (native, Lakekeeper-compatible, AWS, ops) and gRPC.

Surfaces parse and validate requests, authenticate callers, apply the caller policy, call the
service and render answers. They never touch the cache or the upstream directly.
"""
