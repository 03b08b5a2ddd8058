"""Just enough Dockerfile and .dockerignore parsing for the image tests.

`parse` joins continuation lines, drops comments and splits the file into build stages;
`DockerIgnore` applies .dockerignore patterns the way the Docker builder does (in order, the last
matching pattern wins, `!` re-includes, `**` spans directories, a pattern that matches a directory
covers everything below it).
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Instruction:
    """One instruction: upper-case keyword and the raw argument text."""

    keyword: str
    args: str

    def exec_form(self) -> list[str] | None:
        """The JSON-array form of CMD/ENTRYPOINT/HEALTHCHECK CMD arguments, if used."""
        text = self.args.removeprefix("CMD").strip() if self.keyword == "HEALTHCHECK" else self.args
        start = text.find("[")
        if start < 0:
            return None
        value = json.loads(text[start:])
        return [str(v) for v in value]


@dataclass
class Stage:
    """A build stage: its FROM image, optional name, and instructions after FROM."""

    image: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def of(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]


def parse(path: Path) -> list[Stage]:
    """The stages of a Dockerfile, in order."""
    logical: list[str] = []
    pending = ""
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1].rstrip() + " "
            continue
        logical.append(pending + line)
        pending = ""
    stages: list[Stage] = []
    for text in logical:
        keyword, _, args = text.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            parts = shlex.split(args)
            parts = [p for p in parts if not p.startswith("--platform")]
            name = parts[2] if len(parts) >= 3 and parts[1].upper() == "AS" else None
            stages.append(Stage(image=parts[0], name=name))
        elif stages:
            stages[-1].instructions.append(Instruction(keyword, args.strip()))
    return stages


def copy_sources(instruction: Instruction) -> list[str]:
    """Context paths of a COPY/ADD (empty for COPY --from, which copies from another stage)."""
    parts = shlex.split(instruction.args)
    if any(p.startswith("--from") for p in parts):
        return []
    parts = [p for p in parts if not p.startswith("--")]
    return parts[:-1]


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out += "(?:.*/)?"
            i += 3
        elif pattern.startswith("**", i):
            out += ".*"
            i += 2
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            out += "[^/]"
            i += 1
        else:
            out += re.escape(pattern[i])
            i += 1
    return re.compile(out)


class DockerIgnore:
    """The .dockerignore rules of one build context."""

    def __init__(self, text: str) -> None:
        self._rules: list[tuple[bool, re.Pattern[str]]] = []
        for raw in text.splitlines():
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            negate = line.startswith("!")
            pattern = line[1:].strip() if negate else line
            self._rules.append((negate, _pattern_regex(pattern.strip("/"))))

    def excluded(self, relpath: str) -> bool:
        """Whether a context-relative posix path is left out of the build context."""
        parts = relpath.strip("/").split("/")
        candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
        verdict = False
        for negate, regex in self._rules:
            if negate:
                # A re-include names the path itself (or a directory above it with **).
                if regex.fullmatch(relpath):
                    verdict = False
            elif any(regex.fullmatch(c) for c in candidates):
                verdict = True
        return verdict
