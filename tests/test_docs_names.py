"""Every path, module, public name and relative link the docs mention exists.

Read: README.md, CONTRIBUTING.md, CHANGELOG.md, docs/*.md, and (checked, never edited here)
the READMEs of adapters/ and benchmarks/. Checked in each:

- a repository path in inline code, a code block or a link (``toolguard/...``, ``tests/...``,
  ``benchmarks/...``, ``docs/...``, ``adapters/...``) names a file or directory, from the
  repository root, the doc's directory or a folder in it; ``<name>`` and ``*`` are globs;
- a dotted module (``toolguard.report.phoenix``, ``python -m benchmarks.fork_cost``) exists;
- ``tg.Name`` and ``toolguard.Name`` are in ``toolguard.__all__`` and any attribute path after
  it resolves (``tg.Guard.verify_plan``); ``toolguard.<key>`` that is no module or public name
  must be a span attribute key of ``toolguard/_contract.py``;
- ``guard.x``, ``traj.x`` and ``pending.x`` are attributes of ``tg.Guard``, ``tg.Trajectory``
  and ``tg.PendingCall``;
- a relative Markdown link resolves to a file or directory, and its ``#anchor`` to a heading
  of the linked Markdown file (GitHub's heading ids).

CONTRIBUTING.md's layout names every module of the package, and no module that is not there.
"""

from __future__ import annotations

import ast
import dataclasses
import fnmatch
import inspect
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import toolguard as tg

ROOT = Path(__file__).resolve().parents[1]

DOCS = sorted(
    {
        ROOT / "README.md",
        ROOT / "CONTRIBUTING.md",
        ROOT / "CHANGELOG.md",
        *(ROOT / "docs").glob("*.md"),
        ROOT / "adapters" / "README.md",
        *(ROOT / "adapters").glob("*/README.md"),
        ROOT / "benchmarks" / "README.md",
    }
)

FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
INLINE = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"!?\[(?:[^\]\n]|\\\])*\]\(([^)\s]+)\)")
PATH = re.compile(r"(?<![\w./-])((?:toolguard|tests|benchmarks|docs|adapters)/[\w./*<>{}-]*)")
DOTTED = re.compile(r"(?<![\w./-])(toolguard|benchmarks)\.([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)")
PUBLIC = re.compile(r"(?<![\w.])tg\.([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)(\*?)")
OBJECTS = {"guard": tg.Guard, "traj": tg.Trajectory, "pending": tg.PendingCall}
METHOD = re.compile(r"(?<![\w.])(guard|traj|pending)\.([a-z_]\w*)\b")


def _contract_strings() -> list[str]:
    """Every module-level string of toolguard/_contract.py (span keys, metadata keys)."""
    tree = ast.parse((ROOT / "toolguard" / "_contract.py").read_text(encoding="utf-8"))
    strings = []
    for node in tree.body:
        value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            strings.append(value.value)
    return strings


CONTRACT_STRINGS = set(_contract_strings())
CONTRACT_KEYS = sorted(k for k in CONTRACT_STRINGS if k.startswith("toolguard."))
CAUSES = ("schema", "dependency", "precondition", "state_consistency", "information")
assert set(CAUSES) <= CONTRACT_STRINGS, "the five causes are strings of toolguard/_contract.py"


def _code(text: str) -> list[str]:
    """The code of a doc: its fenced blocks and its inline code spans."""
    blocks = FENCE.findall(text)
    prose = FENCE.sub("", text)
    return blocks + INLINE.findall(prose)


def _prose(text: str) -> str:
    """The doc without code (where Markdown links live)."""
    return INLINE.sub("", FENCE.sub("", text))


def _globbed(path: str) -> str:
    path = re.sub(r"<[^>]*>|\{[^}]*\}", "*", path)
    return path.rstrip(".,:;)")


