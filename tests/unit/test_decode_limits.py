"""A producer's record cannot take its batch down through a key expression's decoders (``max_decoded_bytes``).

A key such as ``powertools_json(powertools_base64_gzip(body)).order_id`` inflates and parses data a producer
controls: a 250 KB body can inflate to hundreds of MB, or to millions of empty objects. Every decoder a key
expression or the Powertools cut-over uses stops at the limit, and the record fails alone with a key error.
"""

from __future__ import annotations

import base64
import datetime as dt
import gzip
import json
import os
import subprocess
import sys
import threading
import traceback
import zlib
from pathlib import Path

import pytest
from events import failures, sqs_event, sqs_record

from consumer import (
    DecodeLimitError,
    EventType,
    IdempotencyConfig,
    IdempotencyConfigError,
    IdempotencyKeyError,
    Outcome,
    PowertoolsCutover,
)
from consumer import _jmespath as jmespath_module
from consumer._jmespath import Budget, inflate
from consumer.keys import make_key
from persistence import InMemoryPersistenceLayer

ROOT = Path(__file__).resolve().parents[2]
GZIP_KEY = "powertools_json(powertools_base64_gzip(body)).order_id"
MiB = 1024 * 1024


def gzipped(*pieces: bytes, repeat: int = 1) -> str:
    """The base64 of gzip over ``pieces`` (the middle one ``repeat`` times), compressed as it streams."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    first, *middle, last = pieces
    out = [packer.compress(first)]
    out += [packer.compress(piece) for _ in range(repeat) for piece in middle]
    out += [packer.compress(last), packer.flush()]
    return base64.b64encode(b"".join(out)).decode()


def order(order_id: str) -> str:
    return gzipped(json.dumps({"order_id": order_id}).encode(), b"", b"")


# A 200 MiB order (272 KB as an SQS body); 6 MiB less one byte of empty objects (2M of them: 150 MB parsed).
INFLATING = gzipped(b'{"order_id": "bomb", "pad": "', b"a" * MiB, b'"}', repeat=200)
OBJECTS = gzipped(b"[{}", b",{}" * 65536, b"]" + b" " * (6 * MiB - 1 - 4 - 3 * 65536 * 31), repeat=31)

CHILD = r"""
import json, resource, sys
from consumer import BatchProcessor, EventType, IdempotencyConfig, process_partial_response
from persistence import SQLitePersistenceLayer

