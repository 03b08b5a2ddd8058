"""The six bench scenarios; each is `run(ctx) -> dict` and stops every server it starts."""