def _path_exists(path: str, doc: Path) -> bool:
    # From the root, the doc's directory, or each folder below it ("each adapter's tests/...").
    for base in (ROOT, doc.parent, *(d for d in doc.parent.iterdir() if d.is_dir())):
        if any(ch in path for ch in "*?["):
            if any(base.glob(path.rstrip("/"))):
                return True
        elif (base / path).exists():
            return True
    return False


def _module_problem(first: str, rest: list[str]) -> str | None:
    """``first.rest...`` as a module path under the repository, then names in its file."""
    where = ROOT / first
    parts = list(rest)
    while parts and ((where / parts[0]).is_dir() or (where / f"{parts[0]}.py").is_file()):
        part = parts.pop(0)
        where = where / part if (where / part).is_dir() else where / f"{part}.py"
    if not parts:
        return None
    if where.is_dir():
        where = where / "__init__.py"
    if not where.is_file():
        return f"no module {where.relative_to(ROOT)}"
    source = where.read_text(encoding="utf-8")
    if re.search(rf"\b{re.escape(parts[0])}\b", source) is None:
        return f"{where.relative_to(ROOT)} has no {parts[0]!r}"
    return None


def _resolve(names: list[str]) -> str | None:
    """``tg.a.b.c``: ``a`` public, then each attribute found on what came before."""
    if names[0] not in tg.__all__:
        return f"{names[0]!r} is not in toolguard.__all__"
    obj: object = getattr(tg, names[0])
    for name in names[1:]:
        if not _has(obj, name):
            return f"{'.'.join(names)}: no attribute {name!r}"
        obj = getattr(obj, name, None)
    return None


def _has(obj: object, name: str) -> bool:
    if hasattr(obj, name):
        return True
    if isinstance(obj, type):
        if re.search(rf"\bself\.{re.escape(name)}\b", _class_source(obj)):
            return True  # an instance attribute set in a method
        if dataclasses.is_dataclass(obj) and name in {f.name for f in dataclasses.fields(obj)}:
            return True
        for klass in obj.__mro__:
            if name in getattr(klass, "__annotations__", {}) or name in getattr(
                klass, "__slots__", ()
            ):
                return True
    return False


def _class_source(klass: type) -> str:
    """The source of the files a class's methods are defined in (public classes say
    ``__module__ = "toolguard"``, so ``inspect.getsource`` cannot find them)."""
    files = {
        member.__code__.co_filename for member in vars(klass).values() if inspect.isfunction(member)
    }
    return "".join(Path(f).read_text(encoding="utf-8") for f in sorted(files))


def _dotted_problem(first: str, rest: list[str]) -> str | None:
    if first == "benchmarks":
        return _module_problem(first, rest)
    head = rest[0]
    name = ".".join(["toolguard", *rest])
    if any(
        name == key or (name.startswith(key) and key.endswith(".")) or key.startswith(name + ".")
        for key in CONTRACT_KEYS
    ):
        return None  # a span attribute key
    if len(rest) == 1 and head in CAUSES:
        return None  # an error.type value, toolguard.<cause>
    if (ROOT / "toolguard" / head).is_dir() or (ROOT / "toolguard" / f"{head}.py").is_file():
        return _module_problem("toolguard", rest)
    if head in tg.__all__:
        return _resolve(rest)
    if head == "__all__":
        return None
    return f"toolguard.{'.'.join(rest)}: no module, public name or span attribute key"


