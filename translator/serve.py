"""A translation server on the standard library: a trained run (or its CTranslate2 export)
loaded once and served over HTTP, in the REST shape of OpenNMT-py's server, so its clients
work unchanged.

    python -m translator serve --run runs/latest             # http://127.0.0.1:8080/
    curl -s localhost:8080/translate -d '[{"src": "मुझे ट्रेन पकड़नी है।", "id": 0}]'

Endpoints:

- ``POST /translate``: a JSON list of sentences, ``[{"src": "...", "id": 0}, ...]``, each
  with optional ``beam``, ``n_best``, ``to`` ("en" or "hi", for a model of both directions),
  ``attention`` (true: the word-level matrix of the default view), ``align`` (false: no
  word links, and no attention computed for them), ``alternatives`` (true: each answer also
  has ``steps`` and ``words``, what the model weighed: `Translation.steps`, `Translation.words`)
  and ``prefix`` (text the translation starts with, scored by the model). The answer is
  OpenNMT-py's: one list per n-best rank, each holding one object per sentence,
  ``{"src", "tgt", "n_best", "pred_score", "align"}``, ``align`` being the Pharaoh word links
  ("0-0 1-2 ...": source word - target word) of the default view (`word_alignment`:
  `DEFAULT_LAYER`, mean of heads; the brightest source word of each target word).
- ``GET /``: a page with a text box; submitting it (``GET /?text=...``) shows the attention
  explorer of that sentence, rendered here, under the explorer file's own strict
  Content-Security-Policy (with ``form-action 'self'`` so the box can be used again).
- ``GET /health``: the run folder, direction, backend, code commit and device;
  ``GET /models``: the one model, as OpenNMT-py lists its models.

Every bad request (not JSON, not UTF-8, a body over 1 MB, more than 64 sentences, more source
pieces than `Limits` allows, a field of the wrong type or an unknown one, ...) is a 4xx answer
with ``{"error": "one sentence"}``, and the server goes on serving. The sentences of all
requests go through one `WorkQueue`: concurrent requests are decoded together, in batches of
bounded size, a long request taking turns with the others, so no request holds the model for
long; a request not answered within its time budget is a 503. Connections that send nothing
for `READ_TIMEOUT_S` seconds are closed. SIGINT and SIGTERM stop the server within seconds:
it stops accepting, answers the requests in flight 503 (the batch being decoded is
interrupted), and exits 0.

The server listens on loopback (127.0.0.1) unless told another host; it has no
authentication, so naming another host prints a warning. Only the standard library is used.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from argparse import ArgumentParser, Namespace
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from translator.alignment import SentenceAttention, hard_links
from translator.direction import TAGS, Direction
from translator.errors import TranslatorError
from translator.explorer import explorer_html, sentence_data
from translator.links import format_line
from translator.translate import Translation, Translator
from translator.work_queue import BATCH_PIECES, GATHER_S, Options, QueueError, WorkQueue

MAX_BODY_BYTES = 1_000_000  # a larger POST body is refused with 413
# a refused body up to this size is read and dropped before the answer, so that the client,
# still sending, gets the 413 rather than a reset connection; a larger one is not read at all
MAX_DRAIN_BYTES = 8_000_000
MAX_SENTENCES = 64  # sentences in one request
MAX_BEAM = 32  # the widest beam a request may ask for
MAX_PAGE_CHARACTERS = 2_000  # the longest sentence GET / draws the explorer for
READ_TIMEOUT_S = 10.0  # a connection silent this long (mid-request or idle) is closed
REQUEST_FIELDS = ("src", "id", "beam", "n_best", "to", "attention", "align", "alternatives",
                  "prefix")
ALTERNATIVES = 5  # the pieces listed per step when a sentence asks for "alternatives"
MODEL_ID = 0  # OpenNMT-py's model id: this server holds one model
LOOPBACK = ("127.0.0.1", "::1", "localhost")
ROOT = Path(__file__).resolve().parent.parent


class ServeError(TranslatorError):
    """The server cannot start as asked (address in use, ...); the message says why."""


class ServiceError(TranslatorError):
    """A request the translation service refuses, in one sentence, and what kind of refusal
    it is (`KINDS`); the transport says it its own way (HTTP: `SERVICE_STATUS`)."""

    # malformed; asks for what is not here; too much; not answered now (stopping, time out)
    KINDS = ("invalid", "unknown", "too_large", "unavailable")

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


class RequestError(Exception):
    """An HTTP request the server refuses: its HTTP status and one sentence saying why."""

    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message

    @classmethod
    def of(cls, error: ServiceError) -> RequestError:
        return cls(SERVICE_STATUS[error.kind], error.message)


SERVICE_STATUS = {"invalid": HTTPStatus.BAD_REQUEST, "unknown": HTTPStatus.NOT_FOUND,
                  "too_large": HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                  "unavailable": HTTPStatus.SERVICE_UNAVAILABLE}


@dataclass(frozen=True)
class Limits:
    """How much work one request may ask for and how long it may take, and how much the
    queue decodes at once. Source pieces are counted with the run's tokenizer."""

    sentence_pieces: int = 256  # source pieces of one sentence ("src")
    request_pieces: int = 4096  # source pieces of all sentences of one request
    request_seconds: float = 60.0  # a request not answered within this is answered 503
    batch_pieces: int = BATCH_PIECES  # source pieces decoded together (see WorkQueue)
    gather_ms: float = 1000 * GATHER_S  # how long a batch waits for more sentences


