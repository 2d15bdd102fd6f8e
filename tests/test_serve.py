"""The translation server. The service and its work queue are called directly: /translate
answers what `Translator.translate` does for the same sentences and settings, in OpenNMT-py's
shape; sentences of concurrent requests are decoded together (16 requests queued at once: one
batch, the answers of one request at a time), options that differ in different batches, a
long request in turns with short ones, a failing sentence failing only its request, work over
the limits refused, a request out of time answered 503, and closing interrupts the batch
being decoded. A server on port 0 in a thread of the test, spoken to over HTTP: every bad
request gets its 4xx with one sentence and the next good one still works (HEAD, 100-continue,
a body cut short, a 500); 16 concurrent clients get the sequential answers, also beside bad
and disconnecting clients and a maximal legal request; GET / in headless Chromium takes the
Rajesh sentence and draws its explorer grid, with no script error and no request off
127.0.0.1. The command: SIGTERM and SIGINT stop `python -m translator serve` cleanly, a
request in flight answered 503; --port out of range and a bad limit are one sentence, exit 2;
--backend ct2 serves an export. Every socket read and process wait has a deadline; nothing
asserts on how long something took (bench/serve_bench.py measures that)."""

import http.client
import io
import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest

from translator.alignment import hard_links, word_alignment
from translator.explorer import DATA_ID
from translator.links import format_line
from translator.serve import (
    ALTERNATIVES,
    MAX_SENTENCES,
    SERVICE_STATUS,
    Limits,
    ServiceError,
    TranslationService,
    client_gone,
    make_server,
    parse_request,
)
from translator.translate import Translator
from translator.work_queue import Options

RAJESH = "राजेश ने कल शाम को अपनी बहन के लिए दिल्ली से मुंबई की ट्रेन टिकट बुक की"
SENTENCES = [
    "मुझे कल सुबह की ट्रेन पकड़नी है।",
    RAJESH,
    "",  # an empty input: an empty translation, no links
    "UPI भुगतान विफल हुआ लेकिन पैसे कट गए।",
    # longer than the tiny model's 31 source pieces: split into parts, as translate does
    "मैं कल बाज़ार गया और वहाँ से सब्ज़ियाँ, फल, दूध और रोटी खरीदकर घर लौटा। " * 2,
]
CHROMIUM = shutil.which("chromium")
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def translator(tiny_run, one_thread):
    return Translator.from_run(tiny_run, device="cpu")


