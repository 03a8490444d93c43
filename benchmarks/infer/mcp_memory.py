"""``python -m benchmarks.infer.mcp_memory``: `toolguard infer` on a recorded MCP session
against ``@modelcontextprotocol/server-memory``, compared rule by rule with the hand-written
``adapters/mcp/examples/memory.toml``, and both contracts on held-out sessions with mistakes.

A scripted agent (seeded; no model) keeps a knowledge graph through the official Node server
behind ``toolguard mcp-proxy --record FILE``: each session is one trajectory (its id in the
request ``_meta``), one proxy process, and the graph persists across sessions in one memory
file, as a memory server's does. A session may open with ``read_graph`` or ``search_nodes``,
creates entities, relates and annotates the entities it has seen in a result this session,
opens some, deletes observations, relations and entities it saw, and now and then reads the
graph again. Some sessions make the mistake of annotating an entity they just deleted (the
server rejects it): the shadow traffic is an agent's, not a perfect one.

``toolguard infer --format mcp`` reads the recording. The comparison lists every rule of
either contract (``refs``, ``produces``, ``invalidates``) by tool and path, the kinds paired by
the places they share (kinds may be named differently).

Held out: sessions of another seed, each with one injected mistake (an entity name never
created, or one used after deleting it), recorded three times from the same copy of the
graph, under no contract, the hand-written one and the inferred one (``--record --contract``:
log mode, the checks' verdicts on the spans). Per contract: mistakes flagged, the server's
rejections among them, and flags on the correct calls.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import random
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import toolguard as tg
from toolguard import _contract as keys
from toolguard.__main__ import main as toolguard_main

PACKAGE = "@modelcontextprotocol/server-memory"
HAND = Path(__file__).parents[2] / "adapters" / "mcp" / "examples" / "memory.toml"
INSTALL = f"npm install --prefix DIR {PACKAGE}"
WAIT = 60.0  # a bound against a hung server only, never a measurement

# fmt: off
FIRST = ("Ana", "Bruno", "Chiara", "Dmitri", "Elena", "Farid", "Greta", "Hiro", "Ines", "Jonas",
         "Kemal", "Lucia", "Mateo", "Nadia", "Oskar", "Priya")
LAST = ("Alves", "Berg", "Costa", "Dahl", "Evans", "Fischer", "Garcia", "Holm", "Ivanov",
        "Jensen", "Kowalski", "Lund")
CODE = ("Falcon", "Heron", "Lynx", "Orca", "Puma", "Raven", "Tapir", "Vole", "Wren", "Yak",
        "Bison", "Crane", "Dingo", "Egret", "Gecko", "Ibis")
ORG = ("Acme Logistics", "Borealis Labs", "Cobalt Bank", "Delta Foods", "Ember Health",
       "Fjord Energy", "Granite Media", "Harbor Freight Co")
# fmt: on
TOPICS = ("tea", "chess", "cycling", "jazz", "sailing", "pottery", "go", "hiking")
RELATION = {
    ("person", "project"): "works_on",
    ("person", "person"): "knows",
    ("person", "organization"): "member_of",
    ("project", "organization"): "owned_by",
    ("organization", "organization"): "partners_with",
    ("project", "project"): "depends_on",
}


def find_server(prefix: Path, install: bool) -> list[str] | None:
    """The server's command line from ``prefix/node_modules`` (installed there with npm
    when ``install`` and it is missing); None without node (or npm, to install)."""
    node = shutil.which("node")
    package = prefix / "node_modules" / PACKAGE
    if node is None:
        return None
    if not (package / "package.json").is_file():
        npm = shutil.which("npm")
        if not install or npm is None:
            return None
        prefix.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                npm,
                "install",
                "--prefix",
                str(prefix),
                "--no-audit",
                "--no-fund",
                "--prefer-offline",
                "--ignore-scripts",
                "--loglevel=error",
                PACKAGE,
            ],
            check=True,
            env={**os.environ, "npm_config_update_notifier": "false"},
        )
    entry = json.loads((package / "package.json").read_text())["bin"]
    if not isinstance(entry, str):
        entry = next(iter(entry.values()))
    return [node, str(package / entry)]


class Proxy:
    """``toolguard mcp-proxy --record FILE [--contract C] -- server`` over stdio, JSON-RPC
    line by line (answers awaited on a queue fed by a reader thread)."""

    def __init__(self, server: list[str], record: Path, memory: Path, contract: Path | None):
        options = ["--contract", str(contract)] if contract is not None else []
        self.log = record.with_suffix(".log").open("ab")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "toolguard",
                "mcp-proxy",
                "--record",
                str(record),
                *options,
                "--",
                *server,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            env={**os.environ, "MEMORY_FILE_PATH": str(memory.resolve())},
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        self.next_id = 0
        self.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "scripted-agent", "version": "1"},
            },
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        self.request("tools/list", {})

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(b"")

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        while True:
            line = self.lines.get(timeout=WAIT)
            if not line:
                raise RuntimeError(f"the proxy closed its output (see {self.log.name})")
            answer = json.loads(line)
            if isinstance(answer, dict) and answer.get("id") == self.next_id:
                return answer

    def call(self, trajectory: str, tool: str, arguments: dict[str, Any]) -> tuple[bool, Any]:
        """(accepted, structuredContent) of one ``tools/call``."""
        params = {
            "name": tool,
            "arguments": arguments,
            "_meta": {keys.META_TRAJECTORY_ID: trajectory},
        }
        answer = self.request("tools/call", params)
        result = answer.get("result") or {}
        return not result.get("isError") and "error" not in answer, result.get("structuredContent")

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=WAIT)
        self.log.close()


@dataclass
class World:
    """Names handed out across sessions (each created once), the rng, the sessions' labels."""

    rng: random.Random
    used: set[str] = field(default_factory=set)
    # (trajectory, call index) -> the injected mistake ("invented", "stale"), held out only
    mistakes: dict[tuple[str, int], str] = field(default_factory=dict)

    def new_entity(self) -> dict[str, Any]:
        for _ in range(1000):
            kind = self.rng.choice(("person", "person", "project", "organization"))
            if kind == "person":
                name = f"{self.rng.choice(FIRST)} {self.rng.choice(LAST)}"
                notes = [f"likes {self.rng.choice(TOPICS)}"]
            elif kind == "project":
                name = f"Project {self.rng.choice(CODE)}"
                notes = [f"started in {self.rng.randint(2019, 2026)}"]
            else:
                name = self.rng.choice(ORG)
                notes = [f"based in {self.rng.choice(('Lisbon', 'Oslo', 'Kyoto', 'Lima'))}"]
            if name not in self.used:
                self.used.add(name)
                return {"name": name, "entityType": kind, "observations": notes}
        raise RuntimeError("the name pool is used up")

    def unused_name(self) -> str:
        while True:
            name = f"{self.rng.choice(FIRST)} {self.rng.choice(LAST)}"
            if name not in self.used:
                return name


