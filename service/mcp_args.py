"""The ``strata mcp`` command's arguments and defaults, apart from the server.

Every ``strata`` command builds the whole parser, ``mcp``'s arguments included,
while the server module imports the MCP tools and their pydantic models: a
``strata search`` paid for that import before its first answer. So what the
parser needs lives here, with nothing heavier than the settings."""

import argparse

from strata.core.config.settings import ServeSettings, default

DEFAULT_PORT = 8002
DEFAULT_BUDGET_TOKENS = 2000  # what one search costs an agent unless it asks for more


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--index", action="append", required=True,
                   help="index folder or object-storage URI, or NAME=LOCATION (repeatable)")
    p.add_argument("--budget-tokens", type=int, default=DEFAULT_BUDGET_TOKENS,
                   help=f"default size of a search answer in estimated tokens "
                        f"(default {DEFAULT_BUDGET_TOKENS}; a call may ask for another)")
    p.add_argument("--reload-interval", type=float, default=5.0,
                   help="seconds between looks for a newly published version (default 5)")
    h = p.add_argument_group("streamable HTTP instead of stdio")
    h.add_argument("--http", action="store_true",
                   help="serve the streamable HTTP transport on http://HOST:PORT/mcp")
    h.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1; others need API keys)")
    h.add_argument("--port", type=int, default=DEFAULT_PORT)
    h.add_argument("--api-keys", default=None,
                   help="file of hashed API keys (`strata keys new`; default "
                        "$STRATA_API_KEYS_FILE, or $STRATA_API_KEY_HASHES)")
    h.add_argument("--rate-per-minute", type=float, default=None,
                   help="requests per minute per key, unless its entry sets one (default "
                        f"$STRATA_RATE_PER_MINUTE, else {default(ServeSettings, 'rate_per_minute'):g})")
    h.add_argument("--allow-unauthenticated", action="store_true",
                   help="listen on a non-loopback address without API keys")
    p.add_argument("--log-level", default="warning",
                   choices=["debug", "info", "warning", "error"])
