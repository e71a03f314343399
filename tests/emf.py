"""A validator for CloudWatch Embedded Metric Format documents, written from the specification's rules.

Specification: https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html
Each check names the rule it enforces. The JSON Schema the specification publishes covers the shapes only; the
rules that matter most here (every reference resolves to a top-level member of the right type) are not expressible
in it, so every rule is checked by hand and no schema library is needed.
"""

from __future__ import annotations

import json
import math
from typing import Any

#: The units a MetricDefinition may name (CloudWatch's MetricDatum units).
UNITS = frozenset(
    {
        "Seconds",
        "Microseconds",
        "Milliseconds",
        "Bytes",
        "Kilobytes",
        "Megabytes",
        "Gigabytes",
        "Terabytes",
        "Bits",
        "Kilobits",
        "Megabits",
        "Gigabits",
        "Terabits",
        "Percent",
        "Count",
        "Bytes/Second",
        "Kilobytes/Second",
        "Megabytes/Second",
        "Gigabytes/Second",
        "Terabytes/Second",
        "Bits/Second",
        "Kilobits/Second",
        "Megabits/Second",
        "Gigabits/Second",
        "Terabits/Second",
        "Count/Second",
        "None",
    }
)
MAX_DIMENSIONS_PER_SET = 30  # the current specification (it once said 9)
MAX_METRICS_PER_DIRECTIVE = 100
MAX_VALUES_PER_METRIC = 100
MAX_NAME_LENGTH = 255  # Namespace, dimension and metric names (the specification's schema)
MAX_DIMENSION_VALUE_LENGTH = 1024  # CloudWatch API reference, Dimension: Value
MAX_BYTES = 256 * 1024  # a CloudWatch Logs event


class EMFError(AssertionError):
    """A document breaks a rule of the specification."""


def _require(condition: bool, rule: str) -> None:
    if not condition:
        raise EMFError(rule)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _is_name(value: Any) -> bool:
    return isinstance(value, str) and 1 <= len(value) <= MAX_NAME_LENGTH


def validate_line(line: str) -> dict[str, Any]:
    """Validate one log event's text: one JSON object and nothing before or after it. Returns the document."""
    _require(len(line.encode()) <= MAX_BYTES, "a document is a CloudWatch Logs event: at most 256 KB")
    try:
        document = json.loads(line)
    except json.JSONDecodeError as e:
        raise EMFError(f"the LogEvent message MUST be a valid JSON object with no additional data: {e}") from e
    validate(document)
    return document


def validate(document: Any) -> None:
    """Raise :class:`EMFError` unless ``document`` follows every rule of the specification."""
    _require(isinstance(document, dict), "root node: the LogEvent message MUST be a JSON object")
    metadata = document.get("_aws")
    _require(isinstance(metadata, dict), "root node: MUST contain the _aws member, an object (metadata)")
    timestamp = metadata.get("Timestamp")
    _require(
        isinstance(timestamp, int) and not isinstance(timestamp, bool) and timestamp > 0,
        "metadata: Timestamp MUST be a number of milliseconds after the epoch (an integer in the schema)",
    )
    directives = metadata.get("CloudWatchMetrics")
    _require(isinstance(directives, list), "metadata: CloudWatchMetrics MUST be an array of MetricDirective objects")
    for directive in directives:
        _require(isinstance(directive, dict), "CloudWatchMetrics: each element MUST be a MetricDirective object")
        for member in ("Namespace", "Dimensions", "Metrics"):
            _require(member in directive, f"MetricDirective: MUST contain {member}")
        namespace = directive["Namespace"]
        _require(_is_name(namespace), "MetricDirective: Namespace MUST be a string of 1-255 characters")
        _require(  # CloudWatch's Namespace type; a document breaking it is dropped without an error
            not namespace.isspace() and not namespace.startswith(":"),
            "Namespace: matches [^:].* and has at least one non-whitespace character",
        )
        dimension_sets = directive["Dimensions"]
        _require(
            isinstance(dimension_sets, list) and len(dimension_sets) >= 1,
            "MetricDirective: Dimensions MUST be an array of DimensionSets (at least one in the schema)",
        )
        for dimension_set in dimension_sets:
            _require(isinstance(dimension_set, list), "DimensionSet: MUST be an array of strings")
            _require(
                len(dimension_set) <= MAX_DIMENSIONS_PER_SET,
                f"DimensionSet: MUST NOT contain more than {MAX_DIMENSIONS_PER_SET} dimension keys",
            )
            for name in dimension_set:
                _require(_is_name(name), "DimensionSet: each dimension key MUST be a string of 1-255 characters")
                _require(name in document, f"target members: dimension {name!r} MUST be a member of the root node")
                _require(
                    isinstance(document[name], str), f"target members: dimension {name!r} MUST have a string value"
                )
                value = document[name]
                _require(  # CloudWatch's Dimension type; a document breaking it is dropped without an error
                    0 < len(value) <= MAX_DIMENSION_VALUE_LENGTH
                    and value.isascii()
                    and value.isprintable()
                    and not value.isspace(),
                    f"Dimension value of {name!r}: 1-1024 ASCII characters, no control characters, not only whitespace",
                )
        metrics = directive["Metrics"]
        _require(isinstance(metrics, list), "MetricDirective: Metrics MUST be an array of MetricDefinition objects")
        _require(
            len(metrics) <= MAX_METRICS_PER_DIRECTIVE,
            f"MetricDirective: Metrics MUST NOT contain more than {MAX_METRICS_PER_DIRECTIVE} MetricDefinitions",
        )
        for metric in metrics:
            _require(isinstance(metric, dict), "MetricDefinition: MUST be an object")
            name = metric.get("Name")
            _require(_is_name(name), "MetricDefinition: MUST contain Name, a string of 1-255 characters")
            if "Unit" in metric:
                _require(metric["Unit"] in UNITS, f"MetricDefinition: Unit {metric['Unit']!r} is not a CloudWatch unit")
            _require(name in document, f"target members: metric {name!r} MUST be a member of the root node")
            value = document[name]
            if isinstance(value, list):
                _require(
                    0 < len(value) <= MAX_VALUES_PER_METRIC and all(_is_number(v) for v in value),
                    f"target members: metric {name!r} MUST be numeric values, at most {MAX_VALUES_PER_METRIC}",
                )
            else:
                _require(_is_number(value), f"target members: metric {name!r} MUST have a numeric value")