class Agent:
    """One session's scripted agent: it names only entities a result showed it this session
    (unless told to make a mistake)."""

    def __init__(self, proxy: Proxy, world: World, trajectory: str, mistake: str | None):
        self.proxy, self.world, self.id = proxy, world, trajectory
        self.rng = world.rng
        self.known: dict[str, dict[str, Any]] = {}  # name -> entity as last seen
        self.relations: list[dict[str, str]] = []
        self.deleted: list[str] = []
        self.calls = 0
        self.mistake = mistake
        self.mistake_at = self.rng.randint(2, 6)
        self.mistake_made = mistake is None
        self._label: str | None = None  # the mistake the last name() made, if any

    def call(self, tool: str, arguments: dict[str, Any], label: str | None = None) -> bool:
        if label is not None:
            self.world.mistakes[(self.id, self.calls)] = label
            self.mistake_made = True
        self.calls += 1
        accepted, content = self.proxy.call(self.id, tool, arguments)
        if accepted and isinstance(content, dict):
            for entity in content.get("entities") or []:
                if isinstance(entity, dict) and isinstance(entity.get("name"), str):
                    self.known[entity["name"]] = entity
            for relation in content.get("relations") or []:
                if isinstance(relation, dict) and relation not in self.relations:
                    self.relations.append(relation)
        return accepted

    def pick(self, n: int = 1) -> list[str]:
        names = sorted(self.known)
        return self.rng.sample(names, min(n, len(names)))

    def name(self) -> str | None:
        """A known name, or at the mistake's turn, an invented or a deleted one."""
        # The mistake counts once a call carries it (a step may give up on the name).
        if not self.mistake_made and self.calls >= self.mistake_at:
            if self.mistake == "stale" and self.deleted:
                self._label = "stale"
                return self.deleted[-1]
            if self.mistake == "invented":
                self._label = "invented"
                return self.world.unused_name()
        self._label = None
        picked = self.pick()
        return picked[0] if picked else None

    def run(self) -> None:
        opening = self.rng.random()
        if opening < 0.5:
            self.call("read_graph", {})
        elif opening < 0.8:
            query = self.rng.choice(("person", "project", "organization", *TOPICS))
            self.call("search_nodes", {"query": query})
        new = [self.world.new_entity() for _ in range(self.rng.randint(1, 3))]
        self.call("create_entities", {"entities": new})
        for _ in range(self.rng.randint(4, 8)):
            self.step()
        if not self.mistake_made:  # the mistake's turn never came: make it now
            if self.mistake == "stale" and not self.deleted and self.known:
                (name,) = self.pick()
                self.call("delete_entities", {"entityNames": [name]})
                self.known.pop(name)
                self.deleted.append(name)
            self.mistake_at = 0
            self.observe()

    def step(self) -> None:
        roll = self.rng.random()
        if roll < 0.25:
            self.observe()
        elif roll < 0.45 and len(self.known) >= 2:
            a = self.name()
            label = self._label
            (b,) = self.pick() or [None]
            if a is None or b is None or a == b:
                return
            kinds = (self._type(a), self._type(b))
            rel = RELATION.get(kinds) or RELATION.get(kinds[::-1]) or "related_to"
            self.call(
                "create_relations",
                {"relations": [{"from": a, "to": b, "relationType": rel}]},
                label,
            )
        elif roll < 0.6:
            a = self.name()
            if a is not None:
                others = [n for n in self.pick(2) if n != a][:1]
                self.call("open_nodes", {"names": [a, *others]}, self._label)
        elif roll < 0.7:
            seen = [
                (n, o) for n in sorted(self.known) for o in self.known[n].get("observations") or []
            ]
            if seen:
                name, note = self.rng.choice(seen)
                self.call(
                    "delete_observations",
                    {"deletions": [{"entityName": name, "observations": [note]}]},
                )
                self.known[name] = {
                    **self.known[name],
                    "observations": [o for o in self.known[name]["observations"] if o != note],
                }
        elif roll < 0.75 and self.relations:
            relation = self.rng.choice(self.relations)
            self.call("delete_relations", {"relations": [relation]})
            self.relations.remove(relation)
        elif roll < 0.9:
            a = self.name()
            if a is None:
                return
            self.call("delete_entities", {"entityNames": [a]}, self._label)
            self.known.pop(a, None)
            self.deleted.append(a)
            self.relations = [r for r in self.relations if a not in (r["from"], r["to"])]
            if self.rng.random() < 0.5:
                self.call("read_graph", {})
            if self.mistake is None and self.rng.random() < 0.2:
                # The shadow traffic's own slip: a note on the entity just deleted.
                self.call(
                    "add_observations",
                    {"observations": [{"entityName": a, "contents": ["follow up"]}]},
                )
        else:
            self.call("read_graph", {})

    def observe(self) -> None:
        a = self.name()
        if a is not None:
            day = self.rng.choice(("Monday", "Tuesday", "Friday"))
            note = f"met on {day} about {self.rng.choice(TOPICS)}"
            self.call(
                "add_observations",
                {"observations": [{"entityName": a, "contents": [note]}]},
                self._label,
            )

    def _type(self, name: str) -> str:
        return str(self.known.get(name, {}).get("entityType", "person"))


