"""Running csem's async core from sync code (one code path, async at the core with a sync wrapper)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, AsyncIterator, Awaitable, Callable, TypeVar

T = TypeVar("T")


def run_sync(coro: Awaitable[T]) -> T:
    """Run a coroutine to completion from sync code (also when an event loop is already running,
    e.g. in Jupyter: it then runs in a helper thread)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)  # type: ignore[arg-type]
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)  # type: ignore[arg-type]
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    t = threading.Thread(target=target)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


async def _closing(aclose: Callable[[], Awaitable[Any]]) -> AsyncIterator[None]:
    try:
        yield
    finally:
        await aclose()


async def close_with_loop(aclose: Callable[[], Awaitable[Any]]) -> Any:
    """Have ``aclose()`` awaited in the running event loop when that loop shuts down.

    For resources bound to one event loop (an ``httpx.AsyncClient`` and so the OpenAI SDK's async
    clients): closed in their own loop, they never reach a later loop's garbage collection, where
    closing them fails with "Event loop is closed". It uses the loop's async-generator hooks:
    ``asyncio.run`` (and so [`run_sync`][csem.llm.sync.run_sync]) calls ``loop.shutdown_asyncgens()`` before closing the
    loop, which finalises the generator returned here and so awaits ``aclose()``.

    Returns:
        The async generator that holds the pending close: keep a reference to it as long as the
        resource is in use (dropping it closes the resource soon after, in its loop).
    """
    gen = _closing(aclose)
    await gen.__anext__()  # started inside the loop: the loop's firstiter hook now tracks it
    return gen