LIMIT_FLAGS = {  # Limits field: (flag, help)
    "sentence_pieces": ("--max-sentence-pieces", "source pieces one sentence may have; a "
                        "longer one is refused with 413"),
    "request_pieces": ("--max-request-pieces", "source pieces all sentences of one request "
                       "may have together; more is refused with 413"),
    "request_seconds": ("--request-seconds", "time budget of one request, in seconds; one "
                        "not translated within it is answered 503"),
    "batch_pieces": ("--batch-pieces", "source pieces decoded together in one batch, which "
                     "bounds how long a batch holds the model"),
    "gather_ms": ("--gather-ms", "milliseconds a batch waits for sentences of other "
                  "requests to join it"),
}


def limit_arguments(parser: ArgumentParser) -> None:
    """The `Limits` flags of ``serve``, with their defaults in the help."""
    defaults = Limits()
    for name, (flag, text) in LIMIT_FLAGS.items():
        default = getattr(defaults, name)
        parser.add_argument(flag, dest=name, type=type(default), default=default,
                            help=f"{text} (default {default:g})")


def limits_of(args: Namespace) -> Limits:
    """The `Limits` that ``serve``'s flags ask for; a value that is no limit is a
    `ServeError` naming its flag."""
    values = {name: getattr(args, name) for name in LIMIT_FLAGS}
    for name, value in values.items():
        least = 0 if name == "gather_ms" else 1
        if value < least:
            raise ServeError(f"{LIMIT_FLAGS[name][0]} must be at least {least}, not {value:g}")
    if values["batch_pieces"] < values["sentence_pieces"]:
        raise ServeError(f"--batch-pieces ({values['batch_pieces']}) must be at least "
                         f"--max-sentence-pieces ({values['sentence_pieces']}): a batch holds "
                         "at least one sentence")
    return Limits(**values)


# ---------------------------------------------------------------- reading a request


@dataclass(frozen=True)
class Sentence:
    """One sentence of a /translate request: how it is to be translated (``options``, which
    the queue carries) and what its answer shows."""

    src: str
    options: Options = field(default_factory=Options)  # beam_size None: the run's beam
    attention: bool = False  # the word-level matrix
    align: bool = True  # the Pharaoh word links


