"""A table's identity as the catalog reports it (id and storage location), and the identity a
caller planned against: what binds a cached answer to one table across a drop and re-create
(docs/contracts.md §4, "Table identity")."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.errors import InvalidRequestError

_SCHEME_ALIASES = {"s3a": "s3", "s3n": "s3"}


def _location_key(location: str) -> str:
    scheme, sep, rest = location.strip().rstrip("/").partition("://")
    if not sep:
        return scheme
    scheme = scheme.lower()
    return f"{_SCHEME_ALIASES.get(scheme, scheme)}://{rest}"


def covers(prefix: str, location: str) -> bool:
    """A storage prefix covers a location: the same prefix or one below it, on a `/` boundary
    (`s3://b/t` covers `s3://b/t/x`, never `s3://b/t2`), spelled as `same_location` allows."""
    pre, loc = _location_key(prefix), _location_key(location)
    return loc == pre or loc.startswith(pre + "/")


def same_location(a: str, b: str) -> bool:
    """Two storage locations name the same prefix: a trailing `/`, the scheme's case and the
    Hadoop spellings `s3a://`/`s3n://` of `s3://` do not count (engines and catalogs differ)."""
    return _location_key(a) == _location_key(b)


@dataclass(frozen=True)
class TableIdentity:
    """A table as the catalog reported it at one moment: its id (None when the answer had
    none, as a generic-table load) and its storage location."""

    table_id: str | None
    location: str


@dataclass(frozen=True)
class ExpectedIdentity:
    """The identity a caller planned against (`expected_location` / `table_id`)."""

    location: str | None = None
    table_id: str | None = None

    def __post_init__(self) -> None:
        if self.location is not None and not self.location.strip("/ "):
            raise InvalidRequestError("expected_location must not be empty")
        if self.table_id is not None and not self.table_id.strip():
            raise InvalidRequestError("table_id must not be empty")
        if self.table_id is not None:
            object.__setattr__(self, "table_id", self.table_id.strip().lower())

    @classmethod
    def of(cls, location: str | None, table_id: str | None) -> ExpectedIdentity | None:
        """None when the caller named neither (the empty string counts as not named)."""
        if not location and not table_id:
            return None
        return cls(location=location or None, table_id=table_id or None)

    def location_differs(self, location: str) -> bool:
        return self.location is not None and not same_location(self.location, location)

    def id_differs(self, table_id: str | None) -> bool:
        """Whether a known id is not the expected one (an unknown id does not differ)."""
        return (self.table_id is not None and table_id is not None
                and self.table_id != table_id.lower())
