"""A real MCP client (the official Python SDK, `mcp` on PyPI) talking to `keet mcp` over stdio.

Run by tests/integration/mcp_stdio.rs:

    python tests/mcp_client.py KEET_BINARY WORK_DIR

WORK_DIR holds the inputs the Rust test prepared (see mcp_stdio.rs): cut.ncu-rep (a report cut
off mid-write), before.csv/after.csv (a kernel and its fixed twin), garbage.ncu-rep, and the
server's cache. Each step's observations go into one JSON document printed as the last line of
stdout; the Rust test asserts on it. The script itself fails (exit 1) on anything the protocol
should not do (a crashed server, a call that hangs).
"""

import asyncio
import json
import os
import sys
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError


def text_of(result):
    return "".join(getattr(c, "text", "") for c in result.content)


async def call(session, name, arguments):
    """A tools/call: ("ok"|"tool_error", text, structured, seconds) or ("protocol_error", message, code, seconds)."""
    t0 = time.perf_counter()
    try:
        r = await session.call_tool(name, arguments, read_timeout_seconds=600)
    except MCPError as e:
        return {"kind": "protocol_error", "message": e.error.message, "code": e.error.code, "s": time.perf_counter() - t0}
    return {
        "kind": "tool_error" if r.is_error else "ok",
        "text": text_of(r),
        "structured": r.structured_content,
        "s": time.perf_counter() - t0,
    }


async def main(keet, work, corpus):
    out = {}
    server = StdioServerParameters(
        command=keet,
        args=["mcp", "--cache", os.path.join(work, "cache.sqlite3")],
        env={"KEET_MODEL": os.path.join(work, "no-such-model.gguf")},
    )
    with open(os.path.join(work, "server.stderr"), "w") as errlog:
        async with stdio_client(server, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                out["server"] = {"name": init.server_info.name, "version": init.server_info.version, "instructions": init.instructions}
                tools = (await session.list_tools()).tools
                out["tools"] = {
                    t.name: {"description": t.description, "input_schema": t.input_schema, "read_only": bool(t.annotations and t.annotations.read_only_hint)}
                    for t in tools
                }
                decode = os.path.join(corpus, "h200-moe", "decode_c1.ncu-rep")
                out["explain_no_llm"] = await call(session, "explain", {"paths": [decode], "no_llm": True})
                # The second time the rule layer's answers come from the cache.
                out["explain_no_llm_again"] = await call(session, "explain", {"paths": [decode], "no_llm": True})
                out["inspect_cut"] = await call(session, "inspect", {"path": os.path.join(work, "cut.ncu-rep")})
                out["inspect_page1"] = await call(session, "inspect", {"path": decode, "kernel": "0", "all_metrics": True, "metrics_limit": 50})
                out["inspect_page2"] = await call(session, "inspect", {"path": decode, "kernel": "0", "all_metrics": True, "metrics_limit": 50, "metrics_offset": 50})
                out["inspect_no_match"] = await call(session, "inspect", {"path": decode, "kernel": "no_kernel_has_this_name"})
                before, after = os.path.join(work, "before.csv"), os.path.join(work, "after.csv")
                out["compare_twin"] = await call(session, "compare", {"before": before, "after": after, "fail_on_regression": 5})
                out["compare_twin_reversed"] = await call(session, "compare", {"before": after, "after": before, "fail_on_regression": 5})
                out["what_to_collect"] = await call(
                    session, "what_to_collect", {"path": os.path.join(corpus, "rtx4090-lashi", "reduceInteger.csv"), "kernel": "reduceNeighbored(", "application": "./reduceInteger"}
                )
                # edit: a kernel the profile does not have is refused before any model loads.
                out["edit_no_match"] = await call(
                    session, "edit", {"path": os.path.join(corpus, "rtx4090-lashi", "smemSquare.ncu-rep"), "kernel": "no_kernel_has_this_name"}
                )
                out["history"] = await call(session, "history", {"limit": 5})
                ids = [a["id"] for a in (out["history"].get("structured") or {}).get("analyses", [])]
                out["show"] = await call(session, "show", {"id": ids[0]}) if ids else None
                out["show_unknown"] = await call(session, "show", {"id": 999999})
                # Bad input: each must leave the server serving the next request.
                out["unknown_tool"] = await call(session, "no_such_tool", {})
                out["wrong_type"] = await call(session, "explain", {"paths": [decode], "top": "ten", "no_llm": True})
                out["missing_argument"] = await call(session, "inspect", {})
                out["missing_path"] = await call(session, "inspect", {"path": os.path.join(work, "missing.ncu-rep")})
                out["bad_file"] = await call(session, "inspect", {"path": os.path.join(work, "garbage.ncu-rep")})
                out["missing_model"] = await call(session, "explain", {"paths": [decode]})
                out["still_serving"] = await call(session, "explain", {"paths": [decode], "no_llm": True, "top": 1})
    for v in out.values():
        if isinstance(v, dict) and isinstance(v.get("structured"), (dict, list)):
            v["structured_json_chars"] = len(json.dumps(v["structured"]))
    print(json.dumps(out))


if __name__ == "__main__":
    keet, work = sys.argv[1], sys.argv[2]
    corpus = sys.argv[3] if len(sys.argv) > 3 else os.path.join(os.path.dirname(__file__), "..", "..", "shared", "corpus")
    asyncio.run(asyncio.wait_for(main(keet, work, corpus), timeout=900))
