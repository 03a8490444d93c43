"""A tool that takes the run's Context (its annotation must be the class itself, which
LlamaIndex reads: this module does not postpone annotations)."""

from llama_index.core.workflow import Context


async def remember(ctx: Context, note: str) -> dict[str, str]:
    """Store a note in the run's state."""
    await ctx.store.set("note", note)
    return {"stored": note}
