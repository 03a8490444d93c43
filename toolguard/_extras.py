"""The optional parts of the distribution, and the one message saying how to install each.

A plain ``pip install toolguard-otel`` gives the guard alone (its spans are no-ops until an
SDK is configured). ``[export]`` adds the SDK and the span file behind ``setup_file_export``;
``[report]`` adds the report and replay stack behind the ``toolguard`` command (export
included: replay writes spans).
"""

from __future__ import annotations

# The modules each extra brings: only a missing one of these means "install the extra". Any
# other missing module is a bug, or a dependency of the extra that pip should have installed,
# and surfaces as itself.
_PROVIDES = {
    "export": ("opentelemetry.sdk", "opentelemetry.exporter.otlp.json"),
    "report": ("opentelemetry.sdk", "opentelemetry.exporter.otlp.json", "numpy", "orjson"),
}


def install_hint(extra: str) -> str:
    """The commands that install ``extra``, from an index and from a checkout."""
    return (
        f"pip install 'toolguard-otel[{extra}]' "
        f"(from a checkout of toolguard: pip install -e '.[{extra}]')"
    )


def is_missing(exc: ImportError, extra: str) -> bool:
    """Whether ``exc`` says that a module ``extra`` installs is not installed.

    Only a module not found: "cannot import name" from an installed SDK is a version mismatch,
    not a missing extra, and keeps its own message."""
    name = exc.name or ""
    return isinstance(exc, ModuleNotFoundError) and any(
        name == module or name.startswith(module + ".") for module in _PROVIDES[extra]
    )


def missing_extra(what: str, extra: str, exc: ImportError) -> ImportError:
    """The ImportError to raise from ``exc`` when ``what`` cannot run without ``extra``."""
    return ImportError(
        f"{what} needs toolguard-otel's {extra} extra ({exc.name} is not installed): "
        f"{install_hint(extra)}",
        name=exc.name,
    )
