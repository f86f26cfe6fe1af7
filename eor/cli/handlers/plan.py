"""What `eor plan` does: the reader time of a benchmark, estimated from a pilot run."""

from __future__ import annotations

import argparse
import json

from eor.commands.plan_command import Pilot, describe, estimate


def cmd_plan(args: argparse.Namespace) -> int:
    result = estimate(
        Pilot.from_run(args.pilot),
        args.questions,
        replicas=args.replicas,
        prompt_rate=args.prompt_rate,
        generation_rate=args.generation_rate,
    )
    print(json.dumps(result, indent=2) if args.json else describe(result))
    return 0
