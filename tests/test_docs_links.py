"""README.md and docs/ hold together: every relative link and ``#anchor`` lands, the README stays short.

Anchors follow GitHub's rules for headings: markup dropped (a link keeps its text, code its
content), lowercased, every character that is not a letter, digit, ``_``, ``-`` or space dropped,
spaces turned into hyphens, and the second heading with the same slug gets ``-1``, the third ``-2``.
Plain text parsing, no network: links with a scheme (``https:``, ``mailto:``) are not followed.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: The guides, in the order a user meets them, then the reference and the rest.
PAGES = ["writing-cases.md", "adapters.md", "running.md", "reports.md", "ci.md", "model-apis.md",
         "seeding-and-review.md", "cloud-videos.md", "resume-pins-and-cache.md", "reference.md",
         "architecture.md", "performance.md", "changes.md"]

README_MAX_LINES = 400

HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$")
FENCE = re.compile(r"^ {0,3}(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
#: An inline link or image: [text](target) or [text](target "title"); the text may hold code.
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s.*)?$")
HTML_HREF = re.compile(r"<a\s[^>]*href=\"([^\"]+)\"")
HTML_ANCHOR = re.compile(r"<a\s[^>]*(?:name|id)=\"([^\"]+)\"")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def documents(root: Path) -> list[Path]:
    """The Markdown files a reader walks: README.md, docs/*.md and benchmarks/README.md."""
    found = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    bench = root / "benchmarks" / "README.md"
    return found + ([bench] if bench.is_file() else [])


def prose(text: str) -> list[str]:
    """The lines outside fenced code blocks, with the fenced lines blanked."""
    out: list[str] = []
    fence: str | None = None
    for line in text.splitlines():
        match = FENCE.match(line)
        if fence is None and match:
            fence = match[1]
            out.append("")
        elif fence is not None:
            if line.strip().startswith(fence):
                fence = None
            out.append("")
        else:
            out.append(line)
    return out


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text, before duplicates are numbered."""
    code: list[str] = []

    def keep_code(match: re.Match[str]) -> str:
        code.append(match[2].strip())
        return f"\x00{len(code) - 1}\x00"

    text = CODE_SPAN.sub(keep_code, heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link or image keeps its text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML tags
    text = re.sub(r"(\*+|\b_+|_+\b)", "", text)  # emphasis marks (an underscore inside a word stays)
    text = re.sub(r"\x00(\d+)\x00", lambda m: code[int(m[1])], text)
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor a file offers: its headings' slugs, numbered as GitHub does, and HTML anchors."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    for line in prose(path.read_text(encoding="utf-8")):
        match = HEADING.match(line)
        if match:
            base = slug(match[2])
            count = seen.get(base, 0)
            out.add(base if count == 0 else f"{base}-{count}")
            seen[base] = count + 1
        out.update(HTML_ANCHOR.findall(line))
    return out


def links(path: Path) -> list[tuple[int, str]]:
    """(line number, target) of every link in a file's prose; code spans are not links."""
    found: list[tuple[int, str]] = []
    for number, line in enumerate(prose(path.read_text(encoding="utf-8")), start=1):
        # A code span inside link text is fine; one holding something that looks like a link is not a link.
        bare = CODE_SPAN.sub(lambda m: "x" * len(m[0]) if "](" in m[0] else m[0], line)
        found += [(number, target) for target in INLINE_LINK.findall(bare)]
        found += [(number, target) for target in HTML_HREF.findall(bare)]
        definition = REFERENCE_DEF.match(bare)
        if definition:
            found.append((number, definition[1]))
    return found


def broken_links(root: Path) -> list[str]:
    """Every relative link or anchor of the documents under ``root`` that lands nowhere."""
    root = root.resolve()
    problems: list[str] = []
    cache: dict[Path, set[str]] = {}
    for doc in documents(root):
        where = doc.relative_to(root)
        for number, target in links(doc):
            if not target or SCHEME.match(target):
                continue
            path_part, _, fragment = target.partition("#")
            dest = (doc.parent / path_part).resolve() if path_part else doc
            if not dest.is_relative_to(root):
                problems.append(f"{where}:{number}: {target} points outside the repository")
                continue
            if not dest.exists():
                problems.append(f"{where}:{number}: {target}: no such file")
                continue
            if not fragment:
                continue
            if dest.suffix != ".md":
                problems.append(f"{where}:{number}: {target}: an anchor into a file that is not Markdown")
                continue
            if dest not in cache:
                cache[dest] = anchors(dest)
            if fragment not in cache[dest]:
                problems.append(f"{where}:{number}: {target}: {dest.relative_to(root)} has no heading #{fragment}")
    return problems


# --- the checker itself ------------------------------------------------------------------------------


def test_slugs_follow_github() -> None:
    assert slug("Resume, pins and cache") == "resume-pins-and-cache"
    assert slug("Adapter config (adapter.yaml)") == "adapter-config-adapteryaml"
    assert slug("`video-store prune-cache`") == "video-store-prune-cache"
    assert slug("`sample_defaults` keys") == "sample_defaults-keys"
    assert slug("Command adapters (`bench_command_adapter.py`)") == "command-adapters-bench_command_adapterpy"
    assert slug("Knife-edge labels (`--jitter-frames`)") == "knife-edge-labels---jitter-frames"
    assert slug("*Ours* and [upstream](https://example.com)") == "ours-and-upstream"
    assert slug("0.1.0 - 2026-12-01") == "010---2026-12-01"


def test_duplicate_headings_are_numbered_and_code_blocks_have_no_headings(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Changes\n## Added\n```sh\n# not a heading\n```\n## Added\n## Added\n", encoding="utf-8")
    assert anchors(page) == {"changes", "added", "added-1", "added-2"}


def test_a_broken_file_anchor_or_escape_is_reported(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide.md").write_text("# Guide\n## Real part\nBack to [top](../README.md#top).\n",
                                                encoding="utf-8")
    (tmp_path / "README.md").write_text(
        "# Top\n"
        "[ok](docs/guide.md#real-part) [ok](#top) [ok](docs/) [web](https://example.com/x#y)\n"
        "`[not a link](nowhere.md)`\n"
        "[gone](docs/missing.md) [bad](docs/guide.md#fake-part) [self](#nope) [out](../elsewhere.md)\n"
        "[ref]: docs/guide.md#nor-this\n",
        encoding="utf-8")
    problems = broken_links(tmp_path)
    assert [p.split(": ", 1)[1].split(":")[0] for p in problems] == [
        "docs/missing.md", "docs/guide.md#fake-part", "#nope", "../elsewhere.md points outside the repository",
        "docs/guide.md#nor-this"], problems
    assert all(p.startswith("README.md:") for p in problems)


# --- the repository's documents -------------------------------------------------------------------------


def test_every_relative_link_and_anchor_resolves() -> None:
    problems = broken_links(ROOT)
    assert not problems, "broken links in README.md and docs/:\n" + "\n".join(problems)


def test_the_readme_stays_short_and_links_the_docs() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move guides into docs/"
    targets = {target for _n, target in links(ROOT / "README.md")}
    assert "docs/README.md" in targets
    assert "docs/reference.md#differences-from-upstream" in targets


def test_the_docs_index_lists_every_page_in_order() -> None:
    on_disk = {p.name for p in (ROOT / "docs").glob("*.md")} - {"README.md"}
    assert on_disk == set(PAGES), f"docs/ pages {sorted(on_disk)}; the index expects {PAGES}"
    listed = [target for _n, target in links(ROOT / "docs" / "README.md") if "#" not in target]
    firsts = [name for i, name in enumerate(listed) if name in PAGES and name not in listed[:i]]
    assert firsts == PAGES, f"docs/README.md must link the pages in reading order, links them as {firsts}"


def _bullets(path: Path, title: str) -> list[str]:
    """The top-level bullets of the section under the heading ``title`` (up to the next heading)."""
    lines = prose(path.read_text(encoding="utf-8"))
    start = next(i for i, line in enumerate(lines) if (m := HEADING.match(line)) and m[2] == title)
    end = next((i for i in range(start + 1, len(lines)) if HEADING.match(lines[i])), len(lines))
    return [line for line in lines[start + 1:end] if line.startswith("- ")]


def test_the_readme_sums_up_every_difference_from_upstream() -> None:
    summary = _bullets(ROOT / "README.md", "Differences from upstream")
    full = _bullets(ROOT / "docs" / "reference.md", "Differences from upstream")
    assert len(summary) == len(full), (
        f"docs/reference.md lists {len(full)} deliberate differences from upstream; README.md's summary "
        f"has {len(summary)} lines: give each difference one line in README.md")
