"""The trainer protocol's Python side, shared by tuneline's engine programs.

The protocol is defined once, in Rust (tuneline-train's `protocol.rs`): each
request is one JSON line on stdin, each answer one JSON line on stdout. The
field list those types generate lies beside this module
(`tuneline_protocol.json`); every request is checked against it, and an
unknown or a missing field is refused by name, so tuneline and a program
that disagree fail at the first request instead of training on a default.

Importing this module moves `print` to stderr: stdout carries answers only.

Run as a program (`python tuneline_protocol.py`), it checks each line of its
stdin and prints `ok` or the refusal: the agreement test's entry.
"""

import json
import os
import sys
import threading

PROTOCOL = sys.stdout
sys.stdout = sys.stderr

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "tuneline_protocol.json")) as f:
    FIELDS = json.load(f)

_ANSWERING = threading.Lock()


class ProtocolError(ValueError):
    """A request that does not fit the protocol's field list; `op` is the request's."""

    def __init__(self, message, op=None):
        super().__init__(message)
        self.op = op


def _check(value, fields, where):
    if isinstance(value, list):
        for i, item in enumerate(value):
            _check(item, fields, f"{where}[{i}]")
        return
    if value is None:
        return
    if not isinstance(value, dict):
        raise ProtocolError(f"`{where}` should be an object, not {json.dumps(value)[:40]}")
    if unknown := sorted(set(value) - set(fields)):
        raise ProtocolError(f"`{where}` has fields the protocol does not: {unknown}")
    if missing := sorted(name for name, field in fields.items() if field["required"] and name not in value):
        raise ProtocolError(f"`{where}` lacks the fields {missing}")
    for name, field in fields.items():
        if "fields" in field and name in value:
            _check(value[name], field["fields"], f"{where}.{name}")


def read(line):
    """The request on `line`, checked against the field list: ProtocolError
    names the field that is unknown or missing."""
    try:
        request = json.loads(line)
    except ValueError as e:
        raise ProtocolError(f"a request that is not JSON: {e}") from None
    op = request.pop("op", None) if isinstance(request, dict) else None
    if op not in FIELDS:
        raise ProtocolError(f"no request `{op}`; the protocol has {sorted(FIELDS)}", op)
    try:
        _check(request, FIELDS[op]["request"], op)
    except ProtocolError as e:
        raise ProtocolError(f"tuneline and its engine program disagree on the protocol: {e}", op) from None
    request["op"] = op
    return request


def answer(op, value):
    """Writes the answer `value` ({"ok": ...} or {"error": ..., "kind": ...}) to request `op`."""
    with _ANSWERING:
        PROTOCOL.write(json.dumps({**value, "op": op}) + "\n")
        PROTOCOL.flush()


if __name__ == "__main__":
    for line in sys.stdin:
        try:
            read(line)
            PROTOCOL.write("ok\n")
        except ProtocolError as e:
            PROTOCOL.write(f"{e}\n")
    PROTOCOL.flush()
