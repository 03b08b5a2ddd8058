"""A Lakekeeper-compatible catalog emulator (aiohttp + SQLite) for the local stack.

Follows Lakekeeper's HTTP contract (generic tables, namespaces, `/config`, the management calls
needed for a warehouse, protection, soft delete and undrop) and vends real SeaweedFS STS
credentials. Deliberate deviations from Lakekeeper are listed in `app.py`'s docstring.
"""
