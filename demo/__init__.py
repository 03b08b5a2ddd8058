"""The Lakegate demo (``make demo``): a PySpark pipeline over Lakekeeper generic tables.

It starts the local stack with the gateway, lands a raw CSV drop as a generic table, cleans and
aggregates it with Spark, writes Parquet, Delta and Lance generic tables through the ``lakekeeper``
data source, reads each back, checks the row counts, and reports what the gateway saved.
Run it with ``python -m demo`` from the repository root (``--help`` for options).
"""