event = json.loads(open(sys.argv[1]).read())
def address_space():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:"))
cap = address_space() + int(sys.argv[3])  # what the batch may take beyond the interpreter, the library and the event
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
ran = []
config = IdempotencyConfig(event_key_jmespath=sys.argv[4])
processor = BatchProcessor(EventType.SQS, store=SQLitePersistenceLayer(sys.argv[2]), config=config)
response = process_partial_response(event, lambda record: ran.append(record.message_id), processor)
errors = {i.item_id: [type(i.error).__name__, str(i.error)] for i in processor.items if i.error is not None}
print(json.dumps({"response": response, "ran": ran, "errors": errors}))
"""


def test_gzip_and_json_bombs_fail_their_records_alone_under_a_128_mib_memory_cap(tmp_path):
    # A Lambda function out of memory is killed, with no partial response: every record of the batch comes back.
    # Here the batch runs with 128 MiB of address space beyond what it had loaded; unbounded, either bomb needs more
    # (422 MiB of RSS without the cap), and meets a MemoryError where Lambda would have killed the function.
    assert len(OBJECTS) < 256 * 1024
    assert len(INFLATING) < 300 * 1024
    assert len(gzip.decompress(base64.b64decode(OBJECTS))) == 6 * MiB - 1  # within the inflate limit: parsed
    records = [
        sqs_record("m-1", order("o-1"), raw_body=True),
        sqs_record("bomb-inflating", INFLATING, raw_body=True),
        sqs_record("m-2", order("o-2"), raw_body=True),
        sqs_record("bomb-objects", OBJECTS, raw_body=True),
        sqs_record("m-3", order("o-3"), raw_body=True),
    ]
    (tmp_path / "event.json").write_text(json.dumps(sqs_event(*records)))
    run = subprocess.run(
        [sys.executable, "-c", CHILD, "event.json", "store.sqlite3", str(128 * MiB), GZIP_KEY],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    outcome = json.loads(run.stdout)
    assert outcome["ran"] == ["m-1", "m-2", "m-3"]
    assert failures(outcome["response"]) == ["bomb-inflating", "bomb-objects"]
    inflating, objects = outcome["errors"]["bomb-inflating"], outcome["errors"]["bomb-objects"]
    assert inflating[0] == objects[0] == "DecodeLimitError", f"out of memory, Lambda kills the batch: {outcome}"
    assert "record 'bomb-inflating': powertools_base64_gzip() inflates at most 6291456 bytes" in inflating[1]
    assert "record 'bomb-objects': powertools_json() parses at most 6291456 characters" in objects[1]


def test_past_the_inflate_limit_the_key_error_names_the_function_the_limit_and_the_record_and_quotes_nothing():
    config = IdempotencyConfig(
        event_key_jmespath="json_parse(base64_gzip_decode(body)).order_id", max_decoded_bytes=1000
    )
    fits = {"messageId": "m-1", "body": gzipped(b'{"order_id": "o-1", "pad": "', b"x" * 970, b'"}')}
    assert len(gzip.decompress(base64.b64decode(fits["body"]))) == 1000  # exactly the limit: decoded
    assert make_key(fits, config) == make_key({"id": "o-1"}, IdempotencyConfig(event_key_jmespath="id"))
    past = {"messageId": "m-2", "body": gzipped(b'{"order_id": "o-2", "pad": "', b"SECRET" * 162, b'"}')}
    with pytest.raises(DecodeLimitError) as refused:
        make_key(past, config)
    assert isinstance(refused.value, IdempotencyKeyError)
    assert (refused.value.function, refused.value.limit) == ("base64_gzip_decode", 1000)
    assert str(refused.value) == (
        "event_key_jmespath 'json_parse(base64_gzip_decode(body)).order_id' failed on record 'm-2': "
        "base64_gzip_decode() inflates at most 1000 bytes per record, all of the expression's calls together "
        "(max_decoded_bytes): this data inflates past the 1000 bytes left"
    )
    assert "SECRET" not in "".join(traceback.format_exception(refused.value))


@pytest.mark.parametrize(
    ("text", "limit", "refused"),
    [
        ('{"a": "' + "x" * 25 + '"}', 34, False),  # 34 characters: the limit (one '{' and one ':', 2 per 32 bytes)
        ('{"a": "' + "x" * 25 + '"}', 33, True),
        ("[" + ",".join(["[0]"] * 4) + "]", 16 * 8, False),  # 5 '[', 3 ',': 8 of them, one per 16 bytes
        ("[" + ",".join(["[0]"] * 5) + "]", 16 * 9, True),  # 10 of them
        ("{" + ",".join(f'"{k}":0' for k in "abcd") + "}", 16 * 8, False),  # 1 '{', 4 ':', 3 ','
        ("{" + ",".join(f'"{k}":0' for k in "abcd") + "}", 16 * 8 - 1, True),
    ],
)
def test_json_parse_reads_at_most_the_limit_with_one_brace_bracket_colon_or_comma_per_16_bytes_of_it(
    text, limit, refused
):
    config = IdempotencyConfig(event_key_jmespath="json_parse(body)", max_decoded_bytes=limit)
    record = {"body": text}
    if not refused:
        assert make_key(record, config) == make_key({"k": json.loads(text)}, IdempotencyConfig(event_key_jmespath="k"))
        return
    with pytest.raises(DecodeLimitError, match=rf"json_parse\(\) parses at most {limit} characters"):
        make_key(record, config)


def test_base64_decode_refuses_a_text_that_decodes_past_the_limit():
    config = IdempotencyConfig(event_key_jmespath="base64_decode(data)", max_decoded_bytes=6)
    assert make_key({"data": base64.b64encode(b"abcdef").decode()}, config) is not None
    with pytest.raises(DecodeLimitError, match=r"base64_decode\(\) decodes at most 6 bytes"):
        make_key({"data": base64.b64encode(b"abcdefg").decode()}, config)


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ("[" * 100_000 + "]" * 100_000, "maximum recursion depth exceeded"),  # RecursionError, not a crash
        ('{"order_id": 1' + "0" * 5000 + "}", "Exceeds the limit (4300 digits)"),  # int("1000...") refuses
    ],
    ids=["deep-nesting", "huge-integer"],
)
def test_json_the_parser_refuses_is_the_records_key_error(face, body, said):
    processor = face.processor(
        EventType.SQS, store=InMemoryPersistenceLayer(), config=IdempotencyConfig(event_key_jmespath=GZIP_KEY)
    )
    event = sqs_event(
        sqs_record("m-1", order("o-1"), raw_body=True),
        sqs_record("m-2", gzipped(body.encode(), b"", b""), raw_body=True),
    )
    assert failures(face.process(event, lambda record: None, processor)) == ["m-2"]
    [ok, bad] = processor.items
    assert ok.outcome is Outcome.PROCESSED
    assert bad.outcome is Outcome.FAILED
    assert type(bad.error) is IdempotencyKeyError, repr(bad.error)
    assert said in str(bad.error)
    assert "0000000000" not in str(bad.error)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        gzip.compress(b"one", mtime=0) + gzip.compress(b"two", mtime=0),
        gzip.compress(b"padded", mtime=0) + b"\0" * 5000 + gzip.compress(b"apart", mtime=0) + b"\0\0",
        gzip.compress(b"", mtime=0) * 3000,  # many members: each copies no more than a chunk of what follows
        gzip.compress(os.urandom(20_000), mtime=0),  # incompressible: several chunks per member
    ],
    ids=["empty", "two-members", "zero-padding", "many-empty-members", "incompressible"],
)
def test_the_bounded_inflate_reads_what_gzip_decompress_reads(data):
    assert inflate(data, Budget(100_000), "f") == gzip.decompress(data)


@pytest.mark.parametrize(
    "data",
    [b"not gzip", gzip.compress(b"cut")[:-3], gzip.compress(b"a") + b"junk", b"\0" + gzip.compress(b"a")],
    ids=["not-gzip", "truncated", "trailing-junk", "leading-zero"],
)
def test_the_bounded_inflate_refuses_what_gzip_decompress_refuses_with_its_error_type(data):
    with pytest.raises((OSError, EOFError)) as theirs:
        gzip.decompress(data)
    with pytest.raises(theirs.type):
        inflate(data, Budget(100), "f")


def cutover_reading_into(read: list[object], expression: str) -> PowertoolsCutover:
    """A cut-over keyed by ``expression`` whose Powertools table notes each read in ``read`` and holds nothing."""

    class Table:
        def get_item(self, **request: object) -> dict[str, object]:
            read.append(request)
            return {}

    return PowertoolsCutover(
        table_name="pt", until=dt.datetime(2099, 1, 1, tzinfo=dt.timezone.utc), key_prefix="p",
        event_key_jmespath=expression, boto3_client=Table(),  # type: ignore[arg-type]
    )  # fmt: skip


def test_the_powertools_cutover_fails_the_record_unrun_on_a_bomb_in_its_own_key(face):
    # Our key is the message id; Powertools' inflated the body. Unbounded, Powertools may have keyed this record,
    # so it is not "a record Powertools kept no record of" (which would run the body): it fails, our lock released.
    read: list[object] = []
    cutover = cutover_reading_into(read, GZIP_KEY)
    store = InMemoryPersistenceLayer()
    config = IdempotencyConfig(event_key_jmespath="messageId", powertools_cutover=cutover, max_decoded_bytes=MiB)
    ran: list[str] = []
    with pytest.raises(DecodeLimitError, match="the Powertools cut-over's key of") as refused:
        face.guarded({"messageId": "m-1", "body": INFLATING}, lambda _: ran.append("m-1"), store=store, config=config)
    assert (refused.value.function, refused.value.limit) == ("powertools_base64_gzip", MiB)
    assert ran == []
    assert read == []
    assert list(store.scan()) == []  # our lock was released
    # Within the limit, Powertools' key is read as before.
    face.guarded({"messageId": "m-2", "body": order("o-2")}, lambda _: ran.append("m-2"), store=store, config=config)
    assert ran == ["m-2"]
    assert len(read) == 1


def test_max_decoded_bytes_must_be_positive():
    with pytest.raises(IdempotencyConfigError, match="max_decoded_bytes must be positive, got 0"):
        IdempotencyConfig(max_decoded_bytes=0)


def test_the_missing_key_hint_decodes_a_producers_field_within_the_bound():
    # body.order_id selects nothing on a body of base64 gzip: the hint decodes the body to name the fix, and a bomb
    # there must stop at the bound as the key functions do (it inflated without one, on the failure path).
    def gzipped(text: str) -> str:
        return base64.b64encode(gzip.compress(text.encode())).decode()

    config = IdempotencyConfig(event_key_jmespath="body.order_id")
    small = sqs_record("m-1", gzipped('{"order_id": 1}'), raw_body=True)
    with pytest.raises(IdempotencyKeyError, match=r"powertools_json\(powertools_base64_gzip\(body\)\)\.order_id"):
        make_key(small, config)
    bomb = sqs_record("m-2", gzipped('{"order_id": 1, "pad": "' + "x" * (7 * MiB) + '"}'), raw_body=True)
    with pytest.raises(IdempotencyKeyError) as refused:
        make_key(bomb, config)
    assert str(refused.value) == "no idempotency key: 'body.order_id' selected nothing on SQS message m-2"


# -- one budget per evaluation of an expression on a record, shared by its calls ---------------------------------

ITEM = 99  # bytes each item decodes, inflates or parses: two make the limit
ENCODERS = {
    "base64_decode": lambda: base64.b64encode(b"0" * ITEM).decode(),  # decodes to 99 bytes
    "base64_gzip_decode": lambda: base64.b64encode(gzip.compress(b"0" * ITEM)).decode(),  # inflates to 99
    "json_parse": lambda: json.dumps("0" * (ITEM - 2)),  # 99 characters, no '{', '[', ':' or ','
}


@pytest.mark.parametrize("function", sorted(ENCODERS))
def test_a_projections_calls_share_the_records_limit_and_each_record_has_its_own(function):
    # items[*].f(@) calls f once per item: the limit bounds them together, not each (which let one record decode
    # items x limit), and a record that spent the budget, or failed past it, leaves the next one its full budget.
    config = IdempotencyConfig(event_key_jmespath=f"items[*].{function}(@)", max_decoded_bytes=2 * ITEM)
    item = ENCODERS[function]()
    assert make_key({"messageId": "m-1", "items": [item, item]}, config) is not None  # the limit, exactly
    with pytest.raises(DecodeLimitError, match=rf"{function}\(\) \w+ at most {2 * ITEM} .* per record") as past:
        make_key({"messageId": "m-2", "items": [item, item, item]}, config)
    assert (past.value.function, past.value.limit) == (function, 2 * ITEM)
    assert "failed on record 'm-2'" in str(past.value)
    assert make_key({"messageId": "m-3", "items": [item, item]}, config) is not None


def test_records_keyed_in_threads_at_once_each_decode_up_to_the_limit(monkeypatch):
    # Two threads key a record each, both halfway through (one item of two inflated) before either goes on: a
    # budget shared between evaluations (or threads) would refuse one of them.
    config = IdempotencyConfig(event_key_jmespath="items[*].base64_gzip_decode(@)", max_decoded_bytes=2 * ITEM)
    halfway = threading.Barrier(2, timeout=30)
    inflated = threading.local()

    def inflate_then_meet(data: bytes, budget: Budget, function: str) -> bytes:
        out = inflate(data, budget, function)
        inflated.calls = getattr(inflated, "calls", 0) + 1
        if inflated.calls == 1:
            halfway.wait()
        return out

    monkeypatch.setattr(jmespath_module, "inflate", inflate_then_meet)
    item = ENCODERS["base64_gzip_decode"]()
    keys: dict[str, object] = {}

    def key(message_id: str) -> None:
        try:
            keys[message_id] = make_key({"messageId": message_id, "items": [item, item]}, config)
        except DecodeLimitError as e:
            keys[message_id] = e

    threads = [threading.Thread(target=key, args=(m,)) for m in ("m-1", "m-2")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not halfway.broken
    assert keys["m-1"] == keys["m-2"]
    assert isinstance(keys["m-1"], str)


def test_the_powertools_cutovers_projection_shares_the_records_limit(face):
    # The cut-over's functions are bounded as ours: its key expression's calls share one budget per record.
    read: list[object] = []
    cutover = cutover_reading_into(read, "powertools_json(body)[*].powertools_base64_gzip(@)")
    store = InMemoryPersistenceLayer()
    config = IdempotencyConfig(event_key_jmespath="messageId", powertools_cutover=cutover, max_decoded_bytes=2 * ITEM)
    item, ran = ENCODERS["base64_gzip_decode"](), []
    past = {"messageId": "m-1", "body": json.dumps([item] * 3)}
    with pytest.raises(DecodeLimitError, match="the Powertools cut-over's key of") as refused:
        face.guarded(past, lambda _: ran.append("m-1"), store=store, config=config)
    assert (refused.value.function, refused.value.limit) == ("powertools_base64_gzip", 2 * ITEM)
    assert f"inflates at most {2 * ITEM} bytes per record" in str(refused.value)
    assert (ran, read, list(store.scan())) == ([], [], [])  # unrun, our lock released
    for message_id in ("m-2", "m-3"):  # each its own full budget: the limit, exactly
        within = {"messageId": message_id, "body": json.dumps([item] * 2)}
        face.guarded(within, lambda _, m=message_id: ran.append(m), store=store, config=config)
    assert ran == ["m-2", "m-3"]
    assert len(read) == 2