def _integer(value: Any, name: str, number: int, least: int, most: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ServiceError("invalid", f"sentence {number}: {name} must be a whole "
                           f"number, not {json.dumps(value, ensure_ascii=False)[:40]}")
    if not least <= value <= most:
        raise ServiceError("invalid", f"sentence {number}: {name} must be "
                           f"between {least} and {most}, not {value}")
    return value


def _sentence(item: Any, number: int) -> Sentence:
    """One request item, checked field by field (``number`` counts from 0, as ids do)."""
    if not isinstance(item, dict):
        raise ServiceError("invalid", f"sentence {number} must be an object such "
                           'as {"src": "...", "id": 0}')
    unknown = [key for key in item if key not in REQUEST_FIELDS]
    if unknown:
        raise ServiceError("invalid", f"sentence {number} has an unknown field "
                           f"{unknown[0]!r}; the fields are {', '.join(REQUEST_FIELDS)}")
    if "src" not in item:
        raise ServiceError("invalid", f'sentence {number} has no "src" text')
    if not isinstance(item["src"], str):
        raise ServiceError("invalid", f'sentence {number}: "src" must be a string')
    model_id = item.get("id", MODEL_ID)
    if not isinstance(model_id, int) or isinstance(model_id, bool):
        raise ServiceError("invalid", f'sentence {number}: "id" must be a model '
                           "number (0)")
    if model_id != MODEL_ID:
        raise ServiceError("unknown", f"sentence {number} asks for model "
                           f"{model_id}, but this server holds only model {MODEL_ID}")
    beam = item.get("beam")
    if beam is not None:
        beam = _integer(beam, "beam", number, 1, MAX_BEAM)
    n_best = _integer(item.get("n_best", 1), "n_best", number, 1, MAX_BEAM)
    if n_best > (beam or MAX_BEAM):
        raise ServiceError("invalid", f"sentence {number}: n_best {n_best} is "
                           f"more than its beam {beam}")
    to = item.get("to")
    if to is not None and to not in TAGS:
        raise ServiceError("invalid", f'sentence {number}: "to" must be "en" or '
                           f'"hi", not {json.dumps(to, ensure_ascii=False)[:40]}')
    attention, align = item.get("attention", False), item.get("align", True)
    for name, value in (("attention", attention), ("align", align)):
        if not isinstance(value, bool):
            raise ServiceError("invalid", f'sentence {number}: "{name}" must be '
                               "true or false")
    options = Options(beam_size=beam, n_best=n_best, target_language=to,
                      need_attention=attention or align, **_weighing(item, number))
    return Sentence(item["src"], options, attention, align)


def _weighing(item: dict[str, Any], number: int) -> dict[str, Any]:
    """The `Options` of a sentence's ``alternatives`` (true or false) and ``prefix`` (text)."""
    alternatives, prefix = item.get("alternatives", False), item.get("prefix")
    if not isinstance(alternatives, bool):
        raise ServiceError("invalid", f'sentence {number}: "alternatives" must be true or false')
    if prefix is not None and not isinstance(prefix, str):
        raise ServiceError("invalid", f'sentence {number}: "prefix" must be a string')
    return {"alternatives": ALTERNATIVES if alternatives else None, "prefix": prefix or None}


def parse_request(body: bytes) -> list[Sentence]:
    """The sentences of a /translate body, or a `ServiceError` saying what is wrong with it."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ServiceError("invalid", f"the request body is not UTF-8 (byte "
                           f"{error.start}); send JSON encoded as UTF-8") from None
    try:
        items = json.loads(text)
    except json.JSONDecodeError as error:
        raise ServiceError("invalid", f"the request body is not valid JSON "
                           f"({error.msg} at line {error.lineno}, column {error.colno})") from None
    if not isinstance(items, list):
        raise ServiceError("invalid", 'the request must be a JSON list such as '
                           '[{"src": "...", "id": 0}]')
    if not items:
        raise ServiceError("invalid", "the request holds no sentences; send at "
                           'least one, as [{"src": "...", "id": 0}]')
    if len(items) > MAX_SENTENCES:
        raise ServiceError("too_large", f"the request holds "
                           f"{len(items)} sentences, more than {MAX_SENTENCES}; send them in "
                           "several requests")
    sentences = [_sentence(item, number) for number, item in enumerate(items)]
    if len({s.options.n_best for s in sentences}) > 1:  # the answer has one list per n-best rank
        raise ServiceError("invalid", "the sentences of one request must ask for "
                           "the same n_best")
    return sentences


# ---------------------------------------------------------------- the model, behind a queue


def pharaoh_links(translation: Translation) -> str:
    """The default view's word links of ``translation`` ("i-j ...", source word - target
    word), "" without attention (an empty input, or one too long to keep it)."""
    if translation.attention is None or not translation.target_pieces:
        return ""
    return format_line(hard_links(SentenceAttention.of(translation).words().weights))


def code_commit() -> str | None:
    """The git commit of the code being served, or None outside a git checkout."""
    try:
        done = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"],
                              capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


class TranslationService:
    """A loaded translator and what the endpoints make of it. Every translation goes through
    one `WorkQueue`, which decodes the sentences of concurrent requests together in batches
    of at most ``batch_size`` sentences and ``limits.batch_pieces`` pieces; `close` stops it
    (``start=False``: the queue waits for ``queue.start()``)."""

    def __init__(self, translator: Translator, batch_size: int = 32,
                 limits: Limits | None = None, start: bool = True) -> None:
        self.translator = translator
        self.backend = translator.backend
        self.batch_size = batch_size
        self.limits = limits or Limits()
        self.queue = WorkQueue(translator, batch_size, self.limits.batch_pieces,
                               self.limits.gather_ms / 1000, start=start)
        self.commit = code_commit()
        self.started = time.time()

    def close(self) -> None:
        """Answer the requests in flight 503 and stop the queue."""
        self.queue.close()

    # -- what the endpoints answer

    def health(self) -> dict[str, Any]:
        run_dir = getattr(self.translator, "run_dir", None)
        return {"status": "ok", "run": str(run_dir) if run_dir is not None else None,
                "direction": self.translator.direction.name, "backend": self.backend,
                "commit": self.commit, "device": str(self.translator.device),
                "uptime_s": round(time.time() - self.started, 1),
                "queue": dict(zip(("waiting", "decoding"), self.queue.waiting()))}

    def models(self) -> list[dict[str, Any]]:
        """OpenNMT-py's GET /models shape: one entry per model, here the one."""
        search = self.translator.search
        return [{"model_id": MODEL_ID, "loaded": True, "backend": self.backend,
                 "run": self.health()["run"], "direction": self.translator.direction.name,
                 "opt": {"beam_size": search.beam_size, "n_best": search.n_best,
                         "length_penalty": search.length_penalty,
                         "no_repeat_ngram": search.no_repeat_ngram,
                         "no_doubled_words": search.no_doubled_words}}]

    def source_pieces(self, sentences: list[Sentence]) -> list[int]:
        """The source pieces of each sentence, or a `ServiceError` ("too_large") when a
        sentence, or the request, has more than `Limits` allows."""
        limits = self.limits
        pieces = [len(ids) for ids in self.translator.tokenizer.encode_sources(
            [sentence.src for sentence in sentences])]
        for number, count in enumerate(pieces):
            if count > limits.sentence_pieces:
                raise ServiceError("too_large", f"sentence {number} has {count:,} source "
                                   f"pieces, more than this server's limit of "
                                   f"{limits.sentence_pieces:,} a sentence; split it")
        if sum(pieces) > limits.request_pieces:
            raise ServiceError("too_large", f"the request has {sum(pieces):,} source pieces, "
                               f"more than this server's limit of {limits.request_pieces:,} a "
                               "request; send the sentences in several requests")
        return pieces

    def _check(self, sentences: list[Sentence]) -> None:
        """Refuse what the translator cannot do before queueing any of it."""
        run_beam = self.translator.search.beam_size
        for sentence in sentences:
            options = sentence.options
            if options.beam_size is None and options.n_best > run_beam:
                raise ServiceError("invalid", f"n_best {options.n_best} is more than "
                                   f"the run's beam {run_beam}; ask for a beam as well")
        try:
            for language in {sentence.options.target_language for sentence in sentences}:
                self.translator.check_target_language(language)  # "hi" for a hi-en model
        except TranslatorError as error:
            raise ServiceError("invalid", str(error)) from None

    def translations(self, sentences: list[Sentence], gone: Callable[[], bool] | None = None
                     ) -> list[Translation]:
        """One Translation per sentence, in order, decoded by the queue with the sentences of
        other requests; ``gone()`` true: the client left, the work is dropped."""
        self._check(sentences)
        pieces = self.source_pieces(sentences)
        try:
            return self.queue.translate([s.src for s in sentences],
                                        [s.options for s in sentences], pieces,
                                        self.limits.request_seconds, gone)
        except QueueError as error:  # stopping, or out of time
            raise ServiceError("unavailable", error.message) from None
        except TranslatorError as error:  # what the translator refuses
            raise ServiceError("invalid", str(error)) from None

    def translate(self, sentences: list[Sentence], gone: Callable[[], bool] | None = None
                  ) -> list[list[dict[str, Any]]]:
        """The /translate answer: ``answer[k][i]`` is the k-th best of sentence i (``gone``:
        as `translations`)."""
        n_best = sentences[0].options.n_best
        answer: list[list[dict[str, Any]]] = [[] for _ in range(n_best)]
        for sentence, translation in zip(sentences, self.translations(sentences, gone)):
            hypotheses = translation.nbest or [translation]
            for rank in range(n_best):
                # fewer hypotheses than asked for (an input split into parts keeps only its
                # best): the best stands in, as OpenNMT-py's lists must be full
                hypothesis = hypotheses[min(rank, len(hypotheses) - 1)]
                answer[rank].append(self._record(sentence, hypothesis, translation, n_best))
        return answer

    def _record(self, sentence: Sentence, hypothesis: Translation, translation: Translation,
                n_best: int) -> dict[str, Any]:
        record: dict[str, Any] = {"src": sentence.src, "tgt": hypothesis.text,
                                  "n_best": n_best, "pred_score": hypothesis.score}
        if sentence.align:
            record["align"] = pharaoh_links(hypothesis)
        if sentence.attention:
            record["attention"] = self.attention_record(hypothesis)
        if translation.warnings:
            record["warnings"] = translation.warnings
        if translation.target_language is not None:
            record["to"] = translation.target_language
        if sentence.options.alternatives:
            record["steps"], record["words"] = hypothesis.steps(), hypothesis.words()
        return record

    def attention_record(self, translation: Translation) -> dict[str, Any] | None:
        """The word-level matrix of the default view (rows: target words; columns: source
        words; EOS dropped, rows renormalised, 4 decimals), or None without attention."""
        if translation.attention is None or not translation.target_pieces:
            return None
        sentence = SentenceAttention.of(translation)
        words = sentence.words().to_dict()
        words.pop("eos")
        return {"view": sentence.title(), **words}

    def explorer_page(self, text: str) -> str:
        """The attention explorer of ``text``'s translation, with the text box above it."""
        if len(text) > MAX_PAGE_CHARACTERS:
            raise ServiceError("invalid", f"the sentence has {len(text)} "
                               f"characters, more than the {MAX_PAGE_CHARACTERS} the explorer "
                               "page draws; translate it with POST /translate")
        [translation] = self.translations([Sentence(text, align=False)])
        if translation.attention is None or not translation.target_pieces:
            raise ServiceError("invalid", "the translation is empty, so there is "
                               "no attention to show; type a sentence")
        direction = self.translator.direction.of_translation(translation.target_language)
        title = (f"cross-attention explorer · {direction.arrow} · beam "
                 f"{self.translator.search.beam_size}")
        data = sentence_data(SentenceAttention.of(translation), text, translation.text, title)
        # the box posts back here: the one change to the explorer file's policy
        return explorer_html(data, form_action="'self'", header=text_box(text))