def record_sessions(
    server: list[str],
    record: Path,
    memory: Path,
    sessions: list[tuple[str, str | None]],
    world: World,
    contract: Path | None = None,
) -> None:
    """Each (trajectory id, mistake) one proxy process and one scripted session."""
    for trajectory, mistake in sessions:
        proxy = Proxy(server, record, memory, contract)
        try:
            Agent(proxy, world, trajectory, mistake).run()
        finally:
            proxy.close()


# -- reading the recordings ---------------------------------------------------------------------
@dataclass(frozen=True)
class Seen:
    trajectory: str
    step: int
    tool: str
    cause: str | None
    accepted: bool


def recorded_calls(path: Path) -> list[Seen]:
    """The call spans of a recording, ordered by (trajectory, step)."""
    out = []
    for line in path.read_text().splitlines():
        for resource in json.loads(line).get("resourceSpans", []):
            for scope in resource.get("scopeSpans", []):
                for span in scope.get("spans", []):
                    a = {x["key"]: next(iter(x["value"].values())) for x in span["attributes"]}
                    if keys.STEP not in a:
                        continue
                    failed = a.get(keys.FAILED_CHECKS) or {}
                    checks = failed.get("values", []) if isinstance(failed, dict) else failed
                    # The environment's answer: an error status, or its check among the
                    # failed ones when a logged flag came first (docs/protocol.md, 2.4).
                    answers = ("state.exception", "state.error_result", "postcondition.")
                    rejected = span.get("status", {}).get("code") in (
                        2,
                        "STATUS_CODE_ERROR",
                    ) or any(
                        str(next(iter(c.values()))).startswith(answers)
                        for c in checks
                        if isinstance(c, dict)
                    )
                    out.append(
                        Seen(
                            str(a[keys.TRAJECTORY_ID]),
                            int(a[keys.STEP]),
                            str(a[keys.GEN_AI_TOOL_NAME]),
                            a.get(keys.CAUSE),
                            not rejected,
                        )
                    )
    return sorted(out, key=lambda s: (s.trajectory, s.step))


