"""The ``agent-eval`` command: validate | schema | compare."""

from __future__ import annotations

import argparse
import json
import sys

from pytest_agent_eval.cases.schema import native_schema
from pytest_agent_eval.checks import builtin_registry


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="agent-eval", description="pytest-agent-eval tools")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("schema", help="print the JSON Schema of the native eval file format")
    args = parser.parse_args(argv)
    if args.command == "schema":
        print(json.dumps(native_schema(builtin_registry()), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
