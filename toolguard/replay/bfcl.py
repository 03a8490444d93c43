"""BFCL multi-turn result files: calls parsed as literals (never evaluated), entries as runs.

BFCL writes one JSON object per line, ``{"id": "multi_turn_base_0", "result": [...]}``, with
one list per user turn and one item per model step. An item is whatever the model handler
produced: a prompting model's text (``"[cd(folder='x'), ls()]"``), a function-calling model's
list of ``{name: arguments}`` (arguments as JSON text or an object), or an already decoded
list of call strings. Like BFCL's checker, a step that does not decode (the model's closing
chatter) is no call. An entry whose ``result`` is a text instead of turns is what BFCL's
generator writes when inference failed (``"Error during inference: ..."``): BFCL scores it
as a failure, so it is read as an entry with no call (``Entry.inference_error`` holds the
text), never as a malformed line. A line that is not such an entry is an error, and so is a
line longer than the replay's element bound (read as every JSON Lines line is,
``jsonstream``) and a file none of whose other entries decodes to a single call (a
single-turn file, a handler's unknown output): it is not a set of runs that made no error.

Call strings are parsed with ``ast`` and every argument with ``ast.literal_eval``: anything
that is not a literal (a nested call, a name) is refused rather than evaluated.
"""

from __future__ import annotations

import ast
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .jsonstream import DEFAULT_MAX_ELEMENT_BYTES, iter_values
from .model import ReplayInputError, format_hint, json_lines_hint


@dataclass(frozen=True)
class Call:
    """One decoded call: the tool name, positional and keyword literal arguments."""

    name: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)

    def render(self) -> str:
        parts = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"{self.name}({', '.join(parts)})"


class CallParseError(ValueError):
    """A text that is not a call of literal arguments."""


