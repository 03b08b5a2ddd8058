"""``lakegate_client.engine``: the transactional write engine (the ``engine`` extra).

A write is a job that publishes exactly what the task attempts a driver accepted, or nothing,
whatever crashes and whoever writes at the same moment. The parts, by folder:

- ``protocol.py``: the steps every format implements (plan, stage, point of no return, roll
  forward, abort, recover) as :class:`~lakegate_client.engine.protocol.CommitProtocol`, and
  :func:`~lakegate_client.engine.protocol.protocol_for`, the one way in;
- ``formats/``: one module per format with its rules alone: ``plain.py`` (the commit marker
  and intent of plain Parquet/CSV/JSON tables), ``delta.py`` (the Delta log), ``lance.py`` (the
  Lance manifest; ``lance_manifests.py`` reads its newest version from a listing);
- ``stores/``: one module per cloud behind one interface (``base.py``): ``s3.py``, ``adls.py``,
  ``gcs.py``;
- what every format shares: the job's intent and lease (``job_intent.py``, ``jobs.py``), the
  recovery of abandoned jobs (``recovery.py``), staged uploads (``staged.py``), the attempt
  ledger (``attempts.py``), the conditional-writes probe (``conditional_writes.py``), a job's
  visible files (``job_files.py``), retries (``retrying.py``) and the helper threads
  (``helper_pool.py``).

The credential client (``import lakegate_client``) never imports this package; ``tables``
(``read_table``/``write_table``) and ``spark`` (the data source) drive it.
"""