# -- the rule-by-rule comparison ----------------------------------------------------------------
Rule = tuple[str, str, str]  # (tool, what, path)


def rules_of(contract: tg.Contract) -> dict[Rule, str]:
    out: dict[Rule, str] = {}
    for name, spec in contract.tools.items():
        for what, table in (
            ("refs", spec.refs),
            ("produces", spec.produces),
            ("invalidates", spec.invalidates),
        ):
            for path, kind in table.items():
                out[(name, what, str(path))] = kind
    return out


def pair_kinds(hand: dict[Rule, str], inferred: dict[Rule, str]) -> dict[str, str]:
    """Each inferred kind -> the hand kind it shares the most rules (tool, what, path) with."""
    votes: dict[str, dict[str, int]] = {}
    for rule, kind in inferred.items():
        if rule in hand:
            votes.setdefault(kind, {}).setdefault(hand[rule], 0)
            votes[kind][hand[rule]] += 1
    return {k: min(v, key=lambda h: (-v[h], h)) for k, v in votes.items()}


def compare(hand: dict[Rule, str], inferred: dict[Rule, str]) -> list[dict[str, str]]:
    paired = pair_kinds(hand, inferred)
    rows = []
    for rule in sorted(set(hand) | set(inferred)):
        h, i = hand.get(rule), inferred.get(rule)
        if h is not None and i is not None:
            verdict = "same" if paired.get(i) == h else "other kind"
        else:
            verdict = "hand only" if h is not None else "inferred only"
        rows.append(
            {
                "tool": rule[0],
                "what": rule[1],
                "path": rule[2],
                "hand": h or "-",
                "inferred": i or "-",
                "verdict": verdict,
            }
        )
    return rows


def held_out_table(
    recordings: dict[str, Path], mistakes: dict[tuple[str, int], str]
) -> dict[str, dict[str, int]]:
    table: dict[str, dict[str, int]] = {}
    for name, path in recordings.items():
        row = table.setdefault(
            name,
            {
                "calls": 0,
                "mistakes": 0,
                "mistakes_flagged": 0,
                "rejected": 0,
                "rejected_flagged": 0,
                "correct": 0,
                "correct_flagged": 0,
            },
        )
        index: dict[str, int] = {}
        for seen in recorded_calls(path):
            i = index.get(seen.trajectory, 0)
            index[seen.trajectory] = i + 1
            flagged = seen.cause in ("schema", "dependency", "precondition", "information")
            row["calls"] += 1
            if (seen.trajectory, i) in mistakes:
                row["mistakes"] += 1
                row["mistakes_flagged"] += flagged
            else:
                row["correct"] += 1
                row["correct_flagged"] += flagged
            if not seen.accepted:
                row["rejected"] += 1
                row["rejected_flagged"] += flagged
    return table


