"""What `eor serve` does: the HTTP API and the explorer page, with the settings its options give."""

from __future__ import annotations

import argparse
from pathlib import Path

from eor.cli.options import cache_setting, config_path
from eor.server.serving import serve
from eor.server.settings import ServerSettings, api_key_from_env


def cmd_serve(args: argparse.Namespace) -> int:
    settings = ServerSettings(
        host=args.host,
        port=args.port,
        api_key=api_key_from_env(args.api_key_env) if args.api_key_env else None,
        member_timeout=args.member_timeout or None,
        lazy=not args.all_members,
        request_timeout=args.request_timeout,
        max_batch=args.max_batch,
        max_body_bytes=args.max_body_bytes,
        max_queue=args.max_queue,
        shutdown_grace=args.shutdown_grace,
        reports=Path(args.reports) if args.reports else None,
        allow_unauthenticated=args.allow_unauthenticated,
    )
    serve(
        config_path(args.config),
        weights=args.weights,
        settings=settings,
        log_level=args.log_level,
        cache=cache_setting(args),
    )
    return 0
