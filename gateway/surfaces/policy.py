"""Caller policy: which warehouses, namespaces and tables each caller may use, read or write.

The gateway's upstream identity is shared by every caller, so this check is what keeps one
tenant's pods from obtaining another tenant's credentials (deploy/README.md, "Security
model"). It runs before the cache
is consulted. Patterns are fnmatch globs matched on the comparison form of names
(`gateway.names.fold`: case- and compatibility-folded, `+` read as a space in namespace levels
and table names), the same form the cache key and the upstream request use, so every spelling
of one catalog name gets one decision; the warehouse pattern matches warehouse NAMES only: a
request naming the warehouse by its UUID matches a rule only through the name the UUID resolves
to (a rule on `d*` must not admit warehouse `prod_a` because its UUID starts with `d`), and a
UUID whose name is unknown matches only `*`; the namespace pattern matches the levels joined
with ".".

Projects: the catalog call goes to the project the request names (`x-project-id`), so a grant
holds in one project. A rule's `project` pattern (matched exactly, case-sensitively) names where
it holds; a rule without one holds in the default project only (`UPSTREAM__PROJECT_ID`, or
Lakekeeper's own default when unset), so policy files written before projects keep their
meaning and grant nothing in another project.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import yaml

from gateway.models import AccessMode, CallerIdentity
from gateway.names import fold, fold_level, fold_namespace, fold_table, is_uuid

ANY_CALLER = "*"


class PolicyFileError(ValueError):
    """The policy file is unreadable or malformed (raised at start, names the problem)."""


@dataclass(frozen=True)
class Rule:
    """One grant: patterns (already folded) and the access modes it allows; `project` None
    means the default project."""

    warehouse: str
    namespace: str
    table: str
    access: frozenset[AccessMode]
    project: str | None = None

    def holds_in(self, project: str | None, default_project: str) -> bool:
        """Whether this rule applies in `project` (None: the request named no project)."""
        effective = default_project if project is None else project
        if self.project is None:
            return effective == default_project
        return fnmatchcase(effective, self.project)

    def covers(
        self, warehouses: Iterable[str], namespace: str, table: str | None, access: AccessMode
    ) -> bool:
        """Whether this rule allows `access` on the table (or on the namespace when table=None);
        the names are in their folded form (`CallerPolicy.allows` folds them)."""
        if access not in self.access:
            return False
        if self.warehouse != "*" and not any(fnmatchcase(w, self.warehouse)
                                             for w in warehouses if w):
            return False
        if not fnmatchcase(namespace, self.namespace):
            return False
        return table is None or fnmatchcase(table, self.table)

    @property
    def is_global(self) -> bool:
        return self.warehouse == self.namespace == self.table == "*"


class CallerPolicy:
    """Per-caller rules; `None` rules means no policy file: every caller may do everything.

    Args:
        rules: caller name (or pattern) -> rules, or None (no policy).
        default_project: the project of a request that names none (`UPSTREAM__PROJECT_ID`).
    """

    def __init__(self, rules: Mapping[str, tuple[Rule, ...]] | None,
                 default_project: str = "") -> None:
        self.default_project = default_project
        self._rules = None if rules is None else {k.lower(): v for k, v in rules.items()}
        # Caller names may be fnmatch patterns (`system:serviceaccount:team-a:*`); "*" alone is
        # ANY_CALLER, looked up directly.
        self._patterns = tuple(
            (k, v)
            for k, v in (self._rules or {}).items()
            if k != ANY_CALLER and any(c in k for c in "*?[")
        )

    @property
    def enabled(self) -> bool:
        return self._rules is not None

    def _for(self, caller: CallerIdentity) -> tuple[Rule, ...]:
        assert self._rules is not None
        name = caller.name.lower()
        rules = self._rules.get(name, ()) + self._rules.get(ANY_CALLER, ())
        for pattern, extra in self._patterns:
            if pattern != name and fnmatchcase(name, pattern):
                rules += extra
        return rules

    def allows(
        self,
        caller: CallerIdentity,
        warehouses: Iterable[str],
        namespace: tuple[str, ...],
        table: str | None,
        access: AccessMode,
        project: str | None = None,
    ) -> bool:
        """Whether `caller` may use `access` on the table (table=None: anything in the namespace).

        Args:
            caller: the authenticated caller.
            warehouses: what the warehouse is known by (as given, name, UUID); only names are
                matched, a UUID among them is left out.
            namespace: the namespace levels.
            table: the table name, or None for namespace-level operations (list).
            access: read or write.
            project: the project the request names (None: the default project).
        """
        if self._rules is None:
            return True
        # One form for every spelling: `+` is a space in a table name too (a generic table name
        # cannot hold `+`, so reading it as a space there can only refuse more).
        names = warehouse_names(warehouses)
        joined = ".".join(fold_namespace(namespace))
        folded = None if table is None else fold_table(table, plus_is_space=True)
        return any(r.holds_in(project, self.default_project)
                   and r.covers(names, joined, folded, access) for r in self._for(caller))

    def allows_warehouse(self, caller: CallerIdentity, warehouses: Iterable[str],
                         project: str | None = None) -> bool:
        """Whether any of the caller's rules (in `project`) covers the warehouse, whatever its
        namespaces and tables: what a warehouse look-up needs, so a caller learns the id of no
        warehouse it holds nothing in. `warehouses` as in `allows` (names only are matched)."""
        if self._rules is None:
            return True
        names = warehouse_names(warehouses)
        return any(r.holds_in(project, self.default_project)
                   and (r.warehouse == "*" or any(fnmatchcase(w, r.warehouse) for w in names))
                   for r in self._for(caller))

    def allows_project(self, caller: CallerIdentity, project: str | None) -> bool:
        """Whether any of the caller's rules holds in `project` (None: the default project):
        a request naming a project the caller has no grant in is refused whatever its route."""
        if self._rules is None:
            return True
        return any(r.holds_in(project, self.default_project) for r in self._for(caller))

    def allows_everything(self, caller: CallerIdentity, access: AccessMode) -> bool:
        """Whether the caller holds a global grant (needed to invalidate the whole cache; the
        cache is one for every project, so the grant's project does not matter)."""
        if self._rules is None:
            return True
        return any(r.is_global and access in r.access for r in self._for(caller))

    def read_limited_callers(self) -> list[str]:
        """Callers (names or patterns) with a grant that allows `read` but not `write`, unless
        they also hold a global write grant (then nothing is limited to read).

        Such a caller must get read-only storage keys, which only a configured read role can
        make the catalog vend (`LAKEGATE__UPSTREAM__READ_ROLE_ID`).
        """
        if self._rules is None:
            return []
        shared = self._rules.get(ANY_CALLER, ())
        out = []
        for name, own in self._rules.items():
            rules = own + shared
            if any(r.is_global and AccessMode.WRITE in r.access for r in rules):
                continue
            if any(AccessMode.WRITE not in r.access for r in own):
                out.append(name)
        return sorted(out)

    def needs_warehouse_names(self, caller: CallerIdentity, given: str) -> bool:
        """Whether resolving the warehouse could change a decision (patterns not matching `given`).

        Resolution costs a (cached) catalog lookup, so it is skipped when no policy is set or when
        every rule already decides on the warehouse string the caller gave.
        """
        if self._rules is None:
            return False
        if is_uuid(given):  # a UUID is never matched itself: only its name can decide
            return any(r.warehouse != "*" for r in self._for(caller))
        folded = fold(given)
        return not all(fnmatchcase(folded, r.warehouse) for r in self._for(caller))

    @classmethod
    def from_file(cls, path: Path | None, default_project: str = "") -> CallerPolicy:
        """Load `{"callers": {name: [{project?, warehouse, namespace, table, access}]}}` (YAML
        or JSON).

        Raises:
            PolicyFileError: unreadable file or a malformed rule (the message names it).
        """
        if path is None:
            return cls(None, default_project)
        try:
            doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise PolicyFileError(f"cannot read policy file {path}: {type(exc).__name__}") from exc
        return cls(parse_rules(doc, str(path)), default_project)


def warehouse_names(warehouses: Iterable[str]) -> tuple[str, ...]:
    """The folded names among what a warehouse is known by: a UUID is an id, not a name, so
    no pattern matches it."""
    return tuple(fold(w) for w in warehouses if w and not is_uuid(w))


def parse_rules(doc: Any, source: str) -> dict[str, tuple[Rule, ...]]:
    """Validate a policy document into rules; every error names the caller and rule index."""
    if not isinstance(doc, dict) or not isinstance(doc.get("callers"), dict):
        raise PolicyFileError(f"{source}: expected a mapping with a 'callers' mapping")
    out: dict[str, tuple[Rule, ...]] = {}
    for name, raw_rules in doc["callers"].items():
        if not isinstance(raw_rules, list):
            raise PolicyFileError(f"{source}: callers.{name} must be a list of rules")
        rules = []
        for i, raw in enumerate(raw_rules):
            where = f"{source}: callers.{name}[{i}]"
            if not isinstance(raw, dict):
                raise PolicyFileError(f"{where} must be a mapping")
            unknown = set(raw) - {"project", "warehouse", "namespace", "table", "access"}
            if unknown:
                raise PolicyFileError(f"{where} has unknown keys {sorted(unknown)}")
            access_raw = raw.get("access", ["read"])
            if isinstance(access_raw, str):
                access_raw = [access_raw]
            if not isinstance(access_raw, list) or not access_raw:
                raise PolicyFileError(f"{where}.access must be read and/or write")
            try:
                access = frozenset(AccessMode(str(a).lower()) for a in access_raw)
            except ValueError as exc:
                raise PolicyFileError(f"{where}.access must be read and/or write") from exc
            wh, ns, table = (str(raw.get(k, "*")) for k in ("warehouse", "namespace", "table"))
            project = raw.get("project")
            if project is not None and (not isinstance(project, str) or not project):
                raise PolicyFileError(f"{where}.project must be a non-empty string (a pattern)")
            rules.append(Rule(fold(wh), fold_level(ns), fold_level(table), access, project))
        out[str(name)] = tuple(rules)
    return out