@pytest.fixture(scope="module")
def server(translator):
    """A real server on a free port, serving from a thread of this test process."""
    server = make_server(translator, "127.0.0.1", 0, quiet=True, read_timeout=1.0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


def request(server, method: str, path: str, body: bytes | None = None,
            headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """(status, headers, body) of one request on a fresh connection."""
    host, port = server.server_address[:2]
    connection = http.client.HTTPConnection(host, port, timeout=180)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def post(server, items) -> tuple[int, object]:
    body = items if isinstance(items, bytes) else json.dumps(items).encode("utf-8")
    status, _, answer = request(server, "POST", "/translate", body,
                                {"Content-Type": "application/json"})
    return status, json.loads(answer)


def links_of(translation) -> str:
    if translation.attention is None or not translation.target_pieces:
        return ""
    words = word_alignment(translation.attention, translation.source_pieces,
                           translation.target_pieces)
    return format_line(hard_links(words.weights))


SIXTEEN = [f"{SENTENCES[i % 4]} {i}" for i in range(16)]  # sixteen different sentences


def answer_of(service: TranslationService, items: list[dict]) -> list[list[dict]]:
    """The service's /translate answer to ``items``, without HTTP."""
    return service.translate(parse_request(json.dumps(items).encode("utf-8")))


def assert_same_answers(got: list, expected: list) -> None:
    """The answers hold the same texts and links; the scores differ only by float rounding
    (a sentence decoded in a batch is padded: its sums run in another order)."""
    assert len(got) == len(expected)
    for answer, reference in zip(got, expected):
        for rank, reference_rank in zip(answer, reference, strict=True):
            for record, want in zip(rank, reference_rank, strict=True):
                assert {**record, "pred_score": 0} == {**want, "pred_score": 0}
                assert record["pred_score"] == pytest.approx(want["pred_score"], abs=1e-4)


def wait_until(condition, what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:g} s")
        time.sleep(0.01)


@pytest.fixture
def make_service(translator):
    """Services of ``translator``, closed after the test; their queues wait for
    ``service.queue.start()`` unless ``start=True``, so a test can fill them first."""
    made = []

    def make(limits: Limits | None = None, start: bool = False) -> TranslationService:
        made.append(TranslationService(translator, limits=limits, start=start))
        return made[-1]

    yield make
    for service in made:
        service.close()


def record_batches(monkeypatch, translator) -> list[tuple[list[str], dict]]:
    """The texts and keywords of every `Translator.translate` call from now on."""
    calls = []
    translate = translator.translate

    def recording(texts, **keywords):
        calls.append((list(texts), keywords))
        return translate(texts, **keywords)

    monkeypatch.setattr(translator, "translate", recording)
    return calls


def queued_at_once(service: TranslationService, requests: list[list[dict]]) -> list:
    """Each request from its own thread, all in the (unstarted) queue before it starts, in
    the order given; the answers, or the errors raised, in order."""
    with ThreadPoolExecutor(len(requests)) as pool:
        futures, queued = [], 0
        for items in requests:
            futures.append(pool.submit(answer_of, service, items))
            queued += len(items)
            wait_until(lambda n=queued: service.queue.waiting()[0] == n, "queued")
        service.queue.start()
        return [future.exception(timeout=300) or future.result() for future in futures]


# ---------------------------------------------------------------- the queue


@pytest.mark.parametrize("beam", [1, 3])
def test_sixteen_requests_queued_at_once_are_one_batch_with_the_sequential_answers(
        make_service, beam):
    sequential = make_service(start=True)
    expected = [answer_of(sequential, [{"src": s, "beam": beam}]) for s in SIXTEEN]
    assert len({answer[0][0]["tgt"] for answer in expected}) >= 8  # a mix-up would show
    service = make_service()
    answers = queued_at_once(service, [[{"src": s, "beam": beam}] for s in SIXTEEN])
    assert (service.queue.batches, service.queue.sentences) == (1, 16)
    assert_same_answers(answers, expected)


def test_sentences_asking_for_different_options_go_to_different_batches(
        make_service, translator, monkeypatch):
    requests = [[{"src": SENTENCES[0], "beam": 1}], [{"src": SENTENCES[3], "beam": 3}],
                [{"src": SENTENCES[3], "beam": 1, "align": False}],
                [{"src": SENTENCES[0], "beam": 3, "n_best": 2}],
                [{"src": SENTENCES[1], "beam": 1}, {"src": SENTENCES[1], "beam": 3}]]
    sequential = make_service(start=True)
    expected = [answer_of(sequential, items) for items in requests]
    calls = record_batches(monkeypatch, translator)
    answers = queued_at_once(make_service(), requests)
    assert_same_answers(answers, expected)
    batches = sorted((call[1]["beam_size"], call[1]["n_best"], call[1]["need_attention"],
                      sorted(call[0])) for call in calls)
    assert batches == [(1, 1, False, [SENTENCES[3]]),
                       (1, 1, True, sorted([SENTENCES[0], SENTENCES[1]])),
                       (3, 1, True, sorted([SENTENCES[3], SENTENCES[1]])),
                       (3, 2, True, [SENTENCES[0]])]


def test_a_long_request_takes_turns_with_a_short_one(make_service, translator, monkeypatch):
    long = [f"{RAJESH} {i}" for i in range(4)]
    [pieces] = {len(ids) for ids in translator.tokenizer.encode_sources(long)}
    calls = record_batches(monkeypatch, translator)
    service = make_service(Limits(sentence_pieces=pieces, batch_pieces=pieces))  # one a batch
    long_answer, short_answer = queued_at_once(service, [[{"src": s} for s in long],
                                                         [{"src": SENTENCES[0]}]])
    # the long request came first: one of its sentences, then the short request, which has
    # had no decoding time yet, then the rest of the long one
    assert [texts for texts, _ in calls] == [long[:1], SENTENCES[:1], *[[s] for s in long[1:]]]
    assert [record["src"] for record in long_answer[0]] == long
    assert short_answer[0][0]["tgt"] == translator.translate(SENTENCES[:1])[0].text


def fail_on_the_word_fail(translator, monkeypatch) -> None:
    """A planted fault: ``translator.translate`` raises for any batch holding "FAIL"."""
    translate = translator.translate

    def failing(texts, **keywords):
        if "FAIL" in texts:
            raise RuntimeError("a planted failure")
        return translate(texts, **keywords)

    monkeypatch.setattr(translator, "translate", failing)


def test_a_failing_sentence_fails_only_its_request(make_service, translator, monkeypatch):
    requests = [[{"src": SENTENCES[0]}], [{"src": "FAIL"}], [{"src": SENTENCES[3]}]]
    expected = [answer_of(make_service(start=True), items) for items in requests[::2]]
    fail_on_the_word_fail(translator, monkeypatch)
    service = make_service()
    first, failed, last = queued_at_once(service, requests)
    assert isinstance(failed, RuntimeError) and str(failed) == "a planted failure"
    assert_same_answers([first, last], expected)
    assert (service.queue.batches, service.queue.sentences) == (1, 3)  # one batch, retried


def test_work_over_the_limits_is_refused_naming_the_limit_and_the_count(make_service,
                                                                        translator):
    one, two = (len(ids) for ids in translator.tokenizer.encode_sources(
        [RAJESH, SENTENCES[0]]))
    items = [{"src": RAJESH}, {"src": SENTENCES[0]}]
    service = make_service(Limits(sentence_pieces=one - 1))
    with pytest.raises(ServiceError) as refused:
        answer_of(service, items)
    assert refused.value.kind == "too_large" and SERVICE_STATUS["too_large"] == 413
    assert refused.value.message == (f"sentence 0 has {one} source pieces, more than this "
                                     f"server's limit of {one - 1} a sentence; split it")
    service = make_service(Limits(sentence_pieces=one, request_pieces=one + two - 1))
    with pytest.raises(ServiceError) as refused:
        answer_of(service, items)
    assert refused.value.kind == "too_large"
    assert f"the request has {one + two} source pieces, more than this server's limit of " \
           f"{one + two - 1} a request" in refused.value.message
    assert service.queue.waiting() == (0, 0)  # refused before queueing
    at_the_limits = make_service(Limits(sentence_pieces=one, request_pieces=one + two),
                                 start=True)
    assert [r["src"] for r in answer_of(at_the_limits, items)[0]] == [RAJESH, SENTENCES[0]]


def test_a_request_out_of_time_is_unavailable_and_leaves_the_queue(make_service):
    service = make_service(Limits(request_seconds=0.05))  # its queue never starts
    with pytest.raises(ServiceError) as refused:
        answer_of(service, [{"src": SENTENCES[0]}, {"src": SENTENCES[3]}])
    assert refused.value.kind == "unavailable" and SERVICE_STATUS["unavailable"] == 503
    assert "not translated within 0.05 seconds" in refused.value.message
    assert service.queue.waiting() == (0, 0)


def test_a_request_whose_client_went_away_leaves_the_queue(make_service):
    service = make_service()  # its queue never starts
    with pytest.raises(ServiceError) as refused:
        service.translate(parse_request(b'[{"src": "a"}, {"src": "b"}]'), gone=lambda: True)
    assert refused.value.kind == "unavailable" and "went away" in refused.value.message
    assert service.queue.waiting() == (0, 0)


def test_a_client_is_gone_once_it_closed_its_end():
    ours, theirs = socket.socketpair()
    try:
        assert not client_gone(ours)  # connected, nothing sent
        theirs.sendall(b"POST /translate HTTP/1.1\r\n")  # a pipelined next request
        assert not client_gone(ours)
        assert ours.recv(100)
        theirs.close()
        assert client_gone(ours)
    finally:
        ours.close()
    assert client_gone(ours)  # closed here


def test_align_false_computes_no_attention(make_service, translator):
    service = make_service(start=True)
    sentences = parse_request(json.dumps([{"src": RAJESH, "align": False}]).encode())
    assert sentences[0].options == Options(n_best=1, need_attention=False)
    [translation] = service.translations(sentences)
    assert translation.attention is None
    [[record]] = service.translate(sentences)
    assert "align" not in record and record["tgt"] == translator.translate([RAJESH])[0].text


def test_closing_interrupts_the_batch_being_decoded(make_service, translator):
    """A step made slow (a hook on the decoder's layer): once the service is closed, the
    request is answered "stopping" and the model is not called again."""
    service = make_service(start=True)
    decoding, closing, calls_after_close = threading.Event(), threading.Event(), []

    def slow_step(module, inputs):
        decoding.set()
        if closing.is_set():
            calls_after_close.append(module)
        time.sleep(0.02)

    hook = translator.model.decoder_layers[0].register_forward_pre_hook(slow_step)
    try:
        with ThreadPoolExecutor(1) as pool:
            future = pool.submit(answer_of, service, [{"src": s, "beam": 8} for s in SIXTEEN])
            assert decoding.wait(timeout=120)
            closing.set()
            service.close()
            refused = future.exception(timeout=120)
    finally:
        hook.remove()
    assert isinstance(refused, ServiceError) and refused.kind == "unavailable"
    assert "the server is stopping" in refused.message
    assert len(calls_after_close) <= 1  # the step under way when it closed, at most
    assert service.queue.waiting() == (0, 0)
    with pytest.raises(ServiceError, match="stopping"):  # and it takes no more
        answer_of(service, [{"src": SENTENCES[0]}])


# ---------------------------------------------------------------- what /translate answers


@pytest.mark.parametrize("beam, n_best", [(1, 1), (3, 2)])
def test_translate_equals_the_translator(server, translator, beam, n_best):
    status, answer = post(server, [{"src": s, "id": 0, "beam": beam, "n_best": n_best}
                                   for s in SENTENCES])
    assert status == 200
    expected = translator.translate(SENTENCES, beam_size=beam, n_best=n_best)
    assert len(answer) == n_best and all(len(rank) == len(SENTENCES) for rank in answer)
    for i, (source, translation) in enumerate(zip(SENTENCES, expected)):
        hypotheses = translation.nbest or [translation]
        for rank in range(n_best):
            record = answer[rank][i]
            hypothesis = hypotheses[min(rank, len(hypotheses) - 1)]
            assert set(record) >= {"src", "tgt", "n_best", "pred_score", "align"}
            assert record["src"] == source and record["n_best"] == n_best
            assert record["tgt"] == hypothesis.text
            assert record["pred_score"] == pytest.approx(hypothesis.score, abs=1e-5)
            assert record["align"] == links_of(hypothesis)
    assert answer[0][2]["tgt"] == "" and answer[0][2]["align"] == ""
    assert any("split into" in w for w in answer[0][4]["warnings"])  # the long one


def test_the_run_settings_apply_by_default_and_attention_is_the_default_view(server,
                                                                             translator):
    status, answer = post(server, [{"src": RAJESH, "attention": True}])
    assert status == 200
    [expected] = translator.translate([RAJESH])  # the run's search: section
    record = answer[0][0]
    assert record["tgt"] == expected.text
    words = word_alignment(expected.attention, expected.source_pieces,
                           expected.target_pieces).to_dict()
    attention = record["attention"]
    assert attention["source_words"] == words["source_words"] == RAJESH.split()
    assert attention["target_words"] == words["target_words"]
    assert attention["weights"] == words["weights"]
    assert attention["view"].startswith("layer 0 (of 0–0), mean of heads")
    assert "attention" not in post(server, [{"src": RAJESH}])[1][0][0]


def test_the_service_answers_and_refuses_without_a_socket(translator):
    """The translation service knows no HTTP: its refusals are its own (`ServiceError` and
    its kind), which the transport maps to status codes."""
    service = TranslationService(translator)
    body = json.dumps([{"src": SENTENCES[0], "beam": 1}]).encode()
    [[record]] = service.translate(parse_request(body))
    assert record["tgt"] == translator.translate([SENTENCES[0]], beam_size=1)[0].text
    with pytest.raises(ServiceError) as refused:
        service.translate(parse_request(b'[{"src": "x", "n_best": 32}]'))
    assert refused.value.kind == "invalid" and "ask for a beam" in refused.value.message
    with pytest.raises(ServiceError) as refused:
        parse_request(b'[{"src": "x", "id": 3}]')
    assert refused.value.kind == "unknown" and SERVICE_STATUS["unknown"] == 404
    with pytest.raises(ServiceError, match="the translation is empty"):
        service.explorer_page(" ")
    page = service.explorer_page(SENTENCES[0])  # the form posts back; the file's posts nowhere
    assert "form-action 'self'" in page and '<body>\n<form method="get"' in page


def test_health_and_models(server, tiny_run):
    status, headers, body = request(server, "GET", "/health")
    health = json.loads(body)
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    assert health["status"] == "ok" and health["run"] == str(tiny_run)
    assert health["direction"] == "hi-en" and health["device"] == "cpu"
    assert health["backend"] == "torch" and "commit" in health
    status, _, body = request(server, "GET", "/models")
    [model] = json.loads(body)
    assert status == 200 and model["model_id"] == 0 and model["loaded"] is True
    assert model["opt"]["beam_size"] == 4  # SearchConfig's default, the tiny run's


# ---------------------------------------------------------------- bad requests


BAD_REQUESTS = {
    "invalid JSON": (b'[{"src": "a",]', 400, "not valid JSON"),
    "not a list": (b'{"src": "a"}', 400, "JSON list"),
    "an item that is no object": (b'["a"]', 400, "must be an object"),
    "src of the wrong type": (b'[{"src": 5}]', 400, '"src" must be a string'),
    "no src": (b'[{"id": 0}]', 400, 'no "src"'),
    "beam of the wrong type": (b'[{"src": "a", "beam": "5"}]', 400, "beam must be a whole"),
    "beam true": (b'[{"src": "a", "beam": true}]', 400, "beam must be a whole"),
    "beam 0": (b'[{"src": "a", "beam": 0}]', 400, "between 1 and"),
    "n_best over the beam": (b'[{"src": "a", "beam": 2, "n_best": 3}]', 400, "more than"),
    "two n_best": (b'[{"src": "a", "n_best": 1}, {"src": "b", "beam": 2, "n_best": 2}]',
                   400, "same n_best"),
    "attention of the wrong type": (b'[{"src": "a", "attention": "yes"}]', 400,
                                    '"attention" must be'),
    "an unknown language": (b'[{"src": "a", "to": "fr"}]', 400, '"to" must be'),
    "a language this model does not write": (b'[{"src": "a", "to": "hi"}]', 400,
                                              "cannot translate into Hindi"),
    "non-UTF-8": ('[{"src": "राजेश"}]'.encode("utf-16"), 400, "not UTF-8"),
    "latin-1 bytes": (b'[{"src": "caf\xe9"}]', 400, "not UTF-8"),
    "an empty list": (b"[]", 400, "no sentences"),
    "an unknown field": (b'[{"src": "a", "id": 0, "beam_size": 4}]', 400,
                         "unknown field 'beam_size'"),
    "another model id": (b'[{"src": "a", "id": 3}]', 404, "only model 0"),
    "too many sentences": (json.dumps([{"src": "a"}] * (MAX_SENTENCES + 1)).encode(), 413,
                           "more than 64"),
    "a 2 MB body": (b'[{"src": "' + b"a" * 2_000_000 + b'"}]', 413, "more than 1,000,000"),
    "align of the wrong type": (b'[{"src": "a", "align": 1}]', 400, '"align" must be'),
    # a word "क" is one or two pieces: 300 of them are over 256 a sentence, 64 sentences of
    # 100 (each under 256) over 4,096 a request
    "a sentence over the piece limit": (json.dumps([{"src": "क " * 300}]).encode(), 413,
                                        "limit of 256 a sentence"),
    "a request over the piece limit": (json.dumps([{"src": "क " * 100}] * 64).encode(), 413,
                                       "limit of 4,096 a request"),
}


@pytest.mark.parametrize("name", list(BAD_REQUESTS))
def test_a_bad_request_is_a_4xx_in_one_sentence_and_the_server_goes_on(server, name):
    body, status, fragment = BAD_REQUESTS[name]
    got, answer = post(server, body)
    assert got == status, answer
    assert set(answer) == {"error"} and fragment in answer["error"]
    assert "\n" not in answer["error"] and len(answer["error"]) < 200
    good, answer = post(server, [{"src": SENTENCES[0], "beam": 1}])
    assert good == 200 and answer[0][0]["tgt"]


@pytest.mark.parametrize("method, path, status, fragment", [
    ("GET", "/nothing", 404, "nothing at /nothing"),
    ("GET", "/translate", 405, "takes POST"),
    ("POST", "/health", 404, "POST to /translate"),
    ("PUT", "/translate", 405, "PUT is not served"),
    ("DELETE", "/", 405, "DELETE is not served"),
])
def test_wrong_paths_and_methods(server, method, path, status, fragment):
    got, _, body = request(server, method, path, b"[]" if method != "GET" else None)
    assert got == status and fragment in json.loads(body)["error"]


def raw_exchange(server, data: bytes, wait: float = 30.0, half_close: bool = False) -> bytes:
    """Send ``data`` as it is on one connection (``half_close``: then end the sending side)
    and read until the server closes it; every read has a deadline of ``wait`` seconds."""
    with socket.create_connection(server.server_address[:2], timeout=wait) as connection:
        connection.sendall(data)
        if half_close:
            connection.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := connection.recv(65536):
            received += chunk
    return received


def test_a_body_without_length_or_cut_short_or_too_slow_is_refused(server):
    chunked = raw_exchange(server, b"POST /translate HTTP/1.1\r\nHost: x\r\n"
                           b"Transfer-Encoding: chunked\r\n\r\n5\r\n[{}]\r\n0\r\n\r\n")
    assert chunked.startswith(b"HTTP/1.1 411") and b"Content-Length" in chunked
    bare = raw_exchange(server, b"POST /translate HTTP/1.1\r\nHost: x\r\n\r\n")
    assert bare.startswith(b"HTTP/1.1 411")
    bad_length = raw_exchange(server, b"POST /translate HTTP/1.1\r\nHost: x\r\n"
                              b"Content-Length: lots\r\n\r\n")
    assert bad_length.startswith(b"HTTP/1.1 400")
    # 9 of 100 bytes, then silence: the read times out (1 s here) and is answered 408
    slow = raw_exchange(server, b"POST /translate HTTP/1.1\r\nHost: x\r\n"
                        b"Content-Length: 100\r\n\r\n[{\"src\": ")
    assert slow.startswith(b"HTTP/1.1 408") and b"within 1 seconds" in slow
    # 9 of 100 bytes, then the client's end: a body cut short, a 400 that says so
    cut = raw_exchange(server, b"POST /translate HTTP/1.1\r\nHost: x\r\n"
                       b"Content-Length: 100\r\n\r\n[{\"src\": ", half_close=True)
    assert cut.startswith(b"HTTP/1.1 400")
    assert b"the body ended after 9 of its 100 bytes" in cut
    # a connection that sends nothing is closed after the same timeout
    assert raw_exchange(server, b"") == b""
    garbage = raw_exchange(server, b"\x16\x03\x01 not http at all\r\n\r\n")  # TLS, say
    assert b'{"error": "Bad request' in garbage
    assert post(server, [{"src": SENTENCES[0], "beam": 1}])[0] == 200


def test_head_answers_the_headers_of_get_without_the_body(server):
    status, headers, body = request(server, "GET", "/models")
    # read as bytes, to the connection's end: nothing may follow the headers
    head = raw_exchange(server, b"HEAD /models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    head_lines, after = head.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200") and after == b""
    assert f"Content-Length: {len(body)}".encode() in head_lines
    assert f"Content-Type: {headers['Content-Type']}".encode() in head_lines
    assert request(server, "HEAD", "/nothing")[0] == 404


def test_expect_100_continue_is_answered_before_the_body(server, translator):
    body = json.dumps([{"src": SENTENCES[0], "beam": 1}]).encode("utf-8")
    head = (f"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n"
            "Expect: 100-continue\r\nConnection: close\r\n\r\n").encode()
    with socket.create_connection(server.server_address[:2], timeout=60) as connection:
        connection.sendall(head)
        interim = connection.recv(65536)  # before the body is sent
        assert interim.startswith(b"HTTP/1.1 100 Continue")
        connection.sendall(body)
        received = interim
        while chunk := connection.recv(65536):
            received += chunk
    final = received[received.index(b"\r\n\r\n") + 4:]
    assert final.startswith(b"HTTP/1.1 200")
    answer = json.loads(final[final.index(b"\r\n\r\n") + 4:])
    assert answer[0][0]["tgt"] == translator.translate(SENTENCES[:1], beam_size=1)[0].text
    # a body too large is refused at once, without waiting for it (nor a 100 Continue)
    too_large = raw_exchange(server, b"POST /translate HTTP/1.1\r\nHost: x\r\n"
                             b"Content-Length: 5000000\r\nExpect: 100-continue\r\n\r\n")
    assert too_large.startswith(b"HTTP/1.1 413") and b"5,000,000 bytes" in too_large


def test_a_failure_inside_is_a_500_and_the_next_request_is_answered(server, translator,
                                                                     monkeypatch):
    translate = translator.translate  # the unfailing one, for the expected answer
    fail_on_the_word_fail(translator, monkeypatch)
    status, answer = post(server, [{"src": "FAIL"}])
    assert status == 500
    assert answer == {"error": "the server failed on this request (RuntimeError); it goes on "
                               "serving"}
    status, answer = post(server, [{"src": SENTENCES[0], "beam": 1}])
    assert status == 200 and answer[0][0]["tgt"] == translate(SENTENCES[:1], beam_size=1)[0].text


def test_keep_alive_serves_many_requests_on_one_connection(server, translator):
    host, port = server.server_address[:2]
    expected = {t.source: t.text for t in translator.translate(SENTENCES[:2], beam_size=1,
                                                                need_attention=False)}
    connection = http.client.HTTPConnection(host, port, timeout=180)
    try:  # requests back to back: the server closes a connection idle for its read timeout
        for source in SENTENCES[:2] * 2:
            body = json.dumps([{"src": source, "beam": 1}]).encode()
            connection.request("POST", "/translate", body=body)
            response = connection.getresponse()
            assert response.status == 200
            assert json.loads(response.read())[0][0]["tgt"] == expected[source]
    finally:
        connection.close()


# ---------------------------------------------------------------- under load


def test_sixteen_concurrent_clients_get_the_sequential_answers(server):
    expected = [post(server, [{"src": s, "beam": 1}])[1] for s in SIXTEEN]
    batches_before = server.service.queue.batches
    barrier = threading.Barrier(len(SIXTEEN), timeout=120)

    def client(source: str) -> object:
        barrier.wait()  # all at once
        status, answer = post(server, [{"src": source, "beam": 1}])
        assert status == 200, answer
        return answer

    with ThreadPoolExecutor(len(SIXTEEN)) as pool:
        answers = list(pool.map(client, SIXTEEN, timeout=600))
    assert_same_answers(answers, expected)
    assert server.service.queue.batches - batches_before <= len(SIXTEEN)


def vanish_mid_body(server) -> None:
    """A client that sends half its body and goes away."""
    with socket.create_connection(server.server_address[:2], timeout=30) as connection:
        connection.sendall(b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n"
                           b'\r\n[{"src": ')


def vanish_before_the_answer(server) -> None:
    """A client that sends a whole request of 8 sentences, greedy (as the good clients: they
    share batches), and goes away without reading the answer."""
    body = json.dumps([{"src": RAJESH, "beam": 1}] * 8).encode("utf-8")
    with socket.create_connection(server.server_address[:2], timeout=30) as connection:
        connection.sendall(b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Length: "
                           + str(len(body)).encode() + b"\r\n\r\n" + body)


def good_client(server, sources: list[str]) -> list:
    """One keep-alive connection sending one greedy one-sentence request per source."""
    host, port = server.server_address[:2]
    connection = http.client.HTTPConnection(host, port, timeout=300)
    answers = []
    try:
        for source in sources:
            connection.request("POST", "/translate",
                               body=json.dumps([{"src": source, "beam": 1}]).encode())
            response = connection.getresponse()
            answers.append((response.status, json.loads(response.read())))
    finally:
        connection.close()
    return answers


def assert_same_exchanges(got: list[tuple[int, list]], expected: list[tuple[int, list]]
                          ) -> None:
    """The same statuses, and the same answers (`assert_same_answers`)."""
    assert [status for status, _ in got] == [status for status, _ in expected]
    assert_same_answers([answer for _, answer in got], [answer for _, answer in expected])


def test_bad_and_vanishing_clients_do_not_affect_the_others(server):
    sources = SIXTEEN[:8]
    expected = [post(server, [{"src": s, "beam": 1}]) for s in sources]
    assert [status for status, _ in expected] == [200] * len(sources)
    with ThreadPoolExecutor(12) as pool:
        goods = [pool.submit(good_client, server, sources[i:] + sources[:i]) for i in range(4)]
        others = [pool.submit(job, server) for job in (vanish_mid_body, vanish_before_the_answer)
                  for _ in range(3)]
        bad = [pool.submit(post, server, b'[{"src": ') for _ in range(3)]
        answers = [future.result(timeout=600) for future in goods]
        for future in others:
            future.result(timeout=600)
        assert all(future.result(timeout=600)[0] == 400 for future in bad)
    for i, answer in enumerate(answers):
        assert_same_exchanges(answer, expected[i:] + expected[:i])
    status, _, body = request(server, "GET", "/health")
    assert status == 200 and json.loads(body)["status"] == "ok"


def longest_sentence(translator, pieces: int) -> str:
    """Words of RAJESH, over and over, up to ``pieces`` source pieces."""
    words, text = RAJESH.split(), ""
    for i in range(10 * pieces):
        longer = f"{text} {words[i % len(words)]}".strip()
        if len(translator.tokenizer.encode_source(longer)) > pieces:
            return text
        text = longer
    raise AssertionError("unreachable")


def test_under_load_and_abuse_good_answers_stay_right_while_a_maximal_request_runs(
        translator, monkeypatch):
    """#34's load run, small: a maximal legal request (8 sentences at the piece limit, beam
    32), 4 good clients, and bad ones (2 MB body, over the piece limits, 65 sentences,
    non-UTF-8, half-sent and vanishing bodies, an idle connection): the good requests that
    arrive while the maximal one's first batch decodes (held until they are queued) are
    decoded next, before the rest of it; every good answer is the sequential one, within
    the time budget (not a 503); every bad one is its 4xx; the stop is clean (the idle
    connection is closed, the serving thread ends)."""
    limits = Limits(sentence_pieces=48, request_pieces=8 * 48, batch_pieces=96,
                    request_seconds=240)
    server = make_server(translator, "127.0.0.1", 0, quiet=True, read_timeout=30.0,
                         limits=limits)
    serving = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    serving.start()
    try:
        sources = [f"{SENTENCES[i % 2 * 3]} {i}" for i in range(4)]  # under 48 pieces
        expected = [post(server, [{"src": s, "beam": 1}]) for s in sources]
        assert [status for status, _ in expected] == [200] * 4
        maximal = [{"src": longest_sentence(translator, 48), "beam": 32}] * 8
        bad = {b'[{"src": "' + b"a" * 2_000_000 + b'"}]': 413,
               json.dumps([{"src": "क " * 200}]).encode(): 413,
               json.dumps([{"src": SENTENCES[0]}] * 20).encode(): 413,  # over 8 x 48 pieces
               json.dumps([{"src": "a"}] * (MAX_SENTENCES + 1)).encode(): 413,
               '[{"src": "राजेश"}]'.encode("utf-16"): 400, b"[]": 400}
        idle = socket.create_connection(server.server_address[:2], timeout=120)
        calls = record_batches(monkeypatch, translator)
        queue, queued = server.service.queue, threading.Event()

        def hold(module, inputs) -> None:  # a pre-hook's value would replace the inputs
            queued.wait(timeout=120)

        held = translator.model.decoder_layers[0].register_forward_pre_hook(hold)
        with ThreadPoolExecutor(16) as pool:
            big = pool.submit(post, server, maximal)
            wait_until(lambda: queue.waiting() == (6, 2), "the maximal request's first batch")
            goods = [pool.submit(good_client, server, sources[i:] + sources[:i])
                     for i in range(4)]
            wait_until(lambda: queue.waiting() == (10, 2), "the good requests queued")
            queued.set()
            held.remove()
            refused = {body: pool.submit(post, server, body) for body in bad}
            vanished = [pool.submit(job, server) for job in (vanish_mid_body,
                                                             vanish_before_the_answer)]
            for i, future in enumerate(goods):
                assert_same_exchanges(future.result(timeout=600), expected[i:] + expected[:i])
            for body, future in refused.items():
                status, answer = future.result(timeout=600)
                assert status == bad[body] and set(answer) == {"error"}, answer
            for future in vanished:
                future.result(timeout=600)
            status, answer = big.result(timeout=600)
        assert status == 200 and len(answer[0]) == 8
        # the first batch: two of the maximal request's sentences (96 pieces); then every
        # good request queued meanwhile, before any more of it
        assert calls[0][0] == [maximal[0]["src"]] * 2
        later = [text for texts, _ in calls[1:] for text in texts]
        assert max(later.index(source) for source in sources) < later.index(maximal[0]["src"])
    finally:
        queued.set()
        server.shutdown()
        server.server_close()
        serving.join(timeout=60)
    assert not serving.is_alive()
    assert idle.recv(1) == b""  # closed by the stop, not by its read timeout (30 s)
    idle.close()


# ---------------------------------------------------------------- the page


def test_the_page_and_the_explorer_keep_their_strict_policy(server, translator):
    status, headers, body = request(server, "GET", "/")
    page = body.decode("utf-8")
    policy = headers["Content-Security-Policy"]
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert "default-src 'none'" in policy and "form-action 'self'" in policy
    assert '<form method="get" action="/"' in page and "<script" not in page
    status, headers, body = request(server, "GET", "/?text=" + quote(RAJESH))
    page = body.decode("utf-8")
    policy = headers["Content-Security-Policy"]
    assert status == 200 and f'id="{DATA_ID}"' in page
    assert "default-src 'none'" in policy and "form-action 'self'" in policy
    assert "connect-src" not in policy and "form-action 'none'" not in page
    assert not re.search(r"""(src|href|action)=["']?(https?:|//)""", page)
    data = json.loads(re.search(rf'id="{DATA_ID}">(.*?)</script>', page, re.DOTALL).group(1))
    [expected] = translator.translate([RAJESH])
    assert data["source"] == RAJESH and data["translation"] == expected.text
    assert data["source_words"] == RAJESH.split()
    # text the page echoes back is escaped
    status, _, body = request(server, "GET", "/?text=" + quote('</textarea><script>x</script>'))
    assert b"<script>x</script>" not in body


def test_the_page_says_what_is_wrong_with_a_sentence(server):
    status, _, body = request(server, "GET", "/?text=" + quote("क" * 3000))
    assert status == 400 and b"more than the 2000" in body and b"<form" in body


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (apt-get install chromium)")
def test_in_chromium_the_typed_sentence_shows_its_explorer(server, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    origin = server.url.rstrip("/")
    requests, errors = [], []
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM,
                                             args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1000, "height": 700})
            page.set_default_timeout(120_000)  # a busy machine renders slowly
            page.on("request", lambda r: requests.append(r.url))
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.on("console", lambda message: errors.append(message.text)
                    if message.type == "error" and "favicon" not in message.text else None)
            page.goto(server.url)
            page.fill("#text", RAJESH)
            with page.expect_navigation():
                page.click("#submit")
            page.wait_for_selector("#grid rect")
            page.wait_for_function("document.getElementById('diagnostics').textContent"
                                   ".includes('rendered')")
            report = json.loads(page.text_content("#diagnostics"))
            shot = page.screenshot(full_page=True)
            assert page.input_value("#text") == RAJESH  # the box keeps the sentence
        finally:
            browser.close()
    assert errors == [] and report["errors"] == [] and report["blocked"] == []
    assert report["rendered"].startswith("layer 0 (of 0–0), mean of heads")
    assert report["grid"]["width"] > 100
    assert requests and all(urlsplit(url).netloc == urlsplit(origin).netloc
                            for url in requests), requests
    from PIL import Image

    with Image.open(io.BytesIO(shot)) as image:
        colours = image.convert("RGB").getcolors(maxcolors=1_000_000)
    assert colours is not None and len(colours) > 20  # a drawn grid, not a blank page


# ---------------------------------------------------------------- the command


class ServeProcess:
    """``python -m translator serve ARGUMENTS`` in a process of its own, its standard error
    read by a thread, so that every wait for a line has a deadline; killed on leaving."""

    def __init__(self, *arguments: str) -> None:
        environment = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "translator", "serve", "--port", "0", "--device", "cpu",
             *arguments], stderr=subprocess.PIPE, text=True, env=environment)
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stderr:
            self.lines.put(line)
        self.lines.put(None)

    def wait_for(self, pattern: str, timeout: float = 240.0) -> re.Match:
        """The first line from now on that ``pattern`` matches."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                raise AssertionError(f"the server ended: {''.join(self.seen)}")
            self.seen.append(line)
            if found := re.search(pattern, line):
                return found
        raise AssertionError(f"no line {pattern!r} within {timeout:g} s: {''.join(self.seen)}")

    def address(self) -> tuple[str, int]:
        netloc = urlsplit(self.wait_for(r"serving (http://[^/]+)/").group(1)).netloc
        host, port = netloc.rsplit(":", 1)
        return host, int(port)

    def stop(self, signum: int = signal.SIGTERM, timeout: float = 60.0) -> tuple[int, str]:
        """Send ``signum``; the exit code and the rest of standard error."""
        self.process.send_signal(signum)
        code = self.process.wait(timeout=timeout)
        while (line := self.lines.get(timeout=timeout)) is not None:
            self.seen.append(line)
        return code, "".join(self.seen)

    def __enter__(self) -> "ServeProcess":
        return self

    def __exit__(self, *exception) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=60)


class Address:
    """What `request` and `post` need of a server: its address."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.server_address = address