# ---------------------------------------------------------------- pages


PAGE_STYLE = ("body { font-family: system-ui, sans-serif; margin: 16px 20px; color: #222; }\n"
              "textarea { width: 40em; max-width: 95%; font-size: 16px; }\n"
              ".error { color: #a50f15; }\n")


def _style_hash(style: str) -> str:
    digest = hashlib.sha256(style.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


# the page's own policy: nothing but its one style; the form posts only to this server
PAGE_POLICY = (f"default-src 'none'; style-src {_style_hash(PAGE_STYLE)}; base-uri 'none'; "
               "form-action 'self'")


def text_box(text: str = "") -> str:
    """The form that asks for a sentence (GET /?text=...), as HTML."""
    return ('<form method="get" action="/" id="sentence-form">\n'
            '<label for="text">Sentence to translate</label><br>\n'
            f'<textarea id="text" name="text" rows="2" required>{html.escape(text)}</textarea>'
            '\n<br><button type="submit" id="submit">Translate and show attention</button>\n'
            "</form>\n")


def landing_page(direction: Direction, error: str | None = None) -> str:
    """GET /: the text box, and what went wrong with the last sentence, if anything."""
    message = f'<p class="error" id="error">{html.escape(error)}</p>\n' if error else ""
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{PAGE_POLICY}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>translator · {direction.arrow}</title>
<style>{PAGE_STYLE}</style>
</head>
<body>
<h1>translator · {direction.arrow}</h1>
{message}{text_box()}<p>The page that follows shows the cross-attention explorer of the
translation. For programs: POST /translate (OpenNMT-py's REST shape), GET /health, GET
/models.</p>
</body>
</html>
"""


def page_policy(page: str) -> str:
    """The Content-Security-Policy a page names in its meta tag, sent as a header as well."""
    found = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page)
    return found.group(1) if found else "default-src 'none'"


# ---------------------------------------------------------------- HTTP


class RequestHandler(BaseHTTPRequestHandler):
    """One connection: its requests, read with a timeout, answered as JSON (or HTML for
    GET /)."""

    server: TranslationServer
    protocol_version = "HTTP/1.1"  # keep-alive: a client may send many requests on one
    server_version = "translator-serve"

    def setup(self) -> None:
        self.timeout = self.server.read_timeout  # applied to the socket: a longer wait fails
        super().setup()
        self.server.opened(self.connection)

    def finish(self) -> None:
        self.server.closed(self.connection)
        super().finish()

    # -- answering

    def _send(self, status: HTTPStatus, body: bytes, content_type: str,
              headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_json(self, value: Any, status: HTTPStatus = HTTPStatus.OK) -> None:
        body = json.dumps(value, ensure_ascii=False).encode("utf-8")
        self._send(status, body, "application/json; charset=utf-8")

    def send_page(self, page: str, status: HTTPStatus = HTTPStatus.OK) -> None:
        self._send(status, page.encode("utf-8"), "text/html; charset=utf-8",
                   {"Content-Security-Policy": page_policy(page) + "; frame-ancestors 'none'",
                    "Referrer-Policy": "no-referrer"})

    def send_error_json(self, status: HTTPStatus, message: str) -> None:
        self.send_json({"error": message}, status)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None
                   ) -> None:
        """http.server's own refusals (a malformed request line, headers too long, ...) in
        this server's JSON shape."""
        self.close_connection = True
        status = HTTPStatus(code)
        self.send_json({"error": (message or status.phrase).rstrip(".")}, status)

    def log_message(self, format: str, *args: Any) -> None:
        if not self.server.quiet:
            super().log_message(format, *args)

    # -- the methods

    def handle_one_request(self) -> None:
        """http.server's loop step, with a read that times out answered 408 and every other
        failure a 500 that leaves the server serving."""
        try:
            super().handle_one_request()
        except TimeoutError:
            self.close_connection = True
        except (ConnectionError, BrokenPipeError):
            self.close_connection = True

    def _guarded(self, method) -> None:
        try:
            try:
                method()
            except ServiceError as error:  # the service's refusal, as HTTP says it
                raise RequestError.of(error) from None
        except RequestError as error:
            self.send_error_json(error.status, error.message)
        except TimeoutError:
            self.close_connection = True
            self.send_error_json(HTTPStatus.REQUEST_TIMEOUT, f"the request body did not "
                                 f"arrive within {self.server.read_timeout:g} seconds")
        except (ConnectionError, BrokenPipeError):
            self.close_connection = True
        except Exception as error:  # one bad request must not stop the server
            traceback.print_exc(file=sys.stderr)
            self.close_connection = True
            self.send_error_json(HTTPStatus.INTERNAL_SERVER_ERROR, f"the server failed on "
                                 f"this request ({type(error).__name__}); it goes on serving")

    def do_GET(self) -> None:
        self._guarded(self._get)

    def do_HEAD(self) -> None:
        self._guarded(self._get)

    def do_POST(self) -> None:
        self._guarded(self._post)

    def do_PUT(self) -> None:
        self._guarded(self._not_allowed)

    do_DELETE = do_PATCH = do_PUT

    def _not_allowed(self) -> None:
        self.close_connection = True
        raise RequestError(HTTPStatus.METHOD_NOT_ALLOWED, f"{self.command} is not served; use "
                           "POST /translate, or GET /, /health, /models")

    def _get(self) -> None:
        url = urlsplit(self.path)
        service = self.server.service
        if url.path == "/health":
            self.send_json(service.health())
        elif url.path == "/models":
            self.send_json(service.models())
        elif url.path in ("/", "/index.html"):
            self._page(parse_qs(url.query).get("text", [""])[0].strip())
        elif url.path == "/translate":
            raise RequestError(HTTPStatus.METHOD_NOT_ALLOWED, "/translate takes POST with a "
                               'JSON list such as [{"src": "...", "id": 0}]')
        else:
            raise RequestError(HTTPStatus.NOT_FOUND, f"there is nothing at {url.path}; the "
                               "endpoints are POST /translate, GET /, /health, /models")

    def _page(self, text: str) -> None:
        """GET /: the text box, or the explorer of ``text``; a refusal is a page too, since a
        person reads it."""
        direction = self.server.service.translator.direction
        if not text:
            self.send_page(landing_page(direction))
            return
        try:
            self.send_page(self.server.service.explorer_page(text))
        except ServiceError as error:
            self.send_page(landing_page(direction, error.message), SERVICE_STATUS[error.kind])

    def _post(self) -> None:
        if urlsplit(self.path).path != "/translate":
            self.close_connection = True
            raise RequestError(HTTPStatus.NOT_FOUND, f"POST {urlsplit(self.path).path} is not "
                               "served; POST to /translate")
        body = self._read_body()
        sentences = parse_request(body)
        self.send_json(self.server.service.translate(sentences,
                                                     lambda: client_gone(self.connection)))

    _expecting_continue = False

    def handle_expect_100(self) -> bool:
        """A client that waits for "100 Continue" (curl, for large bodies) hears about a body
        that is too large before it sends it."""
        length = self.headers.get("Content-Length", "")
        if length.strip().isdigit() and int(length) > MAX_BODY_BYTES:
            self._expecting_continue = True
            return True  # do_POST refuses it, without waiting for the body
        return super().handle_expect_100()

    def _drop(self, size: int) -> None:
        """Read ``size`` bytes of body and forget them."""
        while size > 0:
            chunk = self.rfile.read(min(size, 65536))
            if not chunk:
                return
            size -= len(chunk)

    def _read_body(self) -> bytes:
        """The request body, which must come with a Content-Length of at most
        `MAX_BODY_BYTES`; a refused body is left unread and the connection closed."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            self.close_connection = True
            raise RequestError(HTTPStatus.LENGTH_REQUIRED, "send the body with a "
                               "Content-Length; chunked bodies are not read")
        length = self.headers.get("Content-Length")
        if length is None:
            self.close_connection = True
            raise RequestError(HTTPStatus.LENGTH_REQUIRED, "send the body with a "
                               "Content-Length header")
        if not length.strip().isdigit():
            self.close_connection = True
            raise RequestError(HTTPStatus.BAD_REQUEST, f"Content-Length {length[:20]!r} is not "
                               "a number of bytes")
        size = int(length)
        if size > MAX_BODY_BYTES:
            self.close_connection = True
            if size <= MAX_DRAIN_BYTES and not self._expecting_continue:
                self._drop(size)
            raise RequestError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"the body has {size:,} "
                               f"bytes, more than {MAX_BODY_BYTES:,}; send fewer or shorter "
                               "sentences")
        body = self.rfile.read(size)
        if len(body) < size:
            self.close_connection = True
            raise RequestError(HTTPStatus.BAD_REQUEST, f"the body ended after {len(body)} of "
                               f"its {size} bytes")
        return body


def client_gone(connection: socket.socket) -> bool:
    """Whether the client has closed its end of ``connection`` (waiting data, a pipelined
    next request, is no sign of that)."""
    try:
        readable, _, _ = select.select([connection], [], [], 0)
        return bool(readable) and connection.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):  # reset, or closed here
        return True


class TranslationServer(ThreadingHTTPServer):
    """A thread per connection, all sharing one `TranslationService`. Handler threads are
    not daemons, so `server_close` waits for them, once the service has answered the
    requests in flight 503 and the connections' reads have been ended."""

    daemon_threads = False
    block_on_close = True
    request_queue_size = 64  # connections waiting to be accepted (8 clients at once, and more)
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], service: TranslationService,
                 quiet: bool = False, read_timeout: float = READ_TIMEOUT_S) -> None:
        self.service = service
        self.quiet = quiet
        self.read_timeout = read_timeout
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(address, RequestHandler)

    def opened(self, connection: socket.socket) -> None:
        with self.connections_lock:
            self.connections.add(connection)

    def closed(self, connection: socket.socket) -> None:
        with self.connections_lock:
            self.connections.discard(connection)

    def server_close(self) -> None:
        """Stop: the requests in flight are answered 503 (the service), a connection waiting
        for its next request reads its end at once rather than after `read_timeout`, and the
        handler threads are joined."""
        self.service.close()
        with self.connections_lock:
            for connection in self.connections:
                try:
                    connection.shutdown(socket.SHUT_RD)  # writing the 503 still works
                except OSError:
                    pass  # already closed by the client
        super().server_close()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{port}/"


