"""Local-stack pytest fixtures (filled in by the devstack work)."""