@pytest.mark.parametrize("signum, host", [(signal.SIGTERM, "127.0.0.1"),
                                          (signal.SIGINT, "127.0.0.2")])
def test_the_command_stops_on_a_signal_answering_the_request_in_flight(tiny_run, signum,
                                                                       host):
    """A batch gathers for 10 minutes here, so the request is in flight when the signal
    comes: it is answered 503, and the server exits 0 at once."""
    with ServeProcess("--run", str(tiny_run), "--host", host, "--gather-ms", "600000") as serve:
        server = Address(serve.address())
        status, _, body = request(server, "GET", "/health")
        assert status == 200 and json.loads(body)["status"] == "ok"
        with ThreadPoolExecutor(1) as pool:
            in_flight = pool.submit(post, server, [{"src": SENTENCES[0]}])
            wait_until(lambda: json.loads(request(server, "GET", "/health")[2])["queue"]
                       == {"waiting": 1, "decoding": 0}, "the request queued")
            code, stderr = serve.stop(signum)
            status, answer = in_flight.result(timeout=60)
    assert code == 0 and "stopped" in stderr and "Traceback" not in stderr
    assert status == 503 and "the server is stopping" in answer["error"]
    assert ("warning: serving on 127.0.0.2" in stderr) == (host != "127.0.0.1")


