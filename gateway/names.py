"""The one set of name rules: what a warehouse, namespace or table name may be, on every surface.

`models.TableRef` validates through these on construction, so a name that reaches the service
was checked once, by the same rules, whichever surface (native, Lakekeeper, AWS, gRPC) it came
through, and create accepts exactly the names load accepts.

The rules follow Lakekeeper (lakekeeper `server/namespace.rs` `validate_namespace_ident`,
`server/generic_tables/create.rs`), plus limits that keep hostile input out of upstream URLs:

- every name or level: 1..255 characters, not `.` or `..` (dot segments would be normalised
  away in an upstream URL: a path-traversal vector), also after folding (two U+FF0E fold to `..`);
- no control or invisible characters: C0, DEL and C1 controls, format characters (bidi
  overrides such as U+202E, zero-width joiners, soft hyphens), U+2028/U+2029 and the other
  default-ignorable code points. They would reach logs and terminals as-is, and Lakekeeper's
  collation ignores most of them, so two spellings the policy tells apart could name one table;
- no `#` or `?`: a URL gives them meaning (fragment, query). The gateway rebuilds every forwarded
  path from the parsed names, each segment encoded again, so they could not cut a path short;
  they are refused (also after folding: U+FF03 folds to `#`) so that a name means one thing in
  the policy, the cache, the audit and the catalog, and a client that sends them raw gets a
  clear 400;
- a namespace: 1..5 levels (Lakekeeper's `MAX_NAMESPACE_DEPTH`), no `.` inside a level
  (Lakekeeper's `NamespacePartContainsDot`);
- a warehouse (name or UUID, Lakekeeper's `{prefix}` segment): no `/`;
- a generic table name may hold `/` and spaces (Lakekeeper takes the `{table}` segment as-is
  after percent-decoding); a `+` is left for Lakekeeper to refuse at create, so the gateway never
  rejects a name the catalog accepts.

Comparison form (`fold`): Lakekeeper matches names with an ICU level-2 collation (case- and
compatibility-insensitive, accent-sensitive), and replaces `+` with a space in namespace levels
and Iceberg table names. `fold` (NFKC case fold, the Unicode `NFKC_Casefold` idea) plus that `+`
rule is the one form the policy, the cache key and the upstream credential request use, so a
name spelt `straße`, `STRASSE` or `strasse` is one name to all three.
"""

from __future__ import annotations

import re
import unicodedata
import uuid
from collections.abc import Iterable

from gateway.errors import InvalidRequestError

NAMESPACE_SEPARATOR = "\x1f"  # Lakekeeper joins namespace levels with 0x1F (%1F in a path)
MAX_NAME_LEN = 255
MAX_NAMESPACE_DEPTH = 5
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
URL_DELIMITERS = "#?"  # a URL's fragment and query delimiters: never part of a name
# Unicode general categories never allowed in a name: format (bidi overrides, zero-width and
# tag characters), surrogates, line and paragraph separators.
_INVISIBLE_CATEGORIES = frozenset({"Cf", "Cs", "Zl", "Zp"})
# Default-ignorable code points outside those categories (DerivedCoreProperties.txt):
# combining grapheme joiner, Hangul fillers, Khmer inherent vowels, Mongolian and other
# variation selectors, reserved ignorables.
_IGNORABLE = re.compile(
    "[\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u2060-\u206f\u3164\ufe00-\ufe0f"
    "\uffa0\ufff0-\ufff8\U000e0000-\U000e0fff]"
)