def _slug(heading: str) -> str:
    """GitHub's id of a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(doc: Path) -> set[str]:
    seen: dict[str, int] = {}
    anchors = set()
    for line in FENCE.sub("", doc.read_text(encoding="utf-8")).splitlines():
        match = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if match:
            slug = _slug(match.group(1))
            count = seen.get(slug, 0)
            anchors.add(slug if count == 0 else f"{slug}-{count}")
            seen[slug] = count + 1
    return anchors


def problems(doc: Path) -> Iterator[str]:
    text = doc.read_text(encoding="utf-8")
    code = _code(text)
    links = LINK.findall(_prose(text))
    for target in links:
        if re.match(r"[a-z][a-z0-9+.-]*:", target):
            continue  # https:, mailto:
        path, _, anchor = target.partition("#")
        linked = (doc.parent / path).resolve() if path else doc
        if not linked.exists():
            yield f"link ({target}): no {path}"
            continue
        if anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            yield f"link ({target}): no heading #{anchor} in {linked.relative_to(ROOT)}"
    for chunk in [*code, *links]:
        for found in PATH.findall(chunk):
            path = _globbed(found)
            if path in CONTRACT_STRINGS:
                continue  # a metadata key of the contract, such as toolguard/step
            if not _path_exists(path, doc):
                yield f"path {found!r} does not exist"
        for first, rest in DOTTED.findall(chunk):
            problem = _dotted_problem(first, rest.split("."))
            if problem:
                yield f"{first}.{rest}: {problem}"
    for chunk in [text]:
        for names, star in PUBLIC.findall(chunk):
            parts = names.split(".")
            if star:
                pattern = parts[0] + "*"
                if not fnmatch.filter(tg.__all__, pattern):
                    yield f"tg.{pattern}: no public name matches"
            else:
                problem = _resolve(parts)
                if problem:
                    yield f"tg.{names}: {problem}"
    for chunk in code:
        for obj, name in METHOD.findall(chunk):
            if name == "py":
                continue  # guard.py, the module
            if not _has(OBJECTS[obj], name):
                yield f"{obj}.{name}: {OBJECTS[obj].__name__} has no {name!r}"


@pytest.mark.parametrize("doc", DOCS, ids=[str(d.relative_to(ROOT)) for d in DOCS])
def test_every_name_a_doc_mentions_exists(doc: Path) -> None:
    found = sorted(set(problems(doc)))
    assert not found, f"{doc.relative_to(ROOT)}:\n  " + "\n  ".join(found)


def _layout() -> str:
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    section = text.split("## Layout", 1)[1]
    block = FENCE.search(section)
    assert block is not None, "CONTRIBUTING.md: no code block under ## Layout"
    return block.group(1)


def test_the_layout_names_every_module() -> None:
    layout = _layout()
    named = set(re.findall(r"(?<![\w.])(\w+\.py)\b", layout))
    modules = {p.name for p in (ROOT / "toolguard").rglob("*.py")}
    missing = sorted(
        str(p.relative_to(ROOT))
        for p in (ROOT / "toolguard").rglob("*.py")
        if p.name not in named and not (p.name == "__init__.py" and p.parent.name != "toolguard")
    )
    assert not missing, f"CONTRIBUTING.md's layout omits {missing}"
    assert not named - modules, f"the layout names modules that do not exist: {named - modules}"
    for package in (p for p in (ROOT / "toolguard").iterdir() if (p / "__init__.py").exists()):
        assert f"{package.name}/" in layout, f"the layout omits toolguard/{package.name}/"


def test_a_wrong_name_is_found(tmp_path: Path) -> None:
    """The checks above can fail: a doc naming what is not there is caught, each way."""
    doc = tmp_path / "wrong.md"
    readme = Path(os.path.relpath(ROOT / "README.md", tmp_path)).as_posix()
    doc.write_text(
        "`tg.NoSuchThing`, `tg.Guard.no_such_method`, `toolguard/runtime/gone.py`,\n"
        "`toolguard.runtime.gone`, `toolguard.no_such_key`, [a](missing.md),\n"
        f"[b]({readme}#no-such-heading), [c]({readme}#quickstart)\n\n"
        "```python\nguard.no_such_call()\n```\n",
        encoding="utf-8",
    )
    found = "\n".join(problems(doc))
    for wrong in (
        "tg.NoSuchThing",
        "tg.Guard.no_such_method",
        "toolguard/runtime/gone.py",
        "toolguard.runtime.gone",
        "toolguard.no_such_key",
        "missing.md",
        "#no-such-heading",
        "guard.no_such_call",
    ):
        assert wrong in found, f"not caught: {wrong}"
    assert "#quickstart" not in found, found