def parse_call(text: str) -> Call:
    """Parse ``f(a, b=1)`` into a Call; arguments must be Python literals."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        # Nested past what the parser takes ("1+1+..." 100,000 times): no call, as BFCL's
        # own checker reads it, never a crash of the whole replay.
        raise CallParseError(f"not a call: {text[:80]!r}") from exc
    if not isinstance(node, ast.Call):
        raise CallParseError(f"not a call: {text!r}")
    func = node.func
    # BFCL results sometimes carry a class prefix (Class.method); the method name is what runs.
    if isinstance(func, ast.Attribute):
        name = func.attr
    elif isinstance(func, ast.Name):
        name = func.id
    else:
        raise CallParseError(f"unsupported callee in {text!r}")
    try:
        args = tuple(ast.literal_eval(a) for a in node.args)
        kwargs = {}
        for kw in node.keywords:
            if kw.arg is None:
                raise CallParseError(f"**kwargs not supported in {text!r}")
            kwargs[kw.arg] = ast.literal_eval(kw.value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as exc:
        raise CallParseError(f"non-literal argument in {text!r}") from exc
    return Call(name, args, kwargs)


def decode_step(item: Any) -> list[Call]:
    """One model step -> its calls; raises CallParseError when it is not a call list."""
    if isinstance(item, str):
        text = item.strip("`\n ")
        if not text.startswith("["):
            text = f"[{text}]"
        try:
            node = ast.parse(text, mode="eval").body
        except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
            raise CallParseError(f"not a call list: {item[:80]!r}") from exc
        if not isinstance(node, ast.List):
            raise CallParseError(f"not a call list: {item[:80]!r}")
        try:
            elements = [ast.unparse(element) for element in node.elts]
        except RecursionError as exc:  # parsed, but too deep to write back ("-" * 500)
            raise CallParseError(f"not a call list: {item[:80]!r}") from exc
        return [parse_call(element) for element in elements]
    if isinstance(item, list):
        calls = []
        for element in item:
            if isinstance(element, str):
                calls.append(parse_call(element))
            elif isinstance(element, dict) and len(element) == 1:
                ((name, args),) = element.items()
                try:
                    kwargs = json.loads(args) if isinstance(args, str) else dict(args)
                except (ValueError, TypeError, RecursionError) as exc:
                    raise CallParseError(f"arguments of {name!r} are not an object") from exc
                if not isinstance(kwargs, dict):
                    raise CallParseError(f"arguments of {name!r} are not an object")
                calls.append(Call(str(name), (), kwargs))
            else:
                raise CallParseError(f"not a call: {element!r}")
        return calls
    raise CallParseError(f"not a call list: {item!r}")


def decode_steps(result: Any, where: str = "result") -> list[tuple[int, list[Call]]]:
    """Each decodable model step of one entry as (turn index, its calls), in order. Raises
    ReplayInputError when ``result`` is not a list of turns, each a list of steps."""
    if not isinstance(result, list) or not all(isinstance(turn, list) for turn in result):
        shown = repr(result)[:80]
        raise ReplayInputError(f"{where}: 'result' must be a list of turns (lists), not {shown}")
    out: list[tuple[int, list[Call]]] = []
    for turn, steps in enumerate(result):
        for item in steps:
            try:
                calls = decode_step(item)
            except (CallParseError, ValueError, TypeError):
                continue  # chatter or an undecodable step: not a call the environment ran
            if calls:
                out.append((turn, calls))
    return out


def decode_entry(result: Any) -> list[tuple[int, Call]]:
    """All turns of one task, flattened in emission order, each call with its turn index."""
    return [(turn, c) for turn, calls in decode_steps(result) for c in calls]


@dataclass
class Entry:
    """One line of a result file: the task id, its turns, its decoded steps."""

    id: str
    n_turns: int
    steps: list[tuple[int, list[Call]]]
    where: str
    inference_error: str | None = None  # BFCL's generator failed: the text it recorded


def iter_entries(
    path: str | os.PathLike[str],
    *,
    skip_invalid: bool = False,
    skipped: list[str] | None = None,
    max_element_bytes: int = DEFAULT_MAX_ELEMENT_BYTES,
) -> Iterator[Entry]:
    """The entries of one result file, one line at a time. A malformed line, or one longer
    than ``max_element_bytes``, raises ReplayInputError (``file:line: why``) or, with
    ``skip_invalid``, is appended to ``skipped`` and passed over; a file whose entries decode
    to no call at all raises. Memory running out is a ReplayMemoryError, never skipped."""
    name = os.fspath(path)
    entries = calls = failed = 0
    # The replay's JSON Lines reader, so a BFCL line has the bound, the linear scan and the
    # memory errors an openai or tau2 line has; BFCL names its JSON Lines files ``.json``.
    for item in iter_values(name, max_element_bytes=max_element_bytes, json_lines=True):
        try:
            if item.error is not None:
                hint = json_lines_hint(name) if item.top == 0 else ""
                raise ReplayInputError(f"{item.where}: {item.error}{hint}")
            entry = _entry(item.value, item.where)
        except ReplayInputError as exc:
            if not skip_invalid:
                raise
            if skipped is not None:
                skipped.append(str(exc))
            continue
        entries += 1
        failed += entry.inference_error is not None
        calls += sum(len(c) for _, c in entry.steps)
        yield entry
    if entries > failed and not calls:
        raise ReplayInputError(
            f"{name}: none of its {entries - failed} entries decodes to a tool call: not a BFCL "
            "multi-turn result file this reader understands (a single-turn category, or a "
            "model handler's output in another shape)"
        )
    if not entries:
        raise ReplayInputError(f"{name}: no BFCL result entry in the file")


def _entry(obj: Any, where: str) -> Entry:
    if not isinstance(obj, dict) or not isinstance(obj.get("id"), str) or "result" not in obj:
        raise ReplayInputError(
            f"{where}: a BFCL result line is an object with 'id' and 'result'"
            f"{format_hint(obj, 'bfcl')}"
        )
    result = obj["result"]
    if isinstance(result, str):  # BFCL's generator: "Error during inference: ..."
        return Entry(obj["id"], 0, [], where, inference_error=result)
    n_turns = len(result) if isinstance(result, list) else 0
    return Entry(obj["id"], n_turns, decode_steps(result, where), where)


def read_result_file(path: Path | str) -> dict[str, list[tuple[int, Call]]]:
    """Task id -> its calls (turn index, call) in emission order; strict (see iter_entries).
    An inference-error entry has no call (see ``iter_entries`` for the flag)."""
    return {e.id: [(turn, c) for turn, calls in e.steps for c in calls] for e in iter_entries(path)}


def model_name(path: Path | str) -> str:
    """BFCL lays results out as ``<model>/multi_turn/<file>`` (or ``<model>/<file>``)."""
    parent = Path(path).parent
    return parent.parent.name if parent.name == "multi_turn" else parent.name


def category_of(task_id: str) -> str:
    """``multi_turn_miss_param_12`` -> ``miss_param``."""
    return task_id.removeprefix("multi_turn_").rsplit("_", 1)[0]
