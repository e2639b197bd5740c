"""``strata mcp`` over stdio: every line the client sends gets an answer.

The MCP SDK reads stdin a line at a time and drops a line it cannot read as a
JSON-RPC message: one that is not JSON (a lone surrogate escape such as
``\\ud800`` is not, for its parser) or not JSON-RPC. Nothing is answered,
and a client waits for ever on that request. JSON-RPC 2.0 asks for an error
instead: -32700 (parse error) for text that does not parse, -32600 (invalid
request) for JSON that is no message.

:func:`serve` puts a filter in front of the SDK's stdio transport, using only
file descriptors and the SDK's public message validator: the client's lines
pass through a pipe to the SDK, a line the SDK would drop is answered here, and
the SDK's own answers come back through a second pipe, so a whole line is
written to the client at a time, whoever wrote it.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable

PARSE_ERROR, INVALID_REQUEST = -32700, -32600
_END = b"\x00strata-mcp-end\n"  # written after the SDK is done, so its last answer is sent


def refusal(line: bytes) -> bytes | None:
    """The JSON-RPC error answering ``line`` when the SDK cannot read it as a
    message (None when it can, or for a blank line, which is no message). The
    error carries the request's id when a lenient reading finds one, so the
    client can match it to the request it waits on; else null."""
    from mcp_types import jsonrpc_message_adapter
    from pydantic import ValidationError

    text = line.decode("utf-8", "replace")
    if not text.strip():
        return None
    try:
        jsonrpc_message_adapter.validate_json(text, by_name=False)
        return None
    except ValidationError as e:
        unparsed = any(err.get("type") == "json_invalid" for err in e.errors())
    except ValueError:
        unparsed = True
    try:
        found = json.loads(text)  # lenient: accepts lone surrogates, to find the id
        ident = found.get("id") if isinstance(found, dict) else None
    except ValueError:
        ident = None
    if isinstance(ident, bool) or not isinstance(ident, (str, int)):
        ident = None
    code, what = ((PARSE_ERROR, "Parse error: the line is not JSON text the server can read "
                                "(invalid JSON, or a lone UTF-16 surrogate escape)")
                  if unparsed else
                  (INVALID_REQUEST, "Invalid Request: the line is JSON but not a JSON-RPC 2.0 "
                                    "message"))
    return (json.dumps({"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": what}},
                       ensure_ascii=True) + "\n").encode("ascii")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def serve(run: Callable[[], None]) -> None:
    """Run ``run`` (the SDK's stdio server, which reads fd 0 and writes fd 1)
    with the client's lines filtered (:func:`refusal`) on their way in and its
    answers passed on whole on their way out."""
    client_in, client_out = os.dup(0), os.dup(1)
    sdk_in, feed = os.pipe()
    answers, sdk_out = os.pipe()
    os.dup2(sdk_in, 0)
    os.dup2(sdk_out, 1)
    os.close(sdk_in)
    os.close(sdk_out)
    lock = threading.Lock()

    def send(line: bytes) -> None:
        with lock:
            try:
                _write_all(client_out, line)
            except OSError:  # the client went away: nothing to tell it
                pass

    def pump_in() -> None:
        with os.fdopen(client_in, "rb") as source, os.fdopen(feed, "wb") as sink:
            for line in source:
                answer = refusal(line)
                if answer is not None:
                    send(answer)
                    continue
                try:
                    sink.write(line)
                    sink.flush()
                except OSError:  # the SDK stopped reading
                    return

    def pump_out() -> None:
        with os.fdopen(answers, "rb") as source:
            for line in source:
                if line == _END:
                    return
                send(line)

    reader = threading.Thread(target=pump_in, name="strata-mcp-stdin", daemon=True)
    writer = threading.Thread(target=pump_out, name="strata-mcp-stdout", daemon=True)
    reader.start()
    writer.start()
    try:
        run()
    finally:
        # the SDK has flushed its answers and pointed fd 1 back at the pipe: the
        # marker after them lets the writer pass them all on before the process ends
        try:
            _write_all(1, _END)
        except OSError:
            pass
        writer.join(timeout=10)
        os.dup2(client_out, 1)
