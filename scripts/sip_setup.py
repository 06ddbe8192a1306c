"""Creates what LiveKit needs to route phone calls to Parley: an inbound SIP trunk and a dispatch rule.

    python scripts/sip_setup.py --number +15550100 [--allowed-address 10.0.0.0/8] [--agent-name parley]

Each call gets its own room (`<prefix><random>`) with the agent dispatched into it. Idempotent: a trunk or
rule with the same name is reused, so running it twice changes nothing. LiveKit URL and keys come from
Parley's settings (LIVEKIT_URL, LIVEKIT_API_KEY, LIVEKIT_API_SECRET) unless given as flags.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from livekit import api

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


@dataclass(frozen=True)
class SipRouteOptions:
    numbers: list[str]
    agent_name: str = "parley"
    trunk_name: str = "parley-inbound"
    rule_name: str = "parley-dispatch"
    room_prefix: str = "call-"
    allowed_addresses: list[str] = field(default_factory=list)  # empty = any source address
    krisp: bool = False


@dataclass(frozen=True)
class SipRoute:
    trunk_id: str
    rule_id: str
    created: bool


async def ensure_sip_route(lkapi: api.LiveKitAPI, opts: SipRouteOptions) -> SipRoute:
    """Find or create the inbound trunk and the dispatch rule that sends its calls to the agent."""
    created = False
    trunks = await lkapi.sip.list_inbound_trunk(api.ListSIPInboundTrunkRequest())
    trunk = next((t for t in trunks.items if t.name == opts.trunk_name), None)
    if trunk is None:
        trunk = await lkapi.sip.create_inbound_trunk(
            api.CreateSIPInboundTrunkRequest(
                trunk=api.SIPInboundTrunkInfo(
                    name=opts.trunk_name,
                    numbers=opts.numbers,
                    allowed_addresses=opts.allowed_addresses,
                    krisp_enabled=opts.krisp,
                )
            )
        )
        created = True
    rules = await lkapi.sip.list_dispatch_rule(api.ListSIPDispatchRuleRequest())
    rule = next((r for r in rules.items if r.name == opts.rule_name), None)
    if rule is None:
        rule = await lkapi.sip.create_dispatch_rule(
            api.CreateSIPDispatchRuleRequest(
                name=opts.rule_name,
                trunk_ids=[trunk.sip_trunk_id],
                rule=api.SIPDispatchRule(
                    dispatch_rule_individual=api.SIPDispatchRuleIndividual(room_prefix=opts.room_prefix)
                ),
                room_config=api.RoomConfiguration(agents=[api.RoomAgentDispatch(agent_name=opts.agent_name)]),
            )
        )
        created = True
    return SipRoute(trunk_id=trunk.sip_trunk_id, rule_id=rule.sip_dispatch_rule_id, created=created)


def _http_url(url: str) -> str:
    return url.replace("ws://", "http://", 1).replace("wss://", "https://", 1)


async def _run(args: argparse.Namespace) -> SipRoute:
    opts = SipRouteOptions(
        numbers=args.number,
        agent_name=args.agent_name,
        room_prefix=args.room_prefix,
        allowed_addresses=args.allowed_address,
    )
    async with api.LiveKitAPI(_http_url(args.url), args.api_key, args.api_secret) as lkapi:
        return await ensure_sip_route(lkapi, opts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/sip_setup.py", description=__doc__.splitlines()[0])
    parser.add_argument("--number", action="append", required=True, help="a number the trunk answers")
    parser.add_argument("--allowed-address", action="append", default=[], help="CIDR allowed to call in")
    parser.add_argument("--agent-name", default=None)
    parser.add_argument("--room-prefix", default="call-")
    parser.add_argument("--url", default=None)
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--api-secret", default=None)
    args = parser.parse_args(argv)
    if args.url is None or args.api_key is None or args.api_secret is None or args.agent_name is None:
        from worker.settings import load_settings

        s = load_settings()
        args.url = args.url or s.livekit_url
        args.api_key = args.api_key or s.livekit_api_key
        args.api_secret = args.api_secret or s.livekit_api_secret.get_secret_value()
        args.agent_name = args.agent_name or s.agent_name
    try:
        route = asyncio.run(_run(args))
    except api.TwirpError as err:
        print(f"sip_setup: LiveKit refused: {err.message}", file=sys.stderr)
        return 1
    except OSError as err:
        print(f"sip_setup: cannot reach LiveKit at {args.url}: {err}", file=sys.stderr)
        return 1
    print(json.dumps({"trunk_id": route.trunk_id, "rule_id": route.rule_id, "created": route.created}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
