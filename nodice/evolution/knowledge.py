"""The knowledge base: folders of Markdown documents, searched by relevance (BM25).

Documents are split at their headings, so a hit is the section that answers,
not a whole page. The starter set ships in ``nodice/knowledge``; users add
their own folders (``nodice evolve --knowledge DIR``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

STARTER_DIR = Path(__file__).resolve().parent.parent / "knowledge"
_TOKEN = re.compile(r"[a-z0-9_]+")
_HEADING = re.compile(r"^(#{1,4})\s+(.*)$")


@dataclass(frozen=True)
class Section:
    document: str
    title: str
    heading: str
    text: str

    def excerpt(self, limit: int = 1200) -> str:
        body = self.text.strip()
        return body if len(body) <= limit else body[:limit].rsplit(" ", 1)[0] + " …"


@dataclass(frozen=True)
class Hit:
    section: Section
    score: float

    def render(self, limit: int = 1200) -> str:
        s = self.section
        return f"## {s.title} › {s.heading}  ({s.document}, relevance {self.score:.2f})\n{s.excerpt(limit)}"


def tokenize(text: str) -> list[str]:
    """Lower-case words, with snake_case and CamelCase identifiers also split into their parts."""
    words = _TOKEN.findall(re.sub(r"([a-z])([A-Z])", r"\1 \2", text).lower())
    out: list[str] = []
    for w in words:
        out.append(w)
        if "_" in w:
            out.extend(p for p in w.split("_") if p)
    return out


def split_sections(path: Path, root: Path) -> list[Section]:
    text = path.read_text(encoding="utf-8", errors="replace")
    name = path.relative_to(root).as_posix() if root in path.parents else path.name
    title = path.stem.replace("_", " ").replace("-", " ")
    sections: list[Section] = []
    heading, lines = "(introduction)", list[str]()
    for line in text.splitlines():
        m = _HEADING.match(line)
        if m:
            if m.group(1) == "#" and not sections and not "".join(lines).strip():
                title = m.group(2).strip()
                continue
            if "".join(lines).strip():
                sections.append(Section(name, title, heading, "\n".join(lines)))
            heading, lines = m.group(2).strip(), []
        else:
            lines.append(line)
    if "".join(lines).strip():
        sections.append(Section(name, title, heading, "\n".join(lines)))
    return sections


class KnowledgeBase:
    """BM25 over the sections of every Markdown file in the given folders."""

    def __init__(self, folders: list[Path] | None = None, include_starter: bool = True):
        self.folders = ([STARTER_DIR] if include_starter else []) + [Path(f) for f in folders or []]
        self.sections: list[Section] = []
        for folder in self.folders:
            if folder.is_file() and folder.suffix == ".md":
                self.sections.extend(split_sections(folder, folder.parent))
                continue
            for path in sorted(folder.rglob("*.md")) if folder.is_dir() else []:
                self.sections.extend(split_sections(path, folder))
        self._bm25: Any = None

    def _index(self) -> Any:
        """The BM25 index, built on the first search (a run whose agent never searches never needs it)."""
        if self._bm25 is None and self.sections:
            from rank_bm25 import BM25Okapi

            self._bm25 = BM25Okapi(
                [tokenize(f"{s.title} {s.heading} {s.heading} {s.text}") for s in self.sections]
            )
        return self._bm25

    def __len__(self) -> int:
        return len(self.sections)

    def documents(self) -> list[str]:
        return sorted({s.document for s in self.sections})

    def search(self, query: str, k: int = 3) -> list[Hit]:
        words = tokenize(query)
        index = self._index()
        if index is None or not words:
            return []
        scores = index.get_scores(words)
        ranked = sorted(range(len(scores)), key=lambda i: -scores[i])
        return [Hit(self.sections[i], float(scores[i])) for i in ranked[:k] if scores[i] > 0]

    def render_search(self, query: str, k: int = 3) -> str:
        hits = self.search(query, k)
        if not hits:
            return f"no section of the knowledge base matches '{query}'"
        return "\n\n".join(h.render() for h in hits)
