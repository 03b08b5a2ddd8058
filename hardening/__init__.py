"""Lakegate hardening harness: fault, hostile-input, isolation and soak suites.

`python -m hardening` runs the fault, hostile-input and isolation suites against a real local
stack and writes `hardening/latest/report.md` and `summary.json`; `python -m hardening --soak`
runs the long soak. Importing this package has no side effects.
"""
