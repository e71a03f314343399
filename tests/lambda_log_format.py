"""The two ways the Lambda Python runtime writes a ``logging`` record, rebuilt for tests from its behaviour.

With ``AWS_LAMBDA_LOG_FORMAT=JSON`` the runtime (``awslambdaric``'s ``JsonFormatter``) writes one JSON object per
record: ``timestamp``, ``level``, ``message`` (``getMessage()``), ``logger``, and for a record with ``exc_info``
``stackTrace`` (``traceback.format_tb``), ``errorType`` (the class name), ``errorMessage`` (``str``) and
``location``; ``requestId`` comes from the ``aws_request_id`` its logging filter sets on every record. Then every
other attribute of the record that is not one of ``LogRecord``'s own (so every ``extra`` field) is added at the top
level, unless that name is taken already, and members whose value is ``None`` are dropped. Without the variable
(text format), the runtime writes ``[LEVEL]\\tTIMESTAMP\\tREQUEST_ID\\tMESSAGE`` with the traceback after it.
"""

from __future__ import annotations

import json
import logging
import time
import traceback
from datetime import datetime, timezone

# LogRecord's own attributes and the runtime's: everything else on a record is an ``extra`` field.
RUNTIME_FIELDS = frozenset(
    {
        "name",
        "msg",
        "args",
        "levelname",
        "levelno",
        "pathname",
        "filename",
        "module",
        "exc_info",
        "exc_text",
        "stack_info",
        "lineno",
        "funcName",
        "created",
        "msecs",
        "relativeCreated",
        "thread",
        "threadName",
        "processName",
        "process",
        "aws_request_id",
        "tenant_id",
        "_frame_type",
    }
)
TEXT_FORMAT = "[%(levelname)s]\t%(asctime)s.%(msecs)03dZ\t%(aws_request_id)s\t%(message)s"


class RequestIdFilter(logging.Filter):
    """What the runtime's filter does: every record carries the invocation's request id."""

    def __init__(self, request_id: str) -> None:
        super().__init__()
        self.request_id = request_id

    def filter(self, record: logging.LogRecord) -> bool:
        record.aws_request_id = self.request_id
        return True


class LambdaJsonFormatter(logging.Formatter):
    """One JSON object per record, as the runtime writes it under ``AWS_LAMBDA_LOG_FORMAT=JSON``."""

    def format(self, record: logging.LogRecord) -> str:
        exc = record.exc_info
        created = datetime.fromtimestamp(record.created, tz=timezone.utc)
        document = {
            "timestamp": created.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z",
            "level": record.levelname,
            "message": record.getMessage(),
            "logger": record.name,
            "stackTrace": traceback.format_tb(exc[2]) if exc else None,
            "errorType": exc[0].__name__ if exc else None,
            "errorMessage": str(exc[1]) if exc else None,
            "requestId": getattr(record, "aws_request_id", None),
            "location": f"{record.pathname}:{record.funcName}:{record.lineno}" if exc else None,
        }
        for name, value in record.__dict__.items():
            if name not in RUNTIME_FIELDS and name not in document:
                document[name] = value
        return json.dumps({k: v for k, v in document.items() if v is not None}, ensure_ascii=False)


def lambda_text_formatter() -> logging.Formatter:
    """The runtime's text format (timestamps in UTC)."""
    formatter = logging.Formatter(TEXT_FORMAT, "%Y-%m-%dT%H:%M:%S")
    formatter.converter = time.gmtime
    return formatter