@pytest.mark.parametrize("arguments, message", [
    (["--port", "70000"], "error: --port 70000 is not a port; use 0 to 65535"),
    (["--port", "-1"], "error: --port -1 is not a port"),
    (["--max-sentence-pieces", "0"], "error: --max-sentence-pieces must be at least 1, not 0"),
    (["--request-seconds", "0"], "error: --request-seconds must be at least 1, not 0"),
    (["--batch-pieces", "100"], "error: --batch-pieces (100) must be at least "
                                "--max-sentence-pieces (256)"),
])
def test_the_command_refuses_a_port_or_limit_out_of_range(tiny_run, capsys, arguments,
                                                           message):
    from translator import cli

    assert cli.main(["serve", "--run", str(tiny_run), *arguments]) == 2
    error = capsys.readouterr().err
    assert error.startswith(message) and error.count("\n") == 1


def test_the_command_lists_its_limits(capsys):
    from translator import cli

    with pytest.raises(SystemExit) as done:
        cli.main(["serve", "--help"])
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for flag, default in (("--max-sentence-pieces", 256), ("--max-request-pieces", 4096),
                          ("--request-seconds", 60), ("--batch-pieces", 1024),
                          ("--gather-ms", 5)):
        assert re.search(rf"{flag} \S+ .*?\(default {default}\)", text), flag


