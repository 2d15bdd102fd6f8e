"""Sentences of concurrent requests decoded together: a queue of work items, one sentence
each, that one worker thread gathers into batches, translates with one
`Translator.translate` call per batch, and routes back to the requests that asked.

- **Batches.** The worker waits up to ``gather_s`` after the oldest waiting sentence arrived
  (or until ``batch_sentences`` are waiting), then takes sentences of equal `Options`, up to
  ``batch_sentences`` and ``batch_pieces`` source pieces, so that no batch holds the model for
  long, however much one request asked for.
- **Fair turns.** A batch is led by the sentence whose request has had the least decoding time
  so far (then the oldest), and filled the same way: a new one-sentence request goes before
  the rest of a long one, which is decoded between the others' batches.
- **Failures stay with their request.** A batch that fails is translated again one sentence at
  a time, so only the sentence that fails fails its request.
- **Deadlines, vanished clients and stopping.** A request not answered within its time gets
  `QueueError` ("timeout"), and one whose client has gone ("gone"); their sentences are
  dropped; `close` answers every waiting request with
  `QueueError` ("stopping") and, for the PyTorch backend, interrupts the batch being decoded
  at its next step (a forward pre-hook on the model's layers), as it does a batch whose
  requests have all given up. CTranslate2 decodes a batch to its end.

Only the standard library and the `Translator`'s public API are used: the decoding is the one
of `translate`."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torch import nn

from translator.errors import TranslatorError
from translator.translate import Translation, Translator

GATHER_S = 0.005  # how long the first sentence of a batch waits for others to join it
BATCH_PIECES = 1024  # source pieces decoded in one batch: bounds how long a batch takes
GONE_CHECK_S = 0.25  # how often a waiting request checks that its client is still there


@dataclass(frozen=True)
class Options:
    """What a sentence asks of the search, as keywords of `Translator.translate` (None: the
    translator's own setting). Only sentences with equal options share a batch; a new
    per-request option is one field here."""

    beam_size: int | None = None
    n_best: int = 1
    target_language: str | None = None
    need_attention: bool = True
    alternatives: int | None = None  # each step's best pieces, recorded (search.alternatives)
    prefix: str | None = None  # the text each translation starts with

    def arguments(self) -> dict[str, Any]:
        """The keywords for `Translator.translate`, without those left to the translator."""
        values = {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}
        return {name: value for name, value in values.items() if value is not None}


class QueueError(TranslatorError):
    """Why a request got no translation: ``reason`` is "stopping" (the queue was closed),
    "timeout" (its time ran out first) or "gone" (its client went away); the message says it
    in one sentence."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class Interrupted(Exception):
    """Raised inside the model by the queue's hook: the batch being decoded is abandoned."""


class Ticket:
    """One request in the queue: its translations as they come, the decoding time it has had,
    and when it gives up."""

    def __init__(self, count: int, seconds: float) -> None:
        self.arrival = time.monotonic()
        self.deadline = self.arrival + seconds
        self.results: list[Translation | None] = [None] * count
        self.remaining = count
        self.served_s = 0.0  # decoding time of its batches, shared by source pieces
        self.error: BaseException | None = None
        self.done = threading.Event()

    def deliver(self, index: int, outcome: Translation | BaseException) -> None:
        """The outcome of sentence ``index``: a translation, or the error that ends the
        request. Called under the queue's lock."""
        if self.done.is_set():
            return
        if isinstance(outcome, BaseException):
            self.fail(outcome)
            return
        self.results[index] = outcome
        self.remaining -= 1
        if self.remaining == 0:
            self.done.set()

    def fail(self, error: BaseException) -> None:
        if not self.done.is_set():
            self.error = error
            self.done.set()

    def outcome(self) -> list[Translation]:
        if self.error is not None:
            raise self.error
        return self.results  # type: ignore[return-value]  # all filled once done


@dataclass(eq=False)
class WorkItem:
    """One sentence of a request, waiting for its batch."""

    ticket: Ticket
    index: int  # its place in the request
    text: str
    options: Options
    pieces: int  # source pieces, what a batch's size is counted in

    def rank(self) -> tuple[float, float, int]:
        """Least decoding time first, then the oldest request, then the request's order."""
        return self.ticket.served_s, self.ticket.arrival, self.index


class WorkQueue:
    """The queue and its worker thread, for one ``translator`` (see the module's docstring).
    ``start=False`` leaves the worker to `start` (tests fill the queue first)."""

    def __init__(self, translator: Translator, batch_sentences: int = 32,
                 batch_pieces: int = BATCH_PIECES, gather_s: float = GATHER_S,
                 start: bool = True) -> None:
        self.translator = translator
        self.batch_sentences = batch_sentences
        self.batch_pieces = batch_pieces
        self.gather_s = gather_s
        self.batches = 0  # batches decoded, and the sentences in them: for /health and tests
        self.sentences = 0
        self._pending: list[WorkItem] = []
        self._running: list[WorkItem] = []
        self._closed = False
        self._condition = threading.Condition()
        self._interrupt = threading.Event()
        # a daemon, so that a queue nobody closes cannot keep the process alive; `close`
        # joins it
        self._worker = threading.Thread(target=self._work, name="translate-queue", daemon=True)
        self._hooks = self._install_interrupt_hooks()
        if start:
            self.start()

    def start(self) -> None:
        self._worker.start()

    # -- the requests' side

    def translate(self, texts: list[str], options: list[Options], pieces: list[int],
                  seconds: float, gone: Callable[[], bool] | None = None
                  ) -> list[Translation]:
        """The translations of ``texts`` (each with its options and source-piece count), in
        order, decoded in batches with other requests' sentences; `QueueError` when the queue
        is closed, ``seconds`` pass, or ``gone()`` says that nobody waits for them any more
        (checked every `GONE_CHECK_S`), before they are all done. The translator's errors
        (a target language it does not write, ...) are raised as they are."""
        ticket = Ticket(len(texts), seconds)
        items = [WorkItem(ticket, i, text, option, count)
                 for i, (text, option, count) in enumerate(zip(texts, options, pieces))]
        with self._condition:
            if self._closed:
                raise QueueError("stopping", "the server is stopping; send the request to "
                                 "it again once it is back")
            self._pending.extend(items)
            self._condition.notify()
        while not ticket.done.wait(min(GONE_CHECK_S, max(0.0, ticket.deadline
                                                          - time.monotonic()))):
            if time.monotonic() >= ticket.deadline:
                self._give_up(ticket, QueueError("timeout", f"the request was not translated "
                                                 f"within {seconds:g} seconds; send fewer or "
                                                 "shorter sentences, or try again later"))
            elif gone is not None and gone():
                self._give_up(ticket, QueueError("gone", "the client went away before its "
                                                 "answer"))
        return ticket.outcome()

    def _give_up(self, ticket: Ticket, error: QueueError) -> None:
        with self._condition:
            ticket.fail(error)  # nothing, if its last sentence was delivered meanwhile
            self._pending = [item for item in self._pending if item.ticket is not ticket]
            if self._running and all(item.ticket.done.is_set() for item in self._running):
                self._interrupt.set()  # nobody waits for the batch being decoded

    def waiting(self) -> tuple[int, int]:
        """(sentences waiting for a batch, sentences being decoded)."""
        with self._condition:
            return len(self._pending), len(self._running)

    def close(self, timeout: float = 10.0) -> None:
        """Answer every request waiting or being decoded with `QueueError` ("stopping"),
        interrupt the batch being decoded (PyTorch), and wait up to ``timeout`` seconds for
        the worker to end."""
        stopping = QueueError("stopping", "the server is stopping; this request was not "
                              "finished, send it again once the server is back")
        with self._condition:
            self._closed = True
            for item in self._pending + self._running:
                item.ticket.fail(stopping)
            self._pending = []
            self._interrupt.set()
            self._condition.notify_all()
        if self._worker.ident is not None and self._worker is not threading.current_thread():
            self._worker.join(timeout)
        for hook in self._hooks:
            hook.remove()
        self._hooks = []

    # -- the worker's side

    def _work(self) -> None:
        while (batch := self._next_batch()) is not None:
            self._run(batch)

    def _next_batch(self) -> list[WorkItem] | None:
        """The next batch, once one is due (None: the queue is closed)."""
        with self._condition:
            while True:
                if self._closed:
                    return None
                self._pending = [item for item in self._pending if not item.ticket.done.is_set()]
                if not self._pending:
                    self._condition.wait()
                    continue
                # the oldest waiting sentence stands first: its batch is due gather_s after it
                due = self._pending[0].ticket.arrival + self.gather_s - time.monotonic()
                if due > 0 and len(self._pending) < self.batch_sentences:
                    self._condition.wait(due)
                    continue
                batch = self._choose()
                self._running = batch
                self._interrupt.clear()
                return batch

    def _choose(self) -> list[WorkItem]:
        """Led by the first sentence in `WorkItem.rank` order, the sentences of its options
        in that order, while the batch stays within its sentences and pieces."""
        ranked = sorted(self._pending, key=WorkItem.rank)
        head = ranked[0]
        batch, pieces = [], 0
        for item in ranked:
            if item.options != head.options or (batch and pieces + item.pieces
                                                 > self.batch_pieces):
                continue
            batch.append(item)
            pieces += item.pieces
            if len(batch) == self.batch_sentences:
                break
        chosen = {id(item) for item in batch}
        self._pending = [item for item in self._pending if id(item) not in chosen]
        return batch

    def _run(self, batch: list[WorkItem]) -> None:
        started = time.monotonic()
        try:
            outcomes = self._translate(batch)
        except Interrupted:  # closing, or nobody waits for it: its requests are answered
            outcomes = None
        elapsed = time.monotonic() - started
        with self._condition:
            self._running = []
            self.batches += 1
            self.sentences += len(batch)
            total = sum(item.pieces for item in batch) or 1
            for item in batch:
                item.ticket.served_s += elapsed * item.pieces / total
            for item, outcome in zip(batch, outcomes or []):
                if outcome is not None:
                    item.ticket.deliver(item.index, outcome)

    def _translate(self, batch: list[WorkItem]) -> list[Translation | BaseException | None]:
        """One outcome per item: the batch in one call, or, when that fails, each item alone,
        so that only the item that fails gets the error."""
        try:
            return self.translator.translate([item.text for item in batch],
                                             batch_size=self.batch_sentences,
                                             **batch[0].options.arguments())
        except Interrupted:
            raise
        except Exception as error:  # noqa: BLE001 - handed to the request that caused it
            if len(batch) == 1:
                return [error]
        return [None if item.ticket.done.is_set() else self._translate([item])[0]
                for item in batch]  # None: its request has given up

    # -- interrupting a batch

    def _install_interrupt_hooks(self) -> list[Any]:
        """A check at every layer call of the PyTorch model (each decoding step passes
        several): in the worker thread, with the interrupt set, the batch is abandoned. An
        export (CTranslate2) has no such hook."""
        model = getattr(self.translator, "model", None)
        if not isinstance(model, nn.Module):
            return []
        layers = [module for child in model.children()
                  for module in (child if isinstance(child, nn.ModuleList) else [child])]
        return [layer.register_forward_pre_hook(self._check_interrupt) for layer in layers]

    def _check_interrupt(self, module: nn.Module, inputs: Any) -> None:
        if self._interrupt.is_set() and threading.current_thread() is self._worker:
            raise Interrupted