def measure(
    server: list[str],
    out: Path,
    sessions: int = 16,
    held_out: int = 10,
    seed: int = 0,
    min_support: int = 5,
) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob("*.jsonl*"):
        stale.unlink()
    world = World(random.Random(seed))
    memory = out / "memory.jsonl"
    shadow = out / "shadow.jsonl"
    record_sessions(server, shadow, memory, [(f"s{i:02d}", None) for i in range(sessions)], world)
    inferred = out / "inferred.toml"
    code = toolguard_main(
        [
            "infer",
            str(shadow),
            "--format",
            "mcp",
            "--out",
            str(inferred),
            "--min-support",
            str(min_support),
        ]
    )
    if code != 0:
        raise RuntimeError(f"toolguard infer exited with {code}")
    rows = compare(rules_of(tg.load_contract(HAND)), rules_of(tg.load_contract(inferred)))
    # Held out: the same sessions from the same copy of the graph under each contract.
    start = out / "memory-start.jsonl"
    shutil.copyfile(memory, start)
    plan = [(f"h{i:02d}", ("invented", "stale")[i % 2]) for i in range(held_out)]
    recordings: dict[str, Path] = {}
    mistakes: dict[tuple[str, int], str] = {}
    for name, contract in (("schema-only", None), ("hand-written", HAND), ("inferred", inferred)):
        shutil.copyfile(start, memory)
        held = World(random.Random(seed + 1), used=set(world.used))
        path = out / f"held-out-{name}.jsonl"
        record_sessions(server, path, memory, plan, held, contract)
        recordings[name] = path
        if mistakes and mistakes != held.mistakes:
            raise RuntimeError("the held-out sessions differed between contracts")
        mistakes = held.mistakes
    return {
        "sessions": sessions,
        "calls": len(recorded_calls(shadow)),
        "held_out_sessions": held_out,
        "rows": rows,
        "held_out": held_out_table(recordings, mistakes),
        "inferred_text": inferred.read_text(),
    }


def markdown(summary: dict[str, Any]) -> str:
    lines = [
        f"{summary['sessions']} recorded sessions ({summary['calls']} calls) against "
        f"{PACKAGE}; inferred contract vs adapters/mcp/examples/memory.toml:",
        "",
        "| tool | rule | path | hand-written kind | inferred kind | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for r in summary["rows"]:
        lines.append(
            f"| {r['tool']} | {r['what']} | `{r['path']}` | {r['hand']} | "
            f"{r['inferred']} | {r['verdict']} |"
        )
    counts: dict[str, int] = {}
    for r in summary["rows"]:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    hand_rules = sum(1 for r in summary["rows"] if r["hand"] != "-")
    lines += [
        "",
        f"Of the hand-written contract's {hand_rules} rules: "
        + ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
        + ".",
        "",
        f"Held out: {summary['held_out_sessions']} sessions with one injected mistake each "
        "(invented or deleted entity name), recorded under each contract from the same graph:",
        "",
        "| contract | calls | mistakes flagged | server rejections flagged "
        "| flags on correct calls |",
        "|---|---|---|---|---|",
    ]
    for name, row in summary["held_out"].items():
        lines.append(
            f"| {name} | {row['calls']} | {row['mistakes_flagged']}/{row['mistakes']} | "
            f"{row['rejected_flagged']}/{row['rejected']} | "
            f"{row['correct_flagged']}/{row['correct']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.infer.mcp_memory", description=__doc__)
    p.add_argument("--out", default="out/infer/mcp")
    p.add_argument("--npm-prefix", default="out/infer/npm", help="where the server is installed")
    p.add_argument("--sessions", type=int, default=16)
    p.add_argument("--held-out", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--min-support", type=int, default=5)
    args = p.parse_args(argv)
    server = find_server(Path(args.npm_prefix), install=True)
    if server is None:
        print(f"node and npm are needed: apt-get install nodejs npm; then {INSTALL}")
        return 1
    summary = measure(
        server, Path(args.out), args.sessions, args.held_out, args.seed, args.min_support
    )
    out = Path(args.out)
    (out / "mcp.json").write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    text = markdown(summary)
    (out / "mcp.md").write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
