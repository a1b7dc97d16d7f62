"""The concurrency limit shared by tasks on the background loop and worker threads (run.slots)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time

from pytest_agent_eval.run.slots import Slots


def _hold_in_thread(slots: Slots, seconds: float, log: list[str], name: str) -> threading.Thread:
    async def hold() -> None:
        async with slots:
            log.append(f"{name} in")
            time.sleep(seconds)
            log.append(f"{name} out")

    def run() -> None:
        # stepped outside any loop, as a run in a worker thread is: it never yields
        with contextlib.suppress(StopIteration):
            hold().send(None)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_a_thread_waits_for_a_slot_a_task_holds() -> None:
    slots, log = Slots(1), []

    async def main() -> threading.Thread:
        async with slots:
            thread = _hold_in_thread(slots, 0, log, "thread")
            await asyncio.sleep(0.05)
            log.append("task out")
        return thread

    asyncio.run(main()).join(5)
    assert log == ["task out", "thread in", "thread out"]


def test_a_task_waits_for_a_slot_a_thread_holds_without_blocking_its_loop() -> None:
    slots, log = Slots(1), []
    thread = _hold_in_thread(slots, 0.1, log, "thread")
    while not log:
        time.sleep(0.001)

    async def main() -> None:
        async def task() -> None:
            async with slots:
                log.append("task in")

        waiting = asyncio.ensure_future(task())
        await asyncio.sleep(0.01)
        log.append("loop turns")
        await waiting

    asyncio.run(main())
    thread.join(5)
    assert log == ["thread in", "loop turns", "thread out", "task in"]


def test_a_cancelled_waiter_passes_its_place_and_its_slot_on() -> None:
    slots = Slots(1)

    async def main() -> list[str]:
        log: list[str] = []

        async def task(name: str) -> None:
            async with slots:
                log.append(name)
                await asyncio.sleep(0.01)

        first = asyncio.ensure_future(task("first"))
        await asyncio.sleep(0)
        second = asyncio.ensure_future(task("second"))
        third = asyncio.ensure_future(task("third"))
        await asyncio.sleep(0)
        second.cancel()  # cancelled while waiting
        await asyncio.gather(first, third, return_exceptions=True)
        # granted a slot, then cancelled before it woke: the slot goes on, not lost
        async with slots:
            fourth = asyncio.ensure_future(task("fourth"))
            fifth = asyncio.ensure_future(task("fifth"))
            await asyncio.sleep(0)
        fourth.cancel()
        await asyncio.gather(fourth, fifth, return_exceptions=True)
        async with slots:
            log.append("free again")
        return log

    assert asyncio.run(main()) == ["first", "third", "fifth", "free again"]