def check_port(port: int) -> None:
    if not 0 <= port <= 65535:
        raise ServeError(f"--port {port} is not a port; use 0 to 65535 (0: any free one)")


def make_server(translator: Translator, host: str = "127.0.0.1", port: int = 8080,
                batch_size: int = 32, quiet: bool = False,
                read_timeout: float = READ_TIMEOUT_S, limits: Limits | None = None
                ) -> TranslationServer:
    """A server for ``translator`` bound to ``host``:``port`` (0: any free port), not yet
    serving (call ``serve_forever``, e.g. in a thread; ``server_close`` stops its queue)."""
    check_port(port)
    service = TranslationService(translator, batch_size, limits)
    try:
        return TranslationServer((host, port), service, quiet, read_timeout)
    except OSError as error:
        service.close()
        raise ServeError(f"cannot listen on {host}:{port}: {error.strerror or error}; choose "
                         "another --port (0 picks a free one) or --host") from None


def serve(translator: Translator, host: str = "127.0.0.1", port: int = 8080,
          batch_size: int = 32, quiet: bool = False, limits: Limits | None = None) -> int:
    """Serve until SIGINT or SIGTERM, then stop within seconds (requests in flight are
    answered 503); 0."""
    if host not in LOOPBACK:
        print(f"warning: serving on {host}, which other machines may reach; the server has no "
              "authentication, so anyone who can reach it can use it", file=sys.stderr)
    server = make_server(translator, host, port, batch_size, quiet, limits=limits)
    # shutdown() waits for serve_forever's loop, so it runs in another thread; that thread
    # is joined before returning: a daemon thread still waking up while the interpreter
    # finalises is killed inside C++ frames, and the process aborts (exit -6)
    stopper = threading.Thread(target=server.shutdown, name="serve-stop")

    def stop(signum: int, frame: Any) -> None:
        if stopper.ident is None:  # a second signal while stopping changes nothing
            print(f"stopping ({signal.Signals(signum).name})", file=sys.stderr, flush=True)
            stopper.start()

    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    search = translator.search
    print(f"serving {server.url} ({translator.backend}, {translator.direction.arrow}, beam "
          f"{search.beam_size}); POST /translate, GET /health; Ctrl-C stops", file=sys.stderr,
          flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()  # answers the requests in flight, joins the handler threads
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if stopper.ident is not None:
            stopper.join()
    print("stopped", file=sys.stderr, flush=True)
    return 0

