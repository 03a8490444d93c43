"""``toolguard replay``: prefix-executability metrics for agent runs already recorded.

Reads recorded runs, replays every tool call in the order the agent emitted it through a
guard (two phases: ``guard.check`` then ``finish`` with the recorded answer), and writes the
span file ``toolguard report`` reads::

    toolguard replay openai runs.jsonl --out spans.jsonl
    toolguard report spans.jsonl

From Python: ``replay_files(format, files, out, contract=..., labels=...)``, or
``read_runs`` + ``Replayer`` for runs in memory. The replay uses the guard's public side only
and never imports the report.

Validity with no contract (cohort ``replay=environment``)
   A call is invalid when the environment said it failed, read from the recorded answer:

   - **openai**: the tool message's boolean ``error`` / ``is_error`` when it has one; else
     content that is a JSON object with a non-empty ``"error"``; else text starting with
     ``Error:`` (tau-bench's tools and its environment's exception handler) or ``Error during
     execution`` (BFCL's executor).
   - **tau2**: the tool message's ``error`` flag, which tau2 sets when the tool raised;
     where a file's messages have no such flag (older tau2 versions, converted files), the
     same reading as openai's: content that is a JSON object with a non-empty ``"error"``,
     else text starting with ``Error:`` (what tau2 writes for a raised tool). A flag that is
     present wins over the text. The simulated user's own tool calls (``requestor:
     "user"``) are not the agent's: skipped.
   - **bfcl**: result files record no answers. With bfcl-eval installed, each call runs on
     BFCL's own backends for that task (as ``benchmarks/bfcl`` does): an exception, an
     unknown function or an error answer (``{"error": ...}``, ``["Error: ..."]``, a failed
     login's false status) makes it invalid. Without bfcl-eval (or for a task id bfcl-eval
     does not know) nothing can fail a call but a contract's checks: the CLI says so. Every
     function of the task's classes is offered at every turn (miss_func's held-back ones
     too, as BFCL's executor runs them). Each task starts from BFCL's backend modules as
     first imported (their mutable defaults restored: ``bfcl_state.py``), so a file's
     verdicts do not depend on what was replayed before. An entry whose inference failed
     (``"result": "Error during inference: ..."``) is a trajectory of no call, not
     successful, labelled ``inference_error=true``: N and final success are BFCL's. A
     result file of another BFCL version than the installed data (its ``BFCL_vN`` name, a
     task id or turn count the data lacks) is refused, the version named; every run is
     labelled ``bfcl_eval`` with the version that answered it.
   - **toolsandbox**: a ToolSandbox run directory or ``conversation.json``: a tool answer
     whose last line is a Python exception (``NoDataError: ...``) or an ``Error:`` text
     (``toolsandbox.py``).

   In every format, arguments that are not a JSON object fail the schema check (the call
   could not have run), and a call with no recorded answer counts in T, closed as cancelled.
   Tool answers are matched to their calls within the turn, by id and then by position
   (``messages.py``): logs that reuse call ids do not hand one call's answer to another.

The three readings (label ``replay``): ``environment`` (above), ``with_contract`` and
``dry_run``, below. A report grouped ``--by replay`` shows which each figure used.

What-if of a contract (``--contract FILE``, cohort ``replay=with_contract``)
   Each run is replayed a second time with its tools declared from the contract file
   (``tg.load_contract``; tools the file does not name get the run's own parameter schema
   where the format records one — the OpenAI run's ``tools``, tau2's ``tool_defs``, BFCL's
   function docs — else ``{"type": "object"}``) in the file's mode. Where the run records its
   offered tools, a call of any other tool fails ``schema``. A call the guard blocks does
   not run and its recorded answer is ignored (for BFCL the backend does not execute it);
   every other call is closed with its recorded answer, so ``produces`` binds ids from
   earlier results, and the environment's own failure still counts. User and system
   messages are observed for the information check, in order. Predicates get ``state``, a
   :class:`ReplayState` (the run's id and the earlier error-free calls as (tool, arguments,
   result)); on BFCL's live backends the guard runs each call on them, so predicates also get
   the backend object as ``instance`` (``python -m benchmarks.bfcl contract`` writes the
   harness's hand rules as such a file). A value the user gave (a number, a quoted text, an
   id-like token) is a bound variable under every kind the contract refers to. The BFCL and
   tau2 replays accept ``null`` for an optional
   argument with a default (their backends take it) unless the file says
   ``null_as_default = false``. The cohorts share trajectory labels ``run`` and ``task``::

       toolguard compare spans.jsonl --by replay --a environment --b with_contract --task-label run

Dry run (``--dry-run``, bfcl only, cohort ``replay=dry_run``)
   Every call is first tried in an undo log on BFCL's live backends (``tg.UndoLogFork``) and
   rejected when it fails there; the tools have the run's own schemas (BFCL's function
   docs) and no hand-written rule, whatever ``--contract`` says.

Outcomes (Y)
   - **openai**: the run's ``success`` or ``outcome`` (boolean, or success/pass/fail...),
     else ``reward`` (success when it equals 1 within 1e-6, tau-bench's pass);
   - **tau2**: ``reward_info.reward``, success when it equals 1 within 1e-6 (tau2's own
     ``is_successful``); no ``reward_info``: unknown;
   - **bfcl**: BFCL's own verdicts with ``--bfcl-scores DIR`` (its score files:
     ``bfcl_scores.py``; ``python -m benchmarks.bfcl score`` writes them with BFCL's
     checker); else unknown; an inference error is a failure.
   - **toolsandbox**: ``result_summary.json``'s similarity, success when it is 1.

Trajectories are ``<cohort>/<id prefix>/<run id>`` (the prefix: ``--id-prefix``, by default
``k=v,...`` from ``--labels``; none without labels), so runs of one model recorded with
two methods stay two cohorts; ``--append`` refuses a trajectory id already in the span
file. Labels ``replay``, ``run``, ``task``, the format's own (``model``, ``domain``,
``category``, ``trial``, ``scenario``, ``bfcl_eval``, ``inference_error``) and ``--labels``.
Memory holds
one run at a time; a malformed run stops the replay with ``file:line (run N): why``, or with
``skip_invalid`` is counted and skipped.
"""

from .api import replay_files
from .engine import COHORTS, DRY_RUN, ENVIRONMENT, WITH_CONTRACT, Replayer, ReplayState
from .model import (
    Answer,
    RecordedCall,
    RecordedRun,
    ReplayInputError,
    ReplayMemoryError,
    Said,
    Turn,
)
from .sources import FORMATS, INFERENCE_ERROR, ReplayStats, read_runs

__all__ = [
    "COHORTS",
    "DRY_RUN",
    "ENVIRONMENT",
    "FORMATS",
    "INFERENCE_ERROR",
    "WITH_CONTRACT",
    "Answer",
    "RecordedCall",
    "RecordedRun",
    "ReplayInputError",
    "ReplayMemoryError",
    "ReplayState",
    "ReplayStats",
    "Replayer",
    "Said",
    "Turn",
    "read_runs",
    "replay_files",
]
