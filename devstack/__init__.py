"""Lakegate's local stack: a real IdP, real S3+STS and a Lakekeeper-compatible catalog emulator.

Start and stop it with `lakegate-devstack up|down|status` or
`devstack.launcher.start_stack/stop_stack`.
"""
