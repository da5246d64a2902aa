"""One engine, many callers: a thread that steps the engine while any request is waiting.

    server = GenerationServer(engine)
    generation = server.generate(prompt_ids, max_new_tokens=128, stop_tokens=[end_id])
    server.set_params(new_variables, version=3)   # in flight: running sequences continue
    server.close()

Agents (one thread per episode: the benchmark harness, RL actors) call `generate` or `submit`
concurrently; their requests share every decode step of the engine's continuous batch, so N
concurrent episodes cost about one batched decode per token instead of N. A request that the
engine rejects (prompt too long, bad token id) raises in the caller's thread; an error inside
a step fails every waiting future with that error, and later calls raise it too.
"""
from __future__ import annotations

import threading
from concurrent.futures import Future

from c2jax.sampling.engine import Engine, Generation


class GenerationServer:
    """Thread-safe front of an `Engine`; see the module docstring."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self._cond = threading.Condition()
        self._futures: dict[int, Future] = {}
        self._closed = False
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._loop, name="generation-server", daemon=True)
        self._thread.start()

    def submit(self, prompt, max_new_tokens: int, **settings) -> Future:
        """Queues a request (keywords of `Engine.submit`); the future resolves to its
        `Generation`."""
        with self._cond:
            self._raise_if_unusable()
            request_id = self.engine.submit(prompt, max_new_tokens, **settings)
            future: Future = Future()
            self._futures[request_id] = future
            self._cond.notify()
        return future

    def generate(self, prompt, max_new_tokens: int, *, timeout: float | None = None,
                 **settings) -> Generation:
        """`submit(...).result(timeout)`: blocks until the request finished."""
        return self.submit(prompt, max_new_tokens, **settings).result(timeout)

    def set_params(self, variables, version: int) -> None:
        """New weights from the next decode step on (see `Engine.set_params`)."""
        self.engine.set_params(variables, version)

    @property
    def version(self) -> int:
        return self.engine.version

    def close(self) -> None:
        """Stops the stepping thread; requests still waiting fail with RuntimeError."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._thread.join()
        self._fail_all(RuntimeError("the generation server was closed"))

    def __enter__(self) -> GenerationServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _raise_if_unusable(self) -> None:
        if self._error is not None:
            raise RuntimeError(f"the generation server failed: {self._error!r}") from self._error
        if self._closed:
            raise RuntimeError("the generation server is closed")

    def _fail_all(self, error: BaseException) -> None:
        with self._cond:
            futures, self._futures = list(self._futures.values()), {}
        for future in futures:
            if not future.done():
                future.set_exception(error)

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._closed and not self.engine.busy:
                    self._cond.wait()
                if self._closed:
                    return
            try:
                # Outside the lock: submitters only append to the engine's queue meanwhile.
                finished = self.engine.step()
            except BaseException as e:  # noqa: BLE001 - handed to every waiting caller
                self._error = e
                self._fail_all(e)
                return
            with self._cond:
                done = [(self._futures.pop(g.request_id), g) for g in finished]
            for future, generation in done:
                future.set_result(generation)