def test_the_command_serves_a_ctranslate2_export(tiny_run, tmp_path):
    pytest.importorskip("ctranslate2", reason="pip install -e '.[ct2]' to serve an export")
    from translator import cli

    export = tmp_path / "ct2"
    assert cli.main(["export-ct2", str(tiny_run), str(export), "--quantization",
                     "float32"]) == 0
    items = [{"src": SENTENCES[0], "beam": 1}, {"src": RAJESH, "beam": 1}]
    expected = Translator.from_export(export, device="cpu").translate(
        [item["src"] for item in items], beam_size=1)
    with ServeProcess("--backend", "ct2", "--run", str(export), "--quiet") as serve:
        server = Address(serve.address())
        status, _, body = request(server, "GET", "/health")
        assert status == 200 and json.loads(body)["backend"] == "ct2"
        status, answer = post(server, items)
        code, stderr = serve.stop()
    assert status == 200
    assert [record["tgt"] for record in answer[0]] == [t.text for t in expected]
    assert [record["align"] for record in answer[0]] == [links_of(t) for t in expected]
    assert code == 0 and "Traceback" not in stderr


# ---------------------------------------------------------------- alternatives and a prefix


@pytest.mark.parametrize("beam", [1, 3])
def test_translate_with_alternatives_and_a_prefix(server, translator, beam):
    plain = [{"src": s, "beam": beam} for s in SENTENCES[:2]]
    asked = [dict(item, alternatives=True, prefix="The") for item in plain]
    status, answer = post(server, asked)
    assert status == 200
    expected = translator.translate(SENTENCES[:2], beam_size=beam, alternatives=ALTERNATIVES,
                                    prefix="The")
    for record, translation in zip(answer[0], expected):
        assert record["tgt"] == translation.text and record["tgt"].startswith("The")
        assert record["pred_score"] == pytest.approx(translation.score, abs=1e-5)
        # the same numbers up to float rounding (a batch of other sentences pads this one)
        steps = translation.steps()
        assert [s["piece"] for s in record["steps"]] == [s["piece"] for s in steps]
        assert [s["log_prob"] for s in record["steps"]] == pytest.approx(
            [s["log_prob"] for s in steps], abs=1e-4)
        assert [w["word"] for w in record["words"]] == [w["word"] for w in translation.words()]
        assert all(len(step["alternatives"]) == ALTERNATIVES for step in record["steps"])
    # without them the answer is OpenNMT-py's shape as before
    status, answer = post(server, plain)
    assert status == 200 and not {"steps", "words"} & set(answer[0][0])
    assert answer[0][0]["tgt"] == translator.translate(SENTENCES[:1], beam_size=beam)[0].text
    for bad, fragment in (({"alternatives": 5}, '"alternatives" must be true or false'),
                          ({"prefix": 3}, '"prefix" must be a string')):
        status, refused = post(server, [{"src": RAJESH, **bad}])
        assert status == 400 and fragment in refused["error"]