def check_name(value: object, what: str) -> str:
    """A warehouse, namespace level or table name under the shared rules.

    Args:
        value: the candidate (anything: bodies and protobufs are untrusted).
        what: how the error message names it ("table", "namespace level", ...).

    Returns:
        `value`, unchanged.

    Raises:
        InvalidRequestError: not a string, empty, too long, `.`/`..` (as given or folded), with
            `#` or `?`, or with control or invisible characters.
    """
    if not isinstance(value, str) or not value:
        raise InvalidRequestError(f"{what} must be a non-empty string")
    if len(value) > MAX_NAME_LEN:
        raise InvalidRequestError(f"{what} is too long (at most {MAX_NAME_LEN} characters)")
    if _CONTROL.search(value) or _IGNORABLE.search(value) or any(
        unicodedata.category(c) in _INVISIBLE_CATEGORIES for c in value if not c.isascii()
    ):
        raise InvalidRequestError(
            f"{what} contains control characters or invisible (format, bidi, separator) ones")
    folded = fold(value)
    if any(c in value or c in folded for c in URL_DELIMITERS):
        raise InvalidRequestError(f"{what} must not contain '#' or '?' (a URL gives them meaning)")
    if value in {".", ".."} or folded in {".", ".."}:
        raise InvalidRequestError(f"{what} must not be '.' or '..'")
    return value


def check_warehouse(value: object) -> str:
    """A warehouse name or UUID: a name without `/` (it is the upstream `{prefix}` segment).

    Raises:
        InvalidRequestError: as `check_name`, or with a `/`.
    """
    name = check_name(value, "warehouse")
    if "/" in fold(name):
        raise InvalidRequestError("warehouse must not contain '/'")
    return name


def check_namespace(levels: Iterable[object], what: str = "namespace") -> tuple[str, ...]:
    """1..5 levels, each a name without `.` (Lakekeeper's namespace rules).

    Raises:
        InvalidRequestError: empty, too deep, or a level that breaks the rules.
    """
    parts = tuple(levels)
    if not parts or len(parts) > MAX_NAMESPACE_DEPTH:
        raise InvalidRequestError(f"{what} must have between 1 and {MAX_NAMESPACE_DEPTH} levels")
    checked = tuple(check_name(part, f"{what} level") for part in parts)
    if any("." in fold(part) for part in checked):
        raise InvalidRequestError(f"{what} levels must not contain '.'")
    return checked


def split_namespace(segment: str) -> tuple[str, ...]:
    """A decoded `{namespace}` path segment → its levels (0x1F-separated; `.` is NOT one).

    Raises:
        ValueError: an empty namespace or an empty level.
    """
    parts = tuple(segment.split(NAMESPACE_SEPARATOR))
    if not segment or any(p == "" for p in parts):
        raise ValueError("namespace levels must be non-empty")
    return parts


def join_namespace(parts: Iterable[str]) -> str:
    """Namespace levels → the (not yet percent-encoded) `{namespace}` path segment."""
    return NAMESPACE_SEPARATOR.join(parts)


def is_uuid(value: str) -> bool:
    """A canonical (36-character) UUID: Lakekeeper's warehouse `{prefix}`."""
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return len(value) == 36


def fold(name: str) -> str:
    """The comparison form of a warehouse or generic table name: NFKC case fold.

    Approximates Lakekeeper's ICU level-2 matching: case (`ß`/`ss`, final and medial sigma,
    micro sign and mu) and compatibility forms (`ﬁ`/`fi`, `ﬆ`/`st`, full-width letters)
    compare equal, accents do not.
    """
    if name.isascii():
        return name.lower()
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).casefold())


def fold_level(level: str) -> str:
    """A namespace level's comparison form: Lakekeeper reads `+` in a level as a space."""
    return fold(level.replace("+", " "))


def fold_namespace(levels: Iterable[str]) -> tuple[str, ...]:
    """Every level's comparison form (`fold_level`)."""
    return tuple(fold_level(level) for level in levels)


def fold_table(name: str, *, plus_is_space: bool) -> str:
    """A table name's comparison form; Lakekeeper reads `+` as a space in Iceberg table names
    (`plus_is_space=True`) and takes generic table names as they are."""
    return fold(name.replace("+", " ") if plus_is_space else name)
